/**
 * Reading a header from any of the shapes apps hold them in: a Fetch `Headers`, Node's
 * `IncomingHttpHeaders` (lower-case keys, `string[]` for repeats), a plain object of any case,
 * or an iterable of `[name, value]` pairs (a `Map`, `Object.entries(...)`, raw header pairs).
 */

/**
 * Request headers in any common shape.
 *
 * @example
 * ```ts
 * import type { HeadersInput } from 'webhook-receiver';
 * const a: HeadersInput = new Headers({ 'webhook-id': 'msg_1' });
 * const b: HeadersInput = { 'Webhook-Id': 'msg_1' };
 * const c: HeadersInput = [['webhook-id', 'msg_1']];
 * ```
 */
export type HeadersInput = Headers | Record<string, string | string[] | undefined> | Iterable<[string, string]>;

/** Every value of header `name` (lower case), or `undefined` when it is absent. */
export function headerValues(headers: HeadersInput, name: string): string | string[] | undefined {
  if (typeof (headers as Headers).get === 'function' && typeof (headers as Headers).append === 'function') {
    const value = (headers as Headers).get(name);
    return value === null ? undefined : value;
  }
  if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    let found: string[] | undefined;
    for (const pair of headers as Iterable<[string, string]>) {
      if (!Array.isArray(pair) || typeof pair[0] !== 'string') continue;
      if (pair[0].length === name.length && pair[0].toLowerCase() === name) (found ??= []).push(String(pair[1]));
    }
    return found === undefined ? undefined : found.length === 1 ? found[0] : found;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  // Every spelling counts, also when the lower-case one is present: a hand-built object holding
  // 'webhook-id' and 'Webhook-Id' must be refused when they differ (as a string[] is), and all of
  // its signature entries tried, not one spelling picked by key order.
  let first: string | string[] | undefined;
  let all: string[] | undefined;
  for (const key of Object.keys(record)) {
    if (key.length !== name.length || (key !== name && key.toLowerCase() !== name)) continue;
    const value = record[key];
    if (value === undefined) continue;
    if (first === undefined) first = value;
    else (all ??= Array.isArray(first) ? [...first] : [first]).push(...(Array.isArray(value) ? value : [value]));
  }
  return all ?? first;
}

/** The `webhook-*` header, or its `svix-*` alias where the `webhook-*` one is absent. */
export function webhookHeader(headers: HeadersInput, suffix: 'id' | 'timestamp' | 'signature'): string | string[] | undefined {
  return headerValues(headers, `webhook-${suffix}`) ?? headerValues(headers, `svix-${suffix}`);
}

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
  let found: string | string[] | undefined;
  for (const key of Object.keys(record)) {
    if (key.length !== name.length || (key !== name && key.toLowerCase() !== name)) continue;
    const value = record[key];
    if (value !== undefined) found = merged(found, value);
  }
  return found;
}

/** `value` added to what was found under another spelling of the same name. */
function merged(found: string | string[] | undefined, value: string | string[]): string | string[] {
  if (found === undefined) return value;
  return [...(Array.isArray(found) ? found : [found]), ...(Array.isArray(value) ? value : [value])];
}

/** The `webhook-*` header, or its `svix-*` alias where the `webhook-*` one is absent. */
export function webhookHeader(headers: HeadersInput, suffix: 'id' | 'timestamp' | 'signature'): string | string[] | undefined {
  return headerValues(headers, `webhook-${suffix}`) ?? headerValues(headers, `svix-${suffix}`);
}

/**
 * The three webhook headers, each the `webhook-*` value or else the `svix-*` one.
 *
 * @example
 * ```ts
 * const { id, timestamp, signature } = webhookHeaders(req.headers);
 * ```
 */
export interface WebhookHeaderValues {
  id: string | string[] | undefined;
  timestamp: string | string[] | undefined;
  signature: string | string[] | undefined;
}

/**
 * All three webhook headers at once, by the rules of {@link webhookHeader}. A plain object (Node's
 * `req.headers`, the verifier's usual input) is walked once for all six names, where three
 * `webhookHeader` calls would walk it three to six times: on every request, that shows.
 */
export function webhookHeaders(headers: HeadersInput): WebhookHeaderValues {
  if (typeof (headers as Headers).get === 'function' || typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    return { id: webhookHeader(headers, 'id'), timestamp: webhookHeader(headers, 'timestamp'), signature: webhookHeader(headers, 'signature') };
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let id: string | string[] | undefined;
  let timestamp: string | string[] | undefined;
  let signature: string | string[] | undefined;
  let svixId: string | string[] | undefined;
  let svixTimestamp: string | string[] | undefined;
  let svixSignature: string | string[] | undefined;
  for (const key of Object.keys(record)) {
    // Only names of these lengths can match: most keys are passed over without lower-casing.
    const length = key.length;
    if (length !== 10 && length !== 17 && length !== 7 && length !== 14) continue;
    const value = record[key];
    if (value === undefined) continue;
    const name = key.toLowerCase();
    if (name === 'webhook-id') id = merged(id, value);
    else if (name === 'webhook-timestamp') timestamp = merged(timestamp, value);
    else if (name === 'webhook-signature') signature = merged(signature, value);
    else if (name === 'svix-id') svixId = merged(svixId, value);
    else if (name === 'svix-timestamp') svixTimestamp = merged(svixTimestamp, value);
    else if (name === 'svix-signature') svixSignature = merged(svixSignature, value);
  }
  return { id: id ?? svixId, timestamp: timestamp ?? svixTimestamp, signature: signature ?? svixSignature };
}

/**
 * The first `webhook-id` the request claimed (or `svix-id`, where it has no `webhook-id`), as sent,
 * for reports about a request that may have been refused: rejection contexts, logs, telemetry.
 * Unverified: do not trust it. Never throws: headers that cannot be read (not an object, a getter
 * that throws) claim nothing, and give `undefined`.
 *
 * @example
 * ```ts
 * claimedWebhookId({ 'webhook-id': ['msg_1', 'msg_2'] }); // 'msg_1'
 * claimedWebhookId(new Headers({ 'svix-id': 'msg_3' })); // 'msg_3'
 * claimedWebhookId({}); // undefined
 * ```
 */
export function claimedWebhookId(headers: HeadersInput): string | undefined {
  try {
    const id = webhookHeader(headers, 'id');
    const first: unknown = Array.isArray(id) ? id[0] : id;
    // As the verifier reads it: a hand-built object may hold a number.
    return first === undefined || first === null ? undefined : String(first);
  } catch {
    return undefined;
  }
}

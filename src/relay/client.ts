/**
 * `relayClient`: what a destination does with the relay's API, one method per operation it uses.
 * The API key is checked once, kept in a closure and sent only in the `authorization` header: no
 * property, error, `util.inspect` or `JSON.stringify` of the client shows it.
 */

import { base64Decode } from '../lib/encoding.ts';
import { isJsonObject as isObject } from '../lib/checks.ts';
import { RelayError } from './errors.ts';
import { relayId } from './ids.ts';
import { parameterFor, resolveQuery, type QueryOperation, type QueryRole, type RelayQueryNames, type ResolvedQuery } from './openapi.ts';
import { createTransport, type Call, type RelayFetch } from './transport.ts';
import { DELIVERY_STATUSES, type DeliveryStatus, type RelayDelivery, type RelayDestination, type RelayEvent, type RelayIdentity, type RelayPayload, type RelaySigningSecret, type TriggerBatch, type TriggerEvent } from './types.ts';

/**
 * Options of {@link relayClient}.
 *
 * @example
 * ```ts
 * import { relayClient, type RelayClientOptions } from 'webhook-receiver/relay';
 * const options: RelayClientOptions = { baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY!, timeoutMs: 5_000, retryBudgetMs: 10_000 };
 * const relay = relayClient(options);
 * ```
 */
export interface RelayClientOptions {
  /**
   * The relay's base URL, without `/v1` (every path is under `/v1`). `https`, or `http` on a
   * loopback host (`localhost`, `127.0.0.0/8`, `[::1]`) for local development.
   */
  baseUrl: string;
  /** The API key, `whk_…`. Keep it server-side: read it from the environment or a secret store. */
  apiKey: string;
  /** The `fetch` to call (a proxy's, a test's). Default: the global `fetch`. */
  fetch?: RelayFetch;
  /** Milliseconds one attempt may take, answer body included. Default 10 000. */
  timeoutMs?: number;
  /**
   * Milliseconds a call may spend waiting to try again: a 429's `Retry-After` is waited for only
   * while it fits (a soft cap may ask for hours; the call then fails at once with `retryAfter`
   * set), and so is the backoff after a network failure or a 5xx on a read. Default 30 000; 0
   * never retries.
   */
  retryBudgetMs?: number;
  /** Wire names of query parameters, where the relay's OpenAPI description should not decide. */
  queryNames?: RelayQueryNames;
}

/**
 * Filters of {@link RelayClient.deliveries}; each one optional.
 *
 * @example
 * ```ts
 * import type { DeliveriesFilter } from 'webhook-receiver/relay';
 * const filter: DeliveriesFilter = { destinationId: '0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80', statuses: ['dead', 'failed'] };
 * ```
 */
export interface DeliveriesFilter {
  destinationId?: string;
  subscriptionId?: string;
  /** Deliveries in any of these statuses. Empty or absent: every status. */
  statuses?: readonly DeliveryStatus[];
  /** Page size, 1 to 200 (the relay's default is 50). */
  limit?: number;
  signal?: AbortSignal;
}

/**
 * Options of {@link RelayClient.waitTrigger}.
 *
 * @example
 * ```ts
 * import type { WaitTriggerOptions } from 'webhook-receiver/relay';
 * const options: WaitTriggerOptions = { cursor: saved ?? undefined, limit: 100, inlineBodies: true, maxInlineBytes: 65_536 };
 * ```
 */
export interface WaitTriggerOptions {
  /** Where to resume: a `nextCursor` from an earlier answer. Absent: the trigger's start. */
  cursor?: string;
  /** Events per answer, 1 to 200. */
  limit?: number;
  /** Attach each event's body, up to `maxInlineBytes` (the relay's default is true). */
  inlineBodies?: boolean;
  /** The per-event inline body cap in bytes, 1 to 65 536. */
  maxInlineBytes?: number;
  signal?: AbortSignal;
}

/**
 * Options of a single call.
 *
 * @example
 * ```ts
 * import type { RelayCallOptions } from 'webhook-receiver/relay';
 * const options: RelayCallOptions = { signal: AbortSignal.timeout(2_000) };
 * ```
 */
export interface RelayCallOptions {
  signal?: AbortSignal;
}

/**
 * A client of the relay's API for one key. Every method checks its ids before sending anything
 * and fails with a {@link RelayError}.
 *
 * @example
 * ```ts
 * import { relayClient, type RelayClient } from 'webhook-receiver/relay';
 * const relay: RelayClient = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * console.log((await relay.whoami()).scopes);
 * ```
 */
export interface RelayClient {
  /** The base URL the client talks to. */
  readonly baseUrl: string;
  /** The key's organisation and scopes (`GET /v1/whoami`). */
  whoami(options?: RelayCallOptions): Promise<RelayIdentity>;
  /** A captured event in full, headers included (`GET /v1/events/{eventId}`). */
  event(eventId: string, options?: RelayCallOptions): Promise<RelayEvent>;
  /**
   * An event's exact raw body (`GET /v1/events/{id}/payload`), its decoded length checked
   * against the `bytes` the relay declares (`PAYLOAD_LENGTH_MISMATCH` otherwise).
   */
  payload(eventId: string, options?: RelayCallOptions): Promise<RelayPayload>;
  /**
   * Outbound deliveries (`GET /v1/deliveries`), in the relay's order, page after page: the
   * iteration follows `nextCursor` until the relay says there is no more.
   */
  deliveries(filter?: DeliveriesFilter): AsyncIterable<RelayDelivery>;
  /** The organisation's replay destinations (`GET /v1/replay-destinations`). */
  replayDestinations(options?: RelayCallOptions): Promise<RelayDestination[]>;
  /**
   * Issues a new signing secret for a destination
   * (`POST /v1/replay-destinations/{destinationId}/signing-secret`) and returns it: the only time
   * the relay shows it. Never sent twice by the client: a rotation whose answer was lost may still
   * have happened (the error says so); rotate again to get a secret you hold.
   */
  rotateSigningSecret(destinationId: string, options?: RelayCallOptions): Promise<RelaySigningSecret>;
  /**
   * The next events of a trigger, by short polling (`GET /v1/triggers/{triggerId}/wait`).
   */
  waitTrigger(triggerId: string, options?: WaitTriggerOptions): Promise<TriggerBatch>;
}

const DELIVERIES: QueryOperation = {
  key: 'deliveries',
  method: 'get',
  path: '/v1/deliveries',
  label: 'GET /v1/deliveries',
  roles: ['cursor', 'limit', 'destination', 'subscription', 'status'],
};

const WAIT_TRIGGER: QueryOperation = {
  key: 'waitTrigger',
  method: 'get',
  path: '/v1/triggers/{triggerId}/wait',
  label: 'GET /v1/triggers/{triggerId}/wait',
  roles: ['cursor', 'limit', 'inlineBodies', 'maxInlineBytes'],
};

const LOOPBACK_HOST = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

function checkBaseUrl(value: unknown): string {
  if (typeof value !== 'string') throw new TypeError(`relayClient: baseUrl must be a string URL; got ${typeof value}`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(`relayClient: baseUrl is not a URL: ${JSON.stringify(value.slice(0, 200))}`);
  }
  if (url.username !== '' || url.password !== '') throw new TypeError('relayClient: baseUrl must not carry credentials: the API key goes in apiKey');
  if (url.search !== '' || url.hash !== '') throw new TypeError('relayClient: baseUrl must not have a query or a fragment');
  if (url.protocol === 'http:' && !LOOPBACK_HOST.test(url.hostname)) {
    throw new TypeError(`relayClient: baseUrl must be https (plain http only on a loopback host, for local development); got ${url.origin}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError(`relayClient: baseUrl must be https; got ${url.protocol}`);
  const base = `${url.origin}${url.pathname}`.replace(/\/+$/, '');
  if (/\/v1$/.test(base)) throw new TypeError('relayClient: give baseUrl without /v1: every path the client calls is under /v1 already');
  return base;
}

function checkApiKey(value: unknown): string {
  // Never quote the value: it may be a real key with a typo, or another secret pasted by mistake.
  if (typeof value !== 'string') throw new TypeError(`relayClient: apiKey must be a string (the relay's API key, whk_…); got ${typeof value}`);
  if (!/^whk_[\x21-\x7e]+$/.test(value)) {
    throw new TypeError(`relayClient: apiKey must be the relay's API key, which begins whk_ and has no spaces; got a string of ${value.length} characters that is not one`);
  }
  return value;
}

function checkMs(value: unknown, name: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > 2_147_483_647) {
    throw new RangeError(`relayClient: ${name} must be a whole number of milliseconds from ${min} to 2147483647; got ${String(value)}`);
  }
  return value;
}

function checkRange(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be a whole number from ${min} to ${max}; got ${String(value)}`);
  }
  return value;
}

/** `body`, checked to be an object with the named fields of the named types. */
function expectShape<T>(body: unknown, operation: string, requestId: string | undefined, fields: Record<string, 'string' | 'number' | 'boolean' | 'array' | 'string|null'>): T {
  const bad = (what: string) => new RelayError({ status: 200, code: 'BAD_RESPONSE', operation, requestId, message: `the answer is not the documented document: ${what}` });
  if (!isObject(body)) throw bad('not a JSON object');
  for (const [field, type] of Object.entries(fields)) {
    const value = body[field];
    const ok =
      type === 'array' ? Array.isArray(value) : type === 'string|null' ? value === null || typeof value === 'string' : typeof value === type;
    if (!ok) throw bad(`${field} is not ${type === 'array' ? 'an array' : type === 'string|null' ? 'a string or null' : `a ${type}`}`);
  }
  return body as T;
}

/**
 * A client of the relay's API. Checks its options at once (`TypeError`/`RangeError`), never
 * sends the key anywhere but the `authorization` header of requests to `baseUrl`, and never shows
 * it: `util.inspect(relay)` and `JSON.stringify(relay)` show the base URL only.
 *
 * @example
 * ```ts
 * import { relayClient, RelayError } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: process.env.RELAY_URL!, apiKey: process.env.RELAY_API_KEY! });
 *
 * const event = await relay.event('0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80');
 * const { body } = await relay.payload(event.id);
 * for await (const delivery of relay.deliveries({ statuses: ['dead'] })) console.log(delivery.eventId, delivery.error);
 * ```
 */
export function relayClient(options: RelayClientOptions): RelayClient {
  if (!isObject(options)) throw new TypeError('relayClient: options must be an object with baseUrl and apiKey');
  const baseUrl = checkBaseUrl(options.baseUrl);
  const authorization = `Bearer ${checkApiKey(options.apiKey)}`;
  if (options.fetch !== undefined && typeof options.fetch !== 'function') throw new TypeError('relayClient: fetch must be a function');
  const call: Call = createTransport({
    baseUrl,
    authorization,
    fetch: options.fetch,
    timeoutMs: checkMs(options.timeoutMs, 'timeoutMs', 10_000, 1),
    retryBudgetMs: checkMs(options.retryBudgetMs, 'retryBudgetMs', 30_000, 0),
  });
  const queryNames = options.queryNames ?? {};
  if (!isObject(queryNames)) throw new TypeError('relayClient: queryNames must be an object');
  for (const [operation, names] of Object.entries(queryNames)) {
    if (operation !== 'deliveries' && operation !== 'waitTrigger') throw new TypeError(`relayClient: queryNames has no operation ${JSON.stringify(operation)} (deliveries, waitTrigger)`);
    if (names === undefined) continue;
    if (!isObject(names)) throw new TypeError(`relayClient: queryNames.${operation} must be an object of wire names`);
    const roles = operation === 'deliveries' ? DELIVERIES.roles : WAIT_TRIGGER.roles;
    for (const [role, name] of Object.entries(names)) {
      if (!(roles as readonly string[]).includes(role)) throw new TypeError(`relayClient: queryNames.${operation} has no role ${JSON.stringify(role)} (${roles.join(', ')})`);
      if (typeof name !== 'string' || name === '') throw new TypeError(`relayClient: queryNames.${operation}.${role} must be a non-empty string`);
    }
  }

  // The OpenAPI description, read once for the client; a failed read is tried again next time.
  let description: Promise<unknown> | undefined;
  function openapi(signal: AbortSignal | undefined): Promise<unknown> {
    description ??= call({ method: 'GET', path: '/openapi.json', operation: 'GET /openapi.json', idempotent: true, signal }).then(
      (result) => result.body,
      (error: unknown) => {
        description = undefined;
        const cause = error instanceof RelayError ? error : undefined;
        throw new RelayError({
          status: cause?.status ?? 0,
          code: 'OPENAPI_UNAVAILABLE',
          operation: 'GET /openapi.json',
          requestId: cause?.requestId,
          message: `could not read the relay's OpenAPI description, which names the query parameters (${cause?.message ?? String(error)}); name them with the queryNames option instead`,
          cause: error,
        });
      },
    );
    return description;
  }

  const resolved = new Map<QueryOperation, Promise<ResolvedQuery>>();
  function queryOf(operation: QueryOperation, signal: AbortSignal | undefined): Promise<ResolvedQuery> {
    let query = resolved.get(operation);
    if (query === undefined) {
      const overrides = (queryNames[operation.key] ?? {}) as Partial<Record<QueryRole, string>>;
      const complete = operation.roles.every((role) => overrides[role] !== undefined);
      query = (complete ? Promise.resolve(undefined) : openapi(signal)).then((document) => resolveQuery(document, operation, overrides));
      query.catch(() => resolved.delete(operation));
      resolved.set(operation, query);
    }
    return query;
  }

  function setParameter(params: URLSearchParams, query: ResolvedQuery, role: QueryRole, value: string | readonly string[]): void {
    const parameter = parameterFor(query, role);
    if (typeof value === 'string') params.append(parameter.name, value);
    else if (parameter.list.kind === 'multi') for (const item of value) params.append(parameter.name, item);
    else params.append(parameter.name, value.join(parameter.list.separator));
  }

  async function get<T>(path: string, operation: string, fields: Parameters<typeof expectShape>[3], signal?: AbortSignal, query?: URLSearchParams): Promise<T> {
    const { body, requestId } = await call({ method: 'GET', path, operation, idempotent: true, signal, query });
    return expectShape<T>(body, operation, requestId, fields);
  }

  const client: RelayClient = {
    baseUrl,

    whoami(callOptions) {
      return get<RelayIdentity>('/v1/whoami', 'GET /v1/whoami', { orgId: 'string', scopes: 'array' }, callOptions?.signal);
    },

    event(eventId, callOptions) {
      const id = relayId(eventId, 'event: eventId');
      return get<RelayEvent>(`/v1/events/${id}`, 'GET /v1/events/{eventId}', { id: 'string', headers: 'array', verificationState: 'string' }, callOptions?.signal);
    },

    async payload(eventId, callOptions) {
      const id = relayId(eventId, 'payload: eventId');
      const operation = 'GET /v1/events/{id}/payload';
      const { body, requestId } = await call({ method: 'GET', path: `/v1/events/${id}/payload`, operation, idempotent: true, signal: callOptions?.signal });
      const document = expectShape<{ contentType?: unknown; bytes: number; bodyBase64: string }>(body, operation, requestId, { bytes: 'number', bodyBase64: 'string' });
      const bytes = base64Decode(document.bodyBase64);
      if (bytes === undefined) throw new RelayError({ status: 200, code: 'BAD_RESPONSE', operation, requestId, message: 'bodyBase64 is not standard base64' });
      if (bytes.byteLength !== document.bytes) {
        throw new RelayError({ status: 200, code: 'PAYLOAD_LENGTH_MISMATCH', operation, requestId, message: `the body decodes to ${bytes.byteLength} bytes but the relay declares ${String(document.bytes)}: refusing a body that may be cut or padded` });
      }
      return { contentType: typeof document.contentType === 'string' ? document.contentType : null, body: bytes };
    },

    deliveries(filter = {}) {
      if (!isObject(filter as unknown)) throw new TypeError('deliveries: the filter must be an object');
      const destinationId = filter.destinationId === undefined ? undefined : relayId(filter.destinationId, 'deliveries: destinationId');
      const subscriptionId = filter.subscriptionId === undefined ? undefined : relayId(filter.subscriptionId, 'deliveries: subscriptionId');
      const statuses = filter.statuses ?? [];
      if (!Array.isArray(statuses)) throw new TypeError('deliveries: statuses must be an array of delivery statuses');
      for (const status of statuses) {
        if (!DELIVERY_STATUSES.includes(status)) throw new TypeError(`deliveries: ${JSON.stringify(status)} is not a delivery status (${DELIVERY_STATUSES.join(', ')})`);
      }
      const limit = filter.limit === undefined ? undefined : checkRange(filter.limit, 'deliveries: limit', 1, 200);
      const { signal } = filter;
      return {
        async *[Symbol.asyncIterator]() {
          let cursor: string | undefined;
          const seen = new Set<string>();
          for (;;) {
            const params = new URLSearchParams();
            // Resolved on every page (once per client, then cached), so that a description that
            // requires a parameter the client does not know fails the first page, not the second.
            const query = await queryOf(DELIVERIES, signal);
            // Paging needs the cursor's name: settle it before the first page rather than fail
            // after handing out part of the list.
            parameterFor(query, 'cursor');
            {
              if (cursor !== undefined) setParameter(params, query, 'cursor', cursor);
              if (limit !== undefined) setParameter(params, query, 'limit', String(limit));
              if (destinationId !== undefined) setParameter(params, query, 'destination', destinationId);
              if (subscriptionId !== undefined) setParameter(params, query, 'subscription', subscriptionId);
              if (statuses.length > 0) setParameter(params, query, 'status', statuses);
            }
            const page = await get<{ items: RelayDelivery[]; nextCursor?: string | null }>('/v1/deliveries', DELIVERIES.label, { items: 'array' }, signal, params);
            yield* page.items;
            const next = page.nextCursor;
            if (next === null || next === undefined) return;
            if (typeof next !== 'string' || seen.has(next)) {
              throw new RelayError({ status: 200, code: 'BAD_RESPONSE', operation: DELIVERIES.label, message: 'the relay gave a cursor it had already given: stopping rather than paging forever' });
            }
            seen.add(next);
            cursor = next;
          }
        },
      };
    },

    async replayDestinations(callOptions) {
      const page = await get<{ items: RelayDestination[] }>('/v1/replay-destinations', 'GET /v1/replay-destinations', { items: 'array' }, callOptions?.signal);
      return page.items;
    },

    async rotateSigningSecret(destinationId, callOptions) {
      const id = relayId(destinationId, 'rotateSigningSecret: destinationId');
      const operation = 'POST /v1/replay-destinations/{destinationId}/signing-secret';
      const { body, requestId } = await call({
        method: 'POST',
        path: `/v1/replay-destinations/${id}/signing-secret`,
        operation,
        idempotent: false,
        signal: callOptions?.signal,
        unknownOutcomeNote: 'the rotation may still have happened, and the relay shows a new secret only once: rotate again to get a secret you hold',
      });
      const rotated = expectShape<RelaySigningSecret>(body, operation, requestId, { destinationId: 'string', keyId: 'string', signingSecret: 'string' });
      return { destinationId: rotated.destinationId, keyId: rotated.keyId, signingSecret: rotated.signingSecret };
    },

    async waitTrigger(triggerId, waitOptions = {}) {
      const id = relayId(triggerId, 'waitTrigger: triggerId');
      if (!isObject(waitOptions as unknown)) throw new TypeError('waitTrigger: options must be an object');
      const { cursor, limit, inlineBodies, maxInlineBytes, signal } = waitOptions;
      if (cursor !== undefined && (typeof cursor !== 'string' || cursor === '')) throw new TypeError('waitTrigger: cursor must be a non-empty string from an earlier nextCursor');
      if (limit !== undefined) checkRange(limit, 'waitTrigger: limit', 1, 200);
      if (inlineBodies !== undefined && typeof inlineBodies !== 'boolean') throw new TypeError('waitTrigger: inlineBodies must be a boolean');
      if (maxInlineBytes !== undefined) checkRange(maxInlineBytes, 'waitTrigger: maxInlineBytes', 1, 65_536);
      const params = new URLSearchParams();
      {
        const query = await queryOf(WAIT_TRIGGER, signal);
        if (cursor !== undefined) setParameter(params, query, 'cursor', cursor);
        if (limit !== undefined) setParameter(params, query, 'limit', String(limit));
        if (inlineBodies !== undefined) setParameter(params, query, 'inlineBodies', String(inlineBodies));
        if (maxInlineBytes !== undefined) setParameter(params, query, 'maxInlineBytes', String(maxInlineBytes));
      }
      const batch = await get<{ events: TriggerEvent[]; nextCursor: string | null; caughtUp: boolean }>(`/v1/triggers/${id}/wait`, WAIT_TRIGGER.label, { events: 'array', nextCursor: 'string|null', caughtUp: 'boolean' }, signal, params);
      return { events: batch.events, nextCursor: batch.nextCursor, caughtUp: batch.caughtUp };
    },
  };

  const shown = { baseUrl };
  Object.defineProperty(client, INSPECT, { value: () => `RelayClient ${JSON.stringify(shown)}`, enumerable: false });
  Object.defineProperty(client, 'toJSON', { value: () => shown, enumerable: false });
  return Object.freeze(client);
}

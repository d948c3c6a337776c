/**
 * `relayEmulator()`: a local server that speaks the relay's documented API, for tests of a
 * destination's integration with the relay (the package's own and its users'), with no network.
 *
 * It implements what a destination uses: `whoami`, an event and its raw body, deliveries with
 * filters and keyset paging, replay destinations, signing-secret rotation with an overlap,
 * triggers consumed by short polling, and `/openapi.json`; bearer keys with scopes, the
 * documented error statuses and bodies, `x-request-id` on every answer, and failures on demand.
 * It can forward an event to a destination URL, signed as the relay signs.
 *
 * Where the API document says "not shown", the emulator makes a choice, named in
 * {@link RelayEmulatorOptions} and here, and a client must not depend on it:
 * - query parameter names other than `limit` (see {@link RelayEmulatorQueryNames});
 * - scopes: `events:read` (an event, its body), `deliveries:read`, `destinations:read`,
 *   `destinations:rotate`, `triggers:read`; `whoami` needs none;
 * - error codes: `VALIDATION_ERROR` (400), `NOT_FOUND` (404), `RATE_LIMITED` (429);
 * - the overlap after a rotation: 24 hours, during which forwarded requests carry a signature for
 *   every secret still in it, newest first;
 * - the `webhook-id` of a forwarded request: the delivery's id, the same on each retry of it;
 * - a trigger's default `limit` (50), and a body that is not UTF-8 inlined as `base64`;
 * - `/openapi.json` is served without a key.
 *
 * Node only (`node:http`, loaded when it is called): the rest of `webhook-receiver/testing` stays
 * loadable on edge runtimes.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { base64Encode, utf8Encoder } from '../../lib/encoding.ts';
import type { DedupStrategy, DeliveryStatus, RelayDelivery, RelayDestination, RelayEvent, VerificationState } from '../../relay/types.ts';
import { DELIVERY_STATUSES } from '../../relay/types.ts';
import { isRelayId } from '../../relay/ids.ts';
import { generateSecret, signWebhook } from '../../sign.ts';
import { emulatorNames, emulatorOpenApi, type RelayEmulatorQueryNames } from './relay-openapi.ts';
import { loadNodeHttp } from './test-receiver.ts';

/** How long a forwarded request may take before the delivery counts as failed. */
const FORWARD_TIMEOUT_MS = 30_000;

/** Every scope the emulator knows: a key made without `scopes` has them all. */
export const RELAY_EMULATOR_SCOPES = ['events:read', 'deliveries:read', 'destinations:read', 'destinations:rotate', 'triggers:read'] as const;

/**
 * Options of {@link relayEmulator}.
 *
 * @example
 * ```ts
 * import { relayEmulator, type RelayEmulatorOptions } from 'webhook-receiver/testing';
 * const options: RelayEmulatorOptions = { apiKeys: [{ key: 'whk_test_reader', scopes: ['events:read'] }], overlapSeconds: 3600 };
 * const relay = await relayEmulator(options);
 * ```
 */
export interface RelayEmulatorOptions {
  /** The keys it accepts, with their scopes (default: every scope). Default: one generated key with every scope. */
  apiKeys?: { key: string; scopes?: readonly string[] }[];
  /** The organisation every resource belongs to. Default: a random UUID. */
  orgId?: string;
  /** How long an old signing secret keeps signing after a rotation, in seconds. Default 86 400 (the emulator's choice). */
  overlapSeconds?: number;
  /** Query parameter names in `/openapi.json` and on the wire. */
  queryNames?: RelayEmulatorQueryNames;
  /** Serve this document at `/openapi.json` instead of the emulator's own (the wire names stay `queryNames`'). */
  openapi?: unknown;
  /** Default: a free port. It always listens on 127.0.0.1. */
  port?: number;
}

/**
 * What {@link RelayEmulator.addEvent} takes: the captured request and how the relay judged it.
 *
 * @example
 * ```ts
 * import type { EmulatedEventInit } from 'webhook-receiver/testing';
 * const init: EmulatedEventInit = { body: '{"type":"invoice.paid"}', verificationState: 'verified', headers: [['content-type', 'application/json']] };
 * ```
 */
export interface EmulatedEventInit {
  body: string | Uint8Array;
  /** Default `application/json`. */
  contentType?: string | null;
  /** The captured headers, in order. Default: a `content-type` header when there is a content type. */
  headers?: [string, string][];
  /** Default `POST`; `null` for an unrecorded method, as older rows have. */
  method?: string | null;
  /** Default `verified`. */
  verificationState?: VerificationState;
  endpointId?: string;
  provider?: string | null;
  providerEventId?: string | null;
  /** Default: the event's id, with the strategy `unique`. */
  dedupKey?: string;
  dedupStrategy?: DedupStrategy;
  /** Default: now. */
  receivedAt?: Date;
}

/**
 * A failure the emulator answers the next request with, instead of serving it.
 *
 * @example
 * ```ts
 * relay.failNext(2, { status: 429, retryAfter: 1 });
 * relay.failNext(1, { status: 500 });
 * relay.failNext(1, { drop: true });
 * ```
 */
export type EmulatedFailure = { status: 429; retryAfter?: number } | { status: 500 | 502 | 503 } | { drop: true };

/**
 * A request the emulator received: what tests check wire names and retries against. Never holds
 * the key: only whether one was valid.
 *
 * @example
 * ```ts
 * const last = relay.requests.at(-1)!;
 * expect(last.query).toContainEqual(['status', 'dead']);
 * ```
 */
export interface EmulatedRequest {
  method: string;
  path: string;
  query: [string, string][];
  /** The status answered, or 0 for a dropped connection. */
  status: number;
}

/**
 * A running emulator. `close()` ends every connection and stops listening.
 *
 * @example
 * ```ts
 * import { relayEmulator } from 'webhook-receiver/testing';
 * import { relayClient } from 'webhook-receiver/relay';
 * const emulator = await relayEmulator();
 * const relay = relayClient({ baseUrl: emulator.url, apiKey: emulator.apiKey });
 * const event = emulator.addEvent({ body: '{"ok":true}' });
 * console.log((await relay.event(event.id)).payloadBytes);
 * await emulator.close();
 * ```
 */
export interface RelayEmulator {
  /** `http://127.0.0.1:<port>`: the base URL to give a client. */
  readonly url: string;
  /** The first key, with the scopes it was given. */
  readonly apiKey: string;
  readonly orgId: string;
  /** Every request, in order. */
  readonly requests: readonly EmulatedRequest[];
  /** Captures an event as the relay would. */
  addEvent(init: EmulatedEventInit): RelayEvent;
  /** A replay destination with a fresh signing secret. */
  addDestination(init: { url: string; label?: string; ordered?: boolean }): { destination: RelayDestination; signingSecret: string; keyId: string };
  /** Records a delivery, as the deliveries list shows it. */
  addDelivery(init: { eventId: string; destinationId: string; status: DeliveryStatus; subscriptionId?: string; statusCode?: number; attempt?: number; error?: string | null; nextRetryAt?: Date | null }): RelayDelivery;
  /** A trigger over one endpoint's events (or every event), from the first on. */
  addTrigger(init?: { endpointId?: string }): string;
  /**
   * Sends an event to a destination as the relay does: signed with every secret of the
   * destination still in force (none for `unattempted`; a `failed` event is refused), and records
   * the delivery. `deliveryId` retries an earlier delivery (same `webhook-id`).
   */
  forward(eventId: string, destinationId: string, options?: { deliveryId?: string }): Promise<{ status: number; delivery: RelayDelivery; webhookId: string }>;
  /** The secrets that sign for a destination now, newest first, with their key ids. */
  signingSecrets(destinationId: string): { keyId: string; secret: string }[];
  /** Ends every rotation overlap of a destination at once: only the newest secret signs. */
  endOverlap(destinationId: string): void;
  /** Answers the next `count` requests with `failure` instead of serving them. */
  failNext(count: number, failure: EmulatedFailure): void;
  /** Stops listening and ends every open connection; resolves once the server is closed. */
  close(): Promise<void>;
}

interface StoredEvent {
  event: RelayEvent;
  body: Uint8Array;
}

interface Secret {
  keyId: string;
  secret: string;
  /** Milliseconds since the epoch after which it no longer signs; undefined: current. */
  until: number | undefined;
}

class HttpFailure {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly message: string,
  ) {}
}

function randomHex(bytes: number): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, '0')).join('');
}

function encodeCursor(position: number): string {
  return base64Encode(utf8Encoder.encode(`p:${position}`)).replace(/=+$/, '');
}

function decodeCursor(cursor: string): number {
  const match = /^p:(\d+)$/.exec(Buffer.from(cursor, 'base64').toString('utf8'));
  if (match === null) throw new HttpFailure(400, 'VALIDATION_ERROR', 'the cursor is not one this service gave');
  return Number(match[1]);
}

function isUtf8(bytes: Uint8Array): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts an emulator of the relay's API on 127.0.0.1.
 *
 * @example
 * ```ts
 * import { relayEmulator } from 'webhook-receiver/testing';
 * const emulator = await relayEmulator({ apiKeys: [{ key: 'whk_test_key' }] });
 * const { destination, signingSecret } = emulator.addDestination({ url: 'http://127.0.0.1:3000/webhooks' });
 * const event = emulator.addEvent({ body: '{"type":"invoice.paid"}' });
 * const { status } = await emulator.forward(event.id, destination.id);
 * await emulator.close();
 * ```
 */
export async function relayEmulator(options: RelayEmulatorOptions = {}): Promise<RelayEmulator> {
  const http = await loadNodeHttp();
  const keys = new Map<string, Set<string>>();
  for (const entry of options.apiKeys ?? [{ key: `whk_emulator_${randomHex(16)}` }]) {
    if (typeof entry.key !== 'string' || !entry.key.startsWith('whk_')) throw new TypeError('relayEmulator: every API key must begin whk_');
    keys.set(entry.key, new Set(entry.scopes ?? RELAY_EMULATOR_SCOPES));
  }
  const apiKey = [...keys.keys()][0];
  if (apiKey === undefined) throw new TypeError('relayEmulator: apiKeys must hold at least one key');
  const orgId = options.orgId ?? crypto.randomUUID();
  const overlapMs = (options.overlapSeconds ?? 86_400) * 1000;
  const names = emulatorNames(options.queryNames);
  const openapi = options.openapi ?? emulatorOpenApi(names);

  const events = new Map<string, StoredEvent>();
  const eventOrder: string[] = [];
  const destinations = new Map<string, { destination: RelayDestination; secrets: Secret[] }>();
  const deliveries: RelayDelivery[] = [];
  const triggers = new Map<string, { endpointId: string | undefined }>();
  const failures: EmulatedFailure[] = [];
  const requests: EmulatedRequest[] = [];
  const defaultEndpoint = crypto.randomUUID();

  function activeSecrets(destinationId: string): Secret[] {
    const entry = destinations.get(destinationId);
    if (entry === undefined) throw new TypeError(`relayEmulator: no destination ${destinationId}`);
    const now = Date.now();
    return entry.secrets.filter((secret) => secret.until === undefined || secret.until > now);
  }

  function rotate(destinationId: string): { keyId: string; signingSecret: string } {
    const entry = destinations.get(destinationId);
    if (entry === undefined) throw new HttpFailure(404, 'NOT_FOUND', `no replay destination ${destinationId}`);
    const until = Date.now() + overlapMs;
    for (const secret of entry.secrets) if (secret.until === undefined) secret.until = until;
    const fresh: Secret = { keyId: crypto.randomUUID(), secret: generateSecret(), until: undefined };
    entry.secrets.unshift(fresh);
    return { keyId: fresh.keyId, signingSecret: fresh.secret };
  }

  function need(scopes: Set<string>, scope: string | undefined): void {
    if (scope !== undefined && !scopes.has(scope)) throw new HttpFailure(403, 'FORBIDDEN', scope);
  }

  function pathId(value: string | undefined): string {
    if (value === undefined || !isRelayId(value)) throw new HttpFailure(400, 'VALIDATION_ERROR', 'the id in the path is not a UUID');
    return value;
  }

  function limitOf(query: URLSearchParams, fallback: number): number {
    const raw = query.get('limit');
    if (raw === null) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 200) throw new HttpFailure(400, 'VALIDATION_ERROR', 'limit must be an integer from 1 to 200');
    return Number(raw);
  }

  function checkKnown(query: URLSearchParams, known: string[]): void {
    for (const name of query.keys()) {
      if (!known.includes(name)) throw new HttpFailure(400, 'VALIDATION_ERROR', `unknown query parameter ${JSON.stringify(name)}`);
    }
  }

  function route(method: string, path: string, query: URLSearchParams, scopes: Set<string>): unknown {
    const parts = path.split('/').filter((part) => part !== '');
    if (parts[0] !== 'v1') throw new HttpFailure(404, 'NOT_FOUND', `no route ${method} ${path}`);
    const [, resource, id, sub, extra] = parts;
    if (method === 'GET' && resource === 'whoami' && id === undefined) {
      checkKnown(query, []);
      return { orgId, scopes: [...scopes] };
    }
    if (method === 'GET' && resource === 'events' && id !== undefined && extra === undefined && (sub === undefined || sub === 'payload')) {
      need(scopes, 'events:read');
      checkKnown(query, []);
      const stored = events.get(pathId(id));
      if (stored === undefined) throw new HttpFailure(404, 'NOT_FOUND', `no event ${id}`);
      if (sub === undefined) return stored.event;
      return { contentType: stored.event.contentType, bytes: stored.body.byteLength, bodyBase64: base64Encode(stored.body) };
    }
    if (method === 'GET' && resource === 'deliveries' && id === undefined) {
      need(scopes, 'deliveries:read');
      checkKnown(query, [names.cursor, 'limit', names.destination, names.subscription, names.status]);
      const limit = limitOf(query, 50);
      const start = query.get(names.cursor) === null ? 0 : decodeCursor(query.get(names.cursor)!);
      const destination = query.get(names.destination) ?? '';
      const subscription = query.get(names.subscription) ?? '';
      const statuses = names.statusExplode ? query.getAll(names.status) : (query.get(names.status) ?? '').split(',').filter((s) => s !== '');
      if (!names.statusExplode && query.getAll(names.status).length > 1) throw new HttpFailure(400, 'VALIDATION_ERROR', `${names.status} is one comma-separated parameter`);
      for (const status of statuses) {
        if (!(DELIVERY_STATUSES as readonly string[]).includes(status)) throw new HttpFailure(400, 'VALIDATION_ERROR', `unknown status ${JSON.stringify(status)}`);
      }
      if (destination !== '' && !isRelayId(destination)) throw new HttpFailure(400, 'VALIDATION_ERROR', 'the destination filter is not a UUID');
      const matching = deliveries
        .map((delivery, position) => ({ delivery, position }))
        .filter(({ delivery, position }) => position >= start && (destination === '' || delivery.destinationId === destination) && (subscription === '' || delivery.subscriptionId === subscription) && (statuses.length === 0 || statuses.includes(delivery.status)));
      const page = matching.slice(0, limit);
      const more = matching.length > limit;
      return { items: page.map(({ delivery }) => delivery), nextCursor: more ? encodeCursor(page.at(-1)!.position + 1) : null };
    }
    if (method === 'GET' && resource === 'replay-destinations' && id === undefined) {
      need(scopes, 'destinations:read');
      checkKnown(query, []);
      return { items: [...destinations.values()].map((entry) => entry.destination) };
    }
    if (method === 'POST' && resource === 'replay-destinations' && id !== undefined && sub === 'signing-secret' && extra === undefined) {
      need(scopes, 'destinations:rotate');
      checkKnown(query, []);
      const destinationId = pathId(id);
      return { destinationId, ...rotate(destinationId) };
    }
    if (method === 'GET' && resource === 'triggers' && id !== undefined && sub === 'wait' && extra === undefined) {
      need(scopes, 'triggers:read');
      checkKnown(query, [names.cursor, 'limit', names.inlineBodies, names.maxInlineBytes]);
      const trigger = triggers.get(pathId(id));
      if (trigger === undefined) throw new HttpFailure(404, 'NOT_FOUND', `no trigger ${id}`);
      const limit = limitOf(query, 50);
      const inlineRaw = query.get(names.inlineBodies);
      if (inlineRaw !== null && inlineRaw !== 'true' && inlineRaw !== 'false') throw new HttpFailure(400, 'VALIDATION_ERROR', `${names.inlineBodies} must be true or false`);
      const inline = inlineRaw !== 'false';
      const capRaw = query.get(names.maxInlineBytes);
      if (capRaw !== null && (!/^\d+$/.test(capRaw) || Number(capRaw) < 1)) throw new HttpFailure(400, 'VALIDATION_ERROR', `${names.maxInlineBytes} must be a positive integer`);
      const cap = Math.min(65_536, capRaw === null ? 65_536 : Number(capRaw));
      const start = query.get(names.cursor) === null ? 0 : decodeCursor(query.get(names.cursor)!);
      const mine = eventOrder.filter((eventId) => trigger.endpointId === undefined || events.get(eventId)!.event.endpointId === trigger.endpointId);
      const batch = mine.slice(start, start + limit).map((eventId) => {
        const { event, body } = events.get(eventId)!;
        const base = {
          id: event.id,
          orgId: event.orgId,
          endpointId: event.endpointId,
          receivedAt: event.receivedAt,
          provider: event.provider,
          dedupKey: event.dedupKey,
          dedupStrategy: event.dedupStrategy,
          verified: event.verified,
          vouched: event.verificationState === 'verified' || event.verificationState === 'authenticated',
          verificationState: event.verificationState,
        };
        if (!inline) return base;
        const truncated = body.byteLength > cap;
        const utf8 = isUtf8(body);
        // A UTF-8 body is cut at a character boundary, at or under the cap: never half a character.
        let end = truncated ? cap : body.byteLength;
        if (utf8 && truncated) while (end > 0 && (body[end]! & 0xc0) === 0x80) end--;
        const kept = body.subarray(0, end);
        // ignoreBOM keeps a leading byte order mark in the text: the inline body is the captured bytes.
        const text = utf8 ? new TextDecoder('utf-8', { ignoreBOM: true }).decode(kept) : base64Encode(kept);
        return { ...base, body: text, bodyEncoding: utf8 ? 'utf8' : 'base64', bodyTruncated: truncated, contentType: event.contentType };
      });
      const position = start + batch.length;
      return { events: batch, nextCursor: encodeCursor(position), caughtUp: position >= mine.length };
    }
    throw new HttpFailure(404, 'NOT_FOUND', `no route ${method} ${path}`);
  }

  function answer(res: ServerResponse, record: EmulatedRequest, status: number, headers: Record<string, string>, body: string): void {
    record.status = status;
    res.writeHead(status, { 'x-request-id': `req_${randomHex(8)}`, ...headers });
    res.end(body);
  }

  function serve(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://emulator');
    const record: EmulatedRequest = { method: req.method ?? 'GET', path: url.pathname, query: [...url.searchParams.entries()], status: 0 };
    requests.push(record);
    req.resume();
    req.on('end', () => {
      const failure = failures.shift();
      if (failure !== undefined) {
        if ('drop' in failure) {
          req.socket.destroy();
          return;
        }
        if (failure.status === 429) {
          answer(res, record, 429, { 'content-type': 'application/json', 'retry-after': String(failure.retryAfter ?? 1) }, JSON.stringify({ error: 'RATE_LIMITED', message: 'too many requests' }));
        } else {
          answer(res, record, failure.status, { 'content-type': 'text/plain' }, 'internal error');
        }
        return;
      }
      if (record.method === 'GET' && url.pathname === '/openapi.json') {
        answer(res, record, 200, { 'content-type': 'application/json' }, JSON.stringify(openapi));
        return;
      }
      const header = req.headers.authorization ?? '';
      const key = header.startsWith('Bearer ') ? header.slice(7) : undefined;
      const scopes = key === undefined ? undefined : keys.get(key);
      if (scopes === undefined) {
        answer(res, record, 401, { 'www-authenticate': key === undefined ? 'Bearer realm="relay"' : 'Bearer realm="relay", error="invalid_token"' }, '');
        return;
      }
      try {
        const body = route(record.method, url.pathname, url.searchParams, scopes);
        answer(res, record, 200, { 'content-type': 'application/json' }, JSON.stringify(body));
      } catch (error) {
        if (!(error instanceof HttpFailure)) {
          answer(res, record, 500, { 'content-type': 'text/plain' }, 'internal error');
        } else if (error.status === 403) {
          answer(res, record, 403, { 'www-authenticate': `Bearer realm="relay", error="insufficient_scope", scope="${error.message}"` }, '');
        } else {
          answer(res, record, error.status, { 'content-type': 'application/json' }, JSON.stringify({ error: error.code, message: error.message }));
        }
      }
    });
  }

  const server = http.createServer(serve);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('relayEmulator: the server has no port');
  const url = `http://127.0.0.1:${address.port}`;

  return {
    url,
    apiKey,
    orgId,
    requests,

    addEvent(init) {
      const id = crypto.randomUUID();
      const body = typeof init.body === 'string' ? utf8Encoder.encode(init.body) : init.body;
      const contentType = init.contentType === undefined ? 'application/json' : init.contentType;
      const state = init.verificationState ?? 'verified';
      const event: RelayEvent = {
        id,
        orgId,
        endpointId: init.endpointId ?? defaultEndpoint,
        receivedAt: (init.receivedAt ?? new Date()).toISOString(),
        provider: init.provider ?? null,
        method: init.method === undefined ? 'POST' : init.method,
        contentType,
        payloadBytes: body.byteLength,
        payloadObjectKey: `payloads/${id}`,
        headers: init.headers ?? (contentType === null ? [] : [['content-type', contentType]]),
        verified: state === 'verified',
        verificationState: state,
        verification: state === 'unattempted' ? null : { ok: state !== 'failed', scheme: 'emulated' },
        providerEventId: init.providerEventId ?? null,
        externalId: id,
        dedupKey: init.dedupKey ?? id,
        dedupStrategy: init.dedupStrategy ?? 'unique',
      };
      events.set(id, { event, body });
      eventOrder.push(id);
      return event;
    },

    addDestination(init) {
      const id = crypto.randomUUID();
      const destination: RelayDestination = {
        id,
        orgId,
        url: init.url,
        label: init.label ?? init.url,
        status: 'active',
        createdAt: new Date().toISOString(),
        lastValidatedAt: null,
        ordered: init.ordered ?? false,
        disabledAt: null,
      };
      const secret: Secret = { keyId: crypto.randomUUID(), secret: generateSecret(), until: undefined };
      destinations.set(id, { destination, secrets: [secret] });
      return { destination, signingSecret: secret.secret, keyId: secret.keyId };
    },

    addDelivery(init) {
      const delivery: RelayDelivery = {
        id: crypto.randomUUID(),
        eventId: init.eventId,
        destinationId: init.destinationId,
        subscriptionId: init.subscriptionId ?? null,
        status: init.status,
        statusCode: init.statusCode ?? null,
        attempt: init.attempt ?? 1,
        error: init.error ?? null,
        nextRetryAt: init.nextRetryAt === undefined || init.nextRetryAt === null ? null : init.nextRetryAt.toISOString(),
        createdAt: new Date().toISOString(),
        sourceVerificationState: events.get(init.eventId)?.event.verificationState ?? 'verified',
      };
      deliveries.push(delivery);
      return delivery;
    },

    addTrigger(init = {}) {
      const id = crypto.randomUUID();
      triggers.set(id, { endpointId: init.endpointId });
      return id;
    },

    async forward(eventId, destinationId, forwardOptions = {}) {
      const stored = events.get(eventId);
      if (stored === undefined) throw new TypeError(`relayEmulator: no event ${eventId}`);
      if (stored.event.verificationState === 'failed') throw new TypeError('relayEmulator: a failed event is never forwarded');
      const entry = destinations.get(destinationId);
      if (entry === undefined) throw new TypeError(`relayEmulator: no destination ${destinationId}`);
      const earlier = forwardOptions.deliveryId === undefined ? undefined : deliveries.find((d) => d.id === forwardOptions.deliveryId);
      const delivery =
        earlier ??
        (() => {
          const made: RelayDelivery = {
            id: crypto.randomUUID(),
            eventId,
            destinationId,
            subscriptionId: null,
            status: 'queued',
            statusCode: null,
            attempt: 0,
            error: null,
            nextRetryAt: null,
            createdAt: new Date().toISOString(),
            sourceVerificationState: stored.event.verificationState,
          };
          deliveries.push(made);
          return made;
        })();
      const webhookId = delivery.id;
      const headers: Record<string, string> = { 'webhook-id': webhookId, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) };
      if (stored.event.contentType !== null) headers['content-type'] = stored.event.contentType;
      if (stored.event.verificationState !== 'unattempted') {
        const signed = await signWebhook({ secret: activeSecrets(destinationId).map((s) => s.secret), body: stored.body, id: webhookId, timestamp: Number(headers['webhook-timestamp']) });
        headers['webhook-signature'] = signed.signature;
      }
      delivery.attempt = (delivery.attempt ?? 0) + 1;
      try {
        // Bounded: a destination that never answers fails the delivery instead of hanging the test.
        const response = await fetch(entry.destination.url, { method: 'POST', headers, body: new Uint8Array(stored.body), signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS) });
        await response.arrayBuffer();
        delivery.statusCode = response.status;
        delivery.status = response.ok ? 'delivered' : 'failed';
        delivery.error = response.ok ? null : `HTTP ${response.status}`;
        return { status: response.status, delivery, webhookId };
      } catch (error) {
        delivery.status = 'failed';
        delivery.error = error instanceof Error ? error.message : String(error);
        return { status: 0, delivery, webhookId };
      }
    },

    signingSecrets(destinationId) {
      return activeSecrets(destinationId).map(({ keyId, secret }) => ({ keyId, secret }));
    },

    endOverlap(destinationId) {
      const entry = destinations.get(destinationId);
      if (entry === undefined) throw new TypeError(`relayEmulator: no destination ${destinationId}`);
      const now = Date.now();
      for (const secret of entry.secrets) if (secret.until !== undefined) secret.until = Math.min(secret.until, now);
    },

    failNext(count, failure) {
      if (!Number.isInteger(count) || count < 1) throw new RangeError('relayEmulator: failNext takes a count of at least 1');
      for (let i = 0; i < count; i++) failures.push(failure);
    },

    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/**
 * Replaying a captured delivery against your own endpoint: a line that
 * `webhook-receiver listen --record` wrote, or the relay's two documents for a captured event
 * (`GET /v1/events/{eventId}` and `GET /v1/events/{id}/payload`), checked, given a fresh
 * timestamp, re-signed with a local secret and made into headers and a body to send.
 *
 * Web types only: the `webhook-receiver replay` command sends what this builds through
 * `node:http`, and a test hands it to a fetch handler or to supertest.
 */

import { base64Decode } from '../lib/encoding.ts';
import { isJsonObject as isObject } from '../lib/checks.ts';
import type { SecretInput } from '../secrets.ts';
import { generateMessageId, signWebhook, toUnixSeconds } from '../sign.ts';
import { bodyText } from './recorded.ts';
import { isCredentialHeader, REDACTED } from './redact.ts';

/**
 * What `listen` concluded about a recorded delivery: the key that verified it, or the error code
 * and message it was refused with (never a secret).
 *
 * @example
 * ```ts
 * import type { CapturedVerification } from 'webhook-receiver/testing';
 * const outcome: CapturedVerification = { ok: false, code: 'SIGNATURE_MISMATCH', message: 'no signature matched …' };
 * ```
 */
export type CapturedVerification =
  | { ok: true; id: string; scheme: 'v1' | 'v1a' | null; keyIndex: number | null; keyId: string | null }
  | { ok: false; code: string; message: string };

/**
 * One line of a `webhook-receiver listen --record` file: a delivery as it arrived, in the relay's
 * own field names where they exist (`headers` as ordered `[name, value]` pairs with repeats kept,
 * `contentType`, `bytes`, `bodyBase64`, `receivedAt`), with what `listen` answered and concluded.
 * Not a {@link RecordedRequest} (what a test holds of a request it received) nor the test
 * receiver's `Delivery` (the same, in memory, with the body as bytes): this is the file format.
 *
 * @example
 * ```ts
 * import type { CapturedDelivery } from 'webhook-receiver/testing';
 * const line: CapturedDelivery = JSON.parse(readFileSync('deliveries.jsonl', 'utf8').split('\n')[0]);
 * console.log(line.receivedAt, line.headers.length, line.bytes);
 * ```
 */
export interface CapturedDelivery {
  method: string;
  /** The request target: path and query string. */
  path: string;
  /**
   * Every header as received, in order, names in their original case, repeats kept; a
   * credential's value (`authorization`, `cookie`, any signature…) written as `[redacted]`
   * (see `isCredentialHeader`).
   */
  headers: [string, string][];
  /** The `content-type` header, or `null` without one. */
  contentType: string | null;
  /** The length of the body: the decoded length of `bodyBase64`. */
  bytes: number;
  /** The exact body bytes (after HTTP content decoding), in standard base64. */
  bodyBase64: string;
  /** When the request arrived, ISO 8601. */
  receivedAt: string;
  /** The status `listen` answered. */
  status: number;
  verification: CapturedVerification;
}

/**
 * The relay's event view (`GET /v1/events/{eventId}`), as far as a replay reads it. Other fields
 * the relay sends are ignored.
 *
 * @example
 * ```ts
 * import type { RelayEventDocument } from 'webhook-receiver/testing';
 * const event: RelayEventDocument = { id: 'evt_1', method: 'POST', headers: [['content-type', 'application/json']], contentType: 'application/json', payloadBytes: 2 };
 * ```
 */
export interface RelayEventDocument {
  id?: string;
  /** The captured method; `null` when the relay did not record it (never to be read as `POST`). */
  method: string | null;
  /** The request's headers as ordered `[name, value]` string pairs, unscrubbed, repeats kept. */
  headers: [string, string][];
  contentType?: string | null;
  /** The body's length; checked against the payload document when present. */
  payloadBytes?: number;
  /** `verified`, `authenticated`, `failed` (a signature was checked and rejected) or `unattempted`. */
  verificationState?: string;
  /** The relay's diagnostic; `ok: false` is a rejected capture when `verificationState` is absent. */
  verification?: { ok?: boolean } | null;
}

/**
 * The relay's payload envelope (`GET /v1/events/{id}/payload`): the exact captured bytes.
 *
 * @example
 * ```ts
 * import type { RelayPayloadDocument } from 'webhook-receiver/testing';
 * const payload: RelayPayloadDocument = { contentType: 'application/json', bytes: 2, bodyBase64: 'e30=' };
 * ```
 */
export interface RelayPayloadDocument {
  contentType: string | null;
  /** The decoded length of `bodyBase64`; a replay refuses a payload where they differ. */
  bytes: number;
  bodyBase64: string;
}

/**
 * Why a capture was refused where it was captured: `listen`'s error code (`SIGNATURE_MISMATCH`…)
 * or the relay's `verificationState` (`failed`), and a sentence saying so (never a secret).
 * {@link signReplay} re-signs such a capture only with `includeRejected: true`: re-signing a forged
 * request with your own secret would make it pass.
 *
 * @example
 * ```ts
 * import type { CaptureRejection } from 'webhook-receiver/testing';
 * const rejection: CaptureRejection = { code: 'SIGNATURE_MISMATCH', reason: 'refused when recorded: 401 SIGNATURE_MISMATCH' };
 * ```
 */
export interface CaptureRejection {
  code: string;
  reason: string;
}

/**
 * A captured delivery, checked and decoded, ready for {@link signReplay}.
 *
 * @example
 * ```ts
 * import { parseCapturedDelivery, type ReplaySource } from 'webhook-receiver/testing';
 * const source: ReplaySource = parseCapturedDelivery(line);
 * console.log(source.method, source.body.byteLength);
 * ```
 */
export interface ReplaySource {
  /** The captured method, or `null` when it was not recorded (the relay's older events): then {@link ReplayOptions.method} says which to send. */
  method: string | null;
  /** The captured request target, when the source has one (a recording does; the relay's event view need not). */
  path: string | undefined;
  headers: readonly (readonly [string, string])[];
  /** The exact captured bytes. */
  body: Uint8Array;
  contentType: string | null;
  /** The relay event's `id`: the replay's `webhook-id` when the capture carried none. */
  eventId: string | undefined;
  /** Set when the capture failed verification where it was captured: {@link signReplay} then refuses it unless `includeRejected`. */
  rejected?: CaptureRejection;
}

/**
 * How {@link signReplay} re-signs a captured delivery.
 *
 * @example
 * ```ts
 * import type { ReplayOptions } from 'webhook-receiver/testing';
 * const options: ReplayOptions = { secret: process.env.WEBHOOK_SECRET!, newId: true, dropHeaders: ['stripe-signature'] };
 * ```
 */
export interface ReplayOptions {
  /** The local signing secret or secrets (several sign several entries, as during a rotation). */
  secret?: SecretInput | readonly SecretInput[];
  /**
   * Send it without a signature, as the relay forwards `unattempted` events. Must be asked for:
   * a missing `secret` is an error, never a silent unsigned replay.
   */
  unsigned?: boolean;
  /** A fresh `webhook-id` instead of the captured one (so the endpoint's deduplication lets it through). */
  newId?: boolean;
  /** More header names to leave out (any case). Credential headers are always left out. */
  dropHeaders?: readonly string[];
  /** `webhook-timestamp`, as Unix seconds or a `Date`. Default: now. */
  timestamp?: number | Date;
  /**
   * Re-sign a capture that failed verification where it was captured (a forged or stale request:
   * {@link ReplaySource.rejected}). Without it such a capture is refused: re-signed with your
   * secret, a forgery would pass your endpoint's check.
   */
  includeRejected?: boolean;
  /** The method to send for a capture whose method was not recorded (`null`); a recorded method is always kept. */
  method?: string;
}

/**
 * A captured delivery made ready to send: the headers in their captured order with repeats kept,
 * the signing headers replaced, the hop-by-hop and credential ones dropped; the exact captured body.
 *
 * @example
 * ```ts
 * const replay = await signReplay(parseCapturedDelivery(line), { secret });
 * await request(app).post('/webhooks').set(replay.headerRecord).send(replay.bodyText ?? Buffer.from(replay.body));
 * ```
 */
export interface SignedReplay {
  /** The `webhook-id` sent. */
  id: string;
  /** Where the id came from: the captured header, the relay event's `id`, a fresh one (none captured), or a new one (`newId`). */
  idSource: 'captured' | 'event' | 'fresh' | 'new';
  /** The `webhook-timestamp` sent, Unix seconds. */
  timestamp: number;
  /** False for `unsigned: true`. */
  signed: boolean;
  method: string;
  /** What to send, in order, repeats kept: for `node:http`'s raw header arrays. */
  headers: [string, string][];
  /**
   * The same headers as an object for supertest's `.set()` or `fetch`: names in lower case, a
   * repeated header as an array of its values in order. The order between different names follows
   * their first appearance; where several names interleave, only `headers` keeps that order.
   */
  headerRecord: Record<string, string | string[]>;
  /** The exact captured bytes. */
  body: Uint8Array;
  /** The body as text when it is valid UTF-8 (supertest sends a string as is, but serialises a Buffer with a JSON content type). */
  bodyText: string | undefined;
  /** The captured header names left out (lower case, each once): hop-by-hop, framing, credentials, and `dropHeaders`. */
  dropped: string[];
}

/** The signing headers, replaced by fresh ones. */
const SIGNING_HEADERS = new Set(['webhook-id', 'webhook-timestamp', 'webhook-signature', 'svix-id', 'svix-timestamp', 'svix-signature']);

/**
 * Headers that describe one hop, or the framing of the captured request, and so are never
 * replayed: the HTTP client sets its own `host` and `content-length`, and `content-encoding` is
 * dropped because the captured bytes are already decoded (the sender signs the payload, not its
 * transfer coding).
 *
 * @example
 * ```ts
 * import { REPLAY_DROPPED_HEADERS } from 'webhook-receiver/testing';
 * REPLAY_DROPPED_HEADERS.has('content-encoding'); // true
 * ```
 */
export const REPLAY_DROPPED_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'expect',
  'content-length',
  'transfer-encoding',
  'content-encoding',
]);

/** An HTTP token (RFC 9110): what a header name and a method are made of. Internal. */
export const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What Node's HTTP client accepts in a header value: tab, visible ASCII and space, obs-text bytes. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function field<T>(record: Record<string, unknown>, where: string, name: string, check: (value: unknown) => value is T, expected: string): T {
  if (!(name in record) || record[name] === undefined) throw new TypeError(`${where} has no ${name}: expected ${expected}`);
  const value = record[name];
  if (!check(value)) throw new TypeError(`${where}: ${name} is ${describe(value)}, expected ${expected}`);
  return value;
}

const isString = (value: unknown): value is string => typeof value === 'string';
const isLength = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
const isStringOrNull = (value: unknown): value is string | null => value === null || typeof value === 'string';

/** The method, or `null` where the capture says it was not recorded. */
function method(record: Record<string, unknown>, where: string): string | null {
  const value = field(record, where, 'method', isStringOrNull, 'an HTTP method such as "POST" (or null: not recorded)');
  if (value !== null && !HTTP_TOKEN.test(value)) throw new TypeError(`${where}: method is not an HTTP method`);
  return value;
}

/** Longer messages are cut: a reason is one line of output. */
const REASON_MESSAGE_MAX = 200;

/**
 * What `listen` concluded about a recorded line, checked: `undefined` when it verified, else why
 * it was refused.
 */
export function recordedRejection(record: Record<string, unknown>, where: string): CaptureRejection | undefined {
  const verification = field(record, where, 'verification', isObject, "what listen concluded, { ok: true, … } or { ok: false, code, message }");
  if (verification.ok === true) return undefined;
  if (verification.ok !== false) throw new TypeError(`${where}: verification.ok is ${describe(verification.ok)}, expected true or false`);
  const code = field(verification, `${where}: verification`, 'code', isString, 'the error code');
  const message = typeof verification.message === 'string' ? verification.message : '';
  const status = typeof record.status === 'number' ? `${record.status} ` : '';
  const shown = message.length > REASON_MESSAGE_MAX ? `${message.slice(0, REASON_MESSAGE_MAX)}…` : message;
  return { code, reason: `refused when recorded: ${status}${code}${shown === '' ? '' : `: ${shown}`}` };
}

/** What the relay concluded at capture, as far as a replay must heed it: `failed` is a rejection. */
function relayRejection(record: Record<string, unknown>, where: string): CaptureRejection | undefined {
  if ('verificationState' in record && record.verificationState !== undefined) {
    const state = field(record, where, 'verificationState', isString, 'a string such as "verified"');
    return state === 'failed' ? { code: 'failed', reason: 'the relay\'s verificationState is "failed": a signature was checked and rejected at capture' } : undefined;
  }
  const verification = record.verification;
  if (isObject(verification) && verification.ok === false) return { code: 'failed', reason: 'the relay\'s verification is { ok: false }: a signature was checked and rejected at capture' };
  return undefined;
}

/** Header pairs checked one by one, so the error names the pair that is wrong. */
function headerPairs(record: Record<string, unknown>, where: string): [string, string][] {
  const headers = field(record, where, 'headers', Array.isArray, 'an array of [name, value] string pairs');
  return headers.map((pair: unknown, index): [string, string] => {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
      throw new TypeError(`${where}: headers[${index}] is not a [name, value] pair of two strings`);
    }
    const [name, value] = pair as [string, string];
    if (!HTTP_TOKEN.test(name)) throw new TypeError(`${where}: headers[${index}] has a name that is not a valid HTTP header name`);
    if (!FIELD_VALUE.test(value)) throw new TypeError(`${where}: headers[${index}] (${name}) has a value with a character HTTP cannot carry (a line break, NUL, or a character past U+00FF)`);
    return [name, value];
  });
}

/** The body of an envelope: strict base64 whose decoded length is `bytes`. */
function envelopeBody(record: Record<string, unknown>, where: string): Uint8Array {
  const bytes = field(record, where, 'bytes', isLength, 'the body length, a whole number');
  const base64 = field(record, where, 'bodyBase64', isString, 'the body in standard base64');
  const body = base64Decode(base64);
  if (body === undefined) throw new TypeError(`${where}: bodyBase64 does not decode as standard base64`);
  if (body.byteLength !== bytes) {
    throw new TypeError(`${where}: bytes is ${bytes} but bodyBase64 decodes to ${body.byteLength} bytes: the body is not the one captured`);
  }
  return body;
}

function parsed(input: unknown, where: string): Record<string, unknown> {
  let value = input;
  if (typeof input === 'string') {
    try {
      value = JSON.parse(input);
    } catch {
      throw new TypeError(`${where} is not JSON`);
    }
  }
  if (!isObject(value)) throw new TypeError(`${where} is ${describe(value)}, expected a JSON object`);
  return value;
}

/**
 * Checks one line of a `webhook-receiver listen --record` file (its text, or the parsed
 * {@link CapturedDelivery}) and decodes its body. Throws `TypeError` naming what is wrong: not
 * JSON, a missing field (`verification` included), a header pair that is not two strings, base64
 * that does not decode, a `bytes` that is not the decoded length, a body that was not kept. A line
 * that `listen` refused (`verification.ok` false) comes back with `rejected` set.
 *
 * @param where - how error messages name the line (default `'the recorded delivery'`).
 *
 * @example
 * ```ts
 * import { parseCapturedDelivery, signReplay, replayRequest } from 'webhook-receiver/testing';
 * const [line] = readFileSync('test/fixtures/deliveries.jsonl', 'utf8').split('\n');
 * const replay = await signReplay(parseCapturedDelivery(line), { secret: 'whsec_…' });
 * const response = await handler(replayRequest('http://localhost/webhooks', replay));
 * ```
 */
export function parseCapturedDelivery(line: string | CapturedDelivery, where = 'the recorded delivery'): ReplaySource {
  const record = parsed(line, where);
  const verification = record.verification;
  // `listen` does not read a body past its limit, so the line holds none: replaying it would send
  // an empty body in place of the real one.
  if (isObject(verification) && verification.ok === false && verification.code === 'PAYLOAD_TOO_LARGE') {
    throw new TypeError(`${where}: its body was not kept (over the recorder's limit): record it again with a larger --max-body-bytes`);
  }
  const rejected = recordedRejection(record, where);
  const result: ReplaySource = {
    method: method(record, where),
    path: 'path' in record ? field(record, where, 'path', isString, 'the request path') : undefined,
    headers: headerPairs(record, where),
    body: envelopeBody(record, where),
    contentType: 'contentType' in record ? field(record, where, 'contentType', isStringOrNull, 'a string or null') : null,
    eventId: undefined,
  };
  if (rejected !== undefined) result.rejected = rejected;
  return result;
}

/**
 * Checks the relay's two documents for a captured event, the event view
 * (`GET /v1/events/{eventId}`) and the payload envelope (`GET /v1/events/{id}/payload`), and
 * decodes the body. Throws `TypeError` naming what is wrong; in particular a payload whose `bytes`
 * is not the decoded length of `bodyBase64` is refused, as the relay's clients refuse it. An event
 * whose `verificationState` is `failed` comes back with `rejected` set; one whose `method` is
 * `null` (not recorded) with `method: null`.
 *
 * @example
 * ```ts
 * import { parseRelayEvent, signReplay } from 'webhook-receiver/testing';
 * const source = parseRelayEvent(JSON.parse(eventJson), JSON.parse(payloadJson));
 * const replay = await signReplay(source, { secret: 'whsec_…' });
 * ```
 */
export function parseRelayEvent(event: RelayEventDocument | string, payload: RelayPayloadDocument | string): ReplaySource {
  const eventRecord = parsed(event, 'the event document');
  const payloadRecord = parsed(payload, 'the payload document');
  const headers = headerPairs(eventRecord, 'the event document');
  const body = envelopeBody(payloadRecord, 'the payload document');
  const contentType = field(payloadRecord, 'the payload document', 'contentType', isStringOrNull, 'a string or null');
  if ('payloadBytes' in eventRecord && eventRecord.payloadBytes !== undefined) {
    const expected = field(eventRecord, 'the event document', 'payloadBytes', isLength, 'the body length, a whole number');
    if (expected !== body.byteLength) {
      throw new TypeError(`the event document's payloadBytes is ${expected} but the payload is ${body.byteLength} bytes: are they the same event?`);
    }
  }
  let eventId: string | undefined;
  if ('id' in eventRecord && eventRecord.id !== undefined) {
    eventId = field(eventRecord, 'the event document', 'id', isString, 'the event id, a string');
    if (eventId === '') eventId = undefined;
  }
  const source: ReplaySource = { method: method(eventRecord, 'the event document'), path: undefined, headers, body, contentType, eventId };
  const rejected = relayRejection(eventRecord, 'the event document');
  if (rejected !== undefined) source.rejected = rejected;
  return source;
}

function firstValue(headers: ReplaySource['headers'], name: string): string | undefined {
  for (const [key, value] of headers) if (key.toLowerCase() === name && value !== '') return value;
  return undefined;
}

/**
 * Makes a captured delivery ready to send again: the same body bytes, the same headers in their
 * captured order (repeats kept), and fresh signing headers.
 *
 * - The id is the captured `webhook-id` (or `svix-id`), else the relay event's `id`, else a fresh
 *   one; with `newId`, always a fresh one. Keeping it exercises the endpoint's deduplication.
 * - `webhook-timestamp` is now (or `timestamp`); `webhook-signature` is signed with `secret`, or
 *   left out with `unsigned: true`. One of the two is required. A capture sent with `svix-*`
 *   names only gets `svix-*` names back.
 * - The captured signing headers are replaced; hop-by-hop and framing headers
 *   ({@link REPLAY_DROPPED_HEADERS}), `dropHeaders`, credential headers (`authorization`,
 *   `cookie`, other senders' signatures such as `stripe-signature`: `isCredentialHeader`) and any
 *   header whose value is `[redacted]` are left out.
 * - A capture refused where it was captured ({@link ReplaySource.rejected}) throws unless
 *   `includeRejected: true`; one whose method was not recorded throws unless `method` is given.
 *
 * @example
 * ```ts
 * import { parseRelayEvent, signReplay } from 'webhook-receiver/testing';
 * const replay = await signReplay(parseRelayEvent(event, payload), { secret: 'whsec_…', newId: true });
 * await request(app).post('/webhooks').set(replay.headerRecord).send(replay.bodyText ?? Buffer.from(replay.body));
 * ```
 */
export async function signReplay(source: ReplaySource, options: ReplayOptions): Promise<SignedReplay> {
  if (!isObject(source) || !(source.body instanceof Uint8Array) || !Array.isArray(source.headers)) {
    throw new TypeError('signReplay needs a source from parseCapturedDelivery() or parseRelayEvent()');
  }
  if (typeof options !== 'object' || options === null) throw new TypeError('signReplay needs options: { secret } or { unsigned: true }');
  const { secret, unsigned, newId, dropHeaders = [], timestamp, includeRejected, method: fallbackMethod } = options;
  if (includeRejected !== undefined && typeof includeRejected !== 'boolean') throw new TypeError('includeRejected must be true or false');
  if (source.rejected !== undefined && includeRejected !== true) {
    throw new TypeError(`the capture was refused where it was captured (${source.rejected.reason}): re-signing it would make it pass; pass includeRejected: true to replay it anyway`);
  }
  if (fallbackMethod !== undefined && (typeof fallbackMethod !== 'string' || !HTTP_TOKEN.test(fallbackMethod))) throw new TypeError('method must be an HTTP method such as "POST"');
  const sentMethod = source.method ?? fallbackMethod;
  if (sentMethod === undefined) throw new TypeError('the capture has no method (null: not recorded, and never to be read as POST): pass method to say which to send');
  if (unsigned !== undefined && typeof unsigned !== 'boolean') throw new TypeError('unsigned must be true or false');
  if (unsigned === true && secret !== undefined) throw new TypeError('pass either secret (to re-sign) or unsigned: true, not both');
  if (unsigned !== true && secret === undefined) {
    throw new TypeError('no secret to re-sign the delivery with: pass secret, or unsigned: true to send it without a signature (as the relay forwards unattempted events)');
  }
  if (!Array.isArray(dropHeaders)) throw new TypeError('dropHeaders must be an array of header names');
  const drop = new Set<string>();
  for (const name of dropHeaders as readonly unknown[]) {
    if (typeof name !== 'string' || !HTTP_TOKEN.test(name)) throw new TypeError('dropHeaders holds a name that is not a valid HTTP header name');
    drop.add(name.toLowerCase());
  }

  const captured = firstValue(source.headers, 'webhook-id') ?? firstValue(source.headers, 'svix-id');
  let id: string;
  let idSource: SignedReplay['idSource'];
  if (newId === true) [id, idSource] = [generateMessageId(), 'new'];
  else if (captured !== undefined) [id, idSource] = [captured, 'captured'];
  else if (source.eventId !== undefined) [id, idSource] = [source.eventId, 'event'];
  else [id, idSource] = [generateMessageId(), 'fresh'];

  // The brand the sender used: a capture with svix-* names only is answered in kind.
  const svix = firstValue(source.headers, 'webhook-id') === undefined && source.headers.some(([name]) => name.toLowerCase().startsWith('svix-'));
  const prefix = svix ? 'svix-' : 'webhook-';
  let signing: [string, string][];
  let seconds: number;
  if (unsigned === true) {
    seconds = toUnixSeconds(timestamp);
    signing = [[`${prefix}id`, id], [`${prefix}timestamp`, String(seconds)]];
  } else {
    const signed = await signWebhook({ secret: secret!, body: source.body, id, timestamp });
    seconds = signed.timestamp;
    signing = [[`${prefix}id`, id], [`${prefix}timestamp`, String(seconds)], [`${prefix}signature`, signed.signature]];
  }

  const headers: [string, string][] = [];
  const dropped: string[] = [];
  let signingAt: number | undefined;
  for (const [name, value] of source.headers) {
    const lower = name.toLowerCase();
    if (SIGNING_HEADERS.has(lower)) {
      // The fresh signing headers take the place of the first captured one.
      signingAt ??= headers.length;
      continue;
    }
    // A credential is never sent again, whether the capture kept its value or a recorder redacted it.
    if (REPLAY_DROPPED_HEADERS.has(lower) || drop.has(lower) || isCredentialHeader(lower) || value === REDACTED) {
      if (!dropped.includes(lower)) dropped.push(lower);
      continue;
    }
    headers.push([name, value]);
  }
  headers.splice(signingAt ?? headers.length, 0, ...signing);
  if (source.contentType !== null && !headers.some(([name]) => name.toLowerCase() === 'content-type') && !drop.has('content-type')) {
    headers.push(['content-type', source.contentType]);
  }

  const headerRecord: Record<string, string | string[]> = {};
  for (const [name, value] of headers) {
    const key = name.toLowerCase();
    const existing = headerRecord[key];
    headerRecord[key] = existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
  }
  return {
    id,
    idSource,
    timestamp: seconds,
    signed: unsigned !== true,
    method: sentMethod,
    headers,
    headerRecord,
    body: source.body,
    bodyText: bodyText(source.body),
    dropped,
  };
}

/**
 * A Fetch `Request` for a replay, for a fetch handler, Hono's `app.request` or `fetch`. A
 * `Request` cannot keep what a capture may hold: its `Headers` join a repeated header's values
 * with `", "` and list names sorted, so repeats and their order are lost (the signature does not
 * cover headers, so it still verifies). To send them as captured, use `replay.headers` with
 * `node:http`, as `webhook-receiver replay` does.
 *
 * @example
 * ```ts
 * import { parseCapturedDelivery, replayRequest, signReplay } from 'webhook-receiver/testing';
 * const replay = await signReplay(parseCapturedDelivery(line), { secret: 'whsec_…' });
 * const response = await handler(replayRequest('http://localhost/webhooks', replay));
 * expect(response.status).toBe(204);
 * ```
 */
export function replayRequest(url: string | URL, replay: SignedReplay): Request {
  if (!isObject(replay) || !(replay.body instanceof Uint8Array) || !Array.isArray(replay.headers)) {
    throw new TypeError('replayRequest needs a replay from signReplay()');
  }
  const bodiless = /^(GET|HEAD)$/i.test(replay.method);
  if (bodiless && replay.body.byteLength > 0) {
    throw new TypeError(`a Request cannot carry a body with ${replay.method.toUpperCase()}; send this replay with node:http (replay.headers)`);
  }
  const headers = new Headers();
  for (const [name, value] of replay.headers) headers.append(name, value);
  return new Request(url, { method: replay.method, headers, body: bodiless ? null : (replay.body as Uint8Array<ArrayBuffer>) });
}

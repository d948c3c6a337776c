/**
 * What every section feeds its candidates: JSON bodies of exact sizes, a secret, signed headers in
 * the shape Node hands an app, and the hand-written check that the practical baseline stands for.
 *
 * Fixtures are signed here with `node:crypto` directly, not with the package's own signer, so a
 * bug in the package cannot make its own benchmark inputs agree with it.
 */

import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject, type webcrypto } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Candidate } from './stats.ts';

export const KiB = 1024;
export const MiB = 1024 * KiB;

export function sizeLabel(bytes: number): string {
  if (bytes >= MiB) return `${bytes / MiB} MiB`;
  if (bytes >= KiB) return `${bytes / KiB} KiB`;
  return `${bytes} B`;
}

/**
 * A JSON event of exactly `bytes` bytes (at least 40): an envelope with line items, padded with
 * a string field to the exact size. The `standardwebhooks` and `svix` verifiers parse the body as
 * JSON, so every candidate gets JSON.
 */
export function jsonBody(bytes: number): Buffer {
  const minimal = JSON.stringify({ type: 'ping', pad: '' });
  if (bytes < minimal.length) throw new RangeError(`a JSON body needs at least ${minimal.length} bytes`);
  const items: { id: string; amount: number; currency: string; description: string }[] = [];
  const envelope = (pad: string): string => JSON.stringify({ type: 'invoice.paid', data: { items, pad } });
  // Items are added while they fit, their lengths summed (one comma each after the first), so
  // building a 1 MiB body stays linear.
  let length = envelope('').length;
  if (length > bytes) return Buffer.from(JSON.stringify({ type: 'ping', pad: 'x'.repeat(bytes - minimal.length) }));
  for (let n = 0; ; n++) {
    const item = { id: `item_${String(n).padStart(6, '0')}`, amount: (n * 7919) % 100_000, currency: 'eur', description: `line ${n} of the invoice` };
    const added = JSON.stringify(item).length + (n > 0 ? 1 : 0);
    if (length + added > bytes) break;
    items.push(item);
    length += added;
  }
  const text = envelope('x'.repeat(bytes - length));
  if (Buffer.byteLength(text) !== bytes) throw new Error(`jsonBody built ${Buffer.byteLength(text)} bytes, not ${bytes}`);
  return Buffer.from(text);
}

/**
 * The key every floor and hand-written check keys its HMAC with: a `KeyObject`, as the package
 * keys its own. On Node 24, `createHmac` with a `Buffer` or `Uint8Array` key costs about four times
 * what it costs with a `KeyObject` (Node 22 and 26 show no gap), so a floor keyed with bytes there
 * is a slow floor, not a fast package.
 */
export type HmacKey = KeyObject;

/** `bytes` as the HMAC key the floors use ({@link HmacKey}). */
export function hmacKey(bytes: Uint8Array): HmacKey {
  return createSecretKey(bytes);
}

/**
 * A fresh Standard Webhooks secret: `whsec_` + base64 of 32 random bytes, its key as a `KeyObject`
 * (what every floor keys with) and its raw bytes (for WebCrypto's import and the check keyed with
 * a Buffer that stands beside the floors).
 */
export function newSecret(): { secret: string; key: HmacKey; bytes: Buffer } {
  const bytes = randomBytes(32);
  return { secret: `whsec_${bytes.toString('base64')}`, key: hmacKey(bytes), bytes };
}

/** The `v1,<base64>` signature entry of one message. */
export function signEntry(key: HmacKey | Buffer, id: string, timestamp: number, body: Uint8Array): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * Request headers as Node's `req.headers` holds them for a relayed webhook: lower-case names in
 * arrival order, the three `webhook-*` among the usual others. Every candidate reads this object.
 */
function nodeHeaders(id: string, timestamp: number, signature: string, body: Uint8Array): IncomingHttpHeaders {
  return {
    host: '127.0.0.1:3000',
    'user-agent': 'relay/1.0',
    'content-length': String(body.byteLength),
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature,
    'accept-encoding': 'gzip, br',
  };
}

/** One signed message, ready for any candidate. */
export interface SignedMessage {
  id: string;
  timestamp: number;
  body: Buffer;
  headers: IncomingHttpHeaders;
  /** `id.timestamp.body` as one buffer: what the floor hashes. */
  signedContent: Buffer;
}

export function signedMessage(key: HmacKey | Buffer, body: Buffer, id = `msg_${randomBytes(12).toString('hex')}`): SignedMessage {
  const timestamp = nowSeconds();
  const signature = signEntry(key, id, timestamp, body);
  return {
    id,
    timestamp,
    body,
    headers: nodeHeaders(id, timestamp, signature, body),
    signedContent: Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body]),
  };
}

/**
 * A timed candidate that uses up `n` freshly signed messages per batch: signed with `key` before
 * the batch (untimed), each with the next id of `nextId`, and each handed to `run` in turn.
 */
export function freshCandidate(name: string, key: HmacKey | Buffer, body: Buffer, nextId: () => string, run: (message: SignedMessage) => Promise<void>): Candidate {
  let batch: SignedMessage[] = [];
  return {
    name,
    prepare(n) {
      batch = Array.from({ length: n }, () => signedMessage(key, body, nextId()));
    },
    async run(n) {
      for (let i = 0; i < n; i++) await run(batch[i]!);
    },
  };
}

/** Five minutes, as every Standard Webhooks library uses. */
const TOLERANCE_SECONDS = 300;

function firstValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Whether any `v1` entry of the signature header is `expected`, each compared with `timingSafeEqual`. */
function handWrittenMatch(signatures: string, expected: Uint8Array): boolean {
  for (const entry of signatures.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma === -1 || entry.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(entry.slice(comma + 1), 'base64');
    if (given.length === expected.length && timingSafeEqual(given, expected)) return true;
  }
  return false;
}

/**
 * The practical baseline: the check an app writes by hand with `createHmac` and
 * `timingSafeEqual` (the secret decoded once at start-up, keyed as a `KeyObject` as the package
 * keys; given a Buffer it is the check keyed with bytes, slow on Node 24). It parses the three headers, checks the
 * timestamp window, computes the HMAC with two `update` calls and compares it with every `v1`
 * entry in constant time. It is correct for well-formed input; it lacks the package's checks of
 * malformed headers, rotation, `svix-*` names and error reporting.
 */
export function handWrittenVerify(headers: IncomingHttpHeaders, body: Uint8Array, key: HmacKey | Buffer): boolean {
  const id = firstValue(headers['webhook-id']);
  const timestamp = firstValue(headers['webhook-timestamp']);
  const signatures = firstValue(headers['webhook-signature']);
  if (!id || !timestamp || !signatures) return false;
  const seconds = Number(timestamp);
  if (!Number.isInteger(seconds) || Math.abs(Date.now() / 1000 - seconds) > TOLERANCE_SECONDS) return false;
  return handWrittenMatch(signatures, createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest());
}

/**
 * The hand-written check of GitHub's scheme (`x-hub-signature-256: sha256=<hex>`): one HMAC of the
 * body alone, in hex, compared in constant time. No timestamp, no id: it does the least any check
 * of a signed body can, so beside {@link handWrittenVerify} it shows what the Standard Webhooks
 * scheme itself costs over GitHub's, whoever writes the verifier.
 */
export function handWrittenGithubVerify(headers: IncomingHttpHeaders, body: Uint8Array, key: HmacKey): boolean {
  const signature = firstValue(headers['x-hub-signature-256']);
  if (!signature?.startsWith('sha256=')) return false;
  const given = Buffer.from(signature.slice('sha256='.length), 'hex');
  const expected = createHmac('sha256', key).update(body).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const headerPrefix = new TextEncoder();

/**
 * The WebCrypto form of {@link handWrittenVerify}, written as cheaply as WebCrypto allows: the same
 * header checks, then `id.timestamp.` and the body joined into a buffer taken from `buffers` and
 * put back once `sign` settles (WebCrypto signs one buffer, so some join is forced), one
 * `subtle.sign`, and the same comparison. Resolves `true` or `false`. The floor for any check on
 * this path that reads the headers.
 */
export function handWrittenWebCryptoVerify(
  headers: IncomingHttpHeaders,
  body: Uint8Array,
  key: webcrypto.CryptoKey,
  subtle: webcrypto.SubtleCrypto,
  buffers: Uint8Array<ArrayBuffer>[],
): Promise<boolean> {
  // The same header reading as handWrittenVerify, written out: behind a helper returning the three
  // values, this floor cost 5-8% more with 64 in flight, which would flatter the ratio over it.
  const id = firstValue(headers['webhook-id']);
  const timestamp = firstValue(headers['webhook-timestamp']);
  const signatures = firstValue(headers['webhook-signature']);
  if (!id || !timestamp || !signatures) return Promise.resolve(false);
  const seconds = Number(timestamp);
  if (!Number.isInteger(seconds) || Math.abs(Date.now() / 1000 - seconds) > TOLERANCE_SECONDS) return Promise.resolve(false);
  const prefix = `${id}.${timestamp}.`;
  const buffer = buffers.pop() ?? new Uint8Array(4096);
  const { read, written } = headerPrefix.encodeInto(prefix, buffer);
  if (read !== prefix.length || written + body.length > buffer.length) throw new Error('the hand-written WebCrypto check handles bodies under 4 KiB only');
  buffer.set(body, written);
  return subtle.sign('HMAC', key, buffer.subarray(0, written + body.length)).then((mac) => {
    buffers.push(buffer);
    return handWrittenMatch(signatures, new Uint8Array(mac));
  });
}

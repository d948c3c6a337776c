/**
 * A request as a test holds it: a Fetch `Request`, or headers and the raw body in one of the
 * shapes servers and mocks record them in. Plus the few words that describe one in a message.
 */

import { toBytes, toHex } from '../lib/encoding.ts';
import type { HeadersInput } from '../headers.ts';
import type { WebhookInput } from '../verify.ts';

/**
 * A request a test recorded: a Fetch `Request` (its body is read from a clone, so the test can
 * still read it afterwards), `{ headers, body }` (Node's `req.headers` and a raw `Buffer`, for
 * example), or `{ headers, rawBody }` (Fastify with a raw-body plugin, Next.js pages with
 * `bodyParser: false`).
 *
 * @example
 * ```ts
 * import type { RecordedRequest } from 'webhook-receiver/testing';
 * const recorded: RecordedRequest = { headers: req.headers, rawBody: req.rawBody };
 * ```
 */
export type RecordedRequest =
  | Request
  | { headers: WebhookInput['headers']; body: WebhookInput['body'] }
  | { headers: Record<string, string | string[] | undefined>; rawBody: Uint8Array | string };

function isRequest(value: object): value is Request {
  // Duck-typed rather than `instanceof Request`: undici's, Bun's and a polyfill's classes differ.
  const candidate = value as Partial<Request>;
  return typeof candidate.clone === 'function' && typeof candidate.arrayBuffer === 'function' && typeof candidate.headers?.get === 'function';
}

function checkHeaders(headers: unknown): HeadersInput {
  if (typeof headers !== 'object' || headers === null) {
    throw new TypeError('the recorded request has no headers object: pass a Request, { headers, body } or { headers, rawBody }');
  }
  return headers as HeadersInput;
}

/** The headers of a recorded request, without touching its body. */
export function recordedHeaders(request: RecordedRequest): HeadersInput {
  if (typeof request !== 'object' || request === null) {
    throw new TypeError('expected a recorded request: a Request, { headers, body } or { headers, rawBody }');
  }
  return checkHeaders((request as { headers?: unknown }).headers);
}

/** Headers and the exact body bytes of a recorded request. A `Request`'s body is read from a clone. */
export async function readRecorded(request: RecordedRequest): Promise<{ headers: HeadersInput; body: Uint8Array }> {
  const headers = recordedHeaders(request);
  if (isRequest(request)) {
    if (request.bodyUsed || request.body?.locked === true) {
      throw new TypeError(
        'the Request body was already read, so the bytes that were signed are gone: assert before reading it, or pass request.clone()',
      );
    }
    return { headers, body: new Uint8Array(await request.clone().arrayBuffer()) };
  }
  const record = request as { body?: unknown; rawBody?: unknown };
  const raw = 'rawBody' in record ? record.rawBody : record.body;
  const field = 'rawBody' in record ? 'rawBody' : 'body';
  if (raw === undefined || raw === null) {
    throw new TypeError(`the recorded request has no ${field}: record the raw body bytes (an empty body is '' or an empty Uint8Array)`);
  }
  if (typeof raw === 'string' || raw instanceof Uint8Array || raw instanceof ArrayBuffer || ArrayBuffer.isView(raw)) {
    return { headers, body: toBytes(raw as string | Uint8Array | ArrayBuffer) };
  }
  // The classic mistake of receivers: a JSON parser ran first.
  throw new TypeError(
    `the recorded request's ${field} is a parsed ${Array.isArray(raw) ? 'array' : typeof raw}, not the raw bytes: a JSON body parser ` +
      'ran before it was recorded, and re-serialising it does not give back the signed bytes. Record the raw body ' +
      "(express.raw({ type: 'application/json' }), a Fastify raw-body parser, or await request.arrayBuffer())",
  );
}

const SHORT_BODY_BYTES = 256;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The body as UTF-8 text, or `undefined` when it is not valid UTF-8. */
export function bodyText(body: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(body);
  } catch {
    return undefined;
  }
}

/** Lower-case hex of the body's SHA-256 (WebCrypto: every runtime has it). */
async function sha256Hex(body: Uint8Array): Promise<string> {
  return toHex(new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', body as Uint8Array<ArrayBuffer>)));
}

/** A short body as quoted text; a long or binary one as its length and SHA-256. */
export async function describeBody(body: Uint8Array): Promise<string> {
  const text = bodyText(body);
  if (text !== undefined && body.byteLength <= SHORT_BODY_BYTES) return `${body.byteLength} bytes: ${JSON.stringify(text)}`;
  return `${body.byteLength} bytes${text === undefined ? ' (not UTF-8)' : ''}, SHA-256 ${await sha256Hex(body)}`;
}

/** A header value as received, quoted and shortened. */
export function quoted(value: string, max = 80): string {
  return JSON.stringify(value.length > max ? `${value.slice(0, max)}…` : value);
}

/**
 * The entries of a signature header as found, shortened: enough to compare by eye, never a
 * whole signature (a received one is public anyway, but a short form keeps messages readable).
 */
export function describeSignatureHeader(header: string): string {
  const entries = header.split(' ');
  const shown = entries.slice(0, 8).map((entry) => {
    const comma = entry.indexOf(',');
    if (comma < 0) return `${quoted(entry, 12)} (no 'version,' prefix)`;
    const signature = entry.slice(comma + 1);
    const short = signature.length > 10 ? `${signature.slice(0, 10)}…` : signature;
    return `${entry.slice(0, comma + 1)}${short} (${signature.length} chars)`;
  });
  if (entries.length > shown.length) shown.push(`and ${entries.length - shown.length} more`);
  return `${entries.length} ${entries.length === 1 ? 'entry' : 'entries'}: ${shown.join(', ')}`;
}

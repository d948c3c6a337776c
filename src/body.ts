/**
 * Reading a Fetch `Request` body without ever holding more than the limit in memory, and the one
 * rule for `Content-Encoding` that every reader of a body stream applies (this one and the Node
 * adapters' `collectNodeBody`).
 */

import { concatChunks } from './lib/encoding.ts';
import { bodyUnavailable, WebhookError } from './errors.ts';

/**
 * 1 MiB: the default `maxBodyBytes`.
 *
 * @example
 * ```ts
 * import { createVerifier, DEFAULT_MAX_BODY_BYTES } from 'webhook-receiver';
 * const verifier = createVerifier({ secrets, maxBodyBytes: 4 * DEFAULT_MAX_BODY_BYTES });
 * ```
 */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export function payloadTooLarge(limit: number, declared?: number): WebhookError {
  const size = declared === undefined ? 'more than' : `${declared} bytes, over`;
  return new WebhookError('PAYLOAD_TOO_LARGE', `request body is ${size} the limit of ${limit} bytes (maxBodyBytes)`);
}

/**
 * The content codings a body stream is decoded from: the two every runtime's
 * `DecompressionStream` has. `Content-Encoding` is transport (RFC 9110 section 8.4): the sender
 * signs the payload, so the signature covers the decoded bytes.
 */
export type ContentCoding = 'gzip' | 'deflate';

function unsupportedEncoding(message: string, cause?: unknown): WebhookError {
  return new WebhookError('UNSUPPORTED_ENCODING', message, cause === undefined ? undefined : { cause });
}

/**
 * The coding a `content-encoding` header names: `undefined` for none (absent, empty or
 * `identity`), `'gzip'` (or `x-gzip`) or `'deflate'`. Anything else, `br` and `zstd` included,
 * and more than one coding, is refused with `UNSUPPORTED_ENCODING` (415): some runtimes could not
 * decode it, and a request must not pass on one runtime and fail on another.
 */
export function contentCoding(header: string | readonly string[] | null | undefined): ContentCoding | undefined {
  if (header === null || header === undefined) return undefined;
  const joined = typeof header === 'string' ? header : header.join(',');
  const codings = joined
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');
  if (codings.length === 0) return undefined;
  if (codings.length === 1) {
    const [coding] = codings;
    if (coding === 'gzip' || coding === 'x-gzip') return 'gzip';
    if (coding === 'deflate') return 'deflate';
  }
  throw unsupportedEncoding(
    `content-encoding ${JSON.stringify(joined.length > 40 ? `${joined.slice(0, 40)}…` : joined)} is not supported: ` +
      'send the body as is, or compressed once with gzip or deflate',
  );
}

/** Why a body could not be read: too large, or (for a decoded one) not valid data of its coding. */
interface ReadFailures {
  tooLarge: () => WebhookError;
  /** Maps an error the stream raised; default: rethrown as it is. */
  failed?: (error: unknown) => unknown;
}

/**
 * Reads `stream` to its end, refusing with `tooLarge()` as soon as more than `limit` bytes came
 * out of it: reading stops there, and what was not read is cancelled, never buffered.
 */
async function readLimited(stream: ReadableStream<Uint8Array>, limit: number, { tooLarge, failed }: ReadFailures): Promise<Uint8Array> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (error) {
        throw failed === undefined ? error : failed(error);
      }
      if (next.done) break;
      total += next.value.byteLength;
      if (total > limit) {
        // Not awaited: the cancel of a cloned request's stream waits for the clone to be read.
        void reader.cancel().catch(() => undefined);
        throw tooLarge();
      }
      chunks.push(next.value);
    }
  } finally {
    reader.releaseLock();
  }
  return chunks.length === 1 ? chunks[0]! : concatChunks(chunks, total);
}

function decodedTooLarge(limit: number): WebhookError {
  return new WebhookError(
    'PAYLOAD_TOO_LARGE',
    `request body decompresses to more than the limit of ${limit} bytes (maxBodyBytes applies to the decoded body)`,
  );
}

/**
 * `source` decoded from `coding`, read up to `limit` decoded bytes. A `WebhookError` the source
 * raised (its own byte limit) passes through; any other failure means the bytes are not valid
 * data of their coding.
 */
function readDecoded(source: ReadableStream<Uint8Array>, coding: ContentCoding, limit: number): Promise<Uint8Array> {
  const decoded = source.pipeThrough(new DecompressionStream(coding) as unknown as ReadableWritablePair<Uint8Array, Uint8Array>);
  return readLimited(decoded, limit, {
    tooLarge: () => decodedTooLarge(limit),
    failed: (error) =>
      error instanceof WebhookError ? error : unsupportedEncoding(`the request body is not valid ${coding} data, as its content-encoding says it is`, error),
  });
}

/**
 * `bytes` decoded from `coding`, refused with `PAYLOAD_TOO_LARGE` as soon as the decoded size
 * passes `limit`: decompression stops there, so a small body that inflates to gigabytes costs no
 * more than the limit. A body that is not valid data of its coding is `UNSUPPORTED_ENCODING`.
 */
export function decodeBody(bytes: Uint8Array, coding: ContentCoding, limit: number): Promise<Uint8Array> {
  if (bytes.byteLength === 0) return Promise.resolve(bytes);
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
  return readDecoded(source, coding, limit);
}

/**
 * A body received whole (a Lambda event's, or one a framework already read), as the signature
 * covers it: decoded by its `content-encoding` ({@link contentCoding}: 415 for a coding other
 * than gzip or deflate), `PAYLOAD_TOO_LARGE` past `limit` bytes as received or once decoded.
 */
export async function decodedBody(bytes: Uint8Array, encoding: string | readonly string[] | null | undefined, limit: number): Promise<Uint8Array> {
  const coding = contentCoding(encoding);
  if (bytes.byteLength > limit) throw payloadTooLarge(limit, bytes.byteLength);
  return coding === undefined ? bytes : decodeBody(bytes, coding, limit);
}

/** `content-length` as a number when it is a plain decimal, else `undefined`. */
export function declaredLength(value: string | null | undefined): number | undefined {
  if (value === null || value === undefined || !/^[0-9]{1,16}$/.test(value)) return undefined;
  return Number(value);
}

/**
 * Reads `request`'s body, refusing with `PAYLOAD_TOO_LARGE` as soon as it passes `limit` bytes
 * (or at once, when `content-length` already says so). Stops reading there: what was not read is
 * cancelled, never buffered. A body sent with `content-encoding: gzip` or `deflate` is decoded,
 * the limit applying to the bytes received and to the decoded ones ({@link decodeBody}).
 */
export function readRequestBody(request: Request, limit: number): Promise<Uint8Array> {
  // Before reading: an encoding no runtime can be relied on to decode is refused unread.
  let coding: ContentCoding | undefined;
  try {
    if (request.bodyUsed) throw bodyUnavailable(READ_FIRST_HINT);
    coding = contentCoding(request.headers.get('content-encoding'));
  } catch (error) {
    return Promise.reject(error);
  }
  return readCodedBody(request, coding, limit);
}

/**
 * {@link readRequestBody} for a caller that already knows the body's coding (it parsed
 * `content-encoding` itself): the header is not read again.
 *
 * An unencoded body whose `content-length` is declared, and within `limit`, is read whole with
 * `arrayBuffer()`: the runtime's HTTP parser frames the body by that length (RFC 9112 section
 * 6.3), so no more than `limit` bytes can arrive, and on Node this skips the web stream a reader
 * would build per request (`@hono/node-server` reads such a body straight off the socket). The
 * size is still checked once read, for a `Request` built by hand with a length that does not hold.
 * A body without a declared length, or an encoded one, is read chunk by chunk and counted as it
 * arrives.
 */
export async function readCodedBody(
  request: Request,
  coding: ContentCoding | undefined,
  limit: number,
  /** The `content-length` header when the caller already has it (Node's own header object); else read from `request`. */
  contentLength?: string | null,
): Promise<Uint8Array> {
  // `bodyUsed` first: reading `body` would make some runtimes' lazy requests build their stream.
  if (request.bodyUsed) throw bodyUnavailable(READ_FIRST_HINT);
  const declared = declaredLength(contentLength === undefined ? request.headers.get('content-length') : contentLength);
  if (declared !== undefined && declared > limit) throw payloadTooLarge(limit, declared);
  if (coding === undefined && declared !== undefined) return readWhole(request, limit);
  unread(request);
  const stream = request.body;
  if (stream === null) return new Uint8Array(0);
  if (coding === undefined) return readLimited(stream, limit, { tooLarge: () => payloadTooLarge(limit) });
  // Decoded as it arrives, never joined first: the bytes received count against the limit too
  // (a stream of empty gzip members decodes to nothing, and must still stop).
  return readDecoded(stream.pipeThrough(byteLimit(limit)), coding, limit);
}

/** The body read whole (see {@link readCodedBody}), refused past `limit` all the same. */
async function readWhole(request: Request, limit: number): Promise<Uint8Array> {
  let buffer: ArrayBuffer;
  try {
    buffer = await request.arrayBuffer();
  } catch (error) {
    // A stream someone else locked (took a reader of) without reading it is refused by
    // `arrayBuffer()` with a bare TypeError: say what happened. A stream that failed while read
    // (the client went away) is disturbed, so `bodyUsed` is true and the error passes as it is.
    if (!request.bodyUsed && request.body?.locked === true) throw bodyUnavailable(READ_FIRST_HINT);
    throw error;
  }
  if (buffer.byteLength > limit) throw payloadTooLarge(limit, buffer.byteLength);
  return new Uint8Array(buffer);
}

/** A pass-through that fails with `PAYLOAD_TOO_LARGE` once more than `limit` bytes went through. */
function byteLimit(limit: number): TransformStream<Uint8Array, Uint8Array> {
  let total = 0;
  return new TransformStream({
    transform(chunk, controller) {
      total += chunk.byteLength;
      if (total > limit) controller.error(payloadTooLarge(limit));
      else controller.enqueue(chunk);
    },
  });
}

const READ_FIRST_HINT =
  'the request body was already read (request.json() or request.text() ran first), so the raw bytes that were ' +
  'signed are gone. Verify before reading the body, then use webhook.json() or webhook.text()';

function unread(request: Request): void {
  // A locked stream (someone took its reader) is as gone as a read one; without this check
  // getReader() would throw a bare TypeError.
  if (request.bodyUsed || request.body?.locked === true) throw bodyUnavailable(READ_FIRST_HINT);
}

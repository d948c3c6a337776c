/**
 * Reading a Fetch `Request` body without ever holding more than the limit in memory, and the one
 * rule for `Content-Encoding` that every reader of a body stream applies (this one and the Node
 * adapters' `collectNodeBody`).
 */

import { concatChunks } from './encoding.ts';
import { WebhookError } from './errors.ts';

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

/**
 * `bytes` decoded from `coding`, refused with `PAYLOAD_TOO_LARGE` as soon as the decoded size
 * passes `limit`: decompression stops there, so a small body that inflates to gigabytes costs no
 * more than the limit. A body that is not valid data of its coding is `UNSUPPORTED_ENCODING`.
 */
export async function decodeBody(bytes: Uint8Array, coding: ContentCoding, limit: number): Promise<Uint8Array> {
  if (bytes.byteLength === 0) return bytes;
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
  const reader = source.pipeThrough(new DecompressionStream(coding) as unknown as ReadableWritablePair<Uint8Array, Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (error) {
        throw unsupportedEncoding(`the request body is not valid ${coding} data, as its content-encoding says it is`, error);
      }
      if (next.done) break;
      total += next.value.byteLength;
      if (total > limit) {
        // Not awaited: the cancel of a cloned request's stream waits for the clone to be read.
        void reader.cancel().catch(() => undefined);
        throw new WebhookError(
          'PAYLOAD_TOO_LARGE',
          `request body decompresses to more than the limit of ${limit} bytes (maxBodyBytes applies to the decoded body)`,
        );
      }
      chunks.push(next.value);
    }
  } finally {
    reader.releaseLock();
  }
  return chunks.length === 1 ? chunks[0]! : concatChunks(chunks, total);
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
export async function readRequestBody(request: Request, limit: number): Promise<Uint8Array> {
  // A locked stream (someone took its reader) is as gone as a read one; without this check
  // getReader() below would throw a bare TypeError.
  if (request.bodyUsed || request.body?.locked === true) {
    throw new WebhookError(
      'BODY_UNAVAILABLE',
      'the request body was already read (request.json() or request.text() ran first), so the raw bytes that were ' +
        'signed are gone. Verify before reading the body, then use webhook.json() or webhook.text()',
    );
  }
  // Before reading: an encoding no runtime can be relied on to decode is refused unread.
  const coding = contentCoding(request.headers.get('content-encoding'));
  const declared = declaredLength(request.headers.get('content-length'));
  if (declared !== undefined && declared > limit) throw payloadTooLarge(limit, declared);
  const stream = request.body;
  if (stream === null) return new Uint8Array(0);

  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > limit) {
        // Not awaited: the cancel of a cloned request's stream waits for the clone to be read.
        void reader.cancel().catch(() => undefined);
        throw payloadTooLarge(limit);
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  const received = chunks.length === 1 ? chunks[0]! : concatChunks(chunks, total);
  return coding === undefined ? received : decodeBody(received, coding, limit);
}

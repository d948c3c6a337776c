/**
 * Reading a Fetch `Request` body without ever holding more than the limit in memory.
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

/** `content-length` as a number when it is a plain decimal, else `undefined`. */
export function declaredLength(value: string | null | undefined): number | undefined {
  if (value === null || value === undefined || !/^[0-9]{1,16}$/.test(value)) return undefined;
  return Number(value);
}

/**
 * Reads `request`'s body, refusing with `PAYLOAD_TOO_LARGE` as soon as it passes `limit` bytes
 * (or at once, when `content-length` already says so). Stops reading there: what was not read is
 * cancelled, never buffered.
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
        await reader.cancel().catch(() => undefined);
        throw payloadTooLarge(limit);
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  return chunks.length === 1 ? chunks[0]! : concatChunks(chunks, total);
}

/**
 * What the Express and Fastify adapters share about Node's HTTP objects: reading a request
 * stream with a byte limit (the Node twin of the core's `readRequestBody`), and settling a claim
 * by how the response ended. Internal: not an entry point.
 */

import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { declaredLength, payloadTooLarge } from '../src/body.ts';
import { settleClaim } from '../src/http.ts';
import type { Claim } from '../src/receiver.ts';

/**
 * Completes `claim` when `res` finishes with a 2xx and releases it when it finishes with another
 * status or closes before finishing (the client left mid-response).
 *
 * Node emits 'finish' before 'close' on a response that was sent, and the first settlement of a
 * claim wins, so the release on 'close' is then a no-op. Settling on 'finish' itself, rather than
 * in a later hook, keeps that order even when other code awaits between the two events.
 */
export function settleWhenSent(res: ServerResponse, claim: Pick<Claim, 'complete' | 'release'>): void {
  res.once('finish', () => void settleClaim(claim, res.statusCode));
  res.once('close', () => void claim.release());
}

/**
 * Reads `stream` to its end and returns a copy of its bytes, refusing with `PAYLOAD_TOO_LARGE`
 * at once when `content-length` declares more than `limit`, and as soon as more than `limit`
 * bytes arrived otherwise.
 *
 * On refusal the stream is paused and left: nothing past the limit is buffered or drained, so
 * the caller should answer with `connection: close` (Node then closes the socket instead of
 * reading the rest of the upload to keep the connection alive).
 *
 * The bytes are copied even when they arrived in one chunk: a chunk may be a view into a buffer
 * the socket reuses, and the verified body outlives the request.
 */
export function readNodeBody(stream: Readable, limit: number, contentLength: string | undefined): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (stream.readableEnded || stream.destroyed) {
      // Listening now would wait forever for an 'end' that already happened.
      reject(new Error('the request body stream was already read or destroyed'));
      return;
    }
    const declared = declaredLength(contentLength);
    if (declared !== undefined && declared > limit) {
      reject(payloadTooLarge(limit, declared));
      return;
    }
    const chunks: Buffer[] = [];
    let total = 0;

    const stop = (): void => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    function onData(chunk: Buffer | string): void {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      total += bytes.byteLength;
      if (total > limit) {
        stop();
        stream.pause();
        chunks.length = 0;
        reject(payloadTooLarge(limit));
        return;
      }
      chunks.push(bytes);
    }
    function onEnd(): void {
      stop();
      resolve(Buffer.concat(chunks, total));
    }
    function onError(error: Error): void {
      stop();
      reject(error);
    }
    function onClose(): void {
      // 'close' before 'end': the client went away mid-upload (Node emits no 'error' for that
      // on every version).
      stop();
      // A client error, as body parsers report it (status 400), not a server fault.
      reject(Object.assign(new Error('the request was closed before its body was received'), { status: 400, statusCode: 400 }));
    }

    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
    stream.resume();
  });
}

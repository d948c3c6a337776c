/**
 * What the Node adapters (Express, Fastify, Koa, NestJS) share about Node's HTTP objects: reading
 * a request stream with a byte limit (the Node twin of the core's `readRequestBody`), the raw body
 * a parser kept, and settling a claim by how the response ended. Internal: not an entry point.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { contentCoding, declaredLength, decodeBody, payloadTooLarge } from '../src/body.ts';
import { bodyUnavailable, type WebhookError } from '../src/errors.ts';
import { settleClaim } from '../src/http.ts';
import type { Claim } from '../src/receiver.ts';

type Settles = Pick<Claim, 'complete' | 'release'>;

/**
 * The claim a response settles, kept on the response: the two listeners below are then shared
 * by every request instead of being two closures made for each one.
 */
const CLAIM = Symbol('webhook-receiver claim');

interface ClaimedResponse extends ServerResponse {
  [CLAIM]?: Settles | undefined;
}

/**
 * `true` when the client is gone: the response was destroyed (its 'close' already fired) or the
 * socket was. Checked after the body was read and the claim taken, when a listener added now
 * would never hear a 'close' that already happened (a parser such as `express.raw()` can read
 * the body of a client that then leaves, before this package's middleware runs).
 */
export function clientLeft(req: IncomingMessage, res: ServerResponse): boolean {
  return res.destroyed || req.socket?.destroyed === true;
}

/**
 * Settles `claim` by how the handler ends `res`: completed when it answers a 2xx, released for
 * any other status. Whether the client is still there plays no part: a sender that
 * timed out retries, and a handler that succeeded meanwhile must not run again for that retry.
 *
 * Node emits 'finish' once a response was handed over, which settles it. When the connection
 * closes first, the handler may still be working: the claim stays held (and renewed) until the
 * handler ends its response, and is then settled by the status it set. Express's `res.send()`,
 * `res.json()`, its final error handler and Fastify's `reply.send()` (errors included) all end
 * the response through `res.end()`, also after the client left, so that call marks the end of
 * the handler's work. A handler that never ends its response keeps the claim renewed for as long
 * as the process runs; meanwhile a retry is answered 409 `IN_PROGRESS`.
 *
 * Settling on 'finish' itself, rather than in a later hook, keeps the order right even when
 * other code awaits between the two events.
 */
export function settleWhenSent(res: ServerResponse, claim: Settles): void {
  (res as ClaimedResponse)[CLAIM] = claim;
  // `on`, not `once`: each event fires once per response, and `once` would wrap the listener.
  res.on('finish', settleOnFinish);
  res.on('close', settleOnClose);
}

// The settleClaim calls below are not awaited: the response has gone, and a claim's complete()
// and release() never reject (store failures go to onError).
function settleOnFinish(this: ClaimedResponse): void {
  const claim = this[CLAIM];
  if (claim === undefined) return;
  this[CLAIM] = undefined;
  void settleClaim(claim, this.statusCode);
}

function settleOnClose(this: ClaimedResponse): void {
  const claim = this[CLAIM];
  if (claim === undefined) return;
  this[CLAIM] = undefined;
  // The handler already ended its response, which could not be delivered: its status stands.
  if (this.writableEnded) void settleClaim(claim, this.statusCode);
  else settleWhenEnded(this, claim);
}

/** Settles `claim` by the status the handler set once it ends `res`. Only this rare path wraps `end`. */
function settleWhenEnded(res: ServerResponse, claim: Settles): void {
  const end = res.end;
  res.end = function endThenSettle(this: ServerResponse, ...args: unknown[]) {
    res.end = end;
    void settleClaim(claim, res.statusCode);
    return (end as (...args: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['end'];
}

/** Called once with the body, or with why it could not be read. */
export type BodyCallback = (error: Error | null, body?: Buffer) => void;

/** The request headers the body reader heeds. */
export interface BodyHeaders {
  'content-length'?: string | undefined;
  'content-encoding'?: string | string[] | undefined;
}

/**
 * Reads `stream` to its end and calls back with a copy of its bytes, refusing with
 * `PAYLOAD_TOO_LARGE` at once when `content-length` declares more than `limit`, and as soon as
 * more than `limit` bytes arrived otherwise. A callback rather than a promise: the adapters
 * hand the body straight to the framework's next step, and a promise would only add a turn.
 *
 * On refusal the stream is paused and left: nothing past the limit is buffered or drained, so
 * the caller should answer with `connection: close` (Node then closes the socket instead of
 * reading the rest of the upload to keep the connection alive).
 *
 * The bytes are copied even when they arrived in one chunk: a chunk may be a view into a buffer
 * the socket reuses, and the verified body outlives the request.
 *
 * A body sent with `content-encoding: gzip` or `deflate` is decoded by the core's rule
 * (`contentCoding`, `decodeBody`), as the Fetch path decodes it: the limit applies to the bytes
 * received and to the decoded ones; any other encoding is `UNSUPPORTED_ENCODING`, unread.
 */
export function collectNodeBody(stream: Readable, limit: number, headers: BodyHeaders, callback: BodyCallback): void {
  if (stream.readableEnded || stream.destroyed) {
    // Listening now would wait forever for an 'end' that already happened.
    callback(new Error('the request body stream was already read or destroyed'));
    return;
  }
  let coding: ReturnType<typeof contentCoding>;
  try {
    coding = contentCoding(headers['content-encoding']);
  } catch (error) {
    callback(error as Error);
    return;
  }
  const declared = declaredLength(headers['content-length']);
  if (declared !== undefined && declared > limit) {
    callback(payloadTooLarge(limit, declared));
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
      callback(payloadTooLarge(limit));
      return;
    }
    chunks.push(bytes);
  }
  function onEnd(): void {
    stop();
    const received = Buffer.concat(chunks, total);
    if (coding === undefined) {
      callback(null, received);
      return;
    }
    decodeBody(received, coding, limit).then(
      (decoded) => callback(null, Buffer.from(decoded.buffer, decoded.byteOffset, decoded.byteLength)),
      (error: unknown) => callback(error as Error),
    );
  }
  function onError(error: Error): void {
    stop();
    callback(error);
  }
  function onClose(): void {
    // 'close' before 'end': the client went away mid-upload (Node emits no 'error' for that
    // on every version).
    stop();
    // A client error, as body parsers report it (status 400), not a server fault.
    callback(Object.assign(new Error('the request was closed before its body was received'), { status: 400, statusCode: 400 }));
  }

  stream.on('data', onData);
  stream.on('end', onEnd);
  stream.on('error', onError);
  stream.on('close', onClose);
  stream.resume();
}

/** {@link collectNodeBody} as a promise, for callers that await the body. */
export function readNodeBody(stream: Readable, limit: number, headers: BodyHeaders): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    collectNodeBody(stream, limit, headers, (error, body) => {
      if (error === null) resolve(body!);
      else reject(error);
    });
  });
}

/**
 * `UNSUPPORTED_ENCODING` for a `content-encoding` the core refuses, else `undefined`. For a body
 * a parser kept: the parser already decoded it (body-parser and co-body inflate gzip, deflate and
 * br), so nothing is decoded twice, but what the other adapters refuse is refused here too, so
 * no request passes on one framework and fails on another.
 */
export function encodingRefusal(header: string | string[] | undefined): WebhookError | undefined {
  try {
    contentCoding(header);
    return undefined;
  } catch (error) {
    return error as WebhookError;
  }
}

/**
 * The raw body of `req`: `kept`, what a body parser kept of it (already decoded, refused for an
 * encoding the core refuses); else the stream, read here with the limit and decoded
 * ({@link collectNodeBody}); else, when a parser consumed the stream without keeping it,
 * `BODY_UNAVAILABLE` with `consumedHint` (the framework's fix, for the log).
 */
export function rawBodyOf(kept: unknown, req: IncomingMessage, limit: number, consumedHint: string): Promise<Uint8Array | string> {
  if (typeof kept === 'string' || kept instanceof Uint8Array) {
    const refused = encodingRefusal(req.headers['content-encoding']);
    return refused === undefined ? Promise.resolve(kept) : Promise.reject(refused);
  }
  // The stream's own state says whether a parser read it.
  if (req.readableEnded || req.readableDidRead) return Promise.reject(bodyUnavailable(consumedHint));
  return readNodeBody(req, limit, req.headers);
}

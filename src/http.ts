/**
 * The one table every adapter answers from, so Express, Fastify, Hono and Fetch endpoints send
 * the same statuses, headers and bodies. Errors use the relay service's own envelope:
 * `{ "error": "CODE", "message": "…" }`.
 */

import { DEFAULT_MAX_BODY_BYTES } from './body.ts';
import { handlerFailure, isWebhookError, type WebhookError } from './errors.ts';
import type { HeadersInput } from './headers.ts';
import { logRejection, type WebhookLogger } from './logger.ts';
import { rejectionContext, tenantOfError, type RejectionContext } from './rejection.ts';
import { observerOf } from './receiver/entries.ts';
import { createReceiver, type AcceptResult, type Claim, type Receiver, type ReceiverOptions } from './receiver.ts';
import { noteAnswer, traceOf, type Observer } from './telemetry.ts';

export type { RejectionContext };

/**
 * A framework-neutral response: adapters copy it onto their own response object.
 *
 * @example
 * ```ts
 * const { status, headers, body } = errorResponse(error);
 * return new Response(body, { status, headers });
 * ```
 */
export interface WebhookResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Seconds a sender should wait after a 503 (`STORE_UNAVAILABLE`, `UNSIGNED_LIMIT`, `INBOX_UNAVAILABLE`) before retrying
 * (the `Retry-After` value).
 *
 * @example
 * ```ts
 * import { STORE_UNAVAILABLE_RETRY_AFTER_SECONDS } from 'webhook-receiver';
 * res.set('retry-after', String(STORE_UNAVAILABLE_RETRY_AFTER_SECONDS));
 * ```
 */
export const STORE_UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

const JSON_HEADERS = { 'content-type': 'application/json' } as const;

/**
 * The response for a rejected request: the error's status and the `{ error, message }` envelope
 * (`Retry-After` too with every 503: `STORE_UNAVAILABLE`, `UNSIGNED_LIMIT`, `INBOX_UNAVAILABLE`, `KEYS_UNAVAILABLE`…; and with
 * `ENTITY_BUSY`, the seconds the entity's lock still holds).
 *
 * @example
 * ```ts
 * import { errorResponse, isWebhookError } from 'webhook-receiver';
 * if (isWebhookError(error)) { const r = errorResponse(error); res.writeHead(r.status, r.headers).end(r.body); }
 * ```
 */
export function errorResponse(error: WebhookError): WebhookResponse {
  // Every 503 asks the sender to come back later, and says when; so does ENTITY_BUSY (its lock's time left).
  // An error that knows its own pause says it (ENTITY_BUSY, KEYS_UNAVAILABLE); every other 503 gets the store's.
  const retryAfter = error.retryAfterSeconds ?? (error.status === 503 ? STORE_UNAVAILABLE_RETRY_AFTER_SECONDS : undefined);
  const headers: Record<string, string> = retryAfter === undefined ? { ...JSON_HEADERS } : { ...JSON_HEADERS, 'retry-after': String(retryAfter) };
  return { status: error.status, headers, body: JSON.stringify({ error: error.code, message: error.message }) };
}

/**
 * The response for a claim that must not run the handler: 200 `{ "duplicate": true }` for an id
 * already processed, 200 `{ "stale": true }` for an older version than one already processed
 * (ordering), 409 `IN_PROGRESS` with `Retry-After` for one being processed now. `undefined`
 * for an acquired claim: the handler answers.
 *
 * @example
 * ```ts
 * const claim = await receiver.claim(request);
 * const early = claimResponse(claim);
 * if (early) return new Response(early.body, early);
 * ```
 */
export function claimResponse(claim: Pick<Claim, 'outcome' | 'retryAfterSeconds'>): WebhookResponse | undefined {
  if (claim.outcome === 'duplicate') return { status: 200, headers: { ...JSON_HEADERS }, body: '{"duplicate":true}' };
  // Ordering: an older version than one already processed. 200, so the sender stops retrying.
  if (claim.outcome === 'stale') return { status: 200, headers: { ...JSON_HEADERS }, body: '{"stale":true}' };
  if (claim.outcome === 'in_progress') {
    const seconds = claim.retryAfterSeconds ?? 1;
    return {
      status: 409,
      headers: { ...JSON_HEADERS, 'retry-after': String(seconds) },
      body: JSON.stringify({ error: 'IN_PROGRESS', message: `another delivery of this webhook is being processed; retry in ${seconds} s` }),
    };
  }
  return undefined;
}

/**
 * The answer to an accepted delivery (`receiver.accept`): 202 `{ "enqueued": true }` once the
 * inbox acknowledged the job, and a duplicate or an id in progress answered as {@link claimResponse}
 * answers them.
 *
 * @example
 * ```ts
 * const answer = acceptResponse(await receiver.accept(request));
 * return new Response(answer.body, answer);
 * ```
 */
export function acceptResponse(result: Pick<AcceptResult, 'outcome'> & { retryAfterSeconds?: number }): WebhookResponse {
  if (result.outcome === 'enqueued') return { status: 202, headers: { ...JSON_HEADERS }, body: '{"enqueued":true}' };
  return claimResponse({ outcome: result.outcome, retryAfterSeconds: result.retryAfterSeconds })!;
}

/**
 * Completes the claim when the handler's response is a 2xx, and releases it otherwise, so a
 * failed delivery is retried and a successful one is never run again. The connection plays no
 * part: a handler that succeeded after its client left still completes, so the sender's retry
 * is answered as a duplicate rather than run a second time.
 *
 * @example
 * ```ts
 * res.on('finish', () => void settleClaim(claim, res.statusCode));
 * ```
 */
export function settleClaim(claim: Pick<Claim, 'complete' | 'release'>, status: number): Promise<void> {
  noteAnswer(claim, status);
  return status >= 200 && status < 300 ? claim.complete() : claim.release();
}

/**
 * Options shared by every adapter: the receiver's, plus a hook for rejected requests.
 *
 * @example
 * ```ts
 * const options: AdapterOptions = { secrets: process.env.WEBHOOK_SECRET!, onRejected: () => {} };
 * ```
 */
export interface AdapterOptions extends ReceiverOptions {
  /**
   * Called for every rejected request, for logging or counting. Default: a warning through
   * `logger` (structured fields: code, status, webhookId, method, path, and with tenant keys
   * tenant) or one `console.warn` line (messages never contain secrets). Pass `() => {}` to
   * silence it.
   */
  onRejected?: (error: WebhookError, context: RejectionContext) => void;
}

/** The `onRejected` an adapter uses: the user's, made safe to call, or the default log line. */
function rejectionReporter(
  options: AdapterOptions,
): (error: WebhookError, context: RejectionContext, logger?: WebhookLogger) => void {
  const hook = options.onRejected;
  if (hook !== undefined && typeof hook !== 'function') throw new TypeError('onRejected must be a function');
  return (error, context, logger = options.logger) => {
    try {
      if (hook) hook(error, context);
      else logRejection(logger, error, context);
    } catch {
      // A failing logger must not change the response.
    }
  };
}

/**
 * A platform's way to keep work going after the response was sent (Workers' `ctx.waitUntil`,
 * Vercel's `waitUntil`, Next.js's `after`).
 *
 * @example
 * ```ts
 * import { after } from 'next/server';
 * const waitUntil: WaitUntil = (promise) => after(promise);
 * ```
 */
export type WaitUntil = (promise: Promise<unknown>) => void;

/**
 * The answer to an error a handler threw, when it is a refusal of the payload (`INVALID_PAYLOAD`,
 * `PERMANENT_FAILURE`: a `WebhookError` below 500), or a store that failed under it (a
 * `StoreError`, answered 503 `STORE_UNAVAILABLE` with `Retry-After`, so the sender retries later):
 * its envelope. `undefined` for anything else, a server fault the platform answers and logs as its
 * own. The one rule for every adapter, and for Express's error handler. Internal: not an entry point.
 */
export function handlerRefusal(error: unknown): WebhookResponse | undefined {
  const failure = handlerFailure(error);
  return isWebhookError(failure) && (failure.status < 500 || failure.code === 'STORE_UNAVAILABLE') ? errorResponse(failure) : undefined;
}

/** {@link AdapterFlow.admit}'s answer when the client left before the handler: nothing to send. */
export const CLIENT_GONE = 'client-gone';

/**
 * The one flow every adapter follows around the receiver, so that each adapter is translation
 * only (read the raw bytes and headers, write the answer):
 *
 * 1. `refuse`: a rejected request is reported and answered from the one table;
 * 2. `admit`: a duplicate or an id in flight is answered at once; a client already gone gets its
 *    claim released and the handler is not run; otherwise the handler runs;
 * 3. `run` (handlers the adapter calls itself) or {@link settleClaim} (handlers that answer
 *    through a response object): success completes, failure releases, whatever the connection.
 *
 * Internal: the adapters' shared core, not a public entry point.
 */
export class AdapterFlow {
  readonly receiver: Receiver;
  /** `maxBodyBytes`, for adapters that read the body themselves. */
  readonly limit: number;
  /**
   * Whether the receiver has tenant keys: the request's method, path, host and route parameters
   * matter then, and an adapter whose framework builds them per call reads them only in that case.
   */
  readonly tenants: boolean;
  readonly #report: (error: WebhookError, context: RejectionContext, logger?: WebhookLogger) => void;
  /** Looked up once here rather than on every request. */
  readonly #observer: Observer | undefined;

  constructor(options: AdapterOptions) {
    this.receiver = createReceiver(options);
    this.#observer = observerOf(this.receiver);
    this.#report = rejectionReporter(options);
    this.limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.tenants = options.keys !== undefined;
  }

  /**
   * The answer to a request the receiver refused; anything but a `WebhookError` is rethrown.
   * `logger` is the request's own (Fastify's `request.log`), used when the app gave none.
   */
  refuse(error: unknown, method: string, url: string, headers: HeadersInput, logger?: WebhookLogger): WebhookResponse {
    if (!isWebhookError(error)) throw error;
    const context = rejectionContext(method, url, headers);
    const tenant = tenantOfError(error);
    if (tenant !== undefined) context.tenant = tenant;
    this.#observer?.refused(error, context.webhookId);
    this.#report(error, context, logger);
    return errorResponse(error);
  }

  /**
   * A handler's error as the answer it deserves, once its claim was released: a refusal of the
   * payload, or a store that failed under it, becomes its envelope (`handlerRefusal`); any other error is rethrown
   * for the platform to answer (and log) as its own failure.
   */
  refusalOf(error: unknown): WebhookResponse {
    const refusal = handlerRefusal(error);
    if (refusal === undefined) throw error;
    return refusal;
  }

  /**
   * {@link AdapterFlow.run}, answered: the handler's own answer, or, when it refused the payload
   * (`INVALID_PAYLOAD`, `PERMANENT_FAILURE`: a `WebhookError` below 500) or let a `StoreError`
   * through (503 `STORE_UNAVAILABLE`), its claim released and the envelope written by `refused`; any other error is rethrown for the platform. The one flow of
   * the adapters that call or await the handler themselves.
   */
  async runOrRefuse<R, A>(
    claim: Claim,
    handler: () => R | Promise<R>,
    statusOf: (result: R) => number,
    refused: (response: WebhookResponse) => A,
    waitUntilOf?: () => WaitUntil | undefined,
  ): Promise<R | A> {
    try {
      return await this.run(claim, handler, statusOf, waitUntilOf);
    } catch (error) {
      return refused(this.refusalOf(error));
    }
  }

  /**
   * What happens to a claimed delivery before its handler: an answer that ends it here, or
   * {@link CLIENT_GONE} (the claim was released: nobody will read an answer, and the sender
   * retries), or `undefined`: run the handler.
   */
  admit(claim: Claim, clientLeft: boolean): WebhookResponse | typeof CLIENT_GONE | undefined {
    const early = claimResponse(claim);
    if (early !== undefined) return early;
    if (!clientLeft) return undefined;
    noteAnswer(claim, 499);
    // Not awaited: nobody is left to answer. release() never rejects (store failures go to onError).
    void claim.release();
    return CLIENT_GONE;
  }

  /**
   * Runs `fn` (the framework's `next()`) with the delivery's span active, so the handler's own
   * spans nest under `webhook.receive`. Just calls it when telemetry is off.
   */
  within<R>(claim: Claim, fn: () => R): R {
    const trace = traceOf(claim);
    return trace === undefined ? fn() : this.#observer!.within(trace, fn);
  }

  /**
   * Runs a handler the adapter calls itself and settles the claim by its result: `statusOf` its
   * answer (2xx completes, anything else releases), a throw releases and propagates. Background
   * work left after the completion goes to the platform's `waitUntil` (`waitUntilOf` is asked
   * only then: finding it can cost, as Hono's `executionCtx` throws off Workers), or is awaited
   * where there is none, so a runtime that stops once the answer is sent does not lose it.
   */
  async run<R>(claim: Claim, handler: () => R | Promise<R>, statusOf: (result: R) => number, waitUntilOf?: () => WaitUntil | undefined): Promise<R> {
    let result: R;
    try {
      result = await this.within(claim, handler);
    } catch (error) {
      // As answered: a StoreError is the store's outage (503 STORE_UNAVAILABLE), not a 500.
      noteAnswer(claim, undefined, handlerFailure(error));
      await claim.release();
      throw error;
    }
    await settleClaim(claim, statusOf(result));
    const pending = claim.pending();
    if (pending !== undefined) {
      const waitUntil = waitUntilOf?.();
      if (waitUntil !== undefined) waitUntil(pending);
      else await pending;
    }
    return result;
  }
}

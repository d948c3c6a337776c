/**
 * verify -> claim -> run the handler -> complete (success) or release (failure).
 *
 * Delivery is at-least-once and `webhook-id` is the idempotency key, so a handler runs to success
 * at most once per id, and a handler that fails releases its claim so the sender's retry runs it.
 */

import { WebhookError } from './errors.ts';
import { memoryStore } from './stores/memory.ts';
import { syncOperations, type SyncOperations } from './stores/internal.ts';
import type { ClaimResult, IdempotencyStore } from './stores/types.ts';
import { createVerifier, type VerifiedWebhook, type Verifier, type VerifierOptions, type WebhookInput } from './verify.ts';

/**
 * How deliveries of the same `webhook-id` are deduplicated.
 *
 * @example
 * ```ts
 * import type { IdempotencyOptions } from 'webhook-receiver';
 * const idempotency: IdempotencyOptions = { ttlSeconds: 7 * 86_400, lockSeconds: 30, namespace: 'billing' };
 * ```
 */
export interface IdempotencyOptions {
  /** Where claims live. Default: `memoryStore()` (one process only). */
  store?: IdempotencyStore;
  /** How long a completed id is remembered; make it longer than the sender's retry schedule. Default 86 400. */
  ttlSeconds?: number;
  /** How long a claim protects an in-flight handler; make it longer than the slowest handler. Default 60. */
  lockSeconds?: number;
  /** Keeps several endpoints' ids apart in one store; no `:` in it. Default `'default'`. */
  namespace?: string;
  /** Store unreachable when claiming: refuse with 503 `STORE_UNAVAILABLE` (default) or run without dedup. */
  onStoreError?: 'reject' | 'process';
}

/**
 * What went wrong outside the request's own outcome, reported to `onError`.
 *
 * @example
 * ```ts
 * const onError = (error: unknown, context: ReceiverErrorContext) =>
 *   logger.error({ stage: context.stage, webhookId: context.webhookId }, String(error));
 * ```
 */
export interface ReceiverErrorContext {
  /** `claim`: the store failed and `onStoreError: 'process'` ran the handler anyway. */
  stage: 'claim' | 'complete' | 'release';
  webhookId: string;
  /**
   * `true` when the receiver keeps trying: a failed `complete` is retried in the background (with
   * backoff) while the claim's lock lasts, so a short store outage does not let a later duplicate
   * run the handler again. A last report with `false` follows if it never succeeds.
   */
  willRetry: boolean;
}

/**
 * Options of {@link createReceiver}: the verifier's, plus idempotency.
 *
 * @example
 * ```ts
 * const options: ReceiverOptions = { secrets: process.env.WEBHOOK_SECRET!, idempotency: { ttlSeconds: 3600 } };
 * ```
 */
export interface ReceiverOptions extends VerifierOptions {
  /** On by default, with an in-memory store. `false` turns deduplication off. */
  idempotency?: IdempotencyOptions | false;
  /**
   * Called when the store fails after the handler ran (the result stands; a later duplicate may
   * run again) or when `onStoreError: 'process'` ran a handler without dedup. Default: one
   * `console.error` line with the stage, the id and the error's message.
   */
  onError?: (error: unknown, context: ReceiverErrorContext) => void;
}

/**
 * The outcome of {@link Receiver.handle}.
 *
 * @example
 * ```ts
 * const result = await receiver.handle(request, (webhook) => save(webhook.json()));
 * if (result.outcome === 'in_progress') console.log('retry in', result.retryAfterSeconds, 's');
 * ```
 */
export type ReceiveResult<T> =
  | { outcome: 'processed'; webhook: VerifiedWebhook; value: T }
  | { outcome: 'duplicate'; webhook: VerifiedWebhook }
  | { outcome: 'in_progress'; webhook: VerifiedWebhook; retryAfterSeconds: number };

/**
 * A claim on a verified webhook's id, for frameworks whose handler runs after the middleware.
 * Call `complete()` when the handler succeeded and `release()` when it failed; both are
 * idempotent, the first one called wins, and neither throws (store failures go to `onError`).
 *
 * @example
 * ```ts
 * const claim = await receiver.claim(request);
 * if (claim.outcome === 'acquired') {
 *   try { await handle(claim.webhook); await claim.complete(); }
 *   catch (error) { await claim.release(); throw error; }
 * }
 * ```
 */
export interface Claim {
  outcome: 'acquired' | 'duplicate' | 'in_progress';
  webhook: VerifiedWebhook;
  /** With `in_progress`: when the current holder's claim runs out, in whole seconds. */
  retryAfterSeconds?: number;
  complete(): Promise<void>;
  release(): Promise<void>;
}

/**
 * A verifier plus idempotency.
 *
 * @example
 * ```ts
 * const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET! });
 * const result = await receiver.handle(request, async (webhook) => {
 *   await db.events.insert(webhook.json());
 * });
 * ```
 */
export interface Receiver {
  readonly verifier: Verifier;
  /** Verify, claim, run the handler, then complete (it returned) or release (it threw; the error propagates). */
  handle<T>(input: WebhookInput | Request, handler: (webhook: VerifiedWebhook) => T | Promise<T>): Promise<ReceiveResult<T>>;
  /** Verify and claim, for adapters whose handler runs later. */
  claim(input: WebhookInput | Request): Promise<Claim>;
}

/**
 * 24 hours: how long a completed id is remembered by default.
 *
 * @example
 * ```ts
 * import { createReceiver, DEFAULT_TTL_SECONDS } from 'webhook-receiver';
 * const receiver = createReceiver({ secrets, idempotency: { ttlSeconds: 3 * DEFAULT_TTL_SECONDS } });
 * ```
 */
export const DEFAULT_TTL_SECONDS = 86_400;
/**
 * One minute: how long a claim protects an in-flight handler by default.
 *
 * @example
 * ```ts
 * import { createReceiver, DEFAULT_LOCK_SECONDS } from 'webhook-receiver';
 * const receiver = createReceiver({ secrets, idempotency: { lockSeconds: 5 * DEFAULT_LOCK_SECONDS } });
 * ```
 */
export const DEFAULT_LOCK_SECONDS = 60;

/** A failed completion is retried after 100 ms, then with the delay doubling up to 2 s. */
const COMPLETE_RETRY_FIRST_MS = 100;
const COMPLETE_RETRY_MAX_MS = 2000;

/** What `complete` and `release` return when there is nothing to wait for. */
const DONE: Promise<void> = Promise.resolve();
const noop = (): Promise<void> => DONE;

function isRequest(input: WebhookInput | Request): input is Request {
  return typeof (input as Request).arrayBuffer === 'function' && typeof (input as Request).method === 'string';
}

function positiveSeconds(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  // Stores take milliseconds, which must stay exact integers (2^53 ms is some 285 000 years).
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value * 1000 > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`idempotency.${name} must be a positive, finite number of seconds (default ${fallback})`);
  }
  return value;
}

function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function defaultOnError(error: unknown, context: ReceiverErrorContext): void {
  const what =
    context.stage === 'claim'
      ? 'idempotency store failed; the handler ran without deduplication'
      : `could not ${context.stage} the idempotency claim${context.willRetry ? ' (retrying)' : ''}`;
  console.error(`[webhook-receiver] ${what} for webhook ${JSON.stringify(context.webhookId)}: ${errorText(error)}`);
}

class ReceiverImpl implements Receiver {
  readonly verifier: Verifier;
  readonly #store: IdempotencyStore | undefined;
  /** The store's operations without their promises, when it has them (the memory store). */
  readonly #sync: SyncOperations | undefined;
  readonly #ttlMs: number;
  readonly #lockMs: number;
  /** `${namespace}:`, the start of every key. */
  readonly #keyPrefix: string;
  readonly #processOnStoreError: boolean;
  readonly #onError: (error: unknown, context: ReceiverErrorContext) => void;

  constructor(options: ReceiverOptions) {
    this.verifier = createVerifier(options);
    const { idempotency, onError } = options;
    if (onError !== undefined && typeof onError !== 'function') throw new TypeError('onError must be a function');
    this.#onError = onError ?? defaultOnError;
    if (idempotency !== undefined && idempotency !== false && (typeof idempotency !== 'object' || idempotency === null)) {
      throw new TypeError('idempotency must be an options object or false');
    }
    const settings = idempotency === false ? undefined : (idempotency ?? {});
    this.#ttlMs = positiveSeconds(settings?.ttlSeconds, 'ttlSeconds', DEFAULT_TTL_SECONDS) * 1000;
    this.#lockMs = positiveSeconds(settings?.lockSeconds, 'lockSeconds', DEFAULT_LOCK_SECONDS) * 1000;
    const namespace = settings?.namespace ?? 'default';
    if (typeof namespace !== 'string' || namespace.length === 0) throw new TypeError('idempotency.namespace must be a non-empty string');
    // Keys are `${namespace}:${webhook-id}`. Ids may contain ':', so a namespace must not, or
    // namespace 'a:b' with id 'c' and namespace 'a' with id 'b:c' would share one key.
    if (namespace.includes(':')) throw new TypeError(`idempotency.namespace must not contain ':' (use '-' or '.' to separate words)`);
    this.#keyPrefix = `${namespace}:`;
    const onStoreError = settings?.onStoreError ?? 'reject';
    if (onStoreError !== 'reject' && onStoreError !== 'process') throw new TypeError(`idempotency.onStoreError must be 'reject' or 'process'`);
    this.#processOnStoreError = onStoreError === 'process';
    const store = settings === undefined ? undefined : (settings.store ?? memoryStore());
    if (store !== undefined) {
      for (const method of ['claim', 'complete', 'release'] as const) {
        if (typeof store[method] !== 'function') throw new TypeError(`idempotency.store must implement ${method}()`);
      }
    }
    this.#store = store;
    this.#sync = store === undefined ? undefined : syncOperations(store);
  }

  async claim(input: WebhookInput | Request): Promise<Claim> {
    const webhook = isRequest(input) ? await this.verifier.verifyRequest(input) : await this.verifier.verify(input);
    const store = this.#store;
    if (store === undefined) return { outcome: 'acquired', webhook, complete: noop, release: noop };

    // Only verified requests reach the store: forged or malformed traffic cannot fill it.
    const key = this.#keyPrefix + webhook.id;
    let result: ClaimResult;
    try {
      result = this.#sync !== undefined ? this.#sync.claim(key, this.#lockMs) : await store.claim(key, this.#lockMs);
    } catch (error) {
      if (this.#processOnStoreError) {
        this.#report(error, 'claim', webhook.id, false);
        return { outcome: 'acquired', webhook, complete: noop, release: noop };
      }
      throw new WebhookError(
        'STORE_UNAVAILABLE',
        'the idempotency store is unreachable, so this delivery cannot be deduplicated safely; retry later',
        { cause: error },
      );
    }
    if (result.status === 'completed') return { outcome: 'duplicate', webhook, complete: noop, release: noop };
    if (result.status === 'processing') {
      const retryAfterSeconds = Math.max(1, Math.ceil((result.retryAfterMs ?? this.#lockMs) / 1000));
      return { outcome: 'in_progress', webhook, retryAfterSeconds, complete: noop, release: noop };
    }

    const { token } = result;
    const lockEnds = Date.now() + this.#lockMs;
    let settled: Promise<void> | undefined;
    return {
      outcome: 'acquired',
      webhook,
      complete: () => (settled ??= this.#settle('complete', key, token, webhook.id, lockEnds)),
      release: () => (settled ??= this.#settle('release', key, token, webhook.id, lockEnds)),
    };
  }

  async handle<T>(input: WebhookInput | Request, handler: (webhook: VerifiedWebhook) => T | Promise<T>): Promise<ReceiveResult<T>> {
    if (typeof handler !== 'function') throw new TypeError('handle needs a handler function');
    const claim = await this.claim(input);
    const { webhook } = claim;
    if (claim.outcome === 'duplicate') return { outcome: 'duplicate', webhook };
    if (claim.outcome === 'in_progress') return { outcome: 'in_progress', webhook, retryAfterSeconds: claim.retryAfterSeconds ?? 1 };
    let value: T;
    try {
      value = await handler(webhook);
    } catch (error) {
      await claim.release();
      throw error;
    }
    await claim.complete();
    return { outcome: 'processed', webhook, value };
  }

  /** One attempt to complete or release; a failed completion goes on in the background. */
  #settle(stage: 'complete' | 'release', key: string, token: string, webhookId: string, lockEnds: number): Promise<void> {
    const sync = this.#sync;
    if (sync === undefined) return this.#settleAsync(stage, key, token, webhookId, lockEnds);
    try {
      const owned = stage === 'complete' ? sync.complete(key, token, this.#ttlMs) : sync.release(key, token);
      if (!owned) this.#reportExpired(stage, webhookId);
    } catch (error) {
      this.#settleFailed(error, stage, key, token, webhookId, lockEnds);
    }
    return DONE;
  }

  async #settleAsync(stage: 'complete' | 'release', key: string, token: string, webhookId: string, lockEnds: number): Promise<void> {
    const store = this.#store!;
    try {
      const owned = stage === 'complete' ? await store.complete(key, token, this.#ttlMs) : await store.release(key, token);
      if (!owned) this.#reportExpired(stage, webhookId);
    } catch (error) {
      this.#settleFailed(error, stage, key, token, webhookId, lockEnds);
    }
  }

  #settleFailed(error: unknown, stage: 'complete' | 'release', key: string, token: string, webhookId: string, lockEnds: number): void {
    // A failed release needs no retry: the lock expires by itself and the sender's retry runs.
    // A failed completion does: until it lands, the id looks in flight and, once the lock
    // expires, a duplicate would run the handler a second time.
    const retry = stage === 'complete' && Date.now() + COMPLETE_RETRY_FIRST_MS < lockEnds;
    this.#report(error, stage, webhookId, retry);
    if (retry) this.#retryCompletion(key, token, webhookId, lockEnds, COMPLETE_RETRY_FIRST_MS, 1);
  }

  #retryCompletion(key: string, token: string, webhookId: string, lockEnds: number, delay: number, attempts: number): void {
    const timer = setTimeout(async () => {
      try {
        if (!(await this.#store!.complete(key, token, this.#ttlMs))) this.#reportExpired('complete', webhookId);
      } catch (error) {
        const next = Math.min(delay * 2, COMPLETE_RETRY_MAX_MS);
        if (Date.now() + next < lockEnds) {
          this.#retryCompletion(key, token, webhookId, lockEnds, next, attempts + 1);
        } else {
          this.#report(new Error(`gave up completing after ${attempts + 1} attempts: ${errorText(error)}`, { cause: error }), 'complete', webhookId, false);
        }
      }
    }, delay);
    // Never keep a process alive just to retry (Node and Bun timers have unref; others return a number).
    (timer as { unref?: () => void }).unref?.();
  }

  #reportExpired(stage: 'complete' | 'release', webhookId: string): void {
    this.#report(
      new Error(`the claim expired before ${stage} (the handler ran longer than lockSeconds, ${this.#lockMs / 1000} s) and may have been taken over`),
      stage,
      webhookId,
      false,
    );
  }

  #report(error: unknown, stage: ReceiverErrorContext['stage'], webhookId: string, willRetry: boolean): void {
    try {
      this.#onError(error, { stage, webhookId, willRetry });
    } catch {
      // A throwing logger must not turn a processed webhook into a failure.
    }
  }
}

/**
 * Creates a receiver: a verifier plus idempotency on `webhook-id` (on by default, in memory).
 *
 * @example
 * ```ts
 * import { createReceiver } from 'webhook-receiver';
 * import { redisStore } from 'webhook-receiver/redis';
 *
 * const receiver = createReceiver({
 *   secrets: process.env.WEBHOOK_SECRET!,
 *   idempotency: { store: redisStore({ client: redis }), ttlSeconds: 3 * 86_400 },
 * });
 *
 * const result = await receiver.handle(request, async (webhook) => {
 *   await orders.markPaid(webhook.json<{ orderId: string }>().orderId);
 * });
 * // result.outcome: 'processed' | 'duplicate' | 'in_progress'
 * ```
 */
export function createReceiver(options: ReceiverOptions): Receiver {
  return new ReceiverImpl(options);
}

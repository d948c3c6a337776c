/**
 * The worker's side of the claim protocol, shared by every engine: read the job, claim its id in
 * key class `w` through the store contract, run the handler with the synchronous mode's webhook
 * and context while renewing the claim, then complete (success) or release (failure), and tell
 * the engine what to do with the job. Engines redeliver (a stalled BullMQ job, an expired pg-boss
 * job); the claim is what keeps a redelivery from running a handler to success a second time.
 *
 * Keys: `${namespace}:w:s:${id}` for a signed job and `${namespace}:w:u:${id}` for an unsigned
 * one, so an unsigned delivery with a guessed id can never mark the signed job of that id done.
 * Internal: engines use it; applications see `inbox.work`.
 */

import { errorText } from '../errors.ts';
import { checkLogger, logFailure, type WebhookLogger } from '../logger.ts';
import { checkedClaim, DEFAULT_LOCK_SECONDS, DEFAULT_RENEWED_LOCK_SECONDS, DEFAULT_TTL_SECONDS } from '../receiver.ts';
import { isCompletedByStore } from '../stores/internal.ts';
import { memoryStore } from '../stores/memory.ts';
import type { ClaimHandle, ClaimResult, IdempotencyStore } from '../stores/types.ts';
import { isPermanent, readJob, webhookOf } from './job.ts';
import type { InboxHandler, InboxJob, JobContext, JobOutcomeEvent, WorkerErrorContext, WorkOptions } from './types.ts';

/** What the engine should do with the job it delivered. */
export type Verdict =
  | { kind: 'processed' }
  | { kind: 'duplicate' }
  /** Put it back for `delayMs` without spending an attempt. */
  | { kind: 'deferred'; delayMs: number; reason: string }
  /** `final`: dead-letter it now (a permanent failure, or the last attempt). */
  | { kind: 'failed'; error: unknown; final: boolean };

/** One delivery of a job, as the engine hands it over. */
export interface Delivery {
  data: unknown;
  /** 1-based. */
  attempt: number;
  /** Aborted when the engine takes the job away from this worker (its lock was lost). */
  signal?: AbortSignal | undefined;
}

/** After the store failed to claim, the job comes back this much later (a store outage). */
const STORE_DOWN_DELAY_MS = 5000;
/** A failed completion is retried after 100 ms, then with the delay doubling up to 2 s, while the lock lasts. */
const COMPLETE_RETRY_FIRST_MS = 100;
const COMPLETE_RETRY_MAX_MS = 2000;
const DEFAULT_CLOSE_TIMEOUT_MS = 5000;

function seconds(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value * 1000 > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`work idempotency.${name} must be a positive, finite number of seconds (default ${fallback})`);
  }
  return value;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    (timer as { unref?: () => void }).unref?.();
  });
}

class Context implements JobContext, ClaimHandle {
  readonly #controller = new AbortController();
  /** Settled, released by close, or lost: nothing more is sent to the store for it. */
  over = false;
  lockEnds: number;
  constructor(
    readonly store: IdempotencyStore,
    readonly key: string,
    readonly token: string,
    readonly ttlMs: number,
    readonly lockMs: number,
    readonly attempt: number,
    readonly maxAttempts: number,
    readonly acceptedAt: Date,
    readonly webhookId: string,
  ) {
    this.lockEnds = Date.now() + lockMs;
  }
  get signal(): AbortSignal {
    return this.#controller.signal;
  }
  get claim(): ClaimHandle {
    return this;
  }
  abort(reason: unknown): void {
    this.#controller.abort(reason);
  }
}

/** Runs the deliveries an engine hands it; one per `inbox.work` call. */
export class JobRunner {
  readonly concurrency: number;
  readonly #handler: InboxHandler;
  readonly #store: IdempotencyStore;
  readonly #lockMs: number;
  readonly #ttlMs: number;
  readonly #renews: boolean;
  readonly #maxAttempts: number;
  readonly #onOutcome: ((event: JobOutcomeEvent) => void) | undefined;
  readonly #onError: (error: unknown, context: WorkerErrorContext) => void;
  readonly #running = new Set<Context>();
  readonly #runs = new Set<Promise<Verdict>>();
  #closing = false;

  constructor(handler: InboxHandler, options: WorkOptions | undefined, maxAttempts: number) {
    if (typeof handler !== 'function') throw new TypeError('work needs a handler function: inbox.work(async (webhook, context) => { … })');
    if (options !== undefined && (typeof options !== 'object' || options === null)) throw new TypeError('work options must be an object');
    const settings = options?.idempotency;
    if (settings !== undefined && (typeof settings !== 'object' || settings === null)) throw new TypeError('work idempotency must be an options object');
    const store = settings?.store ?? memoryStore();
    for (const method of ['claim', 'complete', 'release'] as const) {
      if (typeof store?.[method] !== 'function') throw new TypeError(`work idempotency.store must implement ${method}()`);
    }
    this.#store = store;
    this.#renews = typeof store.extend === 'function';
    this.#lockMs = seconds(settings?.lockSeconds, 'lockSeconds', this.#renews ? DEFAULT_RENEWED_LOCK_SECONDS : DEFAULT_LOCK_SECONDS) * 1000;
    this.#ttlMs = seconds(settings?.ttlSeconds, 'ttlSeconds', DEFAULT_TTL_SECONDS) * 1000;
    const concurrency = options?.concurrency ?? 1;
    if (typeof concurrency !== 'number' || !Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1000) {
      throw new RangeError('work concurrency must be a whole number from 1 to 1000 (default 1)');
    }
    this.concurrency = concurrency;
    const { onOutcome, onError } = options ?? {};
    if (onOutcome !== undefined && typeof onOutcome !== 'function') throw new TypeError('work onOutcome must be a function');
    if (onError !== undefined && typeof onError !== 'function') throw new TypeError('work onError must be a function');
    const logger: WebhookLogger | undefined = checkLogger(options?.logger);
    this.#onOutcome = onOutcome;
    this.#onError = onError ?? ((error, context) => logFailure(logger, { ...context, willRetry: false }, `inbox worker: ${context.stage} failed`, error));
    this.#handler = handler;
    this.#maxAttempts = maxAttempts;
  }

  /** Runs one delivery; never rejects (every failure is a verdict). */
  run(delivery: Delivery): Promise<Verdict> {
    const run = this.#run(delivery);
    this.#runs.add(run);
    void run.finally(() => this.#runs.delete(run));
    return run;
  }

  async #run(delivery: Delivery): Promise<Verdict> {
    const started = Date.now();
    let job: InboxJob;
    try {
      job = readJob(delivery.data);
    } catch (error) {
      this.report(error, 'job', '(unreadable job)');
      return this.#outcome({ kind: 'failed', error, final: true }, undefined, delivery.attempt, started);
    }
    if (this.#closing) return this.#outcome({ kind: 'deferred', delayMs: 0, reason: 'the worker is closing' }, job, delivery.attempt, started);
    const key = `${job.namespace}:w:${job.signed ? 's' : 'u'}:${job.id}`;
    let result: ClaimResult;
    try {
      result = checkedClaim(await this.#store.claim(key, this.#lockMs));
    } catch (error) {
      this.report(error, 'claim', job.id);
      return this.#outcome({ kind: 'deferred', delayMs: STORE_DOWN_DELAY_MS, reason: `the store failed: ${errorText(error)}` }, job, delivery.attempt, started);
    }
    if (result.status === 'completed') return this.#outcome({ kind: 'duplicate' }, job, delivery.attempt, started);
    if (result.status === 'processing') {
      const delayMs = Math.max(1000, result.retryAfterMs ?? this.#lockMs);
      return this.#outcome({ kind: 'deferred', delayMs, reason: 'another worker holds its claim' }, job, delivery.attempt, started);
    }

    const context = new Context(this.#store, key, result.token, this.#ttlMs, this.#lockMs, delivery.attempt, this.#maxAttempts, new Date(job.acceptedAt), job.id);
    this.#running.add(context);
    const onEngineLoss = () => this.#lose(context, new Error('the engine took the job away from this worker (its lock was lost)'));
    delivery.signal?.addEventListener('abort', onEngineLoss, { once: true });
    const renewal = this.#renews ? this.#renewWhile(context, job.id) : undefined;
    let verdict: Verdict;
    try {
      await this.#handler(webhookOf(job), context);
      verdict = { kind: 'processed' };
    } catch (error) {
      verdict = { kind: 'failed', error, final: isPermanent(error) || delivery.attempt >= this.#maxAttempts };
    } finally {
      delivery.signal?.removeEventListener('abort', onEngineLoss);
      this.#running.delete(context);
    }
    if (context.over) {
      // Closed while it ran (its claim released for the redelivery, not the handler's fault), or
      // its claim was lost (a failure stays one; a success cannot be completed: the holder runs it).
      if (verdict.kind === 'failed' && !this.#closing) return this.#outcome(verdict, job, delivery.attempt, started);
      return this.#outcome({ kind: 'deferred', delayMs: 0, reason: 'its claim was released or lost while it ran' }, job, delivery.attempt, started);
    }
    context.over = true;
    await renewal?.stop();
    if (verdict.kind === 'processed') await this.#complete(context, job.id);
    else await this.#release(context, job.id);
    return this.#outcome(verdict, job, delivery.attempt, started);
  }

  /** Renews the claim every third of the lock until stopped; a claim found lost aborts the handler. */
  #renewWhile(context: Context, webhookId: string): { stop(): Promise<void> } {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let inFlight: Promise<void> = Promise.resolve();
    const beat = () => {
      timer = setTimeout(() => {
        inFlight = this.#renew(context, webhookId).then(() => {
          if (!context.over) beat();
        });
      }, context.lockMs / 3);
      (timer as { unref?: () => void }).unref?.();
    };
    beat();
    return {
      stop: async () => {
        clearTimeout(timer);
        await inFlight;
      },
    };
  }

  async #renew(context: Context, webhookId: string): Promise<void> {
    if (context.over) return;
    if (context.lockEnds <= Date.now()) {
      this.#lose(context, new Error(`the worker's claim ran out before it could be renewed (lockSeconds ${context.lockMs / 1000})`));
      return;
    }
    try {
      const time = Date.now();
      const owned: unknown = await context.store.extend!(context.key, context.token, context.lockMs);
      if (context.over) return;
      if (owned === true) context.lockEnds = time + context.lockMs;
      else this.#lose(context, new Error('the worker lost its claim while the handler ran (its lock expired and another worker may have taken the job over)'));
    } catch (error) {
      // Tried again at the next beat while the lock lasts.
      this.report(error, 'renew', webhookId);
    }
  }

  #lose(context: Context, reason: Error): void {
    if (context.over) return;
    context.over = true;
    this.report(reason, 'renew', context.webhookId);
    context.abort(reason);
  }

  async #complete(context: Context, webhookId: string): Promise<void> {
    // Completed with the handler's side effect in its transaction (the Postgres store's `transaction`).
    if (isCompletedByStore(context)) return;
    let delay = COMPLETE_RETRY_FIRST_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        const owned: unknown = await context.store.complete(context.key, context.token, context.ttlMs);
        if (owned !== true) this.report(new Error('the claim expired before it was completed, and may have been taken over'), 'complete', webhookId);
        return;
      } catch (error) {
        // Until it lands, a redelivery would find the claim held and, once it expires, run the
        // handler again: retried while the lock lasts. The engine is told the job succeeded anyway.
        if (Date.now() + delay >= context.lockEnds || this.#closing) {
          this.report(new Error(`gave up completing the claim after ${attempt} attempts: ${errorText(error)}`, { cause: error }), 'complete', webhookId);
          return;
        }
        await sleep(delay);
        delay = Math.min(delay * 2, COMPLETE_RETRY_MAX_MS);
      }
    }
  }

  async #release(context: Context, webhookId: string): Promise<void> {
    try {
      await context.store.release(context.key, context.token);
    } catch (error) {
      // The lock expires by itself; the retry waits for it (a busy claim, deferred).
      this.report(error, 'release', webhookId);
    }
  }

  #outcome(verdict: Verdict, job: InboxJob | undefined, attempt: number, started: number): Verdict {
    const onOutcome = this.#onOutcome;
    if (onOutcome !== undefined) {
      const outcome: JobOutcomeEvent['outcome'] =
        verdict.kind === 'failed' ? (verdict.final ? 'dead_lettered' : 'retried') : verdict.kind;
      const event: JobOutcomeEvent = {
        outcome,
        webhookId: job?.id ?? '(unreadable job)',
        namespace: job?.namespace ?? '',
        attempt,
        durationMs: verdict.kind === 'processed' || verdict.kind === 'failed' ? Date.now() - started : 0,
      };
      if (verdict.kind === 'failed') event.error = verdict.error;
      try {
        onOutcome(event);
      } catch {
        // A throwing hook must not change what happens to the job.
      }
    }
    return verdict;
  }

  /** Tells `onError` (or the logger); engines report their own failures to settle a job here too. */
  report(error: unknown, stage: WorkerErrorContext['stage'], webhookId: string): void {
    try {
      this.#onError(error, { stage, webhookId });
    } catch {
      // A throwing logger must not change what happens to the job.
    }
  }

  /**
   * Stops taking jobs (`engine.stop`, started at once, resolves when the engine has stopped and its
   * running jobs returned), waits up to `timeoutMs` for the running handlers, then aborts them,
   * releases their claims and stops the engine without waiting (`engine.force`).
   */
  async close(options: { timeoutMs?: number } | undefined, engine: { stop(): Promise<void>; force(): Promise<void> }): Promise<void> {
    const timeoutMs = options?.timeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) throw new RangeError('close timeoutMs must be a non-negative number of milliseconds');
    this.#closing = true;
    const stopped = engine.stop();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const first = await Promise.race([Promise.all([stopped, Promise.allSettled([...this.#runs])]).then(() => 'done' as const), timedOut]);
    clearTimeout(timer);
    if (first === 'done') return;
    const reason = new Error('the inbox worker was closed before the handler finished; its claim was released for the redelivery');
    await Promise.all(
      [...this.#running].map(async (context) => {
        if (context.over) return;
        context.over = true;
        context.abort(reason);
        await this.#release(context, context.webhookId);
      }),
    );
    await engine.force();
  }
}

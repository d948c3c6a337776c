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

import { errorText, PermanentError } from '../errors.ts';
import { positiveSeconds } from '../lib/checks.ts';
import { checkLogger, logFailure, logJobFailure, type JobFailureLogFields, type WebhookLogger } from '../logger.ts';
import { checkedClaim, ClaimKeeper, DEFAULT_LOCK_SECONDS, DEFAULT_RENEWED_LOCK_SECONDS, DEFAULT_TTL_SECONDS, Held, StoreCalls } from '../claims.ts';
import { jobWebhook, orderOf, readJob, type InboxJob } from '../job-format.ts';
import { checkStore } from '../stores/internal.ts';
import { memoryStore } from '../stores/memory/index.ts';
import type { IdempotencyStore, OrderedClaimResult } from '../stores/types.ts';
import { Observer } from '../telemetry.ts';
import { clock } from '../telemetry/observer.ts';
import { JobTelemetry, type JobTrace } from '../telemetry/jobs.ts';
import { isPermanent } from './job.ts';
import type { InboxHandler, JobOutcomeEvent, WorkerErrorContext, WorkOptions } from './types.ts';

/** What the engine should do with the job it delivered. */
export type Verdict =
  | { kind: 'processed' }
  | { kind: 'duplicate' }
  /** Ordering: an older version than one already processed for its entity; acknowledged, not run. */
  | { kind: 'stale' }
  /** Put it back for `delayMs` without spending an attempt. */
  | { kind: 'deferred'; delayMs: number; reason: string }
  /**
   * `final`: dead-letter it now (a permanent failure, or the last attempt). `startedAt` (epoch ms):
   * when this delivery reached the worker, so an engine can keep when a job's first attempt began.
   */
  | { kind: 'failed'; error: unknown; final: boolean; startedAt: number };

/** One delivery of a job, as the engine hands it over. */
export interface JobDelivery {
  data: unknown;
  /** 1-based. */
  attempt: number;
  /** Aborted when the engine takes the job away from this worker (its lock was lost). */
  signal?: AbortSignal | undefined;
  /**
   * Whether the engine, handed back a deferral of `delayMs`, will have to count it as an attempt
   * (pg-boss cannot put a running job back otherwise, and waits a deferral out only within a
   * budget). Such a deferral is reported as the failed attempt it becomes: `retried`, or
   * `dead_lettered` on the last attempt, with an error named `Deferred`. Default: never.
   */
  spendsAttempt?: ((delayMs: number) => boolean) | undefined;
}

/** After the store failed to claim, the job comes back this much later (a store outage). */
const STORE_DOWN_DELAY_MS = 5000;
const DEFAULT_CLOSE_TIMEOUT_MS = 5000;
/**
 * A job whose entity another job holds comes back after at most this long (sooner when the
 * entity's lock runs out sooner): the holder is usually alive and quick, so waiting out its whole
 * lock would stall the entity.
 */
const ENTITY_BUSY_DELAY_MS = 1000;

/** The failure a deferral becomes where the engine counts it as an attempt. */
function deferredError(reason: string): Error {
  const error = new Error(`deferred, and the engine counts it as an attempt: ${reason}`);
  error.name = 'Deferred';
  return error;
}

/** The worker's claim key of a job (key class `w`). */
function workerKey(job: InboxJob): string {
  return `${job.namespace}:w:${job.signed ? 's' : 'u'}:${job.id}`;
}

/** How long {@link processedIn} holds a claim it finds free (it releases it at once). */
const PROBE_LOCK_MS = 5000;

/**
 * Whether a worker already ran the job's handler to success: its claim (key class `w`) is
 * completed in `store`. The store contract has no read, so this claims: a claim found free is
 * released at once, and one held by a worker is not completed. An ordered job is claimed with its
 * entity (its id's key is the entity's); a stale one is recorded as done by the store, as any
 * delivery of it would be, and still answers `false` (its handler never ran). Rejects when the
 * store fails.
 */
export async function processedIn(store: IdempotencyStore, job: InboxJob, ttlMs: number): Promise<boolean> {
  const key = workerKey(job);
  const order = orderOf(job);
  if (order === undefined) {
    const result = await store.claim(key, PROBE_LOCK_MS);
    if (result.status === 'acquired') await store.release(key, result.token);
    return result.status === 'completed';
  }
  const ordering = store.ordering;
  if (ordering === undefined) return false;
  const result = await ordering.claimOrdered(key, PROBE_LOCK_MS, ttlMs, order);
  if (result.status === 'acquired') await ordering.releaseOrdered(key, result.token, order);
  return result.status === 'completed';
}

/** Runs the deliveries an engine hands it; one per `inbox.work` call. */
export class JobRunner {
  readonly concurrency: number;
  /** Where the claims live: the worker's `idempotency.store`, or a memory store of its own. */
  readonly store: IdempotencyStore;
  /** How long a processed job's id is remembered, in milliseconds. */
  readonly ttlMs: number;
  readonly #handler: InboxHandler;
  /** How the store is called: the keeper's calls too. */
  readonly #calls: StoreCalls;
  /** The claim protocol the receiver uses too: renewal while the handler runs, settlement, completion retries. */
  readonly #claims: ClaimKeeper;
  readonly #lockMs: number;
  readonly #ttlMs: number;
  readonly #maxAttempts: number;
  readonly #onOutcome: ((event: JobOutcomeEvent) => void) | undefined;
  readonly #onError: (error: unknown, context: WorkerErrorContext) => void;
  /** Where a job's failure is logged (retried, dead-lettered): the `logger` option, or the console. */
  readonly #logger: WebhookLogger | undefined;
  readonly #telemetry: JobTelemetry;
  readonly #engine: string;
  /** Claims whose handler runs, for `close`. */
  readonly #running = new Set<Held>();
  /** Claims `close` released: their handler's end settles nothing. */
  readonly #released = new WeakSet<Held>();
  readonly #runs = new Set<Promise<Verdict>>();
  #closing = false;

  /**
   * `engine` names the inbox's engine in telemetry and logs (`bullmq`, `pg-boss`, `cloudflare-queues`).
   * `retentionSeconds` is how long the engine keeps a dead letter: a processed job's id is
   * remembered at least that long, since an engine can dead-letter a job whose handler succeeded
   * (its worker died before the engine heard of it), and a retry of that dead letter must find
   * the id done.
   */
  constructor(handler: InboxHandler, options: WorkOptions | undefined, maxAttempts: number, engine: string, retentionSeconds: number) {
    if (typeof handler !== 'function') throw new TypeError('work needs a handler function: inbox.work(async (webhook, context) => { … })');
    if (options !== undefined && (typeof options !== 'object' || options === null)) throw new TypeError('work options must be an object');
    const settings = options?.idempotency;
    if (settings !== undefined && (typeof settings !== 'object' || settings === null)) throw new TypeError('work idempotency must be an options object');
    const store = settings?.store ?? memoryStore();
    // Checked as the receiver checks its own, so a worker never takes a job it cannot claim.
    checkStore(store, 'work idempotency.store');
    this.#calls = new StoreCalls(store);
    this.store = store;
    const renews = this.#calls.renews;
    this.#lockMs = positiveSeconds(settings?.lockSeconds, 'work idempotency.lockSeconds', renews ? DEFAULT_RENEWED_LOCK_SECONDS : DEFAULT_LOCK_SECONDS) * 1000;
    this.#ttlMs = Math.max(positiveSeconds(settings?.ttlSeconds, 'work idempotency.ttlSeconds', DEFAULT_TTL_SECONDS), retentionSeconds) * 1000;
    this.ttlMs = this.#ttlMs;
    const concurrency = options?.concurrency ?? 1;
    if (typeof concurrency !== 'number' || !Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1000) {
      throw new RangeError('work concurrency must be a whole number from 1 to 1000 (default 1)');
    }
    this.concurrency = concurrency;
    const { onOutcome, onError } = options ?? {};
    if (onOutcome !== undefined && typeof onOutcome !== 'function') throw new TypeError('work onOutcome must be a function');
    if (onError !== undefined && typeof onError !== 'function') throw new TypeError('work onError must be a function');
    const logger: WebhookLogger | undefined = checkLogger(options?.logger);
    this.#logger = logger;
    this.#telemetry = new JobTelemetry(options?.telemetry, engine);
    this.#engine = engine;
    this.#onOutcome = onOutcome;
    this.#onError = onError ?? ((error, context) => logFailure(logger, { ...context, willRetry: false }, `inbox worker: ${context.stage} failed`, error));
    this.#claims = new ClaimKeeper({
      calls: this.#calls,
      // The worker's outcomes are its own (`onOutcome`, `webhook.jobs`): the delivery's observer records nothing.
      observer: new Observer({}, store),
      now: Date.now,
      lockMs: this.#lockMs,
      report: (error, stage, subject) => this.report(error, stage, subject.webhookId),
    });
    this.#handler = handler;
    this.#maxAttempts = maxAttempts;
  }

  /** Runs one delivery; never rejects (every failure is a verdict). */
  run(delivery: JobDelivery): Promise<Verdict> {
    const run = this.#run(delivery);
    this.#runs.add(run);
    // #run never rejects, so neither does this bookkeeping promise.
    void run.finally(() => this.#runs.delete(run));
    return run;
  }

  async #run(delivery: JobDelivery): Promise<Verdict> {
    const started = Date.now();
    const trace = this.#telemetry.start();
    const attempt = delivery.attempt;
    const failed = (error: unknown, final: boolean): Verdict => ({ kind: 'failed', error, final, startedAt: started });
    let job: InboxJob;
    try {
      job = readJob(delivery.data);
    } catch (error) {
      this.report(error, 'job', '(unreadable job)');
      return this.#outcome({ verdict: failed(error, true), delivery, started, trace, reported: true });
    }
    this.#telemetry.job(trace, job, attempt);
    if (this.#closing) return this.#outcome({ verdict: { kind: 'deferred', delayMs: 0, reason: 'the worker is closing' }, job, delivery, started, trace });
    const key = workerKey(job);
    // Ordering: a job accepted with an entity is judged here, in the claim's atomic step.
    const order = orderOf(job);
    const calls = this.#calls;
    if (order !== undefined && calls.ordering === undefined) {
      // Run unordered, a stale event would overwrite newer state: kept as a dead letter instead,
      // to be retried once the workers have a store that orders.
      const error = new PermanentError(
        "the job is ordered (its receiver has ordering) but the worker's store has no ordering operations: give work() the receiver's store (memory, Redis, Postgres or Durable Object), then retry the dead letter",
      );
      this.report(error, 'claim', job.id);
      return this.#outcome({ verdict: failed(error, true), job, delivery, started, trace, reported: true });
    }
    let result: OrderedClaimResult;
    try {
      result =
        order === undefined
          ? checkedClaim(await calls.claim(key, this.#lockMs))
          : checkedClaim(await calls.claimOrdered(key, this.#lockMs, this.#ttlMs, order), true);
    } catch (error) {
      this.report(error, 'claim', job.id);
      return this.#outcome({ verdict: { kind: 'deferred', delayMs: STORE_DOWN_DELAY_MS, reason: `the store failed: ${errorText(error)}` }, job, delivery, started, trace });
    }
    if (result.status === 'completed') return this.#outcome({ verdict: { kind: 'duplicate' }, job, delivery, started, trace });
    // Recorded as done by the store: a redelivery of the job is a duplicate.
    if (result.status === 'stale') return this.#outcome({ verdict: { kind: 'stale' }, job, delivery, started, trace });
    if (result.status === 'processing') {
      const delayMs = Math.max(1000, result.retryAfterMs ?? this.#lockMs);
      return this.#outcome({ verdict: { kind: 'deferred', delayMs, reason: 'another worker holds its claim' }, job, delivery, started, trace });
    }
    if (result.status === 'busy') {
      const delayMs = Math.max(1, Math.min(ENTITY_BUSY_DELAY_MS, result.retryAfterMs ?? ENTITY_BUSY_DELAY_MS));
      return this.#outcome({ verdict: { kind: 'deferred', delayMs, reason: 'another job of its entity is being processed' }, job, delivery, started, trace });
    }

    const held = new Held(calls.store, key, result.token, this.#ttlMs, this.#lockMs, job.id, job.tenant ?? undefined, Date.now(), undefined, order, {
      attempt,
      maxAttempts: this.#maxAttempts,
      acceptedAt: job.acceptedAt,
    });
    this.#running.add(held);
    this.#claims.hold(held);
    const onEngineLoss = () => held.context.abort(new Error('the engine took the job away from this worker (its lock was lost)'));
    delivery.signal?.addEventListener('abort', onEngineLoss, { once: true });
    const handlerStart = clock();
    let verdict: Verdict;
    try {
      // Inside the job's span (with telemetry), so the handler's own spans nest under it.
      await this.#telemetry.within(trace, () => this.#handler(jobWebhook(job), held.context));
      verdict = { kind: 'processed' };
    } catch (error) {
      verdict = failed(error, isPermanent(error) || attempt >= this.#maxAttempts);
    } finally {
      delivery.signal?.removeEventListener('abort', onEngineLoss);
      this.#running.delete(held);
    }
    if (this.#released.has(held)) {
      // Closed while it ran: its claim was released for the redelivery, which is not the handler's fault.
      return this.#outcome({ verdict: { kind: 'deferred', delayMs: 0, reason: 'the worker closed while it ran' }, job, delivery, started, trace, handlerStart });
    }
    await this.#claims.settle(verdict.kind === 'processed' ? 'complete' : 'release', held);
    // A completion retried during a store outage: the engine hears of success once it landed (or
    // the lock ran out), so a redelivery finds the id done rather than free.
    await held.pending;
    return this.#outcome({ verdict, job, delivery, started, trace, handlerStart });
  }

  /**
   * Tells the outcome once, through every channel: `onOutcome`, telemetry, and the log (a handler's
   * failure as a warning, unless `reported`: it already went to `onError`). None of them can
   * change the verdict.
   */
  #outcome(ending: {
    verdict: Verdict;
    job?: InboxJob;
    delivery: JobDelivery;
    started: number;
    trace: JobTrace | undefined;
    /** When the handler started ({@link clock}), if it ran. */
    handlerStart?: number;
    reported?: boolean;
  }): Verdict {
    const { job, delivery } = ending;
    const attempt = delivery.attempt;
    let verdict = ending.verdict;
    if (verdict.kind === 'deferred' && delivery.spendsAttempt?.(verdict.delayMs) === true) {
      // The engine counts this deferral as an attempt: said as what it is, a failed one.
      verdict = { kind: 'failed', error: deferredError(verdict.reason), final: attempt >= this.#maxAttempts, startedAt: ending.started };
    }
    const outcome: JobOutcomeEvent['outcome'] = verdict.kind === 'failed' ? (verdict.final ? 'dead_lettered' : 'retried') : verdict.kind;
    const error = verdict.kind === 'failed' ? verdict.error : undefined;
    this.#telemetry.end(ending.trace, outcome, ending.handlerStart, error);
    const webhookId = job?.id ?? '(unreadable job)';
    if (verdict.kind === 'failed' && ending.reported !== true) {
      const fields: JobFailureLogFields = { outcome: verdict.final ? 'dead_lettered' : 'retried', webhookId, namespace: job?.namespace ?? '', attempt, maxAttempts: this.#maxAttempts, engine: this.#engine };
      if (job !== undefined && job.tenant !== null) fields.tenant = job.tenant;
      try {
        logJobFailure(this.#logger, fields, error);
      } catch {
        // A throwing logger must not change what happens to the job.
      }
    }
    const onOutcome = this.#onOutcome;
    if (onOutcome !== undefined) {
      const event: JobOutcomeEvent = {
        outcome,
        webhookId,
        namespace: job?.namespace ?? '',
        attempt,
        durationMs: verdict.kind === 'processed' || verdict.kind === 'failed' ? Date.now() - ending.started : 0,
      };
      if (verdict.kind === 'failed') event.error = error;
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
    if (first === 'done') {
      // Every run awaited its own completion retries before it settled: none is left to wait for.
      void this.#claims.close(new Error('the inbox worker was closed'));
      return;
    }
    const running = [...this.#running];
    for (const held of running) this.#released.add(held);
    // Aborts every running handler's signal and stops renewing; then the claims are released.
    // The completion retries still running belong to runs that await them; closed, they give up
    // at their next attempt.
    void this.#claims.close(new Error('the inbox worker was closed before the handler finished; its claim was released for the redelivery'));
    await Promise.all(running.map((held) => this.#claims.settle('release', held)));
    await engine.force();
  }
}

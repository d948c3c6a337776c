/**
 * The inbox contract: what a queue engine (BullMQ, pg-boss, …) does for the receiver once it has
 * answered a sender, and the job format every engine stores. An engine file translates this
 * contract into its engine's own features (retries, backoff, delays, dead letters), as a store file
 * translates the store contract into one backend's atomic commands; one conformance test checks
 * every engine against it.
 *
 * Accepting: the receiver verifies, claims the id in the store (key class `s` or `u`), enqueues
 * a job, and completes the claim once the engine acknowledged it. Processing: a worker claims the
 * job's id in key class `w` through the same store contract, runs the handler, and completes the
 * claim, so a job the engine delivers twice never runs a handler to success twice.
 */

import type { WebhookContext } from '../context.ts';
import type { InboxJob } from '../job-format.ts';
import type { WebhookLogger } from '../logger.ts';
import type { InboxIntake } from '../receiver/types.ts';
import type { TelemetryOptions } from '../telemetry/types.ts';
import type { IdempotencyStore } from '../stores/types.ts';
import type { VerifiedWebhook } from '../verify.ts';

// The job format and the side of an inbox the receiver enqueues into sit below the inbox and the
// receiver both; the inbox contract names them here too, where an engine looks for them.
export { INBOX_JOB_FORMAT, type InboxJob } from '../job-format.ts';
export type { EnqueueOptions } from '../receiver/types.ts';

/**
 * What a handler gets besides the webhook when a worker runs it: the synchronous mode's
 * `WebhookContext`, with the job's `attempt`, the inbox's `maxAttempts` and when the delivery was
 * accepted. `signal` aborts when the worker's claim on the job is lost or the worker is closing;
 * `claim` is the worker's claim (key class `w`), so the Postgres store's
 * `store.transaction(context, …)` works in a worker as it does in the synchronous mode.
 *
 * @example
 * ```ts
 * const worker = await inbox.work(async (webhook, context: JobContext) => {
 *   if (context.attempt > 1) console.log(`attempt ${context.attempt} of ${context.maxAttempts}, accepted ${context.acceptedAt.toISOString()}`);
 * });
 * ```
 */
export type JobContext = WebhookContext;

/**
 * A worker's handler: the same function a synchronous receiver runs.
 *
 * @example
 * ```ts
 * const handler: InboxHandler = async (webhook) => { await events.insert(webhook.json()); };
 * ```
 */
export type InboxHandler = (webhook: VerifiedWebhook, context: JobContext) => unknown;

/**
 * What a worker did with one delivery of a job, reported to `onOutcome` (a delivery is counted
 * once by the receiver when accepted, and its jobs here, apart):
 *
 * - `processed`: the handler succeeded and the claim was completed;
 * - `duplicate`: the engine delivered a job whose handler had already succeeded (skipped);
 * - `stale` (ordering): the job's version is older than one already processed for its entity, so
 *   its handler did not run and the job was acknowledged (its id recorded as done);
 * - `deferred`: its claim was held elsewhere, another job of its entity was being processed
 *   (ordering, `exclusive`), or the store was unreachable, so it was put back without spending an
 *   attempt;
 * - `retried`: the handler failed and the job will be tried again;
 * - `dead_lettered`: the handler failed for the last time, or threw `PermanentError` or a
 *   `WebhookError` below 500.
 *
 * @example
 * ```ts
 * const onOutcome = (event: JobOutcomeEvent) => metrics.increment(`webhook.jobs.${event.outcome}`);
 * ```
 */
export interface JobOutcomeEvent {
  outcome: 'processed' | 'duplicate' | 'stale' | 'deferred' | 'retried' | 'dead_lettered';
  webhookId: string;
  namespace: string;
  attempt: number;
  /** How long the handler ran (0 when it did not run). */
  durationMs: number;
  /** What the handler threw, for `retried` and `dead_lettered`. */
  error?: unknown;
}

/**
 * What went wrong outside a job's own outcome, reported to a worker's `onError`: the store failed
 * while claiming, renewing, completing or releasing; a job's data could not be read; or the engine
 * could not be told what became of the job (`settle`: on Cloudflare Queues, recording a dead letter
 * or sending a job back; on every engine, keeping when a failing job's first attempt began).
 *
 * @example
 * ```ts
 * const onError = (error: unknown, context: WorkerErrorContext) => log.error({ ...context, err: error }, 'inbox worker');
 * ```
 */
export interface WorkerErrorContext {
  stage: 'claim' | 'renew' | 'complete' | 'release' | 'job' | 'settle';
  webhookId: string;
}

/**
 * Options of {@link Inbox.work}. A worker process builds no receiver and holds no secrets: its
 * store comes from here. Without one it uses a memory store of its own, which keeps two workers
 * of one process from running a job twice but not two processes: give workers in several processes
 * the store the receiver uses (Redis, Postgres, …).
 *
 * @example
 * ```ts
 * const worker = await inbox.work(handler, { idempotency: { store: redisStore({ client: redis }) }, concurrency: 8 });
 * ```
 */
export interface WorkOptions {
  idempotency?: {
    /** Where the workers' claims (key class `w`) live. Default: a memory store of this worker's own. */
    store?: IdempotencyStore;
    /** How long a worker's claim holds without renewal (renewed every third of it while the handler runs). Default 30. */
    lockSeconds?: number;
    /**
     * How long a processed job's id is remembered. Default 86 400, and never less than the engine
     * keeps a dead letter (14 days on every engine): an engine can dead-letter a job whose handler
     * succeeded (a worker that died after its handler, before the engine heard of it), and that
     * dead letter must not run again when retried.
     */
    ttlSeconds?: number;
  };
  /** Jobs run at once by this worker. Default 1. */
  concurrency?: number;
  /**
   * Where the worker logs (default: the console): a job whose handler failed, as a warning with
   * `err` (retried or dead-lettered; successes are not logged, as in the synchronous mode), and
   * failures outside a job's outcome as errors when there is no `onError`. One failure is logged
   * once: a job dead-lettered because its data could not be read goes to `onError` only.
   */
  logger?: WebhookLogger;
  /**
   * The app's `@opentelemetry/api`, as the receiver's option takes it (`{ api }`): the
   * `webhook.jobs` counter, the `webhook.job.duration` histogram and a `webhook.job` span per
   * delivery, inside which the handler runs. A failing API never changes what happens to a job.
   */
  telemetry?: TelemetryOptions;
  /** Called once per job delivery with what the worker did. */
  onOutcome?: (event: JobOutcomeEvent) => void;
  /** Called for failures outside a job's own outcome (see {@link WorkerErrorContext}). */
  onError?: (error: unknown, context: WorkerErrorContext) => void;
}

/**
 * A running worker.
 *
 * @example
 * ```ts
 * process.on('SIGTERM', () => void worker.close({ timeoutMs: 10_000 }));
 * ```
 */
export interface InboxWorker {
  /**
   * Stops taking jobs, waits up to `timeoutMs` (default 5 000) for the running ones, then aborts
   * their `context.signal` and releases their claims, so the engine's redelivery runs them again.
   */
  close(options?: { timeoutMs?: number }): Promise<void>;
}

/**
 * A job the engine gave up on, with its payload and its last failure (never a secret).
 *
 * @example
 * ```ts
 * for (const dead of await inbox.deadLetters()) console.log(dead.webhookId, dead.attempts, dead.error.message);
 * ```
 */
export interface DeadLetter {
  webhookId: string;
  namespace: string;
  signed: boolean;
  /** Handler attempts made. */
  attempts: number;
  /** The last failure: the error's name and message. */
  error: { name: string; message: string };
  acceptedAt: Date;
  /**
   * When the first attempt began (of the attempts counted since it was accepted or last retried).
   * The engines keep only the last attempt's times, so the worker records it when the first attempt
   * fails and will be retried (BullMQ: in the job's data, hidden from `job` here; pg-boss: in the
   * failed attempt's output; Cloudflare Queues: in the message it sends again): a job that succeeds
   * pays nothing for it. `undefined` where that record is missing: pg-boss expired an attempt
   * (its supervisor overwrites the output), Cloudflare Queues gave up on a message whose consumer
   * never settled it before a failure was recorded, the record could not be written (told to
   * `onError` with stage `settle`), or the job was failing before this release.
   */
  firstAttemptAt: Date | undefined;
  /**
   * When the last attempt ended (BullMQ's `finishedOn`; on pg-boss, when the dead-letter copy was
   * made; on Cloudflare, when the worker recorded it). A message that Cloudflare Queues moved to its
   * dead letter queue has no known end: when `deadLetterConsumer` recorded it.
   */
  failedAt: Date | undefined;
  /** The job as it was accepted (the body in base64). */
  job: InboxJob;
}

/**
 * Which dead letter or job {@link Inbox.retry} and {@link Inbox.purge} mean: the webhook id within
 * a namespace, signed unless `signed: false`.
 *
 * @example
 * ```ts
 * await inbox.retry('msg_1', { namespace: 'billing' });
 * ```
 */
export interface JobSelector {
  /** Default `'default'`. */
  namespace?: string;
  /** `false` for an unsigned delivery. Default `true`. */
  signed?: boolean;
}

/**
 * An inbox: a queue engine behind the contract. Build one with `bullmqInbox` or `pgBossInbox`,
 * pass it to `createReceiver({ inbox })` (or an adapter), which enqueues into it through its
 * {@link InboxIntake} side, and run `inbox.work(handler)` in the worker processes. On Cloudflare, `cloudflareQueueInbox` has no worker processes: its
 * `consumer(handler)` is the Worker's `queue()` export.
 *
 * @example
 * ```ts
 * import { bullmqInbox } from 'webhook-receiver/bullmq';
 * const inbox: Inbox = bullmqInbox({ queue });
 * const worker = await inbox.work(async (webhook) => { await events.insert(webhook.json()); });
 * ```
 */
export interface Inbox extends InboxIntake {
  /** Handler attempts before a job is dead-lettered. */
  readonly maxAttempts: number;
  /** Runs a worker in this process. */
  work(handler: InboxHandler, options?: WorkOptions): Promise<InboxWorker>;
  /**
   * The dead letters, oldest first, at most `limit` (default 1 000). A job the engine gave up on
   * although its handler had succeeded (its worker died after the handler, before the engine heard
   * of it) is left out: its claim is completed in the workers' store. That store is the inbox's
   * `idempotency.store`, or the stores of the workers this inbox runs in this process; with
   * neither, such a job is listed, and a retry of it is skipped by the worker as a duplicate.
   */
  deadLetters(options?: { limit?: number }): Promise<DeadLetter[]>;
  /**
   * Puts a dead letter back on the queue with its attempts counted anew; `false` when there is
   * none, when another retry took it first, or when its handler had already succeeded (see
   * {@link Inbox.deadLetters}).
   */
  retry(webhookId: string, options?: JobSelector): Promise<boolean>;
  /**
   * Deletes a dead letter (and the engine's record of the failed job); `false` when there is none.
   * The accepting claim stays, so the sender's late retries are still answered as duplicates.
   */
  purge(webhookId: string, options?: JobSelector): Promise<boolean>;
  /**
   * Closes what the inbox opened itself: it closes the workers it started that are still running
   * (as `worker.close()` does, waiting up to 5 seconds for their handlers) and the connections it
   * made for them. What the app passed in (a BullMQ `Queue` or ioredis client, a `PgBoss`
   * instance, a store) is the app's to close, after this. Idempotent; `work()` rejects afterwards.
   */
  close(): Promise<void>;
}

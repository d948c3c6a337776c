/**
 * The inbox on BullMQ (Redis): the contract translated into BullMQ's own features. Retries are the
 * job's `attempts` with exponential `backoff` (with jitter); a permanent failure is BullMQ's
 * `UnrecoverableError`; a busy claim moves the job back to the delayed set without spending an
 * attempt (`moveToDelayed` plus `DelayedError`); dead letters are BullMQ's failed set. Job ids are
 * the hex SHA-256 of the accepting key (BullMQ ids may not contain `:` or be integers).
 *
 * Durability: Redis acknowledges a write before it reaches the disk. Without AOF a restart loses
 * every job; with `appendonly yes` and the default `appendfsync everysec` a crash loses at most
 * the last second's; only `appendfsync always` loses none. The inbox reads `INFO persistence` at
 * start and warns when AOF is off.
 *
 * @module webhook-receiver/bullmq
 */

import { DelayedError, ErrorCode, UnrecoverableError, Worker, type ConnectionOptions, type Job, type Queue, type WorkerOptions } from 'bullmq';
import { checkLogger, type WebhookLogger } from '../logger.ts';
import type { IdempotencyStore } from '../stores/types.ts';
import { commonSettings, deadLetterLimit, deadLetterOf, failureOf, failureText, hexJobId, selectedKey, type CommonInboxOptions } from './job.ts';
import { WorkerStores } from './lifecycle.ts';
import type { DeadLetter, Inbox, InboxHandler, InboxJob, InboxWorker, JobSelector, WorkOptions } from './types.ts';
import { JobRunner, type Verdict } from './worker.ts';

/**
 * How long a dead letter (a job in BullMQ's failed set) is kept: 14 days.
 *
 * @example
 * ```ts
 * import { BULLMQ_DEAD_LETTER_RETENTION_SECONDS } from 'webhook-receiver/bullmq';
 * console.log(`dead letters are kept ${BULLMQ_DEAD_LETTER_RETENTION_SECONDS / 86_400} days`);
 * ```
 */
export const BULLMQ_DEAD_LETTER_RETENTION_SECONDS = 14 * 86_400;

/** The name every job is added under (the queue is the inbox's own). */
const JOB_NAME = 'webhook';

/**
 * When a job's first attempt began (epoch ms), added to its data when that attempt fails and will
 * be retried: BullMQ keeps only the latest attempt's start (`processedOn`). Never part of the job
 * a dead letter shows.
 */
const FIRST_ATTEMPT_FIELD = 'firstAttemptAt';

/** A failed job's data without the inbox's own bookkeeping, and when its first attempt began. */
function failedJobOf(job: Job): { data: unknown; firstAttemptAt: Date | undefined } {
  const data: unknown = job.data;
  if (typeof data !== 'object' || data === null || !(FIRST_ATTEMPT_FIELD in data)) {
    // Failed at its first attempt (or it never failed and was retried): that attempt is the last.
    return { data, firstAttemptAt: job.attemptsMade <= 1 && job.processedOn !== undefined ? new Date(job.processedOn) : undefined };
  }
  const { [FIRST_ATTEMPT_FIELD]: recorded, ...rest } = data as Record<string, unknown>;
  const first = job.attemptsMade <= 1 ? job.processedOn : typeof recorded === 'number' ? recorded : undefined;
  return { data: rest, firstAttemptAt: first === undefined ? undefined : new Date(first) };
}

/**
 * Options of {@link bullmqInbox}.
 *
 * @example
 * ```ts
 * const options: BullmqInboxOptions = { queue: new Queue('webhooks', { connection }), maxAttempts: 8, backoff: { delayMs: 5000 } };
 * ```
 */
export interface BullmqInboxOptions extends CommonInboxOptions {
  /** The queue jobs are added to; the inbox should have it to itself. */
  queue: Queue;
  /**
   * Handler attempts before a job goes to the failed set. Default 12: with the default backoff
   * the retries span about 68 minutes, so a downstream outage of an hour does not dead-letter
   * what arrived during it.
   */
  maxAttempts?: number;
  /**
   * The first retry waits `delayMs` (default 2 000), each later one twice the one before, each
   * drawn at random from the upper half of that (jitter, so retries after an outage do not arrive
   * together).
   */
  backoff?: { delayMs?: number };
  /** Waiting and delayed jobs past which new deliveries are refused with 503. Default 100 000. */
  maxBacklog?: number;
  /** How long the backlog read and the add may take together before the delivery is refused with 503 (while Redis is down, neither settles). Default 2 000. */
  timeoutMs?: number;
  /**
   * The workers' connection. BullMQ's workers block on Redis and need `maxRetriesPerRequest: null`;
   * by default the inbox derives it from the queue's: a copy of the queue's connection options
   * with that setting, or `duplicate({ maxRetriesPerRequest: null })` of its ioredis client.
   */
  connection?: ConnectionOptions;
  /** BullMQ worker settings the inbox passes through (stall detection: `lockDuration`, `stalledInterval`, `maxStalledCount`). */
  workerOptions?: Pick<WorkerOptions, 'lockDuration' | 'stalledInterval' | 'maxStalledCount' | 'drainDelay'>;
  /** Where the start-up durability warning goes. Default: the console. */
  logger?: WebhookLogger;
  /**
   * The workers' store (key class `w`): `work()` uses it unless its own options name one, and
   * `deadLetters()` and `retry()` look there for a job whose handler had in fact succeeded.
   * Default: none (each worker then needs its own `idempotency.store`, or uses a memory store).
   */
  idempotency?: { store?: IdempotencyStore };
}

interface DuplicableClient {
  duplicate(options: object): unknown;
}

function isDuplicable(value: unknown): value is DuplicableClient {
  return typeof value === 'object' && value !== null && typeof (value as Partial<DuplicableClient>).duplicate === 'function';
}

/** The workers' connection when none is given, and whether the inbox owns (and so closes) it. */
function workerConnection(queue: Queue): { connection: ConnectionOptions; owned: { disconnect(): void } | undefined } {
  const connection: unknown = queue.opts.connection;
  if (isDuplicable(connection)) {
    const copy = connection.duplicate({ maxRetriesPerRequest: null }) as ConnectionOptions & { disconnect(): void };
    return { connection: copy, owned: copy };
  }
  if (typeof connection === 'object' && connection !== null) return { connection: { ...connection, maxRetriesPerRequest: null } as ConnectionOptions, owned: undefined };
  throw new TypeError('bullmqInbox could not derive the workers\' connection from the queue: pass connection (with maxRetriesPerRequest: null)');
}

/** Reads `aof_enabled` from `INFO persistence`; `undefined` when the server does not say. */
async function aofEnabled(queue: Queue): Promise<boolean | undefined> {
  const client = await (queue.getBackend() as unknown as { client: Promise<{ info(section?: string): Promise<string> }> }).client;
  const info = await client.info();
  const match = /^aof_enabled:(\d)/m.exec(info);
  return match === null ? undefined : match[1] === '1';
}

class BullmqInbox implements Inbox {
  readonly engine = 'bullmq';
  readonly maxAttempts: number;
  readonly maxBacklog: number;
  readonly timeoutMs: number;
  readonly #queue: Queue;
  readonly #backoffDelayMs: number;
  readonly #connection: ConnectionOptions | undefined;
  readonly #workerOptions: BullmqInboxOptions['workerOptions'];
  readonly #logger: WebhookLogger | undefined;
  /** The workers this inbox started and the stores their claims live in. */
  readonly #workers: WorkerStores;
  #checked: Promise<void> | undefined;

  constructor(options: BullmqInboxOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError('bullmqInbox needs an options object: bullmqInbox({ queue })');
    const queue = options.queue as Partial<Queue> | undefined;
    if (typeof queue !== 'object' || queue === null || typeof queue.add !== 'function' || typeof queue.getJob !== 'function' || typeof queue.name !== 'string') {
      throw new TypeError("bullmqInbox queue must be a BullMQ Queue: new Queue('webhooks', { connection })");
    }
    this.#queue = options.queue;
    const settings = commonSettings('bullmqInbox', options);
    this.maxAttempts = settings.maxAttempts;
    this.maxBacklog = settings.maxBacklog;
    this.timeoutMs = settings.timeoutMs;
    this.#backoffDelayMs = settings.backoffDelayMs;
    this.#connection = options.connection;
    this.#workerOptions = options.workerOptions;
    this.#logger = checkLogger(options.logger);
    this.#workers = new WorkerStores('bullmqInbox', options.idempotency, BULLMQ_DEAD_LETTER_RETENTION_SECONDS * 1000);
  }

  /** Once per inbox: warns when Redis keeps jobs only in memory. */
  #checkDurability(): void {
    this.#checked ??= aofEnabled(this.#queue).then(
      (enabled) => {
        if (enabled !== false) return;
        const message =
          'bullmqInbox: Redis has AOF off (appendonly no), so a Redis restart loses every job the receiver has already answered 202 for. ' +
          'Turn it on (appendonly yes; appendfsync always to lose nothing on a crash, everysec to lose at most a second)';
        if (this.#logger === undefined) console.warn(`[webhook-receiver] ${message}`);
        else this.#logger.warn({ engine: 'bullmq', queue: this.#queue.name }, message);
      },
      () => {
        // Not answered (INFO disabled, or Redis down): nothing to say; adds will fail on their own.
      },
    );
  }

  async enqueue(job: InboxJob): Promise<'enqueued' | 'duplicate'> {
    this.#checkDurability();
    const jobId = await hexJobId(selectedKey(job.id, { namespace: job.namespace, signed: job.signed }, 'enqueue'));
    // An existing id is ignored by BullMQ: the job already there runs (or ran) once.
    await this.#queue.add(JOB_NAME, job, {
      jobId,
      attempts: this.maxAttempts,
      backoff: { type: 'exponential', delay: this.#backoffDelayMs, jitter: 0.5 },
      removeOnComplete: true,
      removeOnFail: { age: BULLMQ_DEAD_LETTER_RETENTION_SECONDS },
    });
    return 'enqueued';
  }

  async backlog(): Promise<number> {
    const counts = await this.#queue.getJobCounts('wait', 'delayed', 'prioritized');
    return Object.values(counts).reduce((sum, count) => sum + (count ?? 0), 0);
  }

  async work(handler: InboxHandler, options?: WorkOptions): Promise<InboxWorker> {
    this.#workers.checkOpen();
    const runner = new JobRunner(handler, this.#workers.optionsOf(options), this.maxAttempts, this.engine, BULLMQ_DEAD_LETTER_RETENTION_SECONDS);
    this.#checkDurability();
    const given = this.#connection;
    const { connection, owned } = given === undefined ? workerConnection(this.#queue) : { connection: given, owned: undefined };
    const processor = async (job: Job, token?: string, signal?: AbortSignal): Promise<void> => {
      const verdict = await runner.run({ data: job.data, attempt: job.attemptsMade + 1, signal });
      await settle(job, token, verdict, runner);
    };
    const worker = new Worker(this.#queue.name, processor, {
      ...this.#workerOptions,
      connection,
      prefix: this.#queue.opts.prefix,
      concurrency: runner.concurrency,
    });
    // BullMQ reports connection trouble as events; without a listener Node would throw them.
    worker.on('error', () => {});
    const stopped = async (close: Promise<void>) => {
      await close;
      owned?.disconnect();
    };
    try {
      await worker.waitUntilReady();
    } catch (error) {
      await stopped(worker.close(true));
      throw error;
    }
    return this.#workers.add(runner, { stop: () => stopped(worker.close()), force: () => stopped(worker.close(true)) });
  }

  async deadLetters(options?: { limit?: number }): Promise<DeadLetter[]> {
    const jobs = await this.#queue.getJobs(['failed'], 0, deadLetterLimit(options) - 1, true);
    const letters = jobs.flatMap((job) => {
      const failedAt = job.finishedOn === undefined ? undefined : new Date(job.finishedOn);
      const { data, firstAttemptAt } = failedJobOf(job);
      return deadLetterOf(data, { attempts: job.attemptsMade, error: failureOf(job.failedReason), firstAttemptAt, failedAt }) ?? [];
    });
    return this.#workers.unprocessed(letters);
  }

  async #failedJob(webhookId: string, selector: JobSelector | undefined, method: string) {
    const job = await this.#queue.getJob(await hexJobId(selectedKey(webhookId, selector, method)));
    return job !== undefined && (await job.isFailed()) ? job : undefined;
  }

  async retry(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const job = await this.#failedJob(webhookId, selector, 'retry');
    if (job === undefined) return false;
    // Attempts counted anew, and their times: the next first attempt is recorded afresh.
    const { data } = failedJobOf(job);
    if (await this.#workers.processed(data)) return false;
    if (data !== job.data) await job.updateData(data);
    try {
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
    } catch (error) {
      // Another retry (or a purge) took it between the read and the move: BullMQ's script found
      // it in the failed set no more, or gone.
      const code = (error as { code?: unknown } | null)?.code;
      if (code === ErrorCode.JobNotInState || code === ErrorCode.JobNotExist) return false;
      throw error;
    }
    return true;
  }

  async purge(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const job = await this.#failedJob(webhookId, selector, 'purge');
    if (job === undefined) return false;
    await job.remove();
    return true;
  }

  close(): Promise<void> {
    // The queue, and a connection or client passed in, are the app's: only the workers (with the
    // connections derived for them) are the inbox's own.
    return this.#workers.close();
  }
}

/** Tells BullMQ what became of one delivery. */
async function settle(job: Job, token: string | undefined, verdict: Verdict, runner: JobRunner): Promise<void> {
  switch (verdict.kind) {
    case 'processed':
    case 'duplicate':
    case 'stale':
      return;
    case 'deferred':
      // Back to the delayed set without counting an attempt (BullMQ's skipAttempt path).
      await job.moveToDelayed(Date.now() + verdict.delayMs, token);
      throw new DelayedError(verdict.reason);
    case 'failed': {
      if (!verdict.final && job.attemptsMade === 0) {
        // The first attempt failed and will be retried: keep when it began, for the dead letter
        // this job may become (a job that succeeds at once writes nothing more).
        try {
          await job.updateData({ ...(job.data as object), [FIRST_ATTEMPT_FIELD]: job.processedOn ?? verdict.startedAt });
        } catch (error) {
          // Only the dead letter's firstAttemptAt is lost; the retry goes ahead. (A job that is
          // retried was read: its data is a job.)
          runner.report(error, 'settle', (job.data as InboxJob).id);
        }
      }
      // BullMQ keeps the message as the failed reason: `Name: message`, read back by deadLetters.
      const text = failureText(verdict.error);
      throw verdict.final ? new UnrecoverableError(text) : new Error(text);
    }
  }
}

/**
 * An inbox on a BullMQ queue (Redis). Pass it to `createReceiver({ inbox })` or an adapter on the
 * accepting side, and run `inbox.work(handler)` in the worker processes.
 *
 * @example
 * ```ts
 * import { Queue } from 'bullmq';
 * import { Redis } from 'ioredis';
 * import { createReceiver } from 'webhook-receiver';
 * import { bullmqInbox } from 'webhook-receiver/bullmq';
 * import { redisStore } from 'webhook-receiver/redis';
 *
 * const connection = new Redis(process.env.REDIS_URL!);
 * const inbox = bullmqInbox({ queue: new Queue('webhooks', { connection }) });
 * const store = redisStore({ client: connection });
 * const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET!, inbox, idempotency: { store } });
 *
 * // In the worker process:
 * const worker = await inbox.work(async (webhook) => { await events.insert(webhook.json()); }, { idempotency: { store } });
 * ```
 */
export function bullmqInbox(options: BullmqInboxOptions): Inbox {
  return new BullmqInbox(options);
}

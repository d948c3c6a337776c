/**
 * The inbox on pg-boss 12 (PostgreSQL): the contract translated into pg-boss's own features.
 * Retries are the queue's `retryLimit` with `retryDelay`/`retryBackoff` (pg-boss counts in whole
 * seconds: a delay is rounded up); a permanent failure is a per-job `deadletter` result, which
 * pg-boss moves to the dead-letter queue at once, bypassing the retries left; dead letters are the
 * jobs of that queue. Job ids are UUIDs from the SHA-256 of the accepting key, so a second send of
 * one delivery finds its id taken and is a duplicate.
 *
 * Durability: a job is acknowledged once its INSERT committed, as durable as the database. With
 * `transactional: true` and the Postgres store on a pool as the receiver's store, the accepting
 * claim's completion and the job's INSERT commit in one transaction: both or neither.
 *
 * @module webhook-receiver/pg-boss
 */

import { isObject } from '../lib/checks.ts';
import { commonSettings, deadLetterLimit, deadLetterOf, failureOf, failureText, selectedKey, uuidJobId, type CommonInboxOptions } from './job.ts';
import type { ClaimHandle, IdempotencyStore } from '../stores/types.ts';
import { WorkerStores } from './lifecycle.ts';
import type { DeadLetter, EnqueueOptions, Inbox, InboxHandler, InboxJob, InboxWorker, JobSelector, WorkOptions } from './types.ts';
import { JobRunner, type Verdict } from './worker.ts';

/** What pg-boss runs SQL through: a pool, or one transaction's connection (`send(…, { db })`). */
export interface PgBossDbLike {
  /** Runs one statement on the caller's connection (inside its open transaction). */
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** A job as pg-boss hands it to a worker or lists it (`includeMetadata` adds the rest). */
export interface PgBossJobLike {
  id: string;
  data: unknown;
  retryCount: number;
  signal?: AbortSignal;
  state?: string;
  createdOn?: Date;
  completedOn?: Date | null;
  /** What the last attempt ended with (`findJobs`). */
  output?: unknown;
  sourceRetryCount?: number | null;
  sourceOutput?: unknown;
}

/**
 * The part of a started `PgBoss` instance the inbox uses (pg-boss 12: `import { PgBoss } from
 * 'pg-boss'`).
 *
 * @example
 * ```ts
 * import { PgBoss } from 'pg-boss';
 * const boss: PgBossLike = await new PgBoss(process.env.DATABASE_URL!).start();
 * ```
 */
export interface PgBossLike {
  /** Adds a job; resolves to its id, or `null` when a job with that id exists already. */
  send(name: string, data: object, options: object): Promise<string | null>;
  /** Starts a worker on the queue; resolves to the worker's id. */
  work(name: string, options: object, handler: (jobs: never[]) => Promise<unknown>): Promise<string>;
  /** Stops a worker (or every worker of the queue). */
  offWork(name: string, options?: { id?: string; wait?: boolean }): Promise<void>;
  /** Creates a queue with its policy, retries and dead-letter queue. */
  createQueue(name: string, options?: object): Promise<void>;
  /** Changes an existing queue's options. */
  updateQueue(name: string, options?: object): Promise<void>;
  /** The queue's settings and counts, or `null` when it does not exist. */
  getQueue(name: string): Promise<{ queuedCount?: number } | null>;
  /** Lists jobs of a queue (the dead letters, here). */
  findJobs(name: string, options?: object): Promise<unknown[]>;
  /** Deletes jobs by id. */
  deleteJob(name: string, id: string | string[]): Promise<unknown>;
  /** Moves dead-letter jobs back to their queue; resolves to how many moved. */
  redrive(name: string, options?: object): Promise<number>;
}

/**
 * Options of {@link pgBossInbox}.
 *
 * @example
 * ```ts
 * const options: PgBossInboxOptions = { boss, queue: 'webhooks', maxAttempts: 8, transactional: true };
 * ```
 */
export interface PgBossInboxOptions extends CommonInboxOptions {
  /** A started pg-boss 12 instance. */
  boss: PgBossLike;
  /** The queue's name; the inbox creates it, and its dead-letter queue `${queue}.dead`, when missing. Default `'webhooks'`. */
  queue?: string;
  /**
   * Handler attempts before a job goes to the dead-letter queue (pg-boss's `retryLimit` is one
   * less). Default 12: with the default backoff the retries span about an hour.
   */
  maxAttempts?: number;
  /** The first retry waits `delayMs` (default 2 000, rounded up to whole seconds), later ones exponentially more (pg-boss's `retryBackoff`, with jitter). */
  backoff?: { delayMs?: number };
  /**
   * Jobs queued past which new deliveries are refused with 503. pg-boss counts them in its monitor
   * (every minute by default), so the bound is approximate. Default 100 000.
   */
  maxBacklog?: number;
  /** How long the backlog read and the send may take together before the delivery is refused with 503. Default 2 000. */
  timeoutMs?: number;
  /**
   * With the Postgres store (on a pool) as the receiver's store: insert the job in the transaction
   * that completes the accepting claim (pg-boss's `send(…, { db })`). Default `false`.
   */
  transactional?: boolean;
  /**
   * How often an idle worker polls for jobs, in seconds (pg-boss's `pollingIntervalSeconds`, at
   * least 0.5). Default 2: a job accepted while the workers are idle waits up to that long for the
   * next poll. For less, see `queueOptions.notify`.
   */
  pollingIntervalSeconds?: number;
  /**
   * pg-boss queue settings the inbox passes through: `expireInSeconds` (default 900: how long a job
   * whose worker died stays active before pg-boss fails and retries it), `heartbeatSeconds`,
   * `deleteAfterSeconds`, and `notify` (default `false`): `true` wakes idle workers the moment a
   * job is sent (a Postgres `NOTIFY`), instead of at their next poll, when the workers' pg-boss was
   * built with `useListenNotify: true` (polling stays on as the fallback).
   */
  queueOptions?: { expireInSeconds?: number; heartbeatSeconds?: number; deleteAfterSeconds?: number; notify?: boolean };
  /**
   * The workers' store (key class `w`): `work()` uses it unless its own options name one, and
   * `deadLetters()` and `retry()` look there for a job whose handler had in fact succeeded.
   * Default: none (each worker then needs its own `idempotency.store`, or uses a memory store).
   */
  idempotency?: { store?: IdempotencyStore };
}

/** How long a dead letter is kept: pg-boss's default retention of a queued job, 14 days. */
const DEAD_LETTER_RETENTION_SECONDS = 14 * 86_400;

/** The `db` pg-boss's `send` takes, over the Postgres store's transaction (`pg` client or postgres.js `sql`). */
function transactionDb(tx: unknown): PgBossDbLike {
  const candidate = tx as { query?: (text: string, values?: unknown[]) => Promise<{ rows: unknown[] }>; unsafe?: (text: string, values?: unknown[]) => Promise<unknown[]> };
  if (typeof candidate?.query === 'function') return { executeSql: (text, values) => candidate.query!(text, values) };
  if (typeof candidate?.unsafe === 'function') return { executeSql: async (text, values) => ({ rows: await candidate.unsafe!(text, values) }) };
  throw new TypeError('pgBossInbox transactional: the store transaction gave neither a pg client nor a postgres.js sql');
}

interface TransactionalStore {
  transaction<T>(context: { claim?: ClaimHandle }, fn: (tx: unknown) => Promise<T>): Promise<T>;
}

function transactionalStore(claim: ClaimHandle | undefined): TransactionalStore | undefined {
  const store = claim?.store as Partial<TransactionalStore> | undefined;
  return typeof store?.transaction === 'function' ? (store as TransactionalStore) : undefined;
}

/** The part of a job's data that finds one delivery's jobs (pg-boss matches data by containment). */
function dataOf(webhookId: string, selector: JobSelector | undefined): object {
  return { id: webhookId, namespace: selector?.namespace ?? 'default', signed: selector?.signed !== false };
}

/**
 * What a failed attempt is kept as (the job's `output`, then the dead letter's `sourceOutput`): the
 * failure, and when the job's first attempt began (epoch ms; `null` when it is not known).
 */
interface FailureOutput {
  error: { name: string; message: string };
  firstAttemptAt: number | null;
  deferrals?: number;
}

const firstAttemptOf = (output: unknown): number | null =>
  isObject(output) && typeof output.firstAttemptAt === 'number' && Number.isFinite(output.firstAttemptAt) ? output.firstAttemptAt : null;

class PgBossInbox implements Inbox {
  readonly engine = 'pg-boss';
  readonly maxAttempts: number;
  readonly maxBacklog: number;
  readonly timeoutMs: number;
  readonly #boss: PgBossLike;
  readonly #queue: string;
  readonly #deadQueue: string;
  readonly #backoffDelayMs: number;
  readonly #transactional: boolean;
  readonly #pollingIntervalSeconds: number | undefined;
  readonly #queueOptions: object;
  /** The workers this inbox started and the stores their claims live in. */
  readonly #workers: WorkerStores;
  #ready: Promise<void> | undefined;

  constructor(options: PgBossInboxOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError("pgBossInbox needs an options object: pgBossInbox({ boss, queue: 'webhooks' })");
    const boss = options.boss as Partial<PgBossLike> | undefined;
    if (!isObject(boss) || typeof boss.send !== 'function' || typeof boss.work !== 'function' || typeof boss.findJobs !== 'function' || typeof boss.redrive !== 'function') {
      throw new TypeError('pgBossInbox boss must be a started pg-boss 12 instance: await new PgBoss(url).start()');
    }
    const queue = options.queue ?? 'webhooks';
    if (typeof queue !== 'string' || !/^[\w.\-/]+$/.test(queue)) {
      throw new TypeError('pgBossInbox queue must be a name of letters, digits, underscores, hyphens, periods or slashes');
    }
    const settings = commonSettings('pgBossInbox', options);
    if (options.transactional !== undefined && typeof options.transactional !== 'boolean') throw new TypeError('pgBossInbox transactional must be a boolean');
    const polling = options.pollingIntervalSeconds;
    if (polling !== undefined && (typeof polling !== 'number' || !Number.isFinite(polling) || polling < 0.5)) {
      throw new RangeError('pgBossInbox pollingIntervalSeconds must be a number of seconds, at least 0.5 (default 2)');
    }
    this.#boss = options.boss;
    this.#queue = queue;
    this.#deadQueue = `${queue}.dead`;
    this.maxAttempts = settings.maxAttempts;
    this.maxBacklog = settings.maxBacklog;
    this.timeoutMs = settings.timeoutMs;
    this.#backoffDelayMs = settings.backoffDelayMs;
    this.#transactional = options.transactional ?? false;
    this.#pollingIntervalSeconds = polling;
    const queueOptions = options.queueOptions ?? {};
    if (typeof queueOptions !== 'object' || queueOptions === null) throw new TypeError('pgBossInbox queueOptions must be an object');
    // Refused here, at start-up: pg-boss would only refuse it when the queue is first created, on
    // the first delivery (a 503) or in the worker.
    if (queueOptions.notify !== undefined && typeof queueOptions.notify !== 'boolean') {
      throw new TypeError('pgBossInbox queueOptions.notify must be true or false (default false)');
    }
    this.#queueOptions = queueOptions;
    this.#workers = new WorkerStores('pgBossInbox', options.idempotency, DEAD_LETTER_RETENTION_SECONDS * 1000);
  }

  /**
   * Creates the queues when missing, and brings the retry policy to the inbox's. Once; again after
   * a failure. Only the sending and working sides do: reading, retrying and purging dead letters
   * leave the queues' settings as the app set them.
   */
  #prepare(): Promise<void> {
    this.#ready ??= this.#createQueues().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  async #createQueues(): Promise<void> {
    const seconds = Math.ceil(this.#backoffDelayMs / 1000);
    const policy = { ...this.#queueOptions, retryLimit: this.maxAttempts - 1, retryDelay: seconds, retryBackoff: seconds > 0, deadLetter: this.#deadQueue };
    await this.#boss.createQueue(this.#deadQueue, { retentionSeconds: DEAD_LETTER_RETENTION_SECONDS });
    await this.#boss.createQueue(this.#queue, policy);
    // createQueue leaves an existing queue as it was: the inbox's options win.
    await this.#boss.updateQueue(this.#queue, policy);
  }

  async enqueue(job: InboxJob, options?: EnqueueOptions): Promise<'enqueued' | 'duplicate'> {
    await this.#prepare();
    const id = await uuidJobId(selectedKey(job.id, { namespace: job.namespace, signed: job.signed }, 'enqueue'));
    const claim = options?.claim;
    const store = this.#transactional ? transactionalStore(claim) : undefined;
    // A second send of one id answers null: the job is there already.
    const sent =
      store === undefined
        ? await this.#boss.send(this.#queue, job, { id })
        : await store.transaction({ claim }, (tx) => this.#boss.send(this.#queue, job, { id, db: transactionDb(tx) }));
    return sent === null ? 'duplicate' : 'enqueued';
  }

  async backlog(): Promise<number> {
    await this.#prepare();
    const queue = await this.#boss.getQueue(this.#queue);
    return queue?.queuedCount ?? 0;
  }

  async work(handler: InboxHandler, options?: WorkOptions): Promise<InboxWorker> {
    this.#workers.checkOpen();
    const runner = new JobRunner(handler, this.#workers.optionsOf(options), this.maxAttempts, this.engine, DEAD_LETTER_RETENTION_SECONDS);
    await this.#prepare();
    const workOptions: Record<string, unknown> = { batchSize: 1, perJobResults: true, localConcurrency: runner.concurrency };
    if (this.#pollingIntervalSeconds !== undefined) workOptions.pollingIntervalSeconds = this.#pollingIntervalSeconds;
    const workId = await this.#boss.work(this.#queue, workOptions, async (jobs: never[]) => {
      const results = [];
      for (const job of jobs as PgBossJobLike[]) results.push({ id: job.id, ...(await this.#run(runner, job)) });
      return results;
    });
    return this.#workers.add(runner, {
      stop: () => this.#boss.offWork(this.#queue, { id: workId, wait: true }),
      force: () => this.#boss.offWork(this.#queue, { id: workId, wait: false }),
    });
  }

  /**
   * One job to its per-job result. pg-boss has no way to put a running job back without counting
   * a retry, so a busy claim is waited out here, within the job's own time (its claim holds for
   * at most the store's lock), and never reaches pg-boss.
   */
  async #run(runner: JobRunner, job: PgBossJobLike): Promise<{ status: 'completed' | 'failed' | 'deadletter'; output?: FailureOutput }> {
    const started = Date.now();
    // A deferral is waited out here unless the worker is closing or the job's own time would run
    // out; then pg-boss must be handed a failure, which it counts as an attempt, and the runner
    // reports it as one (retried, or dead-lettered on the last attempt).
    const spendsAttempt = (delayMs: number) => delayMs === 0 || job.signal?.aborted === true || Date.now() - started + delayMs > DEFERRAL_BUDGET_MS;
    for (let deferrals = 0; ; deferrals++) {
      const verdict: Verdict = await runner.run({ data: job.data, attempt: job.retryCount + 1, signal: job.signal, spendsAttempt });
      if (verdict.kind === 'processed' || verdict.kind === 'duplicate' || verdict.kind === 'stale') return { status: 'completed' };
      if (verdict.kind === 'failed') {
        const firstAttemptAt = await this.#firstAttemptAt(runner, job, verdict.startedAt);
        const output: FailureOutput = { error: failureOf(failureText(verdict.error)), firstAttemptAt };
        if (deferrals > 0) output.deferrals = deferrals;
        return { status: verdict.final ? 'deadletter' : 'failed', output };
      }
      // Deferred, and spendsAttempt said it is waited out here.
      await delay(verdict.delayMs, job.signal);
    }
  }

  /**
   * When the job's first attempt began, for a failed attempt's output: this one's start on the
   * first attempt; on a later one, what the previous failure's output kept (read only on a failure,
   * so a job that succeeds pays nothing for it). `null` when that is not known.
   */
  async #firstAttemptAt(runner: JobRunner, job: PgBossJobLike, startedAt: number): Promise<number | null> {
    if (job.retryCount === 0) return startedAt;
    try {
      const [row] = (await this.#boss.findJobs(this.#queue, { id: job.id })) as PgBossJobLike[];
      return firstAttemptOf(row?.output);
    } catch (error) {
      // Only the dead letter's firstAttemptAt is lost; the job's failure is told to pg-boss as ever.
      runner.report(error, 'settle', isObject(job.data) && typeof job.data.id === 'string' ? job.data.id : '(unreadable job)');
      return null;
    }
  }

  async #findDead(webhookId: string, selector: JobSelector | undefined, method: string): Promise<PgBossJobLike[]> {
    selectedKey(webhookId, selector, method);
    return this.#findJobs(this.#deadQueue, { data: dataOf(webhookId, selector) });
  }

  /** `findJobs`, without creating the queue: a queue that does not exist yet holds no jobs. */
  async #findJobs(queue: string, options: object): Promise<PgBossJobLike[]> {
    try {
      return (await this.#boss.findJobs(queue, options)) as PgBossJobLike[];
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code === QUEUE_NOT_FOUND) return [];
      throw error;
    }
  }

  async deadLetters(options?: { limit?: number }): Promise<DeadLetter[]> {
    const limit = deadLetterLimit(options);
    const jobs = await this.#findJobs(this.#deadQueue, { limit });
    const letters = jobs.flatMap((job) => {
      // Our per-job output (`{ error }`), or pg-boss's own for a job it failed (`{ value }`: an expiry).
      const output = job.sourceOutput;
      const error = isObject(output) && isObject(output.error) ? output.error : isObject(output) && isObject(output.value) ? output.value : {};
      const failure = { name: typeof error.name === 'string' ? error.name : 'Error', message: typeof error.message === 'string' ? error.message : '' };
      const first = firstAttemptOf(output);
      // `createdOn` of the dead-letter copy: pg-boss made it as the last attempt failed.
      return deadLetterOf(job.data, { attempts: (job.sourceRetryCount ?? 0) + 1, error: failure, firstAttemptAt: first === null ? undefined : new Date(first), failedAt: job.createdOn }) ?? [];
    });
    return this.#workers.unprocessed(letters);
  }

  async retry(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const dead = await this.#findDead(webhookId, selector, 'retry');
    if (dead.length === 0 || (await this.#workers.processed(dead[0]!.data))) return false;
    // Back to the queue as a new job (a new id; retries counted from zero).
    const moved = await this.#boss.redrive(this.#deadQueue, { ids: dead.map((job) => job.id), destination: this.#queue });
    return moved > 0;
  }

  async purge(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const dead = await this.#findDead(webhookId, selector, 'purge');
    if (dead.length === 0) return false;
    await this.#boss.deleteJob(
      this.#deadQueue,
      dead.map((job) => job.id),
    );
    // And the failed originals, which pg-boss keeps in the queue until their retention ends.
    const failed = (await this.#findJobs(this.#queue, { data: dataOf(webhookId, selector) })).filter((job) => job.state === 'failed');
    if (failed.length > 0) await this.#boss.deleteJob(this.#queue, failed.map((job) => job.id));
    return true;
  }

  close(): Promise<void> {
    // The PgBoss instance is the app's (it passed it started): the app stops it, after this.
    return this.#workers.close();
  }
}

/** The `code` pg-boss gives the error of a queue that does not exist. */
const QUEUE_NOT_FOUND = 'PGBOSS_QUEUE_NOT_FOUND';

/** How long a job waits out busy claims before it gives up and counts a retry: 10 minutes, well inside pg-boss's 15-minute expiry. */
const DEFERRAL_BUDGET_MS = 600_000;

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * An inbox on pg-boss 12 (PostgreSQL). Pass it to `createReceiver({ inbox })` or an adapter on the
 * accepting side, and run `inbox.work(handler)` in the worker processes.
 *
 * @example
 * ```ts
 * import { PgBoss } from 'pg-boss';
 * import pg from 'pg';
 * import { createReceiver } from 'webhook-receiver';
 * import { pgBossInbox } from 'webhook-receiver/pg-boss';
 * import { postgresStore } from 'webhook-receiver/postgres';
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const boss = await new PgBoss(process.env.DATABASE_URL!).start();
 * const store = postgresStore({ client: pool });
 * const inbox = pgBossInbox({ boss, queue: 'webhooks', transactional: true });
 * const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET!, inbox, idempotency: { store } });
 *
 * // In the worker process:
 * const worker = await inbox.work(async (webhook) => { await events.insert(webhook.json()); }, { idempotency: { store } });
 * ```
 */
export function pgBossInbox(options: PgBossInboxOptions): Inbox {
  return new PgBossInbox(options);
}

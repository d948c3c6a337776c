/**
 * The inbox on Cloudflare Queues: the contract translated into Queues' own features. The accepting
 * Worker sends each job through the queue's producer binding; the consumer is the Worker's
 * `queue()` export (`inbox.consumer(handler)`), which Queues calls with batches. Retries are
 * `message.retry({ delaySeconds })` with the inbox's exponential backoff (whole seconds, rounded
 * up); success is `message.ack()`. A message's body cannot change on a retry, so the first failed
 * attempt sends the job again instead (delayed likewise, and the old message acknowledged),
 * carrying when that attempt began, for the dead letter the job may become.
 *
 * Queues counts every delivery of a message as an attempt and has no way to put one back without
 * counting it, nor to dead-letter one at once. So the consumer counts handler attempts itself: a
 * message carries the attempts its job spent in earlier messages (`{ job, attemptsBefore }`). A
 * busy claim sends the job again as a new message, delayed, carrying its count, and acknowledges
 * the old one: no attempt spent, and Queues' own `max_retries` never reached for it. A permanent
 * failure, or the last attempt, is recorded as a dead letter in one `WebhookClaims` object (the one
 * place on Cloudflare where they can be listed) and acknowledged. Queues' dead letter queue is the
 * safety net for messages whose consumer never settled them (it crashed or ran out of time):
 * `inbox.deadLetterConsumer()`, as that queue's consumer, records them in the same place.
 *
 * Duplicates: Queues has no message ids of its own choosing, so an accepted job is never found
 * "already there"; the receiver's accepting claim keeps a delivery from being sent twice, and the
 * worker's claim (key class `w`, in the Durable Object store) keeps a job delivered twice from
 * running a handler to success twice.
 *
 * Durability: a job is acknowledged when `send()` resolves; from then on Queues delivers it at
 * least once (its documented guarantee), within the queue's retention (4 days by default, up to
 * 14 on paid plans, 24 hours on the free plan): a job not consumed by then is gone.
 */

import { utf8Encoder } from '../encoding.ts';
import { WebhookError } from '../errors.ts';
import { checkLogger, logFailure, type WebhookLogger } from '../logger.ts';
import { DEFAULT_DURABLE_OBJECT_TIMEOUT_MS, durableObjectStore, type DurableObjectNamespaceLike } from '../stores/durable-object.ts';
import { askObject, describeValue } from '../stores/internal.ts';
import type { IdempotencyStore } from '../stores/types.ts';
import { WorkerStores } from './lifecycle.ts';
import { readJob } from '../job-format.ts';
import { acceptKey, commonSettings, failureOf, failureText, selectedKey, type CommonInboxOptions } from './job.ts';
import type { DeadLetter, Inbox, InboxHandler, InboxJob, InboxWorker, JobSelector, WorkOptions } from './types.ts';
import { JobRunner, type Verdict } from './worker.ts';

/**
 * 128 000 bytes: the largest message Cloudflare Queues takes, of which about 100 bytes go to
 * its own metadata. A job is the body in base64 inside JSON, so bodies up to about 95 KB fit;
 * a larger one is refused when it is accepted, with 413 `PAYLOAD_TOO_LARGE`.
 *
 * @example
 * ```ts
 * import { CLOUDFLARE_QUEUE_MESSAGE_LIMIT_BYTES } from 'webhook-receiver/cloudflare';
 * console.log(`bodies up to about ${Math.floor(((CLOUDFLARE_QUEUE_MESSAGE_LIMIT_BYTES - 600) * 3) / 4)} bytes fit`);
 * ```
 */
export const CLOUDFLARE_QUEUE_MESSAGE_LIMIT_BYTES = 128_000;

/** What Queues counts towards a message besides its body ("about 100 bytes of internal metadata"). */
const MESSAGE_METADATA_BYTES = 100;
/** What a failed attempt's re-send adds to a message (`firstAttemptAt` and the attempts spent), kept free at accept. */
const RESEND_HEADROOM_BYTES = 64;

/**
 * How long a dead letter is kept in its `WebhookClaims` object: 14 days, as on the other engines
 * (and the longest Cloudflare Queues itself keeps a message).
 *
 * @example
 * ```ts
 * import { CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS } from 'webhook-receiver/cloudflare';
 * console.log(`dead letters are kept ${CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS / 86_400} days`);
 * ```
 */
export const CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS = 14 * 86_400;

/** The longest delay the inbox asks of Queues (12 hours, within every documented limit). */
const MAX_DELAY_SECONDS = 43_200;

/**
 * The part of a Queue producer binding (`env.WEBHOOK_QUEUE`, a `Queue`) the inbox uses. Declared
 * here so that neither the package nor its types need `@cloudflare/workers-types`.
 *
 * @example
 * ```ts
 * import type { DurableObjectNamespaceLike, QueueLike } from 'webhook-receiver/cloudflare';
 * interface Env { WEBHOOK_QUEUE: QueueLike; WEBHOOK_CLAIMS: DurableObjectNamespaceLike }
 * ```
 */
export interface QueueLike {
  /** Sends one message; resolves once Queues has it. */
  send(body: unknown, options?: { contentType?: 'json'; delaySeconds?: number }): Promise<unknown>;
  /** The queue's backlog, where the runtime has it (`maxBacklog` is enforced on it). */
  metrics?(): Promise<{ backlogCount?: number }>;
}

/**
 * One message of a batch, as Queues hands it to the `queue()` export (`Message`).
 *
 * @example
 * ```ts
 * const first: QueueMessageLike | undefined = batch.messages[0];
 * ```
 */
export interface QueueMessageLike {
  /** Queues' id of the message. */
  readonly id: string;
  /** The message as sent. */
  readonly body: unknown;
  /** Deliveries of this message so far, this one included (1 on the first). */
  readonly attempts: number;
  /** Done with it: Queues deletes it. */
  ack(): void;
  /** Deliver it again, after `delaySeconds`; counts an attempt. */
  retry(options?: { delaySeconds?: number }): void;
}

/**
 * A batch, as Queues hands it to the `queue()` export (`MessageBatch`).
 *
 * @example
 * ```ts
 * const consume = (batch: MessageBatchLike) => console.log(batch.queue, batch.messages.length);
 * ```
 */
export interface MessageBatchLike {
  /** The name of the queue the batch came from (the main queue, or its dead letter queue). */
  readonly queue: string;
  /** Its messages. */
  readonly messages: readonly QueueMessageLike[];
}

/**
 * A Worker's `queue()` export: what {@link CloudflareQueueInbox.consumer} and
 * {@link CloudflareQueueInbox.deadLetterConsumer} return.
 *
 * @example
 * ```ts
 * const queue: QueueConsumer = inbox.consumer(async (webhook) => { await events.insert(webhook.json()); });
 * ```
 */
export type QueueConsumer = (batch: MessageBatchLike, env?: unknown, ctx?: unknown) => Promise<void>;

/**
 * Options of {@link cloudflareQueueInbox}.
 *
 * @example
 * ```ts
 * const options: CloudflareQueueInboxOptions = { queue: env.WEBHOOK_QUEUE, claims: env.WEBHOOK_CLAIMS, maxAttempts: 8 };
 * ```
 */
export interface CloudflareQueueInboxOptions extends CommonInboxOptions {
  /** The queue's producer binding; the inbox should have the queue to itself. */
  queue: QueueLike;
  /**
   * The `WebhookClaims` Durable Object namespace (the Durable Object store's binding, SQLite-backed):
   * the consumer's claims (key class `w`) and the dead letters live there.
   */
  claims: DurableObjectNamespaceLike;
  /** Names the inbox's list of dead letters, so several inboxes can share one binding. Default `'webhooks'`. */
  name?: string;
  /**
   * Handler attempts before a job is dead-lettered. Default 12: with the default backoff the
   * retries span about 68 minutes. Set the consumer's `max_retries` to at least `maxAttempts - 1`
   * (Queues allows up to 100), or Queues gives up first.
   */
  maxAttempts?: number;
  /**
   * The first retry waits `delayMs` (default 2 000), each later one twice the one before, drawn at
   * random from the upper half of that (jitter); Queues counts delays in whole seconds, so each is
   * rounded up (and held to 12 hours at most).
   */
  backoff?: { delayMs?: number };
  /** Messages waiting past which new deliveries are refused with 503, read from the binding's `metrics()` where it has one. Default 100 000. */
  maxBacklog?: number;
  /** How long the backlog read and the send may take together before the delivery is refused with 503. Default 2 000. */
  timeoutMs?: number;
  /**
   * The consumers' store (key class `w`): `consumer()` uses it unless its own options name one,
   * and `deadLetters()` and `retry()` look there for a job whose handler had in fact succeeded.
   * Default: the Durable Object store on `claims`.
   */
  idempotency?: { store?: IdempotencyStore };
}

/**
 * Options of {@link CloudflareQueueInbox.deadLetterConsumer}.
 *
 * @example
 * ```ts
 * const queue = inbox.deadLetterConsumer({ maxRetries: 11 });
 * ```
 */
export interface DeadLetterConsumerOptions {
  /** The main queue consumer's `max_retries`: a dead letter from Queues records `max_retries + 1` attempts. Default `maxAttempts - 1`. */
  maxRetries?: number;
  /** Called when a dead letter could not be recorded (it is retried on the dead letter queue). Default: logged. */
  onError?: (error: unknown, context: { webhookId: string }) => void;
  /** Where failures go when there is no `onError` (default: the console). */
  logger?: WebhookLogger;
}

/**
 * An inbox on Cloudflare Queues: the {@link Inbox} contract, plus the Worker's consumers.
 *
 * @example
 * ```ts
 * export default {
 *   queue: (batch: MessageBatchLike, env: Env) => cloudflareQueueInbox({ queue: env.WEBHOOK_QUEUE, claims: env.WEBHOOK_CLAIMS }).consumer(handle)(batch),
 * };
 * ```
 */
export interface CloudflareQueueInbox extends Inbox {
  /**
   * The Worker's `queue()` export for the main queue: runs `handler` on each message through the
   * worker's claim protocol, then acknowledges it, retries it after the backoff, sends it back
   * delayed (a busy claim, no attempt spent), or records it as a dead letter and acknowledges it.
   * The claims live in the Durable Object store on `claims` unless `options.idempotency.store`
   * says otherwise; `concurrency` is how many messages of a batch run at once (default 1).
   */
  consumer(handler: InboxHandler, options?: WorkOptions): QueueConsumer;
  /**
   * The Worker's `queue()` export for the queue's dead letter queue (`dead_letter_queue`): records
   * each message Queues gave up on as a dead letter, where `deadLetters()` lists it.
   */
  deadLetterConsumer(options?: DeadLetterConsumerOptions): QueueConsumer;
  /** Not on Cloudflare: Queues pushes batches to the Worker's `queue()` export. Rejects with a `TypeError` pointing to `consumer`. */
  work(handler: InboxHandler, options?: WorkOptions): Promise<InboxWorker>;
}

/**
 * A message as the inbox sends it: the job, the handler attempts it spent in earlier messages, and
 * when its first attempt began (epoch ms), once one has failed.
 */
interface Envelope {
  job: unknown;
  attemptsBefore: number;
  firstAttemptAt?: number;
}

/** What a dead letter's record holds (JSON in its object). */
interface Shelved {
  job: unknown;
  attempts: number;
  error: { name: string; message: string };
  /** `null` when it is not known (absent from records of earlier versions). */
  firstAttemptAt?: number | null;
  failedAt: number;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

/** The envelope of a message; a bare job (sent by hand) is one with no attempts before. */
function envelopeOf(body: unknown): Envelope {
  if (isObject(body) && 'job' in body && typeof body.attemptsBefore === 'number' && Number.isInteger(body.attemptsBefore) && body.attemptsBefore >= 0) {
    const first = body.firstAttemptAt;
    return typeof first === 'number' && Number.isFinite(first)
      ? { job: body.job, attemptsBefore: body.attemptsBefore, firstAttemptAt: first }
      : { job: body.job, attemptsBefore: body.attemptsBefore };
  }
  return { job: body, attemptsBefore: 0 };
}

/** The accepting key of a job read loosely (a job this worker cannot read may still be keyed), or `undefined`. */
function keyOf(job: unknown): { key: string; id: string } | undefined {
  if (!isObject(job)) return undefined;
  const { id, namespace, signed } = job;
  if (typeof id !== 'string' || id === '' || typeof namespace !== 'string' || namespace === '' || namespace.includes(':') || typeof signed !== 'boolean') return undefined;
  return { key: acceptKey(namespace, signed, id), id };
}

const wholeSeconds = (ms: number): number => Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.ceil(ms / 1000)));

/** Runs `work` on each item, at most `limit` at once. */
async function eachAtMost<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

function checkBatch(batch: MessageBatchLike): void {
  if (!isObject(batch) || !Array.isArray(batch.messages)) {
    throw new TypeError(`a queue consumer needs the MessageBatch Queues passes to queue(batch, env, ctx), got ${describeValue(batch)}`);
  }
}

class CloudflareQueues implements CloudflareQueueInbox {
  readonly engine = 'cloudflare-queues';
  readonly maxAttempts: number;
  readonly maxBacklog: number;
  readonly timeoutMs: number;
  readonly #queue: QueueLike;
  readonly #claims: DurableObjectNamespaceLike;
  readonly #shelf: string;
  readonly #backoffDelayMs: number;
  /** The stores the consumers' claims live in. */
  readonly #workers: WorkerStores;

  constructor(options: CloudflareQueueInboxOptions) {
    if (!isObject(options)) throw new TypeError('cloudflareQueueInbox needs an options object: cloudflareQueueInbox({ queue: env.WEBHOOK_QUEUE, claims: env.WEBHOOK_CLAIMS })');
    if (!isObject(options.queue) || typeof options.queue.send !== 'function') {
      throw new TypeError(`cloudflareQueueInbox queue must be a Queue producer binding (env.WEBHOOK_QUEUE), got ${describeValue(options.queue)}`);
    }
    const claims = options.claims as Partial<DurableObjectNamespaceLike> | undefined;
    if (!isObject(claims) || typeof claims.idFromName !== 'function' || typeof claims.get !== 'function') {
      throw new TypeError(`cloudflareQueueInbox claims must be the Durable Object namespace binding of the WebhookClaims class (env.WEBHOOK_CLAIMS), got ${describeValue(claims)}`);
    }
    const name = options.name ?? 'webhooks';
    if (typeof name !== 'string' || name === '') throw new TypeError('cloudflareQueueInbox name must be a non-empty string');
    const settings = commonSettings('cloudflareQueueInbox', options);
    this.#queue = options.queue;
    this.#claims = options.claims;
    // Store keys start with a non-empty namespace, so no claim's object has this name.
    this.#shelf = `:dead-letters:${name}`;
    this.maxAttempts = settings.maxAttempts;
    this.maxBacklog = settings.maxBacklog;
    this.timeoutMs = settings.timeoutMs;
    this.#backoffDelayMs = settings.backoffDelayMs;
    const idempotency = options.idempotency;
    if (idempotency !== undefined && (typeof idempotency !== 'object' || idempotency === null)) throw new TypeError('cloudflareQueueInbox idempotency must be an object: { store }');
    this.#workers = new WorkerStores('cloudflareQueueInbox', { store: idempotency?.store ?? durableObjectStore(this.#claims) }, CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS * 1000);
  }

  #ask<Operation extends { op: string }>(operation: Operation): Promise<unknown> {
    return askObject(this.#claims, this.#shelf, operation, DEFAULT_DURABLE_OBJECT_TIMEOUT_MS, 'durable-object');
  }

  async enqueue(job: InboxJob): Promise<'enqueued' | 'duplicate'> {
    const message: Envelope = { job, attemptsBefore: 0 };
    // With room for what a failed attempt's re-send adds (`firstAttemptAt`, the attempts spent).
    const size = utf8Encoder.encode(JSON.stringify(message)).byteLength + MESSAGE_METADATA_BYTES + RESEND_HEADROOM_BYTES;
    if (size > CLOUDFLARE_QUEUE_MESSAGE_LIMIT_BYTES) {
      const bodyBytes = Math.floor((job.body.length * 3) / 4) - (job.body.endsWith('==') ? 2 : job.body.endsWith('=') ? 1 : 0);
      throw new WebhookError(
        'PAYLOAD_TOO_LARGE',
        `request body of ${bodyBytes} bytes is too large for the inbox: as a queue message it takes ${size} bytes, past the limit of ${CLOUDFLARE_QUEUE_MESSAGE_LIMIT_BYTES}`,
        { hint: 'Cloudflare Queues takes messages up to 128 KB, and a job holds the body in base64: bodies up to about 95 KB fit' },
      );
    }
    await this.#queue.send(message, { contentType: 'json' });
    return 'enqueued';
  }

  async backlog(): Promise<number> {
    // Runtimes without the binding's metrics() report no backlog: maxBacklog is then not enforced.
    if (typeof this.#queue.metrics !== 'function') return 0;
    const metrics = await this.#queue.metrics();
    return typeof metrics?.backlogCount === 'number' ? metrics.backlogCount : 0;
  }

  work(): Promise<InboxWorker> {
    return Promise.reject(
      new TypeError("Cloudflare Queues pushes batches to the Worker's queue() export: export inbox.consumer(handler) as queue, rather than calling inbox.work"),
    );
  }

  consumer(handler: InboxHandler, options?: WorkOptions): QueueConsumer {
    const runner = new JobRunner(handler, this.#workers.optionsOf(options), this.maxAttempts, this.engine, CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS);
    this.#workers.watch(runner);
    // A plain function (Workers call the export unbound), reaching the inbox through `inbox`.
    const inbox = this;
    return async function consumer(this: void, batch: MessageBatchLike): Promise<void> {
      checkBatch(batch);
      await eachAtMost(batch.messages, runner.concurrency, (message) => inbox.#consume(runner, message));
    };
  }

  async #consume(runner: JobRunner, message: QueueMessageLike): Promise<void> {
    const envelope = envelopeOf(message.body);
    const { job, attemptsBefore } = envelope;
    // `attempts` counts this delivery too (1 on the first).
    const attempt = attemptsBefore + (Number.isInteger(message.attempts) && message.attempts > 0 ? message.attempts : 1);
    const verdict: Verdict = await runner.run({ data: job, attempt });
    const webhookId = keyOf(job)?.id ?? '(unreadable job)';
    switch (verdict.kind) {
      case 'processed':
      case 'duplicate':
      case 'stale':
        message.ack();
        return;
      case 'deferred': {
        // Sent again as a new message carrying the attempts spent: Queues' retry() would count one.
        const delaySeconds = wholeSeconds(verdict.delayMs);
        try {
          await this.#queue.send({ ...envelope, attemptsBefore: attempt - 1 } satisfies Envelope, { contentType: 'json', delaySeconds });
          message.ack();
        } catch (error) {
          runner.report(error, 'settle', webhookId);
          message.retry({ delaySeconds });
        }
        return;
      }
      case 'failed': {
        // Known once an attempt failed: kept in the envelope from the first failure on.
        const firstAttemptAt = envelope.firstAttemptAt ?? (attempt === 1 ? verdict.startedAt : undefined);
        if (!verdict.final) {
          const delaySeconds = this.#backoffSeconds(attempt);
          if (envelope.firstAttemptAt === undefined && firstAttemptAt !== undefined) {
            try {
              // The first failure: the job again, carrying when its first attempt began.
              await this.#queue.send({ job, attemptsBefore: attempt, firstAttemptAt } satisfies Envelope, { contentType: 'json', delaySeconds });
              message.ack();
              return;
            } catch (error) {
              // Retried as it is: only the dead letter's firstAttemptAt is lost.
              runner.report(error, 'settle', webhookId);
            }
          }
          message.retry({ delaySeconds });
          return;
        }
        try {
          const recorded = await this.#record(job, { attempts: attempt, error: failureOf(failureText(verdict.error)), firstAttemptAt });
          if (!recorded) runner.report(new Error('the job could not be kept as a dead letter: it has no webhook id, namespace or signed field'), 'settle', webhookId);
          message.ack();
        } catch (error) {
          // Delivered again later: Queues' own dead letter queue takes it if this keeps failing.
          runner.report(error, 'settle', webhookId);
          message.retry({ delaySeconds: this.#backoffSeconds(attempt) });
        }
      }
    }
  }

  /** The delay before retry `attempt + 1`: exponential, from the upper half (jitter), in whole seconds. */
  #backoffSeconds(attempt: number): number {
    const full = this.#backoffDelayMs * 2 ** Math.min(attempt - 1, 30);
    return wholeSeconds(full / 2 + (Math.random() * full) / 2);
  }

  /** Records a dead letter in the inbox's object; `false` when the job cannot be keyed. */
  async #record(job: unknown, failure: { attempts: number; error: { name: string; message: string }; firstAttemptAt: number | undefined }): Promise<boolean> {
    const keyed = keyOf(job);
    if (keyed === undefined) return false;
    const value: Shelved = { job, attempts: failure.attempts, error: failure.error, firstAttemptAt: failure.firstAttemptAt ?? null, failedAt: Date.now() };
    await this.#ask({ op: 'shelf.put', key: keyed.key, value: JSON.stringify(value), ms: CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS * 1000 });
    return true;
  }

  deadLetterConsumer(options?: DeadLetterConsumerOptions): QueueConsumer {
    if (options !== undefined && (typeof options !== 'object' || options === null)) throw new TypeError('deadLetterConsumer options must be an object');
    const maxRetries = options?.maxRetries ?? this.maxAttempts - 1;
    if (!Number.isInteger(maxRetries) || maxRetries < 0 || maxRetries > 100) throw new RangeError('deadLetterConsumer maxRetries must be a whole number from 0 to 100 (Queues\' max_retries)');
    const logger = checkLogger(options?.logger);
    const onError =
      options?.onError ?? ((error: unknown, context: { webhookId: string }) => logFailure(logger, { stage: 'settle', webhookId: context.webhookId, willRetry: true }, 'inbox: a dead letter was not recorded', error));
    if (typeof onError !== 'function') throw new TypeError('deadLetterConsumer onError must be a function');
    const inbox = this;
    return async function deadLetterConsumer(this: void, batch: MessageBatchLike): Promise<void> {
      checkBatch(batch);
      for (const message of batch.messages) {
        const { job, attemptsBefore, firstAttemptAt } = envelopeOf(message.body);
        const error = {
          name: 'RetriesExhausted',
          message: 'Cloudflare Queues moved the message to the dead letter queue after max_retries: the consumer never settled it (it failed, ran out of time, or max_retries is below maxAttempts - 1), so its last failure is not known',
        };
        try {
          // Its last attempt's end is not known either: failedAt is when it is recorded here.
          if (!(await inbox.#record(job, { attempts: attemptsBefore + maxRetries + 1, error, firstAttemptAt }))) {
            onError(new Error('the message is not an inbox job: it has no webhook id, namespace or signed field'), { webhookId: '(unreadable job)' });
          }
          message.ack();
        } catch (failure) {
          onError(failure, { webhookId: keyOf(job)?.id ?? '(unreadable job)' });
          message.retry();
        }
      }
    };
  }

  async deadLetters(options?: { limit?: number }): Promise<DeadLetter[]> {
    const limit = options?.limit ?? 1000;
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new RangeError('deadLetters limit must be a whole number from 1 to 10 000');
    const reply = await this.#ask({ op: 'shelf.list', limit });
    const values = isObject(reply) && Array.isArray(reply.values) ? (reply.values as unknown[]) : [];
    const letters: DeadLetter[] = [];
    for (const value of values) {
      let shelved: Shelved;
      let job: InboxJob;
      try {
        shelved = JSON.parse(String(value)) as Shelved;
        job = readJob(shelved.job);
      } catch {
        continue; // A job in a format this version does not read: retry() still finds it by id.
      }
      letters.push({
        webhookId: job.id,
        namespace: job.namespace,
        signed: job.signed,
        attempts: shelved.attempts,
        error: shelved.error,
        acceptedAt: new Date(job.acceptedAt),
        firstAttemptAt: typeof shelved.firstAttemptAt === 'number' ? new Date(shelved.firstAttemptAt) : undefined,
        failedAt: new Date(shelved.failedAt),
        job,
      });
    }
    return this.#workers.unprocessed(letters);
  }

  async retry(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const key = selectedKey(webhookId, selector, 'retry');
    const reply = await this.#ask({ op: 'shelf.get', key });
    const value = isObject(reply) ? reply.value : null;
    if (typeof value !== 'string') return false;
    const shelved = JSON.parse(value) as Shelved;
    if (await this.#workers.processed(shelved.job)) return false;
    // Sent before the record goes: a retry that fails half-way leaves the dead letter, and one
    // sent twice runs once (the worker's claim). Deleted only while it is the record read: the
    // job sent may already have failed again and been recorded anew.
    await this.#queue.send({ job: shelved.job, attemptsBefore: 0 } satisfies Envelope, { contentType: 'json' });
    await this.#ask({ op: 'shelf.delete', key, value });
    return true;
  }

  async purge(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const reply = await this.#ask({ op: 'shelf.delete', key: selectedKey(webhookId, selector, 'purge') });
    return isObject(reply) && reply.ok === true;
  }

  close(): Promise<void> {
    // Nothing of the inbox's own stays open: its bindings are the runtime's, and Queues runs and
    // ends each consumer invocation.
    return this.#workers.close();
  }
}

/**
 * An inbox on Cloudflare Queues. The Worker that receives webhooks passes it to
 * `createReceiver({ inbox })` (or the Fetch handler) and answers 202 once Queues has the job; the
 * Worker's `queue()` export is `inbox.consumer(handler)` for the queue, and
 * `inbox.deadLetterConsumer()` for its dead letter queue. Claims and dead letters live in the
 * Durable Object store's `WebhookClaims` objects (SQLite-backed).
 *
 * wrangler.toml:
 *
 * ```toml
 * [[queues.producers]]
 * binding = "WEBHOOK_QUEUE"
 * queue = "webhooks"
 *
 * [[queues.consumers]]
 * queue = "webhooks"
 * max_retries = 11              # at least maxAttempts - 1
 * dead_letter_queue = "webhooks-dlq"
 *
 * [[queues.consumers]]
 * queue = "webhooks-dlq"
 * ```
 *
 * @example
 * ```ts
 * import { cloudflareQueueInbox, type MessageBatchLike } from 'webhook-receiver/cloudflare';
 * export { WebhookClaims } from 'webhook-receiver/cloudflare';
 *
 * const inboxOf = (env: Env) => cloudflareQueueInbox({ queue: env.WEBHOOK_QUEUE, claims: env.WEBHOOK_CLAIMS });
 *
 * export default {
 *   async queue(batch: MessageBatchLike, env: Env): Promise<void> {
 *     const inbox = inboxOf(env);
 *     if (batch.queue === 'webhooks-dlq') return inbox.deadLetterConsumer()(batch);
 *     return inbox.consumer(async (webhook) => { await env.DB.prepare('INSERT INTO events VALUES (?)').bind(webhook.text()).run(); })(batch);
 *   },
 * };
 * ```
 */
export function cloudflareQueueInbox(options: CloudflareQueueInboxOptions): CloudflareQueueInbox {
  return new CloudflareQueues(options);
}

/** The inbox on Cloudflare Queues: accepting into the queue, consuming its batches, and its dead letters. */

import { WebhookError } from '../../errors.ts';
import { checkNonEmptyString, checkObject, describeValue, isObject, isWholeNumber } from '../../lib/checks.ts';
import { utf8Encoder } from '../../lib/encoding.ts';
import type { DurableObjectNamespaceLike } from '../../stores/durable-object/bindings.ts';
import { durableObjectStore } from '../../stores/durable-object/store.ts';
import { WorkerStores } from '../lifecycle.ts';
import { commonSettings, failureOf, failureText, selectedKey } from '../job.ts';
import type { DeadLetter, InboxHandler, InboxJob, InboxWorker, JobSelector, WorkOptions } from '../types.ts';
import { JobRunner, type Verdict } from '../worker.ts';
import type { MessageBatchLike, QueueConsumer, QueueLike, QueueMessageLike } from './bindings.ts';
import { deadLetterConsumer, DeadLetterShelf, type Shelved } from './dead-letters.ts';
import { checkBatch, eachAtMost, envelopeOf, keyOf, wholeSeconds, type Envelope } from './messages.ts';
import {
  CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS,
  CLOUDFLARE_QUEUE_MESSAGE_LIMIT_BYTES,
  type CloudflareQueueInbox,
  type CloudflareQueueInboxOptions,
  type DeadLetterConsumerOptions,
} from './options.ts';

/** What Queues counts towards a message besides its body ("about 100 bytes of internal metadata"). */
const MESSAGE_METADATA_BYTES = 100;
/** What a failed attempt's re-send adds to a message (`firstAttemptAt` and the attempts spent), kept free at accept. */
const RESEND_HEADROOM_BYTES = 64;

class CloudflareQueues implements CloudflareQueueInbox {
  readonly engine = 'cloudflare-queues';
  readonly maxAttempts: number;
  readonly maxBacklog: number;
  readonly timeoutMs: number;
  readonly #queue: QueueLike;
  readonly #claims: DurableObjectNamespaceLike;
  readonly #shelf: DeadLetterShelf;
  readonly #backoffDelayMs: number;
  /** The stores the consumers' claims live in. */
  readonly #workers: WorkerStores;

  constructor(options: CloudflareQueueInboxOptions) {
    checkObject(options, 'cloudflareQueueInbox needs an options object: cloudflareQueueInbox({ queue: env.WEBHOOK_QUEUE, claims: env.WEBHOOK_CLAIMS })');
    if (!isObject(options.queue) || typeof options.queue.send !== 'function') {
      throw new TypeError(`cloudflareQueueInbox queue must be a Queue producer binding (env.WEBHOOK_QUEUE), got ${describeValue(options.queue)}`);
    }
    const claims = options.claims as Partial<DurableObjectNamespaceLike> | undefined;
    if (!isObject(claims) || typeof claims.idFromName !== 'function' || typeof claims.get !== 'function') {
      throw new TypeError(`cloudflareQueueInbox claims must be the Durable Object namespace binding of the WebhookClaims class (env.WEBHOOK_CLAIMS), got ${describeValue(claims)}`);
    }
    const name = options.name ?? 'webhooks';
    checkNonEmptyString(name, 'cloudflareQueueInbox name must be a non-empty string');
    const settings = commonSettings('cloudflareQueueInbox', options);
    this.#queue = options.queue;
    this.#claims = options.claims;
    this.#shelf = new DeadLetterShelf(this.#claims, name);
    this.maxAttempts = settings.maxAttempts;
    this.maxBacklog = settings.maxBacklog;
    this.timeoutMs = settings.timeoutMs;
    this.#backoffDelayMs = settings.backoffDelayMs;
    const idempotency = options.idempotency;
    if (idempotency !== undefined) checkObject(idempotency, 'cloudflareQueueInbox idempotency must be an object: { store }');
    this.#workers = new WorkerStores('cloudflareQueueInbox', { store: idempotency?.store ?? durableObjectStore(this.#claims) }, CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS * 1000);
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
          const recorded = await this.#shelf.record(job, { attempts: attempt, error: failureOf(failureText(verdict.error)), firstAttemptAt });
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

  deadLetterConsumer(options?: DeadLetterConsumerOptions): QueueConsumer {
    return deadLetterConsumer(this.#shelf, this.maxAttempts, options);
  }

  async deadLetters(options?: { limit?: number }): Promise<DeadLetter[]> {
    const limit = options?.limit ?? 1000;
    if (!isWholeNumber(limit, 1, 10_000)) throw new RangeError('deadLetters limit must be a whole number from 1 to 10 000');
    return this.#workers.unprocessed(await this.#shelf.list(limit));
  }

  async retry(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const key = selectedKey(webhookId, selector, 'retry');
    const value = await this.#shelf.get(key);
    if (value === undefined) return false;
    const shelved = JSON.parse(value) as Shelved;
    if (await this.#workers.processed(shelved.job)) return false;
    // Sent before the record goes: a retry that fails half-way leaves the dead letter, and one
    // sent twice runs once (the worker's claim). Deleted only while it is the record read: the
    // job sent may already have failed again and been recorded anew.
    await this.#queue.send({ job: shelved.job, attemptsBefore: 0 } satisfies Envelope, { contentType: 'json' });
    await this.#shelf.delete(key, value);
    return true;
  }

  async purge(webhookId: string, selector?: JobSelector): Promise<boolean> {
    return this.#shelf.delete(selectedKey(webhookId, selector, 'purge'));
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

/** The Cloudflare inbox's public shapes: its limits, its options and the inbox's type. */

import type { WebhookLogger } from '../../logger.ts';
import type { DurableObjectNamespaceLike } from '../../stores/durable-object/bindings.ts';
import type { IdempotencyStore } from '../../stores/types.ts';
import type { CommonInboxOptions } from '../job.ts';
import type { Inbox, InboxHandler, InboxWorker, WorkOptions } from '../types.ts';
import type { QueueConsumer, QueueLike } from './bindings.ts';

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

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

export type { MessageBatchLike, QueueConsumer, QueueLike, QueueMessageLike } from './bindings.ts';
export { cloudflareQueueInbox } from './inbox.ts';
export {
  CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS,
  CLOUDFLARE_QUEUE_MESSAGE_LIMIT_BYTES,
  type CloudflareQueueInbox,
  type CloudflareQueueInboxOptions,
  type DeadLetterConsumerOptions,
} from './options.ts';

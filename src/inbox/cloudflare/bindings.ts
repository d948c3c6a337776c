/**
 * The parts of Cloudflare Queues' bindings the inbox uses: the producer, and the batches and
 * messages Queues hands the Worker's `queue()` export. Declared here so that neither the package
 * nor its types need `@cloudflare/workers-types`.
 */

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

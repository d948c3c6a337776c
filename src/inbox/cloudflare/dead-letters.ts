/**
 * The Cloudflare inbox's dead letters: kept in one `WebhookClaims` object (the one place on
 * Cloudflare where they can be listed), each until its retention runs out, oldest first; and the
 * consumer of Queues' own dead letter queue, which records the messages Queues gave up on there.
 */

import { checkFunction, checkObject, isObject, isWholeNumber } from '../../lib/checks.ts';
import { checkLogger, logFailure } from '../../logger.ts';
import type { DurableObjectNamespaceLike } from '../../stores/durable-object/bindings.ts';
import { askObject } from '../../stores/durable-object/rpc.ts';
import { DEFAULT_DURABLE_OBJECT_TIMEOUT_MS } from '../../stores/durable-object/store.ts';
import { readJob } from '../../job-format.ts';
import type { DeadLetter, InboxJob } from '../types.ts';
import type { MessageBatchLike, QueueConsumer } from './bindings.ts';
import { checkBatch, envelopeOf, keyOf } from './messages.ts';
import { CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS, type DeadLetterConsumerOptions } from './options.ts';

/** What a dead letter's record holds (JSON in its object). */
export interface Shelved {
  job: unknown;
  attempts: number;
  error: { name: string; message: string };
  /** `null` when it is not known (absent from records of earlier versions). */
  firstAttemptAt?: number | null;
  failedAt: number;
}

/** How a job failed for good: its attempts, its last error, when its first attempt began (when known). */
interface Failure {
  attempts: number;
  error: { name: string; message: string };
  firstAttemptAt: number | undefined;
}

/** The dead letters of one inbox, in the `WebhookClaims` object named after it. */
export class DeadLetterShelf {
  readonly #claims: DurableObjectNamespaceLike;
  readonly #object: string;

  constructor(claims: DurableObjectNamespaceLike, inboxName: string) {
    this.#claims = claims;
    // Store keys start with a non-empty namespace, so no claim's object has this name.
    this.#object = `:dead-letters:${inboxName}`;
  }

  #ask<Operation extends { op: string }>(operation: Operation): Promise<unknown> {
    return askObject(this.#claims, this.#object, operation, DEFAULT_DURABLE_OBJECT_TIMEOUT_MS, 'durable-object');
  }

  /** Records a dead letter; `false` when the job cannot be keyed. */
  async record(job: unknown, failure: Failure): Promise<boolean> {
    const keyed = keyOf(job);
    if (keyed === undefined) return false;
    const value: Shelved = { job, attempts: failure.attempts, error: failure.error, firstAttemptAt: failure.firstAttemptAt ?? null, failedAt: Date.now() };
    await this.#ask({ op: 'shelf.put', key: keyed.key, value: JSON.stringify(value), ms: CLOUDFLARE_DEAD_LETTER_RETENTION_SECONDS * 1000 });
    return true;
  }

  /** Up to `limit` dead letters, oldest first; records of a job format this version does not read are left out. */
  async list(limit: number): Promise<DeadLetter[]> {
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
    return letters;
  }

  /** The record of the job with accepting key `key`, as stored (JSON text), or `undefined`. */
  async get(key: string): Promise<string | undefined> {
    const reply = await this.#ask({ op: 'shelf.get', key });
    const value = isObject(reply) ? reply.value : null;
    return typeof value === 'string' ? value : undefined;
  }

  /** Deletes the record of `key` (only while it is `value`, when given); answers whether it did. */
  async delete(key: string, value?: string): Promise<boolean> {
    const reply = await this.#ask(value === undefined ? { op: 'shelf.delete', key } : { op: 'shelf.delete', key, value });
    return isObject(reply) && reply.ok === true;
  }
}

/** `inbox.deadLetterConsumer(options)`: records each message of Queues' dead letter queue on `shelf`. */
export function deadLetterConsumer(shelf: DeadLetterShelf, maxAttempts: number, options: DeadLetterConsumerOptions | undefined): QueueConsumer {
  if (options !== undefined) checkObject(options, 'deadLetterConsumer options must be an object');
  const maxRetries = options?.maxRetries ?? maxAttempts - 1;
  if (!isWholeNumber(maxRetries, 0, 100)) throw new RangeError('deadLetterConsumer maxRetries must be a whole number from 0 to 100 (Queues\' max_retries)');
  const logger = checkLogger(options?.logger);
  const onError =
    options?.onError ?? ((error: unknown, context: { webhookId: string }) => logFailure(logger, { stage: 'settle', webhookId: context.webhookId, willRetry: true }, 'inbox: a dead letter was not recorded', error));
  checkFunction(onError, 'deadLetterConsumer onError must be a function');
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
        if (!(await shelf.record(job, { attempts: attemptsBefore + maxRetries + 1, error, firstAttemptAt }))) {
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

/** A message as the inbox sends and reads it, and how a batch of them is worked through. */

import { describeValue, isObject } from '../../lib/checks.ts';
import { acceptKey } from '../job.ts';
import type { MessageBatchLike } from './bindings.ts';

/** The longest delay the inbox asks of Queues (12 hours, within every documented limit). */
const MAX_DELAY_SECONDS = 43_200;

/**
 * A message as the inbox sends it: the job, the handler attempts it spent in earlier messages, and
 * when its first attempt began (epoch ms), once one has failed.
 */
export interface Envelope {
  job: unknown;
  attemptsBefore: number;
  firstAttemptAt?: number;
}

/** The envelope of a message; a bare job (sent by hand) is one with no attempts before. */
export function envelopeOf(body: unknown): Envelope {
  if (isObject(body) && 'job' in body && typeof body.attemptsBefore === 'number' && Number.isInteger(body.attemptsBefore) && body.attemptsBefore >= 0) {
    const first = body.firstAttemptAt;
    return typeof first === 'number' && Number.isFinite(first)
      ? { job: body.job, attemptsBefore: body.attemptsBefore, firstAttemptAt: first }
      : { job: body.job, attemptsBefore: body.attemptsBefore };
  }
  return { job: body, attemptsBefore: 0 };
}

/** The accepting key of a job read loosely (a job this worker cannot read may still be keyed), or `undefined`. */
export function keyOf(job: unknown): { key: string; id: string } | undefined {
  if (!isObject(job)) return undefined;
  const { id, namespace, signed } = job;
  if (typeof id !== 'string' || id === '' || typeof namespace !== 'string' || namespace === '' || namespace.includes(':') || typeof signed !== 'boolean') return undefined;
  return { key: acceptKey(namespace, signed, id), id };
}

/** A delay in whole seconds, as Queues counts them: rounded up, held to 12 hours at most. */
export const wholeSeconds = (ms: number): number => Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.ceil(ms / 1000)));

/** Runs `work` on each item, at most `limit` at once. */
export async function eachAtMost<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

/** Throws a `TypeError` unless `batch` is the `MessageBatch` Queues passes to `queue()`. */
export function checkBatch(batch: MessageBatchLike): void {
  if (!isObject(batch) || !Array.isArray(batch.messages)) {
    throw new TypeError(`a queue consumer needs the MessageBatch Queues passes to queue(batch, env, ctx), got ${describeValue(batch)}`);
  }
}

/**
 * What becomes of one received message once the worker's runner has judged it, shared by the
 * long-running worker and the Lambda handler: done (the caller deletes it, or Lambda does), or
 * kept (it comes back when its visibility ends). A failed attempt sets that visibility to the
 * backoff (SQS redelivers it then; no process sleeps); a deferral sends the job again as a new
 * message carrying its attempts, so no receive is spent on it; a permanent failure or the last
 * attempt sends it to the dead-letter queue with its failure, then it is done.
 */

import { failureOf, failureText } from '../job.ts';
import type { JobRunner, Verdict } from '../worker.ts';
import type { SqsCommands, SqsRequests } from './client.ts';
import { deadLetterBody, envelopeOf, fifoFields, keyOf, type Envelope } from './message.ts';

/** The longest visibility SQS sets (12 hours). */
const MAX_VISIBILITY_SECONDS = 43_200;
/** The longest per-message delay SQS takes (15 minutes). */
const MAX_DELAY_SECONDS = 900;

/** A received message as both the worker and Lambda's records have it. */
export interface Received {
  receiptHandle: string;
  body: string | undefined;
  /** `ApproximateReceiveCount`: this receive included. */
  receiveCount: number;
  /** `ApproximateFirstReceiveTimestamp` (epoch ms), when SQS gave it. */
  firstReceivedAt: number | undefined;
}

/** A received message, read: its envelope and the attempt this delivery is. */
export interface Opened {
  received: Received;
  envelope: Envelope;
  attempt: number;
  webhookId: string;
}

/** Reads a received message. */
export function open(received: Received): Opened {
  const envelope = envelopeOf(received.body);
  const receives = Number.isInteger(received.receiveCount) && received.receiveCount > 0 ? received.receiveCount : 1;
  return { received, envelope, attempt: envelope.attemptsBefore + receives, webhookId: keyOf(envelope.job)?.id ?? '(unreadable job)' };
}

/** The received message of SQS's attribute strings. */
export function receivedOf(receiptHandle: string, body: string | undefined, attributes: Record<string, string | undefined> | undefined): Received {
  const first = Number(attributes?.ApproximateFirstReceiveTimestamp);
  return { receiptHandle, body, receiveCount: Number(attributes?.ApproximateReceiveCount), firstReceivedAt: Number.isFinite(first) && first > 0 ? first : undefined };
}

/** What the settler needs of its inbox. */
export interface SettleContext {
  requests: SqsRequests;
  queueUrl: string;
  fifo: boolean;
  backoffDelayMs: number;
  timeoutMs: number;
  /** The dead-letter queue's URL and the largest message it takes. */
  deadLetterQueue(): Promise<{ url: string; maxMessageBytes: number }>;
}

const wholeSeconds = (ms: number, max: number): number => Math.min(max, Math.max(0, Math.ceil(ms / 1000)));

/** The visibility before retry `attempt + 1`: exponential, from the upper half (jitter), in whole seconds. */
function backoffSeconds(backoffDelayMs: number, attempt: number): number {
  const full = backoffDelayMs * 2 ** Math.min(attempt - 1, 30);
  return wholeSeconds(full / 2 + (Math.random() * full) / 2, MAX_VISIBILITY_SECONDS);
}

/** When the job's first attempt began, as far as it is known: kept in the envelope, or this message's first receive. */
function firstAttemptOf(message: Opened): number | undefined {
  if (message.envelope.firstAttemptAt !== undefined) return message.envelope.firstAttemptAt;
  // Only when every attempt so far was a receive of this very message.
  return message.envelope.attemptsBefore === 0 ? message.received.firstReceivedAt : undefined;
}

/** Sets the message's visibility (0: visible at once). */
export function changeVisibility(context: SettleContext, receiptHandle: string, seconds: number, signal?: AbortSignal): Promise<unknown> {
  return context.requests.send('ChangeMessageVisibility', context.timeoutMs, (sdk: SqsCommands) => new sdk.ChangeMessageVisibilityCommand({ QueueUrl: context.queueUrl, ReceiptHandle: receiptHandle, VisibilityTimeout: seconds }), signal);
}

/** Sends `envelope` to the source queue again (a deferral, a retry from the dead letters), as its next generation. */
export async function resend(context: SettleContext, envelope: Envelope, delayMs: number): Promise<void> {
  const next: Envelope = { job: envelope.job, attemptsBefore: envelope.attemptsBefore, generation: envelope.generation + 1 };
  if (envelope.firstAttemptAt !== undefined) next.firstAttemptAt = envelope.firstAttemptAt;
  const fifo = await fifoFields(context.fifo, envelope.job, next.generation);
  // FIFO queues take no per-message delay.
  const delay = context.fifo ? {} : { DelaySeconds: wholeSeconds(delayMs, MAX_DELAY_SECONDS) };
  await context.requests.send('SendMessage', context.timeoutMs, (sdk) => new sdk.SendMessageCommand({ QueueUrl: context.queueUrl, MessageBody: JSON.stringify(next), ...delay, ...fifo }));
}

/**
 * Does what `verdict` asks with the message: `'done'` when it may be deleted (the job ran, was
 * sent again, or went to the dead-letter queue), `'keep'` when it must come back (a failed attempt
 * after its backoff, or a settlement that failed: told to the runner's `onError`).
 */
export async function settle(context: SettleContext, runner: JobRunner, message: Opened, verdict: Verdict): Promise<'done' | 'keep'> {
  const { envelope, attempt, webhookId } = message;
  const handle = message.received.receiptHandle;
  const keepFor = async (seconds: number) => {
    try {
      await changeVisibility(context, handle, seconds);
    } catch (error) {
      // It comes back when the visibility it was received with ends.
      runner.report(error, 'settle', webhookId);
    }
    return 'keep' as const;
  };
  switch (verdict.kind) {
    case 'processed':
    case 'duplicate':
    case 'stale':
      return 'done';
    case 'deferred': {
      const first = attempt > 1 ? firstAttemptOf(message) : undefined;
      const carried: Envelope = { ...envelope, attemptsBefore: attempt - 1 };
      if (first !== undefined) carried.firstAttemptAt = first;
      try {
        await resend(context, carried, verdict.delayMs);
        return 'done';
      } catch (error) {
        runner.report(error, 'settle', webhookId);
        return keepFor(wholeSeconds(verdict.delayMs, MAX_VISIBILITY_SECONDS));
      }
    }
    case 'failed': {
      if (!verdict.final) return keepFor(backoffSeconds(context.backoffDelayMs, attempt));
      const failure = { attempts: attempt, error: failureOf(failureText(verdict.error)), failedAt: Date.now() };
      const first = firstAttemptOf(message) ?? (attempt === 1 ? verdict.startedAt : undefined);
      const kept: Envelope = { ...envelope };
      if (first !== undefined) kept.firstAttemptAt = first;
      try {
        const queue = await context.deadLetterQueue();
        const body = deadLetterBody(kept, failure, queue.maxMessageBytes);
        // The dead letter keeps the source's group (FIFO), so a FIFO dead-letter queue lists and retries it.
        const fifo = await fifoFields(queue.url.endsWith('.fifo'), envelope.job, envelope.generation + 1);
        await context.requests.send('SendMessage', context.timeoutMs, (sdk) => new sdk.SendMessageCommand({ QueueUrl: queue.url, MessageBody: body, ...fifo }));
        return 'done';
      } catch (error) {
        // Back after the backoff, and dead-lettered then; the redrive policy is the backstop.
        runner.report(error, 'settle', webhookId);
        return keepFor(backoffSeconds(context.backoffDelayMs, attempt));
      }
    }
  }
}

/**
 * The dead-letter queue, read without consuming it: receive with a short visibility, look, then
 * make every message visible again. SQS has no other way to look at a queue, so a listing is best
 * effort (short receives sample the queue's servers; a message another reader holds is not seen),
 * and a FIFO dead-letter queue shows only the head of each message group. Bounded: at most `limit`
 * messages, ten a receive.
 */

import { deadLetterOf } from '../job.ts';
import type { DeadLetter } from '../types.ts';
import type { ReceivedMessage, SqsRequests } from './client.ts';
import { envelopeOf, keyOf, type Envelope } from './message.ts';
import { SYSTEM_ATTRIBUTES } from './poller.ts';

/** How long a scan holds what it received before it gives it back (if it dies, SQS does). */
const SCAN_VISIBILITY_SECONDS = 30;

/** One message of the dead-letter queue, held by a scan. */
export interface Held {
  receiptHandle: string;
  envelope: Envelope;
  /** The accepting key of its job, when it has one. */
  key: string | undefined;
  sentAt: number;
}

/** Receives up to `limit` messages of the queue, holding them invisible; stops at the first empty receive. */
export async function scan(requests: SqsRequests, queueUrl: string, limit: number, timeoutMs: number): Promise<Held[]> {
  const held: Held[] = [];
  while (held.length < limit) {
    const reply = await requests.send<{ Messages?: ReceivedMessage[] }>('ReceiveMessage', timeoutMs, (sdk) =>
      new sdk.ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: Math.min(10, limit - held.length),
        WaitTimeSeconds: 0,
        VisibilityTimeout: SCAN_VISIBILITY_SECONDS,
        MessageSystemAttributeNames: SYSTEM_ATTRIBUTES,
      }),
    );
    const messages = reply?.Messages ?? [];
    if (messages.length === 0) break;
    for (const message of messages) {
      if (message.ReceiptHandle === undefined) continue;
      const envelope = envelopeOf(message.Body);
      const sent = Number(message.Attributes?.SentTimestamp);
      held.push({ receiptHandle: message.ReceiptHandle, envelope, key: keyOf(envelope.job)?.key, sentAt: Number.isFinite(sent) ? sent : 0 });
    }
  }
  return held;
}

/** Makes held messages visible again, ten a request. */
export async function giveBack(requests: SqsRequests, queueUrl: string, held: readonly Held[], timeoutMs: number): Promise<void> {
  for (let start = 0; start < held.length; start += 10) {
    const entries = held.slice(start, start + 10).map((message, index) => ({ Id: String(index), ReceiptHandle: message.receiptHandle, VisibilityTimeout: 0 }));
    await requests.send('ChangeMessageVisibilityBatch', timeoutMs, (sdk) => new sdk.ChangeMessageVisibilityBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
  }
}

/** Deletes a held message. */
export async function remove(requests: SqsRequests, queueUrl: string, message: Held, timeoutMs: number): Promise<void> {
  await requests.send('DeleteMessage', timeoutMs, (sdk) => new sdk.DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.receiptHandle }));
}

/** What a message the redrive policy moved is listed with: SQS keeps no reason. */
const MOVED_BY_REDRIVE = {
  name: 'RetriesExhausted',
  message: "SQS moved the message to the dead-letter queue after the redrive policy's maxReceiveCount receives: its worker never settled it (it died or timed out, or a dead-letter send failed), so its last failure is not known",
};

/** The dead letter a held message shows, or `undefined` for one that is not an inbox job. */
export function letterOf(message: Held, maxReceiveCount: number | undefined): DeadLetter | undefined {
  const { envelope } = message;
  const failure = envelope.failure;
  const firstAttemptAt = envelope.firstAttemptAt === undefined ? undefined : new Date(envelope.firstAttemptAt);
  if (failure !== undefined) {
    return deadLetterOf(envelope.job, { attempts: failure.attempts, error: failure.error, firstAttemptAt, failedAt: new Date(failure.failedAt) });
  }
  // Moved by the redrive policy: its attempts are those of its earlier messages and the receives
  // it took; its end is not known.
  return deadLetterOf(envelope.job, { attempts: envelope.attemptsBefore + (maxReceiveCount ?? 0), error: MOVED_BY_REDRIVE, firstAttemptAt, failedAt: undefined });
}

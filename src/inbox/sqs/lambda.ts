/**
 * The worker on Lambda: a handler for the SQS event source that runs a batch through the worker's
 * runner and answers with a partial batch response, so Lambda deletes the records that are done
 * and leaves the rest. On a FIFO queue the records of one message group run in order, and a record
 * that is not done stops the rest of its group in the batch (reported as failed, not run); other
 * groups go on. The invocation's remaining time bounds each job: a record is started only with
 * time to spare, and a running handler's `context.signal` aborts before Lambda would freeze it.
 */

import { isObject } from '../../lib/checks.ts';
import type { JobRunner } from '../worker.ts';
import { open, receivedOf, settle, type SettleContext } from './settle.ts';

/**
 * One record of Lambda's SQS event, as Lambda passes it (`SQSRecord` in `@types/aws-lambda`).
 *
 * @example
 * ```ts
 * const ids = (event: SqsEventLike) => event.Records.map((record: SqsRecordLike) => record.messageId);
 * ```
 */
export interface SqsRecordLike {
  messageId: string;
  receiptHandle: string;
  body: string;
  /** SQS's system attributes: `ApproximateReceiveCount`, `ApproximateFirstReceiveTimestamp`, `MessageGroupId` (FIFO)… */
  attributes: Record<string, string | undefined>;
  eventSource?: string;
  eventSourceARN?: string;
}

/**
 * Lambda's SQS event (`SQSEvent`).
 *
 * @example
 * ```ts
 * const event: SqsEventLike = { Records: [] };
 * ```
 */
export interface SqsEventLike {
  Records: SqsRecordLike[];
}

/**
 * What a Lambda handler for SQS answers (`SQSBatchResponse`): the records to leave on the queue.
 * Lambda reads it only when the event source mapping has `ReportBatchItemFailures` on; without it
 * Lambda deletes every record of a batch whose invocation succeeded.
 *
 * @example
 * ```ts
 * const none: SqsBatchResponse = { batchItemFailures: [] };
 * ```
 */
export interface SqsBatchResponse {
  batchItemFailures: { itemIdentifier: string }[];
}

/**
 * The part of Lambda's context the handler reads.
 *
 * @example
 * ```ts
 * const context: LambdaContextLike = { getRemainingTimeInMillis: () => 30_000 };
 * ```
 */
export interface LambdaContextLike {
  /** Milliseconds left before Lambda ends the invocation. */
  getRemainingTimeInMillis(): number;
}

/**
 * The Lambda handler {@link SqsInbox.lambda} returns.
 *
 * @example
 * ```ts
 * export const handler: SqsLambdaHandler = inbox.lambda(async (webhook) => { await events.insert(webhook.json()); });
 * ```
 */
export type SqsLambdaHandler = (event: SqsEventLike, context?: LambdaContextLike) => Promise<SqsBatchResponse>;

/** The time the batch runner keeps back from each invocation (see `SqsLambdaOptions.reserveMs`). */
export interface LambdaTimeOptions {
  /**
   * Time kept back from the invocation's remaining time, in milliseconds (default 2 000): a record
   * is started only while more than this is left, and a running handler's `context.signal` aborts
   * when only this is left, so the job ends (and is settled) before Lambda's timeout freezes it.
   */
  reserveMs: number;
}

/** Runs one batch. */
export async function runBatch(context: SettleContext, runner: JobRunner, event: SqsEventLike, lambda: LambdaContextLike | undefined, time: LambdaTimeOptions): Promise<SqsBatchResponse> {
  if (!isObject(event) || !Array.isArray(event.Records)) throw new TypeError('an SQS Lambda handler needs the event Lambda passes for an SQS trigger: { Records: [...] }');
  const remaining = () => (typeof lambda?.getRemainingTimeInMillis === 'function' ? lambda.getRemainingTimeInMillis() : Number.POSITIVE_INFINITY);
  const failed = new Set<string>();
  const spendsAttempt = context.fifo ? () => true : undefined;

  /** One record: `true` when it is done (Lambda deletes it). */
  const runRecord = async (record: SqsRecordLike): Promise<boolean> => {
    if (!isObject(record) || typeof record.messageId !== 'string' || typeof record.receiptHandle !== 'string') return false;
    const left = remaining() - time.reserveMs;
    // Not started without time to finish: it comes back when its visibility ends.
    if (left <= 0) return false;
    const opened = open(receivedOf(record.receiptHandle, record.body, record.attributes));
    const deadline = new AbortController();
    const timer = Number.isFinite(left) ? setTimeout(() => deadline.abort(new Error('the Lambda invocation is about to time out')), left) : undefined;
    try {
      const verdict = await runner.run({ data: opened.envelope.job, attempt: opened.attempt, signal: deadline.signal, spendsAttempt });
      return (await settle(context, runner, opened, verdict)) === 'done';
    } finally {
      clearTimeout(timer);
    }
  };

  // Standard queues: every record is its own lane. FIFO: one lane per message group, in order.
  const lanes = new Map<string, SqsRecordLike[]>();
  for (const record of event.Records) {
    const group = context.fifo ? (record.attributes?.MessageGroupId ?? record.messageId) : record.messageId;
    lanes.set(group, [...(lanes.get(group) ?? []), record]);
  }
  const queue = [...lanes.values()];
  let next = 0;
  const worker = async () => {
    while (next < queue.length) {
      const lane = queue[next++]!;
      let stopped = false;
      for (const record of lane) {
        // A record left in its group stops the rest of the group: SQS keeps a group in order.
        if (stopped || !(await runRecord(record))) {
          stopped = true;
          failed.add(record.messageId);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(runner.concurrency, queue.length) }, worker));
  return { batchItemFailures: event.Records.filter((record) => failed.has(record.messageId)).map((record) => ({ itemIdentifier: record.messageId })) };
}

/**
 * What the inbox reads from the queue's own settings (never changes: the queue and its redrive
 * policy are the user's infrastructure): the largest message it takes, and where and after how
 * many receives its redrive policy moves a message, which names the dead-letter queue.
 */

import type { SqsRequests } from './client.ts';

/** The queue's settings the inbox uses. */
export interface QueueSettings {
  maxMessageBytes: number;
  /** The redrive policy's `maxReceiveCount`, or `undefined` without one. */
  maxReceiveCount: number | undefined;
  /** The dead-letter queue's ARN from the redrive policy, or `undefined` without one. */
  deadLetterArn: string | undefined;
}

/** What SQS takes at most, and by default. */
export const SQS_MAX_MESSAGE_BYTES = 1_048_576;

/**
 * Whether `url` has a queue URL's shape: `http(s)://host/path`. Not parsed as a URL: a local
 * endpoint's queue URLs may name hosts WHATWG URLs refuse.
 */
export function isQueueUrl(url: string): boolean {
  return /^https?:\/\/[^/\s]+\/\S+$/.test(url);
}

/** Reads the queue's settings (`GetQueueAttributes`). */
export async function readQueueSettings(requests: SqsRequests, queueUrl: string, timeoutMs: number): Promise<QueueSettings> {
  const reply = await requests.send<{ Attributes?: Record<string, string | undefined> }>('GetQueueAttributes', timeoutMs, (sdk) => new sdk.GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['MaximumMessageSize', 'RedrivePolicy'] }));
  const attributes = reply?.Attributes ?? {};
  const size = Number(attributes.MaximumMessageSize);
  const settings: QueueSettings = { maxMessageBytes: Number.isInteger(size) && size > 0 ? size : SQS_MAX_MESSAGE_BYTES, maxReceiveCount: undefined, deadLetterArn: undefined };
  const policy = attributes.RedrivePolicy;
  if (typeof policy === 'string' && policy !== '') {
    try {
      const parsed = JSON.parse(policy) as { deadLetterTargetArn?: unknown; maxReceiveCount?: unknown };
      const count = Number(parsed.maxReceiveCount);
      if (Number.isInteger(count) && count > 0) settings.maxReceiveCount = count;
      if (typeof parsed.deadLetterTargetArn === 'string') settings.deadLetterArn = parsed.deadLetterTargetArn;
    } catch {
      // A policy that does not parse is as good as none: the warning says so.
    }
  }
  return settings;
}

/** The queue URL of an SQS queue's ARN (`arn:aws:sqs:region:account:name`), asked of SQS. */
export async function queueUrlOfArn(requests: SqsRequests, arn: string, timeoutMs: number): Promise<string> {
  const parts = arn.split(':');
  const name = parts[5];
  const account = parts[4];
  if (parts.length !== 6 || parts[2] !== 'sqs' || name === undefined || name === '') throw new Error(`the redrive policy's deadLetterTargetArn is not an SQS queue ARN: ${arn}`);
  const reply = await requests.send<{ QueueUrl?: string }>('GetQueueUrl', timeoutMs, (sdk) => new sdk.GetQueueUrlCommand(account === undefined || account === '' ? { QueueName: name } : { QueueName: name, QueueOwnerAWSAccountId: account }));
  if (typeof reply?.QueueUrl !== 'string') throw new Error(`SQS gave no URL for the dead-letter queue ${name}`);
  return reply.QueueUrl;
}

/**
 * What is wrong with the redrive policy for an inbox that dead-letters at `maxAttempts`, or
 * `undefined` when nothing is: it is the backstop for a worker that dies mid-job, so it must exist
 * and let every attempt run first.
 */
export function redriveWarning(settings: QueueSettings, maxAttempts: number, queueUrl: string): string | undefined {
  if (settings.maxReceiveCount === undefined || settings.deadLetterArn === undefined) {
    return `sqsInbox: the queue ${queueUrl} has no redrive policy, so a message whose worker keeps dying (or whose dead-letter send keeps failing) is received forever until SQS's retention deletes it. Give it one with a dead-letter queue and maxReceiveCount above maxAttempts (${maxAttempts})`;
  }
  if (settings.maxReceiveCount <= maxAttempts) {
    return `sqsInbox: the queue's redrive policy moves a message after ${settings.maxReceiveCount} receives, not above maxAttempts (${maxAttempts}): SQS dead-letters failing jobs before their last attempt, without their error. Raise maxReceiveCount to at least ${maxAttempts + 2}`;
  }
  return undefined;
}

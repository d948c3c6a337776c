/**
 * SQS for the tests: fauxqs in process on a free loopback port, clients pointed at it (its queue
 * URLs name a host that does not resolve, so every client needs the explicit endpoint), and fresh
 * queues with a dead-letter queue and a redrive policy.
 */

import { randomBytes } from 'node:crypto';
import { ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import { startFauxqs, type FauxqsServer } from 'fauxqs';

export type { FauxqsServer };

export async function startSqs(options: { dataDir?: string; port?: number } = {}): Promise<FauxqsServer> {
  return startFauxqs({ port: options.port ?? 0, host: '127.0.0.1', logger: false, ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }) });
}

export function sqsClient(server: { port: number }): SQSClient {
  // No retries of the SDK's own: a test that stops the server sees the failure at once.
  return new SQSClient({ endpoint: `http://127.0.0.1:${server.port}`, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, maxAttempts: 1 });
}

export interface Queues {
  queueUrl: string;
  deadLetterQueueUrl: string;
  name: string;
  deadName: string;
}

/** A queue and its dead-letter queue; `maxReceiveCount` in the redrive policy (none: no policy). */
export function freshQueues(server: FauxqsServer, options: { maxReceiveCount?: number | null; fifo?: boolean; attributes?: Record<string, string> } = {}): Queues {
  const suffix = options.fifo === true ? '.fifo' : '';
  const base = `inbox-${randomBytes(5).toString('hex')}`;
  const fifoAttributes: Record<string, string> = options.fifo === true ? { FifoQueue: 'true' } : {};
  const dead = server.createQueue(`${base}-dead${suffix}`, { attributes: { ...fifoAttributes } });
  const redrive: Record<string, string> = options.maxReceiveCount === null ? {} : { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dead.queueArn, maxReceiveCount: String(options.maxReceiveCount ?? 10) }) };
  const source = server.createQueue(`${base}${suffix}`, { attributes: { ...fifoAttributes, ...redrive, ...options.attributes } });
  return { queueUrl: source.queueUrl, deadLetterQueueUrl: dead.queueUrl, name: source.queueName, deadName: dead.queueName };
}

/** Messages in a queue now, by fauxqs's own look (ready, delayed and in flight), without receiving. */
export function countIn(server: FauxqsServer, name: string): { ready: number; delayed: number; inflight: number } {
  const queue = server.inspectQueue(name);
  if (queue === undefined) throw new Error(`no queue ${name}`);
  return { ready: queue.messages.ready.length, delayed: queue.messages.delayed.length, inflight: queue.messages.inflight.length };
}

/** Receives as Lambda's event source mapping does: up to 10, every system attribute. */
export async function receiveAsLambda(client: SQSClient, queueUrl: string, visibilitySeconds = 30): Promise<Message[]> {
  const reply = await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: visibilitySeconds, MessageSystemAttributeNames: ['All'] }));
  return reply.Messages ?? [];
}

/** Lambda's SQS record of a received message (the shape Lambda passes: camelCase, `aws:sqs`). */
export function lambdaRecord(message: Message, queueArn = 'arn:aws:sqs:us-east-1:000000000000:inbox') {
  return {
    messageId: message.MessageId!,
    receiptHandle: message.ReceiptHandle!,
    body: message.Body!,
    attributes: { ...message.Attributes } as Record<string, string>,
    messageAttributes: {},
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: 'us-east-1',
  };
}

export const randomSuffix = () => randomBytes(4).toString('hex');

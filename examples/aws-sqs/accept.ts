/**
 * AWS, end to end, part 1 of 2: the accepting Lambda behind a function URL. It verifies each
 * webhook, claims its id in DynamoDB, sends the job to SQS and answers `202` once SQS has it. The
 * worker Lambda (worker.ts) processes the queue.
 *
 * Environment: WEBHOOK_SECRET, QUEUE_URL (the standard queue; its redrive policy names the
 * dead-letter queue, with maxReceiveCount above maxAttempts, 12 by default), CLAIMS_TABLE (partition
 * key `pk`, a string; TTL on `ttl`).
 *
 * IAM permissions of this function's role:
 *   sqs:SendMessage, sqs:GetQueueAttributes          on the queue (the send; the size limit and backlog)
 *   dynamodb:PutItem, UpdateItem, DeleteItem, GetItem on the claims table
 * The function URL: auth type NONE (the signature is the authentication), invoke mode BUFFERED.
 */

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { dynamoStore } from 'webhook-receiver/dynamodb';
import { webhookHandler, type LambdaHandler } from 'webhook-receiver/lambda';
import { sqsInbox, type SqsInbox } from 'webhook-receiver/sqs';
import type { IdempotencyStore } from 'webhook-receiver';

/** What both functions build from their environment: the claims' store and the inbox. */
export function awsParts(env: Record<string, string | undefined>, clients: { sqs?: SQSClient; dynamodb?: DynamoDBClient } = {}): { store: IdempotencyStore; inbox: SqsInbox } {
  const table = env.CLAIMS_TABLE;
  const queueUrl = env.QUEUE_URL;
  if (!table || !queueUrl) throw new Error('Set CLAIMS_TABLE (the DynamoDB claims table) and QUEUE_URL (the SQS queue)');
  const store = dynamoStore({ client: clients.dynamodb ?? new DynamoDBClient({}), table });
  const inbox = sqsInbox({ client: clients.sqs ?? new SQSClient({}), queueUrl, idempotency: { store } });
  return { store, inbox };
}

/** The accepting function's handler: `202 {"enqueued":true}` once the job is on the queue. */
export function acceptHandler(env: Record<string, string | undefined>, clients?: { sqs?: SQSClient; dynamodb?: DynamoDBClient }): LambdaHandler {
  const secret = env.WEBHOOK_SECRET;
  if (!secret) throw new Error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
  const { store, inbox } = awsParts(env, clients);
  return webhookHandler({ secrets: secret, inbox, idempotency: { store } });
}

// Built once per container, at cold start, when deployed.
export const handler: LambdaHandler = (event, context) => (built ??= acceptHandler(process.env))(event, context);
let built: LambdaHandler | undefined;

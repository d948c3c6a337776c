/**
 * AWS, end to end, part 2 of 2: the worker Lambda, triggered by the queue accept.ts sends to. Each
 * job runs once (its claim in the same DynamoDB table); a failure comes back after its backoff, a
 * `PermanentError` or the last attempt goes to the dead-letter queue at once.
 *
 * The event source mapping MUST have ReportBatchItemFailures on (FunctionResponseTypes:
 * ["ReportBatchItemFailures"]): without it Lambda ignores the failures this handler reports and
 * deletes the whole batch. Batch size up to 10; the queue's visibility timeout at least six times
 * the function's timeout, as AWS advises for SQS triggers.
 *
 * Environment: QUEUE_URL, CLAIMS_TABLE, as accept.ts.
 *
 * IAM permissions of this function's role:
 *   sqs:ReceiveMessage, sqs:DeleteMessage, sqs:GetQueueAttributes  on the queue (the trigger's own)
 *   sqs:ChangeMessageVisibility                                    on the queue (a retry's backoff)
 *   sqs:SendMessage                                                on the queue (a deferral) and the dead-letter queue
 *   sqs:GetQueueUrl                                                on the dead-letter queue (named by the redrive policy)
 *   dynamodb:PutItem, UpdateItem, DeleteItem, GetItem              on the claims table
 * An operator who lists, retries and purges dead letters (`webhook-receiver inbox … --url QUEUE_URL`)
 * needs sqs:GetQueueAttributes on the queue; sqs:GetQueueUrl, ReceiveMessage, ChangeMessageVisibility and
 * DeleteMessage on the dead-letter queue; sqs:SendMessage on the queue.
 */

import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { PermanentError, type VerifiedWebhook } from 'webhook-receiver';
import type { SqsLambdaHandler } from 'webhook-receiver/sqs';
import { awsParts } from './accept.ts';

/** The events this app expects. */
export interface WebhookEvent {
  type: string;
  data?: unknown;
}

/** What the app does with one event: here, a log line; an unknown type can never succeed. */
export async function onEvent(webhook: VerifiedWebhook): Promise<void> {
  const event = webhook.json<WebhookEvent>();
  if (typeof event.type !== 'string') throw new PermanentError('the event has no type');
  console.log(`webhook ${webhook.id}: ${event.type}`);
}

/** The worker function's handler: a partial batch response for the SQS trigger. */
export function workerHandler(env: Record<string, string | undefined>, clients?: { sqs?: SQSClient; dynamodb?: DynamoDBClient }, handle = onEvent): SqsLambdaHandler {
  const { inbox } = awsParts(env, clients);
  // Ten records at once (the trigger's batch), each within the invocation's remaining time.
  return inbox.lambda((webhook) => handle(webhook), { concurrency: 10 });
}

export const handler: SqsLambdaHandler = (event, context) => (built ??= workerHandler(process.env))(event, context);
let built: SqsLambdaHandler | undefined;

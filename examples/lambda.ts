/**
 * AWS Lambda: signed webhooks through API Gateway (REST or HTTP API), a function URL or an ALB.
 * Deploy with `handler` as the function's handler, WEBHOOK_SECRET in its environment, and
 * CLAIMS_TABLE naming a DynamoDB table (partition key `pk`, a string; TTL on the `ttl` attribute).
 *
 * DynamoDB is the store to reach for on Lambda: every container shares the table, and nothing
 * runs between invocations. Without CLAIMS_TABLE this falls back on the memory store, which lives
 * in one warm container: it deduplicates retries that reach that container, and nothing across
 * containers or after a cold start.
 */

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { IdempotencyStore } from 'webhook-receiver';
import { dynamoStore } from 'webhook-receiver/dynamodb';
import { webhookHandler, type LambdaHandler, type LambdaHttpResult } from 'webhook-receiver/lambda';
import type { AdapterOptions, VerifiedWebhook } from 'webhook-receiver/lambda';

/** The events this function expects; the body is opaque bytes until the signature checked out. */
export interface WebhookEvent {
  type: string;
  data?: unknown;
}

export type EventHandler = (event: WebhookEvent, webhook: VerifiedWebhook, signal: AbortSignal) => void | Promise<void>;

const logEvent: EventHandler = (event, webhook) => {
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
};

/**
 * The Lambda handler. A 2xx marks the id as processed; a throw releases it (the invocation
 * fails, API Gateway answers 5xx, and the sender retries). The claim is settled before the
 * handler returns, and its lock never outlasts the invocation's timeout.
 *
 * Another shared store (Redis, Postgres) goes in the same place: `idempotency: { store }`.
 */
export function createHandler(options: AdapterOptions, onEvent: EventHandler = logEvent): LambdaHandler {
  return webhookHandler(options, async (webhook, context): Promise<LambdaHttpResult> => {
    await onEvent(webhook.json<WebhookEvent>(), webhook, context.signal);
    return {
      statusCode: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ received: true, id: webhook.id, keyId: webhook.keyId ?? null }),
    };
  });
}

const secret = process.env.WEBHOOK_SECRET;
if (!secret) throw new Error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');

// One client per container: the Lambda runtime gives it region and credentials. Two attempts fit
// the store's 2 s bound on each request; a delivery the store cannot reach is answered 503.
const table = process.env.CLAIMS_TABLE;
const store: IdempotencyStore | undefined = table ? dynamoStore({ client: new DynamoDBClient({ maxAttempts: 2 }), table }) : undefined;

// Built once per container, at module scope: warm invocations share the decoded keys and the store.
export const handler: LambdaHandler = createHandler(store ? { secrets: secret, idempotency: { store } } : { secrets: secret });

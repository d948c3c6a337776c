/**
 * AWS Lambda: signed webhooks through API Gateway (REST or HTTP API), a function URL or an ALB.
 * Deploy with `handler` as the function's handler, WEBHOOK_SECRET in its environment.
 *
 * The memory store used when no store is given lives in one warm container: it deduplicates
 * retries that reach that container, and nothing across containers or after a cold start. In
 * production give a shared store (Redis shown below; a Postgres store works the same way).
 */

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
 * With Redis (a connection made once per container, outside the handler):
 *
 *   import { createClient } from 'redis';
 *   import { redisStore } from 'webhook-receiver/redis';
 *   const redis = await createClient({ url: process.env.REDIS_URL }).on('error', (error) => console.error(`redis: ${error.message}`)).connect();
 *   createHandler({ secrets: process.env.WEBHOOK_SECRET!, idempotency: { store: redisStore({ client: redis }) } });
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

// Built once per container, at module scope: warm invocations share the decoded keys and the store.
export const handler: LambdaHandler = createHandler({ secrets: secret });

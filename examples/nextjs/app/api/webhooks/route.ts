/**
 * A Next.js route handler (App Router): signed webhooks on POST /api/webhooks.
 *
 * Read the event from `webhook` (`webhook.json()`), not from `request.json()`: the handler has
 * verified the exact bytes it read, and the request's body is consumed. Works on the Node.js and
 * the Edge runtime alike.
 *
 * Deduplication uses the in-memory store, which lives in one server process. On serverless
 * hosting, where retries may reach another instance, use a shared store on the Node.js runtime:
 * `idempotency: { store: redisStore({ client }) }` from 'webhook-receiver/redis'.
 */

import { webhookHandler } from 'webhook-receiver/fetch';

interface WebhookEvent {
  type: string;
  data?: unknown;
}

// Built on the first request rather than when the module loads: `next build` loads route
// modules, usually without the deployment's secrets. Then kept: the keys are decoded and checked
// once, and the store lives as long as the server. During a rotation, list both secrets:
// [process.env.WEBHOOK_SECRET!, process.env.WEBHOOK_SECRET_PREVIOUS!].
let handle: ((request: Request) => Promise<Response>) | undefined;

function createHandler(): (request: Request) => Promise<Response> {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) throw new Error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
  return webhookHandler({ secrets: secret }, async (webhook) => {
    const event = webhook.json<WebhookEvent>();
    console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
    return Response.json({ received: true, id: webhook.id, keyId: webhook.keyId ?? null });
  });
}

export async function POST(request: Request): Promise<Response> {
  handle ??= createHandler();
  return handle(request);
}

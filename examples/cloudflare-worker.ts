/**
 * A Cloudflare Worker: signed webhooks on POST /webhooks. No Node compatibility flag is needed:
 * without `node:crypto` the package verifies through WebCrypto (`crypto.subtle`).
 *
 *   npx wrangler deploy examples/cloudflare-worker.ts --name webhooks --compatibility-date 2025-01-01
 *   npx wrangler secret put WEBHOOK_SECRET --name webhooks        # whsec_…
 *
 * Deduplication here uses the in-memory store, which lives in one isolate: a retry that lands on
 * another isolate is not recognised. For deduplication across isolates, pass
 * `idempotency: { store }` with an `IdempotencyStore` backed by shared storage.
 */

import { memoryStore } from 'webhook-receiver';
import { webhookHandler, type WebhookHandler } from 'webhook-receiver/fetch';

export interface Env {
  /** The destination's signing secret (`whsec_…`). */
  WEBHOOK_SECRET: string;
  /** During a rotation: the secret being replaced, still trusted until it is retired. */
  WEBHOOK_SECRET_PREVIOUS?: string;
}

interface WebhookEvent {
  type: string;
  data?: unknown;
}

const onWebhook: WebhookHandler = async (webhook) => {
  const event = webhook.json<WebhookEvent>();
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
  return Response.json({ received: true, id: webhook.id, keyId: webhook.keyId ?? null });
};

// One store for the isolate's life: the ids it remembers outlive a handler rebuilt for new secrets.
const store = memoryStore();

// Bindings arrive with the first request, so the handler (its keys imported) is built then and
// kept; changed secrets build a new one, on the same store. Each key is named after its
// variable, so the log says which one verified: once WEBHOOK_SECRET_PREVIOUS no longer shows up,
// it can be retired.
let built: { secrets: string; handle: (request: Request) => Promise<Response> } | undefined;

function handlerFor(env: Env): (request: Request) => Promise<Response> {
  const secrets = [{ key: env.WEBHOOK_SECRET, keyId: 'WEBHOOK_SECRET' }];
  if (env.WEBHOOK_SECRET_PREVIOUS) secrets.push({ key: env.WEBHOOK_SECRET_PREVIOUS, keyId: 'WEBHOOK_SECRET_PREVIOUS' });
  const fingerprint = secrets.map(({ key }) => key).join(' ');
  if (built?.secrets !== fingerprint) built = { secrets: fingerprint, handle: webhookHandler({ secrets, idempotency: { store } }, onWebhook) };
  return built.handle;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname !== '/webhooks') return new Response('Not found', { status: 404 });
    if (request.method !== 'POST') return new Response('Method not allowed', { status: 405, headers: { allow: 'POST' } });
    return handlerFor(env)(request);
  },
};

/**
 * A Cloudflare Worker: signed webhooks on POST /webhooks, each `webhook-id` processed once across
 * every isolate and location, through the `WebhookClaims` Durable Object. No Node compatibility
 * flag is needed: without `node:crypto` the package verifies through WebCrypto (`crypto.subtle`).
 *
 * wrangler.toml:
 *
 *   name = "webhooks"
 *   main = "examples/cloudflare-worker.ts"
 *   compatibility_date = "2025-06-01"
 *
 *   [[durable_objects.bindings]]
 *   name = "WEBHOOK_CLAIMS"
 *   class_name = "WebhookClaims"
 *
 *   [[migrations]]
 *   tag = "v1"
 *   new_sqlite_classes = ["WebhookClaims"]
 *
 *   npx wrangler deploy
 *   npx wrangler secret put WEBHOOK_SECRET        # whsec_…
 */

import { durableObjectStore, type DurableObjectNamespaceLike } from 'webhook-receiver/cloudflare';
import { webhookHandler, type WebhookHandler } from 'webhook-receiver/fetch';

// The Durable Object class the binding names: exported from the Worker's main module.
export { WebhookClaims } from 'webhook-receiver/cloudflare';

export interface Env {
  /** The destination's signing secret (`whsec_…`). */
  WEBHOOK_SECRET: string;
  /** During a rotation: the secret being replaced, still trusted until it is retired. */
  WEBHOOK_SECRET_PREVIOUS?: string;
  /** The `WebhookClaims` Durable Object namespace (a `DurableObjectNamespace`). */
  WEBHOOK_CLAIMS: DurableObjectNamespaceLike;
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

// Bindings arrive with the first request, so the handler (its keys imported) is built then and
// kept; changed secrets build a new one. The claims live in the Durable Objects, so a rebuilt
// handler (or another isolate) still knows every id processed before. Each key is named after its
// variable, so the log says which one verified: once WEBHOOK_SECRET_PREVIOUS no longer shows up,
// it can be retired.
let built: { secrets: string; handle: (request: Request) => Promise<Response> } | undefined;

function handlerFor(env: Env): (request: Request) => Promise<Response> {
  const secrets = [{ key: env.WEBHOOK_SECRET, keyId: 'WEBHOOK_SECRET' }];
  if (env.WEBHOOK_SECRET_PREVIOUS) secrets.push({ key: env.WEBHOOK_SECRET_PREVIOUS, keyId: 'WEBHOOK_SECRET_PREVIOUS' });
  const fingerprint = secrets.map(({ key }) => key).join(' ');
  if (built?.secrets !== fingerprint) {
    const store = durableObjectStore(env.WEBHOOK_CLAIMS);
    built = { secrets: fingerprint, handle: webhookHandler({ secrets, idempotency: { store } }, onWebhook) };
  }
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

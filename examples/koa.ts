/**
 * Koa (3 or 2) with @koa/router: signed webhooks on POST /webhooks, every other route parsing
 * JSON as usual.
 *
 *   WEBHOOK_SECRET=whsec_… npx tsx examples/koa.ts      # 127.0.0.1:3000, or PORT
 */

import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import Koa from 'koa';
import bodyParser from 'koa-bodyparser';
import { webhooks, type AdapterOptions, type VerifiedWebhook, type WebhookState } from 'webhook-receiver/koa';

/** The events this app expects; the body is opaque bytes until the signature checked out. */
export interface WebhookEvent {
  type: string;
  data?: unknown;
}

export type EventHandler = (event: WebhookEvent, webhook: VerifiedWebhook) => void | Promise<void>;

const logEvent: EventHandler = (event, webhook) => {
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
};

export function createApp(options: AdapterOptions, onEvent: EventHandler = logEvent): Koa {
  const app = new Koa();

  // The webhook route reads the raw bytes itself: it comes before the JSON parser, which only
  // the other routes use. (A parser in front works too when it keeps ctx.request.rawBody, as
  // koa-bodyparser and @koa/bodyparser do.)
  const hooks = new Router<WebhookState>();
  hooks.post('/webhooks', webhooks(options), async (ctx) => {
    const { webhook } = ctx.state;
    // A throw here becomes Koa's 500: the id is released and the sender's retry runs it again.
    await onEvent(webhook.json<WebhookEvent>(), webhook);
    // A 2xx marks the id as processed.
    ctx.body = { received: true, id: webhook.id, keyId: webhook.keyId ?? null };
  });

  const api = new Router();
  api.post('/api/echo', (ctx) => {
    ctx.body = { parsed: ctx.request.body as unknown };
  });

  app.use(hooks.routes());
  app.use(bodyParser());
  app.use(api.routes());
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
    process.exit(1);
  }
  const server = createApp({ secrets: secret }).listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`);
  });
}

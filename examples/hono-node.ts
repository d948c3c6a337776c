/**
 * Hono on Node (@hono/node-server): signed webhooks on POST /webhooks. The same app runs on Bun,
 * Deno and Cloudflare Workers: only the last lines, which start the server, are Node's.
 *
 *   WEBHOOK_SECRET=whsec_… npx tsx examples/hono-node.ts    # 127.0.0.1:3000, or PORT
 */

import { fileURLToPath } from 'node:url';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { webhooks, type AdapterOptions, type VerifiedWebhook } from 'webhook-receiver/hono';

/** The events this app expects; the body is opaque bytes until the signature checked out. */
export interface WebhookEvent {
  type: string;
  data?: unknown;
}

export type EventHandler = (event: WebhookEvent, webhook: VerifiedWebhook) => void | Promise<void>;

const logEvent: EventHandler = (event, webhook) => {
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
};

export function createApp(options: AdapterOptions, onEvent: EventHandler = logEvent): Hono {
  const app = new Hono();
  app.post('/webhooks', webhooks(options), async (c) => {
    const webhook = c.get('webhook');
    // The middleware read the raw bytes; c.req.json() still works after it.
    await onEvent(await c.req.json<WebhookEvent>(), webhook);
    // A 2xx marks the id as processed; a thrown error answers 500 (app.onError), releases the
    // id, and the sender's retry runs this handler again.
    return c.json({ received: true, id: webhook.id, keyId: webhook.keyId ?? null });
  });
  return app;
}

/** Serves the app on 127.0.0.1; port 0 picks a free one. Resolves once it listens. */
export function start(options: AdapterOptions, port: number, onEvent?: EventHandler): Promise<{ server: ServerType; port: number }> {
  const app = createApp(options, onEvent);
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port }, (info) => resolve({ server, port: info.port }));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
    process.exit(1);
  }
  // During a rotation: { secrets: [newSecret, oldSecret] }; both verify until the old one goes.
  const { port } = await start({ secrets: secret }, Number(process.env.PORT ?? 3000));
  console.log(`listening on http://127.0.0.1:${port}/webhooks`);
}

/**
 * Bun: signed webhooks on POST /webhooks with `Bun.serve` and its routes (Bun 1.2.3 and later).
 * In a project with `webhook-receiver` installed (`bun add webhook-receiver`):
 *
 *   WEBHOOK_SECRET=whsec_… bun bun.ts       # 127.0.0.1:3000, or PORT
 */

import { webhookHandler } from 'webhook-receiver/fetch';

interface WebhookEvent {
  type: string;
  data?: unknown;
}

const secret = Bun.env.WEBHOOK_SECRET;
if (!secret) {
  console.error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
  process.exit(1);
}

// During a rotation: { secrets: [newSecret, oldSecret] }; both verify until the old one goes.
const handle = webhookHandler({ secrets: secret }, (webhook) => {
  const event = webhook.json<WebhookEvent>();
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
  return Response.json({ received: true, id: webhook.id, keyId: webhook.keyId ?? null });
});

const server = Bun.serve({
  hostname: '127.0.0.1',
  port: Number(Bun.env.PORT ?? 3000),
  routes: {
    '/webhooks': { POST: handle },
  },
  fetch: () => new Response('Not found', { status: 404 }),
});

console.log(`listening on ${new URL('/webhooks', server.url)}`);

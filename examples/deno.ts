/**
 * Deno: signed webhooks on POST /webhooks with `Deno.serve`, and only the permissions it needs.
 * In a project with `webhook-receiver` in its package.json (or `deno add npm:webhook-receiver`):
 *
 *   WEBHOOK_SECRET=whsec_… deno run --allow-net=127.0.0.1 --allow-env=WEBHOOK_SECRET,PORT deno.ts
 */

import { webhookHandler } from 'webhook-receiver/fetch';

interface WebhookEvent {
  type: string;
  data?: unknown;
}

const secret = Deno.env.get('WEBHOOK_SECRET');
if (!secret) {
  console.error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
  Deno.exit(1);
}

// During a rotation: { secrets: [newSecret, oldSecret] }; both verify until the old one goes.
const handle = webhookHandler({ secrets: secret }, (webhook) => {
  const event = webhook.json<WebhookEvent>();
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
  return Response.json({ received: true, id: webhook.id, keyId: webhook.keyId ?? null });
});

Deno.serve(
  {
    hostname: '127.0.0.1',
    port: Number(Deno.env.get('PORT') ?? 8000),
    onListen: ({ hostname, port }) => console.log(`listening on http://${hostname}:${port}/webhooks`),
  },
  (request) => {
    const { pathname } = new URL(request.url);
    if (pathname !== '/webhooks') return new Response('Not found', { status: 404 });
    if (request.method !== 'POST') return new Response('Method not allowed', { status: 405, headers: { allow: 'POST' } });
    return handle(request);
  },
);

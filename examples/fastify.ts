/**
 * Fastify (5 or 4): signed webhooks on POST /webhooks, inside a scope of their own, so the rest
 * of the app keeps Fastify's default body parsing.
 *
 *   WEBHOOK_SECRET=whsec_… npx tsx examples/fastify.ts      # 127.0.0.1:3000, or PORT
 */

import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyInstance } from 'fastify';
import { webhooks, type AdapterOptions, type VerifiedWebhook } from 'webhook-receiver/fastify';

/** The events this app expects; the body is opaque bytes until the signature checked out. */
export interface WebhookEvent {
  type: string;
  data?: unknown;
}

export type EventHandler = (event: WebhookEvent, webhook: VerifiedWebhook) => void | Promise<void>;

export interface AppOptions {
  /** Runs for each verified, first-seen event. Default: a log line. */
  onEvent?: EventHandler;
  /** Fastify's request log. Default true. */
  logger?: boolean;
}

export function createApp(options: AdapterOptions, { onEvent, logger = true }: AppOptions = {}): FastifyInstance {
  const app = Fastify({ logger });

  // Every route registered in this scope is verified; routes outside it are untouched.
  app.register(async (scope) => {
    await scope.register(webhooks, options);
    scope.post('/webhooks', async (request, reply) => {
      const webhook = request.webhook!;
      const event = request.body as WebhookEvent; // parsed JSON, from the verified bytes
      if (onEvent) await onEvent(event, webhook);
      else request.log.info({ webhookId: webhook.id, type: event.type, keyId: webhook.keyId }, 'webhook');
      // A 2xx marks the id as processed; a thrown error answers 500, releases the id, and the
      // sender's retry runs this handler again.
      return reply.send({ received: true, id: webhook.id, keyId: webhook.keyId ?? null });
    });
  });

  app.post('/api/echo', async (request) => ({ parsed: request.body }));
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
    process.exit(1);
  }
  // During a rotation: { secrets: [newSecret, oldSecret] }; both verify until the old one goes.
  const app = createApp({ secrets: secret });
  const address = await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 3000) });
  console.log(`listening on ${address}/webhooks`);
}

/**
 * Express (5 or 4): signed webhooks on POST /webhooks, every other route parsing JSON as usual.
 *
 *   WEBHOOK_SECRET=whsec_… npx tsx examples/express.ts      # 127.0.0.1:3000, or PORT
 */

import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import express, { type Express } from 'express';
import { webhookErrorHandler, webhooks, type AdapterOptions, type VerifiedWebhook } from 'webhook-receiver/express';

/** The events this app expects; the body is opaque bytes until the signature checked out. */
export interface WebhookEvent {
  type: string;
  data?: unknown;
}

export type EventHandler = (event: WebhookEvent, webhook: VerifiedWebhook) => void | Promise<void>;

const logEvent: EventHandler = (event, webhook) => {
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
};

export function createApp(options: AdapterOptions, onEvent: EventHandler = logEvent): Express {
  const app = express();

  // The webhook route comes before express.json(): the signature covers the raw bytes, so the
  // middleware has to read them before a JSON parser consumes the stream.
  app.post('/webhooks', webhooks(options), async (req, res, next) => {
    try {
      const webhook = req.webhook!;
      await onEvent(webhook.json<WebhookEvent>(), webhook);
      // A 2xx marks the id as processed.
      res.json({ received: true, id: webhook.id, keyId: webhook.keyId ?? null });
    } catch (error) {
      // Express 4 ignores the promise an async handler returns, so errors go to next() by hand.
      // The id is released either way, and the sender's retry runs this handler again.
      next(error);
    }
  });

  app.use(express.json());
  app.post('/api/echo', (req, res) => {
    res.json({ parsed: req.body as unknown });
  });

  // After the routes: a body that is not JSON (400 INVALID_PAYLOAD) or a PermanentError (422) is
  // answered in the { error, message } envelope; any other error goes on to Express's 500.
  app.use(webhookErrorHandler());
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
    process.exit(1);
  }
  // During a rotation: { secrets: [newSecret, oldSecret] }; both verify until the old one goes.
  const server = createApp({ secrets: secret }).listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`);
  });
}

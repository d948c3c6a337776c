/**
 * One typing story across adapters, checked by the type checker (`tsc -p tsconfig.json` runs on
 * this file: an `@ts-expect-error` that stops erroring fails it) and run by vitest.
 */

import express from 'express';
import Fastify from 'fastify';
import { Hono, type Handler } from 'hono';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { webhookOf as expressWebhookOf, webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhookOf as fastifyWebhookOf } from '../../adapters/fastify.ts';
import { webhooks as honoWebhooks, type WebhookEnv } from '../../adapters/hono.ts';
import { generateSecret } from '../../src/sign.ts';
import type { VerifiedWebhook } from '../../src/verify.ts';

const secrets = generateSecret();

describe('Hono: typed per route', () => {
  it('types c.get on routes behind the middleware, and only there', async () => {
    const app = new Hono();
    app.post('/webhooks', honoWebhooks({ secrets }), (c) => {
      expectTypeOf(c.get('webhook')).toEqualTypeOf<VerifiedWebhook>();
      return c.text(c.get('webhook').id);
    });
    app.get('/health', (c) => {
      // @ts-expect-error no webhooks() middleware on this route: nothing typed as a webhook here
      const webhook: VerifiedWebhook = c.get('webhook');
      return c.json({ ok: webhook === undefined });
    });
    const onWebhook: Handler<WebhookEnv> = (c) => c.text(c.get('webhook').id);
    app.post('/other', honoWebhooks({ secrets }), onWebhook);
    expect((await app.request('/health')).status).toBe(200);
  });
});

describe('webhookOf: the webhook, guaranteed, or a clear error', () => {
  it('Express: typed as present, throws off a verified route', () => {
    const app = express();
    app.post('/webhooks', expressWebhooks({ secrets }), (req, res) => {
      expectTypeOf(expressWebhookOf(req)).toEqualTypeOf<VerifiedWebhook>();
      res.sendStatus(204);
    });
    expect(() => expressWebhookOf({})).toThrow(/not behind webhooks\(\)/);
  });

  it('Fastify: typed as present, throws off a verified scope', async () => {
    const app = Fastify();
    let message = '';
    app.get('/plain', async (request) => {
      try {
        fastifyWebhookOf(request);
      } catch (error) {
        message = (error as Error).message;
      }
      return 'ok';
    });
    await app.inject({ url: '/plain' });
    expect(message).toMatch(/not in a scope where the webhooks plugin is registered/);
    await app.close();
  });
});

describe("BODY_UNAVAILABLE's rawBody fix", () => {
  it('compiles in strict TypeScript exactly as the message suggests', () => {
    const app = express();
    // The line from the error message, verbatim: `req` is Node's IncomingMessage here.
    app.use(express.json({ verify: (req, res, buf) => { req.rawBody = buf } }));
    expect(typeof app).toBe('function');
  });
});

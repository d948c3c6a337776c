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
import { generateSecret, signWebhook } from '../../src/sign.ts';
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
  it('compiles in strict TypeScript exactly as the hint suggests', () => {
    const app = express();
    // The line from the error's hint, verbatim: `req` is Node's IncomingMessage here.
    app.use(express.json({ verify: (req, res, buf) => { req.rawBody = buf } }));
    expect(typeof app).toBe('function');
  });

  it('is the line the error itself suggests, and it works: the kept bytes verify', async () => {
    const secret = generateSecret();
    const body = '{"type":"a"}';
    const signed = await signWebhook({ secret, body, id: 'msg_rawbody' });
    const send = (app: express.Express) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const server = app.listen(0, '127.0.0.1', () => {
          const { port } = server.address() as { port: number };
          fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', headers: { ...signed.headers, 'content-type': 'application/json' }, body })
            .then(async (res) => resolve({ status: res.status, text: await res.text() }), reject)
            .finally(() => server.close());
        });
      });
    const consumed = express();
    consumed.use(express.json());
    const hints: (string | undefined)[] = [];
    consumed.post('/hook', expressWebhooks({ secrets: secret, onRejected: (error) => hints.push(error.hint) }), (_req, res) => void res.sendStatus(204));
    const refused = await send(consumed);
    expect(refused.status).toBe(500);
    // The fix is the error's hint (for the log); the answer says only that the raw body is gone.
    expect(hints[0]).toContain('express.json({ verify: (req, res, buf) => { req.rawBody = buf } })');
    expect(JSON.parse(refused.text).message).not.toContain('express.json');
    const fixed = express();
    fixed.use(express.json({ verify: (req, res, buf) => { req.rawBody = buf } }));
    fixed.post('/hook', expressWebhooks({ secrets: secret }), (_req, res) => void res.sendStatus(204));
    expect((await send(fixed)).status).toBe(204);
  });
});

/**
 * One handler context, the same everywhere: Express `req.webhookContext`, Fastify
 * `request.webhookContext`, Hono `c.get('webhookContext')`, the Fetch handler's third argument.
 * And work after the answer: the Fetch handler hands a completion still being retried to the
 * platform's `waitUntil`, or awaits it where there is none.
 */

import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhooks as fastifyWebhooks } from '../../adapters/fastify.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { webhooks as honoWebhooks } from '../../adapters/hono.ts';
import type { WebhookContext } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';

const secret = generateSecret();
const body = '{"type":"a"}';
const signed = (id: string) => signWebhook({ secret, id, body });

function expectContext(context: WebhookContext | null | undefined, id: string): void {
  expect(context?.signal).toBeInstanceOf(AbortSignal);
  expect(context?.signal.aborted).toBe(false);
  expect(context?.claim).toMatchObject({ key: `default:s:${id}`, token: expect.stringMatching(/^[0-9a-f]{32}$/), lockMs: 30_000, ttlMs: 86_400_000 });
}

describe('every adapter hands the handler the same WebhookContext', () => {
  it('Express: req.webhookContext', async () => {
    const app = express();
    let seen: WebhookContext | undefined;
    app.post('/hook', expressWebhooks({ secrets: secret }), (req, res) => {
      seen = req.webhookContext;
      res.sendStatus(204);
    });
    const { headers } = await signed('msg_express');
    await request(app).post('/hook').set(headers).set('content-type', 'application/json').send(body).expect(204);
    expectContext(seen, 'msg_express');
  });

  it('Fastify: request.webhookContext', async () => {
    const app = Fastify();
    let seen: WebhookContext | null | undefined;
    await app.register(async (scope) => {
      await scope.register(fastifyWebhooks, { secrets: secret });
      scope.post('/hook', async (req, reply) => {
        seen = req.webhookContext;
        return reply.code(204).send();
      });
    });
    const { headers } = await signed('msg_fastify');
    const reply = await app.inject({ method: 'POST', url: '/hook', headers: { ...headers, 'content-type': 'application/json' }, payload: body });
    expect(reply.statusCode).toBe(204);
    expectContext(seen, 'msg_fastify');
    await app.close();
  });

  it("Hono: c.get('webhookContext')", async () => {
    const app = new Hono();
    let seen: WebhookContext | undefined;
    app.post('/hook', honoWebhooks({ secrets: secret }), (c) => {
      seen = c.get('webhookContext');
      return c.body(null, 204);
    });
    const { headers } = await signed('msg_hono');
    expect((await app.request('/hook', { method: 'POST', headers, body })).status).toBe(204);
    expectContext(seen, 'msg_hono');
  });

  it("Fetch: the handler's third argument", async () => {
    let seen: WebhookContext | undefined;
    const handle = webhookHandler({ secrets: secret }, (_webhook, _request, context) => {
      seen = context;
    });
    const { headers } = await signed('msg_fetch');
    expect((await handle(new Request('http://localhost/hook', { method: 'POST', headers, body }))).status).toBe(204);
    expectContext(seen, 'msg_fetch');
  });
});

describe('Fetch: work after the answer', () => {
  /** A memory store whose first completion fails, so the receiver retries it in the background. */
  function firstCompletionFails(): IdempotencyStore & { completions: number } {
    const inner = memoryStore();
    const store = {
      completions: 0,
      claim: inner.claim,
      release: inner.release,
      extend: inner.extend,
      async complete(key: string, token: string, ttlMs: number) {
        store.completions++;
        if (store.completions === 1) throw new Error('store blip');
        return inner.complete(key, token, ttlMs);
      },
    };
    return store;
  }

  it("hands a completion still being retried to Workers' ctx.waitUntil and answers at once", async () => {
    const store = firstCompletionFails();
    const handle = webhookHandler({ secrets: secret, idempotency: { store }, onError: () => {} }, () => undefined);
    const waited: Promise<unknown>[] = [];
    const ctx = { waitUntil: (promise: Promise<unknown>) => void waited.push(promise) };
    const { headers } = await signed('msg_workers');
    const response = await handle(new Request('http://localhost/hook', { method: 'POST', headers, body }), {}, ctx);
    expect(response.status).toBe(204);
    expect(waited).toHaveLength(1);
    expect(store.completions).toBe(1);
    await waited[0];
    expect(store.completions).toBe(2);
    const again = await handle(new Request('http://localhost/hook', { method: 'POST', headers: (await signed('msg_workers')).headers, body }), {}, ctx);
    expect(await again.json()).toEqual({ duplicate: true });
  });

  it('awaits the retried completion before answering where the platform has no waitUntil', async () => {
    const store = firstCompletionFails();
    const handle = webhookHandler({ secrets: secret, idempotency: { store }, onError: () => {} }, () => undefined);
    const { headers } = await signed('msg_plain');
    expect((await handle(new Request('http://localhost/hook', { method: 'POST', headers, body }))).status).toBe(204);
    expect(store.completions).toBe(2);
  });

  it('takes a waitUntil option (Next.js after, Vercel waitUntil)', async () => {
    const store = firstCompletionFails();
    const waited: Promise<unknown>[] = [];
    const handle = webhookHandler({ secrets: secret, idempotency: { store }, onError: () => {}, waitUntil: (promise) => void waited.push(promise) }, () => undefined);
    const { headers } = await signed('msg_option');
    expect((await handle(new Request('http://localhost/hook', { method: 'POST', headers, body }))).status).toBe(204);
    expect(waited).toHaveLength(1);
    await waited[0];
    expect(() => webhookHandler({ secrets: secret, waitUntil: 'later' as never }, () => undefined)).toThrow(new TypeError('waitUntil must be a function'));
  });
});

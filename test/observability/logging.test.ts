/**
 * The app's own logger (real pino, Fastify's request.log), the readiness check against a real
 * Redis, and the hints logged for a signature mismatch and a missing secret.
 */

import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { pino } from 'pino';
import request from 'supertest';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhookOf, webhooks as fastifyWebhooks } from '../../adapters/fastify.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { createReceiver } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { redisStore } from '../../src/stores/redis.ts';
import { canStartRedis, connectIORedis, startRedisServer, type RedisServer } from '../support/redis.ts';

const SECRET = generateSecret();

/** A pino logger writing JSON lines into an array. */
function capture(): { logger: ReturnType<typeof pino>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

async function signed(id: string, body = '{"type":"invoice.paid"}') {
  return { ...(await signWebhook({ secret: SECRET, body, id })), body };
}

describe('logger', () => {
  it('logs rejections through pino as structured fields, never a secret or a signature', async () => {
    const { logger, lines } = capture();
    const handler = webhookHandler({ secrets: SECRET, logger }, () => undefined);
    const message = await signed('msg_log1');
    const forged = new Request('http://127.0.0.1/hooks?token=abc', {
      method: 'POST',
      headers: { ...message.headers, 'webhook-signature': 'v1,' + btoa('y'.repeat(32)) },
      body: message.body,
    });
    expect((await handler(forged)).status).toBe(401);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, code: 'SIGNATURE_MISMATCH', status: 401, webhookId: 'msg_log1', method: 'POST', path: '/hooks' });
    expect(String(lines[0]!.msg)).toContain('npx webhook-receiver verify');
    const text = JSON.stringify(lines);
    expect(text).not.toContain(SECRET.slice(6));
    expect(text).not.toContain('y'.repeat(8));
    expect(text).not.toContain('token=abc');
  });

  it("shows BODY_UNAVAILABLE's hint (the fix) in the log, in pino and on the console, and never in the answer", async () => {
    const { logger, lines } = capture();
    const message = await signed('msg_log_hint');
    const read = () => new Request('http://127.0.0.1/hooks', { method: 'POST', headers: message.headers, body: message.body });
    for (const options of [{ logger }, {}]) {
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
      try {
        const handler = webhookHandler({ secrets: SECRET, ...options }, () => undefined);
        const request = read();
        await request.text();
        const answer = await handler(request);
        expect(answer.status).toBe(500);
        expect(await answer.json()).toEqual({ error: 'BODY_UNAVAILABLE', message: 'the server could not read the raw request body, so the signature cannot be checked' });
        if (options.logger === undefined) {
          expect(warn).toHaveBeenCalledTimes(1);
          expect(String(warn.mock.calls[0]![0])).toMatch(/^\[webhook-receiver\] rejected POST \/hooks: BODY_UNAVAILABLE the server could not read .* \(the request body was already read .*webhook\.json\(\)/);
        } else {
          expect(warn).not.toHaveBeenCalled();
        }
      } finally {
        warn.mockRestore();
      }
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, code: 'BODY_UNAVAILABLE', status: 500 });
    expect(String(lines[0]!.msg)).toContain('Verify before reading the body, then use webhook.json() or webhook.text()');
  });

  it('sends store failures to logger.error with the stage', async () => {
    const { logger, lines } = capture();
    const store = { ...memoryStore(), complete: () => Promise.reject(new Error('store down')) };
    const receiver = createReceiver({ secrets: SECRET, logger, idempotency: { store, lockSeconds: 0.05 } });
    const message = await signed('msg_log2');
    await receiver.handle({ headers: message.headers, body: message.body }, () => undefined);
    const entry = lines.find((line) => line.stage === 'complete');
    expect(entry).toMatchObject({ level: 50, stage: 'complete', webhookId: 'msg_log2', willRetry: false });
    expect((entry!.err as { message: string }).message).toBe('store down');
  });

  it('onRejected and onError still replace the default logging', async () => {
    const { logger, lines } = capture();
    const rejected: string[] = [];
    const handler = webhookHandler({ secrets: SECRET, logger, onRejected: (error) => rejected.push(error.code) }, () => undefined);
    expect((await handler(new Request('http://127.0.0.1/', { method: 'POST', body: '{}' }))).status).toBe(400);
    expect(rejected).toEqual(['MISSING_ID']);
    expect(lines).toEqual([]);
  });

  it('keeps one console line when the logger is the console (or absent), with the mismatch hint', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const handler = webhookHandler({ secrets: SECRET, logger: console }, () => undefined);
      const message = await signed('msg_log3');
      await handler(new Request('http://127.0.0.1/h', { method: 'POST', headers: { ...message.headers, 'webhook-signature': 'v1,AAAA' }, body: message.body }));
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]![0])).toMatch(/^\[webhook-receiver\] rejected POST \/h: SIGNATURE_MISMATCH .*webhook-receiver verify/);
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses a logger without warn and error', () => {
    expect(() => createReceiver({ secrets: SECRET, logger: { info() {} } as never })).toThrow(/logger must have warn/);
  });

  it('Fastify logs rejections through request.log, with the request id, by default', async () => {
    const { logger, lines } = capture();
    const app = Fastify({ loggerInstance: logger });
    await app.register(async (scope) => {
      await scope.register(fastifyWebhooks, { secrets: SECRET });
      scope.post('/hooks', async (req, reply) => reply.code(204).send(webhookOf(req).id && undefined));
    });
    const response = await app.inject({ method: 'POST', url: '/hooks', payload: '{}', headers: { 'content-type': 'application/json' } });
    expect(response.statusCode).toBe(400);
    const entry = lines.find((line) => line.code === 'MISSING_ID');
    expect(entry).toMatchObject({ level: 40, status: 400, method: 'POST', path: '/hooks' });
    expect(entry!.reqId).toBeDefined(); // request.log's child binding
    await app.close();
  });

  it('Fastify warns when the plugin is registered on the root instance', async () => {
    const { logger, lines } = capture();
    const root = Fastify({ loggerInstance: logger });
    await root.register(fastifyWebhooks, { secrets: SECRET });
    await root.ready();
    expect(lines.some((line) => line.level === 40 && String(line.msg).includes('registered on the root instance'))).toBe(true);
    await root.close();

    const scoped = capture();
    const app = Fastify({ loggerInstance: scoped.logger });
    await app.register(async (scope) => {
      await scope.register(fastifyWebhooks, { secrets: SECRET });
    });
    await app.ready();
    expect(scoped.lines.some((line) => String(line.msg).includes('root instance'))).toBe(false);
    await app.close();
  });
});

describe('hints', () => {
  it('the missing-secret error names the likely causes and the lazy fix', () => {
    expect(() => createReceiver({ secrets: process.env.WEBHOOK_RECEIVER_UNSET_FOR_TEST as unknown as string })).toThrow(
      /secrets is required.*unset environment variable.*a handler built where the runtime's secrets are absent.*build it lazily, on first use$/,
    );
  });
});

describe('INVALID_PAYLOAD from a handler, in Express', () => {
  it('the error passed to next carries status 400, and the claim is released for the retry', async () => {
    const { z } = await import('zod');
    const store = memoryStore();
    let runs = 0;
    const app = express();
    app.post('/hooks', expressWebhooks({ secrets: SECRET, idempotency: { store }, onRejected: () => {} }), (req, res, next) => {
      runs++;
      try {
        req.webhook!.json(z.object({ amount: z.number() }));
        res.sendStatus(204);
      } catch (error) {
        next(error);
      }
    });
    app.use((_error: unknown, _req: unknown, _res: unknown, next: (e: unknown) => void) => next(_error));
    const message = await signed('msg_x1', '{"amount":"12"}');
    const first = await request(app).post('/hooks').set(message.headers).set('content-type', 'application/json').send(message.body);
    expect(first.status).toBe(400);
    const again = await signed('msg_x1', '{"amount":"12"}');
    const second = await request(app).post('/hooks').set(again.headers).set('content-type', 'application/json').send(again.body);
    expect(second.status).toBe(400); // released: the handler ran again, not a duplicate
    expect(runs).toBe(2);
  });
});

describe('receiver.ping()', () => {
  it('resolves with the memory store', async () => {
    await expect(createReceiver({ secrets: SECRET }).ping()).resolves.toBeUndefined();
  });

  describe.runIf(canStartRedis('the readiness test'))('with Redis', () => {
    let server: RedisServer;
    beforeAll(async () => {
      server = await startRedisServer();
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('resolves while Redis answers, rejects with STORE_UNAVAILABLE once it is gone', async () => {
      const client = await connectIORedis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
      try {
        const receiver = createReceiver({ secrets: SECRET, idempotency: { store: redisStore({ client, timeoutMs: 500 }) } });
        await expect(receiver.ping()).resolves.toBeUndefined();
        await server.stop();
        await expect(receiver.ping()).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 });
      } finally {
        client.disconnect();
      }
    });
  });
});

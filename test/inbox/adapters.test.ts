/**
 * Every adapter built with an inbox answers 202 `{"enqueued":true}` itself over real HTTP, as the
 * route's terminal step (a handler mounted after it never runs), 200 for a duplicate, and 503
 * `INBOX_UNAVAILABLE` with `Retry-After` when the engine refuses: Express, Fastify, Hono on
 * @hono/node-server, Koa, the Fetch handler, and NestJS on both of its platforms (the controller
 * method behind the interceptor never runs). The inbox is BullMQ on the shared Redis.
 */

import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { Router } from '@koa/router';
import { Controller, Inject, Post, UseInterceptors } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { afterAll, describe, expect, it } from 'vitest';
import { webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhooks as fastifyWebhooks } from '../../adapters/fastify.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { webhooks as honoWebhooks } from '../../adapters/hono.ts';
import { webhooks as koaWebhooks } from '../../adapters/koa.ts';
import { WebhookInterceptor, WebhookReceiverModule } from '../../adapters/nestjs.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import type { Inbox } from '../../src/inbox/types.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { listen, servedFetch } from '../adapters/node-http.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';

const secret = generateSecret();
const silent = { warn: () => {}, error: () => {} };
const closers: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** Serves an app; the route's own handler records that it ran, which it must never do. */
type Serve = (inbox: Inbox, ranHandler: () => void) => Promise<{ port: number; close(): Promise<void> }>;

const listenOn = async (server: Server) => {
  const listening = await listen(server);
  return { port: listening.port, close: listening.close };
};

/** What the Nest controller's method calls, were it ever to run. */
const RAN = 'RAN';

@Controller()
class HookController {
  constructor(@Inject(RAN) private readonly ran: () => void) {}

  @Post('hook')
  @UseInterceptors(WebhookInterceptor)
  hook(): never {
    this.ran();
    throw new Error('unreachable: with an inbox, WebhookInterceptor answers itself');
  }
}

const nest =
  (platform: 'express' | 'fastify'): Serve =>
  async (inbox, ran) => {
    const moduleRef = await Test.createTestingModule({
      imports: [WebhookReceiverModule.forRoot({ secrets: secret, inbox, onRejected: () => {} })],
      controllers: [HookController],
      providers: [{ provide: RAN, useValue: ran }],
    }).compile();
    const app = moduleRef.createNestApplication(platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), { rawBody: true, logger: false });
    await app.listen(0, '127.0.0.1');
    const { port } = (app.getHttpServer() as Server).address() as import('node:net').AddressInfo;
    return { port, close: () => app.close() };
  };

const STACKS: [string, Serve][] = [
  [
    'Express',
    (inbox, ran) => {
      const app = express();
      app.post('/hook', expressWebhooks({ secrets: secret, inbox, onRejected: () => {} }), (_req, res) => {
        ran();
        res.sendStatus(204);
      });
      return listenOn(createServer(app));
    },
  ],
  [
    'Fastify',
    async (inbox, ran) => {
      const app = Fastify();
      await app.register(async (scope) => {
        await scope.register(fastifyWebhooks, { secrets: secret, inbox, onRejected: () => {} });
        scope.post('/hook', async (_request, reply) => {
          ran();
          return reply.code(204).send();
        });
      });
      await app.ready();
      const served = await listenOn(app.server);
      return { port: served.port, close: async () => { await served.close(); await app.close(); } };
    },
  ],
  [
    'Hono (@hono/node-server)',
    async (inbox, ran) => {
      const app = new Hono();
      app.post('/hook', honoWebhooks({ secrets: secret, inbox, onRejected: () => {} }), (c) => {
        ran();
        return c.body(null, 204);
      });
      return servedFetch(app.fetch);
    },
  ],
  [
    'Koa',
    (inbox, ran) => {
      const app = new Koa();
      const router = new Router();
      router.post('/hook', koaWebhooks({ secrets: secret, inbox, onRejected: () => {} }), (ctx) => {
        ran();
        ctx.status = 204;
      });
      app.use(router.routes());
      // eslint-disable-next-line @typescript-eslint/no-misused-promises -- Koa's callback settles every error itself (ctx.onerror): its promise never rejects.
      return listenOn(createServer(app.callback()));
    },
  ],
  ['Fetch', (inbox) => servedFetch(webhookHandler({ secrets: secret, inbox, onRejected: () => {} }))],
  ['NestJS (@nestjs/platform-express)', nest('express')],
  ['NestJS (@nestjs/platform-fastify)', nest('fastify')],
];

async function send(port: number, id: string, body = '{"type":"ping"}'): Promise<{ status: number; retryAfter: string | null; body: string }> {
  const signed = await signWebhook({ secret, body, id });
  const response = await fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', headers: { ...signed.headers, 'content-type': 'application/json' }, body });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
}

describe.skipIf(sharedRedisUrl === null)('adapters built with an inbox', () => {
  for (const [label, serve] of STACKS) {
    it(`${label}: 202 {"enqueued":true}, then 200 for the duplicate; the route's handler never runs; 503 with Retry-After when the engine refuses`, async () => {
      const connection = await connectIORedis(sharedRedisUrl!);
      const queue = new Queue(`adapters-${randomBytes(5).toString('hex')}`, { connection, prefix: 'test-adapters' });
      closers.push(async () => {
        await queue.obliterate({ force: true });
        await queue.close();
        connection.disconnect();
      });
      let ran = 0;
      const served = await serve(bullmqInbox({ queue, logger: silent }), () => ran++);
      closers.push(() => served.close());
      expect(await send(served.port, 'msg_adapter_1')).toEqual({ status: 202, retryAfter: null, body: '{"enqueued":true}' });
      expect(await send(served.port, 'msg_adapter_1')).toEqual({ status: 200, retryAfter: null, body: '{"duplicate":true}' });
      expect(await queue.getJobCounts('wait')).toEqual({ wait: 1 });
      expect(ran).toBe(0);
      // Signed but not JSON: accepted like any body (nothing parses it before the worker, whose
      // webhook.json() refuses it and dead-letters the job); on Nest, its own body parser answers
      // 400 before the interceptor runs (docs/nestjs.md).
      const notJson = await send(served.port, 'msg_adapter_text', 'not json {');
      if (label.startsWith('NestJS')) expect(notJson.status).toBe(400);
      else expect(notJson).toEqual({ status: 202, retryAfter: null, body: '{"enqueued":true}' });
      expect(await queue.getJobCounts('wait')).toEqual({ wait: label.startsWith('NestJS') ? 1 : 2 });

      // An engine that refuses: a queue whose Redis connection was closed (ioredis rejects at once).
      const closedConnection = await connectIORedis(sharedRedisUrl!);
      const closedQueue = new Queue(queue.name, { connection: closedConnection, prefix: 'test-adapters' });
      closedQueue.on('error', () => {});
      await closedQueue.waitUntilReady();
      await closedConnection.quit();
      const refusing = await serve(bullmqInbox({ queue: closedQueue, logger: silent }), () => ran++);
      closers.push(() => refusing.close());
      const refused = await send(refusing.port, 'msg_adapter_2');
      expect(refused.status).toBe(503);
      expect(refused.retryAfter).toBe('5');
      expect(JSON.parse(refused.body)).toEqual({ error: 'INBOX_UNAVAILABLE', message: 'the inbox could not take the webhook; retry later' });
    });
  }
});

describe.skipIf(sharedRedisUrl === null)('Lambda with an inbox', () => {
  it('the Lambda handler with an inbox and no handler accepts: 202 {"enqueued":true} in the event source\'s shape', async () => {
    const { webhookHandler: lambdaHandler } = await import('../../adapters/lambda.ts');
    const connection = await connectIORedis(sharedRedisUrl!);
    const queue = new Queue(`lambda-${randomBytes(5).toString('hex')}`, { connection, prefix: 'test-adapters' });
    closers.push(async () => {
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    });
    const handler = lambdaHandler({ secrets: secret, inbox: bullmqInbox({ queue, logger: silent }), onRejected: () => {} });
    const body = '{"type":"ping"}';
    const signed = await signWebhook({ secret, body, id: 'msg_lambda_1' });
    const event = { version: '2.0', rawPath: '/hook', headers: { ...signed.headers, 'content-type': 'application/json' }, body, isBase64Encoded: false, requestContext: { http: { method: 'POST', path: '/hook' } } };
    expect(await handler(event as never, undefined as never)).toMatchObject({ statusCode: 202, body: '{"enqueued":true}' });
    expect(await handler(event as never, undefined as never)).toMatchObject({ statusCode: 200, body: '{"duplicate":true}' });
    expect(() => lambdaHandler({ secrets: secret, inbox: bullmqInbox({ queue, logger: silent }) }, (() => ({ statusCode: 204 })) as never)).toThrow(TypeError);
  });
});

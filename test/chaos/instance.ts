/**
 * One app instance of the chaos test, run as a child process (`node --import tsx`) so that it can
 * be killed for real. Express, Fastify or Hono on @hono/node-server, behind this package's adapter,
 * with a `redisStore` on the shared Redis (ioredis for Express and Hono, node-redis for Fastify).
 *
 * Its handler is the side effect the test counts: it appends one JSON line per event to this
 * instance's log file with a synchronous append (in the kernel once the call returns, so a SIGKILL
 * right after cannot lose it): `start` when the handler begins, then `fail` (20 % of runs, chosen
 * by a seeded RNG) or `done` (the message was processed successfully), and `aborted` if its
 * `context.signal` aborts (its claim was lost). Some handlers are slow, longer than the lock, so
 * the claim must be renewed while they run. The endpoint accepts unsigned deliveries too
 * (`unsigned: 'accept'`), which must live apart from the signed ones. Rejections and store errors
 * are logged too. Configuration comes from the environment (the secret never appears in a command
 * line); the instance reports `{ ready: port }` over IPC once it listens, and `{ running: n }`
 * whenever the number of handlers at work changes.
 */

import { appendFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AdapterOptions } from '../../src/http.ts';
import type { WebhookContext } from '../../src/receiver.ts';
import type { VerifiedWebhook } from '../../src/verify.ts';
import { redisStore } from '../../src/stores/redis.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import { seededRandom } from './rng.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const framework = env('CHAOS_FRAMEWORK');
const port = Number(env('CHAOS_PORT'));
const redisUrl = env('CHAOS_REDIS_URL');
const secret = env('CHAOS_SECRET');
const logFile = env('CHAOS_LOG');
const failRate = Number(env('CHAOS_FAIL_RATE'));
const lockSeconds = Number(env('CHAOS_LOCK_SECONDS'));
const slowRate = Number(env('CHAOS_SLOW_RATE'));
const slowMs = Number(env('CHAOS_SLOW_MS'));

const random = seededRandom(Number(env('CHAOS_SEED')));

function log(event: string, fields: Record<string, unknown> = {}): void {
  appendFileSync(logFile, `${JSON.stringify({ event, pid: process.pid, at: Date.now(), ...fields })}\n`);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let running = 0;
const tellRunning = (delta: number) => {
  running += delta;
  process.send?.({ running });
};

/** The handler's work: true when it succeeded (and its side effect is logged). */
async function work(webhook: VerifiedWebhook, context: WebhookContext): Promise<boolean> {
  const { id, signed } = webhook;
  tellRunning(1);
  try {
    log('start', { id, signed });
    context.signal.addEventListener('abort', () => log('aborted', { id, signed }), { once: true });
    // Some handlers outlast the lock: only renewal keeps a retry from running them again meanwhile.
    await sleep(random() < slowRate ? slowMs * (1 + random() / 2) : Math.floor(random() * 25));
    if (random() < failRate) {
      log('fail', { id, signed });
      return false;
    }
    log('done', { id, signed });
    return true;
  } finally {
    tellRunning(-1);
  }
}

async function connectStore(): Promise<IdempotencyStore> {
  if (framework === 'fastify') {
    const { createClient } = await import('redis');
    const client = createClient({ url: redisUrl, socket: { reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 300) } });
    client.on('error', () => {});
    await client.connect();
    return redisStore({ client, timeoutMs: 1000 });
  }
  const { Redis } = await import('ioredis');
  const client = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: (times) => Math.min(50 * 2 ** times, 300) });
  client.on('error', () => {});
  await client.connect();
  return redisStore({ client, timeoutMs: 1000 });
}

const options: AdapterOptions = {
  secrets: secret,
  unsigned: 'accept',
  idempotency: { store: await connectStore(), lockSeconds, ttlSeconds: 600, unsignedTtlSeconds: 600 },
  onRejected: (error, context) => log('rejected', { id: context.webhookId, code: error.code }),
  onError: (error, context) => log('store-error', { id: context.webhookId, stage: context.stage, willRetry: context.willRetry, error: error instanceof Error ? error.message : 'unknown' }),
};

async function listen(): Promise<Server> {
  if (framework === 'express') {
    const { default: express } = await import('express');
    const { webhooks } = await import('../../adapters/express.ts');
    const app = express();
    app.post('/webhooks', webhooks(options), async (req, res) => {
      if (await work(req.webhook!, req.webhookContext!)) res.status(204).end();
      else res.status(500).json({ error: 'HANDLER_FAILED' });
    });
    return new Promise((resolve) => {
      const server = app.listen(port, '127.0.0.1', () => resolve(server));
    });
  }
  if (framework === 'fastify') {
    const { default: Fastify } = await import('fastify');
    const { webhooks } = await import('../../adapters/fastify.ts');
    const app = Fastify();
    await app.register(async (scope) => {
      await scope.register(webhooks, options);
      scope.post('/webhooks', async (request, reply) => {
        if (!(await work(request.webhook!, request.webhookContext!))) throw new Error('HANDLER_FAILED');
        return reply.code(204).send();
      });
    });
    await app.listen({ port, host: '127.0.0.1' });
    return app.server;
  }
  if (framework === 'hono') {
    const { Hono } = await import('hono');
    const { serve } = await import('@hono/node-server');
    const { webhooks } = await import('../../adapters/hono.ts');
    const app = new Hono();
    app.post('/webhooks', webhooks(options), async (c) => {
      if (!(await work(c.get('webhook'), c.get('webhookContext')))) throw new Error('HANDLER_FAILED');
      return c.body(null, 204);
    });
    app.onError((_error, c) => c.json({ error: 'HANDLER_FAILED' }, 500));
    return new Promise((resolve) => {
      const server = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, () => resolve(server as Server));
    });
  }
  throw new Error(`unknown framework ${framework}`);
}

await listen();
log('ready', { framework });
process.send?.({ ready: port });
// The parent ends this process (SIGKILL mid-run, SIGTERM at the end); leaving with it too.
process.on('disconnect', () => process.exit(0));

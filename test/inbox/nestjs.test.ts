/**
 * `webhook-receiver/nestjs` with an inbox, through real NestJS on both platforms over real HTTP,
 * with BullMQ on a real Redis: `WebhookInterceptor` accepts and answers 202 `{"enqueued":true}`
 * itself (the controller method never runs); the job is processed once by a worker that a Nest
 * provider starts on bootstrap (its handler calling an injected service) and closes on shutdown; a
 * duplicate is answered 200 and not enqueued again; a bad signature is 401 and an oversize body
 * 413, neither enqueued; the engine down is 503 `INBOX_UNAVAILABLE` with `Retry-After`, the claim
 * released, so the sender's retry enqueues once Redis is back. The module's options come from
 * `forRootAsync`, its inbox from a provider the worker shares.
 */

import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  Controller,
  Inject,
  Injectable,
  Module,
  Post,
  UseInterceptors,
  type DynamicModule,
  type INestApplication,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebhookInterceptor, WebhookReceiverModule, type VerifiedWebhook, type WebhookContext } from '../../adapters/nestjs.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import type { Inbox, InboxWorker, JobOutcomeEvent } from '../../src/inbox/types.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import { canStartRedis, connectIORedis, sharedRedisUrl, startRedisServer, type RedisServer } from '../support/redis.ts';

const secret = generateSecret();
const silent = { warn: () => {}, error: () => {} };

/** The app's own tokens: the inbox and store shared by the module's factory and the worker. */
const WEBHOOK_INBOX = 'WEBHOOK_INBOX';
const WEBHOOK_STORE = 'WEBHOOK_STORE';
/** What the test reads back: the controller method's runs and the worker's outcomes. */
const JOURNAL = 'JOURNAL';

/** Records what happened, and lets a test wait for an entry (no sleeps). */
class Journal {
  readonly controllerRuns: string[] = [];
  readonly outcomes: JobOutcomeEvent[] = [];
  readonly #waiters: { match: (event: JobOutcomeEvent) => boolean; resolve: (event: JobOutcomeEvent) => void }[] = [];

  outcome(event: JobOutcomeEvent): void {
    this.outcomes.push(event);
    for (const waiter of this.#waiters.splice(0)) {
      if (waiter.match(event)) waiter.resolve(event);
      else this.#waiters.push(waiter);
    }
  }

  /** Resolves with the first outcome `match` accepts, one already recorded included. */
  next(match: (event: JobOutcomeEvent) => boolean): Promise<JobOutcomeEvent> {
    const seen = this.outcomes.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }
}

/** The app's own service, which the worker's handler reaches through Nest's injection. */
@Injectable()
class OrdersService {
  readonly applied: { id: string; event: unknown; attempt: number; signal: boolean }[] = [];

  async apply(webhook: VerifiedWebhook, context: WebhookContext): Promise<void> {
    this.applied.push({ id: webhook.id, event: webhook.json(), attempt: context.attempt, signal: context.signal instanceof AbortSignal });
  }
}

/** The worker as docs/nestjs.md writes it: started on bootstrap, closed on shutdown. */
@Injectable()
class WebhookWorker implements OnApplicationBootstrap, OnApplicationShutdown {
  #worker: InboxWorker | undefined;

  constructor(
    @Inject(WEBHOOK_INBOX) private readonly inbox: Inbox,
    @Inject(WEBHOOK_STORE) private readonly store: IdempotencyStore,
    @Inject(OrdersService) private readonly orders: OrdersService,
    @Inject(JOURNAL) private readonly journal: Journal,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.#worker = await this.inbox.work((webhook, context) => this.orders.apply(webhook, context), {
      idempotency: { store: this.store },
      logger: silent,
      onOutcome: (event) => this.journal.outcome(event),
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.#worker?.close({ timeoutMs: 10_000 });
  }
}

@Controller('webhooks')
class WebhooksController {
  constructor(@Inject(JOURNAL) private readonly journal: Journal) {}

  @Post()
  @UseInterceptors(WebhookInterceptor)
  accept(): never {
    this.journal.controllerRuns.push('accept');
    throw new Error('unreachable: with an inbox, WebhookInterceptor answers itself');
  }
}

/** The app's module that owns the queue: its inbox and store, for the receiver and the worker. */
class QueueModule {}
Module({})(QueueModule);

function queueModule(inbox: Inbox, store: IdempotencyStore, journal: Journal): DynamicModule {
  return {
    module: QueueModule,
    providers: [
      { provide: WEBHOOK_INBOX, useValue: inbox },
      { provide: WEBHOOK_STORE, useValue: store },
      { provide: JOURNAL, useValue: journal },
    ],
    exports: [WEBHOOK_INBOX, WEBHOOK_STORE, JOURNAL],
  };
}

type Platform = 'express' | 'fastify';

interface App {
  app: INestApplication;
  port: number;
  journal: Journal;
  orders: OrdersService;
}

const open: INestApplication[] = [];
afterEach(async () => {
  for (const app of open.splice(0)) await app.close();
});

async function start(platform: Platform, inbox: Inbox, { worker, maxBodyBytes }: { worker: boolean; maxBodyBytes?: number }): Promise<App> {
  const store = memoryStore();
  const journal = new Journal();
  const queue = queueModule(inbox, store, journal);
  const moduleRef = await Test.createTestingModule({
    imports: [
      queue,
      WebhookReceiverModule.forRootAsync({
        imports: [queue],
        inject: [WEBHOOK_INBOX, WEBHOOK_STORE],
        useFactory: (inbox: Inbox, store: IdempotencyStore) => ({ secrets: secret, inbox, idempotency: { store }, maxBodyBytes, onRejected: () => {} }),
      }),
    ],
    controllers: [WebhooksController],
    providers: worker ? [OrdersService, WebhookWorker] : [OrdersService],
  }).compile();
  const app = moduleRef.createNestApplication(platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), { rawBody: true, logger: false });
  open.push(app);
  await app.listen(0, '127.0.0.1');
  const { port } = (app.getHttpServer() as Server).address() as AddressInfo;
  return { app, port, journal, orders: app.get(OrdersService) };
}

async function send(port: number, id: string, { key = secret, body = '{"type":"order.paid","orderId":"ord_1"}' } = {}) {
  const signed = await signWebhook({ secret: key, body, id });
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', headers: { ...signed.headers, 'content-type': 'application/json' }, body });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
}

async function freshQueue(url: string, closers: (() => Promise<void>)[]): Promise<{ queue: Queue; redis: Redis }> {
  // maxRetriesPerRequest: 1, so a command to a stopped server fails rather than waits for it.
  const connection = await connectIORedis(url, { maxRetriesPerRequest: 1 });
  const queue = new Queue(`nest-${randomBytes(6).toString('hex')}`, { connection, prefix: 'test-nest' });
  queue.on('error', () => {});
  closers.push(async () => {
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    connection.disconnect();
  });
  return { queue, redis: connection };
}

const COUNTS = ['wait', 'active', 'delayed', 'completed', 'failed'] as const;

/** How many jobs were ever added to `queue`: the `added` entries of BullMQ's events stream. */
async function addedJobs(queue: Queue, redis: Redis): Promise<number> {
  const entries = await redis.xrange(queue.toKey('events'), '-', '+');
  return entries.filter(([, fields]) => fields[0] === 'event' && fields[1] === 'added').length;
}

describe.skipIf(sharedRedisUrl === null).each(['express', 'fastify'] as const)('NestJS (@nestjs/platform-%s) accepting into a BullMQ inbox', (platform) => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it('answers 202 {"enqueued":true} without running the controller method; the worker provider processes the job once through an injected service; the duplicate is 200 and not enqueued', async () => {
    const { queue, redis } = await freshQueue(sharedRedisUrl!, closers);
    const { app, port, journal, orders } = await start(platform, bullmqInbox({ queue, logger: silent }), { worker: true });
    // onApplicationBootstrap started the worker: BullMQ lists its connection.
    expect(await queue.getWorkersCount()).toBe(1);

    expect(await send(port, 'msg_nest_1')).toEqual({ status: 202, retryAfter: null, body: '{"enqueued":true}' });
    expect(await journal.next((event) => event.webhookId === 'msg_nest_1')).toMatchObject({ outcome: 'processed', attempt: 1, namespace: 'default' });
    expect(orders.applied).toEqual([{ id: 'msg_nest_1', event: { type: 'order.paid', orderId: 'ord_1' }, attempt: 1, signal: true }]);

    expect(await send(port, 'msg_nest_1')).toEqual({ status: 200, retryAfter: null, body: '{"duplicate":true}' });
    // One job was ever added (the add precedes the answer), and, done, it left the queue.
    expect(await addedJobs(queue, redis)).toBe(1);
    await expect.poll(() => queue.getJobCounts(...COUNTS), { timeout: 10_000, interval: 50 }).toEqual({ wait: 0, active: 0, delayed: 0, completed: 0, failed: 0 });
    expect(journal.outcomes.map((event) => [event.webhookId, event.outcome])).toEqual([['msg_nest_1', 'processed']]);
    expect(journal.controllerRuns).toEqual([]);

    // onApplicationShutdown closed the worker.
    await app.close();
    expect(await queue.getWorkersCount()).toBe(0);
  });

  it('refuses a bad signature with 401 and an oversize body with 413, enqueuing neither', async () => {
    const { queue, redis } = await freshQueue(sharedRedisUrl!, closers);
    const { port, journal } = await start(platform, bullmqInbox({ queue, logger: silent }), { worker: false, maxBodyBytes: 1024 });
    const forged = await send(port, 'msg_nest_forged', { key: generateSecret() });
    expect(forged.status).toBe(401);
    expect(JSON.parse(forged.body)).toMatchObject({ error: 'SIGNATURE_MISMATCH' });
    const large = await send(port, 'msg_nest_large', { body: JSON.stringify({ type: 'a', padding: 'x'.repeat(4096) }) });
    expect(large.status).toBe(413);
    expect(JSON.parse(large.body)).toMatchObject({ error: 'PAYLOAD_TOO_LARGE' });
    expect(await addedJobs(queue, redis)).toBe(0);
    expect(journal.controllerRuns).toEqual([]);
    // The same delivery, signed and small, still goes through: nothing was left claimed.
    expect((await send(port, 'msg_nest_forged')).status).toBe(202);
  });
});

describe.skipIf(!canStartRedis('the NestJS inbox outage test')).each(['express', 'fastify'] as const)('NestJS (@nestjs/platform-%s) with the engine down', (platform) => {
  let redis: RedisServer;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await redis?.close();
  });

  it('answers 503 INBOX_UNAVAILABLE with Retry-After, the claim released: the retry once Redis is back enqueues', async () => {
    const { queue } = await freshQueue(redis.url, closers);
    const { port, journal } = await start(platform, bullmqInbox({ queue, timeoutMs: 300, logger: silent }), { worker: false });
    expect((await send(port, 'msg_nest_up')).status).toBe(202);

    await redis.stop();
    const refused = await send(port, 'msg_nest_down');
    expect(refused).toEqual({ status: 503, retryAfter: '5', body: expect.any(String) });
    expect(JSON.parse(refused.body)).toMatchObject({ error: 'INBOX_UNAVAILABLE' });

    await redis.start();
    // The sender's retry: 503 while the connection comes back, then 202, not the duplicate (200)
    // or in-progress (409) answer a claim left behind would give.
    let retried = refused;
    await expect.poll(async () => (retried = await send(port, 'msg_nest_down')).status, { timeout: 15_000, interval: 100 }).not.toBe(503);
    expect(retried).toEqual({ status: 202, retryAfter: null, body: '{"enqueued":true}' });
    expect(await send(port, 'msg_nest_down')).toMatchObject({ status: 200, body: '{"duplicate":true}' });
    // The restarted server kept nothing (persistence off): the one job is the retried delivery's.
    const jobs = await queue.getJobs(['wait']);
    expect(jobs.map((job) => (job.data as { id?: unknown }).id)).toEqual(['msg_nest_down']);
    expect(journal.controllerRuns).toEqual([]);
  });
});

/**
 * The accepting side on a real Redis (BullMQ): `receiver.accept` enqueues once the engine
 * acknowledged the job and completes the claim; a second delivery of the id is a duplicate, not
 * enqueued again; the engine down (a stopped redis-server: BullMQ's `add` never settles) or a
 * backlog past `maxBacklog` is 503 `INBOX_UNAVAILABLE` with the claim released, so the sender's
 * retry enqueues it; unsigned deliveries only with `unsigned: 'accept'`, in their own key space;
 * `handle` with an inbox and `accept` without one are TypeErrors naming the other; the Fetch
 * handler with an inbox and no handler answers 202 `{"enqueued":true}` over real HTTP.
 */

import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { webhookHandler } from '../../adapters/fetch.ts';
import type { WebhookError } from '../../src/errors.ts';
import { errorResponse } from '../../src/http.ts';
import { hexJobId } from '../../src/inbox/job.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { createReceiver } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { servedFetch } from '../adapters/node-http.ts';
import { acceptedJob } from './conformance.ts';
import { canStartRedis, connectIORedis, sharedRedisUrl, startRedisServer, type RedisServer } from '../support/redis.ts';

const secret = generateSecret();
const silent = { warn: () => {}, error: () => {} };
const closers: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

async function freshQueue(url: string): Promise<Queue> {
  const connection = await connectIORedis(url, { maxRetriesPerRequest: 1 });
  const queue = new Queue(`accept-${randomBytes(6).toString('hex')}`, { connection, prefix: 'test-accept' });
  queue.on('error', () => {});
  closers.push(async () => {
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    connection.disconnect();
  });
  return queue;
}

async function delivery(id: string, body = '{"type":"ping"}') {
  const signed = await signWebhook({ secret, body, id });
  return { headers: { ...signed.headers, 'content-type': 'application/json' }, body };
}

describe('receiver.accept and handle: one or the other', () => {
  it('handle on a receiver with an inbox, and accept on one without, are TypeErrors naming the other', async () => {
    const inbox = bullmqInbox({ queue: { add() {}, getJob() {}, name: 'q' } as never, logger: silent });
    const accepting = createReceiver({ secrets: secret, inbox });
    expect(accepting.inbox).toBe(inbox);
    await expect(accepting.handle(await delivery('msg_1'), () => {})).rejects.toThrow(
      new TypeError('this receiver was built with an inbox: receiver.accept(request) enqueues the delivery, and inbox.work(handler) runs the handler'),
    );
    const plain = createReceiver({ secrets: secret });
    await expect(plain.accept(await delivery('msg_1'))).rejects.toThrow(
      new TypeError('receiver.accept needs an inbox: createReceiver({ secrets, inbox }); without one, receiver.handle(request, handler) runs the handler'),
    );
    expect(() => createReceiver({ secrets: secret, inbox: {} as never })).toThrow(TypeError);
    expect(() => webhookHandler({ secrets: secret, inbox }, (() => undefined) as never)).toThrow(
      new TypeError('webhookHandler was given an inbox and a handler: with an inbox the handler runs in the workers, inbox.work(handler); pass no handler here'),
    );
  });
});

describe.skipIf(sharedRedisUrl === null)('receiver.accept on BullMQ', () => {
  it('enqueues once the engine acknowledged, and answers a second delivery of the id as a duplicate without enqueueing it', async () => {
    const queue = await freshQueue(sharedRedisUrl!);
    const store = memoryStore();
    const receiver = createReceiver({ secrets: secret, inbox: bullmqInbox({ queue, logger: silent }), idempotency: { store, namespace: 'billing' } });
    const first = await receiver.accept(await delivery('msg_accept_1', '{"n":1}'));
    expect(first.outcome).toBe('enqueued');
    const job = await queue.getJob(await hexJobId('billing:s:msg_accept_1'));
    expect(job?.data).toMatchObject({ v: 1, id: 'msg_accept_1', namespace: 'billing', contentType: 'application/json', signed: true, scheme: 'v1', body: Buffer.from('{"n":1}').toString('base64') });
    // The claim was completed: the sender's retry (a new signature, a new timestamp) is a duplicate.
    expect((await receiver.accept(await delivery('msg_accept_1', '{"n":1}'))).outcome).toBe('duplicate');
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 1 });
  });

  it('refuses past maxBacklog with 503 INBOX_UNAVAILABLE, releasing the claim', async () => {
    const queue = await freshQueue(sharedRedisUrl!);
    const store = memoryStore();
    const inbox = bullmqInbox({ queue, maxBacklog: 1, logger: silent });
    // One job waits already (the count is read at the first delivery, then at most once a second).
    await inbox.enqueue(await acceptedJob('{}', { id: 'msg_backlog_1' }));
    const receiver = createReceiver({ secrets: secret, inbox, idempotency: { store } });
    const refused = await receiver.accept(await delivery('msg_backlog_2')).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ name: 'WebhookError', code: 'INBOX_UNAVAILABLE', status: 503, message: 'the inbox is full; retry later' });
    expect((refused as { hint?: string }).hint).toContain('holds 1 jobs waiting, maxBacklog is 1');
    expect((await store.claim('default:s:msg_backlog_2', 1000)).status).toBe('acquired');
  });

  it('accepts unsigned deliveries only with unsigned: accept, in their own key space', async () => {
    const queue = await freshQueue(sharedRedisUrl!);
    const inbox = bullmqInbox({ queue, logger: silent });
    const unsigned = { headers: { 'webhook-id': 'msg_unsigned', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) }, body: '{}' };
    await expect(createReceiver({ secrets: secret, inbox }).accept(unsigned)).rejects.toMatchObject({ code: 'MISSING_SIGNATURE' });
    const receiver = createReceiver({ secrets: secret, inbox, unsigned: 'accept' });
    expect((await receiver.accept(unsigned)).outcome).toBe('enqueued');
    expect((await receiver.accept(await delivery('msg_unsigned'))).outcome).toBe('enqueued');
    expect((await queue.getJob(await hexJobId('default:u:msg_unsigned')))?.data).toMatchObject({ signed: false, scheme: null });
    expect((await queue.getJob(await hexJobId('default:s:msg_unsigned')))?.data).toMatchObject({ signed: true });
  });

  it('serves 202 {"enqueued":true}, then 200 for the duplicate, from the Fetch handler over real HTTP', async () => {
    const queue = await freshQueue(sharedRedisUrl!);
    const served = await servedFetch(webhookHandler({ secrets: secret, inbox: bullmqInbox({ queue, logger: silent }), onRejected: () => {} }));
    closers.push(() => served.close());
    const send = async (id: string) => {
      const { headers, body } = await delivery(id);
      const response = await fetch(`http://127.0.0.1:${served.port}/`, { method: 'POST', headers, body });
      return { status: response.status, body: await response.text() };
    };
    expect(await send('msg_http_1')).toEqual({ status: 202, body: '{"enqueued":true}' });
    expect(await send('msg_http_1')).toEqual({ status: 200, body: '{"duplicate":true}' });
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 1 });
  });
});

describe.skipIf(!canStartRedis('the inbox outage test'))('receiver.accept with the engine down', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.close();
  });

  it('spends one timeoutMs on the backlog read and the add together: with no count yet, the read takes the budget and the add is never started', async () => {
    // ioredis's defaults, as an app connects: while Redis is down, BullMQ's calls wait for it
    // (and so would the cleanup: this queue is removed here, with Redis back, not after the file).
    const connection = await connectIORedis(redis.url);
    const queue = new Queue(`accept-${randomBytes(6).toString('hex')}`, { connection, prefix: 'test-accept' });
    queue.on('error', () => {});
    await redis.stop();
    const timeoutMs = 1000;
    const inbox = bullmqInbox({ queue, timeoutMs, logger: silent });
    // Spies that call through to the real engine: which steps the accept started, and how often.
    const backlog = vi.spyOn(inbox, 'backlog');
    const enqueue = vi.spyOn(inbox, 'enqueue');
    const store = memoryStore();
    const receiver = createReceiver({ secrets: secret, inbox, idempotency: { store } });
    try {
      const before = performance.now();
      const refused = await receiver.accept(await delivery('msg_budget')).then(
        () => undefined,
        (error: unknown) => error,
      );
      const tookMs = performance.now() - before;
      expect(refused).toMatchObject({ name: 'WebhookError', code: 'INBOX_UNAVAILABLE', status: 503, message: 'the inbox did not acknowledge the webhook in time; retry later' });
      expect(errorResponse(refused as WebhookError).headers['retry-after']).toBe('5');
      // The whole budget was waited (a timer may fire a millisecond early by this clock)...
      expect(tookMs).toBeGreaterThanOrEqual(timeoutMs - 2);
      // ...once: the backlog read took it all, so no add was started to wait a second budget on
      // (or to land after the 503).
      expect(backlog).toHaveBeenCalledTimes(1);
      expect(enqueue).not.toHaveBeenCalled();
      expect((refused as { hint?: string }).hint).toBe(
        'bullmq did not count its waiting jobs within timeoutMs, 1000 ms, the one budget for the backlog read and the add (is its server reachable?)',
      );
      // The claim was released: the sender's retry enqueues it.
      expect((await store.claim('default:s:msg_budget', 1000)).status).toBe('acquired');
    } finally {
      await redis.start();
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    }
  });

  it('answers 503 INBOX_UNAVAILABLE with Retry-After within timeoutMs (BullMQ never settles its add), the claim released; the retry after the restart enqueues', async () => {
    const queue = await freshQueue(redis.url);
    const store = memoryStore();
    const inbox = bullmqInbox({ queue, timeoutMs: 300, logger: silent });
    const receiver = createReceiver({ secrets: secret, inbox, idempotency: { store } });
    const served = await servedFetch(webhookHandler({ secrets: secret, inbox, idempotency: { store }, onRejected: () => {} }));
    closers.push(() => served.close());
    expect((await receiver.accept(await delivery('msg_up'))).outcome).toBe('enqueued');
    await redis.stop();
    const before = Date.now();
    const refused = await receiver.accept(await delivery('msg_down')).then(
      () => undefined,
      (error: unknown) => error,
    );
    const tookMs = Date.now() - before;
    expect(refused).toMatchObject({ code: 'INBOX_UNAVAILABLE', status: 503 });
    expect(tookMs).toBeLessThan(5000);
    expect((await store.claim('default:s:msg_down', 1000)).status).toBe('acquired');
    const { headers, body } = await delivery('msg_down_http');
    const response = await fetch(`http://127.0.0.1:${served.port}/`, { method: 'POST', headers, body });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('5');
    expect(JSON.parse(await response.text())).toMatchObject({ error: 'INBOX_UNAVAILABLE' });
    await redis.start();
    // The sender's retry, once Redis is back: the claim was released, so it is enqueued now.
    await expect.poll(async () => (await receiver.accept(await delivery('msg_down_http')).catch(() => ({ outcome: 'refused' }))).outcome, { timeout: 15_000 }).toBe('enqueued');
  });
});

/**
 * The receiver when Redis goes away and comes back (a clear 503 or the configured fallback, never a
 * hung request, and recovery once it is back): a private redis-server is stopped and restarted on
 * the same port, under clients with their libraries' default settings (offline queues on: the
 * worst case for a hanging request).
 */

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebhookError } from '../../src/errors.ts';
import { errorResponse } from '../../src/http.ts';
import { createReceiver, type Receiver, type ReceiveResult } from '../../src/receiver.ts';
import { redisStore } from '../../src/stores/redis.ts';
import { canStartRedis, CLIENT_KINDS, connectClient, startRedisServer, type RedisServer, type TestClient } from '../support/redis.ts';
import { sleep } from '../support/stores.ts';
import { SECRET, delivery, errorLog } from './support.ts';

const TIMEOUT_MS = 500;

/** Retries `id` until the receiver answers again (Redis back and the client reconnected), for at most 5 s. */
async function recovered(receiver: Receiver, id: string): Promise<ReceiveResult<string>> {
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      return await receiver.handle(await delivery(id), () => 'after the outage');
    } catch (error) {
      if (!(error instanceof WebhookError) || error.code !== 'STORE_UNAVAILABLE' || Date.now() > deadline) throw error;
      await sleep(50);
    }
  }
}

describe.skipIf(!canStartRedis('test/receiver/outage.test.ts')).each(CLIENT_KINDS)('receiver over %s when Redis goes away', (kind) => {
  let server: RedisServer;
  let client: TestClient;
  let prefixes = 0;

  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server?.close();
  });
  afterEach(async () => {
    client?.close();
    if (!server.running) await server.start();
  });

  const setup = async () => {
    client = await connectClient(kind, server.url);
    return redisStore({ client: client.client, prefix: `outage${++prefixes}:`, timeoutMs: TIMEOUT_MS });
  };

  it("Redis stopped: 503 STORE_UNAVAILABLE, or with onStoreError: 'process' the handler runs; Redis back: the same receivers recover", async () => {
    const store = await setup();
    const strictLog = errorLog();
    const lenientLog = errorLog();
    const strict = createReceiver({ secrets: SECRET, idempotency: { store }, onError: strictLog.onError });
    const lenient = createReceiver({ secrets: SECRET, idempotency: { store, onStoreError: 'process' }, onError: lenientLog.onError });
    expect((await strict.handle(await delivery('msg_before'), () => 'before')).outcome).toBe('processed');

    await server.stop();

    const handler = vi.fn(() => 'during');
    const error = await strict.handle(await delivery('msg_during'), handler).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(WebhookError);
    expect(error).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      status: 503,
      message: 'the idempotency store is unreachable, so this delivery cannot be deduplicated safely; retry later',
    });
    // Answered by the store's own bound (its timeout, or at once while the client reconnects), not
    // by waiting for Redis: a clock would say the same thing, and fail on a loaded machine.
    expect((error as WebhookError).cause).toMatchObject({ name: 'StoreError', reason: expect.stringMatching(/^(timeout|not_ready)$/) });
    expect(errorResponse(error as WebhookError)).toEqual({
      status: 503,
      headers: { 'content-type': 'application/json', 'retry-after': '5' },
      body: JSON.stringify({
        error: 'STORE_UNAVAILABLE',
        message: 'the idempotency store is unreachable, so this delivery cannot be deduplicated safely; retry later',
      }),
    });
    await expect(strict.claim(await delivery('msg_during'))).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(handler).not.toHaveBeenCalled();
    expect(strictLog.entries).toEqual([]);

    // onStoreError: 'process': run without deduplication, and say so.
    expect(await lenient.handle(await delivery('msg_during'), handler)).toMatchObject({ outcome: 'processed', value: 'during' });
    expect(await lenient.handle(await delivery('msg_during'), handler)).toMatchObject({ outcome: 'processed', value: 'during' });
    expect(handler).toHaveBeenCalledTimes(2);
    expect(lenientLog.entries).toHaveLength(2);
    expect(lenientLog.entries[0]).toMatchObject({ stage: 'claim', webhookId: 'msg_during', error: expect.any(Error) });

    await server.start();
    expect(await recovered(strict, 'msg_after')).toMatchObject({ outcome: 'processed', value: 'after the outage' });
    expect((await strict.handle(await delivery('msg_after'), handler)).outcome).toBe('duplicate');
    expect((await lenient.handle(await delivery('msg_after'), handler)).outcome).toBe('duplicate');
    expect(handler).toHaveBeenCalledTimes(2);
  });

  it("Redis gone before complete: the handler's result stands and the default onError logs one line without secrets", async () => {
    const store = await setup();
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store } });
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const result = await receiver.handle(await delivery('msg_lost_complete'), async () => {
        await server.stop();
        return 'charged';
      });
      expect(result).toMatchObject({ outcome: 'processed', value: 'charged', webhook: { id: 'msg_lost_complete' } });
      expect(logged).toHaveBeenCalledTimes(1);
      const line = String(logged.mock.calls[0]![0]);
      expect(line).toMatch(/^\[webhook-receiver\] could not complete the idempotency claim \(retrying\) for webhook "msg_lost_complete": \w+/);
      expect(line).not.toContain(SECRET);
      expect(line).not.toContain(SECRET.slice('whsec_'.length));
    } finally {
      logged.mockRestore();
    }
  });

  it('Redis gone at complete and back within the lock: the completion is retried, so a later duplicate does not run again', async () => {
    // A Redis that keeps its data across a restart (append-only file), as a production one does:
    // without it the restart itself forgets every id, and no retry could help.
    const durable = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    const durableClient = await connectClient(kind, durable.url);
    const store = redisStore({ client: durableClient.client, prefix: 'retry-complete:', timeoutMs: TIMEOUT_MS });
    const log = errorLog();
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store, lockSeconds: 10 }, onError: log.onError });
    const handler = vi.fn(async () => {
      await durable.stop();
      return 'charged once';
    });
    try {
      expect(await receiver.handle(await delivery('msg_retry_complete'), handler)).toMatchObject({ outcome: 'processed', value: 'charged once' });
      expect(log.entries).toEqual([expect.objectContaining({ stage: 'complete', webhookId: 'msg_retry_complete', willRetry: true })]);

      await durable.start();
      // The background retry lands once Redis answers again; the id then reads as completed.
      const deadline = Date.now() + 8000;
      let outcome: string | undefined;
      while (Date.now() < deadline) {
        try {
          outcome = (await receiver.handle(await delivery('msg_retry_complete'), handler)).outcome;
        } catch (error) {
          if (!(error instanceof WebhookError) || error.code !== 'STORE_UNAVAILABLE') throw error;
        }
        if (outcome === 'duplicate') break;
        await sleep(100);
      }
      expect(outcome).toBe('duplicate');
      expect(handler).toHaveBeenCalledTimes(1);
      // Nothing reported a give-up: the one report was the first failure, marked as retrying.
      expect(log.entries.filter((entry) => entry.willRetry === false)).toEqual([]);
    } finally {
      durableClient.close();
      await durable.close();
    }
  });

  it("Redis gone before release: the handler's own error still propagates, and onError is told", async () => {
    const store = await setup();
    const log = errorLog();
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store }, onError: log.onError });
    const failure = new Error('payment provider down');
    await expect(
      receiver.handle(await delivery('msg_lost_release'), async () => {
        await server.stop();
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(log.entries).toMatchObject([{ stage: 'release', webhookId: 'msg_lost_release', error: expect.any(Error) }]);
  });
});

/**
 * Unsigned traffic's budget: in every shared store, a flood of unsigned deliveries
 * (no secret needed to send one) neither evicts nor blocks a signed id. Through the receiver,
 * against a real redis-server with a small `maxmemory` under `volatile-lru` and under
 * `noeviction`, against PostgreSQL (also in its transactional mode), and over real HTTP for the
 * answer past the budget: 503 `UNSIGNED_LIMIT` with `Retry-After`.
 */

import { createServer } from 'node:http';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhooks } from '../../adapters/express.ts';
import express from 'express';
import { isWebhookError } from '../../src/errors.ts';
import { createReceiver, type Receiver } from '../../src/receiver.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { redisStore } from '../../src/stores/redis.ts';
import { unsignedBuckets } from '../../src/stores/internal.ts';
import { DEFAULT_UNSIGNED_MAX, type IdempotencyStore } from '../../src/stores/types.ts';
import { MAX_ID_LENGTH, type WebhookInput } from '../../src/verify.ts';
import { listen } from '../adapters/node-http.ts';
import { SECRET, delivery } from '../receiver/support.ts';
import { connectPostgres, sharedPostgresUrl, uniqueTable, type PostgresClient } from '../support/postgres.ts';
import { canStartRedis, connectIORedis, startRedisServer, type RedisServer } from '../support/redis.ts';

/** An unsigned delivery: no timestamp, no signature, an id of the longest length accepted. */
function unsigned(id: string): WebhookInput {
  return { headers: { 'webhook-id': id.padEnd(MAX_ID_LENGTH, 'x') }, body: '{}' };
}

/**
 * Sends `count` unsigned deliveries, `inFlight` at a time, each handled at once, and counts their
 * outcomes (or the code they were refused with; anything else is counted by its message).
 */
async function flood(receiver: Receiver, tag: string, count: number, inFlight = 32): Promise<Record<string, number>> {
  const tally: Record<string, number> = {};
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      let outcome: string;
      try {
        outcome = (await receiver.handle(unsigned(`${tag}_${i}_`), () => 'ok')).outcome;
      } catch (error) {
        outcome = isWebhookError(error) ? error.code : String(error);
      }
      tally[outcome] = (tally[outcome] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return tally;
}

/** A promise and its resolver: a handler waits on it, the test opens it. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * Past the budget (`unsignedMax: 1`: a single bucket of one id): while one unsigned
 * delivery is being handled, another is refused with `UNSIGNED_LIMIT`; signed deliveries pass.
 * Once the first completes, the next unsigned id takes its slot, so the first is forgotten early.
 */
async function pastTheBudget(store: IdempotencyStore, onStoreError: 'reject' | 'process' = 'reject'): Promise<void> {
  const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept', idempotency: { store, onStoreError } });
  const started = gate();
  const finish = gate();
  const held = receiver.handle(unsigned('held_'), async () => {
    started.open();
    await finish.promise;
    return 'held';
  });
  await started.promise;
  await expect(receiver.handle(unsigned('refused_'), () => 'never')).rejects.toMatchObject({ code: 'UNSIGNED_LIMIT', status: 503 });
  expect(await receiver.handle(await delivery('msg_signed_meanwhile'), () => 'signed')).toMatchObject({ outcome: 'processed', value: 'signed' });
  finish.open();
  expect(await held).toMatchObject({ outcome: 'processed', value: 'held' });
  expect((await receiver.handle(unsigned('held_'), () => 'again')).outcome).toBe('duplicate');
  expect(await receiver.handle(unsigned('refused_'), () => 'now')).toMatchObject({ outcome: 'processed', value: 'now' });
  expect((await receiver.handle(unsigned('held_'), () => 'forgotten')).outcome).toBe('processed');
  expect((await receiver.handle(await delivery('msg_signed_meanwhile'), () => 'twice')).outcome).toBe('duplicate');
}

const FLOOD = 12_000;

const redisAvailable = canStartRedis('the unsigned budget test');

describe.skipIf(!redisAvailable).each(['volatile-lru', 'noeviction'])('redisStore under maxmemory 3mb and %s', (policy) => {
  let server: RedisServer;
  let redis: Redis;
  const info = async (field: string) => Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(await redis.info())?.[1]);

  beforeAll(async () => {
    server = await startRedisServer({ args: ['--maxmemory', '3mb', '--maxmemory-policy', policy] });
    redis = await connectIORedis(server.url);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.close();
  });

  it(`a flood of ${FLOOD} unsigned ids of ${MAX_ID_LENGTH} characters neither evicts nor blocks a signed id`, { timeout: 120_000 }, async () => {
    await redis.flushall();
    // The default budget, 10 000 ids: about 1.3 MB, which fits beside an empty Redis's own 1 MB.
    const store = redisStore({ client: redis });
    const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept', idempotency: { store } });
    expect((await receiver.handle(await delivery('msg_signed_before'), () => 1)).outcome).toBe('processed');

    const tally = await flood(receiver, 'flood', FLOOD);
    // Every unsigned delivery was processed: nothing failed for want of memory, and 32 in flight
    // never filled a bucket of 16 with live claims.
    expect(tally).toEqual({ processed: FLOOD });

    // The completed signed id is still a duplicate, and new signed deliveries still run.
    expect((await receiver.handle(await delivery('msg_signed_before'), () => 2)).outcome).toBe('duplicate');
    for (let i = 0; i < 20; i++) {
      expect((await receiver.handle(await delivery(`msg_signed_after_${i}`), () => 3)).outcome).toBe('processed');
    }
    // Redis evicted nothing: unsigned ids held at most their budget's keys.
    expect(await info('evicted_keys')).toBe(0);
    expect(await redis.dbsize()).toBe(unsignedBuckets(DEFAULT_UNSIGNED_MAX).buckets + 21);
    expect(await info('used_memory')).toBeLessThan(3 * 1024 * 1024);
  });

  it('past the budget, an unsigned delivery is refused with UNSIGNED_LIMIT; signed ones pass', async () => {
    await pastTheBudget(redisStore({ client: redis, prefix: 'limit:', unsignedMax: 1 }));
  });
});

describe.skipIf(sharedPostgresUrl === null)('postgresStore: unsigned ids in a bounded slot table', () => {
  let client: PostgresClient;
  beforeAll(() => {
    client = connectPostgres('pg', sharedPostgresUrl!);
  });
  afterAll(async () => {
    await client?.close();
  });

  it('a flood of unsigned ids never holds more than unsignedMax rows, and leaves signed ids alone', { timeout: 120_000 }, async () => {
    const table = uniqueTable('unsigned_flood');
    const store = postgresStore({ client: client.client, table, unsignedMax: 500 });
    await store.setup();
    const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept', idempotency: { store } });
    expect((await receiver.handle(await delivery('msg_signed_before'), () => 1)).outcome).toBe('processed');

    const tally = await flood(receiver, 'flood', 3_000, 8);
    expect(tally).toEqual({ processed: 3_000 });
    const [{ slots, max }] = (await client.query(`SELECT count(*)::int AS slots, max(slot) AS max FROM "${table}_unsigned"`)) as [{ slots: number; max: number }];
    // 31 buckets of 16: 496 slots, every one taken by now.
    expect(slots).toBe(496);
    expect(max).toBe(495);
    // Only signed ids in the claims table.
    expect(await client.query(`SELECT key FROM "${table}"`)).toEqual([{ key: 'default:s:msg_signed_before' }]);

    expect((await receiver.handle(await delivery('msg_signed_before'), () => 2)).outcome).toBe('duplicate');
    for (let i = 0; i < 20; i++) {
      expect((await receiver.handle(await delivery(`msg_signed_after_${i}`), () => 3)).outcome).toBe('processed');
    }
    await client.query(`DROP TABLE "${table}", "${table}_unsigned"`);
  });

  it('past the budget, UNSIGNED_LIMIT; a transaction completes the unsigned slot with its side effect', async () => {
    const table = uniqueTable('unsigned_limit');
    const store = postgresStore({ client: client.client as pg.Pool, table, unsignedMax: 1 });
    await store.setup();
    await client.query(`CREATE TABLE "${table}_effects" (id text)`);
    await pastTheBudget(store);
    // Transactional mode: the held delivery's effect and its slot's completion commit together.
    const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept', idempotency: { store } });
    const result = await receiver.handle(unsigned('in_tx_'), (webhook, context) =>
      store.transaction(context, async (tx) => {
        await tx.query(`INSERT INTO "${table}_effects" VALUES ($1)`, [webhook.id.slice(0, 6)]);
        return 'committed';
      }),
    );
    expect(result).toMatchObject({ outcome: 'processed', value: 'committed' });
    expect(await client.query(`SELECT slot, completed FROM "${table}_unsigned"`)).toEqual([{ slot: 0, completed: true }]);
    expect(await client.query(`SELECT id FROM "${table}_effects"`)).toEqual([{ id: 'in_tx_' }]);
    expect((await receiver.handle(unsigned('in_tx_'), () => 'again')).outcome).toBe('duplicate');
    await client.query(`DROP TABLE "${table}", "${table}_unsigned", "${table}_effects"`);
  });
});

describe('memoryStore past the budget', () => {
  it('refuses with UNSIGNED_LIMIT, also with onStoreError: process (a refusal, not an outage to run through)', async () => {
    await pastTheBudget(memoryStore({ unsignedMax: 1 }));
    await pastTheBudget(memoryStore({ unsignedMax: 1 }), 'process');
  });
});

describe('the answer past the budget, over real HTTP (Express)', () => {
  it('is 503 UNSIGNED_LIMIT with Retry-After in the { error, message } envelope; a signed delivery passes', async () => {
    const store = memoryStore({ unsignedMax: 1 });
    const started = gate();
    const finish = gate();
    const app = express();
    app.post('/hook', webhooks({ secrets: SECRET, unsigned: 'accept', idempotency: { store } }), (req, res) => {
      if (req.webhook?.id.startsWith('held_')) {
        started.open();
        void finish.promise.then(() => res.json({ ok: true }));
      } else res.json({ ok: true });
    });
    const served = await listen(createServer(app));
    const post = (input: WebhookInput) =>
      fetch(`http://127.0.0.1:${served.port}/hook`, { method: 'POST', headers: { 'content-type': 'application/json', ...(input.headers as Record<string, string>) }, body: input.body as string });
    try {
      const held = post(unsigned('held_'));
      await started.promise;
      const refused = await post(unsigned('refused_'));
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(await refused.json()).toEqual({ error: 'UNSIGNED_LIMIT', message: 'unsigned deliveries have reached their budget in the idempotency store; retry later' });
      expect((await post(await delivery('msg_signed'))).status).toBe(200);
      finish.open();
      expect((await held).status).toBe(200);
    } finally {
      finish.open();
      await served.close();
    }
  });
});

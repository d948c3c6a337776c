/**
 * What only the Redis store does: option checks, the key layout, one round trip per operation
 * (EVALSHA, EVAL after NOSCRIPT), the per-operation timeout and failing fast while the client
 * reconnects. Outage tests use a private redis-server so the shared one is never disturbed.
 */

import { createHash } from 'node:crypto';
import { Redis, type Cluster } from 'ioredis';
import type { createCluster } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { DEFAULT_REDIS_PREFIX, DEFAULT_REDIS_TIMEOUT_MS, StoreError, redisStore, type RedisClientLike } from '../../src/stores/redis.ts';
import { unsignedBucket } from '../../src/stores/internal.ts';
import type { ClaimResult } from '../../src/stores/types.ts';
import { freePort } from '../support/redis-server.ts';
import { sleep, token } from '../support/stores.ts';
import {
  canStartRedis,
  CLIENT_KINDS,
  connectClient,
  connectIORedis,
  countRoundTrips,
  parseMonitorLine,
  deleteKeysUnder,
  keysUnder,
  sharedRedisUrl,
  startRedisServer,
  uniquePrefix,
  type NodeRedisClient,
  type RedisServer,
  type TestClient,
} from '../support/redis.ts';


/** Polls `check` every 25 ms until it holds, for at most `ms`. */
async function until(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('redisStore options', () => {
  // Never connected: option checks need no server.
  const client = new Redis({ lazyConnect: true });
  afterAll(() => client.disconnect());

  it('needs an options object with a client', () => {
    expect(() => redisStore(undefined as never)).toThrow(new TypeError('redisStore needs an options object: redisStore({ client })'));
    expect(() => redisStore({} as never)).toThrow(
      new TypeError('redisStore client must be a connected ioredis, redis (node-redis) or @upstash/redis client: undefined has neither evalsha() (ioredis, Upstash) nor evalSha() (node-redis)'),
    );
    expect(() => redisStore({ client: 'redis://127.0.0.1:6379' } as never)).toThrow(
      new TypeError('redisStore client must be a connected ioredis, redis (node-redis) or @upstash/redis client: string has neither evalsha() (ioredis, Upstash) nor evalSha() (node-redis)'),
    );
  });

  it('refuses a client that is neither ioredis nor node-redis, naming what it got', () => {
    expect(() => redisStore({ client: {} as never })).toThrow(
      new TypeError('redisStore client must be a connected ioredis, redis (node-redis) or @upstash/redis client: an object has neither evalsha() (ioredis, Upstash) nor evalSha() (node-redis)'),
    );
    expect(() => redisStore({ client: new Map() as never })).toThrow(
      new TypeError('redisStore client must be a connected ioredis, redis (node-redis) or @upstash/redis client: a Map has neither evalsha() (ioredis, Upstash) nor evalSha() (node-redis)'),
    );
    // evalsha without eval cannot fall back on NOSCRIPT.
    expect(() => redisStore({ client: { evalsha: async () => 0 } as never })).toThrow(TypeError);
  });

  it('takes every client it promises, by type (checked by tsc), and nothing else', () => {
    expectTypeOf<Redis>().toExtend<RedisClientLike>();
    expectTypeOf<Cluster>().toExtend<RedisClientLike>();
    expectTypeOf<NodeRedisClient>().toExtend<RedisClientLike>();
    expectTypeOf<ReturnType<typeof createCluster>>().toExtend<RedisClientLike>();
    expectTypeOf<{ get(key: string): Promise<string | null> }>().not.toExtend<RedisClientLike>();
    expect(redisStore({ client }).claim).toBeTypeOf('function');
  });

  it('checks prefix and timeoutMs', () => {
    expect(() => redisStore({ client, prefix: 5 as never })).toThrow(new TypeError('redisStore prefix must be a string'));
    // 2^31 ms and above: a runtime's timer would fire at once, failing every operation.
    for (const timeoutMs of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, '100' as never, 2 ** 31, 3e9]) {
      expect(() => redisStore({ client, timeoutMs })).toThrow(
        new RangeError('redisStore timeoutMs must be a positive number of milliseconds up to 2147483647 (default 2000)'),
      );
    }
    expect(() => redisStore({ client, timeoutMs: 2 ** 31 - 1 })).not.toThrow();
    expect(DEFAULT_REDIS_TIMEOUT_MS).toBe(2000);
    expect(() => redisStore({ client, prefix: '', timeoutMs: 1 })).not.toThrow();
  });

  it('checks unsignedMax', () => {
    for (const unsignedMax of [0, -1, 1.5, Number.NaN, 2 ** 31, '10' as never]) {
      expect(() => redisStore({ client, unsignedMax })).toThrow(new RangeError('redisStore unsignedMax must be a positive whole number of ids'));
    }
    expect(() => redisStore({ client, unsignedMax: 1 })).not.toThrow();
  });
});

describe.skipIf(sharedRedisUrl === null).each(CLIENT_KINDS)('redisStore via %s: keys', (kind) => {
  let client: TestClient;
  let admin: Redis;
  const prefix = uniquePrefix(`layout-${kind}`);

  beforeAll(async () => {
    client = await connectClient(kind, sharedRedisUrl!);
    admin = await connectIORedis(sharedRedisUrl!);
  });
  afterAll(async () => {
    await deleteKeysUnder(admin, prefix);
    await deleteKeysUnder(admin, `${DEFAULT_REDIS_PREFIX}${prefix}`);
    admin.disconnect();
    client.close();
  });

  it('holds lock:<token> for lockMs, then done for ttlMs, under the prefix', async () => {
    const store = redisStore({ client: client.client, prefix });
    const owner = token(await store.claim('default:msg_1', 10_000));
    const held = await keysUnder(admin, prefix);
    expect(Object.keys(held)).toEqual(['default:msg_1']);
    expect(held['default:msg_1']!.value).toBe(`lock:${owner}`);
    expect(held['default:msg_1']!.pttl).toBeGreaterThan(9_000);
    expect(held['default:msg_1']!.pttl).toBeLessThanOrEqual(10_000);

    expect(await store.complete('default:msg_1', owner, 3_600_000)).toBe(true);
    const done = await keysUnder(admin, prefix);
    expect(done['default:msg_1']!.value).toBe(`done:${owner}`);
    expect(done['default:msg_1']!.pttl).toBeGreaterThan(3_590_000);

    const other = token(await store.claim('default:msg_2', 10_000));
    expect(await store.release('default:msg_2', other)).toBe(true);
    expect(Object.keys(await keysUnder(admin, prefix))).toEqual(['default:msg_1']);
  });

  it('holds unsigned ids in hashes of at most 16, each field the SHA-1 of its key', async () => {
    const space = `${prefix}buckets:`;
    // 32 ids: two buckets of 16.
    const store = redisStore({ client: client.client, prefix: space, unsignedMax: 32 });
    const sha1 = (key: string) => createHash('sha1').update(key).digest('hex');
    const key = 'default:u:msg_1';
    const bucket = `${space}:u:${unsignedBucket(key, 2)}`;
    const owner = token(await store.claim(key, 10_000));
    const held = await admin.hget(bucket, sha1(key));
    expect(held).toMatch(new RegExp(`^lock:${owner}:\\d{13}$`));
    const until = Number(held!.slice(38));
    expect(until - Date.now()).toBeGreaterThan(8_000);
    expect(until - Date.now()).toBeLessThanOrEqual(10_500);
    expect(await admin.pttl(bucket)).toBeGreaterThan(9_000);
    expect(await store.extend(key, owner, 20_000)).toBe(true);
    expect(await store.complete(key, owner, 3_600_000)).toBe(true);
    expect(await admin.hget(bucket, sha1(key))).toMatch(new RegExp(`^done:${owner}:\\d{13}$`));
    expect(await admin.pttl(bucket)).toBeGreaterThan(3_590_000);
    expect(await store.complete(key, owner, 3_600_000)).toBe(true);
    expect(await store.claim(key, 10_000)).toEqual({ status: 'completed' });
    expect(await store.release(key, owner)).toBe(false);

    // 100 more ids, each completed: never more than two hashes of 16 fields, whatever arrives.
    for (let i = 0; i < 100; i++) {
      const other = `default:u:flood_${i}`;
      expect(await store.complete(other, token(await store.claim(other, 10_000)), 60_000)).toBe(true);
    }
    const buckets = Object.keys(await keysUnder(admin, space)).sort();
    expect(buckets).toEqual([':u:0', ':u:1']);
    for (const name of buckets) expect(await admin.hlen(`${space}${name}`)).toBe(16);
    // A released unsigned claim frees its field.
    const released = 'default:u:released';
    expect(await store.release(released, token(await store.claim(released, 10_000)))).toBe(true);
    expect(await admin.hexists(`${space}:u:${unsignedBucket(released, 2)}`, sha1(released))).toBe(0);
  });

  it(`uses the prefix '${DEFAULT_REDIS_PREFIX}' by default`, async () => {
    const store = redisStore({ client: client.client });
    const key = `${prefix}default-prefix`;
    const owner = token(await store.claim(key, 10_000));
    expect(await admin.get(`${DEFAULT_REDIS_PREFIX}${key}`)).toBe(`lock:${owner}`);
    expect(await store.release(key, owner)).toBe(true);
    expect(await admin.exists(`${DEFAULT_REDIS_PREFIX}${key}`)).toBe(0);
  });

  it('passes errors from Redis through (a key of another type is WRONGTYPE)', async () => {
    const store = redisStore({ client: client.client, prefix });
    await admin.hset(`${prefix}hash`, 'field', 'value');
    await expect(store.claim('hash', 10_000)).rejects.toThrow(/^WRONGTYPE/);
    expect(await admin.type(`${prefix}hash`)).toBe('hash');
  });
});

const privateRedis = canStartRedis('test/stores/redis.test.ts');

describe.skipIf(!privateRedis).each(CLIENT_KINDS)('redisStore via %s: round trips and outages', (kind) => {
  let server: RedisServer;
  let client: TestClient;
  let admin: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = await connectIORedis(server.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.close();
  });
  afterEach(() => client?.close());

  it('costs one round trip per operation: EVALSHA, plus EVAL once after NOSCRIPT', async () => {
    client = await connectClient(kind, server.url);
    const store = redisStore({ client: client.client, prefix: 'rt:' });
    await admin.script('FLUSH');

    const first = await countRoundTrips(server.url, client, async () => {
      token(await store.claim('msg_0', 10_000));
    });
    // The script cache was empty: EVALSHA answers NOSCRIPT, EVAL runs and caches the script.
    expect(first.commands).toEqual(['evalsha', 'eval']);

    const tokens: string[] = [];
    const claims = await countRoundTrips(server.url, client, async () => {
      for (let i = 1; i <= 20; i++) tokens.push(token(await store.claim(`msg_${i}`, 10_000)));
    });
    expect(claims.count / 20).toBe(1);
    expect(claims.commands).toEqual(Array(20).fill('evalsha'));

    const settles = await countRoundTrips(server.url, client, async () => {
      for (let i = 0; i < 10; i++) expect(await store.complete(`msg_${i + 1}`, tokens[i]!, 60_000)).toBe(true);
      for (let i = 10; i < 20; i++) expect(await store.release(`msg_${i + 1}`, tokens[i]!)).toBe(true);
    });
    // complete's and release's scripts were loaded by their own first EVAL.
    expect(settles.commands).toEqual(['evalsha', 'eval', ...Array(9).fill('evalsha'), 'evalsha', 'eval', ...Array(9).fill('evalsha')]);
  });

  it('rejects with reason timeout when Redis does not answer within timeoutMs', async () => {
    client = await connectClient(kind, server.url);
    const store = redisStore({ client: client.client, prefix: 'slow:', timeoutMs: 200 });
    token(await store.claim('warm', 10_000));
    // Frozen until the rejection has arrived: it can only come from the store's own timeout.
    server.freeze();
    let error: unknown;
    let elapsed: number;
    try {
      const started = Date.now();
      error = await store.claim('msg_1', 10_000).then(
        () => undefined,
        (e: unknown) => e,
      );
      elapsed = Date.now() - started;
    } finally {
      server.thaw();
    }
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ name: 'StoreError', store: 'redis', reason: 'timeout', message: 'redis store: no answer to claim within 200 ms' });
    expect(elapsed).toBeGreaterThanOrEqual(190);

    // As documented: the command still ran when Redis answered again. Its claim holds the id
    // until the lock runs out, and nobody owns it.
    await until(async () => (await admin.get('slow:msg_1')) !== null, 3000, 'the late claim');
    expect(await admin.get('slow:msg_1')).toMatch(/^lock:[0-9a-f]{32}$/);
    expect((await store.claim('msg_1', 10_000)).status).toBe('processing');
  });

  it('rejects at once with reason not_ready while the client reconnects, queues nothing, and recovers', async () => {
    client = await connectClient(kind, server.url);
    const store = redisStore({ client: client.client, prefix: 'outage:', timeoutMs: 1000 });
    token(await store.claim('before', 10_000));

    await server.stop();
    const ready = () => (kind === 'ioredis' ? (client.client as Redis).status === 'ready' : (client.client as { isReady: boolean }).isReady);
    await until(() => !ready(), 3000, 'the client to notice the outage');

    // At once: settled before the event loop turns (no timer, no socket could have answered).
    const claimed = store.claim('during', 10_000).then(
      () => undefined,
      (e: unknown) => e,
    );
    const turned = new Promise<'turned'>((resolve) => setImmediate(() => resolve('turned')));
    const error = await Promise.race([claimed, turned]);
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ reason: 'not_ready', message: 'redis store: the client is reconnecting to Redis, so claim was not sent' });
    await expect(store.complete('before', 'token', 1000)).rejects.toMatchObject({ reason: 'not_ready' });
    await expect(store.release('before', 'token')).rejects.toMatchObject({ reason: 'not_ready' });

    await server.start();
    let recovered: ClaimResult | undefined;
    await until(
      async () => {
        recovered = await store.claim('after', 10_000).catch(() => undefined);
        return recovered !== undefined;
      },
      5000,
      'the store to work again',
    );
    expect(recovered?.status).toBe('acquired');
    // The refused claim was never queued, so it did not run late: only 'after' exists
    // (the restarted server starts empty).
    expect(await admin.keys('outage:*')).toEqual(['outage:after']);
  });

  it('a client that has never connected waits in its queue at most timeoutMs', async () => {
    const deadPort = await freePort();
    if (kind === 'ioredis') {
      // Default settings: the command waits in the offline queue while ioredis keeps retrying.
      const never = new Redis({ host: '127.0.0.1', port: deadPort });
      never.on('error', () => {});
      try {
        const store = redisStore({ client: never, timeoutMs: 150 });
        await expect(store.claim('msg_1', 10_000)).rejects.toMatchObject({ name: 'StoreError', reason: 'timeout' });
      } finally {
        never.disconnect();
      }
    } else {
      // node-redis refuses commands before connect() at once.
      const { createClient } = await import('redis');
      const never = createClient({ url: `redis://127.0.0.1:${deadPort}` });
      const store = redisStore({ client: never, timeoutMs: 150 });
      await expect(store.claim('msg_1', 10_000)).rejects.toThrow('The client is closed');
    }
  });
});

describe('the MONITOR reader the round-trip counts use', () => {
  it('reads the source and every quoted argument, escapes included', () => {
    expect(parseMonitorLine('+1795502099.777970 [0 127.0.0.1:45410] "evalsha" "abc" "1" "p:k\\"q\\\\r" "\\x00\\xffz" "a\\r\\nb"')).toEqual({
      args: ['evalsha', 'abc', '1', 'p:k"q\\r', '\u0000\u00ffz', 'a\r\nb'],
      source: '127.0.0.1:45410',
    });
    expect(parseMonitorLine('+1795502099.777971 [0 lua] "GET" "k"')).toEqual({ args: ['GET', 'k'], source: 'lua' });
    expect(parseMonitorLine('+OK')).toBeUndefined();
    expect(parseMonitorLine('+1.0 [0 x] "unterminated')).toBeUndefined();
  });
});

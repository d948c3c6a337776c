/**
 * The store contract (issue 3): the same suite against the memory store, the Redis store through
 * ioredis and through node-redis (a real redis-server), and the Postgres store through pg and
 * through postgres.js (a real PostgreSQL).
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import { openBackend, POSTGRES_STORE_KINDS, sleep, STORE_KINDS, token, type StoreBackend } from '../support/stores.ts';

const NAMES = {
  memory: 'memoryStore',
  ioredis: 'redisStore via ioredis',
  'node-redis': 'redisStore via node-redis',
  pg: 'postgresStore via pg',
  'postgres.js': 'postgresStore via postgres.js',
} as const;

describe.each([...STORE_KINDS, ...POSTGRES_STORE_KINDS].map((target) => ({ ...target, name: NAMES[target.kind] })))('store contract: $name', ({ kind, available }) => {
  let backend: StoreBackend;
  let store: IdempotencyStore;
  let spaceCount = 0;
  /** A fresh, empty space for each test. */
  const fresh = () => backend.open(`space${++spaceCount}`);

  beforeAll(async () => {
    if (available) backend = await openBackend(kind);
  });
  afterAll(async () => {
    await backend?.close();
  });

  const test = it.skipIf(!available);

  test('claim: acquired with a token, then processing with the time left, then completed', async () => {
    store = fresh();
    const first = await store.claim('msg_1', 10_000);
    expect(first).toEqual({ status: 'acquired', token: expect.stringMatching(/^[0-9a-f]{32}$/) });

    const second = await store.claim('msg_1', 10_000);
    expect(second.status).toBe('processing');
    const left = (second as { retryAfterMs?: number }).retryAfterMs;
    expect(left).toBeGreaterThan(9_000);
    expect(left).toBeLessThanOrEqual(10_000);

    expect(await store.complete('msg_1', token(first), 60_000)).toBe(true);
    expect(await store.claim('msg_1', 10_000)).toEqual({ status: 'completed' });
    // Completed stays completed: completing again with its own token answers true (the contract:
    // a completion applied late is not a takeover), but the token can no longer release it.
    expect(await store.complete('msg_1', token(first), 60_000)).toBe(true);
    expect(await store.release('msg_1', token(first))).toBe(false);
    expect(await store.claim('msg_1', 10_000)).toEqual({ status: 'completed' });
  });

  test('release frees the key for the next claim, with a new token', async () => {
    store = fresh();
    const first = token(await store.claim('msg_1', 10_000));
    expect(await store.release('msg_1', first)).toBe(true);
    const second = token(await store.claim('msg_1', 10_000));
    expect(second).not.toBe(first);
    expect(await store.release('msg_1', first)).toBe(false);
    expect((await store.claim('msg_1', 10_000)).status).toBe('processing');
  });

  test('ids are independent', async () => {
    store = fresh();
    token(await store.claim('msg_a', 10_000));
    expect((await store.claim('msg_b', 10_000)).status).toBe('acquired');
    expect((await store.claim('msg_a', 10_000)).status).toBe('processing');
  });

  test('a lock expires after lockMs and the next claim takes it over', async () => {
    store = fresh();
    const stale = token(await store.claim('msg_1', 200));
    await sleep(300);
    const owner = token(await store.claim('msg_1', 10_000));
    expect(owner).not.toBe(stale);

    // The stale owner can neither complete nor release the new owner's claim...
    expect(await store.complete('msg_1', stale, 60_000)).toBe(false);
    expect(await store.release('msg_1', stale)).toBe(false);
    // ...and changed nothing: the new owner still holds it, and completes it.
    expect((await store.claim('msg_1', 10_000)).status).toBe('processing');
    expect(await store.complete('msg_1', owner, 60_000)).toBe(true);
    expect(await store.claim('msg_1', 10_000)).toEqual({ status: 'completed' });
  });

  test('a stale owner cannot complete or release after its lock expired and nobody took over', async () => {
    store = fresh();
    const stale = token(await store.claim('msg_1', 200));
    await sleep(300);
    expect(await store.complete('msg_1', stale, 60_000)).toBe(false);
    expect(await store.release('msg_1', stale)).toBe(false);
    expect((await store.claim('msg_1', 10_000)).status).toBe('acquired');
  });

  test('a wrong token changes nothing, on a held key and on a free one', async () => {
    store = fresh();
    const owner = token(await store.claim('msg_1', 10_000));
    expect(await store.complete('msg_1', 'not-the-token', 60_000)).toBe(false);
    expect(await store.release('msg_1', 'not-the-token')).toBe(false);
    expect((await store.claim('msg_1', 10_000)).status).toBe('processing');
    expect(await store.complete('msg_1', owner, 60_000)).toBe(true);

    // A token that looks like the store's own markers still owns nothing.
    expect(await store.release('msg_1', 'done')).toBe(false);
    expect(await store.claim('msg_1', 10_000)).toEqual({ status: 'completed' });

    expect(await store.complete('msg_free', owner, 60_000)).toBe(false);
    expect(await store.release('msg_free', owner)).toBe(false);
    expect((await store.claim('msg_free', 10_000)).status).toBe('acquired');
  });

  test('a completed id is forgotten after ttlMs', async () => {
    store = fresh();
    const owner = token(await store.claim('msg_1', 10_000));
    expect(await store.complete('msg_1', owner, 500)).toBe(true);
    expect(await store.claim('msg_1', 10_000)).toEqual({ status: 'completed' });
    await sleep(650);
    expect((await store.claim('msg_1', 10_000)).status).toBe('acquired');
  });

  test('concurrent claims of one id: exactly one is acquired', async () => {
    store = fresh();
    const results = await Promise.all(Array.from({ length: 25 }, () => store.claim('msg_1', 10_000)));
    expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'processing')).toHaveLength(24);
  });

  test('separate spaces (prefixes) keep the same id apart; the same space shares it', async () => {
    const space = `shared${++spaceCount}`;
    const a = backend.open(space);
    const sameSpace = backend.open(space);
    const other = fresh();
    const owner = token(await a.claim('msg_1', 10_000));
    expect((await sameSpace.claim('msg_1', 10_000)).status).toBe('processing');
    expect((await other.claim('msg_1', 10_000)).status).toBe('acquired');
    expect(await sameSpace.complete('msg_1', owner, 60_000)).toBe(true);
    expect(await a.claim('msg_1', 10_000)).toEqual({ status: 'completed' });
    expect((await other.claim('msg_1', 10_000)).status).toBe('processing');
  });

  test('fractional milliseconds are accepted', async () => {
    store = fresh();
    const owner = token(await store.claim('msg_1', 5000.5));
    expect(await store.complete('msg_1', owner, 60_000.25)).toBe(true);
    expect(await store.claim('msg_1', 10_000)).toEqual({ status: 'completed' });
  });

  test('bad arguments reject with TypeError or RangeError and write nothing', async () => {
    store = fresh();
    await expect(store.claim('', 1000)).rejects.toThrow(new TypeError('an idempotency key must be a non-empty string'));
    await expect(store.claim(42 as unknown as string, 1000)).rejects.toThrow(TypeError);
    for (const ms of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '1000' as unknown as number]) {
      await expect(store.claim('msg_1', ms)).rejects.toThrow(new RangeError('lockMs must be a positive, finite number of milliseconds'));
      await expect(store.complete('msg_1', 'token', ms)).rejects.toThrow(new RangeError('ttlMs must be a positive, finite number of milliseconds'));
    }
    await expect(store.complete('msg_1', '', 1000)).rejects.toThrow(new TypeError('an ownership token must be a non-empty string'));
    await expect(store.release('msg_1', undefined as unknown as string)).rejects.toThrow(
      new TypeError('an ownership token must be a non-empty string'),
    );
    await expect(store.release('', 'token')).rejects.toThrow(new TypeError('an idempotency key must be a non-empty string'));
    expect((await store.claim('msg_1', 10_000)).status).toBe('acquired');
  });
});

/**
 * Stores of every kind over real backends, for the store contract and the receiver tests: the
 * memory store, the Redis store through ioredis and through node-redis, and the Postgres store
 * through pg and through postgres.js.
 */

import type { Redis } from 'ioredis';
import { memoryStore } from '../../src/stores/memory.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { redisStore, type RedisStoreOptions } from '../../src/stores/redis.ts';
import type { ClaimResult, IdempotencyStore } from '../../src/stores/types.ts';
import { connectPostgres, sharedPostgresUrl, uniqueTable, type PostgresKind } from './postgres.ts';
import { connectClient, connectIORedis, deleteKeysUnder, keysUnder, sharedRedisUrl, uniquePrefix, type ClientKind, type TestClient } from './redis.ts';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The token of an acquired claim; anything else fails the test. */
export function token(result: ClaimResult): string {
  if (result.status !== 'acquired') throw new Error(`expected acquired, got ${result.status}`);
  return result.token;
}

export type StoreKind = 'memory' | ClientKind | PostgresKind;

/** The store kinds a test file can run against here (Redis ones need a server). */
export const STORE_KINDS: { kind: StoreKind; available: boolean }[] = [
  { kind: 'memory', available: true },
  { kind: 'ioredis', available: sharedRedisUrl !== null },
  { kind: 'node-redis', available: sharedRedisUrl !== null },
];

/** The Postgres store kinds (they need a server), for the store contract. */
export const POSTGRES_STORE_KINDS: { kind: StoreKind; available: boolean }[] = [
  { kind: 'pg', available: sharedPostgresUrl !== null },
  { kind: 'postgres.js', available: sharedPostgresUrl !== null },
];

/** Stores of one kind; for Redis, on one connection and a prefix of their own. */
export interface StoreBackend {
  readonly kind: StoreKind;
  /** The Redis connection the stores use (undefined for memory). */
  readonly client: TestClient | undefined;
  /** A store; two calls with the same `space` share state (two app instances, one Redis). */
  open(space: string, options?: Omit<RedisStoreOptions, 'client' | 'prefix'>): IdempotencyStore;
  /** The Redis key prefix of `space` (undefined for memory), for a second client to share it. */
  prefix(space: string): string | undefined;
  /** The Redis keys under `space` (undefined for memory). */
  keys(space: string): Promise<string[] | undefined>;
  close(): Promise<void>;
}

export async function openBackend(kind: StoreKind, url = sharedRedisUrl): Promise<StoreBackend> {
  if (kind === 'memory') {
    const spaces = new Map<string, IdempotencyStore>();
    return {
      kind,
      client: undefined,
      open(space) {
        let store = spaces.get(space);
        if (!store) spaces.set(space, (store = memoryStore()));
        return store;
      },
      prefix: () => undefined,
      keys: async () => undefined,
      close: async () => {},
    };
  }
  if (kind === 'pg' || kind === 'postgres.js') return openPostgresBackend(kind);
  if (url === null) throw new Error('no Redis for this test');
  const client: TestClient = await connectClient(kind, url);
  const admin: Redis = await connectIORedis(url);
  const base = uniquePrefix(`receiver-${kind}`);
  return {
    kind,
    client,
    open: (space, options) => redisStore({ ...options, client: client.client, prefix: `${base}${space}:` }),
    prefix: (space) => `${base}${space}:`,
    keys: async (space) => Object.keys(await keysUnder(admin, `${base}${space}:`)).sort(),
    async close() {
      await deleteKeysUnder(admin, base);
      admin.disconnect();
      client.close();
    },
  };
}


/** Postgres stores: one table per space, created on first use (`open` is synchronous). */
async function openPostgresBackend(kind: PostgresKind): Promise<StoreBackend> {
  if (sharedPostgresUrl === null) throw new Error('no PostgreSQL for this test');
  const connection = connectPostgres(kind, sharedPostgresUrl);
  const base = uniqueTable(kind);
  const spaces = new Map<string, IdempotencyStore>();
  const tables: string[] = [];
  return {
    kind,
    client: undefined,
    open(space, options) {
      let store = spaces.get(space);
      if (store) return store;
      const table = `${base}_${space}`.toLowerCase();
      tables.push(table);
      const real = postgresStore({ ...options, client: connection.client, table });
      const ready = real.setup();
      // Every operation waits for the table; the store itself is the real one.
      store = {
        claim: async (key, lockMs) => (await ready, real.claim(key, lockMs)),
        complete: async (key, token, ttlMs) => (await ready, real.complete(key, token, ttlMs)),
        release: async (key, token) => (await ready, real.release(key, token)),
        extend: async (key, token, lockMs) => (await ready, real.extend(key, token, lockMs)),
        ping: () => real.ping(),
      };
      spaces.set(space, store);
      return store;
    },
    prefix: () => undefined,
    keys: async () => undefined,
    async close() {
      for (const table of tables) await connection.query(`DROP TABLE IF EXISTS "${table}"`);
      await connection.close();
    },
  };
}

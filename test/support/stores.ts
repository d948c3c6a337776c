/**
 * Stores of every kind over real backends, for the store contract and the receiver tests: the
 * memory store, the Redis store through ioredis and through node-redis, and the Postgres store
 * through pg and through postgres.js.
 */

import type { Redis } from 'ioredis';
import { memoryStore } from '../../src/stores/memory/index.ts';
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

/**
 * Stores of one kind; for Redis, on one connection and a prefix of their own; for Postgres, on one
 * pool and a table of their own.
 */
export interface StoreBackend {
  readonly kind: StoreKind;
  /** The Redis connection the stores use (undefined for memory). */
  readonly client: TestClient | undefined;
  /**
   * A store; two calls with the same `space` share state (two app instances, one Redis). For
   * Redis and Postgres every call makes a new store object on the shared backend, as another app
   * instance would; the memory store has no backend to share, so a space is one store.
   */
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

/**
 * Postgres stores: one table per space, created on first use (`open` is synchronous); each `open`
 * is a new store on that table, as another app instance would make.
 */
async function openPostgresBackend(kind: PostgresKind): Promise<StoreBackend> {
  if (sharedPostgresUrl === null) throw new Error('no PostgreSQL for this test');
  const connection = connectPostgres(kind, sharedPostgresUrl);
  const base = uniqueTable(kind);
  /** Each table's setup, run once. */
  const setups = new Map<string, Promise<void>>();
  const tables: string[] = [];
  return {
    kind,
    client: undefined,
    open(space, options) {
      const table = `${base}_${space}`.toLowerCase();
      let ready = setups.get(table);
      if (ready === undefined) {
        tables.push(table);
        setups.set(table, (ready = postgresStore({ client: connection.client, table }).setup()));
      }
      const real = postgresStore({ ...options, client: connection.client, table });
      const made = ready;
      // Every operation waits for the table; the store itself is the real one.
      return {
        name: real.name,
        claim: async (key, lockMs) => (await made, real.claim(key, lockMs)),
        complete: async (key, token, ttlMs) => (await made, real.complete(key, token, ttlMs)),
        release: async (key, token) => (await made, real.release(key, token)),
        extend: async (key, token, lockMs) => (await made, real.extend(key, token, lockMs)),
        ordering: {
          claimOrdered: async (key, lockMs, ttlMs, order) => (await made, real.ordering.claimOrdered(key, lockMs, ttlMs, order)),
          completeOrdered: async (key, token, ttlMs, order) => (await made, real.ordering.completeOrdered(key, token, ttlMs, order)),
          releaseOrdered: async (key, token, order) => (await made, real.ordering.releaseOrdered(key, token, order)),
          extendOrdered: async (key, token, lockMs, order) => (await made, real.ordering.extendOrdered(key, token, lockMs, order)),
          forgetVersion: async (entity) => (await made, real.ordering.forgetVersion(entity)),
        },
        ping: () => real.ping(),
      };
    },
    prefix: () => undefined,
    keys: async () => undefined,
    async close() {
      for (const table of tables) await connection.query(`DROP TABLE IF EXISTS "${table}"`);
      await connection.close();
    },
  };
}

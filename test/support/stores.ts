/**
 * Stores of every kind over real backends, for the store contract and the receiver tests: the
 * memory store, and the Redis store through ioredis and through node-redis.
 */

import type { Redis } from 'ioredis';
import { memoryStore } from '../../src/stores/memory.ts';
import { redisStore, type RedisStoreOptions } from '../../src/stores/redis.ts';
import type { ClaimResult, IdempotencyStore } from '../../src/stores/types.ts';
import { connectClient, connectIORedis, deleteKeysUnder, keysUnder, sharedRedisUrl, uniquePrefix, type ClientKind, type TestClient } from './redis.ts';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The token of an acquired claim; anything else fails the test. */
export function token(result: ClaimResult): string {
  if (result.status !== 'acquired') throw new Error(`expected acquired, got ${result.status}`);
  return result.token;
}

export type StoreKind = 'memory' | ClientKind;

/** The store kinds a test file can run against here (Redis ones need a server). */
export const STORE_KINDS: { kind: StoreKind; available: boolean }[] = [
  { kind: 'memory', available: true },
  { kind: 'ioredis', available: sharedRedisUrl !== null },
  { kind: 'node-redis', available: sharedRedisUrl !== null },
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


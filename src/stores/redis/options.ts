/** The Redis store's options, its type, and its defaults. */

import type { IdempotencyStore, OrderingOperations } from '../types.ts';
import type { RedisClientLike } from './client.ts';

/**
 * Options of {@link redisStore}.
 *
 * @example
 * ```ts
 * import type { RedisStoreOptions } from 'webhook-receiver/redis';
 * const options: RedisStoreOptions = { client: redis, prefix: 'myapp:webhooks:', timeoutMs: 1000 };
 * ```
 */
export interface RedisStoreOptions {
  /**
   * A client the app created and connected (`ioredis` or `redis`), or an `@upstash/redis` client
   * (HTTP, nothing to connect). The store never connects, configures or closes it. See {@link redisStore} for settings that make outages fail fast.
   */
  client: RedisClientLike;
  /** Put before every key, so several apps can share one Redis. Default `'webhook-receiver:'`. */
  prefix?: string;
  /**
   * How long one operation may take before it rejects (the receiver then answers 503
   * `STORE_UNAVAILABLE`). Clients queue commands while disconnected, which would otherwise hold
   * a request forever. Default 2000.
   */
  timeoutMs?: number;
  /**
   * The unsigned budget: how many unsigned ids the store holds at most, in hashes of 16 (see
   * {@link redisStore}). About 130 bytes of Redis memory an id, whatever its length (a field is the
   * SHA-1 of the key; measured on Redis 7.0 with the default prefix): 1.3 MB at the default. Leave
   * that room beside the app's data under `maxmemory`. Default 10 000
   * ({@link DEFAULT_UNSIGNED_MAX}). Changing it moves unsigned ids to other hashes: their
   * deduplication starts again.
   */
  unsignedMax?: number;
}

/**
 * The Redis store: {@link IdempotencyStore} with lease renewal and a readiness check.
 *
 * @example
 * ```ts
 * import { redisStore, type RedisStore } from 'webhook-receiver/redis';
 * const store: RedisStore = redisStore({ client: redis });
 * await store.ping();
 * ```
 */
export interface RedisStore extends IdempotencyStore {
  /** The ordering operations: this store has all five. */
  readonly ordering: OrderingOperations;
  extend(key: string, token: string, lockMs: number): Promise<boolean>;
  ping(): Promise<void>;
}

/**
 * `'webhook-receiver:'`: the default key prefix of {@link redisStore}. With the receiver's
 * default namespace, a webhook's key is `webhook-receiver:default:<webhook-id>`.
 *
 * @example
 * ```ts
 * import { DEFAULT_REDIS_PREFIX } from 'webhook-receiver/redis';
 * const value = await redis.get(`${DEFAULT_REDIS_PREFIX}default:s:${webhookId}`); // 'done:…', 'lock:…' or null
 * ```
 */
export const DEFAULT_REDIS_PREFIX = 'webhook-receiver:';

/**
 * 2000 ms: the default per-operation timeout of {@link redisStore}.
 *
 * @example
 * ```ts
 * import { DEFAULT_REDIS_TIMEOUT_MS, redisStore } from 'webhook-receiver/redis';
 * const store = redisStore({ client: redis, timeoutMs: DEFAULT_REDIS_TIMEOUT_MS / 2 });
 * ```
 */
export const DEFAULT_REDIS_TIMEOUT_MS = 2000;

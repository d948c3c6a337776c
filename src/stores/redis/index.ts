/** What `webhook-receiver/redis` exports, gathered from the folder's files. */

export { DEFAULT_UNSIGNED_MAX, StoreError, type StoreErrorReason } from '../types.ts';
export type { IORedisClientLike, NodeRedisClientLike, RedisClientLike, UpstashRedisClientLike } from './client.ts';
export { DEFAULT_REDIS_PREFIX, DEFAULT_REDIS_TIMEOUT_MS, type RedisStore, type RedisStoreOptions } from './options.ts';
export { redisStore } from './store.ts';

/**
 * The Redis clients the store accepts, by shape: `ioredis`, `redis` (node-redis) and
 * `@upstash/redis`. Declared here so that neither the package nor its types need any installed.
 */

/**
 * The part of an `ioredis` client (`Redis` or `Cluster`, v5 and later) that {@link redisStore}
 * uses. Declared here so that neither the package nor its types need `ioredis` installed.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import type { IORedisClientLike } from 'webhook-receiver/redis';
 * const client: IORedisClientLike = new Redis(process.env.REDIS_URL!).on('error', (error) => console.error(`redis: ${error.message}`));
 * ```
 */
export interface IORedisClientLike {
  /** Runs a cached script by its SHA-1: the store's every operation. */
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** Runs a script and caches it: sent when the server answers `NOSCRIPT`. */
  eval(script: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** Used by `receiver.ping()` for readiness checks, when the client has it. */
  ping?(): Promise<unknown>;
  /** `'ready'` while connected; read to fail fast instead of queueing during an outage. */
  readonly status?: string;
}

/**
 * The part of a `redis` (node-redis v4 and later) client or cluster that {@link redisStore}
 * uses. Declared here so that neither the package nor its types need `redis` installed.
 *
 * @example
 * ```ts
 * import { createClient } from 'redis';
 * import type { NodeRedisClientLike } from 'webhook-receiver/redis';
 * const client: NodeRedisClientLike = await createClient({ url: process.env.REDIS_URL })
 *   .on('error', (error: Error) => console.error(`redis: ${error.message}`))
 *   .connect();
 * ```
 */
export interface NodeRedisClientLike {
  /** Runs a cached script by its SHA-1: the store's every operation. */
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** Runs a script and caches it: sent when the server answers `NOSCRIPT`. */
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** Used by `receiver.ping()` for readiness checks, when the client has it. */
  ping?(): Promise<unknown>;
  /** `true` while connected; read to fail fast instead of queueing during an outage. */
  readonly isReady?: boolean;
}

/**
 * The part of an `@upstash/redis` client (`Redis`, over HTTP, v1 and later) that
 * {@link redisStore} uses. Declared here so that neither the package nor its types need
 * `@upstash/redis` installed.
 *
 * @example
 * ```ts
 * import { Redis } from '@upstash/redis';
 * import type { UpstashRedisClientLike } from 'webhook-receiver/redis';
 * const client: UpstashRedisClientLike = Redis.fromEnv();
 * ```
 */
export interface UpstashRedisClientLike {
  /** Runs a cached script by its SHA-1: the store's every operation. */
  evalsha(sha1: string, keys: string[], args: string[]): Promise<unknown>;
  /** Runs a script and caches it: sent when the server answers `NOSCRIPT`. */
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  /** Not used, only read: it tells an Upstash client from an ioredis one (both have `evalsha`). */
  createScript(script: string): unknown;
  /** Used by `receiver.ping()` for readiness checks. */
  ping?(): Promise<unknown>;
}

/**
 * A connected `ioredis`, `redis` (node-redis) or `@upstash/redis` client, told apart by shape:
 * `evalSha` is node-redis, `evalsha` with `createScript` is Upstash, `evalsha` alone ioredis.
 *
 * @example
 * ```ts
 * import { createClient } from 'redis';
 * import type { RedisClientLike } from 'webhook-receiver/redis';
 * const client: RedisClientLike = await createClient({ url: process.env.REDIS_URL })
 *   .on('error', (error: Error) => console.error(`redis: ${error.message}`))
 *   .connect();
 * ```
 */
export type RedisClientLike = IORedisClientLike | NodeRedisClientLike | UpstashRedisClientLike;

/**
 * The Redis idempotency store: `webhook-receiver/redis`.
 *
 * Each operation is one Lua script on one key, sent with EVALSHA (EVAL when the server answers
 * NOSCRIPT, which also caches the script): atomic, one round trip, and Redis Cluster and Valkey
 * work because a script touches only the key it declares. The client is the
 * user's: `ioredis` and `redis` (node-redis) are told apart by shape, and neither is imported.
 *
 * What a key holds: `lock:<token>` while a handler runs (expiring after `lockMs`, renewed by
 * `extend`), then `done:<token>` (expiring after `ttlMs`). The completed record keeps its token so
 * a completion that Redis applied late (after the client timed out) is recognised as this
 * token's own when it is retried, rather than reported as a takeover.
 *
 * Unsigned ids live in a fixed set of hashes, `<prefix>:u:<bucket>`, the bucket a hash
 * of the whole key, each holding at most 16 ids (`unsignedMax` in all): unsigned traffic can never
 * hold more, whatever it sends, so it cannot fill Redis (under `noeviction`, an out-of-memory
 * Redis refuses signed writes too) or push signed ids out (under `volatile-*`). A field is the
 * SHA-1 of its key, so ids of any length cost the same. A full bucket makes room by forgetting the
 * unsigned completion that expires first; full of live claims, it refuses (`unsigned_limit`).
 * Each script still touches one key.
 *
 * Ordering keeps an id under the same key with or without it; the entity's version and lock live
 * under the entity's hash tag, in another slot, so an ordered operation is two scripts: the id's,
 * then the entity's (see the ordering scripts below).
 *
 * @module webhook-receiver/redis
 */

import {
  checkClaim,
  checkClaimOrdered,
  checkComplete,
  checkEntity,
  checkExtend,
  checkOrder,
  checkRelease,
  checkTimeoutOption,
  checkUnsignedMax,
  describeValue,
  isUnsignedKey,
  newToken,
  toHex,
  unsignedBucket,
  unsignedBuckets,
  unsignedLimitError,
  wholeMs,
  withTimeout,
} from './internal.ts';
import { StoreError, type ClaimResult, type EntityOrder, type IdempotencyStore, type OrderedClaimResult, type OrderingOperations } from './types.ts';

export { DEFAULT_UNSIGNED_MAX, StoreError, type StoreErrorReason } from './types.ts';

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
export interface RedisStore extends Omit<IdempotencyStore, keyof OrderingOperations>, OrderingOperations {
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

// Claim: take a free key for ARGV[2] ms, else say why not. Replies: 0 acquired, -1 completed,
// n > 0 held for n more ms, -2 held without an expiry (never written by this store).
const CLAIM = `if redis.call('SET', KEYS[1], 'lock:' .. ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
if string.sub(redis.call('GET', KEYS[1]), 1, 4) == 'done' then return -1 end
local left = redis.call('PTTL', KEYS[1])
if left > 0 then return left end
return -2`;

// Complete: while the token still owns the key, mark it done (keeping the token) for ARGV[2] ms;
// a key this token already completed answers 1 again.
const COMPLETE = `local value = redis.call('GET', KEYS[1])
if value == 'done:' .. ARGV[1] then return 1 end
if value ~= 'lock:' .. ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'done:' .. ARGV[1], 'PX', ARGV[2])
return 1`;

// Release: only while the token still owns the key, free it for the sender's retry.
const RELEASE = `if redis.call('GET', KEYS[1]) ~= 'lock:' .. ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`;

// Extend: while the token still owns the key, hold it for ARGV[2] ms from now.
const EXTEND = `if redis.call('GET', KEYS[1]) ~= 'lock:' .. ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

// Unsigned ids: one hash a bucket, a field per id (the SHA-1 of its whole key, ARGV[1]) holding
// `lock:<token>:<until>` or `done:<token>:<until>` (a token is 32 hex digits, so the time, epoch
// ms on the server's clock, starts at character 39). Fields have no expiry of their own: a field
// past its time counts as absent, and the hash expires once its last field has. ARGV[2] is the
// token, ARGV[3] a duration in ms.
const UNSIGNED_ENTRY = `local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local id = redis.sha1hex(ARGV[1])
local value = redis.call('HGET', KEYS[1], id)
local function untilOf(entry) return tonumber(string.sub(entry, 39)) end
local function owned(state) return value and string.sub(value, 1, 37) == state .. ':' .. ARGV[2] and untilOf(value) > now end
local function hold(state, ms)
  redis.call('HSET', KEYS[1], id, state .. ':' .. ARGV[2] .. ':' .. string.format('%.0f', now + ms))
  if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ms) end
end
`;

// Claim, as CLAIM, in the id's bucket of at most ARGV[4] ids. A full bucket makes room by deleting
// expired entries, else the completion that expires first (that unsigned id is forgotten early);
// full of live claims, it refuses: -3.
const UNSIGNED_CLAIM = `${UNSIGNED_ENTRY}
if value and untilOf(value) > now then
  if string.sub(value, 1, 4) == 'done' then return -1 end
  return untilOf(value) - now
end
if not value and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  local entries = redis.call('HGETALL', KEYS[1])
  local freed, oldest, oldestUntil = false, nil, nil
  for i = 1, #entries, 2 do
    local entryUntil = untilOf(entries[i + 1])
    if entryUntil <= now then
      redis.call('HDEL', KEYS[1], entries[i])
      freed = true
    elseif string.sub(entries[i + 1], 1, 4) == 'done' and (oldestUntil == nil or entryUntil < oldestUntil) then
      oldest, oldestUntil = entries[i], entryUntil
    end
  end
  if not freed then
    if oldest == nil then return -3 end
    redis.call('HDEL', KEYS[1], oldest)
  end
end
hold('lock', tonumber(ARGV[3]))
return 0`;

const UNSIGNED_COMPLETE = `${UNSIGNED_ENTRY}
if owned('done') then return 1 end
if not owned('lock') then return 0 end
hold('done', tonumber(ARGV[3]))
return 1`;

const UNSIGNED_RELEASE = `${UNSIGNED_ENTRY}
if not owned('lock') then return 0 end
redis.call('HDEL', KEYS[1], id)
return 1`;

const UNSIGNED_EXTEND = `${UNSIGNED_ENTRY}
if not owned('lock') then return 0 end
hold('lock', tonumber(ARGV[3]))
return 1`;

// Ordering. An ordered delivery's id is the same key as an unordered one's (`${prefix}${key}`),
// claimed, completed, released and extended by the scripts above: an id is one id whether
// ordering is on, off, or keyed otherwise, so turning ordering on (or changing its key, or a
// fleet of both during a deploy) never runs an id that was already processed. The entity's
// version `${prefix}{${entity}}` and lock `${prefix}{${entity}}:lock` share the entity's hash tag
// and change in one script; the id's key is in another slot, so in Redis Cluster the two cannot
// change together: the id's script runs first and is the only authority on the id, and the
// entity's script runs while the id is held (an ordered claim is two round trips).
//
// Versions are fixed-width strings of ASCII digits after one letter, so Lua's string comparison
// orders them as their values, whatever the server's collation; they are never read as numbers (a
// double would round a bigint past 2^53).
//
// KEYS: the id under the entity's tag (`${prefix}{${entity}}${key}`, where releases before this
// one kept ordered ids: read only, so that an id completed there is still a duplicate until its
// TTL has run out), the entity's version, the entity's lock.
//
// Claim, run once the id is held: ARGV token, lockMs, version, exclusive ('1' or '0'). Replies
// {kind, ms}: 0 go on (exclusive: the entity's lock is now this token's), 1 the id was completed
// under the entity's tag (ms: for how much longer), 2 it is held there (ms left, 0 unknown), 3
// stale, 4 busy for ms (the entity's lock; 0 unknown).
const ENTITY_CLAIM = `local tagged = redis.call('GET', KEYS[1])
if tagged then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then left = 0 end
  if string.sub(tagged, 1, 4) == 'done' then return {1, left} end
  return {2, left}
end
local recorded = redis.call('GET', KEYS[2])
if recorded and recorded > ARGV[3] then return {3, 0} end
if ARGV[4] == '1' then
  if not redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local left = redis.call('PTTL', KEYS[3])
    if left > 0 then return {4, left} end
    return {4, 0}
  end
end
return {0, 0}`;

// Complete, run once the id's own script completed it for this token: ARGV token, ttlMs,
// version. The entity's version is raised (never lowered) and kept at least ttlMs, and the lock
// this token holds is freed. Running it again changes nothing more (a retried completion).
const ENTITY_COMPLETE = `local recorded = redis.call('GET', KEYS[2])
if not recorded or recorded < ARGV[3] then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
elseif redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
return 1`;

// Release: ARGV token. The entity's lock this token holds is freed; the version is untouched.
const ENTITY_RELEASE = `if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
return 1`;

// Extend, run once the id's own script extended it: ARGV token, lockMs. The entity's lock, while
// this token holds it.
const ENTITY_EXTEND = `if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1`;

interface Script {
  readonly source: string;
  /** Its SHA-1, computed on first use. */
  sha: string | undefined;
}

const script = (source: string): Script => ({ source, sha: undefined });

/** The scripts of one key class. */
interface Scripts {
  claim: Script;
  complete: Script;
  release: Script;
  extend: Script;
}

const SIGNED: Scripts = { claim: script(CLAIM), complete: script(COMPLETE), release: script(RELEASE), extend: script(EXTEND) };
const UNSIGNED: Scripts = { claim: script(UNSIGNED_CLAIM), complete: script(UNSIGNED_COMPLETE), release: script(UNSIGNED_RELEASE), extend: script(UNSIGNED_EXTEND) };
const ENTITY_CLAIM_SCRIPT = script(ENTITY_CLAIM);
const ENTITY_COMPLETE_SCRIPT = script(ENTITY_COMPLETE);
const ENTITY_RELEASE_SCRIPT = script(ENTITY_RELEASE);
const ENTITY_EXTEND_SCRIPT = script(ENTITY_EXTEND);
const FORGET_VERSION_SCRIPT = script(`redis.call('DEL', KEYS[1])
return 1`);

/** The SHA-1 that EVALSHA names a script by, via WebCrypto (every supported runtime has it). */
async function sha1Hex(source: string): Promise<string> {
  return toHex(new Uint8Array(await globalThis.crypto.subtle.digest('SHA-1', new TextEncoder().encode(source))));
}

function isNoScript(error: unknown): boolean {
  // ioredis' ReplyError and node-redis' ErrorReply both carry Redis' error line as the message:
  // "NOSCRIPT No matching script. Please use EVAL."; Upstash's UpstashError puts
  // "Command failed: " before it when the client pipelined the command.
  return error instanceof Error && /^(?:Command failed: )?NOSCRIPT/.test(error.message);
}

/** One client library, seen through the two commands the store sends and its connection state. */
interface ScriptClient {
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  eval(source: string, keys: string[], args: string[]): Promise<unknown>;
  /** `true` connected, `false` not, `undefined` the client does not say. */
  connected(): boolean | undefined;
  ping(): Promise<unknown>;
}

function ioredisScripts(client: IORedisClientLike): ScriptClient {
  return {
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
    connected: () => (typeof client.status === 'string' ? client.status === 'ready' : undefined),
    ping: () => (typeof client.ping === 'function' ? client.ping() : client.eval('return 1', 0)),
  };
}

function nodeRedisScripts(client: NodeRedisClientLike): ScriptClient {
  return {
    evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
    eval: (source, keys, args) => client.eval(source, { keys, arguments: args }),
    connected: () => (typeof client.isReady === 'boolean' ? client.isReady : undefined),
    ping: () => (typeof client.ping === 'function' ? client.ping() : client.eval('return 1', { keys: [], arguments: [] })),
  };
}

function upstashScripts(client: UpstashRedisClientLike): ScriptClient {
  return {
    evalsha: (sha, keys, args) => client.evalsha(sha, keys, args),
    eval: (source, keys, args) => client.eval(source, keys, args),
    // Over HTTP there is no connection to lose: every command is a request, bounded by timeoutMs.
    connected: () => undefined,
    ping: () => (typeof client.ping === 'function' ? client.ping() : client.eval('return 1', [], [])),
  };
}

/** The client's library, told by shape: `evalSha` is node-redis, `evalsha` Upstash (with `createScript`) or ioredis. */
function scriptClientFor(client: RedisClientLike): ScriptClient {
  // Anything else (undefined, a URL string) ends in the TypeError below, which names what it got.
  const candidate = client as (Partial<IORedisClientLike> & Partial<NodeRedisClientLike> & Partial<UpstashRedisClientLike>) | null | undefined;
  const ioredisStatus = typeof candidate?.status === 'string';
  if (typeof candidate?.evalsha === 'function' && typeof candidate.createScript === 'function' && !ioredisStatus && typeof candidate.eval === 'function') {
    return upstashScripts(client as UpstashRedisClientLike);
  }
  if (typeof candidate?.evalsha === 'function' && typeof candidate.eval === 'function') return ioredisScripts(client as IORedisClientLike);
  if (typeof candidate?.evalSha === 'function' && typeof candidate.eval === 'function') return nodeRedisScripts(client as NodeRedisClientLike);
  throw new TypeError(
    `redisStore client must be a connected ioredis, redis (node-redis) or @upstash/redis client: ${describeValue(client)} has neither evalsha() (ioredis, Upstash) nor evalSha() (node-redis)`,
  );
}

/** Runs a script by its SHA: one round trip, or two the first time a server sees it. */
async function runScript(client: ScriptClient, s: Script, keys: string[], args: string[]): Promise<unknown> {
  const sha = (s.sha ??= await sha1Hex(s.source));
  try {
    return await client.evalsha(sha, keys, args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    // First use on this server, or its script cache was emptied (restart, SCRIPT FLUSH,
    // failover): EVAL runs the script and caches it, so the next EVALSHA finds it.
    return client.eval(s.source, keys, args);
  }
}

function integerReply(reply: unknown, operation: string): number {
  // node-redis can map integers to strings or bigints (typeMapping); Number() reads them all.
  const value = typeof reply === 'number' ? reply : typeof reply === 'string' || typeof reply === 'bigint' ? Number(reply) : Number.NaN;
  if (!Number.isInteger(value)) throw new StoreError('redis', 'bad_reply', `redis store: unexpected reply to ${operation}: ${describeValue(reply)}`);
  return value;
}

/**
 * An idempotency store in Redis (or Valkey, or a Redis Cluster), shared by every instance of an
 * app: a `webhook-id` is processed once however many machines receive it.
 *
 * `client` is a client that the app creates, connects and closes; the store only sends scripts
 * through it. `ioredis` (v5 and later, `Redis` or `Cluster`), `redis` (node-redis v4 and later,
 * client or cluster) and `@upstash/redis` (over HTTP, for edge runtimes) work. None of them is a
 * dependency of this package.
 *
 * Each claim, complete, release and extend is one Lua script on one key: atomic, one round trip.
 * With ordering, an id is kept under the same key as without it (turning ordering on, or changing
 * its key, never runs an id again), and the entity's version and lock under the entity's hash tag:
 * an ordered claim or completion is two scripts, the id's first, then the entity's while the id
 * is held (two round trips; a duplicate answers after the first).
 *
 * Redis must not evict these keys on its own: run it with `maxmemory-policy noeviction` or a
 * `volatile-*` policy. Under `allkeys-*` a flood of other keys can evict completed ids, and a
 * redelivery would then run its handler again.
 *
 * Unsigned ids (with the receiver's `unsigned: 'accept'`) have a budget of their own,
 * `unsignedMax` ids (default 10 000, about 1.3 MB): leave room for it under `maxmemory`. Then a
 * flood of unsigned requests neither blocks signed deliveries (`noeviction`) nor has signed ids
 * evicted (`volatile-*`). They are held in buckets of 16, the bucket a hash of the key: a full
 * bucket makes room by forgetting the unsigned completion that expires first; full of live claims,
 * it refuses with `StoreError` `unsigned_limit` (503 `UNSIGNED_LIMIT`).
 *
 * When Redis is down, an operation rejects rather than wait (the receiver then answers 503
 * `STORE_UNAVAILABLE`, and the sender retries): at once when the client reports that it lost its
 * connection, after `timeoutMs` otherwise. Client settings that make failures fast and keep
 * commands from piling up while Redis is away:
 * - ioredis: `new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000 })`,
 *   and wait for `'ready'` before receiving webhooks;
 * - node-redis: `createClient({ url, disableOfflineQueue: true, socket: { connectTimeout: 2000 } })`,
 *   and `await client.connect()` before receiving webhooks.
 * Both clients reconnect by themselves, and the store works again as soon as they have.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createReceiver } from 'webhook-receiver';
 * import { redisStore } from 'webhook-receiver/redis';
 *
 * const redis = new Redis(process.env.REDIS_URL!, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
 * // Without a listener, ioredis logs "Unhandled error event" on every reconnection attempt.
 * redis.on('error', (error) => console.error(`redis: ${error.message}`));
 * await new Promise((resolve) => redis.once('ready', resolve));
 *
 * const receiver = createReceiver({
 *   secrets: process.env.WEBHOOK_SECRET!,
 *   idempotency: { store: redisStore({ client: redis, prefix: 'billing:webhooks:' }) },
 * });
 * ```
 *
 * @example
 * ```ts
 * import { createClient } from 'redis';
 * import { redisStore } from 'webhook-receiver/redis';
 *
 * const redis = await createClient({ url: process.env.REDIS_URL, disableOfflineQueue: true })
 *   .on('error', (error: Error) => console.error(`redis: ${error.message}`)) // without one, a lost connection throws
 *   .connect();
 * const store = redisStore({ client: redis, timeoutMs: 1000 });
 * ```
 */
export function redisStore(options: RedisStoreOptions): RedisStore {
  if (typeof options !== 'object' || options === null) throw new TypeError('redisStore needs an options object: redisStore({ client })');
  const { client, prefix = DEFAULT_REDIS_PREFIX } = options;
  const scripts = scriptClientFor(client);
  if (typeof prefix !== 'string') throw new TypeError('redisStore prefix must be a string');
  const timeoutMs = checkTimeoutOption('redis', options.timeoutMs, DEFAULT_REDIS_TIMEOUT_MS);
  const unsignedMax = checkUnsignedMax('redisStore', options.unsignedMax);

  // Fail fast only once the client has been seen connected: before that (an app that just
  // created its client) commands wait in the client's queue, bounded by the timeout.
  let seenReady = false;

  const ready = (operation: string): void => {
    const state = scripts.connected();
    if (state === true) seenReady = true;
    else if (state === false && seenReady) {
      throw new StoreError('redis', 'not_ready', `redis store: the client is reconnecting to Redis, so ${operation} was not sent`);
    }
  };

  const { buckets, ways } = unsignedBuckets(unsignedMax);

  // A plain function: its callers are async, so a `not_ready` thrown here still rejects theirs.
  // An unsigned key is sent as its bucket's hash (`:u:` then a number: no key of the receiver's
  // grammar starts with `:`), with the key itself first among the arguments. Not bounded in time:
  // `send` bounds one script, the ordering operations bound their steps together.
  const sendUnbounded = (operation: keyof Scripts, key: string, args: string[]): Promise<unknown> => {
    ready(operation);
    return isUnsignedKey(key)
      ? runScript(scripts, UNSIGNED[operation], [`${prefix}:u:${unsignedBucket(key, buckets)}`], [key, ...args])
      : runScript(scripts, SIGNED[operation], [prefix + key], args);
  };
  const send = (operation: keyof Scripts, key: string, args: string[]): Promise<unknown> => withTimeout(sendUnbounded(operation, key, args), timeoutMs, 'redis', operation);

  // Ordering: the entity's version and lock share the entity's hash tag, so its script touches
  // keys of one slot (Redis Cluster keeps working), and reads the id where releases before this
  // one kept ordered ids (`${prefix}{${entity}}${key}`). A '{' or '}' inside the entity changes
  // which text is the tag, never that the three keys share it: all three begin with the same
  // `${prefix}{${entity}}`.
  const sendEntity = (operation: string, s: Script, key: string, entity: string, args: string[]): Promise<unknown> => {
    ready(operation);
    const tagged = `${prefix}{${entity}}`;
    return runScript(scripts, s, [tagged + key, tagged, `${tagged}:lock`], args);
  };
  // An ordering operation's steps (two scripts, in two slots) bounded together, as one operation.
  const bounded = <T>(operation: string, steps: () => Promise<T>): Promise<T> => withTimeout(steps(), timeoutMs, 'redis', operation);

  /** The id's claim, as `claim` answers it; its callers bound it in time. */
  const claimId = async (key: string, lockMs: number): Promise<ClaimResult> => {
    const token = newToken();
    const args = [token, String(wholeMs(lockMs))];
    if (isUnsignedKey(key)) args.push(String(ways));
    const reply = integerReply(await sendUnbounded('claim', key, args), 'claim');
    if (reply === 0) return { status: 'acquired', token };
    if (reply === -1) return { status: 'completed' };
    if (reply > 0) return { status: 'processing', retryAfterMs: reply };
    if (reply === -2) return { status: 'processing' };
    if (reply === -3) throw unsignedLimitError('redis', unsignedMax, `all ${ways} ids of its bucket are live claims`);
    throw new StoreError('redis', 'bad_reply', `redis store: unexpected reply to claim: ${reply}`);
  };

  /** Frees the id `token` holds, without waiting or failing: the lock expires on its own anyway. */
  const releaseQuietly = (key: string, token: string): void => {
    Promise.resolve()
      .then(() => sendUnbounded('release', key, [token]))
      .catch(() => undefined);
  };

  /** The ordered claim's second step and what follows from it, the id being held by `token`. */
  const judgeEntity = async (key: string, token: string, lockMs: number, ttlMs: number, order: EntityOrder): Promise<OrderedClaimResult> => {
    const args = [token, String(wholeMs(lockMs)), order.version, order.exclusive ? '1' : '0'];
    let reply: unknown;
    try {
      reply = await sendEntity('claim', ENTITY_CLAIM_SCRIPT, key, order.entity, args);
    } catch (error) {
      // Nothing was decided: free the id for the sender's retry rather than leave it held for
      // lockMs (best effort; when Redis is away, the lock expires on its own).
      releaseQuietly(key, token);
      throw error;
    }
    const [kind, ms] = Array.isArray(reply) && reply.length === 2 ? [integerReply(reply[0], 'claim'), integerReply(reply[1], 'claim')] : [Number.NaN, 0];
    if (kind === 0) return { status: 'acquired', token };
    if (kind === 1 || kind === 3) {
      // Done under the entity's tag (for ms more), or stale: the id is done, so its retries are
      // duplicates, and an unordered delivery of it finds it too.
      await sendUnbounded('complete', key, [token, String(kind === 1 && ms > 0 ? ms : wholeMs(ttlMs))]);
      return kind === 1 ? { status: 'completed' } : { status: 'stale' };
    }
    if (kind === 2 || kind === 4) {
      await sendUnbounded('release', key, [token]);
      if (kind === 2) return ms > 0 ? { status: 'processing', retryAfterMs: ms } : { status: 'processing' };
      return ms > 0 ? { status: 'busy', retryAfterMs: ms } : { status: 'busy' };
    }
    releaseQuietly(key, token);
    throw new StoreError('redis', 'bad_reply', `redis store: unexpected reply to claim: ${describeValue(reply)}`);
  };

  return {
    name: 'redis',
    async claim(key, lockMs): Promise<ClaimResult> {
      checkClaim(key, lockMs);
      return bounded('claim', () => claimId(key, lockMs));
    },
    async complete(key, token, ttlMs) {
      checkComplete(key, token, ttlMs);
      return integerReply(await send('complete', key, [token, String(wholeMs(ttlMs))]), 'complete') === 1;
    },
    async release(key, token) {
      checkRelease(key, token);
      return integerReply(await send('release', key, [token]), 'release') === 1;
    },
    async extend(key, token, lockMs) {
      checkExtend(key, token, lockMs);
      return integerReply(await send('extend', key, [token, String(wholeMs(lockMs))]), 'extend') === 1;
    },
    // Ordered: the id first, by the same script as an unordered claim (a completed or held id
    // answers at once, one round trip), then, while this token holds it, the entity.
    async claimOrdered(key, lockMs, ttlMs, order): Promise<OrderedClaimResult> {
      checkClaimOrdered(key, lockMs, ttlMs, order);
      return bounded('claim', async () => {
        const held = await claimId(key, lockMs);
        return held.status === 'acquired' ? judgeEntity(key, held.token, lockMs, ttlMs, order) : held;
      });
    },
    // The id first: only a token that held it records a version or frees the entity's lock.
    async completeOrdered(key, token, ttlMs, order) {
      checkComplete(key, token, ttlMs);
      checkOrder(order);
      return bounded('complete', async () => {
        const ttl = String(wholeMs(ttlMs));
        if (integerReply(await sendUnbounded('complete', key, [token, ttl]), 'complete') !== 1) return false;
        await sendEntity('complete', ENTITY_COMPLETE_SCRIPT, key, order.entity, [token, ttl, order.version]);
        return true;
      });
    },
    // Both at once: each script is fenced by the token on its own.
    async releaseOrdered(key, token, order) {
      checkRelease(key, token);
      checkOrder(order);
      return bounded('release', async () => {
        const [released] = await Promise.all([sendUnbounded('release', key, [token]), sendEntity('release', ENTITY_RELEASE_SCRIPT, key, order.entity, [token])]);
        return integerReply(released, 'release') === 1;
      });
    },
    // The id first: a token that no longer holds it renews nothing. One that lost only the
    // entity's lock meanwhile gets false; the id's renewal then runs out by itself.
    async extendOrdered(key, token, lockMs, order) {
      checkExtend(key, token, lockMs);
      checkOrder(order);
      return bounded('extend', async () => {
        const ms = String(wholeMs(lockMs));
        if (integerReply(await sendUnbounded('extend', key, [token, ms]), 'extend') !== 1) return false;
        if (!order.exclusive) return true;
        return integerReply(await sendEntity('extend', ENTITY_EXTEND_SCRIPT, key, order.entity, [token, ms]), 'extend') === 1;
      });
    },
    async forgetVersion(entity) {
      checkEntity(entity);
      ready('forgetVersion');
      await withTimeout(runScript(scripts, FORGET_VERSION_SCRIPT, [`${prefix}{${entity}}`], []), timeoutMs, 'redis', 'forgetVersion');
    },
    async ping() {
      ready('ping');
      await withTimeout(Promise.resolve().then(() => scripts.ping()), timeoutMs, 'redis', 'ping');
    },
  };
}

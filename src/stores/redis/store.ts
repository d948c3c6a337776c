/** The Redis store: its operations, each one script on one key (two for ordering). */

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
  unsignedBucket,
  unsignedBuckets,
  unsignedLimitError,
  wholeMs,
  withTimeout,
} from '../internal.ts';
import { StoreError, type ClaimResult, type EntityOrder, type OrderedClaimResult } from '../types.ts';
import { scriptClientFor } from './driver.ts';
import { DEFAULT_REDIS_PREFIX, DEFAULT_REDIS_TIMEOUT_MS, type RedisStore, type RedisStoreOptions } from './options.ts';
import {
  ENTITY_CLAIM_SCRIPT,
  ENTITY_COMPLETE_SCRIPT,
  ENTITY_EXTEND_SCRIPT,
  ENTITY_RELEASE_SCRIPT,
  FORGET_VERSION_SCRIPT,
  runScript,
  SIGNED,
  UNSIGNED,
  type Script,
  type Scripts,
} from './scripts.ts';

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
    ordering: {
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
    },
    async ping() {
      ready('ping');
      await withTimeout(Promise.resolve().then(() => scripts.ping()), timeoutMs, 'redis', 'ping');
    },
  };
}

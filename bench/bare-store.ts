/**
 * A shared store's own commands for one delivery (claim, then complete), sent bare: the
 * like-with-like baseline of a store behind our code (issue 29). The commands are recorded from
 * the store itself, through a proxy of its client, for a sample key, then replayed on the same
 * client for other keys with nothing around them: no token generation (the recorded token is
 * reused), no timeouts, and only the reply check that proves the work was done.
 *
 * - Redis: the two scripts by EVALSHA, with the store's arguments, as the store sends them on its
 *   client (ioredis' `evalsha`, node-redis' `evalSha`): section 5, the hand-written routes of
 *   section 10 and of the inbox section;
 * - Postgres (`pg`): the two statements, named as the store names them (so prepared per
 *   connection as the store's are), with the store's values.
 */

import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { RedisClientLike } from '../src/stores/redis.ts';
import type { IdempotencyStore } from '../src/stores/types.ts';

/** One delivery's store commands for `key` (the store's key, without its prefix), bare. */
export interface BareDelivery {
  claim(key: string): Promise<void>;
  complete(key: string): Promise<void>;
}

/** A key no other delivery uses, to record with: its occurrences are replaced on replay. */
function sampleKey(): string {
  return `default:s:msg_recorded_${randomBytes(8).toString('hex')}`;
}

/**
 * `value` with the sample key (alone or behind the store's prefix) replaced by `key`, in every
 * string that holds it, also inside arrays and plain objects (node-redis' `{ keys, arguments }`,
 * a `pg` query config).
 */
function withKey(value: unknown, sample: string, key: string): unknown {
  if (typeof value === 'string') return value.includes(sample) ? value.replace(sample, key) : value;
  if (Array.isArray(value)) return value.map((item: unknown) => withKey(item, sample, key));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, withKey(item, sample, key)]));
  return value;
}

/** A call the store made on its client: the method and its arguments. */
interface Call {
  method: string;
  args: unknown[];
}

/** `client`, with every call of one of `methods` recorded in `calls` before it is passed on. */
function recording<C extends object>(client: C, methods: readonly string[], calls: Call[]): C {
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (typeof property === 'string' && methods.includes(property)) {
        return (...args: unknown[]) => {
          calls.push({ method: property, args });
          return method.apply(target, args);
        };
      }
      return method.bind(target);
    },
  });
}

/** `call` sent again on `client`, bare, for `key` in place of the sample key. */
function replay(client: object, call: Call, sample: string, key: string): Promise<unknown> {
  const method = Reflect.get(client, call.method, client) as (...args: unknown[]) => Promise<unknown>;
  return method.apply(client, withKey(call.args, sample, key) as unknown[]);
}

/** The store's delivery, recorded: claim then complete of the sample key, checked. */
async function recordOne(store: IdempotencyStore, sample: string, lockMs: number, ttlMs: number): Promise<void> {
  const claimed = await store.claim(sample, lockMs);
  if (claimed.status !== 'acquired' || !(await store.complete(sample, claimed.token, ttlMs))) throw new Error('the recorded delivery failed');
}

/**
 * The Redis store's delivery on `redis` (ioredis or node-redis), bare: `makeStore` builds the
 * store (prefix and all) on the client it is given, as the code measured builds it.
 */
export async function bareRedisDelivery(redis: RedisClientLike, makeStore: (client: RedisClientLike) => IdempotencyStore, lockMs: number, ttlMs: number): Promise<BareDelivery> {
  const calls: Call[] = [];
  const sample = sampleKey();
  // ioredis (and Upstash) name it `evalsha`, node-redis `evalSha`: whichever the store called.
  await recordOne(makeStore(recording(redis, ['evalsha', 'evalSha'], calls)), sample, lockMs, ttlMs);
  const [claimCall, completeCall] = calls.slice(-2);
  if (claimCall === undefined || completeCall === undefined || claimCall.args[0] === completeCall.args[0]) {
    throw new Error(`expected two different scripts per delivery, saw ${calls.length} EVALSHA calls`);
  }
  return {
    async claim(key) {
      await replay(redis, claimCall, sample, key);
    },
    async complete(key) {
      const done = await replay(redis, completeCall, sample, key);
      if (Number(done) !== 1) throw new Error(`the bare complete answered ${String(done)}: the bare commands do not do the store's work`);
    },
  };
}

/** The Postgres store's delivery on the `pg` pool `pool`, bare; `makeStore` as for Redis. */
export async function barePostgresDelivery(pool: pg.Pool, makeStore: (client: pg.Pool) => IdempotencyStore, lockMs: number, ttlMs: number): Promise<BareDelivery> {
  const calls: Call[] = [];
  const sample = sampleKey();
  // The store hands `pg` a named statement (it prepares its own) or text and values.
  await recordOne(makeStore(recording(pool, ['query'], calls)), sample, lockMs, ttlMs);
  const [claimCall, completeCall] = calls.slice(-2);
  if (claimCall === undefined || completeCall === undefined) throw new Error(`expected two statements per delivery, saw ${calls.length}`);
  const send = async (call: Call, key: string) => ((await replay(pool, call, sample, key)) as pg.QueryResult).rows;
  return {
    async claim(key) {
      const [row] = (await send(claimCall, key)) as { acquired?: unknown }[];
      if (row?.acquired !== true) throw new Error('the bare claim did not acquire a fresh key: the bare commands do not do the store\'s work');
    },
    async complete(key) {
      if ((await send(completeCall, key)).length !== 1) throw new Error('the bare complete changed no row: the bare commands do not do the store\'s work');
    },
  };
}

/**
 * A shared store's own commands for one delivery (claim, then complete), sent bare: the
 * like-with-like baseline of a store behind our code (issue 29). The commands are recorded from
 * the store itself, through a proxy of its client, for a sample key, then replayed on the same
 * client for other keys with nothing around them: no token generation (the recorded token is
 * reused), no timeouts, and only the reply check that proves the work was done.
 *
 * - Redis (ioredis): the two scripts by EVALSHA, with the store's arguments (section 5, and the
 *   hand-written accepting route of the inbox section);
 * - Postgres (`pg`): the two statements, named as the store names them (so prepared per
 *   connection as the store's are), with the store's values.
 */

import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
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

/** `args` with the sample key (alone or behind the store's prefix) replaced by `key`. */
function withKey(args: readonly unknown[], sample: string, key: string): unknown[] {
  return args.map((arg) => (typeof arg === 'string' && arg.includes(sample) ? arg.replace(sample, key) : arg));
}

/** The store's delivery, recorded: claim then complete of the sample key, checked. */
async function recordOne(store: IdempotencyStore, sample: string, lockMs: number, ttlMs: number): Promise<void> {
  const claimed = await store.claim(sample, lockMs);
  if (claimed.status !== 'acquired' || !(await store.complete(sample, claimed.token, ttlMs))) throw new Error('the recorded delivery failed');
}

/**
 * The Redis store's delivery on `redis`, bare: `makeStore` builds the store (prefix and all) on
 * the client it is given, as the code measured builds it.
 */
export async function bareRedisDelivery(redis: Redis, makeStore: (client: RedisClientLike) => IdempotencyStore, lockMs: number, ttlMs: number): Promise<BareDelivery> {
  const calls: string[][] = [];
  const recording = new Proxy(redis, {
    get(target, property) {
      if (property === 'evalsha') {
        return (...args: string[]) => {
          calls.push(args);
          return (target.evalsha as (...a: string[]) => Promise<unknown>)(...args);
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  const sample = sampleKey();
  await recordOne(makeStore(recording as unknown as RedisClientLike), sample, lockMs, ttlMs);
  const [claimCall, completeCall] = calls.slice(-2);
  if (claimCall === undefined || completeCall === undefined || claimCall[0] === completeCall[0]) {
    throw new Error(`expected two different scripts per delivery, saw ${calls.length} EVALSHA calls`);
  }
  const send = (call: string[], key: string) => (redis.evalsha as (...a: unknown[]) => Promise<unknown>)(...withKey(call, sample, key));
  return {
    async claim(key) {
      await send(claimCall, key);
    },
    async complete(key) {
      const done = await send(completeCall, key);
      if (Number(done) !== 1) throw new Error(`the bare complete answered ${String(done)}: the bare commands do not do the store's work`);
    },
  };
}

/** What the Postgres store hands `pg`: a named statement (the store prepares its own) or text and values. */
type PgCall = [config: { name?: string; text: string; values?: unknown[] }] | [text: string, values?: unknown[]];

/** The Postgres store's delivery on the `pg` pool `pool`, bare; `makeStore` as for Redis. */
export async function barePostgresDelivery(pool: pg.Pool, makeStore: (client: pg.Pool) => IdempotencyStore, lockMs: number, ttlMs: number): Promise<BareDelivery> {
  const calls: PgCall[] = [];
  const recording = new Proxy(pool, {
    get(target, property) {
      if (property === 'query') {
        return (...args: PgCall) => {
          calls.push(args);
          return (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  const sample = sampleKey();
  await recordOne(makeStore(recording), sample, lockMs, ttlMs);
  const [claimCall, completeCall] = calls.slice(-2);
  if (claimCall === undefined || completeCall === undefined) throw new Error(`expected two statements per delivery, saw ${calls.length}`);
  const send = async (call: PgCall, key: string): Promise<unknown[]> => {
    const [first, values] = call;
    const result =
      typeof first === 'string'
        ? await pool.query(first, values === undefined ? undefined : withKey(values, sample, key))
        : await pool.query({ ...first, values: first.values === undefined ? undefined : withKey(first.values, sample, key) });
    return result.rows;
  };
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

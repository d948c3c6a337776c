/**
 * A shared store's own commands for one delivery (claim, then complete), sent bare: the
 * like-with-like baseline of a store behind our code. The commands are recorded from
 * the store itself, through a proxy of its client, for sample keys, then replayed on the same
 * client for other keys with nothing around them: no token generation (a recorded token is
 * reused), no timeouts, and only the reply check that proves the work was done.
 *
 * - Redis: the two scripts by EVALSHA, with the store's arguments, as the store sends them on its
 *   client (ioredis' `evalsha`, node-redis' `evalSha`): section 5, the hand-written routes of
 *   section 10 and of the inbox section;
 * - Postgres (`pg`): the two statements, named as the store names them (so prepared per
 *   connection as the store's are), with the store's values. Its claim's values change from one
 *   claim to the next (one claim in `CLEANUP_EVERY` also deletes expired rows): a whole cycle of
 *   deliveries is recorded and replayed in turn, so the bare claims sweep as often as the store's.
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
 * `value` with `from` replaced by `to` in every string that holds it (a key alone or behind the
 * store's prefix, a token), also inside arrays and plain objects (node-redis' `{ keys, arguments }`,
 * a `pg` query config).
 */
function replaced(value: unknown, from: string, to: string): unknown {
  if (typeof value === 'string') return value.includes(from) ? value.replace(from, to) : value;
  if (Array.isArray(value)) return value.map((item: unknown) => replaced(item, from, to));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, replaced(item, from, to)]));
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

/** One recorded delivery's two calls (claim, complete), rewritten to the first one's sample key and token. */
interface Recorded {
  claim: Call;
  complete: Call;
}

/**
 * `count` deliveries through the store `makeStore` builds on `client` recorded (each a claim then
 * a complete of a sample key of its own, checked, each exactly two calls of one of `methods`),
 * rewritten to the first delivery's sample key and token, so that any recorded claim can be
 * completed by any recorded completion. Returns them and that sample key.
 */
async function record<C extends object>(
  client: C,
  methods: readonly string[],
  makeStore: (client: C) => IdempotencyStore,
  count: number,
  lockMs: number,
  ttlMs: number,
): Promise<{ sample: string; deliveries: Recorded[] }> {
  const calls: Call[] = [];
  const store = makeStore(recording(client, methods, calls));
  const deliveries: Recorded[] = [];
  let first: { sample: string; token: string } | undefined;
  for (let n = 0; n < count; n++) {
    const sample = sampleKey();
    const from = calls.length;
    const claimed = await store.claim(sample, lockMs);
    if (claimed.status !== 'acquired' || !(await store.complete(sample, claimed.token, ttlMs))) throw new Error('a recorded delivery failed');
    const made = calls.slice(from);
    if (made.length !== 2) throw new Error(`expected two ${methods.join('/')} calls per delivery, saw ${made.length}`);
    first ??= { sample, token: claimed.token };
    const [claim, complete] = made.map(({ method, args }) => ({ method, args: replaced(replaced(args, sample, first!.sample), claimed.token, first!.token) as unknown[] }));
    deliveries.push({ claim: claim!, complete: complete! });
  }
  return { sample: first!.sample, deliveries };
}

/** `call` sent again on `client`, bare, for `key` in place of the sample key. */
function replay(client: object, call: Call, sample: string, key: string): Promise<unknown> {
  const method = Reflect.get(client, call.method, client) as (...args: unknown[]) => Promise<unknown>;
  return method.apply(client, replaced(call.args, sample, key) as unknown[]);
}

/**
 * The Redis store's delivery on `redis` (ioredis or node-redis), bare: `makeStore` builds the
 * store (prefix and all) on the client it is given, as the code measured builds it. Its commands
 * are the same for every delivery but the key and token: one delivery is recorded.
 */
export async function bareRedisDelivery(redis: RedisClientLike, makeStore: (client: RedisClientLike) => IdempotencyStore, lockMs: number, ttlMs: number): Promise<BareDelivery> {
  // ioredis (and Upstash) name it `evalsha`, node-redis `evalSha`: whichever the store called.
  const { sample, deliveries } = await record(redis, ['evalsha', 'evalSha'], makeStore, 1, lockMs, ttlMs);
  const { claim, complete } = deliveries[0]!;
  if (claim.args[0] === complete.args[0]) throw new Error('expected two different scripts per delivery');
  return {
    async claim(key) {
      await replay(redis, claim, sample, key);
    },
    async complete(key) {
      const done = await replay(redis, complete, sample, key);
      if (Number(done) !== 1) throw new Error(`the bare complete answered ${String(done)}: the bare commands do not do the store's work`);
    },
  };
}

/**
 * The Postgres store's delivery on the `pg` pool `pool`, bare; `makeStore` as for Redis. `cycle`
 * deliveries are recorded (the store's `CLEANUP_EVERY`, after which its claims' values repeat)
 * and the bare claims take them in turn.
 */
export async function barePostgresDelivery(pool: pg.Pool, makeStore: (client: pg.Pool) => IdempotencyStore, lockMs: number, ttlMs: number, cycle: number): Promise<BareDelivery> {
  // The store hands `pg` a named statement (it prepares its own) or text and values.
  const { sample, deliveries } = await record(pool, ['query'], makeStore, cycle, lockMs, ttlMs);
  const complete = deliveries[0]!.complete;
  const send = async (call: Call, key: string) => ((await replay(pool, call, sample, key)) as pg.QueryResult).rows;
  let next = 0;
  return {
    async claim(key) {
      const call = deliveries[next]!.claim;
      next = (next + 1) % deliveries.length;
      const [row] = (await send(call, key)) as { acquired?: unknown }[];
      if (row?.acquired !== true) throw new Error('the bare claim did not acquire a fresh key: the bare commands do not do the store\'s work');
    },
    async complete(key) {
      if ((await send(complete, key)).length !== 1) throw new Error('the bare complete changed no row: the bare commands do not do the store\'s work');
    },
  };
}

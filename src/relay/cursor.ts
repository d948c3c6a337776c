/**
 * Where a trigger source keeps its resume cursor: an interface of two methods, and one
 * implementation on a small key-value seam (a Redis client's `get`/`set`, a Workers KV namespace's
 * or a Durable Object storage's `get`/`put`). The file implementation is in `file-cursor.ts`.
 */

/**
 * Where a trigger source keeps the relay's resume cursor between polls and restarts. `save` is
 * called only once every event before the cursor was processed or durably accepted, so a crash
 * replays at most the last batch (which the claims answer as duplicates). `load` resolves
 * `undefined` (or `null`) before the first save: the trigger is read from its start.
 *
 * @example
 * ```ts
 * import type { CursorStore } from 'webhook-receiver/relay';
 * let kept: string | undefined;
 * const inMemory: CursorStore = { load: async () => kept, save: async (cursor) => { kept = cursor; } };
 * ```
 */
export interface CursorStore {
  /** The cursor saved last, or `undefined`/`null` before the first save. */
  load(): Promise<string | null | undefined>;
  /** Keeps `cursor` (an opaque string from the relay) in place of the one before. */
  save(cursor: string): Promise<void>;
}

/**
 * The key-value seam {@link keyValueCursor} writes through: `get`, and either `set` (a Redis
 * client: ioredis, node-redis, Upstash) or `put` (a Workers KV namespace, a Durable Object's
 * storage).
 *
 * @example
 * ```ts
 * import type { CursorKeyValue } from 'webhook-receiver/relay';
 * const map = new Map<string, string>();
 * const kv: CursorKeyValue = { get: async (key) => map.get(key) ?? null, set: async (key, value) => map.set(key, value) };
 * ```
 */
export interface CursorKeyValue {
  /** The value under `key`: a string, or `null`/`undefined` when there is none. */
  get(key: string): Promise<unknown>;
  /** Writes `value` under `key` (a Redis client's `set`). */
  set?(key: string, value: string): Promise<unknown>;
  /** Writes `value` under `key` (Workers KV's and Durable Object storage's `put`), when there is no `set`. */
  put?(key: string, value: string): Promise<unknown>;
}

/**
 * A {@link CursorStore} on a key-value store the app already has: one key holds the cursor. Pick
 * a key per trigger (two triggers must not share one).
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { keyValueCursor } from 'webhook-receiver/relay';
 * const cursor = keyValueCursor({ kv: new Redis(process.env.REDIS_URL!), key: 'relay:trigger:orders:cursor' });
 * ```
 */
export function keyValueCursor(options: { kv: CursorKeyValue; key: string }): CursorStore {
  if (typeof options !== 'object' || options === null) throw new TypeError('keyValueCursor needs { kv, key }');
  const { kv, key } = options;
  if (typeof kv !== 'object' || kv === null || typeof kv.get !== 'function') throw new TypeError('keyValueCursor: kv must have get(key) and set(key, value) or put(key, value)');
  const write = typeof kv.set === 'function' ? kv.set.bind(kv) : typeof kv.put === 'function' ? kv.put.bind(kv) : undefined;
  if (write === undefined) throw new TypeError('keyValueCursor: kv must have set(key, value) (a Redis client) or put(key, value) (Workers KV, Durable Object storage)');
  if (typeof key !== 'string' || key === '') throw new TypeError('keyValueCursor: key must be a non-empty string');
  return {
    async load() {
      const value = await kv.get(key);
      if (value === null || value === undefined) return undefined;
      if (typeof value !== 'string' || value === '') throw new TypeError(`keyValueCursor: the value under ${JSON.stringify(key)} is not a cursor (a non-empty string)`);
      return value;
    },
    async save(cursor) {
      await write(key, cursor);
    },
  };
}

/** The memory store's public shapes: its options, its usage report, the store's type and its default bounds. */

import { DEFAULT_UNSIGNED_MAX, type IdempotencyStore, type OrderingOperations } from '../types.ts';

/**
 * Options of {@link memoryStore}.
 *
 * @example
 * ```ts
 * const options: MemoryStoreOptions = { max: 50_000, unsignedMax: 1_000 };
 * ```
 */
export interface MemoryStoreOptions {
  /**
   * How many signed ids are held at most (live claims and completed ids together). Default
   * 100 000. At the bound the oldest completed id is forgotten, possibly before `ttlSeconds`:
   * if that happens within twice `toleranceSeconds` of its timestamp, a captured request carrying
   * it would verify and run again. Size it above the signed deliveries the endpoint receives in
   * that window (10 minutes with the defaults); {@link MemoryStore.usage} shows how full it is.
   */
  max?: number;
  /**
   * How many unsigned ids are held at most, in a space of their own: when it is full, a new one
   * makes room by forgetting the oldest unsigned completion early; when every entry is a live
   * claim, it is refused with `StoreError` `unsigned_limit` (503 `UNSIGNED_LIMIT`). Default 10 000.
   */
  unsignedMax?: number;
  /** The clock, in epoch milliseconds (tests). Default `Date.now`. */
  now?: () => number;
}

/**
 * How full a memory store is, per key class: for a gauge, and to see 503s coming.
 *
 * @example
 * ```ts
 * const { signed } = store.usage();
 * if (signed.claims > 0.9 * signed.max) console.warn('memory store nearly full of live claims');
 * ```
 */
export interface MemoryStoreUsage {
  signed: { claims: number; completed: number; max: number };
  unsigned: { claims: number; completed: number; max: number };
}

/**
 * The in-process store: {@link IdempotencyStore} plus a look at how full it is.
 *
 * @example
 * ```ts
 * import { memoryStore, type MemoryStore } from 'webhook-receiver';
 * const store: MemoryStore = memoryStore();
 * console.log(store.usage().signed.completed);
 * ```
 */
export interface MemoryStore extends IdempotencyStore {
  /** The ordering operations: this store has all five. */
  readonly ordering: OrderingOperations;
  extend(key: string, token: string, lockMs: number): Promise<boolean>;
  /** How full each key space is: live claims, completed ids, and the bound. */
  usage(): MemoryStoreUsage;
  ping(): Promise<void>;
}

/**
 * 100 000 ids: the default bound of {@link memoryStore} for signed deliveries.
 *
 * @example
 * ```ts
 * import { memoryStore, DEFAULT_MEMORY_STORE_MAX } from 'webhook-receiver';
 * const store = memoryStore({ max: DEFAULT_MEMORY_STORE_MAX * 2 });
 * ```
 */
export const DEFAULT_MEMORY_STORE_MAX = 100_000;

/**
 * 10 000 ids: the default bound of {@link memoryStore} for unsigned deliveries, kept apart from
 * the signed ones so unsigned traffic can never push a signed id out. The same as every store's
 * {@link DEFAULT_UNSIGNED_MAX}.
 *
 * @example
 * ```ts
 * import { memoryStore, DEFAULT_MEMORY_STORE_UNSIGNED_MAX } from 'webhook-receiver';
 * const store = memoryStore({ unsignedMax: DEFAULT_MEMORY_STORE_UNSIGNED_MAX / 10 });
 * ```
 */
export const DEFAULT_MEMORY_STORE_UNSIGNED_MAX = DEFAULT_UNSIGNED_MAX;

import { LRUCache } from 'lru-cache';
import { checkClaim, checkComplete, checkRelease, newToken, offerSyncOperations, type IdempotencyStore, type SyncOperations } from './types.ts';

/**
 * What the cache holds for an id: the owner's token while a claim is being processed, none once
 * completed, and until when either holds (epoch ms). The store keeps the expiry itself rather than
 * giving lru-cache a TTL per item, so completing a claim changes the entry in place instead of
 * writing the key again: with a full cache, a claim and its completion cost about a quarter less.
 */
interface Entry {
  token: string | undefined;
  until: number;
}

/**
 * 100 000 ids: the default bound of {@link memoryStore}.
 *
 * @example
 * ```ts
 * import { memoryStore, DEFAULT_MEMORY_STORE_MAX } from 'webhook-receiver';
 * const store = memoryStore({ max: DEFAULT_MEMORY_STORE_MAX * 2 });
 * ```
 */
export const DEFAULT_MEMORY_STORE_MAX = 100_000;

/**
 * Options of {@link memoryStore}.
 *
 * @example
 * ```ts
 * const options: MemoryStoreOptions = { max: 50_000 };
 * ```
 */
export interface MemoryStoreOptions {
  /** How many ids are remembered at most; the least recently used go first. Default 100 000. */
  max?: number;
  /** The clock, in epoch milliseconds (tests). Default `Date.now`. */
  now?: () => number;
}

/**
 * An in-process idempotency store on `lru-cache`: bounded by `max` ids, each expiring after its
 * TTL. It deduplicates within one process only: an app on several machines (or several
 * processes) needs a shared store such as `redisStore` from `webhook-receiver/redis`.
 *
 * JavaScript runs one claim at a time, so each check-and-set here is atomic.
 *
 * @example
 * ```ts
 * import { createReceiver, memoryStore } from 'webhook-receiver';
 * const receiver = createReceiver({
 *   secrets: process.env.WEBHOOK_SECRET!,
 *   idempotency: { store: memoryStore({ max: 10_000 }), ttlSeconds: 3600 },
 * });
 * ```
 */
export function memoryStore(options: MemoryStoreOptions = {}): IdempotencyStore {
  const max = options.max ?? DEFAULT_MEMORY_STORE_MAX;
  if (!Number.isSafeInteger(max) || max < 1) throw new RangeError('memoryStore max must be a positive whole number of ids');
  const now = options.now ?? Date.now;
  if (typeof now !== 'function') throw new TypeError('memoryStore now must be a function returning epoch milliseconds');
  // lru-cache keeps the bound, least recently used first; expiry is the entry's `until`. An
  // expired entry stays until a claim replaces it or the bound pushes it out, as it would with
  // lru-cache's own TTLs (which drop a stale item only when it is read).
  const cache = new LRUCache<string, Entry>({ max });
  // A claim writes first and then looks at what it replaced (lru-cache reports it in the write's
  // status): one look-up of the key rather than a read and then a write.
  const status: LRUCache.Status<string, Entry> = {};
  const write = { status };
  /** Writes `entry` for `key` and returns the entry it replaced, if any. */
  const swap = (key: string, entry: Entry): Entry | undefined => {
    cache.set(key, entry, write);
    const previous = status.oldValue;
    // The status object is reused: leave nothing behind for the next write.
    status.oldValue = undefined;
    return previous;
  };

  /** The key's entry, when `token` owns it and its lock has not run out. */
  const owned = (key: string, token: string): Entry | undefined => {
    const entry = cache.get(key);
    return entry !== undefined && entry.token === token && entry.until > now() ? entry : undefined;
  };

  const operations: SyncOperations = {
    claim(key, lockMs) {
      checkClaim(key, lockMs);
      const time = now();
      const token = newToken();
      const previous = swap(key, { token, until: time + lockMs });
      if (previous !== undefined && previous.until > time) {
        // Still held or still completed: put it back (nothing ran in between).
        swap(key, previous);
        return previous.token === undefined ? { status: 'completed' } : { status: 'processing', retryAfterMs: previous.until - time };
      }
      return { status: 'acquired', token };
    },
    complete(key, token, ttlMs) {
      checkComplete(key, token, ttlMs);
      const entry = owned(key, token);
      if (entry === undefined) return false;
      entry.token = undefined;
      entry.until = now() + ttlMs;
      return true;
    },
    release(key, token) {
      checkRelease(key, token);
      if (owned(key, token) === undefined) return false;
      cache.delete(key);
      return true;
    },
  };

  // The receiver calls `operations` directly; everyone else gets promises, and a bad argument
  // rejects rather than throws, as with every other store.
  const store: IdempotencyStore = {
    async claim(key, lockMs) {
      return operations.claim(key, lockMs);
    },
    async complete(key, token, ttlMs) {
      return operations.complete(key, token, ttlMs);
    },
    async release(key, token) {
      return operations.release(key, token);
    },
  };
  offerSyncOperations(store, operations);
  return store;
}

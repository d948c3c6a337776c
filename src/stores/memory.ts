import { LRUCache } from 'lru-cache';
import { checkClaim, checkComplete, checkRelease, newToken, type IdempotencyStore } from './types.ts';

type Entry = { state: 'processing'; token: string; until: number } | { state: 'completed' };

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
  const cache = new LRUCache<string, Entry>({
    max,
    // lru-cache reads its own clock for TTLs; an injected clock keeps tests deterministic.
    perf: { now },
    // Read the clock on every check: no cached time (and no timer per read to reset it).
    ttlResolution: 0,
    ttlAutopurge: false,
  });

  const owned = (key: string, token: string): boolean => {
    const entry = cache.get(key);
    return entry !== undefined && entry.state === 'processing' && entry.token === token && entry.until > now();
  };

  return {
    async claim(key, lockMs) {
      checkClaim(key, lockMs);
      const entry = cache.get(key);
      if (entry !== undefined) {
        if (entry.state === 'completed') return { status: 'completed' };
        const left = entry.until - now();
        if (left > 0) return { status: 'processing', retryAfterMs: left };
      }
      const token = newToken();
      cache.set(key, { state: 'processing', token, until: now() + lockMs }, { ttl: lockMs });
      return { status: 'acquired', token };
    },
    async complete(key, token, ttlMs) {
      checkComplete(key, token, ttlMs);
      if (!owned(key, token)) return false;
      cache.set(key, { state: 'completed' }, { ttl: ttlMs });
      return true;
    },
    async release(key, token) {
      checkRelease(key, token);
      if (!owned(key, token)) return false;
      cache.delete(key);
      return true;
    },
  };
}

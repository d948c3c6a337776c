/**
 * The in-process idempotency store: `memoryStore` from `webhook-receiver`.
 *
 * Signed and unsigned ids are kept in two spaces (`Space`), each one map of claims and completions
 * with the order of its completions, bounded by `max` and `unsignedMax`. Every operation is a
 * synchronous check-and-set, which the receiver calls without a promise.
 */

export { memoryStore } from './store.ts';
export { DEFAULT_MEMORY_STORE_MAX, DEFAULT_MEMORY_STORE_UNSIGNED_MAX, type MemoryStore, type MemoryStoreOptions, type MemoryStoreUsage } from './options.ts';

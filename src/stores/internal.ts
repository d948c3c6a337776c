/**
 * What stores share that is not the contract: argument checks, the unsigned budget, store errors
 * for timeouts, the synchronous fast path of the memory store and the completion bookkeeping of
 * transactional stores. Internal: not exported from the package. The general helpers the stores
 * use (tokens, hex, hashing, value descriptions) live in `src/lib` and are re-exported here.
 */

import { checkNonEmptyString } from '../lib/checks.ts';
import { fnv1a } from '../lib/hash.ts';
import { MAX_TIMER_MS, withTimeout as settleWithin } from '../lib/timeout.ts';
import { DEFAULT_UNSIGNED_MAX, StoreError, type ClaimHandle, type ClaimResult, type EntityOrder, type IdempotencyStore } from './types.ts';

export { describeValue } from '../lib/checks.ts';
export { toHex } from '../lib/encoding.ts';
export { fnv1a } from '../lib/hash.ts';
export { newToken } from '../lib/token.ts';

/**
 * The operations of a store that answers at once (the memory store), without the promises. Only
 * `StoreCalls` (src/claims.ts) reads them, for the receiver, the workers and their keeper: calling
 * them directly saves a promise and a turn of the microtask queue on every claim and settlement.
 */
export interface SyncOperations {
  claim(key: string, lockMs: number): ClaimResult;
  complete(key: string, token: string, ttlMs: number): boolean;
  release(key: string, token: string): boolean;
  extend(key: string, token: string, lockMs: number): boolean;
}

type Methods = Pick<IdempotencyStore, 'claim' | 'complete' | 'release' | 'extend'>;

// Kept beside the store rather than on it: a copy (`{ ...store, claim: logged }`) or a store
// whose methods were replaced afterwards must go through its own methods, not around them.
const syncStores = new WeakMap<IdempotencyStore, { methods: Methods; operations: SyncOperations }>();

/** Records that `store`'s methods are `operations` behind promises. */
export function offerSyncOperations(store: IdempotencyStore, operations: SyncOperations): void {
  syncStores.set(store, { methods: { claim: store.claim, complete: store.complete, release: store.release, extend: store.extend }, operations });
}

/** The synchronous operations behind `store`, while its methods are still the ones it was made with. */
export function syncOperations(store: IdempotencyStore): SyncOperations | undefined {
  const entry = syncStores.get(store);
  if (entry === undefined) return undefined;
  const made = entry.methods;
  return store.claim === made.claim && store.complete === made.complete && store.release === made.release && store.extend === made.extend
    ? entry.operations
    : undefined;
}

// Store arguments are checked the same way by every store, so a caller's mistake is a clear
// TypeError or RangeError rather than, say, a key that never expires.

function checkKey(key: string): void {
  checkNonEmptyString(key, 'an idempotency key must be a non-empty string');
}

function checkToken(token: string): void {
  checkNonEmptyString(token, 'an ownership token must be a non-empty string');
}

function checkDuration(ms: number, name: 'lockMs' | 'ttlMs'): void {
  // Past 2^53 ms a store could no longer add the duration to its clock exactly.
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0 || ms > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`${name} must be a positive, finite number of milliseconds`);
  }
}

/** Checks the arguments of {@link IdempotencyStore.claim}. */
export function checkClaim(key: string, lockMs: number): void {
  checkKey(key);
  checkDuration(lockMs, 'lockMs');
}

/** Checks the arguments of {@link IdempotencyStore.complete}. */
export function checkComplete(key: string, token: string, ttlMs: number): void {
  checkKey(key);
  checkToken(token);
  checkDuration(ttlMs, 'ttlMs');
}

/** Checks the arguments of {@link IdempotencyStore.release}. */
export function checkRelease(key: string, token: string): void {
  checkKey(key);
  checkToken(token);
}

/** Checks the arguments of {@link IdempotencyStore.extend}. */
export function checkExtend(key: string, token: string, lockMs: number): void {
  checkKey(key);
  checkToken(token);
  checkDuration(lockMs, 'lockMs');
}

/** The ordering operations, all five in a store's `ordering`, or no `ordering` at all. */
export const ORDERING_OPERATIONS = ['claimOrdered', 'completeOrdered', 'releaseOrdered', 'extendOrdered', 'forgetVersion'] as const;

/**
 * What is wrong with a store's `ordering` (the part of a message after the store's name), or
 * `undefined` when it is absent or has all five operations. The types already require all five;
 * this catches a store written in JavaScript, or cast, before a claim depends on the missing one.
 */
export function orderingProblem(ordering: unknown): string | undefined {
  if (ordering === undefined) return undefined;
  if (typeof ordering !== 'object' || ordering === null) return `ordering must be an object with ${ORDERING_OPERATIONS.join(', ')}`;
  const missing = ORDERING_OPERATIONS.filter((operation) => typeof (ordering as Record<string, unknown>)[operation] !== 'function');
  if (missing.length === 0) return undefined;
  return `ordering has no ${missing.join(', ')}: the ordering operations (${ORDERING_OPERATIONS.join(', ')}) come all together`;
}

/**
 * A store handed to a receiver or an inbox's worker has the operations they call: `claim`,
 * `complete` and `release`, `extend` a function when present, and a whole `ordering` or none.
 * `name` is the option as its user wrote it (`idempotency.store`, `work idempotency.store`).
 */
export function checkStore(store: unknown, name: string): asserts store is IdempotencyStore {
  if (typeof store !== 'object' || store === null) throw new TypeError(`${name} must be a store object`);
  const methods = store as Partial<Record<keyof IdempotencyStore, unknown>>;
  for (const method of ['claim', 'complete', 'release'] as const) {
    if (typeof methods[method] !== 'function') throw new TypeError(`${name} must implement ${method}()`);
  }
  if (methods.extend !== undefined && typeof methods.extend !== 'function') throw new TypeError(`${name} extend must be a function when present`);
  const problem = orderingProblem(methods.ordering);
  if (problem !== undefined) throw new TypeError(`${name} ${problem}`);
}

/** A version as `encodeVersion` makes it: `i` and 40 digits, or `t` and 22. */
const VERSION = /^(?:i\d{40}|t\d{22})$/;

/** Checks the `order` argument of the ordering operations. */
export function checkOrder(order: EntityOrder): void {
  if (typeof order !== 'object' || order === null) throw new TypeError('an entity order must be an object { entity, version, exclusive }');
  checkEntity(order.entity);
  if (typeof order.version !== 'string' || !VERSION.test(order.version)) throw new TypeError('an entity order\'s version must be a string made by encodeVersion');
  if (typeof order.exclusive !== 'boolean') throw new TypeError('an entity order\'s exclusive must be a boolean');
}

/** Checks an entity key (`${namespace}:o:${entity}`). */
export function checkEntity(entity: string): void {
  checkNonEmptyString(entity, 'an entity key must be a non-empty string');
}

/** Checks the arguments of `claimOrdered`. */
export function checkClaimOrdered(key: string, lockMs: number, ttlMs: number, order: EntityOrder): void {
  checkClaim(key, lockMs);
  checkDuration(ttlMs, 'ttlMs');
  checkOrder(order);
}

/** `true` for a key of the unsigned class (`${namespace}:u:${id}`). */
export function isUnsignedKey(key: string): boolean {
  const colon = key.indexOf(':');
  return colon !== -1 && key.charCodeAt(colon + 1) === 0x75 /* u */ && key.charCodeAt(colon + 2) === 0x3a; /* : */
}

/** How many unsigned ids share a bucket (at most): 16 ways. */
const UNSIGNED_WAYS = 16;

/**
 * The shape of an unsigned budget of `unsignedMax` ids in a store that keeps it as a fixed set of
 * buckets (Redis, Postgres, Durable Objects): `buckets` buckets of `ways` ids each, never more
 * than `unsignedMax` in all. A new id only has to push out another when its own bucket is full,
 * which at a tenth of the budget in use almost never happens (with one id a bucket, two ids meet
 * in one bucket as soon as a hundred or so are held: the birthday bound).
 */
export function unsignedBuckets(unsignedMax: number): { buckets: number; ways: number } {
  const ways = Math.min(UNSIGNED_WAYS, unsignedMax);
  return { buckets: Math.floor(unsignedMax / ways), ways };
}

/**
 * The bucket (0 to `buckets` - 1) of an unsigned key: the same key always lands in the same
 * bucket, so its claim, its completion and its retries meet there.
 */
export function unsignedBucket(key: string, buckets: number): number {
  return fnv1a(key) % buckets;
}

/** A store's `unsignedMax` option, checked (the shared default when absent). `factory` names the store's factory. */
export function checkUnsignedMax(factory: string, value: unknown): number {
  if (value === undefined) return DEFAULT_UNSIGNED_MAX;
  // Past 2^31 a slot number no longer fits Postgres' integer, and no store needs that many.
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > 2 ** 31 - 1) {
    throw new RangeError(`${factory} unsignedMax must be a positive whole number of ids`);
  }
  return value;
}

/** The `StoreError` (`unsigned_limit`) of an unsigned claim that found no room in the budget. */
export function unsignedLimitError(store: string, unsignedMax: number, why: string): StoreError {
  return new StoreError(
    store,
    'unsigned_limit',
    `${store} store: no room for another unsigned id (${why}; unsignedMax ${unsignedMax}), so the claim was refused rather than evict a claim whose handler still runs`,
  );
}

/** The `StoreError` (`timeout`) of an operation that got no answer within `timeoutMs`. */
export function timeoutError(store: string, operation: string, timeoutMs: number): StoreError {
  return new StoreError(store, 'timeout', `${store} store: no answer to ${operation} within ${timeoutMs} ms`);
}

/**
 * `promise`, or a `StoreError('timeout')` when it has not settled within `timeoutMs`. Clients
 * queue commands while disconnected, which would otherwise hold a request forever.
 */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, store: string, operation: string): Promise<T> {
  return settleWithin(promise, timeoutMs, () => timeoutError(store, operation, timeoutMs));
}

/**
 * A store's `timeoutMs` option, checked (its default when absent). `store` is the store's name
 * (`durable-object`); the error names its factory (`durableObjectStore`).
 */
export function checkTimeoutOption(store: string, timeoutMs: unknown, fallback: number): number {
  if (timeoutMs === undefined) return fallback;
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_TIMER_MS) {
    const factory = `${store.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase())}Store`;
    throw new RangeError(`${factory} timeoutMs must be a positive number of milliseconds up to ${MAX_TIMER_MS} (default ${fallback})`);
  }
  return timeoutMs;
}

/** Whole milliseconds, at least 1: what Redis's PX and the other stores' expiries take. */
export function wholeMs(ms: number): number {
  return Math.max(1, Math.ceil(ms));
}

/**
 * A claim a store completes inside the app's own transaction (the Postgres store's
 * `transaction`): `committed` settles `true` once the transaction committed, `false` if it did not.
 */
export interface StoreCompletion {
  /** `undefined` while the transaction commits, then whether it did. */
  done: boolean | undefined;
  readonly committed: Promise<boolean>;
}

const storeCompletions = new WeakMap<ClaimHandle, StoreCompletion>();

/**
 * Records that `handle`'s claim is being completed by its store, together with the handler's side
 * effect, once the completion is written in the transaction and before it commits (the row is
 * then the transaction's: no other statement can take it). Returns the function to call with
 * whether the transaction committed. Meanwhile, and after a commit, the receiver neither renews
 * the claim nor reports it lost, and its own completion sends nothing (one round trip saved).
 */
export function noteCompletingInStore(handle: ClaimHandle): (committed: boolean) => void {
  let settle!: (committed: boolean) => void;
  const completion: StoreCompletion = { done: undefined, committed: new Promise((resolve) => (settle = resolve)) };
  storeCompletions.set(handle, completion);
  return (committed) => {
    completion.done = committed;
    settle(committed);
  };
}

/** The completion {@link noteCompletingInStore} recorded for `handle`, if any. */
export function storeCompletionOf(handle: ClaimHandle): StoreCompletion | undefined {
  return storeCompletions.get(handle);
}

/** `true` while `handle`'s claim is being completed in the app's transaction, or once that committed. */
export function completingInStore(handle: ClaimHandle): boolean {
  const completion = storeCompletions.get(handle);
  return completion !== undefined && completion.done !== false;
}

/** `true` when the app's transaction committed `handle`'s completion. */
export function isCompletedByStore(handle: ClaimHandle): boolean {
  return storeCompletions.get(handle)?.done === true;
}

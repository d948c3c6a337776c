/**
 * Where claims on `webhook-id` live. A store is a small interface around a client the user
 * supplies; every operation is one atomic check-and-set.
 */

/**
 * The answer to a claim: `acquired` (run the handler, then `complete` or `release` with the
 * token), `processing` (another delivery of this id holds the claim now) or `completed`.
 *
 * @example
 * ```ts
 * const result: ClaimResult = await store.claim('default:msg_1', 60_000);
 * if (result.status === 'acquired') await store.complete('default:msg_1', result.token, 86_400_000);
 * ```
 */
export type ClaimResult =
  | { status: 'acquired'; token: string }
  | { status: 'processing'; /** How long the current claim still holds, when the store knows. */ retryAfterMs?: number }
  | { status: 'completed' };

/**
 * An idempotency store: atomic claims keyed by namespace and `webhook-id`.
 *
 * Rules every implementation keeps:
 * - `claim` atomically takes a free or expired key for `lockMs`, with a fresh ownership token;
 * - `complete` marks the key done for `ttlMs`, and `release` frees it, only while `token` still
 *   owns the claim (a handler whose lock expired and was taken over returns `false` and changes
 *   nothing);
 * - an unreachable backend rejects (the receiver turns that into `STORE_UNAVAILABLE`).
 *
 * @example
 * ```ts
 * import { createReceiver, memoryStore } from 'webhook-receiver';
 * const receiver = createReceiver({ secrets, idempotency: { store: memoryStore({ max: 10_000 }) } });
 * ```
 */
export interface IdempotencyStore {
  claim(key: string, lockMs: number): Promise<ClaimResult>;
  /** `false`: the token no longer owns the key. */
  complete(key: string, token: string, ttlMs: number): Promise<boolean>;
  /** `false`: the token no longer owns the key. */
  release(key: string, token: string): Promise<boolean>;
}

/**
 * The operations of a store that answers at once (the memory store), without the promises.
 * Internal: the receiver calls them directly, which saves a promise and a turn of the microtask
 * queue on every claim and every completion.
 */
export interface SyncOperations {
  claim(key: string, lockMs: number): ClaimResult;
  complete(key: string, token: string, ttlMs: number): boolean;
  release(key: string, token: string): boolean;
}

// Kept beside the store rather than on it: a copy (`{ ...store, claim: logged }`) or a store
// whose methods were replaced afterwards must go through its own methods, not around them.
const syncStores = new WeakMap<IdempotencyStore, { store: IdempotencyStore; operations: SyncOperations }>();

/** Records that `store`'s methods are `operations` behind promises. Internal, for stores. */
export function offerSyncOperations(store: IdempotencyStore, operations: SyncOperations): void {
  syncStores.set(store, { store: { claim: store.claim, complete: store.complete, release: store.release }, operations });
}

/** The synchronous operations behind `store`, while its methods are still the ones it was made with. */
export function syncOperations(store: IdempotencyStore): SyncOperations | undefined {
  const entry = syncStores.get(store);
  if (entry === undefined) return undefined;
  const made = entry.store;
  return store.claim === made.claim && store.complete === made.complete && store.release === made.release ? entry.operations : undefined;
}

/** '00' to 'ff': one look-up per byte. */
const HEX_PAIRS = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

/** Lower-case hex of `bytes`. Internal, for stores. */
export function toHex(bytes: Uint8Array): string {
  let hex = '';
  for (let i = 0; i < bytes.length; i++) hex += HEX_PAIRS[bytes[i]!]!;
  return hex;
}

/** A fresh 128-bit ownership token, as hex. */
export function newToken(): string {
  if (tokenOffset === tokenBytes.length) {
    globalThis.crypto.getRandomValues(tokenBytes);
    tokenOffset = 0;
  }
  tokenOffset += 16;
  return toHex(tokenBytes.subarray(tokenOffset - 16, tokenOffset));
}

// Random bytes for tokens, drawn 4 KiB at a time: one getRandomValues call costs Node about as
// much as a whole verification, and one call here serves 256 tokens. Filled on first use, not at
// load time (Workers refuse random numbers outside a request).
const tokenBytes = new Uint8Array(4096);
let tokenOffset = tokenBytes.length;

// Store arguments are checked the same way by every store, so a caller's mistake is a clear
// TypeError or RangeError rather than, say, a key that never expires.

function checkKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0) throw new TypeError('an idempotency key must be a non-empty string');
}

function checkToken(token: string): void {
  if (typeof token !== 'string' || token.length === 0) throw new TypeError('an ownership token must be a non-empty string');
}

function checkDuration(ms: number, name: 'lockMs' | 'ttlMs'): void {
  // Past 2^53 ms a store could no longer add the duration to its clock exactly.
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0 || ms > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`${name} must be a positive, finite number of milliseconds`);
  }
}

/** Checks the arguments of {@link IdempotencyStore.claim}. Internal, for stores. */
export function checkClaim(key: string, lockMs: number): void {
  checkKey(key);
  checkDuration(lockMs, 'lockMs');
}

/** Checks the arguments of {@link IdempotencyStore.complete}. Internal, for stores. */
export function checkComplete(key: string, token: string, ttlMs: number): void {
  checkKey(key);
  checkToken(token);
  checkDuration(ttlMs, 'ttlMs');
}

/** Checks the arguments of {@link IdempotencyStore.release}. Internal, for stores. */
export function checkRelease(key: string, token: string): void {
  checkKey(key);
  checkToken(token);
}

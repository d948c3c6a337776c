/**
 * The idempotency store contract: what every store (memory, Redis, Postgres, Durable Objects, or
 * one of your own) keeps, and what the receiver relies on. One rule lives in one place: the
 * conformance kit (`checkStore` in `webhook-receiver/testing`) checks exactly these.
 *
 * Keys: the receiver builds `${namespace}:s:${webhook-id}` for signed deliveries and
 * `${namespace}:u:${webhook-id}` for unsigned ones (a namespace never contains `:`, so the two
 * spaces cannot collide however the id is spelled). A store treats the key as opaque, except
 * that it reads the class after the first `:` to keep unsigned entries apart: every store the
 * package ships gives unsigned ids a budget of their own ({@link DEFAULT_UNSIGNED_MAX}), so
 * unsigned traffic can neither evict nor block a signed id.
 */

/**
 * 10 000 ids: the default unsigned budget of every store the package ships (`unsignedMax`). Unsigned
 * deliveries (accepted with `unsigned: 'accept'`, no secret needed to send one) never hold more
 * than this many entries in a store, whatever they send: about 1.3 MB in Redis, 10 000 rows in
 * Postgres (7.3 MB with indexes and 256-character ids), 10 000 records in 625 objects on Durable
 * Objects. The shared stores keep them in
 * buckets of 16 ids, the bucket a hash of the key; a full bucket (the memory store: a full space)
 * makes room by forgetting the unsigned completion that expires first, never a signed id and
 * never a claim whose handler still runs. Full of live claims, it refuses the claim with
 * {@link StoreError} `unsigned_limit`, which the receiver answers 503 `UNSIGNED_LIMIT` with
 * `Retry-After`.
 *
 * @example
 * ```ts
 * import { DEFAULT_UNSIGNED_MAX } from 'webhook-receiver';
 * import { redisStore } from 'webhook-receiver/redis';
 * const store = redisStore({ client: redis, unsignedMax: DEFAULT_UNSIGNED_MAX / 10 });
 * ```
 */
export const DEFAULT_UNSIGNED_MAX = 10_000;

/**
 * The answer to a claim: `acquired` (run the handler, then `complete` or `release` with the
 * token), `processing` (another delivery of this id holds the claim now) or `completed`.
 *
 * @example
 * ```ts
 * const result: ClaimResult = await store.claim('default:s:msg_1', 60_000);
 * if (result.status === 'acquired') await store.complete('default:s:msg_1', result.token, 86_400_000);
 * ```
 */
export type ClaimResult =
  | { status: 'acquired'; token: string }
  | { status: 'processing'; /** How long the current claim still holds, when the store knows. */ retryAfterMs?: number }
  | { status: 'completed' };

/**
 * An idempotency store: atomic claims keyed by namespace, key class and `webhook-id`.
 *
 * Rules every implementation keeps (the receiver fails closed on any answer outside them):
 * - `claim` atomically takes a free or expired key for `lockMs`, with a fresh ownership token;
 *   concurrent claims of one key: exactly one acquires.
 * - `complete` marks the key done for `ttlMs`, and `release` frees it, only while `token` still
 *   owns the claim; a handler whose lock expired and was taken over gets `false` and changes
 *   nothing.
 * - `complete` is idempotent for its own token: completing a key this token already completed
 *   answers `true` (a completion applied late, after a timeout, is not a takeover).
 * - `extend` (optional) pushes the lock of a claim this token still holds to `lockMs` from now,
 *   and answers `false` when the token no longer holds it. Without it the receiver cannot renew
 *   leases, and keeps the longer default lock.
 * - An unreachable backend rejects (never hangs): the receiver answers 503 `STORE_UNAVAILABLE`.
 * - Bad arguments reject with an `Error` (a `TypeError` is usual for a key or token that is not a
 *   non-empty string, a `RangeError` for a duration that is not a positive, finite number of
 *   milliseconds) and write nothing. A finite duration, however long, is the store's to accept or
 *   refuse (the shipped stores refuse more than 2^53 ms, which they could not add to a clock
 *   exactly); the receiver never sends one that long.
 * - A store may bound unsigned keys (class `u`) on their own: with no room left for a new one it
 *   rejects the claim with {@link StoreError} `unsigned_limit` (the receiver answers 503
 *   `UNSIGNED_LIMIT`, whatever `onStoreError` says). An unsigned key never takes a signed key's room.
 *
 * @example
 * ```ts
 * import { createReceiver, memoryStore } from 'webhook-receiver';
 * const receiver = createReceiver({ secrets, idempotency: { store: memoryStore({ max: 10_000 }) } });
 * ```
 */
export interface IdempotencyStore {
  /** Claims `key` for `lockMs` in one atomic step: `acquired` (with a token), `processing` or `completed`. */
  claim(key: string, lockMs: number): Promise<ClaimResult>;
  /** `false`: the token no longer owns the key (and did not complete it). */
  complete(key: string, token: string, ttlMs: number): Promise<boolean>;
  /** `false`: the token no longer owns the key. */
  release(key: string, token: string): Promise<boolean>;
  /**
   * Renews a held claim for `lockMs` from now; `false`: the token no longer owns the key. One
   * method, so its presence says on its own that the store renews claims.
   */
  extend?(key: string, token: string, lockMs: number): Promise<boolean>;
  /** Resolves when the backend answers (for readiness checks); rejects otherwise. */
  ping?(): Promise<void>;
  /** A short name for telemetry (`webhook.store`): `memory`, `redis`, … Default `custom`. */
  readonly name?: string;
  /**
   * The ordering operations (see {@link OrderingOperations}): a store that has them claims the id
   * and checks its entity's version in one atomic step. All five, or no `ordering` at all.
   */
  readonly ordering?: OrderingOperations;
}

/**
 * Where an ordered delivery stands, as a store receives it with each ordering operation.
 *
 * @example
 * ```ts
 * import { encodeVersion, type EntityOrder } from 'webhook-receiver';
 * const order: EntityOrder = { entity: 'default:o:sub_1', version: encodeVersion('2026-03-01T10:00:10.344522Z'), exclusive: true };
 * ```
 */
export interface EntityOrder {
  /** The entity's key, `${namespace}:o:${entity}` (opaque to the store). */
  readonly entity: string;
  /**
   * The delivery's version, fixed-width and order-preserving (`encodeVersion`): compare two of
   * them as strings, byte by byte (SQL `COLLATE "C"`, Lua's `<`, JavaScript's `<`), never as
   * numbers.
   */
  readonly version: string;
  /** Hold the entity's lock while the handler runs: another delivery of the entity is `busy`. */
  readonly exclusive: boolean;
}

/**
 * The answer to `claimOrdered`: a {@link ClaimResult}, or `stale` (an older version than the
 * entity's recorded one: the id is now recorded as done, the handler must not run) or `busy`
 * (exclusive, and another delivery of the entity holds its lock).
 *
 * @example
 * ```ts
 * const result: OrderedClaimResult = await store.ordering!.claimOrdered('default:s:msg_1', 30_000, 86_400_000, order);
 * if (result.status === 'stale') console.log('an older event; its handler does not run');
 * ```
 */
export type OrderedClaimResult =
  | ClaimResult
  | { status: 'stale' }
  | { status: 'busy'; /** How long the entity's lock still holds, when the store knows. */ retryAfterMs?: number };

/**
 * The ordering operations of an {@link IdempotencyStore}, its `ordering` member: all five or no
 * `ordering` at all (the types require all five; a receiver or a worker also refuses at run time
 * an `ordering` that lacks one, and a receiver built with `ordering` refuses a store without it).
 * The rules (checked by `checkStore`):
 *
 * - `claimOrdered(key, lockMs, ttlMs, order)` is `claim` plus, in the same atomic step (or, where
 *   the id and the entity cannot change together, once the id is claimed and while it is held):
 *   when the
 *   entity's recorded version (still kept) is higher than `order.version`, answer `stale` and
 *   record the id as done for `ttlMs` (its retries are duplicates); when `order.exclusive` and
 *   another token holds the entity's live lock, answer `busy` and take nothing; else acquire the
 *   id and, when exclusive, the entity's lock, both for `lockMs` with one token. An id already
 *   completed or held answers `completed` / `processing` first. An equal version is not stale.
 * - `completeOrdered(key, token, ttlMs, order)` is `complete` plus, in the same atomic step (or
 *   right after the id's completion) and only when the token still held the id: record `order.version` when it is higher than the
 *   recorded one (the recorded version never goes down), keep it at least `ttlMs` from now, and
 *   free the entity's lock this token holds.
 * - `releaseOrdered` is `release`, also freeing the entity's lock this token holds; the version
 *   is untouched (a failed newer delivery does not make an older one stale).
 * - `extendOrdered` is `extend` of both the id and (exclusive) the entity's lock; `false` when the
 *   token holds either no longer.
 * - `forgetVersion(entity)` deletes the recorded version, leaving a live lock alone.
 * - An id is one id with ordering or without, whatever its entity: `claim` and `claimOrdered` see
 *   the same ids, so an id completed or held through one answers `completed` or `processing` to
 *   the other (turning ordering on or off, or changing its key, never runs an id again).
 *
 * @example
 * ```ts
 * import type { IdempotencyStore, OrderingOperations } from 'webhook-receiver';
 * const orderingOf = (store: IdempotencyStore): OrderingOperations | undefined => store.ordering;
 * ```
 */
export interface OrderingOperations {
  /** Claims the id and checks its entity in one atomic step. */
  claimOrdered(key: string, lockMs: number, ttlMs: number, order: EntityOrder): Promise<OrderedClaimResult>;
  /** Completes the id and records the entity's version in one atomic step. */
  completeOrdered(key: string, token: string, ttlMs: number, order: EntityOrder): Promise<boolean>;
  /** Releases the id and the entity's lock this token holds. */
  releaseOrdered(key: string, token: string, order: EntityOrder): Promise<boolean>;
  /** Renews the id's claim and, when exclusive, the entity's lock. */
  extendOrdered(key: string, token: string, lockMs: number, order: EntityOrder): Promise<boolean>;
  /** Forgets the entity's recorded version (`receiver.forgetVersion`). */
  forgetVersion(entity: string): Promise<void>;
}

/**
 * The claim a running handler holds, as stores see it: `context.claim` in a handler. Opaque to
 * applications; a store's own helpers (for example the Postgres store's `transaction`) read it to
 * complete the claim inside the application's transaction, fenced by `token`.
 *
 * @example
 * ```ts
 * // In a store of your own: complete the claim together with the side effect.
 * async function completeWith(handle: ClaimHandle) {
 *   if (handle.store !== myStore) throw new TypeError('that claim belongs to another store');
 *   await db.run('UPDATE claims SET state = 1 WHERE key = ? AND token = ?', [handle.key, handle.token]);
 * }
 * ```
 */
export interface ClaimHandle {
  /** The store that granted the claim. */
  readonly store: IdempotencyStore;
  /** The full key, namespace and key class included. */
  readonly key: string;
  /** The ownership token the store issued. */
  readonly token: string;
  /** How long a completion is remembered, in milliseconds. */
  readonly ttlMs: number;
  /** The lock the claim was taken (and is renewed) for, in milliseconds. */
  readonly lockMs: number;
  /** With ordering: the delivery's entity and version, which the completion records. */
  readonly order?: EntityOrder;
}

/**
 * Why a store failed without an answer from its backend, or refused to answer safely. Backend
 * errors (a refused connection, a SQL error) pass through unchanged; the receiver turns either
 * into `STORE_UNAVAILABLE`.
 *
 * - `timeout`: no answer within the store's `timeoutMs`. The command may still run later.
 * - `not_ready`: the client reported that it lost its connection, so nothing was sent; or (the
 *   Postgres store's `transaction`) the connection was lost mid-transaction or could not be made.
 * - `full`: the memory store holds only live claims and cannot admit another without evicting
 *   one (which would let a duplicate through).
 * - `unsigned_limit`: unsigned deliveries have no room left in their budget (`unsignedMax`): the
 *   receiver answers 503 `UNSIGNED_LIMIT` with `Retry-After`. Signed deliveries are unaffected.
 * - `bad_reply`: the backend answered something outside the store's protocol.
 *
 * @example
 * ```ts
 * import { StoreError } from 'webhook-receiver';
 * const onError = (error: unknown) => {
 *   if (error instanceof StoreError && error.reason === 'timeout') metrics.increment(`${error.store}.timeout`);
 * };
 * ```
 */
export class StoreError extends Error {
  /** `timeout`, `not_ready`, `full`, `unsigned_limit` or `bad_reply`. */
  readonly reason: StoreErrorReason;
  /** Which store: `memory`, `redis`, `postgres`, `durable-object`. */
  readonly store: string;

  constructor(store: string, reason: StoreErrorReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
    this.store = store;
    this.reason = reason;
  }
}

/**
 * The reasons a {@link StoreError} names.
 *
 * @example
 * ```ts
 * const retryable: StoreErrorReason[] = ['timeout', 'not_ready'];
 * ```
 */
export type StoreErrorReason = 'timeout' | 'not_ready' | 'full' | 'unsigned_limit' | 'bad_reply';

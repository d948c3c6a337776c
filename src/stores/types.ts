/**
 * The idempotency store contract: what every store (memory, Redis, Postgres, Durable Objects, or
 * one of your own) keeps, and what the receiver relies on. One rule lives in one place: the
 * conformance kit (`checkStore` in `webhook-receiver/testing`) checks exactly these.
 *
 * Keys: the receiver builds `${namespace}:s:${webhook-id}` for signed deliveries and
 * `${namespace}:u:${webhook-id}` for unsigned ones (a namespace never contains `:`, so the two
 * spaces cannot collide however the id is spelled). A store treats the key as opaque, except
 * that it may read the class after the first `:` to keep unsigned entries apart (the memory
 * store bounds them separately).
 */

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
  /** Renews a held claim for `lockMs` from now; `false`: the token no longer owns the key. */
  extend?(key: string, token: string, lockMs: number): Promise<boolean>;
  /** Resolves when the backend answers (for readiness checks); rejects otherwise. */
  ping?(): Promise<void>;
  /** A short name for telemetry (`webhook.store`): `memory`, `redis`, … Default `custom`. */
  readonly name?: string;
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
}

/**
 * Why a store failed without an answer from its backend, or refused to answer safely. Backend
 * errors (a refused connection, a SQL error) pass through unchanged; the receiver turns either
 * into `STORE_UNAVAILABLE`.
 *
 * - `timeout`: no answer within the store's `timeoutMs`. The command may still run later.
 * - `not_ready`: the client reported that it lost its connection, so nothing was sent.
 * - `full`: the memory store holds only live claims and cannot admit another without evicting
 *   one (which would let a duplicate through).
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
  /** `timeout`, `not_ready`, `full` or `bad_reply`. */
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
export type StoreErrorReason = 'timeout' | 'not_ready' | 'full' | 'bad_reply';

/** The Postgres store's options, its type, and its defaults. */

import type { ClaimHandle, IdempotencyStore, OrderingOperations } from '../types.ts';
import type { PostgresClientLike } from './client.ts';

/**
 * Options of {@link postgresStore}.
 *
 * @example
 * ```ts
 * import type { PostgresStoreOptions } from 'webhook-receiver/postgres';
 * const options: PostgresStoreOptions<typeof pool> = { client: pool, table: 'billing.webhook_claims', timeoutMs: 1000 };
 * ```
 */
export interface PostgresStoreOptions<C extends PostgresClientLike = PostgresClientLike> {
  /**
   * The app's client: a `pg` `Pool` (needed for `transaction`), `Client` or `PoolClient`, or a
   * postgres.js `sql`. The store never connects, configures or closes it.
   */
  client: C;
  /** The table, optionally schema-qualified (`schema.table`). Default `'webhook_receiver_claims'`. */
  table?: string;
  /**
   * How long one operation may take before it rejects with `StoreError` `timeout` (the receiver
   * then answers 503 `STORE_UNAVAILABLE`). Default 2000.
   */
  timeoutMs?: number;
  /**
   * Delete expired rows on the request path too: one claim in {@link CLEANUP_EVERY} also deletes
   * up to {@link CLEANUP_STEP} expired rows (an index range scan, never a full one) in the same
   * statement. Default `true`; turn it off when `cleanup()` runs on a schedule.
   */
  autoCleanup?: boolean;
  /**
   * `pg` only: send the store's statements as named prepared statements, parsed and planned once
   * per connection instead of on every call (the claim statement's planning was most of its cost
   * on the server: 202 µs of Postgres CPU per claim unnamed, 95 µs prepared). Default `true`.
   * Turn it off behind a pooler that does not keep prepared statements across transactions
   * (PgBouncer in transaction mode before 1.21, or without `max_prepared_statements`). postgres.js
   * follows its own `prepare` option.
   */
  prepare?: boolean;
  /**
   * The unsigned budget: how many rows unsigned ids may hold at most, in the table
   * `<table>_unsigned` (in buckets of 16, see {@link postgresStore}). Default 10 000
   * ({@link DEFAULT_UNSIGNED_MAX}). Changing it moves unsigned ids to other slots: their
   * deduplication starts again, and rows of slots past a lowered bound stay until deleted by hand.
   */
  unsignedMax?: number;
}

/**
 * The Postgres store: {@link IdempotencyStore} with lease renewal, readiness, set-up, clean-up and
 * transactional completion.
 *
 * @example
 * ```ts
 * import { postgresStore, type PostgresStore } from 'webhook-receiver/postgres';
 * const store: PostgresStore<pg.PoolClient> = postgresStore({ client: pool });
 * await store.setup();
 * ```
 */
export interface PostgresStore<Tx = unknown> extends IdempotencyStore {
  /** The ordering operations: this store has all five. */
  readonly ordering: OrderingOperations;
  /** Creates the tables (claims, unsigned slots) and the index when missing (`CREATE … IF NOT EXISTS`): safe to run at every start. */
  setup(): Promise<void>;
  extend(key: string, token: string, lockMs: number): Promise<boolean>;
  /**
   * Runs `fn` in one transaction that also completes the handler's claim, fenced by its token.
   * Commit means both the side effect and the completion; anything else means neither. When the
   * claim was lost (its lock expired and was taken over, or the row is gone), the transaction rolls
   * back and this rejects with {@link ClaimLostError}.
   *
   * `context` is the handler's `WebhookContext`; without a claim (idempotency off, or a claim that
   * `onStoreError: 'process'` skipped) `fn` still runs in a transaction, with nothing to complete.
   */
  transaction<T>(context: TransactionContext, fn: (tx: Tx) => Promise<T> | T): Promise<T>;
  /**
   * Deletes expired rows, {@link CLEANUP_BATCH} per statement, until none is left or `maxRows`
   * (default 100 000) are gone. Resolves with how many rows it deleted.
   */
  cleanup(options?: { maxRows?: number }): Promise<number>;
  ping(): Promise<void>;
}

/**
 * What {@link PostgresStore.transaction} reads from the handler's `WebhookContext`.
 *
 * @example
 * ```ts
 * const context: TransactionContext = { claim: { store, key, token, ttlMs: 86_400_000, lockMs: 60_000 } };
 * ```
 */
export interface TransactionContext {
  readonly claim?: ClaimHandle | undefined;
  /** When aborted before the commit, the transaction rolls back with the signal's reason. */
  readonly signal?: AbortSignal;
}


/**
 * `'webhook_receiver_claims'`: the default table of {@link postgresStore}.
 *
 * @example
 * ```ts
 * import { DEFAULT_POSTGRES_TABLE } from 'webhook-receiver/postgres';
 * await pool.query(`SELECT count(*) FROM ${DEFAULT_POSTGRES_TABLE}`);
 * ```
 */
export const DEFAULT_POSTGRES_TABLE = 'webhook_receiver_claims';

/**
 * 2000 ms: the default per-operation timeout of {@link postgresStore}.
 *
 * @example
 * ```ts
 * import { DEFAULT_POSTGRES_TIMEOUT_MS, postgresStore } from 'webhook-receiver/postgres';
 * const store = postgresStore({ client: pool, timeoutMs: DEFAULT_POSTGRES_TIMEOUT_MS / 2 });
 * ```
 */
export const DEFAULT_POSTGRES_TIMEOUT_MS = 2000;

/**
 * 1000: the rows one `cleanup()` statement deletes at most, so no statement holds many locks or
 * runs long.
 *
 * @example
 * ```ts
 * import { CLEANUP_BATCH } from 'webhook-receiver/postgres';
 * const deleted = await store.cleanup({ maxRows: 10 * CLEANUP_BATCH });
 * ```
 */
export const CLEANUP_BATCH = 1000;

/**
 * 16: with `autoCleanup`, one claim in this many also deletes expired rows.
 *
 * @example
 * ```ts
 * import { CLEANUP_EVERY, CLEANUP_STEP } from 'webhook-receiver/postgres';
 * console.log(`up to ${CLEANUP_STEP / CLEANUP_EVERY} expired rows deleted per claim`);
 * ```
 */
export const CLEANUP_EVERY = 16;

/**
 * 64: with `autoCleanup`, how many expired rows such a claim deletes at most: four per claim on
 * average, more than the one row a claim can add, so the table stays bounded without a schedule.
 *
 * @example
 * ```ts
 * import { CLEANUP_STEP } from 'webhook-receiver/postgres';
 * console.log(CLEANUP_STEP); // 64
 * ```
 */
export const CLEANUP_STEP = 64;

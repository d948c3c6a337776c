/**
 * The PostgreSQL idempotency store: `webhook-receiver/postgres`.
 *
 * One table, one row per key: `token` (the claim's owner), `completed`, and `expires_at` (the end
 * of the lock while a handler runs, the end of the memory once completed), always on the server's
 * clock. Every operation is one SQL statement, so one round trip, atomic under concurrency without
 * locks held across round trips; the key is the primary key, so a claim is one index look-up.
 *
 * Unsigned ids live in a second table of at most `unsignedMax` slots, `<table>_unsigned`,
 * in buckets of 16, the bucket a hash of the key (`hashtextextended`, which hash partitioning relies
 * on to stay the same across PostgreSQL versions): unsigned traffic never holds more rows, whatever
 * it sends. A full bucket makes room by forgetting the unsigned completion that expires first; full
 * of live claims, it refuses (`unsigned_limit`). Still one statement per operation.
 *
 * Transactional mode (`store.transaction`) completes the claim inside the application's own
 * transaction, fenced by the claim's token: the side effect and the completion commit together or
 * not at all, which closes the one gap no external store can (a crash between the effect and the
 * completion).
 *
 * The client is the application's: a `pg` Pool (or Client) or a postgres.js `sql`, told apart by
 * shape. Neither is imported.
 *
 * @module webhook-receiver/postgres
 */

import {
  checkClaim,
  checkClaimOrdered,
  checkComplete,
  checkEntity,
  checkExtend,
  checkOrder,
  checkRelease,
  checkTimeoutOption,
  checkUnsignedMax,
  describeValue,
  fnv1a,
  isUnsignedKey,
  newToken,
  noteCompletingInStore,
  timeoutError,
  unsignedBuckets,
  unsignedLimitError,
  withTimeout,
} from './internal.ts';
import { StoreError, type ClaimHandle, type ClaimResult, type IdempotencyStore, type OrderedClaimResult, type OrderingOperations } from './types.ts';

export { DEFAULT_UNSIGNED_MAX, StoreError, type ClaimHandle, type StoreErrorReason } from './types.ts';

/**
 * What a `pg` query resolves with, as far as the store reads it.
 *
 * @example
 * ```ts
 * import type { PgResultLike } from 'webhook-receiver/postgres';
 * const result: PgResultLike = await pool.query('SELECT 1 AS one');
 * ```
 */
export interface PgResultLike {
  rows: unknown[];
}

/**
 * The part of a `pg` `Client` or `PoolClient` the store uses: `query(text, values)`. A single
 * client serves claims; {@link PostgresStore.transaction} needs a pool (see {@link PgPoolLike}),
 * because statements sent on a client inside a transaction would join that transaction.
 *
 * @example
 * ```ts
 * import pg from 'pg';
 * import type { PgClientLike } from 'webhook-receiver/postgres';
 * const client: PgClientLike = new pg.Client(process.env.DATABASE_URL);
 * ```
 */
export interface PgClientLike {
  /** A statement with `$1`-style parameters. */
  query(text: string, values?: unknown[]): Promise<PgResultLike>;
  /** A named statement: `pg` prepares it once per connection, then only binds and executes it. */
  query(config: PgQueryConfigLike): Promise<PgResultLike>;
}

/**
 * A `pg` query config with a statement name, as the store sends its own statements (see
 * {@link PostgresStoreOptions.prepare}).
 *
 * @example
 * ```ts
 * import type { PgQueryConfigLike } from 'webhook-receiver/postgres';
 * const config: PgQueryConfigLike = { name: 'one', text: 'SELECT $1::int AS one', values: [1] };
 * await pool.query(config);
 * ```
 */
export interface PgQueryConfigLike {
  name: string;
  text: string;
  values: unknown[];
}

/**
 * A connection checked out of a `pg` pool: what `tx` is in {@link PostgresStore.transaction}.
 *
 * @example
 * ```ts
 * import type { PgPoolClientLike } from 'webhook-receiver/postgres';
 * const client: PgPoolClientLike = await pool.connect();
 * client.release();
 * ```
 */
export interface PgPoolClientLike extends PgClientLike {
  /** Returns the connection to its pool; an error (or `true`) destroys it instead. */
  release(error?: Error | boolean): void;
  /**
   * `pg` emits `'error'` on a connection whose server went away (a restart, a failover,
   * `pg_terminate_backend`); the store listens while it holds the connection.
   */
  on?(event: 'error', listener: (error: Error) => void): unknown;
  /** Takes the store's listener off a connection that goes back to its pool healthy. */
  removeListener?(event: 'error', listener: (error: Error) => void): unknown;
}

/**
 * The part of a `pg` `Pool` the store uses. Declared here so that neither the package nor its
 * types need `pg` installed.
 *
 * @example
 * ```ts
 * import pg from 'pg';
 * import type { PgPoolLike } from 'webhook-receiver/postgres';
 * const pool: PgPoolLike = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * ```
 */
export interface PgPoolLike extends PgClientLike {
  /** Checks a connection out of the pool, for a transaction. */
  connect(): Promise<PgPoolClientLike>;
  /** Read to tell a pool from a single client (both have `connect` and `query`). */
  readonly totalCount: number;
}

/**
 * The part of a postgres.js `sql` instance (v3) the store uses. Declared here so that neither the
 * package nor its types need `postgres` installed.
 *
 * @example
 * ```ts
 * import postgres from 'postgres';
 * import type { PostgresJsSqlLike } from 'webhook-receiver/postgres';
 * const sql: PostgresJsSqlLike = postgres(process.env.DATABASE_URL!);
 * ```
 */
export interface PostgresJsSqlLike {
  /** A statement with `$1`-style parameters, as text. */
  unsafe(query: string, parameters?: never[]): PromiseLike<readonly object[]>;
  /** Runs `fn` inside `BEGIN … COMMIT` on one connection (rolled back when `fn` rejects). */
  begin(options: string, fn: (sql: PostgresJsTransactionLike) => unknown): Promise<unknown>;
}

/**
 * The part of a postgres.js transaction `sql` the store uses.
 *
 * @example
 * ```ts
 * import type { PostgresJsTransactionLike } from 'webhook-receiver/postgres';
 * await sql.begin(async (tx) => {
 *   const inside: PostgresJsTransactionLike = tx;
 * });
 * ```
 */
export interface PostgresJsTransactionLike {
  /** A statement with `$1`-style parameters, inside the transaction. */
  unsafe(query: string, parameters?: never[]): PromiseLike<readonly object[]>;
}

/**
 * A client the store accepts: a `pg` `Pool`, `Client` or `PoolClient`, or a postgres.js `sql`.
 *
 * @example
 * ```ts
 * import postgres from 'postgres';
 * import type { PostgresClientLike } from 'webhook-receiver/postgres';
 * const client: PostgresClientLike = postgres(process.env.DATABASE_URL!);
 * ```
 */
export type PostgresClientLike = PgPoolLike | PgClientLike | PostgresJsSqlLike;

/**
 * The `tx` that {@link PostgresStore.transaction} hands the callback for a client of type `C`: the
 * pool's own `PoolClient` type for `pg` (inferred from `Pool.connect`), the transaction `sql` of
 * postgres.js.
 *
 * @example
 * ```ts
 * import type pg from 'pg';
 * import type { TransactionOf } from 'webhook-receiver/postgres';
 * type Tx = TransactionOf<pg.Pool>; // pg.PoolClient
 * ```
 */
export type TransactionOf<C> = C extends PostgresJsSqlLike
  ? C extends {
      /** postgres.js: the transaction `sql` is what `begin` hands its callback. */
      begin(options: string, fn: (sql: infer S) => infer _R): unknown;
    }
    ? S
    : PostgresJsTransactionLike
  : // pg's Pool declares connect() twice; inference reads the last (callback) overload.
    C extends {
        /** pg: the pool's client type, from the callback overload of `connect`. */
        connect(callback: (error: infer _E, client: infer P, done: infer _D) => void): void;
      }
    ? NonNullable<P>
    : C extends {
          /** A pool-like type with only the promise form of `connect`. */
          connect(): Promise<infer P>;
        }
      ? P
      : PgPoolClientLike;

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
export interface PostgresStore<Tx = unknown> extends Omit<IdempotencyStore, keyof OrderingOperations>, OrderingOperations {
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
 * The transaction could not complete the claim, so it rolled back: the claim's lock expired (the
 * handler ran past `lockSeconds`) and another delivery took it over, or its row was deleted, or it
 * was completed already. The side effect did not happen; the delivery that holds the claim now
 * runs it.
 *
 * @example
 * ```ts
 * import { ClaimLostError } from 'webhook-receiver/postgres';
 * try { await store.transaction(context, work); }
 * catch (error) { if (error instanceof ClaimLostError) log.warn(`rolled back: ${error.key}`); throw error; }
 * ```
 */
export class ClaimLostError extends Error {
  /** The claim's key. */
  readonly key: string;

  constructor(key: string) {
    super(
      `postgres store: the claim on ${JSON.stringify(key)} was lost before commit (its lock expired and another delivery may have taken it over), so the transaction rolled back and its side effects are undone`,
    );
    this.name = 'ClaimLostError';
    this.key = key;
  }
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

/** `name` or `schema.name`, each part a plain identifier (quoted in SQL, so case is kept). */
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/;

/**
 * The SQL that {@link PostgresStore.setup} runs for a table name (what docs/postgres.md prints), for
 * teams that migrate by hand.
 *
 * @example
 * ```ts
 * import { setupSql } from 'webhook-receiver/postgres';
 * writeFileSync('migrations/042_webhook_claims.sql', setupSql('billing.webhook_claims').join(';\n') + ';\n');
 * ```
 */
export function setupSql(table: string = DEFAULT_POSTGRES_TABLE): string[] {
  const { qualified, indexName, unsigned } = tableNames(table);
  return [
    `CREATE TABLE IF NOT EXISTS ${qualified} (
  key          text        PRIMARY KEY,
  token        text        NOT NULL,
  completed    boolean     NOT NULL DEFAULT false,
  expires_at   timestamptz NOT NULL,
  version      text        COLLATE "C",
  locked_until timestamptz
)`,
    // Ordering (an entity's row: its highest version and its lock). Added to a table made before
    // ordering existed; nothing else reads these columns. Versions compare byte by byte ("C").
    `ALTER TABLE ${qualified} ADD COLUMN IF NOT EXISTS version text COLLATE "C", ADD COLUMN IF NOT EXISTS locked_until timestamptz`,

    // Clean-up reads expired rows oldest first through this index: bounded range scans, never a
    // full one.
    `CREATE INDEX IF NOT EXISTS ${indexName} ON ${qualified} (expires_at)`,
    // The unsigned budget: at most one row a slot, however many unsigned ids arrive.
    `CREATE TABLE IF NOT EXISTS ${unsigned} (
  slot       integer     PRIMARY KEY,
  key        text        NOT NULL UNIQUE,
  token      text        NOT NULL,
  completed  boolean     NOT NULL DEFAULT false,
  expires_at timestamptz NOT NULL
)`,
  ];
}

/** The SQL names of a table option: the claims table, its index, and the unsigned slots table. */
function tableNames(table: string): { qualified: string; indexName: string; unsigned: string } {
  if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
    throw new TypeError(`postgresStore table must be a plain identifier or schema.identifier (letters, digits, _), got ${typeof table === 'string' ? JSON.stringify(table) : describeValue(table)}`);
  }
  const parts = table.split('.');
  const bare = parts[parts.length - 1]!;
  const unsignedBare = `${bare.slice(0, 63 - '_unsigned'.length)}_unsigned`;
  // Only a 63-character name ending in `_unsigned` would name itself.
  if (unsignedBare === bare) throw new TypeError(`postgresStore table ${JSON.stringify(table)} leaves no name for its unsigned table: use a shorter name`);
  const quoted = parts.map((part) => `"${part}"`);
  return {
    qualified: quoted.join('.'),
    indexName: `"${`${bare}_expires_at`.slice(0, 63)}"`,
    unsigned: [...quoted.slice(0, -1), `"${unsignedBare}"`].join('.'),
  };
}

/**
 * One of the store's statements and the name it is prepared under: the operation, then a hash of
 * the text, so two stores on different tables in one app never give one name two texts (which
 * `pg` refuses).
 */
interface Statement {
  name: string;
  text: string;
}

/** The statements of one key class (signed ids in the claims table, unsigned ones in their slots). */
interface KeyStatements {
  claim: Statement;
  complete: Statement;
  completeInTransaction: Statement;
  release: Statement;
  extend: Statement;
}

/** The statements of one table option, built once per store. */
interface Statements {
  signed: KeyStatements;
  unsigned: KeyStatements;
  /** Ordering: signed ids and their entities' rows, in the claims table. */
  ordered: Record<keyof ReturnType<typeof orderedTexts>, Statement>;
  cleanup: Statement;
}

/** A short, stable name for a statement's text: its FNV-1a hash as 8 hex digits. */
function textHash(text: string): string {
  return fnv1a(text).toString(16).padStart(8, '0');
}

function named<K extends string>(texts: Record<K, string>, suffix = ''): Record<K, Statement> {
  const result = {} as Record<K, Statement>;
  for (const operation of Object.keys(texts) as K[]) {
    const text = texts[operation];
    result[operation] = { name: `webhook_receiver_${operation}${suffix}_${textHash(text)}`, text };
  }
  return result;
}

function statements(table: string, unsignedMax: number): Statements {
  const { qualified, unsigned } = tableNames(table);
  const { cleanup, ...signed } = signedTexts(qualified);
  return {
    signed: named(signed),
    unsigned: named(unsignedTexts(unsigned, unsignedMax), '_unsigned'),
    ordered: named(orderedTexts(qualified)),
    cleanup: named({ cleanup }).cleanup,
  };
}

// `clock_timestamp()`, not `now()`: inside an application's transaction `now()` is the time the
// transaction began, and a lock check must use the time of the statement.
const ms = (param: string) => `clock_timestamp() + ${param}::float8 * interval '1 millisecond'`;

/**
 * Complete, release and extend of the row that `match` finds for key `$1` and token `$2` in `t`:
 * the same for both key classes.
 */
function ownedTexts(t: string, match: string): Omit<Record<keyof KeyStatements, string>, 'claim'> {
  return {
    // Complete: while the token holds a live lock; again for a row this token completed already,
    // while that completion lasts (once its TTL ran out the id is forgotten, even before clean-up
    // deletes the row, as in every other store).
    complete: `UPDATE ${t} SET completed = true, expires_at = CASE WHEN completed THEN expires_at ELSE ${ms('$3')} END
WHERE ${match} AND token = $2 AND expires_at > clock_timestamp()
RETURNING 1`,
    // In a transaction: only a live lock, never a completed row, so a second transaction for one
    // claim rolls back instead of committing a second effect.
    completeInTransaction: `UPDATE ${t} SET completed = true, expires_at = ${ms('$3')}
WHERE ${match} AND token = $2 AND NOT completed AND expires_at > clock_timestamp()
RETURNING 1`,
    release: `DELETE FROM ${t} WHERE ${match} AND token = $2 AND NOT completed AND expires_at > clock_timestamp() RETURNING 1`,
    extend: `UPDATE ${t} SET expires_at = ${ms('$3')}
WHERE ${match} AND token = $2 AND NOT completed AND expires_at > clock_timestamp()
RETURNING 1`,
  };
}

/** How many times an unsigned claim is sent when other ids keep taking the free slot it aimed at. */
const UNSIGNED_CLAIM_ATTEMPTS = 3;

/**
 * The unsigned statements: the table has `buckets × ways` slots, and an id goes to a slot of its
 * bucket, computed on the server from the key, so every instance agrees on it whatever its version
 * of the package. The key is unique too, so the other operations find their row by key.
 */
function unsignedTexts(u: string, unsignedMax: number): Record<keyof KeyStatements, string> {
  const { buckets, ways } = unsignedBuckets(unsignedMax);
  const first = `((hashtextextended($1, 0) % ${buckets} + ${buckets}) % ${buckets})::int * ${ways}`;
  return {
    // As the signed claim when the id has a row. Otherwise into a slot of its bucket: a free one,
    // else an expired one, else the completion that expires first (that unsigned id is forgotten
    // early); a bucket full of live claims has no target (room = false), and the claim is refused.
    // Two claims of one id racing for two slots: the second breaks the key's uniqueness (23505),
    // read as `processing`; two ids racing for one slot: the second finds it taken (room = true,
    // not acquired) and tries again.
    claim: `WITH own AS (
  SELECT slot, completed, expires_at FROM ${u} WHERE key = $1
), target AS (
  SELECT s AS slot FROM generate_series(${first}, ${first} + ${ways - 1}) AS s LEFT JOIN ${u} ON ${u}.slot = s
  WHERE NOT EXISTS (SELECT 1 FROM own) AND (${u}.slot IS NULL OR ${u}.expires_at <= clock_timestamp() OR ${u}.completed)
  ORDER BY ${u}.slot IS NOT NULL, ${u}.expires_at <= clock_timestamp() DESC, ${u}.expires_at
  LIMIT 1
), claimed AS (
  INSERT INTO ${u} AS c (slot, key, token, completed, expires_at)
  SELECT coalesce((SELECT slot FROM own), (SELECT slot FROM target)), $1, $2, false, ${ms('$3')}
  WHERE EXISTS (SELECT 1 FROM own WHERE expires_at <= clock_timestamp()) OR EXISTS (SELECT 1 FROM target)
  ON CONFLICT (slot) DO UPDATE SET key = excluded.key, token = excluded.token, completed = false, expires_at = excluded.expires_at
  WHERE c.expires_at <= clock_timestamp() OR (c.completed AND c.key <> excluded.key)
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM claimed) AS acquired,
  EXISTS (SELECT 1 FROM own) AS own,
  EXISTS (SELECT 1 FROM target) AS room,
  (SELECT completed FROM own) AS completed,
  (SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 FROM own) AS left_ms`,
    ...ownedTexts(u, 'key = $1'),
  };
}

function signedTexts(t: string): Record<keyof KeyStatements | 'cleanup', string> {
  return {
    // One statement: look (snapshot), lock without waiting, then insert or take over
    // an expired row. `free` locks the row with SKIP LOCKED, so a row that another transaction
    // holds (an application transaction between its completion and its COMMIT, or a crashed
    // client's not yet rolled back) answers `processing` at once instead of waiting for it;
    // INSERT … ON CONFLICT DO UPDATE would lock, and so wait, even when its WHERE fails. `sweep`
    // (LIMIT 0 on most claims) deletes a few expired rows of other keys through the expires_at
    // index. Its bound is `(SELECT clock_timestamp())`, computed once: a volatile function
    // compared directly cannot bound an index scan, so `expires_at < clock_timestamp()` read the
    // whole index, every row a live one, on every sweep (3.9 ms at 50 000 rows, growing with the
    // table), where the sub-select's value bounds the scan.
    claim: `WITH seen AS (
  SELECT completed, expires_at FROM ${t} WHERE key = $1
), free AS (
  SELECT 1 FROM ${t} WHERE key = $1 FOR UPDATE SKIP LOCKED
), claimed AS (
  INSERT INTO ${t} AS c (key, token, completed, expires_at)
  SELECT $1, $2, false, ${ms('$3')}
  WHERE NOT EXISTS (SELECT 1 FROM seen) OR EXISTS (SELECT 1 FROM free)
  ON CONFLICT (key) DO UPDATE SET token = excluded.token, completed = false, expires_at = excluded.expires_at
  WHERE c.expires_at <= clock_timestamp()
  RETURNING 1
), sweep AS (
  DELETE FROM ${t} WHERE key IN (
    SELECT key FROM ${t} WHERE expires_at < (SELECT clock_timestamp()) AND key <> $1
    ORDER BY expires_at LIMIT $4::int FOR UPDATE SKIP LOCKED)
)
SELECT EXISTS (SELECT 1 FROM claimed) AS acquired,
  (SELECT completed FROM seen) AS completed,
  (SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 FROM seen) AS left_ms`,
    ...ownedTexts(t, 'key = $1'),
    cleanup: `WITH gone AS (
  DELETE FROM ${t} WHERE key IN (
    SELECT key FROM ${t} WHERE expires_at < (SELECT clock_timestamp()) ORDER BY expires_at LIMIT $1::int FOR UPDATE SKIP LOCKED)
  RETURNING 1
) SELECT count(*)::int AS deleted FROM gone`,
  };
}

/**
 * Ordering: each operation one statement over a signed id's row and its entity's row,
 * both in the claims table.
 */
function orderedTexts(t: string) {
  // Ordering: an entity's row (key `${namespace}:o:${entity}`) holds its highest completed
  // version (`version`, kept until `expires_at`) and its lock (`token`, `locked_until`). Its
  // `expires_at` is never before its lock's end, so clean-up never drops a live lock.
  // Completing: the id as `complete` does; in the same statement, only when the id was this
  // token's, the entity's version is raised (never lowered), kept ttlMs from now at least, and
  // the lock this token holds is freed.
  const completeOrdered = (inTransaction: boolean) => `WITH done AS (
  UPDATE ${t} SET completed = true, expires_at = ${inTransaction ? ms('$3') : `CASE WHEN completed THEN expires_at ELSE ${ms('$3')} END`}
  WHERE key = $1 AND token = $2 AND ${inTransaction ? 'NOT completed AND ' : ''}expires_at > clock_timestamp()
  RETURNING 1
), recorded AS (
  INSERT INTO ${t} AS c (key, token, completed, expires_at, version)
  SELECT $4, '', true, ${ms('$3')}, $5 WHERE EXISTS (SELECT 1 FROM done)
  ON CONFLICT (key) DO UPDATE SET
    version = CASE WHEN c.version IS NULL OR c.expires_at <= clock_timestamp() OR c.version < excluded.version COLLATE "C" THEN excluded.version ELSE c.version END,
    expires_at = greatest(c.expires_at, excluded.expires_at),
    token = CASE WHEN c.token = $2 THEN '' ELSE c.token END,
    locked_until = CASE WHEN c.token = $2 THEN NULL ELSE c.locked_until END
  RETURNING 1
)
SELECT 1 AS done FROM done`;
  return {
    // One statement, so versions are compared where the claim is made: the id as `claim` looks
    // at it, then, from the same snapshot, the entity's version: an older delivery is stale (its
    // id is inserted as completed for ttlMs). Exclusive, the entity's lock is taken by an upsert
    // whose WHERE is evaluated on the row as it is once locked, so two deliveries of one entity
    // cannot both take it, and a version recorded meanwhile is seen; only then is the id
    // inserted. A stale verdict from the snapshot is final (versions never go down); a version
    // recorded after the snapshot makes the upsert fail, answered `busy` (the retry sees it).
    claimOrdered: `WITH seen AS (
  SELECT completed, expires_at FROM ${t} WHERE key = $1
), free AS (
  SELECT 1 FROM ${t} WHERE key = $1 FOR UPDATE SKIP LOCKED
), open AS (
  SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM seen) OR (EXISTS (SELECT 1 FROM free) AND (SELECT expires_at FROM seen) <= clock_timestamp())
), ent AS (
  SELECT version, locked_until FROM ${t} WHERE key = $5 AND expires_at > clock_timestamp()
), stale AS (
  SELECT 1 FROM ent WHERE version > $6::text COLLATE "C"
), locked AS (
  INSERT INTO ${t} AS c (key, token, completed, expires_at, locked_until)
  SELECT $5, $2, true, ${ms('$3')}, ${ms('$3')}
  WHERE $7::boolean AND EXISTS (SELECT 1 FROM open) AND NOT EXISTS (SELECT 1 FROM stale)
  ON CONFLICT (key) DO UPDATE SET token = excluded.token, locked_until = excluded.locked_until,
    version = CASE WHEN c.expires_at <= clock_timestamp() THEN NULL ELSE c.version END,
    expires_at = greatest(c.expires_at, excluded.expires_at)
  WHERE (c.locked_until IS NULL OR c.locked_until <= clock_timestamp())
    AND (c.version IS NULL OR c.expires_at <= clock_timestamp() OR c.version <= $6::text COLLATE "C")
  RETURNING 1
), claimed AS (
  INSERT INTO ${t} AS c (key, token, completed, expires_at)
  SELECT $1, $2, EXISTS (SELECT 1 FROM stale), CASE WHEN EXISTS (SELECT 1 FROM stale) THEN ${ms('$4')} ELSE ${ms('$3')} END
  WHERE EXISTS (SELECT 1 FROM open) AND (EXISTS (SELECT 1 FROM stale) OR NOT $7::boolean OR EXISTS (SELECT 1 FROM locked))
  ON CONFLICT (key) DO UPDATE SET token = excluded.token, completed = excluded.completed, expires_at = excluded.expires_at
  WHERE c.expires_at <= clock_timestamp()
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM claimed) AS acquired,
  EXISTS (SELECT 1 FROM stale) AS stale,
  (SELECT completed FROM seen) AS completed,
  (SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 FROM seen) AS left_ms,
  (SELECT ceil(extract(epoch FROM locked_until - clock_timestamp()) * 1000)::float8 FROM ent WHERE locked_until > clock_timestamp()) AS busy_ms`,
    completeOrdered: completeOrdered(false),
    completeOrderedInTransaction: completeOrdered(true),
    releaseOrdered: `WITH unlocked AS (
  UPDATE ${t} SET token = '', locked_until = NULL WHERE key = $3 AND token = $2 RETURNING 1
), released AS (
  DELETE FROM ${t} WHERE key = $1 AND token = $2 AND NOT completed AND expires_at > clock_timestamp() RETURNING 1
)
SELECT 1 AS released FROM released`,
    // Both the id and (exclusive) the entity's lock, or neither.
    extendOrdered: `WITH ent AS (
  SELECT 1 FROM ${t} WHERE key = $4 AND token = $2 AND locked_until > clock_timestamp()
), id AS (
  UPDATE ${t} SET expires_at = ${ms('$3')}
  WHERE key = $1 AND token = $2 AND NOT completed AND expires_at > clock_timestamp() AND (NOT $5::boolean OR EXISTS (SELECT 1 FROM ent))
  RETURNING 1
), lock AS (
  UPDATE ${t} SET locked_until = ${ms('$3')}, expires_at = greatest(expires_at, ${ms('$3')})
  WHERE $5::boolean AND key = $4 AND token = $2 AND EXISTS (SELECT 1 FROM id)
  RETURNING 1
)
SELECT 1 AS owned FROM id`,
    forgetVersion: `UPDATE ${t} SET version = NULL WHERE key = $1`,
    // One statement: look (snapshot), lock without waiting, then insert or take over
    // an expired row. `free` locks the row with SKIP LOCKED, so a row that another transaction
    // holds (an application transaction between its completion and its COMMIT, or a crashed
    // client's not yet rolled back) answers `processing` at once instead of waiting for it;
    // INSERT … ON CONFLICT DO UPDATE would lock, and so wait, even when its WHERE fails. `sweep`
    // (LIMIT 0 on most claims) deletes a few expired rows of other keys through the expires_at
    // index. Its bound is `(SELECT clock_timestamp())`, computed once: a volatile function
    // compared directly cannot bound an index scan, so `expires_at < clock_timestamp()` read the
    // whole index, every row a live one, on every sweep (3.9 ms at 50 000 rows, growing with the
    // table), where the sub-select's value bounds the scan.
  };
}

type Row = Record<string, unknown>;

/** One statement inside a transaction, bounded by the store's timeout; `operation` names it in a timeout. */
type TransactionRun = (statement: string | Statement, values: unknown[], operation: string) => Promise<Row[]>;

/** One client library, seen through what the store sends. */
interface Driver {
  /** One statement, one round trip. */
  run(statement: string | Statement, values: unknown[]): Promise<Row[]>;
  /**
   * `fn` inside BEGIN … COMMIT; its rejection rolls back. Every wait on the server (connect,
   * BEGIN, the store's statements, COMMIT) is bounded by the store's timeout here, inside the
   * driver, so a dead server rejects with `StoreError` `timeout` instead of hanging; the app's own
   * statements in `fn` are the app's to bound.
   */
  transaction<T>(fn: (run: TransactionRun, tx: unknown) => Promise<T>): Promise<T>;
}

function isPostgresJs(client: object): client is PostgresJsSqlLike {
  const candidate = client as Partial<PostgresJsSqlLike>;
  return typeof client === 'function' && typeof candidate.unsafe === 'function' && typeof candidate.begin === 'function';
}

function isPgPool(client: PgClientLike): client is PgPoolLike {
  const candidate = client as Partial<PgPoolLike>;
  return typeof candidate.connect === 'function' && typeof candidate.totalCount === 'number';
}

/**
 * SQLSTATEs and driver codes that mean the connection is gone, not that a statement failed:
 * 57P01-57P03 (the server is shutting down, crashed or not accepting connections yet; sent to
 * every session on a restart or a failover, and by `pg_terminate_backend`), postgres.js's own
 * codes for a closed connection, and the socket's errors. SQLSTATE class 08 (connection
 * exceptions) too.
 */
const CONNECTION_LOST_CODES = new Set([
  '57P01',
  '57P02',
  '57P03',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
]);

function connectionFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (CONNECTION_LOST_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code));
}

/**
 * A connection failure that postgres.js reported for a statement: it marks every statement's
 * error with the statement (`query`, `parameters`). A code alone proves nothing: a handler's own
 * error (its HTTP call's `ECONNRESET`) carries the same codes on a healthy connection.
 */
function postgresJsStatementLost(error: unknown): boolean {
  return connectionFailure(error) && typeof error === 'object' && error !== null && Object.hasOwn(error, 'query') && Object.hasOwn(error, 'parameters');
}

/**
 * A transaction that could not connect, or was cut off by a lost connection, as the outage it is
 * (`not_ready`: the receiver answers 503 `STORE_UNAVAILABLE`).
 */
function connectionLostError(phase: 'connect' | 'transaction', cause: unknown): StoreError {
  const message =
    phase === 'connect'
      ? 'postgres store: could not connect to PostgreSQL for the transaction (is the server restarting?)'
      : "postgres store: the connection to PostgreSQL was lost (a server restart, a failover or an ended session), so the transaction did not commit (lost during COMMIT it may have, and the claim's completion with it: a retry then finds the delivery done)";
  return new StoreError('postgres', 'not_ready', message, { cause });
}

function rowsOf(reply: unknown, operation: string): Row[] {
  const rows = (reply as { rows?: unknown } | null)?.rows ?? reply;
  if (!Array.isArray(rows)) throw new StoreError('postgres', 'bad_reply', `postgres store: unexpected reply to ${operation}: ${describeValue(reply)}`);
  return rows as Row[];
}


function pgDriver(client: PgClientLike, timeoutMs: number, prepare: boolean): Driver {
  const pool = isPgPool(client) ? client : undefined;
  /** `statement` on `target`: by name when it has one and preparing is on. */
  const send = (target: PgClientLike, statement: string | Statement, values: unknown[]) =>
    typeof statement === 'string'
      ? target.query(statement, values)
      : prepare
        ? target.query({ name: statement.name, text: statement.text, values })
        : target.query(statement.text, values);
  return {
    run: async (statement, values) => rowsOf(await send(client, statement, values), 'query'),
    async transaction<T>(fn: (run: TransactionRun, tx: unknown) => Promise<T>): Promise<T> {
      if (pool === undefined) {
        throw new TypeError(
          'postgresStore transaction() needs a pg Pool (or a postgres.js sql): on a single Client, every other statement would join the transaction',
        );
      }
      // A checked-out connection has no listener of the pool's: when its server goes away (a
      // restart, a failover, pg_terminate_backend) pg emits 'error' on it, and an 'error' event
      // nobody hears ends the process. The store listens from checkout to release.
      let lost: Error | undefined;
      const onError = (error: Error) => {
        lost ??= error;
      };
      /** Back to the pool healthy (without the store's listener), or destroyed when broken. */
      const settleConnection = (held: PgPoolClientLike, failure: Error | undefined): void => {
        // A destroyed connection keeps the listener: pg may still report its end.
        if (failure === undefined) held.removeListener?.('error', onError);
        held.release(failure ?? false);
      };
      const connecting = pool.connect().then((connection) => {
        connection.on?.('error', onError);
        return connection;
      });
      let connection: PgPoolClientLike;
      try {
        connection = await withTimeout(connecting, timeoutMs, 'postgres', 'transaction (connect)');
      } catch (error) {
        // A connection that arrives after the timeout goes back to the pool, not astray.
        if (error instanceof StoreError) connecting.then((late) => settleConnection(late, lost), () => {});
        throw connectionFailure(error) ? connectionLostError('connect', error) : error;
      }
      // A connection whose statement timed out may still be inside the transaction: destroy it
      // rather than hand it back to the pool.
      let broken: Error | undefined;
      // The connection failed under one of the store's own statements. Only this and `lost` (the
      // connection's 'error' event) mean a lost connection: a code on the app's own error does not.
      let statementLost = false;
      const run: TransactionRun = async (statement, values, operation) => {
        try {
          return rowsOf(await withTimeout(send(connection, statement, values), timeoutMs, 'postgres', operation), operation);
        } catch (error) {
          if (error instanceof StoreError) broken = error;
          statementLost ||= connectionFailure(error);
          throw error;
        }
      };
      try {
        await run('BEGIN', [], 'transaction (BEGIN)');
        let value: T;
        try {
          value = await fn(run, connection);
        } catch (error) {
          if (broken === undefined) {
            // On a lost connection this fails too, once pg has noticed the loss (so `lost` is set).
            await run('ROLLBACK', [], 'transaction (ROLLBACK)').catch((rollbackError: unknown) => {
              // A connection that cannot roll back must not go back to the pool.
              broken ??= rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
            });
          }
          throw error;
        }
        await run('COMMIT', [], 'transaction (COMMIT)');
        return value;
      } catch (error) {
        broken ??= error instanceof StoreError ? error : undefined;
        if (lost === undefined && !statementLost) throw error;
        // The server went away mid-transaction: a store outage (503), whatever the statement
        // that noticed it threw. A claim lost before that is still reported as such.
        const outage = error instanceof StoreError || error instanceof ClaimLostError ? error : connectionLostError('transaction', error);
        broken = outage;
        throw outage;
      } finally {
        settleConnection(connection, broken ?? lost);
      }
    },
  };
}

function postgresJsDriver(sql: PostgresJsSqlLike, timeoutMs: number): Driver {
  const runOn = (target: PostgresJsTransactionLike) => async (statement: string | Statement, values: unknown[]) =>
    rowsOf(await target.unsafe(typeof statement === 'string' ? statement : statement.text, values as never[]), 'query');
  return {
    run: runOn(sql),
    transaction<T>(fn: (run: TransactionRun, tx: unknown) => Promise<T>): Promise<T> {
      // `sql.begin` connects, sends BEGIN, runs the callback and sends COMMIT (or ROLLBACK) with
      // no bound of its own: a timer runs while it waits on the server (before the callback, and
      // from the callback's end to the commit), and each statement of the store is bounded too.
      // The first timeout rejects at once; postgres.js then rolls back (or drops the connection)
      // on its own time.
      return new Promise<T>((resolve, reject) => {
        let over = false;
        // The connection went away under the transaction (postgres.js then rejects `begin`).
        let lost = false;
        // The app's own error, rethrown from the callback: postgres.js rolls back and rejects
        // `begin` with it, which is the app's failure whatever its code.
        let appError: { error: unknown } | undefined;
        let timer: ReturnType<typeof setTimeout> | undefined;
        const settle = (outcome: () => void) => {
          clearTimeout(timer);
          if (over) return;
          over = true;
          outcome();
        };
        const fail = (error: unknown) => settle(() => reject(error));
        const waitFor = (operation: string) => {
          clearTimeout(timer);
          timer = setTimeout(() => fail(timeoutError('postgres', operation, timeoutMs)), timeoutMs);
        };
        waitFor('transaction (BEGIN)');
        sql
          .begin('read write', async (tx) => {
            clearTimeout(timer);
            // Begun after the store gave up: roll back without running the app's callback.
            if (over) throw timeoutError('postgres', 'transaction (BEGIN)', timeoutMs);
            const run: TransactionRun = async (statement, values, operation) => {
              // Nothing more is written to a connection known to be gone (see below).
              if (lost) throw connectionLostError('transaction', undefined);
              try {
                return await withTimeout(runOn(tx)(statement, values), timeoutMs, 'postgres', operation);
              } catch (error) {
                if (error instanceof StoreError) fail(error);
                lost ||= connectionFailure(error);
                throw error;
              }
            };
            // Once the connection is lost, the callback never settles: postgres.js (3.4) answers
            // its end with its own COMMIT or ROLLBACK, written even to a connection that has
            // closed, where the write throws from a timer that no caller can catch, and the
            // process ends. Unsettled, the callback sends neither (the server has rolled the
            // transaction back already) and is collected with the connection's scope; the
            // store's answer is the outage, at once.
            const abandon = (cause: unknown) => {
              fail(connectionLostError('transaction', cause));
              return new Promise<never>(() => {});
            };
            let value: T;
            try {
              value = await fn(run, tx);
            } catch (error) {
              // Lost only when the connection said so (the store's statement, or postgres.js's
              // error for one of the app's statements), never for a code on the app's own error:
              // abandoning the callback on a healthy connection would hold it, idle in
              // transaction, for good.
              lost ||= postgresJsStatementLost(error);
              if (lost) return abandon(error);
              appError = { error };
              throw error;
            }
            if (lost) return abandon(undefined);
            if (over) throw timeoutError('postgres', 'transaction', timeoutMs);
            waitFor('transaction (COMMIT)');
            // Boxed: postgres.js awaits every element of an array that the callback returns.
            return { value };
          })
          .then(
            (box) => settle(() => resolve((box as { value: T }).value)),
            (error: unknown) => {
              // postgres.js closes a lost connection itself; the failure is the outage it is. The
              // app's error, rolled back, is the app's (a failed ROLLBACK rejects with its own).
              if (!lost && appError !== undefined && error === appError.error) return fail(error);
              lost ||= connectionFailure(error);
              fail(lost ? connectionLostError('transaction', error) : error);
            },
          );
      });
    },
  };
}

/** Postgres `text` cannot hold U+0000: refuse it with a clear error rather than a SQL one. */
function checkText(key: string): void {
  if (key.includes('\u0000')) throw new TypeError('postgres store: an idempotency key cannot contain U+0000 (PostgreSQL text refuses it)');
}

function flag(row: Row | undefined, column: string, operation: string): boolean | null {
  const value = row?.[column];
  if (value === null || value === undefined) return null;
  if (typeof value !== 'boolean') throw new StoreError('postgres', 'bad_reply', `postgres store: unexpected ${column} in the reply to ${operation}: ${describeValue(value)}`);
  return value;
}

/**
 * An idempotency store in PostgreSQL, shared by every instance of an app, in the database that
 * already holds its data. With {@link PostgresStore.transaction}, a handler's side effects and the
 * claim's completion commit together: exactly-once effects, even across crashes.
 *
 * `client` is the app's: a `pg` `Pool` (or `Client`/`PoolClient`; transactions need the pool) or a
 * postgres.js `sql`. Create the table once with `await store.setup()` (idempotent), or by hand
 * with the SQL of {@link setupSql} (docs/postgres.md prints it).
 *
 * Every claim, complete, release and extend is one statement: one round trip, atomic, on the
 * server's clock. With `pg` the store sends them as named prepared statements, parsed and planned
 * once per connection ({@link PostgresStoreOptions.prepare}); with postgres.js, parameterised
 * statements are prepared on first use per connection (its default `prepare: true`): one round
 * trip from then on, two with `prepare: false`.
 *
 * Unsigned ids (with the receiver's `unsigned: 'accept'`) live in `<table>_unsigned`, at most
 * `unsignedMax` rows (default 10 000) in buckets of 16, whatever unsigned traffic sends. A full
 * bucket makes room by forgetting the unsigned completion that expires first; full of live claims,
 * it refuses with `StoreError` `unsigned_limit` (503 `UNSIGNED_LIMIT`).
 *
 * @example
 * ```ts
 * import pg from 'pg';
 * import { createReceiver } from 'webhook-receiver';
 * import { postgresStore } from 'webhook-receiver/postgres';
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, connectionTimeoutMillis: 2000 });
 * const store = postgresStore({ client: pool });
 * await store.setup();
 * const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET!, idempotency: { store } });
 * ```
 *
 * @example
 * ```ts
 * import postgres from 'postgres';
 * import { postgresStore } from 'webhook-receiver/postgres';
 *
 * const sql = postgres(process.env.DATABASE_URL!);
 * const store = postgresStore({ client: sql, table: 'billing.webhook_claims' });
 * await store.transaction(context, async (tx) => {
 *   await tx`UPDATE orders SET paid = true WHERE id = ${orderId}`;
 * });
 * ```
 */
export function postgresStore<C extends PostgresClientLike>(options: PostgresStoreOptions<C>): PostgresStore<TransactionOf<C>> {
  if (typeof options !== 'object' || options === null) throw new TypeError('postgresStore needs an options object: postgresStore({ client })');
  const { client, table = DEFAULT_POSTGRES_TABLE, autoCleanup = true, prepare = true } = options;
  if (typeof prepare !== 'boolean') throw new TypeError('postgresStore prepare must be a boolean');
  const timeoutMs = checkTimeoutOption('postgres', options.timeoutMs, DEFAULT_POSTGRES_TIMEOUT_MS);
  let driver: Driver;
  if (isPostgresJs(client)) driver = postgresJsDriver(client, timeoutMs);
  else if (typeof (client as Partial<PgClientLike> | null | undefined)?.query === 'function') driver = pgDriver(client as PgClientLike, timeoutMs, prepare);
  else {
    throw new TypeError(
      `postgresStore client must be a pg Pool or Client, or a postgres.js sql: ${describeValue(client)} has neither query() (pg) nor unsafe() and begin() (postgres.js)`,
    );
  }
  if (typeof autoCleanup !== 'boolean') throw new TypeError('postgresStore autoCleanup must be a boolean');
  const unsignedMax = checkUnsignedMax('postgresStore', options.unsignedMax);
  const sql = statements(table, unsignedMax);
  /** The statements of a key's class. */
  const of = (key: string): KeyStatements => (isUnsignedKey(key) ? sql.unsigned : sql.signed);

  const send = (operation: string, statement: string | Statement, values: unknown[]): Promise<Row[]> =>
    withTimeout(driver.run(statement, values), timeoutMs, 'postgres', operation);

  let claims = 0;

  const store: PostgresStore<TransactionOf<C>> = {
    name: 'postgres',
    async setup() {
      for (const statement of setupSql(table)) {
        try {
          await send('setup', statement, []);
        } catch (error) {
          // Two instances starting together can race inside CREATE … IF NOT EXISTS (a unique
          // violation on the catalog): the other one created it, which is what we wanted.
          const code = (error as { code?: unknown } | null)?.code;
          if (code !== '23505' && code !== '42P07') throw error;
        }
      }
    },
    async claim(key, lockMs): Promise<ClaimResult> {
      checkClaim(key, lockMs);
      checkText(key);
      const token = newToken();
      const unsigned = isUnsignedKey(key);
      let row: Row | undefined;
      if (unsigned) {
        // A slot of the bucket taken by another id at the same moment: try again (bounded).
        for (let attempt = 1; attempt <= UNSIGNED_CLAIM_ATTEMPTS; attempt++) {
          try {
            row = (await send('claim', sql.unsigned.claim, [key, token, lockMs]))[0];
          } catch (error) {
            // Another claim of this id took another slot of its bucket at the same moment.
            if ((error as { code?: unknown } | null)?.code === '23505') return { status: 'processing' };
            throw error;
          }
          if (flag(row, 'acquired', 'claim') === true || flag(row, 'room', 'claim') !== true) break;
        }
      } else {
        const sweep = autoCleanup && ++claims % CLEANUP_EVERY === 0 ? CLEANUP_STEP : 0;
        row = (await send('claim', sql.signed.claim, [key, token, lockMs, sweep]))[0];
      }
      if (flag(row, 'acquired', 'claim') === true) return { status: 'acquired', token };
      // No row of this id, and no room in its bucket.
      if (unsigned && flag(row, 'own', 'claim') === false) throw unsignedLimitError('postgres', unsignedMax, `all ${unsignedBuckets(unsignedMax).ways} ids of its bucket are live claims`);
      const completed = flag(row, 'completed', 'claim');
      const left = row?.left_ms;
      if (left !== null && typeof left !== 'number') throw new StoreError('postgres', 'bad_reply', `postgres store: unexpected left_ms in the reply to claim: ${describeValue(left)}`);
      // No row seen (another claim inserted it after this statement's snapshot), or an expired
      // row that another transaction holds (it is taking it over, or completing it): `processing`
      // is the answer that cannot run a handler twice.
      if (left === null || left <= 0) return { status: 'processing' };
      if (completed === true) return { status: 'completed' };
      return { status: 'processing', retryAfterMs: left };
    },
    async complete(key, token, ttlMs) {
      checkComplete(key, token, ttlMs);
      checkText(key);
      return (await send('complete', of(key).complete, [key, token, ttlMs])).length === 1;
    },
    async release(key, token) {
      checkRelease(key, token);
      checkText(key);
      return (await send('release', of(key).release, [key, token])).length === 1;
    },
    async extend(key, token, lockMs) {
      checkExtend(key, token, lockMs);
      checkText(key);
      return (await send('extend', of(key).extend, [key, token, lockMs])).length === 1;
    },
    async transaction<T>(context: TransactionContext, fn: (tx: TransactionOf<C>) => Promise<T> | T): Promise<T> {
      if (typeof context !== 'object' || context === null) {
        throw new TypeError('store.transaction needs the handler context: store.transaction(context, async (tx) => { … })');
      }
      if (typeof fn !== 'function') throw new TypeError('store.transaction needs a function: store.transaction(context, async (tx) => { … })');
      const claim = context.claim;
      if (claim !== undefined) {
        if (typeof claim !== 'object' || claim === null) throw new TypeError(`context.claim must be a claim handle, got ${describeValue(claim)}`);
        if (claim.store !== store) {
          throw new TypeError('context.claim was granted by another store: pass this Postgres store as idempotency.store to the receiver');
        }
        checkComplete(claim.key, claim.token, claim.ttlMs);
      }
      const signal = context.signal;
      let committed: ((done: boolean) => void) | undefined;
      let value: T;
      try {
        value = await driver.transaction(async (run, tx) => {
          const result = await fn(tx as TransactionOf<C>);
          // The receiver gave up on this delivery (for example its lease was lost): never commit.
          signal?.throwIfAborted();
          if (claim !== undefined) {
            // An ordered claim records its entity's version in the same statement, so the version
            // commits (or rolls back) with the side effect too.
            const order = claim.order;
            const rows =
              order === undefined
                ? await run(of(claim.key).completeInTransaction, [claim.key, claim.token, claim.ttlMs], 'transaction (complete)')
                : await run(sql.ordered.completeOrderedInTransaction, [claim.key, claim.token, claim.ttlMs, order.entity, order.version], 'transaction (complete)');
            if (rows.length !== 1) throw new ClaimLostError(claim.key);
            // The row is completed in this transaction and locked by it: from here the receiver
            // stops renewing the claim (a renewal would wait for the commit, then find the row
            // completed), so work after the commit is neither aborted nor reported as a lost
            // claim; its own completion afterwards sends nothing (one round trip saved).
            committed = noteCompletingInStore(claim);
          }
          return result;
        });
      } catch (error) {
        committed?.(false);
        throw error;
      }
      committed?.(true);
      return value;
    },
    async cleanup(cleanupOptions = {}) {
      const { maxRows = 100_000 } = cleanupOptions;
      if (typeof maxRows !== 'number' || !Number.isInteger(maxRows) || maxRows <= 0) throw new RangeError('cleanup maxRows must be a positive integer');
      let deleted = 0;
      while (deleted < maxRows) {
        const batch = Math.min(CLEANUP_BATCH, maxRows - deleted);
        const count = Number((await send('cleanup', sql.cleanup, [batch]))[0]?.deleted);
        if (!Number.isInteger(count)) throw new StoreError('postgres', 'bad_reply', 'postgres store: unexpected reply to cleanup');
        deleted += count;
        if (count < batch) break;
      }
      return deleted;
    },
    async claimOrdered(key, lockMs, ttlMs, order): Promise<OrderedClaimResult> {
      checkClaimOrdered(key, lockMs, ttlMs, order);
      checkText(key);
      checkText(order.entity);
      const token = newToken();
      const row = (await send('claim', sql.ordered.claimOrdered, [key, token, lockMs, ttlMs, order.entity, order.version, order.exclusive]))[0];
      const stale = flag(row, 'stale', 'claim') === true;
      if (flag(row, 'acquired', 'claim') === true) return stale ? { status: 'stale' } : { status: 'acquired', token };
      const completed = flag(row, 'completed', 'claim');
      const left = row?.left_ms;
      const busy = row?.busy_ms;
      if (left !== null && typeof left !== 'number') throw new StoreError('postgres', 'bad_reply', `postgres store: unexpected left_ms in the reply to claim: ${describeValue(left)}`);
      if (busy !== null && typeof busy !== 'number') throw new StoreError('postgres', 'bad_reply', `postgres store: unexpected busy_ms in the reply to claim: ${describeValue(busy)}`);
      if (left !== null && left > 0) return completed === true ? { status: 'completed' } : { status: 'processing', retryAfterMs: left };
      // Not taken, and the id is not live in the snapshot: another delivery of the id got there
      // first (processing), or the entity's lock is held (busy).
      if (stale || !order.exclusive || (left !== null && left <= 0)) return { status: 'processing' };
      return busy !== null && busy > 0 ? { status: 'busy', retryAfterMs: busy } : { status: 'busy' };
    },
    async completeOrdered(key, token, ttlMs, order) {
      checkComplete(key, token, ttlMs);
      checkOrder(order);
      checkText(key);
      checkText(order.entity);
      return (await send('complete', sql.ordered.completeOrdered, [key, token, ttlMs, order.entity, order.version])).length === 1;
    },
    async releaseOrdered(key, token, order) {
      checkRelease(key, token);
      checkOrder(order);
      checkText(key);
      checkText(order.entity);
      return (await send('release', sql.ordered.releaseOrdered, [key, token, order.entity])).length === 1;
    },
    async extendOrdered(key, token, lockMs, order) {
      checkExtend(key, token, lockMs);
      checkOrder(order);
      checkText(key);
      checkText(order.entity);
      return (await send('extend', sql.ordered.extendOrdered, [key, token, lockMs, order.entity, order.exclusive])).length === 1;
    },
    async forgetVersion(entity) {
      checkEntity(entity);
      checkText(entity);
      await send('forgetVersion', sql.ordered.forgetVersion, [entity]);
    },
    async ping() {
      const rows = await send('ping', 'SELECT 1 AS ok', []);
      if (rows.length !== 1) throw new StoreError('postgres', 'bad_reply', 'postgres store: unexpected reply to ping');
    },
  };
  return store;
}

/**
 * The clients the Postgres store accepts, by shape: `pg` (a `Pool`, `Client` or `PoolClient`) and
 * postgres.js (`sql`). Declared here so that neither the package nor its types need either installed.
 */

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

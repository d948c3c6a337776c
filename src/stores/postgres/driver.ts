/**
 * What the Postgres store needs of a client library (one statement; a transaction bounded by the
 * store's timeout), and how it tells a lost connection from a failed statement.
 */

import { describeValue } from '../internal.ts';
import { StoreError } from '../types.ts';
import type { PgClientLike, PgPoolLike, PostgresJsSqlLike } from './client.ts';
import type { Statement } from './statements.ts';

export type Row = Record<string, unknown>;

/** One statement inside a transaction, bounded by the store's timeout; `operation` names it in a timeout. */
export type TransactionRun = (statement: string | Statement, values: unknown[], operation: string) => Promise<Row[]>;

/** One client library, seen through what the store sends. */
export interface Driver {
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

export function isPostgresJs(client: object): client is PostgresJsSqlLike {
  const candidate = client as Partial<PostgresJsSqlLike>;
  return typeof client === 'function' && typeof candidate.unsafe === 'function' && typeof candidate.begin === 'function';
}

export function isPgPool(client: PgClientLike): client is PgPoolLike {
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

export function connectionFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (CONNECTION_LOST_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code));
}

/**
 * A connection failure that postgres.js reported for a statement: it marks every statement's
 * error with the statement (`query`, `parameters`). A code alone proves nothing: a handler's own
 * error (its HTTP call's `ECONNRESET`) carries the same codes on a healthy connection.
 */
export function postgresJsStatementLost(error: unknown): boolean {
  return connectionFailure(error) && typeof error === 'object' && error !== null && Object.hasOwn(error, 'query') && Object.hasOwn(error, 'parameters');
}

/**
 * A transaction that could not connect, or was cut off by a lost connection, as the outage it is
 * (`not_ready`: the receiver answers 503 `STORE_UNAVAILABLE`).
 */
export function connectionLostError(phase: 'connect' | 'transaction', cause: unknown): StoreError {
  const message =
    phase === 'connect'
      ? 'postgres store: could not connect to PostgreSQL for the transaction (is the server restarting?)'
      : "postgres store: the connection to PostgreSQL was lost (a server restart, a failover or an ended session), so the transaction did not commit (lost during COMMIT it may have, and the claim's completion with it: a retry then finds the delivery done)";
  return new StoreError('postgres', 'not_ready', message, { cause });
}

export function rowsOf(reply: unknown, operation: string): Row[] {
  const rows = (reply as { rows?: unknown } | null)?.rows ?? reply;
  if (!Array.isArray(rows)) throw new StoreError('postgres', 'bad_reply', `postgres store: unexpected reply to ${operation}: ${describeValue(reply)}`);
  return rows as Row[];
}

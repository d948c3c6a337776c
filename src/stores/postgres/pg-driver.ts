/** The Postgres store's driver for `pg`: named prepared statements, transactions on a pool's connection. */

import { withTimeout } from '../internal.ts';
import { StoreError } from '../types.ts';
import { ClaimLostError } from './claim-lost-error.ts';
import type { PgClientLike, PgPoolClientLike } from './client.ts';
import { connectionFailure, connectionLostError, isPgPool, rowsOf, type Driver, type TransactionRun } from './driver.ts';
import type { Statement } from './statements.ts';

export function pgDriver(client: PgClientLike, timeoutMs: number, prepare: boolean): Driver {
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

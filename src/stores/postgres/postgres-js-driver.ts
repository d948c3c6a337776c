/** The Postgres store's driver for postgres.js: statements through `unsafe`, transactions through `begin`. */

import { timeoutError, withTimeout } from '../internal.ts';
import { StoreError } from '../types.ts';
import type { PostgresJsSqlLike, PostgresJsTransactionLike } from './client.ts';
import { connectionFailure, connectionLostError, postgresJsStatementLost, rowsOf, type Driver, type TransactionRun } from './driver.ts';
import type { Statement } from './statements.ts';

export function postgresJsDriver(sql: PostgresJsSqlLike, timeoutMs: number): Driver {
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

/** The Postgres store: its operations, each one statement sent through a driver. */

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
  isUnsignedKey,
  newToken,
  noteCompletingInStore,
  unsignedBuckets,
  unsignedLimitError,
  withTimeout,
} from '../internal.ts';
import { StoreError, type ClaimResult, type OrderedClaimResult } from '../types.ts';
import { ClaimLostError } from './claim-lost-error.ts';
import type { PgClientLike, PostgresClientLike, TransactionOf } from './client.ts';
import { setupSql } from './ddl.sql.ts';
import { isPostgresJs, type Driver, type Row } from './driver.ts';
import { CLEANUP_BATCH, CLEANUP_EVERY, CLEANUP_STEP, DEFAULT_POSTGRES_TABLE, DEFAULT_POSTGRES_TIMEOUT_MS, type PostgresStore, type PostgresStoreOptions, type TransactionContext } from './options.ts';
import { pgDriver } from './pg-driver.ts';
import { postgresJsDriver } from './postgres-js-driver.ts';
import { statements, type KeyStatements, type Statement } from './statements.ts';

/** How many times an unsigned claim is sent when other ids keep taking the free slot it aimed at. */
const UNSIGNED_CLAIM_ATTEMPTS = 3;

/** Postgres `text` cannot hold U+0000: refuse it with a clear error rather than a SQL one. */
function checkText(key: string): void {
  if (key.includes('\u0000')) throw new TypeError('postgres store: an idempotency key cannot contain U+0000 (PostgreSQL text refuses it)');
}

/** A boolean column of a reply row: `null` when the row or the value is missing, `bad_reply` when it is not a boolean. */
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
    ordering: {
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
    },
    async ping() {
      const rows = await send('ping', 'SELECT 1 AS ok', []);
      if (rows.length !== 1) throw new StoreError('postgres', 'bad_reply', 'postgres store: unexpected reply to ping');
    },
  };
  return store;
}

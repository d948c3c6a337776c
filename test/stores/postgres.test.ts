/**
 * What only the Postgres store does (the shared rules run in contract.test.ts): option checks and
 * client types, set-up, one round trip per operation (counted on the wire), 100 concurrent claims,
 * claims that never wait for another transaction, clean-up in bounded batches, timeouts, and
 * transactional completion fenced by the token, on a real PostgreSQL through pg and postgres.js.
 */

import { createServer, type Socket } from 'node:net';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  CLEANUP_BATCH,
  ClaimLostError,
  DEFAULT_POSTGRES_TABLE,
  StoreError,
  postgresStore,
  setupSql,
  type PgPoolLike,
  type PostgresClientLike,
  type PostgresStore,
  type TransactionOf,
} from '../../src/stores/postgres.ts';
import { createReceiver, type ReceiverErrorContext } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import type { ClaimHandle } from '../../src/stores/types.ts';
import { connectPostgres, POSTGRES_KINDS, sharedPostgresUrl, startCountingProxy, uniqueTable, type PostgresClient, type PostgresKind } from '../support/postgres.ts';
import { sleep, token } from '../support/stores.ts';

const available = sharedPostgresUrl !== null;

describe('postgresStore options and types', () => {
  // Never connected: option checks need no server.
  const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  const sql = postgres('postgres://nobody@127.0.0.1:1/none');
  afterAll(async () => {
    await pool.end();
    await sql.end({ timeout: 0 });
  });

  it('needs an options object with a pg or postgres.js client', () => {
    expect(() => postgresStore(undefined as never)).toThrow(new TypeError('postgresStore needs an options object: postgresStore({ client })'));
    expect(() => postgresStore({} as never)).toThrow(
      new TypeError('postgresStore client must be a pg Pool or Client, or a postgres.js sql: undefined has neither query() (pg) nor unsafe() and begin() (postgres.js)'),
    );
    expect(() => postgresStore({ client: 'postgres://localhost' } as never)).toThrow(
      new TypeError('postgresStore client must be a pg Pool or Client, or a postgres.js sql: string has neither query() (pg) nor unsafe() and begin() (postgres.js)'),
    );
    expect(() => postgresStore({ client: new Map() as never })).toThrow(
      new TypeError('postgresStore client must be a pg Pool or Client, or a postgres.js sql: a Map has neither query() (pg) nor unsafe() and begin() (postgres.js)'),
    );
  });

  it('checks table, timeoutMs and autoCleanup', () => {
    for (const table of ['', 'a-b', 'x; DROP TABLE y', 'a.b.c', '1abc', 'a'.repeat(64)]) {
      expect(() => postgresStore({ client: pool, table })).toThrow(TypeError);
    }
    expect(() => postgresStore({ client: pool, table: 'billing.Claims_2' })).not.toThrow();
    for (const timeoutMs of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, '100' as never]) {
      expect(() => postgresStore({ client: pool, timeoutMs })).toThrow(
        new RangeError('postgresStore timeoutMs must be a positive number of milliseconds up to 2147483647 (default 2000)'),
      );
    }
    expect(() => postgresStore({ client: pool, autoCleanup: 'yes' as never })).toThrow(new TypeError('postgresStore autoCleanup must be a boolean'));
  });

  it('takes pg Pool, Client, PoolClient and postgres.js sql by type, and types tx per client', () => {
    expectTypeOf<pg.Pool>().toExtend<PgPoolLike>();
    expectTypeOf<pg.Pool>().toExtend<PostgresClientLike>();
    expectTypeOf<pg.Client>().toExtend<PostgresClientLike>();
    expectTypeOf<pg.PoolClient>().toExtend<PostgresClientLike>();
    expectTypeOf<postgres.Sql>().toExtend<PostgresClientLike>();
    expectTypeOf<ReturnType<typeof postgres>>().toExtend<PostgresClientLike>();
    expectTypeOf<{ get(key: string): Promise<string> }>().not.toExtend<PostgresClientLike>();
    expectTypeOf<TransactionOf<pg.Pool>>().toEqualTypeOf<pg.PoolClient>();
    expectTypeOf<TransactionOf<postgres.Sql>>().toEqualTypeOf<postgres.TransactionSql>();
    expectTypeOf(postgresStore({ client: pool })).toEqualTypeOf<PostgresStore<pg.PoolClient>>();
    expectTypeOf(postgresStore({ client: sql })).toEqualTypeOf<PostgresStore<postgres.TransactionSql>>();
    expect(postgresStore({ client: sql }).claim).toBeTypeOf('function');
  });

  it('checks unsignedMax', () => {
    for (const unsignedMax of [0, -1, 1.5, Number.NaN, 2 ** 31, '10' as never]) {
      expect(() => postgresStore({ client: pool, unsignedMax })).toThrow(new RangeError('postgresStore unsignedMax must be a positive whole number of ids'));
    }
    expect(() => postgresStore({ client: pool, unsignedMax: 2 ** 31 - 1 })).not.toThrow();
  });

  it('prints its SQL for hand migrations, with the table quoted', () => {
    expect(setupSql()).toEqual([
      `CREATE TABLE IF NOT EXISTS "${DEFAULT_POSTGRES_TABLE}" (\n  key          text        PRIMARY KEY,\n  token        text        NOT NULL,\n  completed    boolean     NOT NULL DEFAULT false,\n  expires_at   timestamptz NOT NULL,\n  version      text        COLLATE "C",\n  locked_until timestamptz\n)`,
      // A table made by an earlier version gains the ordering columns.
      `ALTER TABLE "${DEFAULT_POSTGRES_TABLE}" ADD COLUMN IF NOT EXISTS version text COLLATE "C", ADD COLUMN IF NOT EXISTS locked_until timestamptz`,
      `CREATE INDEX IF NOT EXISTS "${DEFAULT_POSTGRES_TABLE}_expires_at" ON "${DEFAULT_POSTGRES_TABLE}" (expires_at)`,
      `CREATE TABLE IF NOT EXISTS "${DEFAULT_POSTGRES_TABLE}_unsigned" (\n  slot       integer     PRIMARY KEY,\n  key        text        NOT NULL UNIQUE,\n  token      text        NOT NULL,\n  completed  boolean     NOT NULL DEFAULT false,\n  expires_at timestamptz NOT NULL\n)`,
    ]);
    expect(setupSql('billing.claims')[2]).toBe('CREATE INDEX IF NOT EXISTS "claims_expires_at" ON "billing"."claims" (expires_at)');
    expect(setupSql('billing.claims')[3]).toMatch(/^CREATE TABLE IF NOT EXISTS "billing"\."claims_unsigned" \(/);
    // The unsigned table's name is cut to PostgreSQL's 63 characters, and may not be the table's own.
    expect(setupSql('a'.repeat(63))[3]).toMatch(new RegExp(`^CREATE TABLE IF NOT EXISTS "${'a'.repeat(54)}_unsigned" \\(`));
    expect(() => setupSql(`${'a'.repeat(54)}_unsigned`)).toThrow(TypeError);
  });

  it('a backend that never answers rejects with StoreError timeout, never hangs', async () => {
    // A server that accepts connections and says nothing.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const deafPool = new pg.Pool({ connectionString: `postgres://nobody@127.0.0.1:${port}/none` });
    deafPool.on('error', () => {});
    const deafSql = postgres(`postgres://nobody@127.0.0.1:${port}/none`, { connect_timeout: 30 });
    try {
      for (const client of [deafPool, deafSql] as const) {
        const store = postgresStore({ client, timeoutMs: 150 });
        const started = Date.now();
        const error = await store.claim('default:s:msg_1', 1000).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StoreError);
        expect(error).toMatchObject({ store: 'postgres', reason: 'timeout', message: 'postgres store: no answer to claim within 150 ms' });
        expect(Date.now() - started).toBeLessThan(5000);
        await expect(store.ping()).rejects.toMatchObject({ reason: 'timeout' });
      }
      // A transaction too: connecting and BEGIN are bounded inside the driver's transaction (pg's
      // pool.connect, postgres.js' sql.begin), and the app's callback never runs.
      for (const [client, waitingOn] of [
        [deafPool, 'transaction (connect)'],
        [deafSql, 'transaction (BEGIN)'],
      ] as const) {
        const store = postgresStore({ client, timeoutMs: 150 });
        let ran = false;
        const started = Date.now();
        const error = await store
          .transaction({}, () => {
            ran = true;
          })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StoreError);
        expect(error).toMatchObject({ store: 'postgres', reason: 'timeout', message: `postgres store: no answer to ${waitingOn} within 150 ms` });
        expect(Date.now() - started).toBeLessThan(5000);
        expect(ran).toBe(false);
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
      void deafPool.end().catch(() => {});
      void deafSql.end({ timeout: 0 }).catch(() => {});
    }
  });
});

describe.each(POSTGRES_KINDS)('postgresStore via %s', (kind: PostgresKind) => {
  let connection: PostgresClient;
  let admin: PostgresClient;
  const tables: string[] = [];
  let store: PostgresStore<unknown>;
  let table: string;

  /** A store on a fresh table. */
  async function fresh(options: { autoCleanup?: boolean; client?: PostgresClient['client'] } = {}): Promise<PostgresStore<unknown>> {
    table = uniqueTable(kind);
    tables.push(table);
    const created = postgresStore({ client: (options.client ?? connection.client) as pg.Pool, table, autoCleanup: options.autoCleanup }) as PostgresStore<unknown>;
    await created.setup();
    return created;
  }

  const handle = (s: PostgresStore<unknown>, key: string, claimToken: string, lockMs = 10_000): ClaimHandle => ({ store: s, key, token: claimToken, ttlMs: 60_000, lockMs });

  beforeAll(async () => {
    if (!available) return;
    connection = connectPostgres(kind, sharedPostgresUrl!, 20);
    admin = connectPostgres('pg', sharedPostgresUrl!, 4);
  });
  afterAll(async () => {
    if (!available) return;
    for (const name of tables) await admin.query(`DROP TABLE IF EXISTS "${name}"`);
    await connection.close();
    await admin.close();
  });

  const test = it.skipIf(!available);

  test('setup is idempotent, also when instances start together, and a claim is one primary-key look-up', async () => {
    store = await fresh();
    await Promise.all([store.setup(), store.setup(), store.setup()]);
    const indexes = await admin.query(`SELECT indexdef FROM pg_indexes WHERE tablename = $1 ORDER BY indexname`, [table]);
    expect(indexes.map((row) => row.indexdef)).toEqual([
      `CREATE INDEX ${table}_expires_at ON public.${table} USING btree (expires_at)`,
      `CREATE UNIQUE INDEX ${table}_pkey ON public.${table} USING btree (key)`,
    ]);
    // With a realistic table, the plan reads the key through its index only (no sequential scan).
    await admin.query(`INSERT INTO "${table}" SELECT 'default:s:' || i, 't', true, now() + interval '1 day' FROM generate_series(1, 5000) i`);
    await admin.query(`ANALYZE "${table}"`);
    const plan = (await admin.query(`EXPLAIN SELECT completed, expires_at FROM "${table}" WHERE key = 'default:s:42'`)).map((row) => row['QUERY PLAN']).join('\n');
    expect(plan).toContain(`Index Scan using ${table}_pkey`);
    expect(plan).not.toContain('Seq Scan');
  });

  test('signed and unsigned keyspaces and namespaces stay apart; U+0000 is refused', async () => {
    store = await fresh();
    token(await store.claim('default:s:msg_1', 10_000));
    expect((await store.claim('default:u:msg_1', 10_000)).status).toBe('acquired');
    expect((await store.claim('billing:s:msg_1', 10_000)).status).toBe('acquired');
    expect((await store.claim('default:s:msg_1', 10_000)).status).toBe('processing');
    await expect(store.claim('default:s:a\u0000b', 1000)).rejects.toThrow(TypeError);
  });

  test('100 concurrent claims of one key: exactly one acquires', async () => {
    store = await fresh();
    const results = await Promise.all(Array.from({ length: 100 }, () => store.claim('default:s:hot', 10_000)));
    expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'processing')).toHaveLength(99);
    // The same with an expired lock to take over: still one winner.
    await admin.query(`UPDATE "${table}" SET expires_at = now() - interval '1 second'`);
    const again = await Promise.all(Array.from({ length: 100 }, () => store.claim('default:s:hot', 10_000)));
    expect(again.filter((r) => r.status === 'acquired')).toHaveLength(1);
  });

  test('extend keeps a claim alive past its first lock; only for its own live token', async () => {
    store = await fresh();
    const owner = token(await store.claim('default:s:msg_1', 300));
    expect(await store.extend('default:s:msg_1', owner, 10_000)).toBe(true);
    await sleep(400);
    expect((await store.claim('default:s:msg_1', 10_000)).status).toBe('processing');
    expect(await store.extend('default:s:msg_1', 'other', 10_000)).toBe(false);
    expect(await store.complete('default:s:msg_1', owner, 60_000)).toBe(true);
    expect(await store.extend('default:s:msg_1', owner, 10_000)).toBe(false);
    expect(await store.claim('default:s:msg_1', 10_000)).toEqual({ status: 'completed' });
  });

  test('one round trip per operation, counted on the wire', async () => {
    const proxy = await startCountingProxy(sharedPostgresUrl!);
    const counted = connectPostgres(kind, proxy.url, 1);
    try {
      store = await fresh({ client: counted.client });
      // Warm up: the connection's start-up, and postgres.js preparing each statement once.
      const warm = token(await store.claim('default:s:warm', 10_000));
      await store.extend('default:s:warm', warm, 10_000);
      await store.complete('default:s:warm', warm, 60_000);
      await store.release('default:s:warm', warm);
      await store.ping();

      const counts: Record<string, number> = {};
      const count = async (name: string, work: () => Promise<unknown>) => {
        const before = proxy.roundTrips;
        await work();
        counts[name] = proxy.roundTrips - before;
      };
      let owner = '';
      await count('claim', async () => (owner = token(await store.claim('default:s:msg_1', 10_000))));
      await count('claim (processing)', () => store.claim('default:s:msg_1', 10_000));
      await count('extend', () => store.extend('default:s:msg_1', owner, 10_000));
      await count('release', () => store.release('default:s:msg_1', owner));
      await count('claim again', async () => (owner = token(await store.claim('default:s:msg_1', 10_000))));
      await count('complete', () => store.complete('default:s:msg_1', owner, 60_000));
      await count('claim (completed)', () => store.claim('default:s:msg_1', 10_000));
      await count('ping', () => store.ping());
      expect(counts).toEqual({
        claim: 1,
        'claim (processing)': 1,
        extend: 1,
        release: 1,
        'claim again': 1,
        complete: 1,
        'claim (completed)': 1,
        ping: 1,
      });
      // A transaction: BEGIN, the callback's statements, the fenced completion, COMMIT.
      const txOwner = token(await store.claim('default:s:msg_2', 10_000));
      await count('transaction', () => store.transaction({ claim: handle(store, 'default:s:msg_2', txOwner) }, async () => {}));
      expect(counts.transaction).toBe(3);

      // A delivery through the receiver whose handler uses a transaction: the claim, then the
      // transaction's three; the claim is completed in the transaction, so the receiver sends
      // nothing after it.
      const secret = generateSecret();
      const receiver = createReceiver({ secrets: secret, idempotency: { store } });
      const body = '{"type":"invoice.paid"}';
      const signed = await signWebhook({ secret, body, id: 'msg_3' });
      const request = () => new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: signed.headers, body });
      let committed = 0;
      await count('delivery', async () => {
        const result = await receiver.handle(request(), async (_webhook, context) => {
          await store.transaction(context, async () => {});
          committed = proxy.roundTrips;
        });
        expect(result.outcome).toBe('processed');
      });
      expect({ delivery: counts.delivery, afterCommit: proxy.roundTrips - committed }).toEqual({ delivery: 4, afterCommit: 0 });
      // The claim was completed all the same: a retry is a duplicate (one round trip).
      await count('retry', async () => expect((await receiver.handle(request(), () => {})).outcome).toBe('duplicate'));
      expect(counts.retry).toBe(1);
    } finally {
      await counted.close();
      await proxy.close();
    }
  });

  test('a claim never waits for a row that another transaction holds: it answers processing at once', async () => {
    store = await fresh();
    const owner = token(await store.claim('default:s:msg_1', 10_000));
    // Another transaction holds the row: an application transaction between its completion and
    // its COMMIT (or a crashed client's, not yet rolled back).
    const holder = connectPostgres('pg', sharedPostgresUrl!, 1);
    const client = await (holder.client as pg.Pool).connect();
    try {
      await client.query('BEGIN');
      await client.query(`UPDATE "${table}" SET completed = true WHERE key = $1 AND token = $2`, ['default:s:msg_1', owner]);
      // A claim that waited for the holder would reject with StoreError timeout after 2 s.
      const result = await store.claim('default:s:msg_1', 10_000);
      expect(result.status).toBe('processing');
      await client.query('ROLLBACK');
      // Also when the held row's lock has expired: a claim would take it over, but another
      // transaction is on it (taking it over itself, or completing it).
      await admin.query(`UPDATE "${table}" SET expires_at = now() - interval '1 second' WHERE key = $1`, ['default:s:msg_1']);
      await client.query('BEGIN');
      await client.query(`SELECT 1 FROM "${table}" WHERE key = $1 FOR UPDATE`, ['default:s:msg_1']);
      expect(await store.claim('default:s:msg_1', 10_000)).toEqual({ status: 'processing' });
      await client.query('ROLLBACK');
      // Free again: the expired lock is taken over.
      expect((await store.claim('default:s:msg_1', 10_000)).status).toBe('acquired');
    } finally {
      client.release();
      await holder.close();
    }
  });

  test('cleanup deletes expired rows in batches of 1 000, and keeps live ones', async () => {
    store = await fresh({ autoCleanup: false });
    await admin.query(`INSERT INTO "${table}" SELECT 'default:s:old' || i, 't', i % 2 = 0, now() - interval '1 minute' FROM generate_series(1, 2500) i`);
    await admin.query(`INSERT INTO "${table}" SELECT 'default:s:live' || i, 't', true, now() + interval '1 hour' FROM generate_series(1, 10) i`);
    expect(CLEANUP_BATCH).toBe(1000);
    expect(await store.cleanup({ maxRows: 1200 })).toBe(1200);
    expect(await store.cleanup()).toBe(1300);
    expect(await store.cleanup()).toBe(0);
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${table}"`))[0]!.n).toBe(10);
    await expect(store.cleanup({ maxRows: 0 })).rejects.toThrow(RangeError);
  });

  test('autoCleanup: claims delete a few expired rows of other keys as they go, never their own', async () => {
    store = await fresh();
    await admin.query(`INSERT INTO "${table}" SELECT 'default:s:old' || i, 't', true, now() - interval '1 minute' FROM generate_series(1, 200) i`);
    for (let i = 0; i < 32; i++) token(await store.claim(`default:s:new${i}`, 10_000));
    // Two of the 32 claims swept, 64 rows each.
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${table}" WHERE key LIKE 'default:s:old%'`))[0]!.n).toBe(200 - 128);
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${table}" WHERE key LIKE 'default:s:new%'`))[0]!.n).toBe(32);
  });

  describe('transaction', () => {
    let effects: string;

    /** Runs `sql` with `values` on the transaction client, whichever kind it is. */
    const exec = async (tx: unknown, text: string, values: unknown[]): Promise<void> => {
      if (kind === 'pg') await (tx as pg.PoolClient).query(text, values);
      else await (tx as postgres.TransactionSql).unsafe(text, values as never[]);
    };

    beforeAll(async () => {
      if (!available) return;
      effects = uniqueTable(`${kind}_effects`);
      tables.push(effects);
      await admin.query(`CREATE TABLE "${effects}" (id text NOT NULL)`);
    });
    const effectCount = async (id: string) => (await admin.query(`SELECT count(*)::int AS n FROM "${effects}" WHERE id = $1`, [id]))[0]!.n;

    test('commits the side effect and the completion together; the receiver’s own completion is then a no-op', async () => {
      store = await fresh();
      const owner = token(await store.claim('default:s:msg_1', 10_000));
      const value = await store.transaction({ claim: handle(store, 'default:s:msg_1', owner) }, async (tx) => {
        await exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, ['msg_1']);
        return 'done';
      });
      expect(value).toBe('done');
      expect(await effectCount('msg_1')).toBe(1);
      expect(await store.claim('default:s:msg_1', 10_000)).toEqual({ status: 'completed' });
      expect(await store.complete('default:s:msg_1', owner, 60_000)).toBe(true);
      // A second transaction for the same claim would be a second effect: it rolls back.
      await expect(
        store.transaction({ claim: handle(store, 'default:s:msg_1', owner) }, (tx) => exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, ['msg_1'])),
      ).rejects.toThrow(ClaimLostError);
      expect(await effectCount('msg_1')).toBe(1);
    });

    test('a claim completed in the handler’s transaction is renewed no more: work after the commit is neither aborted nor reported', async () => {
      store = await fresh();
      const secret = generateSecret();
      const reports: [unknown, ReceiverErrorContext][] = [];
      // A 300 ms lock, renewed every 100 ms while the handler runs.
      const receiver = createReceiver({ secrets: secret, onError: (error, context) => reports.push([error, context]), idempotency: { store, lockSeconds: 0.3 } });
      const body = '{"type":"order.paid"}';
      const signed = await signWebhook({ secret, body });
      const result = await receiver.handle({ headers: signed.headers, body }, async (webhook, context) => {
        await store.transaction(context, (tx) => exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, [webhook.id]));
        // Work after the commit (the README's fetch(…, { signal: context.signal })), longer than
        // several renewals and than the lock itself: it ends early only if the signal aborts.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 1_000);
          context.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
        });
        return context.signal.aborted;
      });
      expect(result).toMatchObject({ outcome: 'processed', value: false });
      expect(reports).toEqual([]);
      expect(await effectCount(signed.id)).toBe(1);
      expect(await store.claim(`default:s:${signed.id}`, 10_000)).toEqual({ status: 'completed' });
      await receiver.close();
    });

    test('a callback that throws rolls back the effect and leaves the claim held', async () => {
      store = await fresh();
      const owner = token(await store.claim('default:s:msg_2', 10_000));
      await expect(
        store.transaction({ claim: handle(store, 'default:s:msg_2', owner) }, async (tx) => {
          await exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, ['msg_2']);
          throw new Error('handler failed');
        }),
      ).rejects.toThrow('handler failed');
      expect(await effectCount('msg_2')).toBe(0);
      expect((await store.claim('default:s:msg_2', 10_000)).status).toBe('processing');
      expect(await store.release('default:s:msg_2', owner)).toBe(true);
    });

    test('takeover: a handler whose lock expired and was taken over has its effect rolled back', async () => {
      store = await fresh();
      const stale = token(await store.claim('default:s:msg_3', 300));
      const error = await store
        .transaction({ claim: handle(store, 'default:s:msg_3', stale, 300) }, async (tx) => {
          await exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, ['msg_3']);
          // The handler outlives its lock, and another delivery takes the id over meanwhile.
          await sleep(450);
          const taker = token(await store.claim('default:s:msg_3', 10_000));
          expect(taker).not.toBe(stale);
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ClaimLostError);
      expect((error as ClaimLostError).key).toBe('default:s:msg_3');
      expect((error as Error).message).toMatch(/^postgres store: the claim on "default:s:msg_3" was lost before commit/);
      expect(await effectCount('msg_3')).toBe(0);
      expect((await store.claim('default:s:msg_3', 10_000)).status).toBe('processing');
    });

    test('an expired lock that nobody took over also rolls back (the id may be claimed any moment)', async () => {
      store = await fresh();
      const stale = token(await store.claim('default:s:msg_4', 200));
      await expect(
        store.transaction({ claim: handle(store, 'default:s:msg_4', stale, 200) }, async (tx) => {
          await exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, ['msg_4']);
          await sleep(300);
        }),
      ).rejects.toThrow(ClaimLostError);
      expect(await effectCount('msg_4')).toBe(0);
    });

    test('an aborted signal rolls back with its reason', async () => {
      store = await fresh();
      const owner = token(await store.claim('default:s:msg_5', 10_000));
      const controller = new AbortController();
      await expect(
        store.transaction({ claim: handle(store, 'default:s:msg_5', owner), signal: controller.signal }, async (tx) => {
          await exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, ['msg_5']);
          controller.abort(new Error('lease lost'));
        }),
      ).rejects.toThrow('lease lost');
      expect(await effectCount('msg_5')).toBe(0);
    });

    test('without a claim the callback still runs in one transaction; a foreign claim or bad arguments are TypeErrors', async () => {
      store = await fresh();
      await store.transaction({ claim: undefined }, (tx) => exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, ['msg_6']));
      expect(await effectCount('msg_6')).toBe(1);
      const other = await fresh();
      const owner = token(await other.claim('default:s:msg_7', 10_000));
      await expect(store.transaction({ claim: handle(other, 'default:s:msg_7', owner) }, async () => {})).rejects.toThrow(
        new TypeError('context.claim was granted by another store: pass this Postgres store as idempotency.store to the receiver'),
      );
      await expect(store.transaction(undefined as never, async () => {})).rejects.toThrow(TypeError);
      await expect(store.transaction({}, undefined as never)).rejects.toThrow(TypeError);
    });

    test('a handler’s own error with a network code (its HTTP call’s ECONNRESET) is the app’s: rolled back, the connection back in the pool healthy', async () => {
      // A pool of two, named, so that its sessions can be found in pg_stat_activity.
      const name = uniqueTable('own_econnreset');
      const url = new URL(sharedPostgresUrl!);
      url.searchParams.set('application_name', name);
      const small = connectPostgres(kind, url.toString(), 2);
      try {
        table = uniqueTable(kind);
        tables.push(table);
        const own = postgresStore({ client: small.client as pg.Pool, table, timeoutMs: 5_000 }) as PostgresStore<unknown>;
        await own.setup();
        const owner = token(await own.claim('default:s:msg_8', 10_000));
        const appError = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
        const error = await own
          .transaction({ claim: handle(own, 'default:s:msg_8', owner) }, async (tx) => {
            await exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, ['msg_8']);
            throw appError;
          })
          .catch((e: unknown) => e);
        expect(error).toBe(appError);
        expect(error).not.toBeInstanceOf(StoreError);
        expect(await effectCount('msg_8')).toBe(0);
        expect((await own.claim('default:s:msg_8', 10_000)).status).toBe('processing');
        // Every connection of the pool serves a transaction again: none was left reserved.
        for (let i = 0; i < 2; i++) {
          await own.transaction({}, (tx) => exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, [`msg_8_${i}`]));
        }
        await Promise.all([0, 1].map((i) => own.transaction({}, (tx) => exec(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, [`msg_8_both_${i}`]))));
        expect(await effectCount('msg_8_0')).toBe(1);
        expect(await effectCount('msg_8_both_1')).toBe(1);
        const idle = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, [name]);
        expect(idle[0]!.n).toBe(0);
      } finally {
        await small.close();
      }
    });

    it.runIf(available && kind === 'pg')('on a single pg Client, transaction() refuses: other statements would join it', async () => {
      const client = new pg.Client({ connectionString: sharedPostgresUrl! });
      await client.connect();
      try {
        const single = postgresStore({ client, table: uniqueTable('single') });
        await expect(single.transaction({}, async () => {})).rejects.toThrow(
          new TypeError('postgresStore transaction() needs a pg Pool (or a postgres.js sql): on a single Client, every other statement would join the transaction'),
        );
      } finally {
        await client.end();
      }
    });
  });
});

describe('postgresStore with pg: prepared statements, and clean-up scans bounded by the index', () => {
  const test = it.skipIf(!available);

  /** One connection, so that pg_prepared_statements shows what this client prepared. */
  async function withClient<T>(fn: (client: pg.Client, table: string) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: sharedPostgresUrl! });
    await client.connect();
    const table = uniqueTable('prepared');
    try {
      return await fn(client, table);
    } finally {
      await client.query(`DROP TABLE IF EXISTS "${table}"`);
      await client.end();
    }
  }

  const prepared = async (client: pg.Client) =>
    (await client.query<{ name: string; statement: string }>(`SELECT name, statement FROM pg_prepared_statements ORDER BY name`)).rows;

  test('sends its statements by name, prepared once per connection; prepare: false sends them unnamed', async () => {
    await withClient(async (client, table) => {
      const store = postgresStore({ client, table });
      await store.setup();
      for (let i = 0; i < 3; i++) {
        const claimed = token(await store.claim(`default:s:msg_${i}`, 10_000));
        expect(await store.complete(`default:s:msg_${i}`, claimed, 60_000)).toBe(true);
      }
      const names = (await prepared(client)).map((row) => row.name);
      expect(names).toEqual([expect.stringMatching(/^webhook_receiver_claim_[0-9a-f]{8}$/), expect.stringMatching(/^webhook_receiver_complete_[0-9a-f]{8}$/)]);
      // A second store on another table prepares statements of its own, never one name for two texts.
      const other = postgresStore({ client, table: `${table}_b` });
      await other.setup();
      try {
        token(await other.claim('default:s:msg_0', 10_000));
        const rows = await prepared(client);
        expect(rows).toHaveLength(3);
        expect(new Set(rows.map((row) => row.name)).size).toBe(3);
      } finally {
        await client.query(`DROP TABLE IF EXISTS "${table}_b"`);
      }
    });
    await withClient(async (client, table) => {
      const store = postgresStore({ client, table, prepare: false });
      await store.setup();
      token(await store.claim('default:s:msg_1', 10_000));
      expect(await prepared(client)).toEqual([]);
    });
    expect(() => postgresStore({ client: new pg.Pool(), prepare: 'yes' as never })).toThrow(new TypeError('postgresStore prepare must be a boolean'));
  });

  test('the claim\'s sweep and cleanup() find expired rows through the expires_at index, not a pass over every row', async () => {
    await withClient(async (client, table) => {
      const store = postgresStore({ client, table });
      await store.setup();
      token(await store.claim('default:s:first', 10_000));
      await store.cleanup();
      // 20 000 live rows: a sweep bounded only by a filter would read every one of them.
      await client.query(`INSERT INTO "${table}" SELECT 'default:s:' || i, 't', true, now() + interval '1 day' FROM generate_series(1, 20000) i`);
      await client.query(`ANALYZE "${table}"`);
      const statements = await prepared(client);
      const claim = statements.find((row) => row.name.startsWith('webhook_receiver_claim_'))!;
      const cleanup = statements.find((row) => row.name.startsWith('webhook_receiver_cleanup_'))!;
      const planOf = async (sql: string) => (await client.query(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${sql}`)).rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      for (const plan of [await planOf(`EXECUTE ${claim.name}('default:s:new', 'tok', 10000, 64)`), await planOf(`EXECUTE ${cleanup.name}(64)`)]) {
        expect(plan).toMatch(new RegExp(`Index Scan using ${table}_expires_at on ${table}[^\\n]*\\n[^\\n]*Index Cond: \\(expires_at < `));
        expect(plan).not.toMatch(/Rows Removed by Filter: [1-9]\d{3,}/);
      }
    });
  });
});

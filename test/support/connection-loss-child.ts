/**
 * The receiving app of the connection-loss test (test/stores/connection-loss.test.ts), run as a
 * child process so that an `'error'` event nobody hears kills this process, not the test runner.
 * The real receiver (`receiver.handle`) with the Postgres store in transactional mode; the side
 * effect inserts one row per handled message, inside `store.transaction`.
 *
 * A delivery may carry a cut: where its transaction loses its connection, by `pg_terminate_backend`
 * from a second connection of this app (`idle`: between statements; `statement`: while a statement
 * runs; `commit`: just before COMMIT is sent, `pg` only), or `hold`: the transaction stops after the
 * side effect and tells the parent, which restarts the server and then lets it go on.
 *
 * With `LOSS_ENGINE=pg-boss` the receiver accepts into a transactional pg-boss inbox instead; a cut
 * delivery's session ends just before pg-boss's INSERT of the job, inside the store's transaction.
 *
 * Parent to child: `{ seq, headers, body, cut? }`, `{ resume: seq }`, `{ stats: true }`. Child to
 * parent: `{ ready }`, `{ seq, outcome }`, `{ seq, error }`, `{ held: seq }`, `{ stats }`.
 */

import pg from 'pg';
import postgres from 'postgres';
import { pgBossInbox, type PgBossLike } from '../../src/inbox/pg-boss.ts';
import { createReceiver, type WebhookContext } from '../../src/receiver.ts';
import { postgresStore } from '../../src/stores/postgres.ts';

import type { LossReply, LossRequest, LossStats } from './connection-loss-protocol.ts';

const env = process.env;
const kind = env.LOSS_CLIENT as 'pg' | 'postgres.js';
const url = env.LOSS_DATABASE_URL!;
const effects = env.LOSS_EFFECTS!;
const MAX = 4;
/** `pg-boss`: the receiver accepts into a transactional pg-boss inbox instead of running a handler. */
const accepting = env.LOSS_ENGINE === 'pg-boss';

const send = (reply: LossReply) => process.send!(reply);

/** Transactions waiting for the parent's `resume` (it restarts the server meanwhile). */
const held = new Map<number, () => void>();

async function main(): Promise<void> {
  // The second connection: it ends the transactions' sessions, as an operator or a failover would.
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  // As every app with a pg Pool must: an idle client whose server went away is reported here.
  admin.on('error', () => {});
  const terminate = async (pid: number) => {
    const { rows } = await admin.query('SELECT pg_terminate_backend($1) AS done', [pid]);
    if (rows[0]?.done !== true) throw new Error(`pg_terminate_backend(${pid}) did not end the session`);
  };
  /** Resolves once the session runs a statement (pg_stat_activity says `active`). */
  const whenActive = async (pid: number) => {
    for (let look = 0; look < 2000; look++) {
      const { rows } = await admin.query(`SELECT state FROM pg_stat_activity WHERE pid = $1 AND query LIKE 'SELECT pg_sleep%'`, [pid]);
      if (rows[0]?.state === 'active') return;
    }
    throw new Error(`session ${pid} never ran its statement`);
  };

  // What the pool did with the store's connections: released broken (destroyed), and which ones.
  const brokenClients = new WeakSet<object>();
  let brokenReleases = 0;
  let removed = 0;
  /** pg: connections whose COMMIT is to be cut, and their sessions. */
  const commitCuts = new WeakMap<object, number>();
  /** Accepting: the next transaction's session ends before its first statement after BEGIN. */
  let cutNextAccept = false;
  const acceptCuts = new WeakSet<object>();

  let client: pg.Pool | postgres.Sql;
  if (kind === 'pg') {
    const pool = new pg.Pool({ connectionString: url, max: MAX });
    pool.on('error', () => {});
    pool.on('release', (error: Error | boolean | null | undefined, released: pg.PoolClient) => {
      // pool.query releases with its callback's `null`; the store, healthy, with `false`.
      if (!error) return;
      brokenReleases++;
      brokenClients.add(released);
    });
    pool.on('remove', () => removed++);
    // COMMIT intercepted on each checked-out connection, for the `commit` cut.
    const connect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>;
    const wrapped = new WeakSet<object>();
    pool.connect = ((...args: unknown[]) => {
      if (args.length > 0) return (connect as (...a: unknown[]) => unknown)(...args);
      return connect().then((connection) => {
        if (!wrapped.has(connection)) {
          wrapped.add(connection);
          const query = connection.query.bind(connection) as (...a: unknown[]) => unknown;
          (connection as { query: unknown }).query = (...a: unknown[]) => {
            if (acceptCuts.has(connection) && a[0] !== 'BEGIN') {
              // pg-boss's INSERT of the job, sent in the store's transaction.
              acceptCuts.delete(connection);
              return terminate((connection as unknown as { processID: number }).processID).then(() => query(...a));
            }
            const pid = commitCuts.get(connection);
            if (a[0] !== 'COMMIT' || pid === undefined) return query(...a);
            commitCuts.delete(connection);
            return terminate(pid).then(() => query(...a));
          };
        }
        if (cutNextAccept && args.length === 0) {
          cutNextAccept = false;
          acceptCuts.add(connection);
        }
        return connection;
      });
    }) as typeof pool.connect;
    client = pool;
  } else {
    client = postgres(url, { max: MAX, onnotice: () => {} });
  }
  const store = postgresStore({ client: client as pg.Pool, table: env.LOSS_TABLE!, autoCleanup: false });

  const query = (tx: unknown, text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> =>
    kind === 'pg'
      ? (tx as pg.PoolClient).query(text, values).then((result) => result.rows as Record<string, unknown>[])
      : // postgres.js runs a query once it is awaited: `then` starts it.
        (tx as unknown as postgres.TransactionSql).unsafe(text, values as never[]).then((rows) => [...rows] as Record<string, unknown>[]);

  const handler = (id: string, seq: number, cut: LossRequest['cut'], context: WebhookContext) =>
    store.transaction(context, async (tx) => {
      const [row] = await query(tx, 'SELECT pg_backend_pid() AS pid');
      const pid = row!.pid as number;
      await query(tx, `INSERT INTO "${effects}" (id) VALUES ($1)`, [id]);
      if (cut === 'idle') await terminate(pid);
      else if (cut === 'statement') {
        const sleeping = query(tx, 'SELECT pg_sleep(20)');
        // It fails once the session ends, maybe before `terminate` resolves: awaited below.
        sleeping.catch(() => {});
        await whenActive(pid);
        await terminate(pid);
        await sleeping;
      } else if (cut === 'commit') commitCuts.set(tx, pid);
      else if (cut === 'hold') {
        const resumed = new Promise<void>((resolve) => held.set(seq, resolve));
        send({ held: seq });
        await resumed;
      }
    });

  const onError = env.LOSS_DEBUG ? (error: unknown, context: object) => console.error('onError', context, error) : () => {};
  let boss: (PgBossLike & { stop(options: object): Promise<void> }) | undefined;
  if (accepting) {
    const { PgBoss } = await import('pg-boss');
    const started = new PgBoss({ connectionString: url, schema: env.LOSS_SCHEMA!, supervise: false, schedule: false, max: 2 });
    started.on('error', () => {});
    await started.start();
    boss = started as unknown as PgBossLike & { stop(options: object): Promise<void> };
  }
  const receiver = accepting
    ? createReceiver({ secrets: env.LOSS_SECRET!, inbox: pgBossInbox({ boss: boss!, queue: 'loss', transactional: true }), idempotency: { store, lockSeconds: 3 }, onError })
    : createReceiver({ secrets: env.LOSS_SECRET!, idempotency: { store, lockSeconds: 3 }, onError });

  process.on('message', (message: LossRequest | { resume: number } | { stats: true }) => {
    if ('resume' in message) {
      held.get(message.resume)?.();
      held.delete(message.resume);
      return;
    }
    if ('stats' in message) {
      void stats(client, brokenClients, brokenReleases, removed, boss).then((result) => send({ stats: result }));
      return;
    }
    const input = { headers: message.headers, body: message.body };
    if (accepting && message.cut !== undefined) cutNextAccept = true;
    (accepting ? receiver.accept(input) : receiver.handle(input, (webhook, context) => handler(webhook.id, message.seq, message.cut, context)))
      .then(
        (result) => send({ seq: message.seq, outcome: result.outcome }),
        (error: unknown) => send({ seq: message.seq, error: describe(error) }),
      );
  });
  send({ ready: true });
}

/**
 * The store's connections after the run: every one the pool holds is checked out at once and
 * answers `SELECT 1`, and none of them is one the store released as broken.
 */
async function stats(client: pg.Pool | postgres.Sql, brokenClients: WeakSet<object>, brokenReleases: number, removed: number, boss: PgBossLike | undefined): Promise<LossStats> {
  const pool = await poolStats(client, brokenClients, brokenReleases, removed);
  if (boss === undefined) return pool;
  const jobs = (await boss.findJobs('loss')) as { data: { id: string } }[];
  return { ...pool, jobs: { rows: jobs.length, distinct: new Set(jobs.map((job) => job.data.id)).size } };
}

async function poolStats(client: pg.Pool | postgres.Sql, brokenClients: WeakSet<object>, brokenReleases: number, removed: number): Promise<LossStats> {
  if (kind === 'pg') {
    const pool = client as pg.Pool;
    const total = pool.totalCount;
    const connections = await Promise.all(Array.from({ length: Math.max(total, 1) }, () => pool.connect()));
    let healthy = 0;
    let reused = 0;
    for (const connection of connections) {
      if (brokenClients.has(connection)) reused++;
      if ((await connection.query('SELECT 1 AS one')).rows[0]?.one === 1) healthy++;
    }
    for (const connection of connections) connection.release();
    return { brokenReleases, removed, checked: connections.length, healthy, reused };
  }
  const sql = client as postgres.Sql;
  const answers = await Promise.all(Array.from({ length: MAX }, () => sql.unsafe('SELECT 1 AS one')));
  const healthy = answers.filter((rows) => rows[0]?.one === 1).length;
  return { brokenReleases, removed, checked: MAX, healthy, reused: 0 };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

function describe(error: unknown): { name: string; code?: string; status?: number; message: string; cause?: string } {
  if (!(error instanceof Error)) return { name: 'thrown', message: String(error) };
  const { code, status } = error as { code?: unknown; status?: unknown };
  return {
    name: error.name,
    ...(typeof code === 'string' ? { code } : {}),
    ...(typeof status === 'number' ? { status } : {}),
    message: error.message,
    ...(error.cause instanceof Error ? { cause: `${error.cause.name}: ${error.cause.message}` } : {}),
  };
}

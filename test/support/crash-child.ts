/**
 * The receiving app of the crash test (test/stores/crash.test.ts), run as a child process: the
 * real receiver (`createReceiver`, `receiver.handle`) with a Postgres store in transactional mode,
 * or a Redis store with a plain (non-transactional) side effect. Its side effect inserts one row
 * per handled message into a table. It kills itself with SIGKILL at the named point the parent
 * chose, the n-th time it gets there.
 *
 * The parent sends `{ seq, headers, body }` over IPC and gets `{ seq, outcome }` or
 * `{ seq, error }` back.
 *
 * The transactional handler passes the receiver's own `WebhookContext` to `store.transaction`, as
 * an app does.
 */

import pg from 'pg';
import postgres from 'postgres';
import { Redis } from 'ioredis';
import { createReceiver, type WebhookContext } from '../../src/receiver.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { redisStore } from '../../src/stores/redis.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';

import type { ChildReply, ChildRequest, CrashStoreKind, KillPoint } from './crash-protocol.ts';

const env = process.env;
const kind = env.CRASH_STORE as CrashStoreKind;
const killPoint = env.CRASH_KILL_POINT as KillPoint | undefined;
const killAt = Number(env.CRASH_KILL_AT ?? '0');
const table = env.CRASH_TABLE!;
const effects = env.CRASH_EFFECTS!;
const ttlMs = 3_600_000;
const lockMs = 1000;

let reached = 0;
/** The kill switch: SIGKILL at the chosen point, the chosen time it is reached. */
function point(name: KillPoint): void {
  if (name !== killPoint) return;
  reached++;
  if (reached === killAt) process.kill(process.pid, 'SIGKILL');
}

const send = (reply: ChildReply) => process.send!(reply);

async function main(): Promise<void> {
  const pgUrl = env.CRASH_DATABASE_URL!;
  // The side effects' connection; in transactional mode the store's own.
  const pool = new pg.Pool({ connectionString: pgUrl, max: 8 });
  pool.on('error', () => {});

  let store: IdempotencyStore;
  let handler: (id: string, context: WebhookContext) => Promise<void>;

  if (kind === 'redis') {
    const redis = new Redis(env.CRASH_REDIS_URL!, { lazyConnect: true });
    redis.on('error', () => {});
    await redis.connect();
    const inner = redisStore({ client: redis, prefix: `${table}:` });
    store = {
      ...inner,
      async complete(key, token, ttl) {
        point('before-commit');
        const done = await inner.complete(key, token, ttl);
        point('after-commit');
        return done;
      },
    };
    handler = async (id) => {
      point('before-effect');
      const insert = pool.query(`INSERT INTO "${effects}" (id) VALUES ($1)`, [id]);
      if (killPoint === 'during-effect') setImmediate(() => point('during-effect'));
      await insert;
      point('after-effect');
    };
  } else {
    let client: pg.Pool | postgres.Sql;
    if (kind === 'pg') {
      // The store's pool, with COMMIT intercepted for the kill points around it.
      const storePool = new pg.Pool({ connectionString: pgUrl, max: 8 });
      storePool.on('error', () => {});
      const connect = storePool.connect.bind(storePool) as () => Promise<pg.PoolClient>;
      const wrapped = new WeakSet<pg.PoolClient>();
      // Only the promise form (what transaction() uses); pool.query passes a callback.
      storePool.connect = ((...args: unknown[]) => {
        if (args.length > 0) return (connect as (...a: unknown[]) => unknown)(...args);
        return connect().then((connection) => {
          if (!wrapped.has(connection)) {
            wrapped.add(connection);
            // Every argument passes through: pool.query calls this with a callback.
            const query = connection.query.bind(connection) as (...a: unknown[]) => unknown;
            (connection as { query: unknown }).query = (...a: unknown[]) => {
              if (a[0] === 'COMMIT') point('before-commit');
              return query(...a);
            };
          }
          return connection;
        });
      }) as typeof storePool.connect;
      client = storePool;
    } else {
      client = postgres(pgUrl, {
        max: 8,
        onnotice: () => {},
        // postgres.js reports each statement as it is about to be written: kill before COMMIT.
        debug: (_connection, query) => {
          if (query.trim().toLowerCase() === 'commit') point('before-commit');
        },
      });
    }
    const pgStore = postgresStore({ client: client as pg.Pool, table, autoCleanup: false });
    store = pgStore;
    handler = async (id, context) => {
      await pgStore.transaction(context, async (tx) => {
        point('before-effect');
        const text = `INSERT INTO "${effects}" (id) VALUES ($1)`;
        const insert = kind === 'pg' ? (tx as pg.PoolClient).query(text, [id]) : (tx as unknown as postgres.TransactionSql).unsafe(text, [id]);
        if (killPoint === 'during-effect') setImmediate(() => point('during-effect'));
        await insert;
        point('after-effect');
      });
      point('after-commit');
    };
  }

  const receiver = createReceiver({ secrets: env.CRASH_SECRET!, idempotency: { store, lockSeconds: lockMs / 1000, ttlSeconds: ttlMs / 1000 }, onError: () => {} });

  process.on('message', (message: ChildRequest) => {
    receiver
      .handle({ headers: message.headers, body: message.body }, (webhook, context) => handler(webhook.id, context))
      .then(
        (result) => send({ seq: message.seq, outcome: result.outcome }),
        (error: unknown) => send({ seq: message.seq, error: describe(error) }),
      );
  });
  send({ ready: true });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? ` (cause: ${error.cause.name}: ${error.cause.message})` : '';
  return `${error.name}: ${error.message}${cause}`;
}

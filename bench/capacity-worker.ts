/**
 * An inbox worker of the capacity section (capacity.ts), in its own process as a deployment runs
 * it: `inbox.work(handler)` of the built package on the queue an accepting server of
 * http-server.ts filled, with a store of its own kind for the workers' claims (key class `w`).
 *
 *   capacity-worker.ts <bullmq|pg-boss> <queue name>
 *
 * It answers `{ type: 'ready' }` once connected, and is then sent `{ type: 'drain', expected }`:
 * it starts working, and when its handler has processed `expected` jobs it answers
 * `{ type: 'drained', processed, cpuMicros }`, `cpuMicros` being the CPU time this process spent
 * from the request to the last job (its start-up is not a delivery's cost). It exits when the
 * channel closes, after closing what it opened.
 */

import { Redis } from 'ioredis';
import pg from 'pg';
import type { Inbox, InboxWorker } from '../src/inbox/types.ts';
import type { IdempotencyStore } from '../src/stores/types.ts';
import { importBuilt } from './build.ts';

const [engine, queueName] = process.argv.slice(2);
const build = process.env.BENCH_BUILD;
if ((engine !== 'bullmq' && engine !== 'pg-boss') || queueName === undefined || build === undefined) {
  throw new Error('usage: capacity-worker.ts <bullmq|pg-boss> <queue name>, with BENCH_BUILD set');
}
if (typeof process.send !== 'function') throw new Error('capacity-worker.ts runs as a child with an IPC channel');

/** The durability warning is expected here (the bench's Redis runs without persistence). */
const quiet = { warn() {}, error() {} };

let closeAll: () => Promise<void> = async () => {};

async function inboxOf(): Promise<{ inbox: Inbox; store: IdempotencyStore }> {
  if (engine === 'bullmq') {
    const url = process.env.BENCH_REDIS_URL;
    if (url === undefined) throw new Error('BENCH_REDIS_URL must name the Redis server');
    const { Queue } = await import('bullmq');
    const { bullmqInbox } = await importBuilt<typeof import('../src/inbox/bullmq.ts')>(build!, 'bullmq');
    const { redisStore } = await importBuilt<typeof import('../src/stores/redis.ts')>(build!, 'redis');
    // BullMQ's worker blocks on its connection: it needs one of its own (`maxRetriesPerRequest: null`).
    const redis = new Redis(url, { maxRetriesPerRequest: null, enableAutoPipelining: true });
    const queue = new Queue(queueName!, { connection: redis });
    await queue.waitUntilReady();
    const inbox = bullmqInbox({ queue, logger: quiet });
    closeAll = async () => {
      await inbox.close();
      await queue.close();
      redis.disconnect();
    };
    return { inbox, store: redisStore({ client: redis, prefix: `bench-worker:${process.pid}:` }) };
  }
  const url = process.env.BENCH_POSTGRES_URL;
  if (url === undefined) throw new Error('BENCH_POSTGRES_URL must name the Postgres server');
  const { PgBoss } = await import('pg-boss');
  const { pgBossInbox } = await importBuilt<typeof import('../src/inbox/pg-boss.ts')>(build!, 'pg-boss');
  const { postgresStore } = await importBuilt<typeof import('../src/stores/postgres.ts')>(build!, 'postgres');
  const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false });
  boss.on('error', () => {});
  await boss.start();
  const pool = new pg.Pool({ connectionString: url, max: 4, idleTimeoutMillis: 0 });
  const store = postgresStore({ client: pool, table: `bench_worker_claims_${process.pid}` });
  await store.setup();
  // Polled once a second when the queue is empty; with jobs waiting pg-boss fetches again at once.
  const inbox = pgBossInbox({ boss, queue: queueName!, pollingIntervalSeconds: 1 });
  closeAll = async () => {
    await inbox.close();
    await boss.stop({ graceful: false });
    await pool.end();
  };
  return { inbox, store };
}

const { inbox, store } = await inboxOf();
let worker: InboxWorker | undefined;
let processed = 0;
let waiting: { expected: number; cpuAtStart: NodeJS.CpuUsage } | undefined;

function settle(): void {
  if (waiting === undefined || processed < waiting.expected) return;
  const cpu = process.cpuUsage(waiting.cpuAtStart);
  waiting = undefined;
  process.send!({ type: 'drained', processed, cpuMicros: cpu.user + cpu.system });
}

const failed = (error: unknown) => process.send!({ type: 'error', message: error instanceof Error ? error.stack : String(error) });
process.on('message', (message: { type?: string; expected?: number }) => {
  if (message?.type !== 'drain' || typeof message.expected !== 'number') return;
  waiting = { expected: processed + message.expected, cpuAtStart: process.cpuUsage() };
  if (worker === undefined) {
    inbox
      .work(
        async (webhook) => {
          if ((webhook.json() as { type?: unknown } | null)?.type !== 'invoice.paid') throw new Error('the worker got an unexpected event');
          processed++;
          settle();
        },
        { idempotency: { store }, concurrency: 16 },
      )
      .then((started) => {
        worker = started;
      }, failed);
  } else {
    settle();
  }
});
process.once('disconnect', () => {
  const stop = worker === undefined ? Promise.resolve() : worker.close();
  // The parent has gone: whatever closing fails, this process exits all the same.
  void stop
    .then(() => closeAll())
    .finally(() => process.exit(0));
});
process.send({ type: 'ready' });

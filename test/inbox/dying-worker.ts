/**
 * An inbox worker that dies for real (SIGKILL to itself), run as a child process (`node --import
 * tsx`) by the tests of a dead letter whose handler had succeeded. `DYING_WHEN` says when:
 * - `handler`: inside the handler, before it returns (its claim is neither completed nor released);
 * - `completed`: once the handler succeeded and its claim's completion landed in the store
 *   (`onOutcome` reports `processed`), before the engine hears of it.
 * Each handler run is a JSON line in `DYING_LOG`, appended synchronously (in the kernel before the
 * kill). The engine is BullMQ (`DYING_ENGINE=bullmq`, on `DYING_URL`'s Redis, with its claims in
 * a `redisStore` under `DYING_PREFIX`) or pg-boss (`pg-boss`, on `DYING_URL`'s PostgreSQL, its
 * claims in a `postgresStore` table `DYING_TABLE`, its schema `DYING_SCHEMA`).
 */

import { appendFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { pgBossInbox, type PgBossLike } from '../../src/inbox/pg-boss.ts';
import type { Inbox } from '../../src/inbox/types.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { redisStore } from '../../src/stores/redis.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const when = env('DYING_WHEN');
const url = env('DYING_URL');
const log = (event: string, id: string) => appendFileSync(env('DYING_LOG'), `${JSON.stringify({ event, id, pid: process.pid })}\n`);
const die = () => process.kill(process.pid, 'SIGKILL');

async function open(): Promise<{ inbox: Inbox; store: IdempotencyStore }> {
  if (env('DYING_ENGINE') === 'bullmq') {
    const connection = new Redis(url, { maxRetriesPerRequest: null });
    const queue = new Queue(env('DYING_QUEUE'), { connection, prefix: env('DYING_BULL_PREFIX') });
    const store = redisStore({ client: connection, prefix: env('DYING_PREFIX') });
    // As the test's own inbox: a stall is noticed within about 2 s, and a second one fails the job.
    const inbox = bullmqInbox({ queue, maxAttempts: 3, backoff: { delayMs: 0 }, logger: { warn() {}, error() {} }, workerOptions: { lockDuration: 2000, stalledInterval: 1000, maxStalledCount: 1 } });
    return { inbox, store };
  }
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: url, schema: env('DYING_SCHEMA'), supervise: false, schedule: false, migrate: false, max: 3 });
  boss.on('error', () => {});
  await boss.start();
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  const inbox = pgBossInbox({ boss: boss as unknown as PgBossLike, queue: env('DYING_QUEUE'), maxAttempts: 1, pollingIntervalSeconds: 0.5, queueOptions: { expireInSeconds: 2 } });
  return { inbox, store: postgresStore({ client: pool, table: env('DYING_TABLE') }) };
}

const { inbox, store } = await open();
await inbox.work(
  (webhook) => {
    log('start', webhook.id);
    if (when === 'handler') die();
    log('done', webhook.id);
  },
  {
    // A short lease, so the next worker does not wait long for the dead one's claim.
    idempotency: { store, lockSeconds: 2 },
    logger: { warn() {}, error() {} },
    onOutcome: (event) => {
      if (event.outcome === 'processed' && when === 'completed') die();
    },
  },
);
process.send?.({ ready: true });

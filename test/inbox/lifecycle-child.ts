/**
 * A small app run as a child process by lifecycle.test.ts: it starts an inbox and a worker on a
 * real engine, has one job processed, then closes in the documented order (the worker, the inbox,
 * then what the app itself opened) and prints `closed`. Nothing else ends it: if anything the
 * package made stays open, the process does not exit and the test says so.
 *
 * `LIFECYCLE_KIND`:
 * - `bullmq-client`: the queue on the app's ioredis client (the inbox duplicates it for its workers);
 * - `bullmq-options`: the queue on connection options (BullMQ makes the workers' connections);
 * - `bullmq-inbox-only`: as `bullmq-client`, but the app calls `inbox.close()` without `worker.close()`;
 * - `pg-boss`: a `PgBoss` instance the app started, and the Postgres store on the app's pool.
 */

import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { acceptedJob } from './conformance.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { pgBossInbox, type PgBossLike } from '../../src/inbox/pg-boss.ts';
import type { Inbox, JobOutcomeEvent, WorkOptions } from '../../src/inbox/types.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { redisStore } from '../../src/stores/redis.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const kind = env('LIFECYCLE_KIND');
const url = env('LIFECYCLE_URL');
const queueName = env('LIFECYCLE_QUEUE');
const quiet = { warn() {}, error() {} };

/** The app's parts: the inbox, the workers' store, and how the app closes what it opened itself. */
async function open(): Promise<{ inbox: Inbox; work: WorkOptions; closeApp(): Promise<void> }> {
  if (kind.startsWith('bullmq')) {
    const redis = new Redis(url);
    const { hostname, port } = new URL(url);
    const queue = kind === 'bullmq-options' ? new Queue(queueName, { connection: { host: hostname, port: Number(port) } }) : new Queue(queueName, { connection: redis });
    return {
      inbox: bullmqInbox({ queue, logger: quiet }),
      work: { idempotency: { store: redisStore({ client: redis, prefix: `${queueName}:` }) } },
      async closeApp() {
        await queue.close();
        await redis.quit();
      },
    };
  }
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: url, schema: env('LIFECYCLE_SCHEMA') });
  boss.on('error', () => {});
  await boss.start();
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const store = postgresStore({ client: pool, table: env('LIFECYCLE_TABLE') });
  await store.setup();
  return {
    inbox: pgBossInbox({ boss: boss as unknown as PgBossLike, queue: queueName, pollingIntervalSeconds: 0.5 }),
    work: { idempotency: { store } },
    async closeApp() {
      await boss.stop();
      await pool.end();
    },
  };
}

const { inbox, work, closeApp } = await open();
let processed!: () => void;
const done = new Promise<void>((resolve) => (processed = resolve));
const worker = await inbox.work(() => {}, { ...work, logger: quiet, onOutcome: (event: JobOutcomeEvent) => event.outcome === 'processed' && processed() });
await inbox.enqueue(await acceptedJob('{"ping":1}', { id: `msg_${queueName}` }));
await done;
if (kind !== 'bullmq-inbox-only') await worker.close();
await inbox.close();
// Idempotent: a second close (from another shutdown path) changes nothing.
await inbox.close();
await closeApp();
process.stdout.write('closed\n');

/**
 * One inbox worker of the inbox chaos test, run as a child process (`node --import tsx`) so that it
 * can be killed for real: `inbox.work` on a BullMQ queue with its claims in a `redisStore` on the
 * same Redis, on a pg-boss queue with its claims in a `postgresStore` on the same database, or on an
 * SQS queue (fauxqs, its URL in `CHAOS_QUEUE`) with its claims in a `redisStore` (`CHAOS_STORE_URL`). Its handler is the side effect the test counts: one JSON line per event appended to this
 * worker's log with a synchronous append (in the kernel once the call returns, so a SIGKILL right
 * after cannot lose it): `start`, then `done` or `fail`. A tenth of the ids fail their first two
 * attempts; a fiftieth (the poison ids) always throw `PermanentError`, unless listed in the healed
 * file. It reports `{ ready: true }` over IPC once it takes jobs, and `{ running: id }` when a
 * handler starts.
 */

import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { PermanentError } from '../../src/errors.ts';
import type { PgBossLike } from '../../src/inbox/pg-boss.ts';
import type { Inbox } from '../../src/inbox/types.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { redisStore } from '../../src/stores/redis.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import { chaosBullmqInbox, chaosPgBossInbox, chaosSqsInbox, kindOf } from './inbox-kinds.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const engine = env('CHAOS_ENGINE');
const url = env('CHAOS_URL');
const queueName = env('CHAOS_QUEUE');
const logFile = env('CHAOS_LOG');
const healedFile = env('CHAOS_HEALED');

const log = (event: Record<string, unknown>) => appendFileSync(logFile, `${JSON.stringify({ ...event, pid: process.pid, at: Date.now() })}\n`);

/** The engine's inbox and the workers' store, as the test's process builds the same inbox. */
async function open(): Promise<{ inbox: Inbox; store: IdempotencyStore }> {
  if (engine === 'sqs') {
    const { SQSClient } = await import('@aws-sdk/client-sqs');
    const client = new SQSClient({ endpoint: url, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, maxAttempts: 1 });
    const storeClient = new Redis(env('CHAOS_STORE_URL'), { maxRetriesPerRequest: 1, enableOfflineQueue: false });
    storeClient.on('error', () => {});
    return { inbox: chaosSqsInbox(client, queueName), store: redisStore({ client: storeClient, timeoutMs: 1000 }) };
  }
  if (engine === 'bullmq') {
    const connection = new Redis(url, { maxRetriesPerRequest: null });
    connection.on('error', () => {});
    const storeClient = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
    storeClient.on('error', () => {});
    const queue = new Queue(queueName, { connection });
    queue.on('error', () => {});
    return { inbox: chaosBullmqInbox(queue), store: redisStore({ client: storeClient, timeoutMs: 1000 }) };
  }
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: url, supervise: true, superviseIntervalSeconds: 1, schedule: false, max: 6 });
  boss.on('error', (error: Error) => process.env.CHAOS_TRACE === '1' && console.error(`pg-boss error: ${error.message}`));
  await boss.start();
  const pool = new pg.Pool({ connectionString: url, max: 8 });
  pool.on('error', () => {});
  return { inbox: chaosPgBossInbox(boss as unknown as PgBossLike, queueName), store: postgresStore({ client: pool, timeoutMs: 1000 }) };
}

const { inbox, store } = await open();
await inbox.work(
  async (webhook, context) => {
    log({ event: 'start', id: webhook.id, attempt: context.attempt });
    process.send?.({ running: webhook.id });
    await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 40));
    const kind = kindOf(webhook.id);
    const healed = existsSync(healedFile) && readFileSync(healedFile, 'utf8').split('\n').includes(webhook.id);
    if (kind === 'poison' && !healed) {
      log({ event: 'fail', id: webhook.id, attempt: context.attempt, permanent: true });
      throw new PermanentError(`poison ${webhook.id}`);
    }
    if (kind === 'flaky' && context.attempt <= 2) {
      log({ event: 'fail', id: webhook.id, attempt: context.attempt });
      throw new Error(`flaky ${webhook.id} attempt ${context.attempt}`);
    }
    log({ event: 'done', id: webhook.id, attempt: context.attempt });
  },
  {
    idempotency: { store, lockSeconds: 5 },
    concurrency: 8,
    onError: () => {},
    // The failures are on purpose, and the log above records them.
    logger: { warn: () => {}, error: () => {} },
    // Reported once the claim's completion landed in the store: from here a redelivery is a duplicate.
    onOutcome: (event) => event.outcome === 'processed' && log({ event: 'settled', id: event.webhookId, attempt: event.attempt }),
  },
);
process.send?.({ ready: true });

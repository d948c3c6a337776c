/**
 * One inbox worker of the inbox chaos test, run as a child process (`node --import tsx`) so that it
 * can be killed for real: `inbox.work` on a BullMQ queue, its claims in a `redisStore` on the same
 * Redis. Its handler is the side effect the test counts: one JSON line per event appended to this
 * worker's log with a synchronous append (in the kernel once the call returns, so a SIGKILL right
 * after cannot lose it): `start`, then `done` or `fail`. A tenth of the ids fail their first two
 * attempts; a fiftieth (the poison ids) always throw `PermanentError`, unless listed in the healed
 * file. It reports `{ ready: true }` over IPC once it takes jobs, and `{ running: id }` when a
 * handler starts.
 */

import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { PermanentError } from '../../src/errors.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { redisStore } from '../../src/stores/redis.ts';
import { kindOf } from './inbox-kinds.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const redisUrl = env('CHAOS_REDIS_URL');
const queueName = env('CHAOS_QUEUE');
const logFile = env('CHAOS_LOG');
const healedFile = env('CHAOS_HEALED');

const log = (event: Record<string, unknown>) => appendFileSync(logFile, `${JSON.stringify({ ...event, pid: process.pid, at: Date.now() })}\n`);

const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
connection.on('error', () => {});
const storeClient = new Redis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
storeClient.on('error', () => {});
const queue = new Queue(queueName, { connection });
queue.on('error', () => {});
const inbox = bullmqInbox({
  queue,
  maxAttempts: 4,
  backoff: { delayMs: 100 },
  logger: { warn: () => {}, error: () => {} },
  // Two kills of one job must not fail it: BullMQ fails a job stalled more than maxStalledCount times.
  workerOptions: { lockDuration: 2000, stalledInterval: 1000, maxStalledCount: 5 },
});

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
  { idempotency: { store: redisStore({ client: storeClient, timeoutMs: 1000 }), lockSeconds: 2 }, concurrency: 8, onError: () => {} },
);
process.send?.({ ready: true });

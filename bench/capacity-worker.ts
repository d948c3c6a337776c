/**
 * An inbox worker of the capacity section (capacity.ts), in its own process as a deployment runs
 * it: `inbox.work(handler)` of the built package on the queue an accepting server of
 * http-server.ts filled, with a store of its own kind for the workers' claims (key class `w`).
 *
 *   capacity-worker.ts <bullmq|pg-boss|sqs> <queue name>
 *
 * `sqs` works the queue of that name on the local SQS (`BENCH_SQS_URL`) with the DynamoDB store on
 * the local DynamoDB (`BENCH_DYNAMODB_URL`), a table of its own; both clients are counted
 * (aws-usage.ts).
 *
 * It answers `{ type: 'ready' }` once connected, and is then sent `{ type: 'drain', expected }`:
 * it starts working, and when its handler has processed `expected` jobs (with SQS: and their
 * messages are deleted, the last request a job costs) it answers
 * `{ type: 'drained', processed, cpuMicros, usage }`: the jobs it processed since the request (the
 * expected ones, and any that came with them), the CPU time this process spent from the request to
 * the last job (its start-up is not a delivery's cost) and what it asked of DynamoDB and SQS
 * meanwhile (`sqs` only). It exits when the channel closes, after
 * closing what it opened.
 */

import { Redis } from 'ioredis';
import pg from 'pg';
import type { Inbox, InboxWorker } from '../src/inbox/types.ts';
import type { IdempotencyStore } from '../src/stores/types.ts';
import { meteredDynamo, meteredSqs, usageBetween, type AwsUsage } from './aws-usage.ts';
import { localConfig } from '../test/support/dynamodb.ts';
import { importBuilt } from './build.ts';

const [engine, queueName] = process.argv.slice(2);
const build = process.env.BENCH_BUILD;
if ((engine !== 'bullmq' && engine !== 'pg-boss' && engine !== 'sqs') || queueName === undefined || build === undefined) {
  throw new Error('usage: capacity-worker.ts <bullmq|pg-boss|sqs> <queue name>, with BENCH_BUILD set');
}
if (typeof process.send !== 'function') throw new Error('capacity-worker.ts runs as a child with an IPC channel');

/** The durability warning is expected here (the bench's Redis runs without persistence). */
const quiet = { warn() {}, error() {} };

let closeAll: () => Promise<void> = async () => {};
/** What the worker asked of DynamoDB and SQS so far (`sqs`). */
let awsUsage: (() => AwsUsage) | undefined;

/**
 * The SQS inbox on the queue the `sqs-dynamodb` server filled, its dead-letter queue read from the
 * queue's redrive policy, and the DynamoDB store in a table of its own: the workers' claims, as a
 * deployment keeps them. One attempt per request on both clients, so that every request is counted.
 */
async function sqsInboxOf(): Promise<{ inbox: Inbox; store: IdempotencyStore }> {
  const sqsUrl = process.env.BENCH_SQS_URL;
  const dynamoUrl = process.env.BENCH_DYNAMODB_URL;
  if (sqsUrl === undefined || dynamoUrl === undefined) throw new Error('BENCH_SQS_URL and BENCH_DYNAMODB_URL must name the local SQS and DynamoDB');
  const { SQSClient, GetQueueUrlCommand } = await import('@aws-sdk/client-sqs');
  const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
  const { sqsInbox } = await importBuilt<typeof import('../src/inbox/sqs/index.ts')>(build!, 'sqs');
  const { dynamoStore } = await importBuilt<typeof import('../src/stores/dynamodb.ts')>(build!, 'dynamodb');
  const sqs = new SQSClient({ endpoint: sqsUrl, region: 'us-east-1', credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' }, maxAttempts: 1 });
  const dynamo = new DynamoDBClient({ ...localConfig(dynamoUrl), maxAttempts: 1 });
  const { QueueUrl: queueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: queueName }));
  const sqsMeter = meteredSqs(sqs);
  const dynamoMeter = meteredDynamo(dynamo);
  const store = dynamoStore({ client: dynamoMeter.client, table: `bench-worker-claims-${process.pid}` });
  await store.setup();
  const inbox = sqsInbox({ client: sqsMeter.client, queueUrl: queueUrl!, logger: quiet });
  awsUsage = () => ({ dynamodb: dynamoMeter.usage(), sqs: sqsMeter.usage() });
  closeAll = async () => {
    await inbox.close();
    sqs.destroy();
    dynamo.destroy();
  };
  return { inbox, store };
}

async function inboxOf(): Promise<{ inbox: Inbox; store: IdempotencyStore }> {
  if (engine === 'sqs') return sqsInboxOf();
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
let waiting: { expected: number; startedWith: number; cpuAtStart: NodeJS.CpuUsage; usageAtStart: AwsUsage | undefined } | undefined;

/** How long the drain waits, after the last job, for SQS to have deleted the jobs' messages. */
const DELETES_WAIT_MS = 10_000;

/**
 * How many of the drain's `jobs` are settled: with SQS, the `DeleteMessage` requests sent since
 * the drain started (each goes out after its job's handler and claim are done), so that the
 * requests counted are whole jobs'; without it, all of them.
 */
function deletedSince(usageAtStart: AwsUsage | undefined, jobs: number): number {
  if (awsUsage === undefined || usageAtStart === undefined) return jobs;
  return usageBetween(usageAtStart, awsUsage()).sqs.requests['DeleteMessage'] ?? 0;
}

function settle(): void {
  if (waiting === undefined || processed < waiting.expected) return;
  const drain = waiting;
  waiting = undefined;
  const deadline = Date.now() + DELETES_WAIT_MS;
  const answer = () => {
    const jobs = processed - drain.startedWith;
    const deleted = deletedSince(drain.usageAtStart, jobs);
    if (deleted < jobs) {
      if (Date.now() < deadline) setTimeout(answer, 5);
      // Counts of part of the jobs would be reported as whole deliveries': refused instead.
      else failed(new Error(`the worker's SQS deletes did not catch up with its jobs within ${DELETES_WAIT_MS / 1000} s: ${deleted} of ${jobs}`));
      return;
    }
    const cpu = process.cpuUsage(drain.cpuAtStart);
    const usage = awsUsage === undefined || drain.usageAtStart === undefined ? undefined : usageBetween(drain.usageAtStart, awsUsage());
    process.send!({ type: 'drained', processed: processed - drain.startedWith, cpuMicros: cpu.user + cpu.system, usage });
  };
  answer();
}

const failed = (error: unknown) => process.send!({ type: 'error', message: error instanceof Error ? error.stack : String(error) });
process.on('message', (message: { type?: string; expected?: number }) => {
  if (message?.type !== 'drain' || typeof message.expected !== 'number') return;
  waiting = { expected: processed + message.expected, startedWith: processed, cpuAtStart: process.cpuUsage(), usageAtStart: awsUsage?.() };
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

/**
 * The servers of the inbox section (inbox.ts), run by http-server.ts as `http-server.ts inbox
 * <cell>`: the Fastify adapter accepting into an inbox (it answers 202 itself), and beside each
 * one the hand-written route doing the same work, like with like:
 *
 * - `bullmq`: `webhooks({ secrets, inbox: bullmqInbox({ queue }), idempotency: { store } })`, the
 *   Redis store and the queue on one ioredis client (`enableAutoPipelining: true`, as section 10);
 * - `bullmq-inline`: the hand-written check, the Redis store's own two scripts sent bare
 *   (bare-store.ts: the claim before the add, the completion after it, as the receiver runs them),
 *   and `queue.add` of the same job with the same options and job id, on the same client;
 * - `pg-boss`: `pgBossInbox({ boss, queue })` with the Postgres store on a `pg` Pool;
 * - `pg-boss-inline`: the hand-written check, the Postgres store's two statements sent bare, and
 *   `boss.send` of the same job with the same id to a queue with the same policy;
 * - `sqs`: `sqsInbox({ client, queueUrl, maxMessageBytes })` with the Redis store, on a local SQS
 *   (fauxqs in a process of its own, `BENCH_SQS_URL`);
 * - `sqs-inline`: the hand-written check, the Redis store's two scripts sent bare, and one
 *   `SendMessage` of the same message (the job in the inbox's envelope) on the same `SQSClient`;
 * - `sqs-dynamodb` (the capacity section's, not the inbox section's): `sqsInbox` with the DynamoDB
 *   store (dynalite, `BENCH_DYNAMODB_URL`), on a queue with a dead-letter queue and a redrive
 *   policy, as a deployment has, for the worker of capacity-worker.ts to drain; both clients
 *   counted (aws-usage.ts), and the counts answered to `usage()`.
 *
 * The server's count of processed events is the number of jobs in its queue (read after a run,
 * so counting costs the requests nothing); `reset` empties the queue between runs, so the inbox's
 * backlog bound never refuses and every run starts from an empty queue.
 */

import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import Fastify, { type FastifyInstance } from 'fastify';
import type { NodeRedisClientLike, RedisClientLike } from '../src/stores/redis.ts';
import type { IdempotencyStore } from '../src/stores/types.ts';
import type { AwsClient } from '../src/lib/aws.ts';
import { emptyDynamoUsage, meteredSqs, type AwsUsage, type DynamoUsage } from './aws-usage.ts';
import { bareRedisDelivery, barePostgresDelivery, type BareDelivery } from './bare-store.ts';
import { importBuilt } from './build.ts';
import { WEBHOOK_PATH as PATH, type InboxCell } from './http-cases.ts';
import { handWrittenRoute, LOCK_MS, TTL_MS } from './hand-written-route.ts';
import type { HmacKey } from './fixtures.ts';

/** What a cell's server is made of, for http-server.ts. */
export interface InboxApp {
  server: Server;
  /** Jobs in the cell's queue: the events it accepted since the last reset. */
  jobs(): Promise<number>;
  /** Empties the cell's queue. */
  reset(): Promise<void>;
  close(): Promise<void>;
  /** What the cell asked of DynamoDB and SQS so far (`sqs-dynamodb`, whose clients are counted). */
  usage?(): AwsUsage;
}

/**
 * The store and its client, as http-server.ts builds them for section 10; `makeStore` builds the
 * same store on another client (bare-store.ts records the store's commands through it).
 */
export type StoreBackend =
  | { kind: 'ioredis'; store: IdempotencyStore; client: Redis; makeStore: (client: RedisClientLike) => IdempotencyStore }
  | { kind: 'node-redis'; store: IdempotencyStore; client: NodeRedisClientLike; makeStore: (client: RedisClientLike) => IdempotencyStore }
  | {
      kind: 'postgres';
      store: IdempotencyStore;
      client: pg.Pool;
      makeStore: (client: pg.Pool) => IdempotencyStore;
      /** Deliveries after which the store's commands repeat (its `CLEANUP_EVERY`): what bare-store.ts records. */
      cycle: number;
    }
  | {
      kind: 'dynamodb';
      store: IdempotencyStore;
      /** What the store's client sent so far (aws-usage.ts). */
      usage: () => DynamoUsage;
    };

const ENQUEUED = '{"enqueued":true}';

/**
 * The inbox's defaults for jobs (12 attempts, a first retry after 2 s), written out as a
 * hand-written route would write its own (the claim's, LOCK_MS and TTL_MS, are the receiver's).
 */
const MAX_ATTEMPTS = 12;
const BACKOFF_MS = 2000;

/** The job the receiver would enqueue for this delivery (format 1), built by hand. */
function jobOf(headers: IncomingHttpHeaders, body: Buffer) {
  return {
    v: 1,
    id: headers['webhook-id'] as string,
    timestamp: Number(headers['webhook-timestamp']),
    body: body.toString('base64'),
    contentType: (headers['content-type'] as string | undefined) ?? null,
    signed: true,
    scheme: 'v1',
    keyIndex: 0,
    keyId: null,
    namespace: 'default',
    tenant: null,
    entity: null,
    acceptedAt: Date.now(),
  };
}

/** The hand-written accepting route: the bare claim, `enqueue` of the job, the bare completion, 202. */
function handWritten(key: HmacKey, enqueue: (storeKey: string, job: ReturnType<typeof jobOf>) => Promise<unknown>, bare: BareDelivery): FastifyInstance {
  return handWrittenRoute(key, bare, (storeKey, headers, body) => enqueue(storeKey, jobOf(headers, body)), { status: 202, json: ENQUEUED });
}

/** A Fastify app with the adapter accepting into `inbox` in a scope of its own. */
async function adapter(build: string, secret: string, inbox: unknown, store: IdempotencyStore): Promise<FastifyInstance> {
  const { webhooks } = await importBuilt<typeof import('../adapters/fastify.ts')>(build, 'fastify');
  const app = Fastify({ logger: false });
  await app.register(async (scope) => {
    await scope.register(webhooks, { secrets: secret, inbox: inbox as never, idempotency: { store } });
    // With an inbox the plugin answers every request itself: the route only has to exist.
    scope.post(PATH, async () => {
      throw new Error('the route handler ran behind an inbox');
    });
  });
  return app;
}

/** The durability warning is expected here (the bench's Redis runs without persistence). */
const quiet = { warn() {}, error() {} };

async function bullmqCell(cell: 'bullmq' | 'bullmq-inline', build: string, secret: string, key: HmacKey, backend: StoreBackend & { kind: 'ioredis' }): Promise<InboxApp> {
  const { Queue } = await import('bullmq');
  const queue = new Queue(`bench-${cell}-${process.pid}`, { connection: backend.client });
  await queue.waitUntilReady();
  let app: FastifyInstance;
  if (cell === 'bullmq') {
    const { bullmqInbox } = await importBuilt<typeof import('../src/inbox/bullmq.ts')>(build, 'bullmq');
    app = await adapter(build, secret, bullmqInbox({ queue, logger: quiet }), backend.store);
  } else {
    const { BULLMQ_DEAD_LETTER_RETENTION_SECONDS } = await importBuilt<typeof import('../src/inbox/bullmq.ts')>(build, 'bullmq');
    const bare = await bareRedisDelivery(backend.client, backend.makeStore, LOCK_MS, TTL_MS);
    const options = {
      attempts: MAX_ATTEMPTS,
      backoff: { type: 'exponential', delay: BACKOFF_MS, jitter: 0.5 },
      removeOnComplete: true,
      removeOnFail: { age: BULLMQ_DEAD_LETTER_RETENTION_SECONDS },
    };
    // BullMQ ids may not contain ':': the hex SHA-256 of the key, as the inbox derives them.
    const add = (storeKey: string, job: ReturnType<typeof jobOf>) => queue.add('webhook', job, { ...options, jobId: createHash('sha256').update(storeKey).digest('hex') });
    app = handWritten(key, add, bare);
  }
  await app.ready();
  return {
    server: app.server,
    async jobs() {
      const counts = await queue.getJobCounts('wait', 'delayed', 'prioritized');
      return Object.values(counts).reduce((sum, n) => sum + (n ?? 0), 0);
    },
    reset: () => queue.obliterate({ force: true }),
    close: () => queue.close(),
  };
}

/** An RFC 9562 version 8 UUID from the first 16 bytes of the key's SHA-256, as the inbox derives pg-boss ids. */
function uuidOf(storeKey: string): string {
  const bytes = createHash('sha256').update(storeKey).digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

async function pgBossCell(cell: 'pg-boss' | 'pg-boss-inline', build: string, secret: string, key: HmacKey, backend: StoreBackend & { kind: 'postgres' }, url: string): Promise<InboxApp> {
  const { PgBoss } = await import('pg-boss');
  // No maintenance or cron in the servers: their periodic work would land in some runs and not others.
  const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false });
  boss.on('error', () => {});
  await boss.start();
  const name = `bench-${cell}-${process.pid}`;
  let app: FastifyInstance;
  if (cell === 'pg-boss') {
    const { pgBossInbox } = await importBuilt<typeof import('../src/inbox/pg-boss.ts')>(build, 'pg-boss');
    const inbox = pgBossInbox({ boss, queue: name });
    // The inbox creates its queues on first use: now, so that `reset` finds them before a run.
    await inbox.backlog();
    app = await adapter(build, secret, inbox, backend.store);
  } else {
    // The queue the inbox would create: its retries, backoff and dead-letter queue.
    const dead = `${name}.dead`;
    const retryDelay = Math.ceil(BACKOFF_MS / 1000);
    await boss.createQueue(dead, { retentionSeconds: 14 * 86_400 });
    await boss.createQueue(name, { retryLimit: MAX_ATTEMPTS - 1, retryDelay, retryBackoff: true, deadLetter: dead });
    const bare = await barePostgresDelivery(backend.client, backend.makeStore, LOCK_MS, TTL_MS, backend.cycle);
    const send = async (storeKey: string, job: ReturnType<typeof jobOf>) => {
      if ((await boss.send(name, job, { id: uuidOf(storeKey) })) === null) throw new Error('a job id came twice: the load generator sends fresh ids');
    };
    app = handWritten(key, send, bare);
  }
  await app.ready();
  return {
    server: app.server,
    async jobs() {
      const { rows } = await backend.client.query<{ n: number }>('SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1', [name]);
      return rows[0]!.n;
    },
    async reset() {
      await boss.deleteAllJobs(name);
    },
    close: () => boss.stop({ graceful: false }),
  };
}

/** `maxReceiveCount` of the `sqs-dynamodb` queue's redrive policy: above the inbox's 12 attempts, as it asks. */
const MAX_RECEIVE_COUNT = MAX_ATTEMPTS + 2;

async function sqsCell(cell: 'sqs' | 'sqs-inline' | 'sqs-dynamodb', build: string, secret: string, key: HmacKey, backend: StoreBackend & { kind: 'ioredis' | 'dynamodb' }): Promise<InboxApp> {
  const endpoint = process.env.BENCH_SQS_URL;
  if (endpoint === undefined) throw new Error(`${cell} needs BENCH_SQS_URL, the local SQS the section starts`);
  const { SQSClient, CreateQueueCommand, GetQueueAttributesCommand, PurgeQueueCommand, SendMessageCommand } = await import('@aws-sdk/client-sqs');
  const client = new SQSClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' }, maxAttempts: 1 });
  // Named as every cell names its queue: the capacity section's worker finds it by this name.
  const name = `bench-${cell}-${process.pid}`;
  let attributes: Record<string, string> | undefined;
  if (cell === 'sqs-dynamodb') {
    // A dead-letter queue and a redrive policy, as a deployment has: the worker reads them.
    const { QueueUrl: deadUrl } = await client.send(new CreateQueueCommand({ QueueName: `${name}-dead` }));
    const dead = await client.send(new GetQueueAttributesCommand({ QueueUrl: deadUrl, AttributeNames: ['QueueArn'] }));
    attributes = { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dead.Attributes?.QueueArn, maxReceiveCount: String(MAX_RECEIVE_COUNT) }) };
  }
  const { QueueUrl: queueUrl } = await client.send(new CreateQueueCommand({ QueueName: name, ...(attributes === undefined ? {} : { Attributes: attributes }) }));
  // The capacity cell's requests are counted (aws-usage.ts); section 15's cells go to the client as they did.
  const metered = cell === 'sqs-dynamodb' ? meteredSqs(client) : undefined;
  const sending: AwsClient = metered?.client ?? client;
  // The jobs SQS acknowledged since the last reset (fauxqs's own counts lag until a receive),
  // counted the same way in every cell: by the client each sends through.
  let sent = 0;
  const counting = {
    async send(command: object, options?: { abortSignal?: AbortSignal }): Promise<unknown> {
      const reply = await sending.send(command, options);
      if (command instanceof SendMessageCommand) sent++;
      return reply;
    },
  };
  let app: FastifyInstance;
  if (cell === 'sqs' || cell === 'sqs-dynamodb') {
    const { sqsInbox } = await importBuilt<typeof import('../src/inbox/sqs/index.ts')>(build, 'sqs');
    app = await adapter(build, secret, sqsInbox({ client: counting, queueUrl: queueUrl!, maxMessageBytes: 1_048_576, logger: quiet }), backend.store);
  } else {
    if (backend.kind !== 'ioredis') throw new Error(`${cell} runs on the ioredis store`);
    const bare = await bareRedisDelivery(backend.client, backend.makeStore, LOCK_MS, TTL_MS);
    const send = (_storeKey: string, job: ReturnType<typeof jobOf>) => counting.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify({ job, attemptsBefore: 0, generation: 0 }) }));
    app = handWritten(key, send, bare);
  }
  await app.ready();
  return {
    server: app.server,
    jobs: () => Promise.resolve(sent),
    async reset() {
      await client.send(new PurgeQueueCommand({ QueueUrl: queueUrl }));
      sent = 0;
    },
    close: async () => client.destroy(),
    ...(metered === undefined ? {} : { usage: () => ({ dynamodb: backend.kind === 'dynamodb' ? backend.usage() : emptyDynamoUsage(), sqs: metered.usage() }) }),
  };
}

/** The server of one cell of the inbox section. */
export async function inboxApp(cell: InboxCell, build: string, secret: string, key: HmacKey, backend: StoreBackend, postgresUrl: string | undefined): Promise<InboxApp> {
  if (cell === 'bullmq' || cell === 'bullmq-inline') {
    if (backend.kind !== 'ioredis') throw new Error(`${cell} runs on the ioredis store`);
    return bullmqCell(cell, build, secret, key, backend);
  }
  if (cell === 'sqs' || cell === 'sqs-inline' || cell === 'sqs-dynamodb') {
    if (backend.kind !== storeKindOf(cell) || (backend.kind !== 'ioredis' && backend.kind !== 'dynamodb')) throw new Error(`${cell} runs on the ${storeKindOf(cell)} store`);
    return sqsCell(cell, build, secret, key, backend);
  }
  if (backend.kind !== 'postgres' || postgresUrl === undefined) throw new Error(`${cell} runs on the Postgres store`);
  return pgBossCell(cell, build, secret, key, backend, postgresUrl);
}

/** The store each cell runs on. */
export function storeKindOf(cell: InboxCell): 'ioredis' | 'postgres' | 'dynamodb' {
  if (cell === 'sqs-dynamodb') return 'dynamodb';
  return cell.startsWith('bullmq') || cell.startsWith('sqs') ? 'ioredis' : 'postgres';
}

/**
 * Section 16: the capacity model. For each shape users deploy, the CPU time one delivery costs
 * each process involved, measured here under load, summed; then one measured check of the model:
 * two receiver processes sharing one store, against the model's prediction.
 *
 * Shapes: the memory store; the Redis store (ioredis); the Postgres store (`pg` Pool); the Redis
 * store with the BullMQ inbox; the Postgres store with the pg-boss inbox; the DynamoDB store with
 * the SQS inbox, on dynalite (a local DynamoDB) and fauxqs (a local SQS, Node 22.5 or later), each
 * in a process of its own.
 *
 * Each shape runs the Fastify adapter of section 10 in its own process (http-server.ts), autocannon
 * in another (http-load.ts), the databases in theirs, on 127.0.0.1. Per delivery:
 *
 * - the receiver: the server process's CPU time (process.cpuUsage, read by the server itself);
 * - Redis: redis-server's, from `INFO cpu`; Postgres: the postmaster's and its backends', from
 *   /proc/<pid>/stat (a local cluster only);
 * - the queue worker (inbox shapes): after the accepting run, a worker process (capacity-worker.ts)
 *   runs `inbox.work()` until every accepted job is processed; its CPU time and the database's over
 *   that drain are the worker's share and the database's second share;
 * - the load generator (from /proc): not part of a deployment (the senders are elsewhere), but it
 *   shares this machine's cores, so the prediction for this machine counts it;
 * - the local AWS stand-ins (DynamoDB + SQS shape): dynalite's and fauxqs's processes (from /proc),
 *   over the accepting run and the drain. They stand in for managed services, whose CPU is not the
 *   deployment's to provision, so they are shown beside the parts and not summed with them, as the
 *   load generator is. DynamoDB and SQS bill by request instead: the receiver's and the worker's
 *   clients are counted (aws-usage.ts), and the section reports DynamoDB's write units and SQS's
 *   requests per delivery.
 *
 * The model: deliveries per second = cores ÷ the summed CPU-seconds per delivery. The check: two
 * receivers of the Redis shape, then of the Postgres shape, sharing one store (one key space), each
 * loaded by its own load generator as one receiver is loaded alone; every tenth id is sent to both
 * receivers at about the same moment (a sender's retry landing on the other process), and each id
 * must be processed by exactly one of them. The prediction it is held to comes from the first
 * receiver loaded alone in the same repetition, interleaved with the run of both (the section's
 * costs above were measured minutes earlier, before other shapes' databases had work of their own
 * in the background). Throughput past this machine (N receivers) is extrapolated from the per-part figures
 * and said to be; for DynamoDB the ceiling is AWS's published write limit of a partition.
 *
 * `BENCH_CAPACITY_SHAPES` (comma-separated shape names, e.g. `dynamodb-sqs`) measures only those
 * shapes, to work on one without the rest; the two-receiver check then runs for those of its
 * shapes that were measured.
 */

import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { Redis } from 'ioredis';
import { startPostgresServer } from '../test/support/postgres-server.ts';
import { startRedisServer } from '../test/support/redis-server.ts';
import { startSqsChild, type SqsChild } from '../test/support/sqs-child.ts';
import { combined, perDelivery, usageBetween, type AwsUsage } from './aws-usage.ts';
import type { BarChart, Curve } from './charts.ts';
import { newSecret } from './fixtures.ts';
import { CAPACITY_TITLE, PARTS_HEADING, SCALE_HEADING, TWO_HEADING, USAGE_HEADING } from './labels.ts';
import { STORE_CONNECTIONS, WEBHOOK_PATH } from './http-cases.ts';
import type { RunRequest, RunResult } from './http-load.ts';
import { clockTicks, processTreeMicros, redisMicros, skippedWithoutStores, statFields } from './http-stores.ts';
import { checkedRun, Child, poolRps, START_TIMEOUT_MS, startServer, type ServerChild } from './http.ts';
import { fauxqsRuns, pgBossRuns } from '../test/support/node-version.ts';
import { type BenchConfig, fixed, QUICK_RUN_SECONDS, rateText, ratioText, type SectionReport, table, type TargetResult, timeText } from './report.ts';
import { summarize, type Summary } from './stats.ts';
import { startDynaliteProcess } from './stores.ts';


/** The shapes measured, in the order of the tables. */
const SHAPES = ['memory', 'redis', 'postgres', 'redis-bullmq', 'postgres-pg-boss', 'dynamodb-sqs'] as const;
type Shape = (typeof SHAPES)[number];

const SHAPE_LABELS: Record<Shape, string> = {
  memory: 'memory store',
  redis: 'Redis store',
  postgres: 'Postgres store',
  'redis-bullmq': 'Redis store + BullMQ inbox',
  'postgres-pg-boss': 'Postgres store + pg-boss inbox',
  'dynamodb-sqs': 'DynamoDB store + SQS inbox',
};

/** The processes a delivery costs CPU in, as the table's columns name them. */
const PARTS = ['receiver', 'Redis', 'Postgres', 'queue worker'] as const;
type Part = (typeof PARTS)[number];

const SERVER_ARGS: Record<Shape, readonly string[]> = {
  memory: ['store', 'memory'],
  redis: ['store', 'ioredis'],
  postgres: ['store', 'postgres'],
  'redis-bullmq': ['inbox', 'bullmq'],
  'postgres-pg-boss': ['inbox', 'pg-boss'],
  'dynamodb-sqs': ['inbox', 'sqs-dynamodb'],
};
/** The database process a shape's CPU is read from: DynamoDB's stand-in is not one (see the header). */
const DATABASE: Record<Shape, 'Redis' | 'Postgres' | undefined> = {
  memory: undefined,
  redis: 'Redis',
  postgres: 'Postgres',
  'redis-bullmq': 'Redis',
  'postgres-pg-boss': 'Postgres',
  'dynamodb-sqs': undefined,
};
const ENGINE: Partial<Record<Shape, 'bullmq' | 'pg-boss' | 'sqs'>> = { 'redis-bullmq': 'bullmq', 'postgres-pg-boss': 'pg-boss', 'dynamodb-sqs': 'sqs' };

/** AWS's published write limit of one DynamoDB partition: 1,000 write units a second. */
const DYNAMO_PARTITION_WCU = 1000;

/** One shape's costs: µs of CPU per delivery by part, and the load generator's per request. */
interface ShapeCost {
  shape: Shape;
  parts: Partial<Record<Part, number>>;
  loadGenerator: number | undefined;
  /** dynalite's and fauxqs's CPU time per delivery, accepting and draining (µs); AWS shapes only. */
  standIns?: number | undefined;
  /** What the receiver and the worker asked of DynamoDB and SQS per delivery, and over how many deliveries each was counted. */
  usage?: AwsCost;
  deliveries: number;
  rps: number;
}

/**
 * DynamoDB's and SQS's requests per delivery: the receiver's over the accepting run (per message it
 * sent), the worker's over the drain (per job its handler processed), and both together.
 */
interface AwsCost {
  receiver: AwsUsage;
  worker: AwsUsage;
  both: AwsUsage;
  counted: { receiver: number; worker: number };
}

/** The two-receiver check of one shape. */
interface TwoReceivers {
  shape: Shape;
  /** Requests answered per second, both receivers together. */
  rps: number;
  /** What the model predicts for this machine, requests per second (the median over repetitions). */
  predicted: number;
  /** Measured ÷ predicted, each repetition's own. */
  ratio: Summary;
  repetitions: number;
  processed: number;
  /** Ids sent to both receivers. */
  sharedSent: number;
  /** Ids processed by both: must be 0. */
  twice: number;
  /** Shared ids that neither processed (a request cut at the end of the run aside): must be 0. */
  missing: number;
  statusCodes: Record<string, number>;
  /**
   * CPU time of both receivers and the store during the check, per request answered (µs), beside
   * the same parts' sum measured with one receiver: tells a check that left cores idle (the same
   * cost) from one where each delivery cost more (a higher one). `undefined` off Linux.
   */
  serversHere: number | undefined;
  serversAlone: number | undefined;
}

/** Every other id is a run's own; one in `SHARE_EVERY` goes to both receivers. */
const SHARE_EVERY = 10;

/** A process's own CPU time (user + system), µs, from /proc; `undefined` off Linux. */
function ownMicros(pid: number, ticks: number): number | undefined {
  const fields = statFields(pid);
  return fields === undefined ? undefined : ((Number(fields[11]) + Number(fields[12])) * 1e6) / ticks;
}

const sum = (values: readonly (number | undefined)[]) => values.reduce<number>((total, v) => total + (v ?? 0), 0);

/** What a reading grew by between two reads; `undefined` when either could not be read. */
const delta = (before: number | undefined, after: number | undefined) => (before === undefined || after === undefined ? undefined : after - before);

/** Deliveries per second one core gives a part that costs `micros` per delivery. */
const perCore = (micros: number) => 1e6 / micros;

export async function runCapacity(config: BenchConfig): Promise<SectionReport> {
  const skipped = skippedWithoutStores('capacity', CAPACITY_TITLE, 'the capacity section');
  if (skipped !== undefined) return skipped;
  // pg-boss 12 needs Node 22.12 or later, fauxqs 22.5: on an older Node their shapes are left out,
  // as section 15 does.
  const selected = process.env.BENCH_CAPACITY_SHAPES?.split(',').map((name) => name.trim());
  const unknown = selected?.filter((name) => !(SHAPES as readonly string[]).includes(name)) ?? [];
  if (unknown.length > 0) throw new TypeError(`BENCH_CAPACITY_SHAPES names no shape ${unknown.join(', ')}: the shapes are ${SHAPES.join(', ')}`);
  const shapes = SHAPES.filter((shape) => (shape !== 'postgres-pg-boss' || pgBossRuns()) && (shape !== 'dynamodb-sqs' || fauxqsRuns()) && (selected === undefined || selected.includes(shape)));
  const seconds = config.quick ? QUICK_RUN_SECONDS : 3;
  const warmupSeconds = config.quick ? 0 : 1;
  const ticks = clockTicks();
  const cores = cpus().length;

  const redisServer = await startRedisServer();
  const children: Child[] = [];
  let pgServer: Awaited<ReturnType<typeof startPostgresServer>> | undefined;
  let redis: Redis | undefined;
  let dynalite: Awaited<ReturnType<typeof startDynaliteProcess>> | undefined;
  let sqs: SqsChild | undefined;
  try {
    pgServer = await startPostgresServer();
    const postgres = pgServer;
    const client = (redis = new Redis(redisServer.url, { lazyConnect: true }));
    await client.connect();
    const { secret } = newSecret();
    const env: Record<string, string> = { BENCH_SECRET: secret, BENCH_BUILD: config.pkg.dir, BENCH_REDIS_URL: redisServer.url, BENCH_POSTGRES_URL: postgres.url };
    // The AWS shape's stand-ins, each in a process of its own: their CPU is read from /proc.
    if (shapes.includes('dynamodb-sqs')) {
      dynalite = await startDynaliteProcess();
      sqs = await startSqsChild();
      env.BENCH_DYNAMODB_URL = dynalite.endpoint;
      env.BENCH_SQS_URL = sqs.url;
    }
    const standInPids = [dynalite?.pid, sqs?.child.pid].filter((pid) => pid !== undefined);
    /** dynalite's and fauxqs's CPU time so far (µs), their child processes included; `undefined` off Linux. */
    const standInMicros = (): number | undefined => {
      const each = standInPids.map((pid) => processTreeMicros(pid, ticks));
      return each.some((micros) => micros === undefined) ? undefined : sum(each);
    };
    const dbMicros = (database: 'Redis' | 'Postgres' | undefined): Promise<number | undefined> =>
      database === 'Redis' ? redisMicros(client) : database === 'Postgres' ? Promise.resolve(processTreeMicros(postgres.pid, ticks)) : Promise.resolve(undefined);

    const load = new Child('http-load.ts', [], env);
    children.push(load);
    await load.ask('ready', undefined, START_TIMEOUT_MS, 'starting the load generator');

    const costs: ShapeCost[] = [];
    for (const shape of shapes) {
      const args = SERVER_ARGS[shape];
      const server = await startServer(args, env, args.join(' '));
      children.push(server.child);
      try {
        const engine = ENGINE[shape];
        const status = engine === undefined ? 204 : 202;
        const what = `capacity, ${SHAPE_LABELS[shape]}`;
        const reset = () => (engine === undefined ? Promise.resolve() : server.child.ask('reset', { type: 'reset' }, 60_000, what));
        if (warmupSeconds > 0) await checkedRun(load, server, what, warmupSeconds, STORE_CONNECTIONS, poolRps(0), status);
        await reset();
        const database = DATABASE[shape];
        const aws = shape === 'dynamodb-sqs';
        const askUsage = async () => (await server.child.ask<{ usage: AwsUsage }>('usage', { type: 'usage' }, 5000, what)).usage;
        const usageBefore = aws ? await askUsage() : undefined;
        const dbBefore = await dbMicros(database);
        const standInsBefore = aws ? standInMicros() : undefined;
        const loadBefore = ownMicros(load.pid, ticks);
        const run = await checkedRun(load, server, what, seconds, STORE_CONNECTIONS, poolRps(0), status);
        const loadAfter = ownMicros(load.pid, ticks);
        const standInsAfter = aws ? standInMicros() : undefined;
        const dbAfter = await dbMicros(database);
        // With the AWS shape, the receiver's requests once the run's last ones are done, and the
        // messages it sent: the worker drains exactly those, so both counts are whole deliveries'.
        const receiverUsage = usageBefore === undefined ? undefined : usageBetween(usageBefore, await settledUsage(askUsage, usageBefore, what));
        const sentMessages = receiverUsage === undefined ? undefined : (receiverUsage.sqs.requests['SendMessage'] ?? 0);
        const parts: Partial<Record<Part, number>> = { receiver: run.cpuPerRequest };
        let dbTotal = delta(dbBefore, dbAfter);
        let standInsTotal = delta(standInsBefore, standInsAfter);
        let workerUsage: AwsUsage | undefined;
        let workerProcessed = 0;
        if (engine !== undefined) {
          // The accepted jobs, drained by a worker process started now: its start-up is not counted.
          // The queue is named after the server's inbox cell and its process (http-inbox.ts).
          const queue = `bench-${SERVER_ARGS[shape][1]}-${server.child.pid}`;
          const worker = new Child('capacity-worker.ts', [engine, queue], env);
          children.push(worker);
          await worker.ask('ready', undefined, START_TIMEOUT_MS, `starting the ${engine} worker`);
          const drainBefore = await dbMicros(database);
          const drainStandInsBefore = aws ? standInMicros() : undefined;
          const expected = sentMessages ?? run.processed;
          const drained = await worker.ask<{ processed: number; cpuMicros: number; usage?: AwsUsage }>('drained', { type: 'drain', expected }, 300_000, `${engine} worker draining ${expected} jobs`);
          const drainStandIns = delta(drainStandInsBefore, aws ? standInMicros() : undefined);
          const drainAfter = await dbMicros(database);
          parts['queue worker'] = drained.cpuMicros / run.processed;
          const drainDb = delta(drainBefore, drainAfter);
          dbTotal = dbTotal === undefined || drainDb === undefined ? undefined : dbTotal + drainDb;
          standInsTotal = standInsTotal === undefined || drainStandIns === undefined ? undefined : standInsTotal + drainStandIns;
          workerUsage = drained.usage;
          workerProcessed = drained.processed;
          await worker.stop();
        }
        if (database !== undefined && dbTotal !== undefined) parts[database] = dbTotal / run.processed;
        const loadMicros = delta(loadBefore, loadAfter);
        const cost: ShapeCost = { shape, parts, loadGenerator: loadMicros === undefined ? undefined : loadMicros / run.total, deliveries: run.processed, rps: run.rps };
        if (aws) {
          if (receiverUsage === undefined || sentMessages === undefined || workerUsage === undefined) throw new Error(`${what}: the receiver or the worker reported no AWS usage`);
          cost.standIns = standInsTotal === undefined ? undefined : standInsTotal / run.processed;
          // Per delivery each process made: the messages the receiver sent (a request the load
          // generator left in flight at the end of the run may have been accepted after the run's
          // count), the jobs the worker processed (those same messages).
          if (sentMessages === 0 || workerProcessed === 0) throw new Error(`${what}: no message was sent or no job processed`);
          const receiver = perDelivery(receiverUsage, sentMessages);
          const worker = perDelivery(workerUsage, workerProcessed);
          cost.usage = { receiver, worker, both: combined(receiver, worker), counted: { receiver: sentMessages, worker: workerProcessed } };
        }
        costs.push(cost);
      } finally {
        await server.child.stop();
      }
    }

    // The check: two receivers per shared store, each with its own load generator.
    const second = new Child('http-load.ts', [], env);
    children.push(second);
    await second.ask('ready', undefined, START_TIMEOUT_MS, 'starting the second load generator');
    const checks: TwoReceivers[] = [];
    for (const shape of ['redis', 'postgres'] as const) {
      // Only the shapes measured (all of them unless BENCH_CAPACITY_SHAPES names a few).
      if (!costs.some((c) => c.shape === shape)) continue;
      const shared = { ...env, BENCH_SHARED_KEYS: `cap${randomBytes(4).toString('hex')}`, BENCH_RECORD_IDS: '1' };
      // One after the other: the Postgres store creates its table on start-up.
      const a = await startServer(SERVER_ARGS[shape], shared, `${SERVER_ARGS[shape].join(' ')}, receiver 1 of 2`);
      children.push(a.child);
      const b = await startServer(SERVER_ARGS[shape], shared, `${SERVER_ARGS[shape].join(' ')}, receiver 2 of 2`);
      children.push(b.child);
      try {
        const repetitions = config.quick ? 1 : CHECK_REPETITIONS;
        const micros = { store: () => dbMicros(DATABASE[shape]), load: (child: Child) => ownMicros(child.pid, ticks) };
        checks.push(await twoReceivers(shape, [a, b], [load, second], { seconds, warmupSeconds, repetitions }, cores, micros));
      } finally {
        await Promise.all([a.child.stop(), b.child.stop()]);
      }
    }
    return report(config, costs, checks, cores, { seconds, warmupSeconds });
  } finally {
    await Promise.all(children.map((child) => child.stop()));
    redis?.disconnect();
    await redisServer.close();
    await pgServer?.close();
    await dynalite?.close();
    await sqs?.stop();
  }
}

/** The receiver's and the store's CPU time per delivery with one receiver (µs): the parts summed. */
const serversCost = (cost: ShapeCost): number => sum(PARTS.map((part) => cost.parts[part]));

/**
 * The receiver's AWS usage once it has finished every request of the run: each accepted delivery
 * is a claim (`PutItem`), a `SendMessage` and a completion (`UpdateItem`), so the run's last ones
 * are done when there are as many completions as claims since `before` (a few milliseconds after
 * the load generator stops). Waits 5 s at most.
 */
async function settledUsage(ask: () => Promise<AwsUsage>, before: AwsUsage, what: string): Promise<AwsUsage> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const usage = await ask();
    const { requests } = usageBetween(before, usage).dynamodb;
    if ((requests['PutItem'] ?? 0) === (requests['UpdateItem'] ?? 0)) return usage;
    if (Date.now() > deadline) throw new Error(`${what}: the receiver's claims and completions did not even out: ${JSON.stringify(requests)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Repetitions of the check (one receiver alone, then both, in an order that rotates). */
const CHECK_REPETITIONS = 3;

/**
 * The check of one shape: repetitions of one receiver loaded alone (the model's costs, measured
 * here and now) and both receivers loaded at once (the throughput the model predicts from them),
 * back to back in an order that rotates, so a drift of the machine (another process, a database's
 * background work) moves the prediction and the measurement alike. Each receiver gets the load
 * one receiver gets alone (`STORE_CONNECTIONS` connections from a generator of its own): the
 * model is a capacity at saturation, so the check loads each receiver as far as the costs were.
 */
async function twoReceivers(
  shape: Shape,
  servers: [ServerChild, ServerChild],
  loads: [Child, Child],
  { seconds, warmupSeconds, repetitions }: { seconds: number; warmupSeconds: number; repetitions: number },
  cores: number,
  micros: { store: () => Promise<number | undefined>; load: (load: Child) => number | undefined },
): Promise<TwoReceivers> {
  const connections = STORE_CONNECTIONS;
  const request = (server: ServerChild, shared: RunRequest['shared']): RunRequest => ({
    type: 'run',
    url: `http://127.0.0.1:${server.port}${WEBHOOK_PATH}`,
    seconds,
    connections,
    expectedRps: poolRps(0),
    tag: randomBytes(6).toString('hex'),
    shared,
  });
  const what = `two receivers, ${SHAPE_LABELS[shape]}`;
  const clean = (results: readonly RunResult[], allowed: readonly string[]) => {
    const codes: Record<string, number> = {};
    for (const result of results) for (const [code, count] of Object.entries(result.statusCodes)) codes[code] = (codes[code] ?? 0) + count;
    const unexpected = Object.keys(codes).filter((code) => !allowed.includes(code));
    if (unexpected.length > 0 || results.some((r) => r.errors > 0 || r.timeouts > 0)) {
      throw new Error(`${what}: the run was not clean: statuses ${JSON.stringify(codes)}, ${sum(results.map((r) => r.errors))} errors, ${sum(results.map((r) => r.timeouts))} timeouts`);
    }
    return codes;
  };
  // A receiver's CPU time from its own process.cpuUsage (any OS); the store's and the load
  // generator's from /proc or Redis (`undefined` where they cannot be read: left out of the sums).
  const receiverMicros = async (server: ServerChild) => (await server.child.ask<{ cpuMicros: number }>('stats', { type: 'stats' }, 10_000, what)).cpuMicros;
  // Warmed up first, as each shape's single-receiver run is: a receiver started cold pays for its
  // JIT and its first store connections inside the timed seconds. Each on ids of its own; the ids
  // the warm-up processed are left out of the check below.
  if (warmupSeconds > 0) {
    await Promise.all(servers.map((server, i) => loads[i]!.ask<RunResult>('result', { ...request(server, undefined), seconds: warmupSeconds }, (warmupSeconds + 60) * 1000, what)));
  }
  const warm = await Promise.all(servers.map((server) => server.child.ask<{ ids: string[] }>('ids', { type: 'ids' }, 10_000, what)));

  /** One receiver alone: the model's prediction from its costs here (receiver, store and load generator per request). */
  const alone = async (): Promise<{ predicted: number; servers: number | undefined }> => {
    const before = [await receiverMicros(servers[0]), await micros.store(), micros.load(loads[0])];
    const result = await loads[0].ask<RunResult>('result', request(servers[0], undefined), (seconds + 60) * 1000, what);
    const after = [await receiverMicros(servers[0]), await micros.store(), micros.load(loads[0])];
    clean([result], ['204']);
    if (result.total === 0) throw new Error(`${what}: the receiver loaded alone answered nothing`);
    const [receiver, store, load] = after.map((value, i) => delta(before[i], value)).map((value) => (value === undefined ? undefined : value / result.total));
    return { predicted: cores / (sum([receiver, store, load]) / 1e6), servers: store === undefined ? undefined : receiver! + store };
  };
  /** Both receivers at once, every tenth id sent to both. */
  const both = async () => {
    const sharedTag = randomBytes(6).toString('hex');
    const serverMicros = async () => [await receiverMicros(servers[0]), await receiverMicros(servers[1]), await micros.store()];
    const before = await serverMicros();
    const results = await Promise.all(servers.map((server, i) => loads[i]!.ask<RunResult>('result', request(server, { tag: sharedTag, every: SHARE_EVERY }), (seconds + 60) * 1000, what)));
    const after = await serverMicros();
    const answered = sum(results.map((r) => r.total));
    const spent = after.map((value, i) => delta(before[i], value));
    const serversHere = spent.some((v) => v === undefined) || answered === 0 ? undefined : sum(spent) / answered;
    // Shared ids both generators sent, short of the last requests a generator may have left unanswered.
    const bothSent = Math.max(0, Math.min(...results.map((r) => r.pooled + r.signedOnTheFly)) - connections);
    return { results, rps: sum(results.map((r) => r.rps)), serversHere, sharedTag, bothSent };
  };

  const runs: { predicted: number; alone: number | undefined; both: Awaited<ReturnType<typeof both>> }[] = [];
  for (let rep = 0; rep < repetitions; rep++) {
    // The order rotates: alone first in even repetitions, both first in odd ones.
    const early = rep % 2 === 0 ? await alone() : undefined;
    const two = await both();
    const one = early ?? (await alone());
    runs.push({ predicted: one.predicted, alone: one.servers, both: two });
  }

  const ids = await Promise.all(servers.map((server) => server.child.ask<{ ids: string[] }>('ids', { type: 'ids' }, 10_000, what)));
  const statusCodes = clean(
    runs.flatMap((run) => run.both.results),
    ['204', '200', '409'],
  );
  const [first, other] = ids.map((reply, i) => {
    const warmedUp = new Set(warm[i]!.ids);
    return new Set(reply.ids.filter((id) => !warmedUp.has(id)));
  }) as [Set<string>, Set<string>];
  let twice = 0;
  for (const id of first) if (other.has(id)) twice++;
  let sharedSent = 0;
  let missing = 0;
  for (const { both: run } of runs) {
    for (let n = 0; n < run.bothSent; n += SHARE_EVERY) {
      sharedSent++;
      const id = `msg_${run.sharedTag}_${n}`;
      if (!first.has(id) && !other.has(id)) missing++;
    }
  }
  const medianOf = (values: readonly (number | undefined)[]) => (values.some((v) => v === undefined) ? undefined : summarize(values as number[]).median);
  return {
    shape,
    rps: summarize(runs.map((run) => run.both.rps)).median,
    predicted: summarize(runs.map((run) => run.predicted)).median,
    ratio: summarize(runs.map((run) => run.both.rps / run.predicted)),
    repetitions,
    processed: first.size + other.size,
    sharedSent,
    twice,
    missing,
    statusCodes,
    serversHere: medianOf(runs.map((run) => run.both.serversHere)),
    serversAlone: medianOf(runs.map((run) => run.alone)),
  };
}

const us = (micros: number | undefined) => (micros === undefined ? '–' : timeText(micros / 1e6));

/** DynamoDB write units per delivery, the receiver's and the worker's together; `undefined` for the other shapes. */
const writeUnitsPerDelivery = (cost: ShapeCost): number | undefined => cost.usage?.both.dynamodb.writeUnits;

/** The store's ceiling in deliveries per second past this machine, and what it is. */
function ceilingOf(cost: ShapeCost): { ceiling: number; storeText: string } {
  const units = writeUnitsPerDelivery(cost);
  if (units !== undefined) {
    return {
      ceiling: DYNAMO_PARTITION_WCU / units,
      storeText: `one DynamoDB partition (${DYNAMO_PARTITION_WCU.toLocaleString('en-US')} WCU/s ÷ ${fixed(units, 2)} WCU per delivery; multiply by the table's partitions; the SQS standard queue sets no ceiling)`,
    };
  }
  const store = cost.parts.Redis ?? cost.parts.Postgres;
  return {
    ceiling: store === undefined ? Number.POSITIVE_INFINITY : perCore(store),
    storeText: cost.parts.Redis !== undefined ? 'one Redis instance (it runs commands on one core; Redis Cluster adds one per shard)' : 'one core of the Postgres primary (multiply by its cores)',
  };
}

/** A count per delivery: two decimals, four for the rare requests (a once-a-second backlog read). */
const countText = (value: number): string => fixed(value, value === 0 || value >= 0.01 ? 2 : 4);

/** `1.00 PutItem, 1.00 UpdateItem`: requests per delivery by operation, most first. */
function requestsText(requests: Record<string, number>): string {
  const entries = Object.entries(requests).sort(([, a], [, b]) => b - a);
  return entries.length === 0 ? '–' : entries.map(([name, n]) => `${countText(n)} ${name}`).join(', ');
}

/** The rows of the DynamoDB and SQS table: the receiver, the worker, both. */
function usageRows({ receiver, worker, both }: AwsCost): string[][] {
  return (
    [
      ['receiver (accepting)', receiver],
      ['queue worker (draining)', worker],
      ['both', both],
    ] as const
  ).map(([who, usage]) => [
    who,
    requestsText(usage.dynamodb.requests),
    countText(usage.dynamodb.conditionFailed),
    countText(usage.dynamodb.writeUnits),
    countText(usage.dynamodb.readUnits),
    requestsText(usage.sqs.requests),
    countText(sum(Object.values(usage.sqs.requests))),
  ]);
}

function report(config: BenchConfig, costs: readonly ShapeCost[], checks: readonly TwoReceivers[], cores: number, { seconds, warmupSeconds }: { seconds: number; warmupSeconds: number }): SectionReport {
  const partsRows = costs.map((cost) => [
    SHAPE_LABELS[cost.shape],
    ...PARTS.map((part) => us(cost.parts[part])),
    us(serversCost(cost)),
    rateText(perCore(serversCost(cost))),
    us(cost.loadGenerator),
    us(cost.standIns),
  ]);
  const aws = costs.find((cost) => cost.usage !== undefined)?.usage;
  const checkRows = checks.map((check) => [
    SHAPE_LABELS[check.shape],
    rateText(check.rps),
    rateText(check.predicted),
    ratioText(check.ratio),
    `${us(check.serversHere)} (${us(check.serversAlone)})`,
    `${check.processed.toLocaleString('en-US')} processed; ${check.sharedSent.toLocaleString('en-US')} ids sent to both: ${check.twice} processed twice, ${check.missing} by neither`,
    Object.entries(check.statusCodes)
      .map(([code, count]) => `${code}: ${count.toLocaleString('en-US')}`)
      .join(', '),
  ]);

  // Past this machine: N receiver processes, a core each, against the store's own ceiling.
  const receiverCounts = [1, 2, 4, 8, 16];
  const scaleRows: string[][] = [];
  const points: Curve['points'] = [];
  for (const cost of costs.filter((c) => c.shape !== 'memory')) {
    const node = sum([cost.parts.receiver, cost.parts['queue worker']]);
    const { ceiling, storeText } = ceilingOf(cost);
    const values = receiverCounts.map((n) => Math.min(n * perCore(node), ceiling));
    for (const [i, n] of receiverCounts.entries()) points.push({ x: n, series: SHAPE_LABELS[cost.shape], y: values[i]! });
    scaleRows.push([SHAPE_LABELS[cost.shape], ...values.map((v) => rateText(v)), `${rateText(ceiling)}: ${storeText}`]);
  }

  const targets: TargetResult[] = checks.flatMap((check) => {
    const { median: ratio } = check.ratio;
    return [
      {
        what: `two receivers sharing one ${check.shape === 'redis' ? 'Redis' : 'Postgres'}: measured ÷ predicted throughput (cores ÷ summed CPU per delivery)`,
        target: '0.75–1.25',
        measured: ratioText(check.ratio),
        context: `${rateText(check.rps)} req/s measured vs ${rateText(check.predicted)} predicted on ${cores} cores (medians of ${check.repetitions} repetitions)`,
        pass: ratio >= 0.75 && ratio <= 1.25,
      },
      {
        what: `two receivers sharing one ${check.shape === 'redis' ? 'Redis' : 'Postgres'}: ids processed twice or by neither`,
        target: '0',
        measured: String(check.twice + check.missing),
        context: `${check.sharedSent.toLocaleString('en-US')} ids sent to both, ${check.processed.toLocaleString('en-US')} processed`,
        pass: check.twice === 0 && check.missing === 0,
      },
    ];
  });

  const bars: BarChart['bars'] = costs.flatMap((cost) => PARTS.filter((part) => cost.parts[part] !== undefined).map((part) => ({ group: SHAPE_LABELS[cost.shape], series: part, y: cost.parts[part]! / 1e6 })));
  const partsChart: BarChart = {
    kind: 'bar',
    id: 'capacity-parts',
    title: `CPU time per delivery, by process (Node ${process.versions.node})`,
    x: { title: 'shape' },
    y: { title: 'CPU time per delivery', unit: 'seconds' },
    bars,
    seriesOrder: [...PARTS],
  };
  const scaleChart: Curve = {
    kind: 'line',
    id: 'capacity-receivers',
    title: 'Deliveries per second vs receiver processes (extrapolated from one machine)',
    x: { title: 'receiver processes, a core each', log: true, unit: 'count' },
    y: { title: 'deliveries per second', log: true, unit: 'count' },
    points,
  };

  const body = [
    `CPU time each process spends per delivery, for the shapes users deploy: the Fastify adapter (1 KiB JSON, a fresh ` +
      `\`webhook-id\` each, a valid signature) in its own process, autocannon in another, ${STORE_CONNECTIONS} connections, ` +
      `${seconds} s per run${config.quick ? '' : ' after a 1 s warm-up'}. The receiver's time is its process\'s CPU time; ` +
      "Redis's is redis-server's (`INFO cpu`); Postgres's the postmaster's and its backends' (/proc); with an inbox, the " +
      'receiver accepts (202) and then a worker process drains every accepted job with `inbox.work()`: its CPU time is the ' +
      "queue worker's share, and the database's CPU time over that drain is added to the database's. \"Per core\" is " +
      'deliveries per second one core gives at that sum. The load generator is not part of a deployment; it is shown ' +
      'because it shares this machine.',
    '',
    PARTS_HEADING,
    '',
    table(['shape', ...PARTS.map((part) => `${part}`), 'summed', 'deliveries/s per core', 'load generator, per request', 'local AWS stand-ins, per delivery'], partsRows),
    '',
    aws === undefined
      ? `_${SHAPE_LABELS['dynamodb-sqs']}: not measured in this run${fauxqsRuns() ? ' (BENCH_CAPACITY_SHAPES left it out)' : `: fauxqs, its local SQS, needs Node 22.5 or later, and this is Node ${process.versions.node}`}._`
      : `The ${SHAPE_LABELS['dynamodb-sqs']} row runs on dynalite and fauxqs, local stand-ins for DynamoDB and SQS, each in a ` +
        'process of its own: their CPU time per delivery, accepting and draining, is the last column, shown as the load ' +
        'generator\'s is and not summed, because a deployment does not provision cores for AWS\'s managed services; it ' +
        'pays them by request, counted below. The receiver and the queue worker are real costs, summed as for the other ' +
        'shapes. (The two-receiver check below does not run this shape; a prediction for this machine would count the ' +
        'stand-ins, as it counts the load generator.)',
    ...(aws === undefined
      ? []
      : [
          '',
          USAGE_HEADING,
          '',
          `What the ${SHAPE_LABELS['dynamodb-sqs']} shape asked of DynamoDB and SQS, per delivery: counted from the requests ` +
            "the receiver's and the worker's SDK clients sent (a wrapper around each client's `send`; the store and the " +
            "inbox send what they send in production): the receiver's over the accepting run, per message it sent " +
            `(${aws.counted.receiver.toLocaleString('en-US')}), the worker's over the drain, per job it processed ` +
            `(${aws.counted.worker.toLocaleString('en-US')}). DynamoDB bills 1 write unit (WCU) per KB of item written, rounded up, at least 1: ` +
            "the item's size is its attribute names' UTF-8 bytes plus its values' (a string's UTF-8 bytes, a number's 1 byte " +
            'per two significant digits plus 1); a `PutItem` is charged the larger of the item it replaces and the new one, ' +
            'an `UpdateItem` the larger of the item before and after, a `DeleteItem` the item deleted, and a write whose ' +
            `condition fails the same as if it had applied. The largest item written here was ${aws.both.dynamodb.largestItemBytes} bytes` +
            `${aws.both.dynamodb.largestItemBytes <= 1024 ? ', so every write is 1 WCU' : ''}. SQS bills per request (each 64 KB of a payload counts as one; the largest message ` +
            `sent here was ${aws.both.sqs.largestBodyBytes.toLocaleString('en-US')} bytes). The worker keeps its claims in a DynamoDB table of its own.`,
          '',
          table(['process', 'DynamoDB requests', 'failed conditions', 'WCU', 'RCU', 'SQS requests', 'SQS requests, total'], usageRows(aws)),
        ]),
    '',
    TWO_HEADING,
    '',
    `Two receiver processes of one shape sharing one store (one key space), each loaded by its own autocannon with ` +
      `${STORE_CONNECTIONS} connections (the load one receiver gets above: the model is a capacity at saturation), for ${seconds} s, after a warm-up of ${warmupSeconds} s; one id in ${SHARE_EVERY} is sent to both receivers at about the ` +
      'same moment (a retry landing on the other process). "Predicted" is the model on this machine: its cores divided by ' +
      'the summed CPU time per request of the receiver, the store and the load generator (here it shares the cores), ' +
      `measured with the first receiver loaded alone in the same repetition. ${config.quick ? 'One repetition' : `${CHECK_REPETITIONS} repetitions`}, the run alone and the run of both back to back in an ` +
      "order that rotates, so that a drift of the machine (another process, the database's background work) moves the " +
      'prediction and the measurement alike; the ratio is the median of the repetitions, min–max in brackets. Each ' +
      'receiver lists the ids its handler processed: none may be in both lists, and every id sent to both must be in one ' +
      '(a duplicate is answered 200 and an id being processed 409, and neither reaches the handler). The CPU time of both ' +
      'receivers and the store per request while both ran, beside the same sum with one receiver alone, tells a check that ' +
      'left cores idle (the same cost per request) from one where each request cost more.',
    '',
    table(['shape', 'req/s, both receivers', 'predicted', 'measured ÷ predicted', 'receivers + store CPU per request here (with one receiver)', 'every id once', 'answers'], checkRows),
    '',
    SCALE_HEADING,
    '',
    'An extrapolation, not a measurement: N receiver processes, each on a core of its own (with an inbox, a worker core ' +
      "beside each), limited by the store's ceiling: one Redis instance runs its commands on one core (Redis Cluster " +
      'splits the ids by slot, one core per shard), the Postgres store writes to one primary (its ceiling here is per ' +
      'core of the primary: multiply by the cores it has; replicas do not take writes). For the DynamoDB store, the ' +
      "ceiling is AWS's published limit of one partition, 1,000 write units a second, divided by the write units a " +
      "delivery costs (counted above): a table spreads its items over partitions by the hash of their key, and ids " +
      "differ, so the table's ceiling is that times its partitions. AWS publishes standard SQS queues as taking a nearly " +
      'unlimited number of requests a second per action, so the queue adds no ceiling of its own. Deliveries per second:',
    '',
    table(['shape', ...receiverCounts.map((n) => `${n} receiver${n === 1 ? '' : 's'}`), 'store ceiling'], scaleRows),
  ].join('\n');
  return { id: 'capacity', title: CAPACITY_TITLE, body, targets, charts: [partsChart, scaleChart] };
}

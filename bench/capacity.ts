/**
 * Section 16: the capacity model. For each shape users deploy, the CPU time one delivery costs
 * each process involved, measured here under load, summed; then one measured check of the model:
 * two receiver processes sharing one store, against the model's prediction.
 *
 * Shapes: the memory store; the Redis store (ioredis); the Postgres store (`pg` Pool); the Redis
 * store with the BullMQ inbox; the Postgres store with the pg-boss inbox. DynamoDB + SQS has its
 * row reserved ({@link SQS_SHAPE}), marked "not measured yet": section 15 accepts into a local SQS
 * (with the Redis store), but this section has no DynamoDB shape, and its worker
 * (capacity-worker.ts) drains BullMQ and pg-boss only.
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
 *   shares this machine's cores, so the prediction for this machine counts it.
 *
 * The model: deliveries per second = cores ÷ the summed CPU-seconds per delivery. The check: two
 * receivers of the Redis shape, then of the Postgres shape, sharing one store (one key space), each
 * loaded by its own load generator; every tenth id is sent to both receivers at about the same
 * moment (a sender's retry landing on the other process), and each id must be processed by exactly
 * one of them. Throughput past this machine (N receivers) is extrapolated from the per-part figures
 * and said to be.
 */

import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { Redis } from 'ioredis';
import { startPostgresServer } from '../test/support/postgres-server.ts';
import { startRedisServer } from '../test/support/redis-server.ts';
import type { BarChart, Curve } from './charts.ts';
import { newSecret } from './fixtures.ts';
import { CAPACITY_TITLE, PARTS_HEADING, SCALE_HEADING, TWO_HEADING } from './labels.ts';
import { STORE_CONNECTIONS, WEBHOOK_PATH } from './http-cases.ts';
import type { RunRequest, RunResult } from './http-load.ts';
import { clockTicks, processTreeMicros, redisMicros, skippedWithoutStores, statFields } from './http-stores.ts';
import { checkedRun, Child, poolRps, START_TIMEOUT_MS, startServer, type ServerChild } from './http.ts';
import { pgBossRuns } from '../test/support/node-version.ts';
import { type BenchConfig, fixed, QUICK_RUN_SECONDS, rateText, type SectionReport, table, type TargetResult, timeText } from './report.ts';


/** The shapes measured, in the order of the tables. */
const SHAPES = ['memory', 'redis', 'postgres', 'redis-bullmq', 'postgres-pg-boss'] as const;
type Shape = (typeof SHAPES)[number];

const SHAPE_LABELS: Record<Shape, string> = {
  memory: 'memory store',
  redis: 'Redis store',
  postgres: 'Postgres store',
  'redis-bullmq': 'Redis store + BullMQ inbox',
  'postgres-pg-boss': 'Postgres store + pg-boss inbox',
};
/** The shape whose row waits for the SQS inbox. */
const SQS_SHAPE = 'DynamoDB store + SQS inbox';

/** The processes a delivery costs CPU in, as the table's columns name them. */
const PARTS = ['receiver', 'Redis', 'Postgres', 'queue worker'] as const;
type Part = (typeof PARTS)[number];

const SERVER_ARGS: Record<Shape, readonly string[]> = {
  memory: ['store', 'memory'],
  redis: ['store', 'ioredis'],
  postgres: ['store', 'postgres'],
  'redis-bullmq': ['inbox', 'bullmq'],
  'postgres-pg-boss': ['inbox', 'pg-boss'],
};
const DATABASE: Record<Shape, 'Redis' | 'Postgres' | undefined> = {
  memory: undefined,
  redis: 'Redis',
  postgres: 'Postgres',
  'redis-bullmq': 'Redis',
  'postgres-pg-boss': 'Postgres',
};
const ENGINE: Partial<Record<Shape, 'bullmq' | 'pg-boss'>> = { 'redis-bullmq': 'bullmq', 'postgres-pg-boss': 'pg-boss' };

/** One shape's costs: µs of CPU per delivery by part, and the load generator's per request. */
interface ShapeCost {
  shape: Shape;
  parts: Partial<Record<Part, number>>;
  loadGenerator: number | undefined;
  deliveries: number;
  rps: number;
}

/** The two-receiver check of one shape. */
interface TwoReceivers {
  shape: Shape;
  /** Requests answered per second, both receivers together. */
  rps: number;
  /** What the model predicts for this machine, requests per second. */
  predicted: number;
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
  serversAlone: number;
}

/** Every other id is a run's own; one in `SHARE_EVERY` goes to both receivers. */
const SHARE_EVERY = 10;

/** A process's own CPU time (user + system), µs, from /proc; `undefined` off Linux. */
function ownMicros(pid: number, ticks: number): number | undefined {
  const fields = statFields(pid);
  return fields === undefined ? undefined : ((Number(fields[11]) + Number(fields[12])) * 1e6) / ticks;
}

const sum = (values: readonly (number | undefined)[]) => values.reduce<number>((total, v) => total + (v ?? 0), 0);

/** Deliveries per second one core gives a part that costs `micros` per delivery. */
const perCore = (micros: number) => 1e6 / micros;

export async function runCapacity(config: BenchConfig): Promise<SectionReport> {
  const skipped = skippedWithoutStores('capacity', CAPACITY_TITLE, 'the capacity section');
  if (skipped !== undefined) return skipped;
  // pg-boss 12 needs Node 22.12 or later: on an older Node its shape is left out, as section 15 does.
  const shapes = SHAPES.filter((shape) => shape !== 'postgres-pg-boss' || pgBossRuns());
  const seconds = config.quick ? QUICK_RUN_SECONDS : 3;
  const warmupSeconds = config.quick ? 0 : 1;
  const ticks = clockTicks();
  const cores = cpus().length;

  const redisServer = await startRedisServer();
  const children: Child[] = [];
  let pgServer: Awaited<ReturnType<typeof startPostgresServer>> | undefined;
  let redis: Redis | undefined;
  try {
    pgServer = await startPostgresServer();
    const postgres = pgServer;
    const client = (redis = new Redis(redisServer.url, { lazyConnect: true }));
    await client.connect();
    const { secret } = newSecret();
    const env = { BENCH_SECRET: secret, BENCH_BUILD: config.pkg.dir, BENCH_REDIS_URL: redisServer.url, BENCH_POSTGRES_URL: postgres.url };
    const dbMicros = (database: 'Redis' | 'Postgres' | undefined): Promise<number | undefined> =>
      database === 'Redis' ? redisMicros(client) : database === 'Postgres' ? Promise.resolve(processTreeMicros(postgres.pid, ticks)) : Promise.resolve(undefined);
    const delta = (before: number | undefined, after: number | undefined) => (before === undefined || after === undefined ? undefined : after - before);

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
        const dbBefore = await dbMicros(database);
        const loadBefore = ownMicros(load.pid, ticks);
        const run = await checkedRun(load, server, what, seconds, STORE_CONNECTIONS, poolRps(0), status);
        const loadAfter = ownMicros(load.pid, ticks);
        const dbAfter = await dbMicros(database);
        const parts: Partial<Record<Part, number>> = { receiver: run.cpuPerRequest };
        let dbTotal = delta(dbBefore, dbAfter);
        if (engine !== undefined) {
          // The accepted jobs, drained by a worker process started now: its start-up is not counted.
          const queue = `bench-${engine}-${server.child.pid}`;
          const worker = new Child('capacity-worker.ts', [engine, queue], env);
          children.push(worker);
          await worker.ask('ready', undefined, START_TIMEOUT_MS, `starting the ${engine} worker`);
          const drainBefore = await dbMicros(database);
          const drained = await worker.ask<{ processed: number; cpuMicros: number }>('drained', { type: 'drain', expected: run.processed }, 300_000, `${engine} worker draining ${run.processed} jobs`);
          const drainAfter = await dbMicros(database);
          parts['queue worker'] = drained.cpuMicros / run.processed;
          const drainDb = delta(drainBefore, drainAfter);
          dbTotal = dbTotal === undefined || drainDb === undefined ? undefined : dbTotal + drainDb;
          await worker.stop();
        }
        if (database !== undefined && dbTotal !== undefined) parts[database] = dbTotal / run.processed;
        const loadMicros = delta(loadBefore, loadAfter);
        costs.push({ shape, parts, loadGenerator: loadMicros === undefined ? undefined : loadMicros / run.total, deliveries: run.processed, rps: run.rps });
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
      const cost = costs.find((c) => c.shape === shape)!;
      const shared = { ...env, BENCH_SHARED_KEYS: `cap${randomBytes(4).toString('hex')}`, BENCH_RECORD_IDS: '1' };
      // One after the other: the Postgres store creates its table on start-up.
      const a = await startServer(SERVER_ARGS[shape], shared, `${SERVER_ARGS[shape].join(' ')}, receiver 1 of 2`);
      children.push(a.child);
      const b = await startServer(SERVER_ARGS[shape], shared, `${SERVER_ARGS[shape].join(' ')}, receiver 2 of 2`);
      children.push(b.child);
      try {
        // The receiver's and the store's CPU per request with one receiver; the prediction adds
        // the load generator's, which runs on the same cores.
        const serversAlone = serversCost(cost);
        const perRequest = serversAlone + (cost.loadGenerator ?? 0);
        const serverMicros = async () => {
          const parts = [ownMicros(a.child.pid, ticks), ownMicros(b.child.pid, ticks), await dbMicros(DATABASE[shape])];
          return parts.some((part) => part === undefined) ? undefined : sum(parts);
        };
        checks.push(await twoReceivers(shape, [a, b], [load, second], { seconds, warmupSeconds }, cores / (perRequest / 1e6), serverMicros, serversAlone));
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
  }
}

/** The receiver's and the store's CPU time per delivery with one receiver (µs): the parts summed. */
const serversCost = (cost: ShapeCost): number => sum(PARTS.map((part) => cost.parts[part]));

/** One run of two receivers sharing a store, each loaded by its own generator at once. */
async function twoReceivers(
  shape: Shape,
  servers: [ServerChild, ServerChild],
  loads: [Child, Child],
  { seconds, warmupSeconds }: { seconds: number; warmupSeconds: number },
  predicted: number,
  serverMicros: () => Promise<number | undefined>,
  serversAlone: number,
): Promise<TwoReceivers> {
  const sharedTag = randomBytes(6).toString('hex');
  const connections = STORE_CONNECTIONS / 2;
  const request = (server: ServerChild): RunRequest => ({
    type: 'run',
    url: `http://127.0.0.1:${server.port}${WEBHOOK_PATH}`,
    seconds,
    connections,
    expectedRps: poolRps(0) / 2,
    tag: randomBytes(6).toString('hex'),
    shared: { tag: sharedTag, every: SHARE_EVERY },
  });
  const what = `two receivers, ${SHAPE_LABELS[shape]}`;
  // Warmed up first, as each shape's single-receiver run is: a receiver started cold pays for its
  // JIT and its first store connections inside the timed seconds. Each on ids of its own; the ids
  // the warm-up processed are left out of the check below.
  if (warmupSeconds > 0) {
    await Promise.all(servers.map((server, i) => loads[i]!.ask<RunResult>('result', { ...request(server), seconds: warmupSeconds, shared: undefined }, (warmupSeconds + 60) * 1000, what)));
  }
  const warm = await Promise.all(servers.map((server) => server.child.ask<{ ids: string[] }>('ids', { type: 'ids' }, 10_000, what)));
  const before = await serverMicros();
  const results = await Promise.all(servers.map((server, i) => loads[i]!.ask<RunResult>('result', request(server), (seconds + 60) * 1000, what)));
  const after = await serverMicros();
  const ids = await Promise.all(servers.map((server) => server.child.ask<{ ids: string[] }>('ids', { type: 'ids' }, 10_000, what)));
  const statusCodes: Record<string, number> = {};
  for (const result of results) for (const [code, count] of Object.entries(result.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  const unexpected = Object.keys(statusCodes).filter((code) => !['204', '200', '409'].includes(code));
  if (unexpected.length > 0 || results.some((r) => r.errors > 0 || r.timeouts > 0)) {
    throw new Error(`${what}: the run was not clean: statuses ${JSON.stringify(statusCodes)}, ${sum(results.map((r) => r.errors))} errors, ${sum(results.map((r) => r.timeouts))} timeouts`);
  }
  const [first, other] = ids.map((reply, i) => {
    const warmedUp = new Set(warm[i]!.ids);
    return new Set(reply.ids.filter((id) => !warmedUp.has(id)));
  }) as [Set<string>, Set<string>];
  let twice = 0;
  for (const id of first) if (other.has(id)) twice++;
  // Shared ids both generators sent, short of the last requests a generator may have left unanswered.
  const bothSent = Math.max(0, Math.min(...results.map((r) => r.pooled + r.signedOnTheFly)) - connections);
  let sharedSent = 0;
  let missing = 0;
  for (let n = 0; n < bothSent; n += SHARE_EVERY) {
    sharedSent++;
    const id = `msg_${sharedTag}_${n}`;
    if (!first.has(id) && !other.has(id)) missing++;
  }
  const answered = sum(results.map((r) => r.total));
  const serversHere = before === undefined || after === undefined || answered === 0 ? undefined : (after - before) / answered;
  return { shape, rps: sum(results.map((r) => r.rps)), predicted, processed: first.size + other.size, sharedSent, twice, missing, statusCodes, serversHere, serversAlone };
}

const us = (micros: number | undefined) => (micros === undefined ? '–' : timeText(micros / 1e6));

function report(config: BenchConfig, costs: readonly ShapeCost[], checks: readonly TwoReceivers[], cores: number, { seconds, warmupSeconds }: { seconds: number; warmupSeconds: number }): SectionReport {
  const partsRows = [
    ...costs.map((cost) => [
      SHAPE_LABELS[cost.shape],
      ...PARTS.map((part) => us(cost.parts[part])),
      us(serversCost(cost)),
      rateText(perCore(serversCost(cost))),
      us(cost.loadGenerator),
    ]),
    [SQS_SHAPE, ...PARTS.map(() => 'not measured yet'), 'not measured yet', 'not measured yet', 'not measured yet'],
  ];
  const checkRows = checks.map((check) => [
    SHAPE_LABELS[check.shape],
    rateText(check.rps),
    rateText(check.predicted),
    fixed(check.rps / check.predicted, 2),
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
    const store = cost.parts.Redis ?? cost.parts.Postgres;
    const ceiling = store === undefined ? Number.POSITIVE_INFINITY : perCore(store);
    const storeText = cost.parts.Redis !== undefined ? 'one Redis instance (it runs commands on one core; Redis Cluster adds one per shard)' : 'one core of the Postgres primary (multiply by its cores)';
    const values = receiverCounts.map((n) => Math.min(n * perCore(node), ceiling));
    for (const [i, n] of receiverCounts.entries()) points.push({ x: n, series: SHAPE_LABELS[cost.shape], y: values[i]! });
    scaleRows.push([SHAPE_LABELS[cost.shape], ...values.map((v) => rateText(v)), `${rateText(ceiling)}: ${storeText}`]);
  }

  const targets: TargetResult[] = checks.flatMap((check) => {
    const ratio = check.rps / check.predicted;
    return [
      {
        what: `two receivers sharing one ${check.shape === 'redis' ? 'Redis' : 'Postgres'}: measured ÷ predicted throughput (cores ÷ summed CPU per delivery)`,
        target: '0.75–1.25',
        measured: fixed(ratio, 2),
        context: `${rateText(check.rps)} req/s measured vs ${rateText(check.predicted)} predicted on ${cores} cores`,
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
    table(['shape', ...PARTS.map((part) => `${part}`), 'summed', 'deliveries/s per core', 'load generator, per request'], partsRows),
    '',
    `The ${SQS_SHAPE} row is not measured yet: section 15 times accepting into a local SQS, but this section has no ` +
      "worker for the SQS inbox. DynamoDB's cost there is in write units, not CPU (one WCU per KB written, rounded up, " +
      'failed conditional writes included), so that row will count them beside the CPU time.',
    '',
    TWO_HEADING,
    '',
    `Two receiver processes of one shape sharing one store (one key space), each loaded by its own autocannon with ` +
      `${STORE_CONNECTIONS / 2} connections, for ${seconds} s after a warm-up of ${warmupSeconds} s (as each shape's run above); one id in ${SHARE_EVERY} is sent to both receivers at about the ` +
      'same moment (a retry landing on the other process). "Predicted" is the model on this machine: its cores divided by ' +
      'the summed CPU time per request measured above, the load generator included (here it shares the cores). Each ' +
      'receiver lists the ids its handler processed: none may be in both lists, and every id sent to both must be in one ' +
      '(a duplicate is answered 200 and an id being processed 409, and neither reaches the handler). The CPU time of both ' +
      'receivers and the store during the check, per request, beside the same sum with one receiver, tells a check that ' +
      'left cores idle (the same cost per request) from one where each request cost more.',
    '',
    table(['shape', 'req/s, both receivers', 'predicted', 'measured ÷ predicted', 'receivers + store CPU per request here (with one receiver)', 'every id once', 'answers'], checkRows),
    '',
    SCALE_HEADING,
    '',
    'An extrapolation, not a measurement: N receiver processes, each on a core of its own (with an inbox, a worker core ' +
      "beside each), limited by the store's ceiling: one Redis instance runs its commands on one core (Redis Cluster " +
      'splits the ids by slot, one core per shard), the Postgres store writes to one primary (its ceiling here is per ' +
      'core of the primary: multiply by the cores it has; replicas do not take writes). Deliveries per second:',
    '',
    table(['shape', ...receiverCounts.map((n) => `${n} receiver${n === 1 ? '' : 's'}`), 'store ceiling'], scaleRows),
  ].join('\n');
  return { id: 'capacity', title: CAPACITY_TITLE, body, targets, charts: [partsChart, scaleChart] };
}

/**
 * Section 15: accepting into an inbox over HTTP, like with like. The Fastify
 * adapter of section 10 (1 KiB JSON, every request its own `webhook-id` and a valid signature),
 * autocannon in its own process, each server in its own:
 *
 * - the adapter accepting into BullMQ (`bullmqInbox`, Redis store, one ioredis client with
 *   `enableAutoPipelining: true`) against a hand-written route on the same Fastify that verifies,
 *   sends the Redis store's own two scripts bare and calls `queue.add` with the same job, options
 *   and job id (http-inbox.ts);
 * - the same for pg-boss (`pgBossInbox`, Postgres store on a `pg` Pool) against `boss.send`;
 * - the same for SQS (`sqsInbox`, Redis store) against one `SendMessage`, on fauxqs (a local SQS)
 *   in a process of its own;
 * - beside each, the synchronous mode on the same adapter and store (section 10's servers: a
 *   trivial handler answering 204), for the answer latency.
 *
 * Servers CPU per request is the headline (as in sections 4 and 10); the database's own CPU is
 * read as section 10 reads it and shown beside it, so the two routes can be seen to do the same
 * work there. Every run starts from an empty queue (the server empties it before the run), and
 * every 202 is checked against the jobs in the queue after the run. Then a growth curve: accepted
 * per second against connections (1 to 64), ours and the hand-written route into BullMQ.
 */

import { curveTable, type Curve, type CurvePoint } from './charts.ts';
import { INBOX_CELLS, INBOX_MODE, STORE_CONNECTIONS, STORE_MODE, type InboxCell } from './http-cases.ts';
import { skippedWithoutStores, withStoreServers } from './http-stores.ts';
import { type BenchConfig, fixed, QUICK_RUN_SECONDS, rateText, judged, ratioText, type SectionReport, table, type TargetResult } from './report.ts';
import { ratios, summarize } from './stats.ts';
import { fauxqsRuns, pgBossRuns } from '../test/support/node-version.ts';
import { startSqsChild } from '../test/support/sqs-child.ts';

const TITLE = '15. Inbox: accepting into a queue (HTTP)';

/** The inbox cells and the synchronous cells beside them. */
type Cell = InboxCell | 'redis-sync' | 'postgres-sync';
type Engine = 'bullmq' | 'pg-boss' | 'sqs';

const ENGINES: Record<Engine, { ours: Cell; hand: Cell; sync: Cell; database: 'redis' | 'postgres'; add: string; inbox: string; store: string }> = {
  bullmq: { ours: 'bullmq', hand: 'bullmq-inline', sync: 'redis-sync', database: 'redis', add: '`queue.add`', inbox: '`bullmqInbox`', store: 'Redis store, ioredis' },
  'pg-boss': { ours: 'pg-boss', hand: 'pg-boss-inline', sync: 'postgres-sync', database: 'postgres', add: '`boss.send`', inbox: '`pgBossInbox`', store: 'Postgres store, `pg` Pool' },
  sqs: { ours: 'sqs', hand: 'sqs-inline', sync: 'redis-sync', database: 'redis', add: '`SendMessage`', inbox: '`sqsInbox`', store: 'Redis store, ioredis; local SQS' },
};

const LABELS: Record<Cell, string> = {
  bullmq: 'our adapter accepting (202), `bullmqInbox`',
  'bullmq-inline': 'hand-written: verify + the same store commands + `queue.add` (202)',
  'redis-sync': 'our adapter, synchronous mode (204, trivial handler)',
  'pg-boss': 'our adapter accepting (202), `pgBossInbox`',
  'pg-boss-inline': 'hand-written: verify + the same store commands + `boss.send` (202)',
  'postgres-sync': 'our adapter, synchronous mode (204, trivial handler)',
  sqs: 'our adapter accepting (202), `sqsInbox`',
  'sqs-inline': 'hand-written: verify + the same store commands + `SendMessage` (202)',
  // Section 16's shape: this section does not run it.
  'sqs-dynamodb': 'our adapter accepting (202), `sqsInbox`, DynamoDB store',
};

/** The arguments of http-server.ts for a cell. */
function serverArgs(cell: Cell): string[] {
  if (cell === 'redis-sync') return [STORE_MODE, 'ioredis'];
  if (cell === 'postgres-sync') return [STORE_MODE, 'postgres'];
  return [INBOX_MODE, cell];
}

const isInbox = (cell: Cell): cell is InboxCell => (INBOX_CELLS as readonly string[]).includes(cell);

/** The growth curve's connection counts; its 16-connection point is the main table's. */
const CURVE_CONNECTIONS = [1, 4, STORE_CONNECTIONS, 64] as const;

interface Figures {
  rps: number[];
  cpu: number[];
  dbCpu: number[];
  p50: number[];
  p99: number[];
}

const emptyFigures = (): Figures => ({ rps: [], cpu: [], dbCpu: [], p50: [], p99: [] });

export async function runInbox(config: BenchConfig): Promise<SectionReport> {
  const skipped = skippedWithoutStores('inbox', TITLE, 'the inbox section');
  if (skipped !== undefined) return skipped;
  // The package supports Node 22 and later; a smoke run on an older Node measures BullMQ only.
  const engines: Engine[] = [...(pgBossRuns() ? (['bullmq', 'pg-boss'] as const) : (['bullmq'] as const)), ...(fauxqsRuns() ? (['sqs'] as const) : [])];
  const cells: Cell[] = [...new Set(engines.flatMap((engine) => [ENGINES[engine].ours, ENGINES[engine].hand, ENGINES[engine].sync]))];
  // SQS is fauxqs, in a process of its own so that its CPU is not counted as the server's.
  const sqs = engines.includes('sqs') ? await startSqsChild() : undefined;
  if (sqs !== undefined) process.env.BENCH_SQS_URL = sqs.url;
  // As sections 4 and 10: two-second runs after a one-second warm-up; four repetitions (five
  // there) and three per curve point keep the section within its budget.
  const seconds = config.quick ? QUICK_RUN_SECONDS : 2;
  const warmupSeconds = config.quick ? 0 : 1;
  const reps = config.quick ? 1 : 4;
  const curveReps = config.quick ? 1 : 3;
  const curveConnections = config.quick ? [1, STORE_CONNECTIONS] : CURVE_CONNECTIONS;

  const figures = new Map<string, Figures>();
  const figuresOf = (cell: Cell, connections: number) => {
    const name = `${cell} ${connections}`;
    let f = figures.get(name);
    if (f === undefined) figures.set(name, (f = emptyFigures()));
    return f;
  };
  const signedOnTheFly = await withStoreServers(config, new Map(cells.map((cell) => [cell, serverArgs(cell)])), async ({ servers, measure, signedOnTheFly }) => {
    const run = async (cell: Cell, duration: number, connections: number) => {
      // An empty queue before every run: the backlog bound never refuses, and the jobs counted
      // after the run are this run's.
      if (isInbox(cell)) await servers.get(cell)!.child.ask('reset', { type: 'reset' }, 60_000, `emptying the queue of ${cell}`);
      const database = cell === 'pg-boss' || cell === 'pg-boss-inline' || cell === 'postgres-sync' ? 'postgres' : 'redis';
      return measure(cell, duration, connections, { database, status: isInbox(cell) ? 202 : 204 });
    };
    const record = async (cell: Cell, connections: number) => {
      const result = await run(cell, seconds, connections);
      const f = figuresOf(cell, connections);
      f.rps.push(result.rps);
      f.cpu.push(result.cpuPerRequest);
      f.p50.push(result.p50);
      f.p99.push(result.p99);
      if (result.dbCpu !== undefined) f.dbCpu.push(result.dbCpu);
    };

    // The main table: every cell at 16 connections, in an order that rotates per repetition.
    if (warmupSeconds > 0) for (const cell of cells) await run(cell, warmupSeconds, STORE_CONNECTIONS);
    for (let rep = 0; rep < reps; rep++) {
      for (let k = 0; k < cells.length; k++) await record(cells[(rep + k) % cells.length]!, STORE_CONNECTIONS);
    }
    // The curve: ours and the hand-written route into BullMQ at each other connection count,
    // back to back in alternating order.
    const pair: Cell[] = ['bullmq', 'bullmq-inline'];
    for (const connections of curveConnections) {
      if (connections === STORE_CONNECTIONS) continue;
      for (let rep = 0; rep < curveReps; rep++) {
        for (let k = 0; k < pair.length; k++) await record(pair[(rep + k) % pair.length]!, connections);
      }
    }
    return signedOnTheFly();
  }).finally(async () => {
    delete process.env.BENCH_SQS_URL;
    await sqs?.stop();
  });

  const median = (values: readonly number[]) => summarize(values).median;
  const us = (values: readonly number[]) => {
    if (values.length === 0) return '–';
    const s = summarize(values);
    return `${fixed(s.median, 1)} µs (${fixed(s.min, 1)}–${fixed(s.max, 1)})`;
  };
  const ms = (values: readonly number[]) => {
    const m = median(values);
    return m < 1 ? '< 1 ms' : `${fixed(m, 0)} ms`;
  };
  const at = (cell: Cell) => figuresOf(cell, STORE_CONNECTIONS);

  const rows: string[][] = [];
  const targets: TargetResult[] = [];
  for (const engine of engines) {
    const e = ENGINES[engine];
    // The synchronous Redis row is BullMQ's too: shown once.
    for (const cell of engine === 'sqs' ? [e.ours, e.hand] : [e.ours, e.hand, e.sync]) {
      const f = at(cell);
      const r = summarize(f.rps);
      rows.push([
        `${engine} (${e.store})`,
        LABELS[cell],
        `${rateText(r.median)} (${rateText(r.min)}–${rateText(r.max)})`,
        us(f.cpu),
        cell === e.ours ? ratioText(summarize(ratios(f.cpu, at(e.hand).cpu))) : cell === e.hand ? '1' : '–',
        us(f.dbCpu),
        ms(f.p50),
        ms(f.p99),
      ]);
    }
    const ours = at(e.ours);
    const hand = at(e.hand);
    const overHand = summarize(ratios(ours.cpu, hand.cpu));
    targets.push({
      what: `accepting into ${engine} (Fastify adapter, ${e.store}), server CPU per request ÷ hand-written verify + the same store commands + ${e.add}, ${STORE_CONNECTIONS} connections`,
      target: '≤ 1.25',
      ...judged(overHand, '≤', 1.25),
      context:
        `server CPU ${fixed(median(ours.cpu), 1)} vs ${fixed(median(hand.cpu), 1)} µs per request; req/s ${rateText(median(ours.rps))} vs ${rateText(median(hand.rps))}, ` +
        `ratio ${ratioText(summarize(ratios(ours.rps, hand.rps)))}; p50/p99 ${ms(ours.p50)}/${ms(ours.p99)}, synchronous mode ${ms(at(e.sync).p50)}/${ms(at(e.sync).p99)}`,
    });
  }

  const points: CurvePoint[] = [];
  const curveRows: string[] = [];
  for (const connections of curveConnections) {
    const ours = figuresOf('bullmq', connections);
    const hand = figuresOf('bullmq-inline', connections);
    points.push({ x: connections, series: 'our adapter (Fastify, bullmqInbox)', y: median(ours.rps) }, { x: connections, series: 'hand-written route, same commands', y: median(hand.rps) });
    curveRows.push(`${connections}: ${ratioText(summarize(ratios(ours.cpu, hand.cpu)))} (p99 ${ms(ours.p99)} vs ${ms(hand.p99)})`);
  }
  const curve: Curve = {
    kind: 'line',
    id: 'curve-inbox-connections',
    title: 'Accepting into BullMQ over HTTP: accepted per second vs connections',
    x: { title: 'connections', log: true, unit: 'count' },
    y: { title: 'accepted (202) per second', unit: 'count' },
    points,
  };

  const body = [
    `The Fastify adapter of section 10, autocannon in its own process, ${STORE_CONNECTIONS} connections, ${seconds} s per run, ` +
      `${reps} repetition${reps === 1 ? '' : 's'} ${warmupSeconds > 0 ? `after a ${warmupSeconds} s warm-up per server` : 'without warm-up'}, ` +
      'the servers in one rotating order per repetition. Every request: POST, 1 KiB JSON, its own `webhook-id`, a valid signature. ' +
      'An accepting server answers 202 `{"enqueued":true}` once the engine acknowledged the job (checked: every answer was a 202, ' +
      'and after each run the queue held a job for every 202); the synchronous rows are section 10\'s servers, whose trivial ' +
      'handler answers 204. Every run starts from an empty queue, and no worker runs: this measures accepting only.',
    '',
    table(['engine (store)', 'route', 'req/s', 'server CPU per request', 'CPU ÷ hand-written', 'database CPU per request', 'p50', 'p99'], rows),
    '',
    'Like with like: the hand-written route runs on the same Fastify, with a buffer parser for the body, the ' +
      'hand-written check of section 4, then the store\'s own commands recorded from the store and sent bare (Redis: the ' +
      'claim and completion scripts by EVALSHA; Postgres: the claim and completion statements, prepared as the store ' +
      'prepares them), the claim before the add and the completion after it as the receiver runs them, and the engine\'s ' +
      'add of the same job (format 1, the body in base64) with the inbox\'s options and job id (BullMQ: the hex SHA-256 of ' +
      'the key, 12 attempts, exponential backoff with jitter, `removeOnComplete`, failed jobs kept 14 days; pg-boss: the ' +
      'UUID from the same hash, to a queue created with the inbox\'s retry policy and dead-letter queue; SQS: the job in ' +
      'the inbox\'s envelope, one `SendMessage` on the same `SQSClient`, to fauxqs, a local SQS in a process of its own, ' +
      'whose CPU is not counted; the inbox is given `maxMessageBytes`, as the queue\'s size is known). What ours does ' +
      'beyond it: the ' +
      'backlog read (one count a second, against `maxBacklog`), the bound on the engine\'s acknowledgement, and the ' +
      'claim\'s renewal timer. BullMQ\'s queue and the Redis store share one ioredis client (`enableAutoPipelining: true`); ' +
      'pg-boss runs on its own pool (started with `supervise: false` and `schedule: false` in both servers, so no ' +
      'maintenance lands in one run and not another), the Postgres store on a `pg` Pool of 16. p50 and p99 are the medians ' +
      'of the runs\' (autocannon records whole milliseconds). "Database CPU per request" is redis-server\'s or PostgreSQL\'s, ' +
      'read as section 10 reads it.',
    '',
    '### Accepting into BullMQ vs connections',
    '',
    `Accepted (202) per second, medians of ${curveReps} repetition${curveReps === 1 ? '' : 's'} per point, ours and the ` +
      `hand-written route back to back (the ${STORE_CONNECTIONS}-connection point is the table's). Server CPU per request, ` +
      `ours ÷ hand-written, by connections: ${curveRows.join('; ')}.`,
    '',
    curveTable(curve),
    ...(engines.includes('sqs') ? [] : ['', `_SQS rows skipped: fauxqs needs Node 22.5 or later, and this is Node ${process.versions.node}._`]),
    ...(engines.includes('pg-boss') ? [] : ['', `_pg-boss rows skipped: pg-boss 12 needs Node 22.12 or later, and this is Node ${process.versions.node}._`]),
    ...(signedOnTheFly > 0 ? ['', `${signedOnTheFly} requests outran the pre-signed pool and were signed by the load generator on the fly.`] : []),
  ].join('\n');
  return { id: 'inbox', title: TITLE, body, targets, charts: [curve] };
}

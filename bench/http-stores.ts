/**
 * Section 10: the shared stores behind an adapter, over HTTP, like with like.
 * The Fastify adapter of section 4 (1 KiB JSON, every request its own `webhook-id` and a valid
 * signature, the handler answering 204 after reading the parsed event), 16 autocannon
 * connections, with four stores:
 *
 * - the memory store (the adapter's default), for context: what a shared store costs beside it;
 * - the Redis store on ioredis, built with `enableAutoPipelining: true` (its recommended setting);
 * - the Redis store on node-redis (`redis`), default client: it already writes a tick's commands together;
 * - the Postgres store on a `pg` Pool of 16 connections.
 *
 * Each shared store's adapter is compared with a hand-written route on the same Fastify doing the
 * same work (hand-written-route.ts): the hand-written check, the store's own claim recorded from
 * the store and sent bare on the same client (bare-store.ts), the handler's work, the store's own
 * completion sent bare, 204.
 *
 * Servers, load generator and databases each run in their own process; redis-server and a
 * throw-away PostgreSQL cluster are started here on 127.0.0.1 as section 9 starts them (Redis
 * without persistence, Postgres with fsync off). The seven cells run in each repetition in an order
 * that rotates (orderOf), so a ratio compares runs that were back to back. The database's own CPU
 * time is outside the server process: it is read from Redis (`INFO cpu`) and from /proc for the
 * postmaster and its backends, and shown beside the server's.
 */

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { findPostgresBin, startPostgresServer } from '../test/support/postgres-server.ts';
import { findRedisServer, isCI, startRedisServer } from '../test/support/redis-server.ts';
import { newSecret } from './fixtures.ts';
import { POSTGRES_POOL_SIZE, SHARED_STORES, STORE_CONNECTIONS, STORE_INLINE_MODE, STORE_MODE, type SharedStoreKind, type StoreKind } from './http-cases.ts';
import { Child, sizedRuns, START_TIMEOUT_MS, startServer, type CheckedRun, type ServerChild } from './http.ts';
import { type BenchConfig, fixed, QUICK_RUN_SECONDS, rateText, judged, ratioText, type SectionId, type SectionReport, table, type TargetResult } from './report.ts';
import { ratios, summarize } from './stats.ts';

const TITLE = '10. Stores behind an adapter (HTTP)';

const LABELS: Record<StoreKind, string> = {
  memory: 'memory store (default)',
  ioredis: 'Redis store, ioredis, `enableAutoPipelining: true`',
  'node-redis': 'Redis store, node-redis, default client',
  postgres: `Postgres store, \`pg\` Pool (max ${POSTGRES_POOL_SIZE})`,
};

/** Each store's adapter, and each shared store's hand-written route doing the same work. */
type Cell = StoreKind | `${SharedStoreKind}-inline`;

const inline = (kind: SharedStoreKind): Cell => `${kind}-inline`;
const CELLS: readonly Cell[] = ['memory', ...SHARED_STORES.flatMap((kind) => [kind, inline(kind)])];

/**
 * The cells in the order of repetition `rep`: the memory store and the pairs of each shared store
 * (its adapter, its hand-written route) in an order that rotates, and within each pair the route
 * that goes first alternating. A run's database CPU also counts the background work the run before
 * it left (autovacuum of the rows it inserted, a checkpoint), so neither route of a pair may always
 * follow the other.
 */
function orderOf(rep: number): Cell[] {
  const units: Cell[][] = [['memory'], ...SHARED_STORES.map((kind) => (rep % 2 === 0 ? [kind, inline(kind)] : [inline(kind), kind]))];
  return units.map((_, k) => units[(rep + k) % units.length]!).flat();
}

/** The store a cell runs on. */
const storeOf = (cell: Cell): StoreKind => (cell.endsWith('-inline') ? (cell.slice(0, -'-inline'.length) as SharedStoreKind) : (cell as StoreKind));

/** The arguments of http-server.ts for a cell. */
const serverArgs = (cell: Cell): string[] => (cell.endsWith('-inline') ? [STORE_INLINE_MODE, storeOf(cell)] : [STORE_MODE, cell]);

interface Figures {
  rps: number[];
  p99: number[];
  /** Server process CPU per processed request, µs. */
  cpu: number[];
  /** The database's CPU per processed request, µs (Redis or Postgres cells, when it can be read). */
  dbCpu: number[];
}

/** Clock ticks per second of /proc's CPU times. */
export function clockTicks(): number {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5000 }).trim());
    return Number.isFinite(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
}

/** The fields of /proc/<pid>/stat after the command name (index 0 is field 3, the state). */
export function statFields(pid: number | string): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * CPU time (µs) of the postmaster `root` and its backends: its own user + system time, its reaped
 * children's (a backend that exited is counted there), and every live child's. Only Linux has
 * /proc: elsewhere `undefined`.
 */
export function processTreeMicros(root: number, ticks: number): number | undefined {
  const own = statFields(root);
  if (own === undefined) return undefined;
  // utime, stime, cutime, cstime are fields 14–17.
  let total = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const fields = statFields(name);
    if (fields !== undefined && Number(fields[1]) === root) total += Number(fields[11]) + Number(fields[12]);
  }
  return (total * 1e6) / ticks;
}

/** redis-server's own CPU time (µs), from `INFO cpu`. */
export async function redisMicros(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

/**
 * The report of a section that needs redis-server and PostgreSQL where one is missing: skipped
 * with a notice, as the tests skip theirs (a failure under CI); `undefined` when both are there.
 */
export function skippedWithoutStores(id: SectionId, title: string, what: string): SectionReport | undefined {
  const notices: string[] = [];
  if (findRedisServer() === undefined) notices.push('redis-server is not on the PATH');
  if (findPostgresBin() === undefined && !process.env.DATABASE_URL) notices.push('PostgreSQL is not installed and DATABASE_URL is unset');
  if (notices.length === 0) return undefined;
  const notice = `${notices.join('; ')}, so ${what} cannot run`;
  if (isCI()) throw new Error(`${notice}; CI is set, so this is a failure`);
  return { id, title, body: `SKIPPED: ${notice}.`, targets: [] };
}

/** The databases a server's store runs on, as `StoreServers.measure` reads their CPU time. */
type Database = 'redis' | 'postgres';

/** One checked run (http.ts), with the database's CPU time per processed request beside it. */
type StoreRun = CheckedRun & { dbCpu: number | undefined };

/** What the sections with servers on shared stores (10 and 15) measure against. */
export interface StoreServers<K extends string> {
  servers: ReadonlyMap<K, ServerChild>;
  /**
   * One checked run on the server `key` (`status`: the answer expected, 204 by default), its pool
   * sized by the fastest run so far of that server at that connection count, and the CPU time
   * `database` spent per processed request: redis-server's from `INFO cpu`, the local PostgreSQL
   * cluster's from /proc (not a DATABASE_URL server's, whose processes are elsewhere).
   */
  measure(key: K, seconds: number, connections: number, options: { database?: Database; status?: number }): Promise<StoreRun>;
  /** Requests that outran the pre-signed pools so far, signed on the fly. */
  signedOnTheFly(): number;
}

/**
 * Starts redis-server and a throw-away PostgreSQL cluster on 127.0.0.1 (or uses DATABASE_URL), the
 * load generator, and one server per entry of `servers` (its http-server.ts arguments), all in
 * processes of their own; runs `run` with them; and stops every one of them, whatever happened.
 */
export async function withStoreServers<K extends string, T>(config: BenchConfig, servers: ReadonlyMap<K, readonly string[]>, run: (context: StoreServers<K>) => Promise<T>): Promise<T> {
  const ticks = clockTicks();
  const redisServer = await startRedisServer();
  const started = new Map<K, ServerChild>();
  let pgServer: Awaited<ReturnType<typeof startPostgresServer>> | undefined;
  let redis: Redis | undefined;
  let load: Child | undefined;
  try {
    pgServer = process.env.DATABASE_URL ? undefined : await startPostgresServer();
    const postgresUrl = process.env.DATABASE_URL ?? pgServer!.url;
    const client = (redis = new Redis(redisServer.url, { lazyConnect: true }));
    await client.connect();
    const { secret } = newSecret();
    const env: Record<string, string> = { BENCH_SECRET: secret, BENCH_BUILD: config.pkg.dir, BENCH_REDIS_URL: redisServer.url, BENCH_POSTGRES_URL: postgresUrl };
    // The inbox section's local SQS, when it started one.
    if (process.env.BENCH_SQS_URL !== undefined) env.BENCH_SQS_URL = process.env.BENCH_SQS_URL;
    const generator = (load = new Child('http-load.ts', [], env));
    await generator.ask('ready', undefined, START_TIMEOUT_MS, 'starting the load generator');
    // Settled, not all: a server that fails to start must not leave the others running.
    const outcomes = await Promise.allSettled([...servers].map(async ([key, args]) => [key, await startServer(args, env, args.join(' '))] as const));
    for (const outcome of outcomes) if (outcome.status === 'fulfilled') started.set(...outcome.value);
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed !== undefined) throw failed.reason;

    const postgres = pgServer;
    const dbMicros = async (database: Database | undefined): Promise<number | undefined> => {
      if (database === 'redis') return redisMicros(client);
      if (database === 'postgres') return postgres === undefined ? undefined : processTreeMicros(postgres.pid, ticks);
      return undefined;
    };
    const sized = sizedRuns(generator);
    let onTheFly = 0;
    return await run({
      servers: started,
      async measure(key, seconds, connections, { database, status }) {
        const dbBefore = await dbMicros(database);
        const result = await sized(`${key} ${connections}`, started.get(key)!, `${servers.get(key)!.join(' ')}, ${connections} connections`, seconds, connections, status);
        const dbAfter = await dbMicros(database);
        onTheFly += result.signedOnTheFly;
        return { ...result, dbCpu: dbBefore === undefined || dbAfter === undefined ? undefined : (dbAfter - dbBefore) / result.processed };
      },
      signedOnTheFly: () => onTheFly,
    });
  } finally {
    await Promise.all([...started.values()].map((s) => s.child.stop()));
    await load?.stop();
    redis?.disconnect();
    await redisServer.close();
    await pgServer?.close();
  }
}

export async function runHttpStores(config: BenchConfig): Promise<SectionReport> {
  const skipped = skippedWithoutStores('http-stores', TITLE, 'the section on stores behind an adapter');
  if (skipped !== undefined) return skipped;
  // Two-second runs after a one-second warm-up per server, as section 4 (autocannon stops on a
  // whole second, so a shorter run saves nothing); three repetitions of the seven cells (five of
  // four before the hand-written routes came) keep the section at about its wall time, some 60 s.
  // The smoke run only proves that every cell works.
  const seconds = config.quick ? QUICK_RUN_SECONDS : 2;
  const warmupSeconds = config.quick ? 0 : 1;
  const reps = config.quick ? 1 : 3;

  const figures = new Map<Cell, Figures>(CELLS.map((cell) => [cell, { rps: [], p99: [], cpu: [], dbCpu: [] }]));
  const databaseOf = (cell: Cell): Database | undefined => {
    const kind = storeOf(cell);
    return kind === 'memory' ? undefined : kind === 'postgres' ? 'postgres' : 'redis';
  };
  const onTheFly = await withStoreServers(config, new Map(CELLS.map((cell) => [cell, serverArgs(cell)])), async ({ measure, signedOnTheFly }) => {
    const run = (cell: Cell, duration: number) => measure(cell, duration, STORE_CONNECTIONS, { database: databaseOf(cell) });
    if (warmupSeconds > 0) for (const cell of CELLS) await run(cell, warmupSeconds);
    for (let rep = 0; rep < reps; rep++) {
      for (const cell of orderOf(rep)) {
        const result = await run(cell, seconds);
        const f = figures.get(cell)!;
        f.rps.push(result.rps);
        f.p99.push(result.p99);
        f.cpu.push(result.cpuPerRequest);
        if (result.dbCpu !== undefined) f.dbCpu.push(result.dbCpu);
      }
    }
    return signedOnTheFly();
  });

  const at = (cell: Cell) => figures.get(cell)!;
  const median = (values: readonly number[]) => summarize(values).median;
  const us = (values: readonly number[]) => {
    if (values.length === 0) return '–';
    const s = summarize(values);
    return `${fixed(s.median, 1)} µs (${fixed(s.min, 1)}–${fixed(s.max, 1)})`;
  };
  const rows = CELLS.map((cell) => {
    const f = at(cell);
    const kind = storeOf(cell);
    const ours = cell === kind;
    const r = summarize(f.rps);
    const p99 = median(f.p99);
    return [
      LABELS[kind],
      ours ? 'our adapter' : 'hand-written: verify + the same store commands',
      `${rateText(r.median)} (${rateText(r.min)}–${rateText(r.max)})`,
      cell === 'memory' ? '1' : ratioText(summarize(ratios(f.rps, at('memory').rps))),
      us(f.cpu),
      kind === 'memory' ? '–' : ours ? ratioText(summarize(ratios(f.cpu, at(inline(kind)).cpu))) : '1',
      kind === 'memory' ? 'none' : us(f.dbCpu),
      p99 < 1 ? '< 1 ms' : `${fixed(p99, 0)} ms`,
    ];
  });

  const target = (kind: SharedStoreKind, store: string): TargetResult => {
    const ours = at(kind);
    const hand = at(inline(kind));
    const overHand = summarize(ratios(ours.cpu, hand.cpu));
    const database = kind === 'postgres' ? 'the Postgres server' : 'redis-server';
    const db = ours.dbCpu.length > 0 && hand.dbCpu.length > 0 ? `; ${database} ${fixed(median(ours.dbCpu), 1)} vs ${fixed(median(hand.dbCpu), 1)} µs` : '';
    return {
      what: `${store} behind the Fastify adapter, server CPU per request ÷ hand-written verify + the same store commands, ${STORE_CONNECTIONS} connections`,
      target: '≤ 1.25',
      ...judged(overHand, '≤', 1.25),
      context:
        `server CPU ${fixed(median(ours.cpu), 1)} vs ${fixed(median(hand.cpu), 1)} µs per request${db}; ` +
        `req/s ${rateText(median(ours.rps))} vs ${rateText(median(hand.rps))}, ratio ${ratioText(summarize(ratios(ours.rps, hand.rps)))}`,
    };
  };
  const targets = [
    target('ioredis', 'Redis store (ioredis, `enableAutoPipelining: true`)'),
    target('node-redis', 'Redis store (node-redis, default client)'),
    target('postgres', `Postgres store (\`pg\` Pool, max ${POSTGRES_POOL_SIZE})`),
  ];

  const body = [
    `The Fastify adapter of section 4 with each store, and beside each shared store the hand-written route doing the same work: ` +
      `autocannon in its own process, ${STORE_CONNECTIONS} connections, ${seconds} s per run, ` +
      `${reps} repetition${reps === 1 ? '' : 's'} ${warmupSeconds > 0 ? `after a ${warmupSeconds} s warm-up per server` : 'without warm-up'}, ` +
      `the ${CELLS.length} servers in an order that rotates per repetition (within each store, ours and the hand-written ` +
      'route take turns going first). Every request: POST, 1 KiB JSON, its own `webhook-id` (fresh, so every ' +
      'delivery claims and completes), a valid signature; every handler gets the parsed event and answers 204 (checked: every ' +
      'answer was a 204 and every 204 a processed event). req/s are medians over repetitions (min–max); ratios are taken within ' +
      'each repetition.',
    '',
    table(['store', 'route', 'req/s', 'req/s ÷ memory store', 'server CPU per request', 'CPU ÷ hand-written', 'database CPU per request', 'p99'], rows),
    '',
    'Like with like: the hand-written route runs on the same Fastify, with a buffer parser for the body, the ' +
      'hand-written check of section 4, then the store\'s own commands recorded from the store and sent bare on the same ' +
      'client (Redis: the claim and completion scripts by EVALSHA, as ioredis\' `evalsha` or node-redis\' `evalSha`; ' +
      'Postgres: the claim and completion statements, prepared as the store prepares them): the claim, the handler\'s work ' +
      '(`JSON.parse` of the body, the same handler), the completion, 204. What ours does beyond it: a fresh token for each ' +
      'claim, the bound on each store command (`timeoutMs`), the claim held for renewal while the handler runs, the checks ' +
      'of every reply, and the adapter\'s own path (the plugin\'s hooks, the outcome). The target is the server\'s CPU per ' +
      'request; the database CPU beside it is context. Both routes send the same statements with the same values in the ' +
      'same sequence (the Postgres store sweeps expired rows in one claim of 16: the bare claims replay a recorded cycle), ' +
      'yet PostgreSQL\'s CPU per request has differed between its two servers by up to 2×, either way round, for a whole ' +
      'run of the section; a server whose database answers slower also spends more CPU per request, so the Postgres ' +
      'ratio moves with it. A run\'s database figure also counts background work the run before it left (autovacuum of ' +
      'the rows it inserted): hence the turns. "req/s ÷ memory store" is context, not a target: a networked store against ' +
      'an in-process `Map`.',
    '',
    'Client settings are each library\'s recommended ones and are set by the app, never by the store: ioredis with ' +
      '`enableAutoPipelining: true` (commands issued in the same tick leave in one write), node-redis as `createClient({ url })` ' +
      `(it already pipelines a tick's commands), \`pg\` as \`new Pool({ max: ${POSTGRES_POOL_SIZE} })\` (idle connections kept, ` +
      '`idleTimeoutMillis: 0`, as a server with steady traffic keeps them). redis-server (persistence off) and PostgreSQL ' +
      '(a local cluster, fsync off) run on the same two cores, so they compete with the server and the load generator.',
    '',
    '"Server CPU per request" is the Node server process\'s CPU time only: the database\'s own work is outside it. ' +
      '"Database CPU per request" is that work, for context: redis-server\'s from `INFO cpu`, PostgreSQL\'s from /proc ' +
      '(the postmaster and its backends). Adding the two gives what a delivery costs the machine.' +
      (onTheFly > 0 ? ` ${onTheFly} requests outran the pre-signed pool and were signed by the load generator on the fly.` : ''),
  ].join('\n');
  return { id: 'http-stores', title: TITLE, body, targets };
}

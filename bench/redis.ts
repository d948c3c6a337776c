/**
 * Section 5: the Redis store against a local `redis-server` (started here, on 127.0.0.1, with
 * persistence off, as the tests start theirs).
 *
 * - claims per second through `redisStore` (ioredis), one at a time and 64 in flight, against the
 *   least a claim can cost: a bare `SET key value PX ms NX` on the same client;
 * - round trips per claim, counted on the server with MONITOR (commands a Lua script runs are
 *   reported with the source `lua` and are not round trips), for ioredis and node-redis.
 */

import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import type { RedisClientLike } from '../src/stores/redis.ts';
import type { IdempotencyStore } from '../src/stores/types.ts';
import { openMonitor, type MonitorEvent } from '../test/support/monitor.ts';
import { findRedisServer, isCI, startRedisServer } from '../test/support/redis-server.ts';
import { bareRedisDelivery } from './bare-store.ts';
import { fixed, rateText, judged, ratioText, table, type BenchConfig, type SectionReport, type TargetResult } from './report.ts';
import { inFlight, oneAtATime, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const LOCK_MS = 60_000;
const TTL_MS = 86_400_000;
const IN_FLIGHT = 64;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A client as this section uses it: the store's view, an ECHO for markers, and a close. */
interface BenchClient {
  kind: 'ioredis' | 'node-redis';
  client: RedisClientLike;
  echo(message: string): Promise<unknown>;
  close(): Promise<void>;
}

async function ioredisClient(url: string): Promise<BenchClient & { redis: Redis }> {
  const redis = new Redis(url, { lazyConnect: true });
  await redis.connect();
  return { kind: 'ioredis', client: redis, redis, echo: (m) => redis.echo(m), close: async () => redis.disconnect() };
}

async function nodeRedisClient(url: string): Promise<BenchClient> {
  const client = createClient({ url });
  client.on('error', () => {});
  await client.connect();
  return {
    kind: 'node-redis',
    client: client as unknown as RedisClientLike,
    echo: (m) => client.echo(m),
    close: async () => client.destroy(),
  };
}

/**
 * The commands `client` sent while `work` ran, as MONITOR saw them: between two ECHO markers,
 * from the client's own connection, without the commands scripts ran.
 */
async function roundTrips(url: string, client: BenchClient, work: () => Promise<void>): Promise<string[]> {
  const events: MonitorEvent[] = [];
  const monitor = await openMonitor(url, (event) => events.push(event));
  const seen = async (message: string): Promise<number> => {
    for (let i = 0; i < 300; i++) {
      const index = events.findIndex((e) => e.args[0]?.toLowerCase() === 'echo' && e.args[1] === message);
      if (index !== -1) return index;
      await sleep(10);
    }
    throw new Error(`MONITOR never showed ${message}`);
  };
  try {
    const start = `bench-marker-start-${randomBytes(4).toString('hex')}`;
    await client.echo(start);
    const from = await seen(start);
    const source = events[from]!.source;
    await work();
    const end = `bench-marker-end-${randomBytes(4).toString('hex')}`;
    await client.echo(end);
    const to = await seen(end);
    return events
      .slice(from + 1, to)
      .filter((e) => e.source === source)
      .map((e) => e.args[0]!.toLowerCase());
  } finally {
    monitor.close();
  }
}

function countOf(commands: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const c of commands) counts.set(c, (counts.get(c) ?? 0) + 1);
  return [...counts].map(([c, n]) => `${n} ${c.toUpperCase()}`).join(', ') || 'none';
}

/**
 * Like with like: the process CPU time our store costs per delivery (claim, then
 * complete) against the bare ioredis client sending the same two scripts by EVALSHA, with the
 * same arguments, 64 deliveries in flight (bare-store.ts records them from the store itself), and
 * nothing else (no token generation, no reply checks, no timeouts). redis-server's own CPU is in
 * another process and counts for neither.
 */
async function cpuPerDelivery(config: BenchConfig, redis: Redis, store: IdempotencyStore, nextKey: () => string): Promise<{ text: string; target: TargetResult }> {
  const delivery = await bareRedisDelivery(redis, (client) => config.pkg.redis.redisStore({ client, prefix: 'bench:' }), LOCK_MS, TTL_MS);
  const bare = async () => {
    const key = nextKey();
    await delivery.claim(key);
    await delivery.complete(key);
  };
  const ours = async () => {
    const key = nextKey();
    const claim = await store.claim(key, LOCK_MS);
    if (claim.status !== 'acquired' || !(await store.complete(key, claim.token, TTL_MS))) throw new Error('a delivery through the store failed');
  };
  await bare();
  await ours();

  const deliveries = config.quick ? 256 : 4096;
  const reps = config.quick ? 3 : 9;
  const cpuOf = async (op: () => Promise<void>) => {
    const before = process.cpuUsage();
    for (let done = 0; done < deliveries; done += IN_FLIGHT) await Promise.all(Array.from({ length: IN_FLIGHT }, op));
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 1e6 / deliveries;
  };
  // Warm-up, then repetitions in an order that alternates.
  await cpuOf(ours);
  await cpuOf(bare);
  const oursCpu: number[] = [];
  const bareCpu: number[] = [];
  for (let rep = 0; rep < reps; rep++) {
    if (rep % 2 === 0) {
      oursCpu.push(await cpuOf(ours));
      bareCpu.push(await cpuOf(bare));
    } else {
      bareCpu.push(await cpuOf(bare));
      oursCpu.push(await cpuOf(ours));
    }
  }
  const ratio = summarize(ratios(oursCpu, bareCpu));
  const us = (values: number[]) => `${fixed(summarize(values).median * 1e6, 1)} µs`;
  return {
    text:
      `Process CPU per delivery (claim, then complete), ${IN_FLIGHT} in flight, ioredis: our store ${us(oursCpu)}, the bare client ` +
      `sending the same two scripts by EVALSHA with the same arguments ${us(bareCpu)}, ratio ${ratioText(ratio)} ` +
      `(${reps} repetitions of ${deliveries} deliveries; redis-server's own CPU is outside this process and in neither).`,
    target: {
      what: 'Redis store process CPU per delivery ÷ the bare client sending the same two EVALSHAs (ioredis, 64 in flight)',
      target: '≤ 1.25',
      ...judged(ratio, '≤', 1.25),
      context: `${us(oursCpu)} vs ${us(bareCpu)} per delivery`,
    },
  };
}

export async function runRedis(config: BenchConfig): Promise<SectionReport> {
  if (findRedisServer() === undefined) {
    // As in the tests: without redis-server the section is skipped with a notice, except under CI.
    const notice = 'redis-server is not on the PATH, so the Redis section cannot run';
    if (isCI()) throw new Error(`${notice}; CI is set, so this is a failure`);
    return { id: 'redis', title: '5. Redis store', body: `SKIPPED: ${notice}.`, targets: [] };
  }
  const { redisStore } = config.pkg.redis;
  const server = await startRedisServer();
  const clients: BenchClient[] = [];
  try {
    const io = await ioredisClient(server.url);
    clients.push(io);
    const store = redisStore({ client: io.client, prefix: 'bench:' });
    let counter = 0;
    const nextKey = () => `default:msg_${(counter++).toString(36).padStart(12, '0')}`;

    // Round trips, for each client: the first claim after the server's script cache was emptied,
    // then claims in steady state, then claim + complete (what one processed webhook costs).
    const tripRows: string[][] = [];
    let steadyPerClaim = Number.NaN;
    const steadyCount = config.quick ? 20 : 200;
    for (const make of [async () => io, () => nodeRedisClient(server.url)]) {
      const bench = await make();
      if (bench !== io) clients.push(bench);
      const s: IdempotencyStore = bench === io ? store : redisStore({ client: bench.client, prefix: 'bench:' });
      await io.redis.script('FLUSH');
      const first = await roundTrips(server.url, bench, async () => {
        await s.claim(nextKey(), LOCK_MS);
      });
      const steady = await roundTrips(server.url, bench, async () => {
        for (let i = 0; i < steadyCount; i++) await s.claim(nextKey(), LOCK_MS);
      });
      // One webhook first, so the complete script is cached too and the next row is steady state.
      const warm = await s.claim(nextKey(), LOCK_MS);
      if (warm.status === 'acquired') await s.complete(`x`, warm.token, TTL_MS);
      const settled = await roundTrips(server.url, bench, async () => {
        for (let i = 0; i < steadyCount; i++) {
          const key = nextKey();
          const claim = await s.claim(key, LOCK_MS);
          if (claim.status !== 'acquired') throw new Error(`a fresh key was not acquired: ${claim.status}`);
          if (!(await s.complete(key, claim.token, TTL_MS))) throw new Error('a claim could not be completed');
        }
      });
      if (bench === io) steadyPerClaim = steady.length / steadyCount;
      tripRows.push(
        [bench.kind, 'first claim after SCRIPT FLUSH', String(first.length), countOf(first)],
        [bench.kind, `claim, steady state (${steadyCount} claims)`, fixed(steady.length / steadyCount), countOf(steady)],
        [bench.kind, `claim + complete (${steadyCount} webhooks)`, fixed(settled.length / steadyCount), countOf(settled)],
      );
      if (bench.kind === 'node-redis') steadyPerClaim = Math.max(steadyPerClaim, steady.length / steadyCount);
    }

    // Throughput: ours against a bare SET NX PX on the same ioredis client.
    const bare = (key: string) => io.redis.set(`bench:bare:${key}`, 'lock:x', 'PX', LOCK_MS, 'NX');
    const claim = () => store.claim(nextKey(), LOCK_MS);
    const set = () => bare(nextKey());
    const candidates: Candidate[] = [
      { name: 'ours, sequential', run: oneAtATime(claim) },
      { name: 'bare, sequential', run: oneAtATime(set) },
      { name: 'ours, 64 in flight', run: inFlight(claim, IN_FLIGHT) },
      { name: 'bare, 64 in flight', run: inFlight(set, IN_FLIGHT) },
    ];
    const timings = await timeInterleaved(candidates, {
      reps: config.quick ? 3 : 7,
      rounds: config.quick ? 2 : 7,
      batchMs: 10,
      warmupMs: config.quick ? 50 : 300,
      minIterations: IN_FLIGHT,
    });
    const of = (name: string) => series(timings, name);
    const perSecond = (name: string) => rateText(1 / summarize(of(name)).median);
    const seq = summarize(ratios(of('bare, sequential'), of('ours, sequential')));
    const par = summarize(ratios(of('bare, 64 in flight'), of('ours, 64 in flight')));
    const rateRows = [
      ['one at a time', perSecond('ours, sequential'), perSecond('bare, sequential'), ratioText(seq)],
      [`${IN_FLIGHT} in flight`, perSecond('ours, 64 in flight'), perSecond('bare, 64 in flight'), ratioText(par)],
    ];

    const cpu = await cpuPerDelivery(config, io.redis, store, nextKey);

    const body = [
      `Throughput with ioredis on one connection (medians over repetitions; keys are fresh, locks ${LOCK_MS / 1000} s). ` +
        '"Bare" is `SET key value PX ms NX`, one plain command: the least an atomic claim can cost. Ours runs a Lua ' +
        'script (EVALSHA) that also reports why a key was not free, and adds a 128-bit ownership token and a timeout.',
      '',
      table(['mode', 'our claims/s', 'bare SET NX/s', 'ours ÷ bare (throughput)'], rateRows),
      '',
      'Round trips, counted on the server with MONITOR:',
      '',
      table(['client', 'what', 'round trips each', 'commands'], tripRows),
      '',
      cpu.text,
    ].join('\n');
    return {
      id: 'redis',
      title: '5. Redis store',
      body,
      targets: [
        {
          what: 'Redis round trips per claim (steady state; ioredis and node-redis)',
          target: '1',
          measured: fixed(steadyPerClaim),
          context: `${perSecond('ours, sequential')} claims/s one at a time, ${perSecond('ours, 64 in flight')} with ${IN_FLIGHT} in flight; ÷ bare SET NX throughput ${fixed(seq.median)} and ${fixed(par.median)}`,
          pass: steadyPerClaim === 1,
        },
        cpu.target,
      ],
    };
  } finally {
    for (const c of clients) await c.close();
    await server.close();
  }
}

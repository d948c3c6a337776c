/**
 * Section 7: claims per second and p99 latency per shared store, at 1, 16 and 128
 * claims in flight, each against the same database's bare write in the same run:
 *
 * - Redis (ioredis): `redisStore` against a bare `SET key value PX ms NX`;
 * - Postgres (pg Pool and postgres.js, 16 connections): `postgresStore` against a bare
 *   `INSERT INTO bare (key) VALUES ($1)` on the same pool;
 * - DynamoDB (dynalite in a child process, the AWS SDK's client): `dynamoStore` against the bare
 *   `client.send` of the same commands, for a first claim (one conditional `PutItem`) and for a
 *   duplicate (the `PutItem` whose condition fails, then the consistent `GetItem`). dynalite's own
 *   CPU is most of either, so only ours against bare means anything here, not the rates.
 *
 * Servers are started here on 127.0.0.1 (redis-server with persistence off; a throw-away
 * PostgreSQL cluster with fsync off, as the tests run theirs), so figures compare the stores'
 * statements, not disks. Ours and bare alternate in short rounds, so machine noise hits both.
 */

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import pg from 'pg';
import postgres from 'postgres';
import { Redis } from 'ioredis';
import { startPostgresServer } from '../test/support/postgres-server.ts';
import { localConfig } from '../test/support/dynamodb.ts';
import { freePort, startRedisServer } from '../test/support/redis-server.ts';
import { skippedWithoutStores } from './http-stores.ts';
import { fixed, rateText, table, type BenchConfig, type SectionReport } from './report.ts';

const LOCK_MS = 60_000;
const WIDTHS = [1, 16, 128] as const;
const POOL_SIZE = 16;

interface Run {
  perSecond: number;
  p99Ms: number;
}

/** `width` workers, each claiming fresh keys back to back for `ms`: throughput and p99 latency. */
async function closedLoop(op: () => Promise<unknown>, width: number, ms: number): Promise<Run> {
  const latencies: number[] = [];
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await op();
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return { perSecond: latencies.length / elapsed, p99Ms: latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.99))]! };
}

/**
 * dynalite as a server of its own (a child process), so its CPU is not the bench's; its pid for the
 * capacity section, which reads that CPU time from /proc.
 */
export async function startDynaliteProcess(): Promise<{ endpoint: string; pid: number; close(): Promise<void> }> {
  const port = await freePort();
  const cli = createRequire(import.meta.url).resolve('dynalite/cli.js');
  const child = spawn(process.execPath, [cli, '--host', '127.0.0.1', '--port', String(port), '--createTableMs', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  // It prints one line once it listens.
  await once(child.stdout!, 'data');
  return {
    endpoint: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    async close() {
      child.kill();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

/** DynamoDB rows: ours against the same commands sent bare, first claims and duplicates. */
async function dynamoRows(config: BenchConfig, ms: number, rounds: number, key: () => string): Promise<string[][]> {
  const { dynamoStore } = config.pkg.dynamodb;
  const server = await startDynaliteProcess();
  const client = new DynamoDBClient({ ...localConfig(server.endpoint), maxAttempts: 1 });
  try {
    const TableName = `bench-claims-${process.pid}`;
    const store = dynamoStore({ client, table: TableName });
    await store.setup();
    const rows: string[][] = [];
    // The store's own claim command, written out: same item, same condition, same names.
    const put = (pk: string) => {
      const now = Date.now();
      const until = now + LOCK_MS;
      return new PutItemCommand({
        TableName,
        Item: { pk: { S: pk }, token: { S: '0123456789abcdef0123456789abcdef' }, status: { S: 'lock' }, until: { N: String(until) }, ttl: { N: String(Math.ceil((until + 1000) / 1000)) } },
        ConditionExpression: 'attribute_not_exists(#pk) OR #until <= :free',
        ExpressionAttributeNames: { '#pk': 'pk', '#until': 'until' },
        ExpressionAttributeValues: { ':free': { N: String(now - 1000) } },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      });
    };
    const held = key();
    await store.claim(held, 10 * 60_000);
    const bareDuplicate = async () => {
      try {
        await client.send(put(held));
      } catch (error) {
        if ((error as Error).name !== 'ConditionalCheckFailedException') throw error;
        await client.send(new GetItemCommand({ TableName, Key: { pk: { S: held } }, ConsistentRead: true }));
      }
    };
    for (const width of WIDTHS) {
      const first = await compare(() => store.claim(key(), LOCK_MS), () => client.send(put(key())), width, ms, rounds);
      rows.push(['DynamoDB (dynalite), first claim', String(width), rateText(first.ours.perSecond), fixed(first.ours.p99Ms), rateText(first.bare.perSecond), fixed(first.bare.p99Ms), fixed(first.ratio)]);
    }
    for (const width of WIDTHS) {
      const duplicate = await compare(() => store.claim(held, LOCK_MS), bareDuplicate, width, ms, rounds);
      rows.push(['DynamoDB (dynalite), duplicate', String(width), rateText(duplicate.ours.perSecond), fixed(duplicate.ours.p99Ms), rateText(duplicate.bare.perSecond), fixed(duplicate.bare.p99Ms), fixed(duplicate.ratio)]);
    }
    return rows;
  } finally {
    client.destroy();
    await server.close();
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
};

/** Ours and bare alternating, `rounds` times each; medians of each. */
async function compare(ours: () => Promise<unknown>, bare: () => Promise<unknown>, width: number, ms: number, rounds: number) {
  await closedLoop(ours, width, Math.min(200, ms));
  await closedLoop(bare, width, Math.min(200, ms));
  const o: Run[] = [];
  const b: Run[] = [];
  for (let i = 0; i < rounds; i++) {
    o.push(await closedLoop(ours, width, ms));
    b.push(await closedLoop(bare, width, ms));
  }
  return {
    ours: { perSecond: median(o.map((r) => r.perSecond)), p99Ms: median(o.map((r) => r.p99Ms)) },
    bare: { perSecond: median(b.map((r) => r.perSecond)), p99Ms: median(b.map((r) => r.p99Ms)) },
    ratio: median(o.map((r, i) => r.perSecond / b[i]!.perSecond)),
  };
}

export async function runStores(config: BenchConfig): Promise<SectionReport> {
  const skipped = skippedWithoutStores('stores', '9. Shared stores under concurrency', 'the stores section');
  if (skipped !== undefined) return skipped;
  const { redisStore } = config.pkg.redis;
  const { postgresStore } = config.pkg.postgres;
  const ms = config.quick ? 150 : 1000;
  const rounds = config.quick ? 1 : 3;
  const redisServer = await startRedisServer();
  const pgServer = process.env.DATABASE_URL ? undefined : await startPostgresServer();
  const url = process.env.DATABASE_URL ?? pgServer!.url;
  const redis = new Redis(redisServer.url, { lazyConnect: true });
  await redis.connect();
  const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE });
  const sql = postgres(url, { max: POOL_SIZE, onnotice: () => {} });
  const suffix = `${process.pid}`;
  try {
    let counter = 0;
    const key = () => `default:s:msg_${(counter++).toString(36).padStart(12, '0')}`;
    const rows: string[][] = [];

    const redisClaims = redisStore({ client: redis, prefix: 'bench-stores:' });
    for (const width of WIDTHS) {
      const r = await compare(() => redisClaims.claim(key(), LOCK_MS), () => redis.set(`bench-stores:bare:${key()}`, 'x', 'PX', LOCK_MS, 'NX'), width, ms, rounds);
      rows.push(['Redis (ioredis)', String(width), rateText(r.ours.perSecond), fixed(r.ours.p99Ms), rateText(r.bare.perSecond), fixed(r.bare.p99Ms), fixed(r.ratio)]);
    }

    for (const [name, client, exec] of [
      ['Postgres (pg)', pool, (text: string, values: unknown[]) => pool.query(text, values)],
      ['Postgres (postgres.js)', sql, (text: string, values: unknown[]) => sql.unsafe(text, values as never[])],
    ] as const) {
      const table_ = `bench_claims_${suffix}_${name.includes('pg)') ? 'pg' : 'js'}`;
      const bareTable = `${table_}_bare`;
      const store = postgresStore({ client: client as pg.Pool, table: table_ });
      await store.setup();
      await pool.query(`CREATE TABLE IF NOT EXISTS "${bareTable}" (key text PRIMARY KEY)`);
      const bareInsert = `INSERT INTO "${bareTable}" (key) VALUES ($1)`;
      try {
        for (const width of WIDTHS) {
          const r = await compare(() => store.claim(key(), LOCK_MS), () => exec(bareInsert, [key()]), width, ms, rounds);
          rows.push([name, String(width), rateText(r.ours.perSecond), fixed(r.ours.p99Ms), rateText(r.bare.perSecond), fixed(r.bare.p99Ms), fixed(r.ratio)]);
        }
      } finally {
        await pool.query(`DROP TABLE IF EXISTS "${table_}", "${bareTable}"`);
      }
    }

    rows.push(...(await dynamoRows(config, ms, rounds, key)));

    const body = [
      `Fresh keys, closed loops of 1, 16 and 128 concurrent claims (${ms} ms per round, medians of ${rounds} rounds alternating ours and bare). ` +
        `Postgres clients have ${POOL_SIZE} connections, so at 128 in flight requests queue in the pool. ` +
        '"Bare" is the least a write on the same database costs: `SET NX PX` for Redis, a one-column primary-key `INSERT` for Postgres, ' +
        'and for DynamoDB the same commands the store sends (a conditional `PutItem`; for a duplicate, its failure and a consistent `GetItem`) through the same client. ' +
        'Our Postgres claim is one statement that also reports why a key was not free, never waits for a row another transaction holds, and sweeps expired rows now and then.',
      '',
      table(['store', 'in flight', 'our claims/s', 'our p99 ms', 'bare/s', 'bare p99 ms', 'ours ÷ bare (throughput)'], rows),
    ].join('\n');
    return { id: 'stores', title: '9. Shared stores under concurrency', body, targets: [] };
  } finally {
    redis.disconnect();
    await pool.end();
    await sql.end({ timeout: 5 });
    await redisServer.close();
    await pgServer?.close();
  }
}

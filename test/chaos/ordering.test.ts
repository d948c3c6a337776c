/**
 * Out-of-order deliveries end to end, the proof that ordering holds across instances: 40
 * entities × 15 versions each, sent shuffled, with duplicates (about a third of the events twice, some at the same moment to the
 * other instance) and sender retries (a non-2xx answer is sent again, re-signed, to either
 * instance: after 409 ENTITY_BUSY or IN_PROGRESS, and after the handler failures the instances
 * make on purpose on the first attempt of some events), concurrently through two processes that
 * share one store: Redis, and again PostgreSQL. Versions are ISO 8601 times one microsecond apart,
 * so only their full fraction orders them.
 *
 * The handlers log what they apply, in the order they apply it, in the shared backend. For every
 * entity the test reads that log and asserts that no handler applied a version lower than (or
 * equal to) one already applied, and that the last state written is the highest version.
 */

import { fork, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { signWebhook } from '../../src/sign.ts';
import { freshSecret } from '../fuzz/support.ts';
import { sharedPostgresUrl } from '../support/postgres.ts';
import { sharedRedisUrl } from '../support/redis.ts';
import { seededRandom } from './rng.ts';

const ENTITIES = 40;
const VERSIONS = 15;
const DUPLICATE_RATE = 0.35;
const FAIL_FIRST_RATE = 0.1;
/** Deliveries in flight at once, across both instances. */
const CONCURRENCY = 24;
/** Every delivery gives up after this many attempts: a bound, never reached in a passing run. */
const MAX_ATTEMPTS = 400;
const RUN_BUDGET_MS = 120_000;

const seed = process.env.ORDERING_SEED === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.ORDERING_SEED);
const { secret } = freshSecret(32);
const instanceScript = new URL('./ordering-instance.ts', import.meta.url).pathname;
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    await exited;
  }
});

function start(backend: 'redis' | 'postgres', url: string, space: string): Promise<number> {
  const child = fork(instanceScript, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ORDERING_BACKEND: backend, ORDERING_URL: url, ORDERING_PORT: '0', ORDERING_SECRET: secret, ORDERING_SPACE: space },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    if (stderr.length < 4000) stderr += chunk.toString('utf8');
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the ${backend} instance did not start within 30 s\n${stderr}`)), 30_000);
    child.once('message', (message: { ready: number }) => {
      clearTimeout(timer);
      resolve(message.ready);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the ${backend} instance exited with ${code} before it was ready\n${stderr}`));
    });
  });
}

function post(port: number, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, path: '/webhooks', method: 'POST', headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

interface Delivery {
  id: string;
  body: string;
  /** The instance of the first attempt. */
  first: number;
}

/** The events, shuffled, with their duplicates; from the seed alone. */
function plan(random: () => number): Delivery[] {
  const deliveries: Delivery[] = [];
  for (let e = 0; e < ENTITIES; e++) {
    for (let v = 1; v <= VERSIONS; v++) {
      const id = `evt_${seed}_${e}_${v}`;
      // One microsecond apart: only the full fraction orders them.
      const timestamp = `2026-03-01T10:00:00.${String(v).padStart(6, '0')}Z`;
      const body = JSON.stringify({ type: 'subscription.updated', timestamp, data: { id: `sub_${e}`, v, failFirst: random() < FAIL_FIRST_RATE } });
      const first = Math.floor(random() * 2);
      deliveries.push({ id, body, first });
      if (random() < DUPLICATE_RATE) deliveries.push({ id, body, first: 1 - first });
    }
  }
  for (let i = deliveries.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [deliveries[i], deliveries[j]] = [deliveries[j]!, deliveries[i]!];
  }
  return deliveries;
}

interface Tally {
  processed: number;
  stale: number;
  duplicate: number;
  busy: number;
  inProgress: number;
  failed: number;
  attempts: number;
}

/** Sends every delivery until it is answered 2xx, `CONCURRENCY` at a time, retrying the rest. */
async function send(ports: number[], deliveries: Delivery[], random: () => number): Promise<Tally> {
  const tally: Tally = { processed: 0, stale: 0, duplicate: 0, busy: 0, inProgress: 0, failed: 0, attempts: 0 };
  const started = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < deliveries.length) {
      const delivery = deliveries[next++]!;
      for (let attempt = 0; ; attempt++) {
        if (attempt >= MAX_ATTEMPTS || Date.now() - started > RUN_BUDGET_MS) throw new Error(`delivery ${delivery.id} was never answered 2xx (${attempt} attempts)`);
        const port = ports[attempt === 0 ? delivery.first : Math.floor(random() * ports.length)]!;
        // Every attempt is signed anew, as a sender's retry is.
        const { headers } = await signWebhook({ secret, id: delivery.id, body: delivery.body });
        const answer = await post(port, headers as Record<string, string>, delivery.body);
        tally.attempts++;
        if (answer.status === 204) tally.processed++;
        else if (answer.status === 200 && answer.body === '{"stale":true}') tally.stale++;
        else if (answer.status === 200 && answer.body === '{"duplicate":true}') tally.duplicate++;
        else if (answer.status === 409) {
          const code = (JSON.parse(answer.body) as { error: string }).error;
          if (code === 'ENTITY_BUSY') tally.busy++;
          else if (code === 'IN_PROGRESS') tally.inProgress++;
          else throw new Error(`409 ${answer.body}`);
        } else if (answer.status === 500) tally.failed++;
        else throw new Error(`delivery ${delivery.id} answered ${answer.status} ${answer.body}`);
        if (answer.status >= 200 && answer.status < 300) break;
        // The sender's retry comes a little later; Retry-After (whole seconds) would only slow the test.
        await new Promise((resolve) => setTimeout(resolve, 2 + Math.floor(random() * 10)));
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return tally;
}

/** Asserts the log: per entity, strictly increasing versions, ending at the highest; the state agrees. */
function judge(log: { entity: string; version: number }[], state: Map<string, number>): void {
  const applied = new Map<string, number[]>();
  for (const { entity, version } of log) {
    const versions = applied.get(entity) ?? [];
    versions.push(version);
    applied.set(entity, versions);
  }
  expect(applied.size).toBe(ENTITIES);
  const backwards: string[] = [];
  for (const [entity, versions] of applied) {
    for (let i = 1; i < versions.length; i++) if (versions[i]! <= versions[i - 1]!) backwards.push(`${entity}: ${versions.join(',')}`);
    expect(versions.at(-1), entity).toBe(VERSIONS);
    expect(state.get(entity), entity).toBe(VERSIONS);
  }
  expect(backwards).toEqual([]);
}

function report(backend: string, tally: Tally, log: unknown[], ms: number): void {
  console.log(
    `[ordering] ${backend}, seed ${seed}: ${ENTITIES} entities × ${VERSIONS} versions, ${tally.attempts} attempts in ${(ms / 1000).toFixed(1)} s; ` +
      `${tally.processed} processed (${log.length} applied), ${tally.stale} stale, ${tally.duplicate} duplicates, ${tally.busy} ENTITY_BUSY, ` +
      `${tally.inProgress} IN_PROGRESS, ${tally.failed} failed on purpose (ORDERING_SEED=${seed} replays the plan)`,
  );
}

describe('ordering: two processes, one store, shuffled deliveries with duplicates and retries', () => {
  it.skipIf(sharedRedisUrl === null)(
    'through Redis: no entity ever goes back a version, and each ends at its highest',
    async () => {
      const space = `ordering-proof-${process.pid}-${seed}`;
      const ports = await Promise.all([start('redis', sharedRedisUrl!, space), start('redis', sharedRedisUrl!, space)]);
      const random = seededRandom(seed);
      const started = Date.now();
      const tally = await send(ports, plan(random), random);
      const ms = Date.now() - started;
      const admin = new Redis(sharedRedisUrl!);
      try {
        const log = (await admin.lrange(`${space}:log`, 0, -1)).map((line) => {
          const [entity, version] = line.split(' ');
          return { entity: entity!, version: Number(version) };
        });
        const state = new Map(Object.entries(await admin.hgetall(`${space}:state`)).map(([entity, version]) => [entity, Number(version)]));
        report('Redis', tally, log, ms);
        judge(log, state);
        expect(tally.processed).toBe(log.length);
        expect(tally.stale).toBeGreaterThan(0);
      } finally {
        admin.disconnect();
      }
    },
    RUN_BUDGET_MS + 40_000,
  );

  it.skipIf(sharedPostgresUrl === null)(
    'through PostgreSQL: no entity ever goes back a version, and each ends at its highest',
    async () => {
      const space = `ordering_proof_${process.pid}_${seed}`;
      const pool = new pg.Pool({ connectionString: sharedPostgresUrl!, max: 2 });
      try {
        await pool.query(`CREATE TABLE ${space}_log (seq bigserial PRIMARY KEY, entity text NOT NULL, version int NOT NULL)`);
        await pool.query(`CREATE TABLE ${space}_state (entity text PRIMARY KEY, version int NOT NULL)`);
        await pool.query(`CREATE TABLE ${space}_attempts (id text PRIMARY KEY)`);
        // One instance makes the store's table first, so the two do not race to create it.
        const first = await start('postgres', sharedPostgresUrl!, space);
        const ports = [first, await start('postgres', sharedPostgresUrl!, space)];
        const random = seededRandom(seed);
        const started = Date.now();
        const tally = await send(ports, plan(random), random);
        const ms = Date.now() - started;
        const log = (await pool.query<{ entity: string; version: number }>(`SELECT entity, version FROM ${space}_log ORDER BY seq`)).rows;
        const state = new Map((await pool.query<{ entity: string; version: number }>(`SELECT entity, version FROM ${space}_state`)).rows.map((row) => [row.entity, row.version]));
        report('PostgreSQL', tally, log, ms);
        judge(log, state);
        expect(tally.processed).toBe(log.length);
        expect(tally.stale).toBeGreaterThan(0);
      } finally {
        for (const table of ['log', 'state', 'attempts', 'claims']) await pool.query(`DROP TABLE IF EXISTS ${space}_${table}`);
        await pool.end();
      }
    },
    RUN_BUDGET_MS + 40_000,
  );
});

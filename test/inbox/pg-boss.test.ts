/**
 * The inbox on pg-boss 12 against a real PostgreSQL: the shared contract (conformance.ts), then
 * what only pg-boss does: UUID job ids, a second send of one delivery answered as a duplicate, the
 * queue's retry policy, and the transactional accept (the claim's completion and the job's INSERT
 * commit together, or neither). pg-boss 12 needs Node 22.12 or later.
 */

import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidJobId } from '../../src/inbox/job.ts';
import type { JobOutcomeEvent } from '../../src/inbox/types.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { pgBossInbox, type PgBossLike } from '../../src/inbox/pg-boss.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { sharedPostgresUrl } from '../support/postgres.ts';
import { acceptedJob, describeInbox } from './conformance.ts';
import { describeOrderedInbox } from './ordering.ts';
import { pgBossRuns } from '../support/node-version.ts';

const supported = pgBossRuns();
if (!supported) console.warn(`NOTICE: pg-boss 12 needs Node 22.12 or later (this is ${process.versions.node}): the pg-boss inbox tests are SKIPPED`);
const available = sharedPostgresUrl !== null && supported;
const schema = `inbox_${randomBytes(4).toString('hex')}`;

// Loaded only where it can run: pg-boss 12 refuses older Node lines at import.
let boss: PgBossLike & { stop(options?: object): Promise<void>; getDb(): { executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } };

beforeAll(async () => {
  if (!available) return;
  const { PgBoss } = await import('pg-boss');
  const instance = new PgBoss({ connectionString: sharedPostgresUrl!, schema, supervise: true, schedule: false });
  instance.on('error', () => {});
  boss = (await instance.start()) as unknown as typeof boss;
});

afterAll(async () => {
  if (!available) return;
  await boss.stop({ graceful: false, timeout: 2000 });
  const pool = new pg.Pool({ connectionString: sharedPostgresUrl! });
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

const freshQueue = () => `inbox-${randomBytes(6).toString('hex')}`;

describeInbox('pg-boss', {
  available,
  async make({ maxAttempts }) {
    const queue = freshQueue();
    const inbox = pgBossInbox({ boss, queue, maxAttempts, backoff: { delayMs: 0 }, pollingIntervalSeconds: 0.5 });
    return { inbox, cleanup: async () => {} };
  },
});

// The receiver and the workers share PostgreSQL: the store's ordering statements judge the jobs.
let orderingPool: pg.Pool | undefined;
const orderingTables: string[] = [];
afterAll(async () => {
  if (orderingPool === undefined) return;
  for (const table of orderingTables) await orderingPool.query(`DROP TABLE IF EXISTS ${table}, ${table}_unsigned`);
  await orderingPool.end();
});

describeOrderedInbox('pg-boss', {
  available,
  async make({ maxAttempts }) {
    const inbox = pgBossInbox({ boss, queue: freshQueue(), maxAttempts, backoff: { delayMs: 0 }, pollingIntervalSeconds: 0.5 });
    return { inbox, cleanup: async () => {} };
  },
  async store() {
    orderingPool ??= new pg.Pool({ connectionString: sharedPostgresUrl! });
    const table = `ordered_${randomBytes(4).toString('hex')}`;
    orderingTables.push(table);
    const store = postgresStore({ client: orderingPool, table });
    await store.setup();
    return store;
  },
});

/** Runs `dying-worker.ts` until it kills itself once its claim is completed; resolves with the signal. Killed after `ms` whatever happens. */
function dyingWorker(env: Record<string, string>, ms = 60_000): Promise<NodeJS.Signals | null> {
  const child = fork(join(import.meta.dirname, 'dying-worker.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env, DYING_WHEN: 'completed' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (_code, signal) => {
      clearTimeout(timer);
      resolve(signal);
    });
  });
}

describe.skipIf(!available)('pgBossInbox', () => {
  it(
    'a job pg-boss dead-lettered although its handler had succeeded (its worker died after completing the claim, on the last attempt) is no dead letter: not listed, not retried',
    { timeout: 180_000 },
    async () => {
      const queue = freshQueue();
      const dir = mkdtempSync(join(tmpdir(), 'dying-'));
      const logFile = join(dir, 'handler.log');
      const table = `dying_${randomBytes(4).toString('hex')}`;
      const pool = new pg.Pool({ connectionString: sharedPostgresUrl!, max: 3 });
      const store = postgresStore({ client: pool, table });
      await store.setup();
      // A supervisor that looks every second, so the dead worker's job expires soon.
      const { PgBoss } = await import('pg-boss');
      const supervisor = new PgBoss({ connectionString: sharedPostgresUrl!, schema, supervise: true, superviseIntervalSeconds: 1, monitorIntervalSeconds: 1, schedule: false });
      supervisor.on('error', () => {});
      await supervisor.start();
      const settings = { maxAttempts: 1, pollingIntervalSeconds: 0.5, queueOptions: { expireInSeconds: 2 } };
      const inbox = pgBossInbox({ boss, queue, ...settings, idempotency: { store } });
      try {
        const job = await acceptedJob('{"charge":1}', { id: `msg_dying_${randomBytes(4).toString('hex')}` });
        await inbox.enqueue(job);
        const env = { DYING_ENGINE: 'pg-boss', DYING_URL: sharedPostgresUrl!, DYING_QUEUE: queue, DYING_SCHEMA: schema, DYING_TABLE: table, DYING_LOG: logFile };
        expect(await dyingWorker(env)).toBe('SIGKILL');
        expect(readFileSync(logFile, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { event: string }).event)).toEqual(['start', 'done']);
        // pg-boss expires the job (its worker never said it was done) and, out of retries, dead-letters it.
        const blind = pgBossInbox({ boss, queue, ...settings });
        await expect.poll(async () => (await blind.deadLetters()).map((letter) => letter.webhookId), { timeout: 60_000, interval: 500 }).toEqual([job.id]);

        expect(await inbox.deadLetters()).toEqual([]);
        expect(await inbox.retry(job.id)).toBe(false);
        // Still where it was: nothing was sent back to run.
        expect((await blind.deadLetters()).map((letter) => letter.webhookId)).toEqual([job.id]);
        expect(readFileSync(logFile, 'utf8').trim().split('\n')).toHaveLength(2);
      } finally {
        await inbox.close();
        await supervisor.stop({ graceful: false, timeout: 2000 });
        await pool.query(`DROP TABLE IF EXISTS ${table}, ${table}_unsigned`);
        await pool.end();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('sends a job under a UUID from the SHA-256 of its accepting key; a second send of the delivery is a duplicate', async () => {
    const queue = freshQueue();
    const inbox = pgBossInbox({ boss, queue, maxAttempts: 4, backoff: { delayMs: 1500 } });
    const job = await acceptedJob('{}', { id: 'msg_uuid', namespace: 'billing' });
    expect(await inbox.enqueue(job)).toBe('enqueued');
    expect(await inbox.enqueue(job)).toBe('duplicate');
    const id = await uuidJobId('billing:s:msg_uuid');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const [stored] = (await boss.findJobs(queue, { id })) as { data: unknown; retryLimit: number; retryDelay: number; retryBackoff: boolean; deadLetter: string }[];
    expect(stored).toMatchObject({ data: job, retryLimit: 3, retryDelay: 2, retryBackoff: true, deadLetter: `${queue}.dead` });
  });

  it('a deferral pg-boss must count (the worker closing on the last attempt) is reported as the dead letter it becomes', async () => {
    const queue = freshQueue();
    const inbox = pgBossInbox({ boss, queue, maxAttempts: 1, pollingIntervalSeconds: 0.5 });
    const job = await acceptedJob('{}', { id: `msg_close_${randomBytes(4).toString('hex')}` });
    const events: JobOutcomeEvent[] = [];
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const worker = await inbox.work(
      (_webhook, context) =>
        new Promise<void>((resolve) => {
          started();
          context.signal.addEventListener('abort', () => resolve());
        }),
      { idempotency: { store: memoryStore() }, onOutcome: (event) => events.push(event), logger: { warn() {}, error() {} } },
    );
    await inbox.enqueue(job);
    await running;
    await worker.close({ timeoutMs: 200 });
    // Not 'deferred': pg-boss spends the job's only attempt on it and dead-letters it.
    expect(events.map((event) => event.outcome)).toEqual(['dead_lettered']);
    expect((events[0]!.error as Error).name).toBe('Deferred');
    await expect.poll(async () => (await inbox.deadLetters()).map((dead) => [dead.webhookId, dead.error.name]), { timeout: 15_000, interval: 200 }).toEqual([[job.id, 'Deferred']]);
  });

  it("queueOptions.notify wakes an idle worker when a job is sent, long before its next poll", async () => {
    const { PgBoss } = await import('pg-boss');
    const listening = new PgBoss({ connectionString: sharedPostgresUrl!, schema, supervise: false, schedule: false, useListenNotify: true });
    listening.on('error', () => {});
    await listening.start();
    try {
      const queue = freshQueue();
      // An hour between polls: only the NOTIFY can bring this job to the worker within the test's time.
      const inbox = pgBossInbox({ boss: listening as unknown as PgBossLike, queue, pollingIntervalSeconds: 3600, queueOptions: { notify: true } });
      let ran!: (id: string) => void;
      const processed = new Promise<string>((resolve) => (ran = resolve));
      const worker = await inbox.work((webhook) => ran(webhook.id), { idempotency: { store: memoryStore() } });
      try {
        expect(await listening.getQueue(queue)).toMatchObject({ notify: true });
        const job = await acceptedJob('{}', { id: `msg_notify_${randomBytes(4).toString('hex')}` });
        // Each of the worker's loops polled once when it started, found nothing, and now waits out its hour unless woken.
        const loops = () => listening.getWipData().filter((loop) => loop.name === queue);
        await expect.poll(() => loops().length > 0 && loops().every((loop) => loop.lastFetchedOn !== null), { timeout: 30_000, interval: 50 }).toBe(true);
        expect(await inbox.enqueue(job)).toBe('enqueued');
        expect(await processed).toBe(job.id);
      } finally {
        await worker.close({ timeoutMs: 2000 });
      }
    } finally {
      await listening.stop({ graceful: false, timeout: 2000 });
    }
  }, 60_000);

  it('refuses bad options with a TypeError or RangeError naming the option', () => {
    expect(() => pgBossInbox(undefined as never)).toThrow(new TypeError("pgBossInbox needs an options object: pgBossInbox({ boss, queue: 'webhooks' })"));
    expect(() => pgBossInbox({ boss: {} as never })).toThrow(new TypeError('pgBossInbox boss must be a started pg-boss 12 instance: await new PgBoss(url).start()'));
    expect(() => pgBossInbox({ boss, queue: 'a b' })).toThrow(TypeError);
    expect(() => pgBossInbox({ boss, pollingIntervalSeconds: 0.1 })).toThrow(RangeError);
    expect(() => pgBossInbox({ boss, queueOptions: { notify: 'false' as never } })).toThrow(new TypeError('pgBossInbox queueOptions.notify must be true or false (default false)'));
    expect(() => pgBossInbox({ boss, maxAttempts: 1.5 })).toThrow(new RangeError('pgBossInbox maxAttempts must be a whole number from 1 to 1000 (default 12)'));
  });
});

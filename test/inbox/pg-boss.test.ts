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
import { memoryStore } from '../../src/stores/memory.ts';
import { pgBossInbox, type PgBossLike } from '../../src/inbox/pg-boss.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { sharedPostgresUrl } from '../support/postgres.ts';
import { acceptedJob, describeInbox } from './conformance.ts';
import { describeOrderedInbox } from './ordering.ts';

const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
const supported = major > 22 || (major === 22 && minor >= 12);
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

  it('drains a backlog job after job, not one job per polling interval', async () => {
    const queue = freshQueue();
    // An hour between polls: only a fetch right after each job can reach the second and third in the test's time.
    const inbox = pgBossInbox({ boss, queue, pollingIntervalSeconds: 3600 });
    const jobs = await Promise.all([1, 2, 3].map((n) => acceptedJob('{}', { id: `msg_backlog_${n}_${randomBytes(3).toString('hex')}` })));
    for (const job of jobs) expect(await inbox.enqueue(job)).toBe('enqueued');
    const ran: string[] = [];
    let drained!: () => void;
    const all = new Promise<void>((resolve) => (drained = resolve));
    const worker = await inbox.work(
      (webhook) => {
        ran.push(webhook.id);
        if (ran.length === jobs.length) drained();
      },
      { idempotency: { store: memoryStore() } },
    );
    try {
      await all;
      expect([...ran].sort()).toEqual(jobs.map((job) => job.id).sort());
    } finally {
      await worker.close({ timeoutMs: 2000 });
    }
  }, 60_000);

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

  it('after a job, wakes only the loop that held it, not the idle ones; a throwing getWipData fails no processed job', async () => {
    const { PgBoss } = await import('pg-boss');
    // The app's own PgBoss, whose wip data may fail.
    class Watched extends PgBoss {
      notified: string[] = [];
      throwing = false;
      override getWipData(options?: { includeInternal?: boolean }) {
        if (this.throwing) throw new Error('wip data unavailable');
        return super.getWipData(options);
      }
      override notifyWorker(workerId: string) {
        this.notified.push(workerId);
        super.notifyWorker(workerId);
      }
    }
    const watched = new Watched({ connectionString: sharedPostgresUrl!, schema, supervise: false, schedule: false });
    watched.on('error', () => {});
    await watched.start();
    try {
      const queue = freshQueue();
      const inbox = pgBossInbox({ boss: watched as unknown as PgBossLike, queue, maxAttempts: 1, pollingIntervalSeconds: 3600 });
      const outcomes: JobOutcomeEvent[] = [];
      let seen!: () => void;
      let processed = new Promise<void>((resolve) => (seen = resolve));
      const worker = await inbox.work(() => {}, {
        concurrency: 3,
        idempotency: { store: memoryStore() },
        onOutcome: (event) => {
          outcomes.push(event);
          seen();
        },
      });
      try {
        const loops = () => watched.getWipData().filter((loop) => loop.name === queue);
        // Each of the three loops polled once, found nothing, and waits out its hour.
        await expect.poll(() => loops().length === 3 && loops().every((loop) => loop.lastFetchedOn !== null), { timeout: 30_000, interval: 50 }).toBe(true);
        const first = await acceptedJob('{}', { id: `msg_wake_${randomBytes(4).toString('hex')}` });
        await inbox.enqueue(first);
        // Sent after the loops slept: only the loop woken after a job can fetch it.
        const idle = loops().map((loop) => loop.id);
        watched.notifyWorker(idle[0]!);
        watched.notified = [];
        await processed;
        // The loop that ran the job, and only it, was woken after it.
        await expect.poll(() => watched.notified.length, { timeout: 30_000, interval: 50 }).toBe(1);
        expect(idle).toContain(watched.notified[0]);
        const stateOf = async (id: string) => {
          const [job] = (await watched.findJobs(queue, { id: await uuidJobId(`default:s:${id}`) })) as { state: string }[];
          return job?.state;
        };
        await expect.poll(() => stateOf(first.id), { timeout: 30_000, interval: 100 }).toBe('completed');

        watched.throwing = true;
        processed = new Promise<void>((resolve) => (seen = resolve));
        const second = await acceptedJob('{}', { id: `msg_wip_${randomBytes(4).toString('hex')}` });
        await inbox.enqueue(second);
        watched.notifyWorker(idle[1]!);
        await processed;
        // pg-boss settles the job as the handler did: completed, not failed by the wake-up after it.
        await expect.poll(() => stateOf(second.id), { timeout: 30_000, interval: 100 }).not.toMatch(/^(created|active)$/);
        expect(await stateOf(second.id)).toBe('completed');
        expect(outcomes.map((event) => event.outcome)).toEqual(['processed', 'processed']);
      } finally {
        await worker.close({ timeoutMs: 2000 });
      }
    } finally {
      await watched.stop({ graceful: false, timeout: 2000 });
    }
  }, 60_000);

  describe('transactional: true with the Postgres store on a pool', () => {
    let pool: pg.Pool;
    const table = `claims_${randomBytes(4).toString('hex')}`;
    beforeAll(async () => {
      pool = new pg.Pool({ connectionString: sharedPostgresUrl! });
    });
    afterAll(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${table}`);
      await pool.end();
    });

    /** A transactional inbox on a queue of its own, a job, and the accepting claim on it in the Postgres store. */
    async function claimedJob(label: string) {
      const store = postgresStore({ client: pool, table });
      await store.setup();
      const queue = freshQueue();
      const inbox = pgBossInbox({ boss, queue, transactional: true });
      const job = await acceptedJob('{}', { id: `msg_${label}_${randomBytes(3).toString('hex')}` });
      const key = `default:s:${job.id}`;
      const claim = await store.claim(key, 30_000);
      if (claim.status !== 'acquired') throw new Error('not acquired');
      return { store, queue, inbox, job, key, token: claim.token, jobId: await uuidJobId(key) };
    }

    it('commits the claim\'s completion and the job\'s insert together', async () => {
      const { store, queue, inbox, job, key, token, jobId } = await claimedJob('tx');
      expect(await inbox.enqueue(job, { claim: { store, key, token, ttlMs: 60_000, lockMs: 30_000 } })).toBe('enqueued');
      expect((await store.claim(key, 30_000)).status).toBe('completed');
      expect(await boss.findJobs(queue, { id: jobId })).toHaveLength(1);
    });

    it('rolls both back when the claim was lost before the commit: no job, claim not completed', async () => {
      const { store, queue, inbox, job, key, jobId } = await claimedJob('lost');
      // Another holder's token: the completion inside the transaction finds no row of its own.
      const handle = { store, key, token: 'f'.repeat(32), ttlMs: 60_000, lockMs: 30_000 };
      await expect(inbox.enqueue(job, { claim: handle })).rejects.toMatchObject({ name: 'ClaimLostError' });
      expect(await boss.findJobs(queue, { id: jobId })).toEqual([]);
      expect((await store.claim(key, 30_000)).status).toBe('processing');
    });
  });

  it('refuses bad options with a TypeError or RangeError naming the option', () => {
    expect(() => pgBossInbox(undefined as never)).toThrow(new TypeError("pgBossInbox needs an options object: pgBossInbox({ boss, queue: 'webhooks' })"));
    expect(() => pgBossInbox({ boss: {} as never })).toThrow(new TypeError('pgBossInbox boss must be a started pg-boss 12 instance: await new PgBoss(url).start()'));
    expect(() => pgBossInbox({ boss, queue: 'a b' })).toThrow(TypeError);
    expect(() => pgBossInbox({ boss, pollingIntervalSeconds: 0.1 })).toThrow(RangeError);
    expect(() => pgBossInbox({ boss, queueOptions: { notify: 'false' as never } })).toThrow(new TypeError('pgBossInbox queueOptions.notify must be true or false (default false)'));
    expect(() => pgBossInbox({ boss, maxAttempts: 1.5 })).toThrow(new RangeError('pgBossInbox maxAttempts must be a whole number from 1 to 1000 (default 12)'));
  });
});

/**
 * The inbox on BullMQ against a real redis-server: the shared contract (conformance.ts), then what
 * only BullMQ does: job ids, its own attempts and failed set, the workers' connection, and the
 * start-up durability warning.
 */

import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { hexJobId } from '../../src/inbox/job.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';
import { acceptedJob, describeInbox, Outcomes } from './conformance.ts';
import { describeOrderedInbox } from './ordering.ts';
import { redisStore } from '../../src/stores/redis.ts';

const available = sharedRedisUrl !== null;
const connections: { disconnect(): void }[] = [];

afterAll(() => {
  for (const connection of connections) connection.disconnect();
});

async function freshQueue(): Promise<Queue> {
  const connection = await connectIORedis(sharedRedisUrl!);
  connections.push(connection);
  return new Queue(`inbox-${randomBytes(6).toString('hex')}`, { connection, prefix: 'test-inbox' });
}

/** A fresh inbox on a queue of its own, retrying without delay; cleanup removes the queue. */
async function makeInbox({ maxAttempts }: { maxAttempts: number }) {
  const queue = await freshQueue();
  const inbox = bullmqInbox({ queue, maxAttempts, backoff: { delayMs: 0 }, logger: { warn: () => {}, error: () => {} } });
  return {
    inbox,
    cleanup: async () => {
      await queue.obliterate({ force: true });
      await queue.close();
    },
  };
}

describeInbox('bullmq', { available, make: makeInbox });

describeOrderedInbox('bullmq', {
  available,
  make: makeInbox,
  // The receiver and the workers share Redis: the ordering scripts judge the jobs.
  async store() {
    const client = await connectIORedis(sharedRedisUrl!);
    connections.push(client);
    return redisStore({ client, prefix: `test-inbox-order-${randomBytes(4).toString('hex')}` });
  },
});

const quiet = { warn: () => {}, error: () => {} };

/**
 * Runs `dying-worker.ts` until it kills itself (`when`: in the handler, or once its claim is
 * completed); resolves with the signal it died of. Bounded: killed after `ms` whatever happens.
 */
function dyingWorker(when: 'handler' | 'completed', env: Record<string, string>, ms = 60_000): Promise<NodeJS.Signals | null> {
  const child = fork(join(import.meta.dirname, 'dying-worker.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env, DYING_WHEN: when },
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

describe.skipIf(!available)('bullmqInbox', () => {
  it(
    'a job BullMQ failed although its handler had succeeded (its worker died after completing the claim, on the second stall) is no dead letter: not listed, not retried, never run again',
    { timeout: 180_000 },
    async () => {
      const queue = await freshQueue();
      const dir = mkdtempSync(join(tmpdir(), 'dying-'));
      const logFile = join(dir, 'handler.log');
      const storePrefix = `test-dying-${randomBytes(4).toString('hex')}:`;
      const client = await connectIORedis(sharedRedisUrl!);
      connections.push(client);
      const store = redisStore({ client, prefix: storePrefix });
      const workerOptions = { lockDuration: 2000, stalledInterval: 1000, maxStalledCount: 1 };
      const inbox = bullmqInbox({ queue, maxAttempts: 3, backoff: { delayMs: 0 }, logger: quiet, workerOptions });
      const runsHere: string[] = [];
      let worker: { close(): Promise<void> } | undefined;
      try {
        const job = await acceptedJob('{"charge":1}', { id: `msg_dying_${randomBytes(4).toString('hex')}` });
        await inbox.enqueue(job);
        const jobId = await hexJobId(`default:s:${job.id}`);
        const env = { DYING_ENGINE: 'bullmq', DYING_URL: sharedRedisUrl!, DYING_QUEUE: queue.name, DYING_BULL_PREFIX: 'test-inbox', DYING_PREFIX: storePrefix, DYING_LOG: logFile };
        // First death: in the handler. The next worker's stall check puts the job back (one stall).
        expect(await dyingWorker('handler', env)).toBe('SIGKILL');
        // Second: after the handler succeeded and its claim was completed, before BullMQ's acknowledgement.
        expect(await dyingWorker('completed', env)).toBe('SIGKILL');
        const runs = () => readFileSync(logFile, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { event: string }).event);
        expect(runs()).toEqual(['start', 'start', 'done']);
        // A live worker's stall check finds the second stall: BullMQ fails the job (maxStalledCount 1)
        // without running the processor.
        worker = await inbox.work((webhook) => void runsHere.push(webhook.id), { idempotency: { store }, logger: quiet });
        await expect.poll(async () => (await queue.getJob(jobId))?.failedReason, { timeout: 60_000, interval: 200 }).toBe('job stalled more than allowable limit');

        // The completion is kept as long as the dead letter: 14 days, not the default day.
        expect(await client.pttl(`${storePrefix}default:w:s:${job.id}`)).toBeGreaterThan(13 * 86_400_000);
        expect(await inbox.deadLetters()).toEqual([]);
        expect(await inbox.retry(job.id)).toBe(false);
        // An inbox in another process (an operator's script) sees it through the store it is given.
        const admin = bullmqInbox({ queue, logger: quiet, idempotency: { store } });
        expect(await admin.deadLetters()).toEqual([]);
        expect(await admin.retry(job.id)).toBe(false);
        // Without the store it cannot know: listed, and a retry of it is skipped by the worker.
        const blind = bullmqInbox({ queue, logger: quiet });
        expect((await blind.deadLetters()).map((letter) => letter.webhookId)).toEqual([job.id]);
        expect(await queue.getJobState(jobId)).toBe('failed');
        expect(runsHere).toEqual([]);
        expect(runs()).toEqual(['start', 'start', 'done']);
      } finally {
        await worker?.close();
        await inbox.close();
        await queue.obliterate({ force: true });
        await queue.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('two retries of one dead letter at once: one answers true, the other false, and the handler runs once more', async () => {
    const queue = await freshQueue();
    const inbox = bullmqInbox({ queue, maxAttempts: 1, backoff: { delayMs: 0 }, logger: quiet });
    const outcomes = new Outcomes();
    const runs: string[] = [];
    let healed = false;
    const worker = await inbox.work(
      (webhook) => {
        runs.push(webhook.id);
        if (!healed) throw new PermanentError('not yet');
      },
      { onOutcome: outcomes.record, logger: quiet },
    );
    try {
      const job = await acceptedJob('{}', { id: `msg_race_${randomBytes(4).toString('hex')}` });
      await inbox.enqueue(job);
      await outcomes.until(() => outcomes.of(job.id).includes('dead_lettered'));
      await expect.poll(async () => (await inbox.deadLetters()).length, { timeout: 10_000 }).toBe(1);
      healed = true;
      const answers = await Promise.all([inbox.retry(job.id), inbox.retry(job.id)]);
      expect([...answers].sort()).toEqual([false, true]);
      await outcomes.until(() => outcomes.of(job.id).includes('processed'));
      // Processed and removed: nothing of it is left to run again.
      const jobId = await hexJobId(`default:s:${job.id}`);
      await expect.poll(async () => (await queue.getJob(jobId)) === undefined, { timeout: 10_000 }).toBe(true);
      expect(runs).toEqual([job.id, job.id]);
      expect(outcomes.of(job.id)).toEqual(['dead_lettered', 'processed']);
    } finally {
      await worker.close();
      await inbox.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('adds a job under the hex SHA-256 of its accepting key, with the inbox\'s attempts and backoff', async () => {
    const queue = await freshQueue();
    try {
      const inbox = bullmqInbox({ queue, maxAttempts: 4, backoff: { delayMs: 1500 }, logger: { warn: () => {}, error: () => {} } });
      const job = await acceptedJob('{}', { id: 'msg_hash', namespace: 'billing' });
      expect(await inbox.enqueue(job)).toBe('enqueued');
      const id = await hexJobId('billing:s:msg_hash');
      expect(id).toMatch(/^[0-9a-f]{64}$/);
      const stored = await queue.getJob(id);
      expect(stored?.data).toEqual(job);
      expect(stored?.opts.attempts).toBe(4);
      expect(stored?.opts.backoff).toEqual({ type: 'exponential', delay: 1500, jitter: 0.5 });
      expect(await inbox.backlog()).toBe(1);
      // A second add of the id leaves the one job there.
      await inbox.enqueue(job);
      expect(await queue.getJobCounts('wait')).toEqual({ wait: 1 });
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('warns once at start when Redis has AOF off (the test server runs without persistence)', async () => {
    const queue = await freshQueue();
    const warnings: unknown[][] = [];
    try {
      const inbox = bullmqInbox({ queue, logger: { warn: (...args: unknown[]) => warnings.push(args), error: () => {} } });
      await inbox.enqueue(await acceptedJob('{}'));
      await inbox.enqueue(await acceptedJob('{}'));
      await expect.poll(() => warnings.length).toBe(1);
      expect(warnings[0]![0]).toEqual({ engine: 'bullmq', queue: queue.name });
      expect(String(warnings[0]![1])).toContain('appendonly no');
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('refuses bad options with a TypeError or RangeError naming the option', () => {
    expect(() => bullmqInbox(undefined as never)).toThrow(new TypeError('bullmqInbox needs an options object: bullmqInbox({ queue })'));
    expect(() => bullmqInbox({ queue: {} as never })).toThrow(new TypeError("bullmqInbox queue must be a BullMQ Queue: new Queue('webhooks', { connection })"));
    const queue = { add() {}, getJob() {}, name: 'q' } as unknown as Queue;
    expect(() => bullmqInbox({ queue, maxAttempts: 0 })).toThrow(new RangeError('bullmqInbox maxAttempts must be a whole number from 1 to 1000 (default 12)'));
    expect(() => bullmqInbox({ queue, backoff: { delayMs: -1 } })).toThrow(RangeError);
    expect(() => bullmqInbox({ queue, timeoutMs: 0 })).toThrow(new RangeError('bullmqInbox timeoutMs must be a whole number from 1 to 600000 (default 2000)'));
  });
});

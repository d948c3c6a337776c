/**
 * `inbox.close()` on real engines: after `await worker.close()`, `await inbox.close()` and the app
 * closing what it passed in, nothing the package made keeps the event loop alive. Each case runs a
 * small app (lifecycle-child.ts) in a child process on the shared Redis or PostgreSQL and waits
 * for it to exit by itself; the timeout is generous (two loaded cores), and on it the child is
 * killed and the case fails. Also: `work()` after `close()` rejects, and Cloudflare's inbox,
 * which opens nothing, closes at once.
 */

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { cloudflareQueueInbox } from '../../src/inbox/cloudflare/index.ts';
import type { DurableObjectNamespaceLike } from '../../src/stores/durable-object/index.ts';
import { sharedPostgresUrl } from '../support/postgres.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';
import { pgBossRuns } from '../support/node-version.ts';

const child = join(import.meta.dirname, 'lifecycle-child.ts');
const EXIT_BUDGET_MS = 90_000;

/** Runs the child app; resolves with its exit code, signal and output once it exits by itself. */
function runApp(env: Record<string, string>): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string; killed: boolean }> {
  const app = spawn(process.execPath, ['--import', 'tsx', child], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  app.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  app.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    app.kill('SIGKILL');
  }, EXIT_BUDGET_MS);
  return new Promise((resolve, reject) => {
    app.once('error', reject);
    app.once('exit', (code, signal) => {
      clearTimeout(timer);
      // The pipes may still hold the last lines.
      app.stdout.once('close', () => resolve({ code, signal, output, killed }));
      if (app.stdout.closed) resolve({ code, signal, output, killed });
    });
  });
}

const queueOf = (label: string) => `life-${label}-${randomBytes(4).toString('hex')}`;

describe.skipIf(sharedRedisUrl === null)('inbox.close() on BullMQ: the process ends by itself', () => {
  const cases = {
    'bullmq-client': "the queue on the app's ioredis client: worker.close(), inbox.close(), then the app's queue and client",
    'bullmq-options': "the queue on connection options: worker.close(), inbox.close(), then the app's queue and client",
    'bullmq-inbox-only': "inbox.close() closes the worker the app left running; then the app's queue and client",
  };
  for (const [kind, title] of Object.entries(cases)) {
    it(title, { timeout: EXIT_BUDGET_MS + 30_000 }, async () => {
      const queue = queueOf(kind);
      const result = await runApp({ LIFECYCLE_KIND: kind, LIFECYCLE_URL: sharedRedisUrl!, LIFECYCLE_QUEUE: queue });
      try {
        expect(result).toMatchObject({ killed: false, code: 0, signal: null });
        expect(result.output).toBe('closed\n');
      } finally {
        const connection = await connectIORedis(sharedRedisUrl!);
        const leftover = new Queue(queue, { connection });
        await leftover.obliterate({ force: true });
        await leftover.close();
        connection.disconnect();
      }
    });
  }

  it('work() after close() rejects; close() twice resolves', async () => {
    const connection = await connectIORedis(sharedRedisUrl!);
    const queue = new Queue(queueOf('closed'), { connection });
    try {
      const inbox = bullmqInbox({ queue, logger: { warn() {}, error() {} } });
      await inbox.close();
      await inbox.close();
      await expect(inbox.work(() => {})).rejects.toThrow('bullmqInbox: the inbox is closed, so it starts no worker');
    } finally {
      await queue.close();
      connection.disconnect();
    }
  });
});

const pgBossAvailable = sharedPostgresUrl !== null && pgBossRuns();

describe.skipIf(!pgBossAvailable)('inbox.close() on pg-boss: the process ends by itself', () => {
  const schema = `life_${randomBytes(4).toString('hex')}`;
  const table = `life_claims_${randomBytes(4).toString('hex')}`;
  afterAll(async () => {
    const pool = new pg.Pool({ connectionString: sharedPostgresUrl! });
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.query(`DROP TABLE IF EXISTS ${table}, ${table}_unsigned`);
    await pool.end();
  });

  it("worker.close(), inbox.close(), then the app's PgBoss and pool", { timeout: EXIT_BUDGET_MS + 30_000 }, async () => {
    const result = await runApp({ LIFECYCLE_KIND: 'pg-boss', LIFECYCLE_URL: sharedPostgresUrl!, LIFECYCLE_QUEUE: queueOf('pgboss'), LIFECYCLE_SCHEMA: schema, LIFECYCLE_TABLE: table });
    expect(result).toMatchObject({ killed: false, code: 0, signal: null });
    expect(result.output).toBe('closed\n');
  });
});

describe('inbox.close() on Cloudflare Queues', () => {
  it('opens nothing, so closes at once, as often as asked', async () => {
    const claims = { idFromName: () => ({}), get: () => ({ fetch: () => Promise.reject(new Error('not reached')) }) } as unknown as DurableObjectNamespaceLike;
    const inbox = cloudflareQueueInbox({ queue: { send: async () => {} }, claims });
    await inbox.close();
    await inbox.close();
  });
});

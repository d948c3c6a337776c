/**
 * The Postgres store's transactions when the server goes away under them. `pg` emits `'error'` on
 * a connection whose session ends (`pg_terminate_backend`, a restart, a failover); a checked-out
 * connection has no listener of the pool's, so an unheard event ends the whole process. The app
 * runs in a child process (test/support/connection-loss-child.ts, the real receiver), where such
 * an event would kill the child, not the test runner.
 *
 * - 50 transactions have their session ended from a second connection, between statements, while
 *   a statement runs, or just before COMMIT, while other deliveries run beside them: the app lives
 *   on, each cut delivery is answered 503 `STORE_UNAVAILABLE`, the sender's retry is processed, and
 *   the effects table ends with exactly one row per message. The store released each broken
 *   connection as broken, and none of them is handed out again.
 * - The same across server restarts (a private server, restarted while a transaction is open).
 * - The pg-boss inbox in transactional mode: 10 accepts have their session ended before the job's
 *   INSERT; each answers 503 `INBOX_UNAVAILABLE`, the retry enqueues, one job per message.
 */

import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import type { Cut, LossReply, LossRequest, LossStats } from '../support/connection-loss-protocol.ts';
import { connectPostgres, sharedPostgresUrl, uniqueTable, type PostgresClient, type PostgresKind } from '../support/postgres.ts';
import { findPostgresBin, startPostgresServer } from '../support/postgres-server.ts';
import { pgBossRuns } from '../support/node-version.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
let bundle: string;

beforeAll(async () => {
  // One bundle, started as a plain `node` (the packages stay external, from node_modules).
  const dir = join(root, '.tmp');
  mkdirSync(dir, { recursive: true });
  bundle = join(dir, `connection-loss-child-${randomBytes(4).toString('hex')}.mjs`);
  await build({ entryPoints: [join(root, 'test/support/connection-loss-child.ts')], bundle: true, platform: 'node', format: 'esm', packages: 'external', outfile: bundle, logLevel: 'silent' });
});

afterAll(() => {
  if (bundle) rmSync(bundle, { force: true });
});

type Answer = { outcome: string } | { error: Extract<LossReply, { error: unknown }>['error'] };

interface LossRun {
  /** Every answer each message got, in order. */
  answers: Answer[][];
  stats: LossStats;
  rows: number;
  distinct: number;
}

/** No answer from the app for this long is a failure (a stall), never a hang. */
const STALL_MS = 30_000;

/**
 * Delivers `messages` messages to a fresh child app, `window` at a time; the first delivery of
 * message `seq` carries `cuts.get(seq)`, retries carry none. `restart` runs when a `hold`
 * transaction waits. Resolves once every message was processed, with the pool's state read by
 * the child; rejects when the child dies or stalls.
 */
async function lossRun(
  kind: PostgresKind,
  url: string,
  admin: PostgresClient,
  messages: number,
  window: number,
  cuts: Map<number, Cut>,
  { restart, accept = false }: { restart?: () => Promise<void>; accept?: boolean } = {},
): Promise<LossRun> {
  /** What ends a message: its handler's effect committed, or (accepting) its job enqueued. */
  const done = accept ? 'enqueued' : 'processed';
  const schema = uniqueTable('loss_boss');
  const table = uniqueTable(`loss_${kind}`);
  const effects = uniqueTable(`loss_${kind}_effects`);
  await admin.query(`CREATE TABLE "${effects}" (id text NOT NULL)`);
  const { postgresStore } = await import('../../src/stores/postgres.ts');
  await postgresStore({ client: admin.client as never, table }).setup();
  const secret = generateSecret();
  const ids = Array.from({ length: messages }, (_, i) => `msg_loss_${String(i).padStart(3, '0')}`);
  const answers: Answer[][] = ids.map(() => []);
  const child = fork(bundle, [], {
    cwd: root,
    execArgv: [],
    stdio: ["ignore", "ignore", process.env.LOSS_DEBUG ? "inherit" : "pipe", "ipc"],
    env: {
      ...process.env,
      LOSS_CLIENT: kind,
      LOSS_DATABASE_URL: url,
      LOSS_TABLE: table,
      LOSS_EFFECTS: effects,
      LOSS_SECRET: secret,
      ...(accept ? { LOSS_ENGINE: 'pg-boss', LOSS_SCHEMA: schema } : {}),
    },
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  try {
    const stats = await new Promise<LossStats>((resolveRun, rejectRun) => {
      const queue = ids.map((_, i) => i);
      const inFlight = new Set<number>();
      const processed = new Set<number>();
      const timers = new Set<NodeJS.Timeout>();
      let watchdog: NodeJS.Timeout | undefined;
      const fail = (error: Error) => {
        clearTimeout(watchdog);
        for (const timer of timers) clearTimeout(timer);
        child.kill('SIGKILL');
        rejectRun(error);
      };
      const feed = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => fail(new Error(`${kind}: the app stalled (no answer for ${STALL_MS} ms), ${messages - processed.size} messages unprocessed`)), STALL_MS);
      };
      const deliver = (seq: number) => {
        inFlight.add(seq);
        const body = JSON.stringify({ type: 'order.paid', seq });
        const cut = answers[seq]!.length === 0 ? cuts.get(seq) : undefined;
        void signWebhook({ secret, body, id: ids[seq]! }).then((signed) => {
          const request: LossRequest = { seq, headers: signed.headers, body, ...(cut === undefined ? {} : { cut }) };
          if (child.connected) child.send(request, () => {});
        });
      };
      const pump = () => {
        while (inFlight.size < window && queue.length > 0) deliver(queue.shift()!);
      };
      child.once('exit', (code, signal) => {
        clearTimeout(watchdog);
        rejectRun(new Error(`${kind}: the app died (exit ${code ?? signal}) with ${messages - processed.size} messages unprocessed:\n${stderr}`));
      });
      child.on('message', (reply: LossReply) => {
        feed();
        if ('ready' in reply) return pump();
        if ('stats' in reply) {
          clearTimeout(watchdog);
          return resolveRun(reply.stats);
        }
        if ('held' in reply) {
          const resume = () => child.connected && child.send({ resume: reply.held }, () => {});
          if (restart === undefined) return resume();
          return void restart().then(resume, (error: unknown) => fail(error instanceof Error ? error : new Error(String(error))));
        }
        inFlight.delete(reply.seq);
        answers[reply.seq]!.push('outcome' in reply ? { outcome: reply.outcome } : { error: reply.error });
        if (answers[reply.seq]!.length > 50) return fail(new Error(`${kind}: message ${reply.seq} was answered ${JSON.stringify(answers[reply.seq])}`));
        if ('outcome' in reply && reply.outcome === done) processed.add(reply.seq);
        else if ('outcome' in reply && reply.outcome === 'in_progress') {
          // A claim the app could not release (the server was still down) holds until its lock
          // ends: the sender comes back a little later, as senders do.
          const timer = setTimeout(() => {
            timers.delete(timer);
            queue.push(reply.seq);
            pump();
          }, 100);
          timers.add(timer);
        } else queue.push(reply.seq);
        if (processed.size === messages) return void child.send({ stats: true }, () => {});
        pump();
      });
      feed();
    });
    const [counts] = await admin.query(`SELECT count(*)::int AS rows, count(DISTINCT id)::int AS distinct FROM "${effects}"`);
    // Accepting, the effect is the job: one per message in the queue.
    if (accept) return { answers, stats, rows: stats.jobs?.rows ?? 0, distinct: stats.jobs?.distinct ?? 0 };
    return { answers, stats, rows: counts!.rows as number, distinct: counts!.distinct as number };
  } finally {
    child.removeAllListeners('exit');
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolveExit) => child.once('exit', resolveExit));
      child.kill('SIGTERM');
      await exited;
    }
    await admin.query(`DROP TABLE IF EXISTS "${effects}", "${table}", "${table}_unsigned"`);
    if (accept) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

/** A cut delivery's answer: the store's outage, answered as one. */
const OUTAGE = { error: expect.objectContaining({ name: 'WebhookError', code: 'STORE_UNAVAILABLE', status: 503 }) };

/**
 * A cut delivery: 503, then (while a claim the app could not release still holds) `in_progress`,
 * then processed. Any other: processed at once. With `outagesAfter`, any answer before the last
 * may also be a 503 (postgres.js, see the test).
 */
function expectAnswers(answers: Answer[], cut: Cut | undefined, label: string, { outagesAfter = false, done = 'processed', outage = OUTAGE } = {}): void {
  const between = (answer: Answer) => (outagesAfter && 'error' in answer ? outage : { outcome: 'in_progress' });
  if (cut === undefined) return expect(answers, label).toEqual([...answers.slice(0, -1).map(between), { outcome: done }].slice(outagesAfter ? 0 : -1));
  expect(answers, label).toEqual([outage, ...answers.slice(1, -1).map(between), { outcome: done }]);
}

/** How many answers were 503s beyond the one each cut delivery gets. */
const extraOutages = (run: LossRun, cuts: Map<number, Cut>) =>
  run.answers.reduce((sum, answers, seq) => sum + answers.filter((answer) => 'error' in answer).length - (cuts.has(seq) ? 1 : 0), 0);

describe('Postgres store: a transaction whose connection is lost', () => {
  const CUTS = 50;
  const MESSAGES = 80;

  it.skipIf(sharedPostgresUrl === null).each([
    ['pg', ['idle', 'statement', 'commit']],
    ['postgres.js', ['idle', 'statement']],
  ] as const)(
    '%s: 50 sessions ended mid-transaction, the app lives on, one effect per message',
    async (kind, modes) => {
      const admin = connectPostgres('pg', sharedPostgresUrl!, 2);
      try {
        // 50 of the 80 messages have their first delivery's session ended, spread over the run.
        const cuts = new Map<number, Cut>();
        for (let seq = 0; cuts.size < CUTS; seq++) if (seq % 8 < 5) cuts.set(seq, modes[cuts.size % modes.length]!);
        const run = await lossRun(kind, sharedPostgresUrl!, admin, MESSAGES, 4, cuts);
        expect({ rows: run.rows, distinct: run.distinct }).toEqual({ rows: MESSAGES, distinct: MESSAGES });
        // postgres.js (3.4) may answer the next statement on a connection whose session ended
        // with that session's error, or not at all: the store's release of the cut claim, or
        // another delivery's claim, then fails too, and the sender retries once more.
        const postgresJs = kind === 'postgres.js';
        for (let seq = 0; seq < MESSAGES; seq++) expectAnswers(run.answers[seq]!, cuts.get(seq), `message ${seq} (${cuts.get(seq) ?? 'no cut'})`, { outagesAfter: postgresJs });
        if (postgresJs) console.log(`postgres.js, ${CUTS} sessions ended: ${extraOutages(run, cuts)} more 503s, ${run.answers.flat().filter((a) => 'outcome' in a && a.outcome === 'in_progress').length} in_progress answers`);
        // pg: the store released each cut claim at once (the server stayed up), so the first retry ran.
        else expect(run.answers.filter((answers) => answers.length > 2)).toEqual([]);
        // Every connection the pool still holds answers, and none was released broken before.
        expect(run.stats.healthy).toBe(run.stats.checked);
        expect(run.stats.reused).toBe(0);
        if (kind === 'pg') expect(run.stats.brokenReleases).toBe(CUTS);
      } finally {
        await admin.close();
      }
    },
    120_000,
  );
});

describe('Postgres store: a transaction open across a server restart', () => {
  const RESTARTS = 3;
  const MESSAGES = 6;

  it.skipIf(findPostgresBin() === undefined).each(['pg', 'postgres.js'] as const)(
    '%s: 3 restarts with a transaction open, the app lives on, one effect per message',
    async (kind) => {
      // A server of its own: restarting the shared one would cut every other test file off.
      const server = await startPostgresServer();
      const admin = connectPostgres('pg', server.url, 2);
      try {
        const cuts = new Map<number, Cut>(Array.from({ length: RESTARTS }, (_, i) => [1 + 2 * i, 'hold'] as const));
        let restarts = 0;
        const restart = async () => {
          await server.restart();
          restarts++;
        };
        const run = await lossRun(kind, server.url, admin, MESSAGES, 1, cuts, { restart });
        expect(restarts).toBe(RESTARTS);
        expect({ rows: run.rows, distinct: run.distinct }).toEqual({ rows: MESSAGES, distinct: MESSAGES });
        for (let seq = 0; seq < MESSAGES; seq++) expectAnswers(run.answers[seq]!, cuts.get(seq), `message ${seq}`);
        expect(run.stats.healthy).toBe(run.stats.checked);
        expect(run.stats.reused).toBe(0);
        // The held transactions' connections at least (a claim may also meet a connection the restart ended).
        if (kind === 'pg') expect(run.stats.brokenReleases).toBeGreaterThanOrEqual(RESTARTS);
      } finally {
        await admin.close();
        await server.close();
      }
    },
    180_000,
  );
});

describe('the pg-boss inbox, transactional: an accept whose connection is lost', () => {
  const CUTS = 10;
  const MESSAGES = 20;

  // pg-boss 12 needs Node 22.12 or later; the app runs on this process's Node.
  const supported = pgBossRuns();

  it.skipIf(sharedPostgresUrl === null || !supported)(
    'pg: 10 sessions ended before the job\'s INSERT, the app lives on, one job per message',
    async () => {
      const admin = connectPostgres('pg', sharedPostgresUrl!, 2);
      try {
        const cuts = new Map<number, Cut>(Array.from({ length: CUTS }, (_, i) => [2 * i, 'idle'] as const));
        const run = await lossRun('pg', sharedPostgresUrl!, admin, MESSAGES, 1, cuts, { accept: true });
        expect({ rows: run.rows, distinct: run.distinct }).toEqual({ rows: MESSAGES, distinct: MESSAGES });
        // The accept in flight: its transaction rolled back, 503 INBOX_UNAVAILABLE, the claim
        // released; the retry enqueues.
        const outage = { error: expect.objectContaining({ name: 'WebhookError', code: 'INBOX_UNAVAILABLE', status: 503 }) };
        for (let seq = 0; seq < MESSAGES; seq++) expectAnswers(run.answers[seq]!, cuts.get(seq), `message ${seq}`, { done: 'enqueued', outage });
        expect(run.answers.filter((answers) => answers.length > 2)).toEqual([]);
        expect(run.stats.healthy).toBe(run.stats.checked);
        expect(run.stats.reused).toBe(0);
        expect(run.stats.brokenReleases).toBe(CUTS);
      } finally {
        await admin.close();
      }
    },
    120_000,
  );
});

/**
 * Chaos for the inbox, on BullMQ, pg-boss and SQS: 500 deliveries accepted into the
 * engine's own server (a private redis-server with AOF on, `appendfsync always`; a private
 * PostgreSQL; fauxqs in process, keeping its state in a folder, with the workers' claims on a
 * private redis-server) and processed by two worker processes, under the failures that happen:
 * - a tenth of the ids fail their first two attempts; a fiftieth (poison) always throw
 *   `PermanentError`;
 * - a worker is SIGKILLed while a handler runs, twice (each time started again);
 * - the engine's server is restarted once, mid-run (the accepting side retries while it is down, as
 *   a sender does after a 503).
 *
 * Required, from the handlers' own logs: no id whose handler succeeded twice (a second success is
 * excused only when the first was logged by a worker killed before it could complete its claim),
 * none lost (every id processed or dead-lettered), the dead letters exactly the poison ids, and a
 * `retry` of one of them (now healed) processes it. Prints the counts and the times.
 */

import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { InboxGate } from '../../src/receiver/accept.ts';
import type { PgBossLike } from '../../src/inbox/pg-boss.ts';
import type { Inbox } from '../../src/inbox/types.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { acceptedJob } from '../inbox/conformance.ts';
import { findPostgresBin, startPostgresServer } from '../support/postgres-server.ts';
import { canStartRedis, startRedisServer } from '../support/redis.ts';
import { sqsClient } from '../support/sqs.ts';
import { startSqsChild } from '../support/sqs-child.ts';
import { chaosBullmqInbox, chaosPgBossInbox, chaosSqsInbox, kindOf } from './inbox-kinds.ts';
import { fauxqsRuns, pgBossRuns } from '../support/node-version.ts';

const MESSAGES = 500;
const RUN_BUDGET_MS = 120_000;
const workerScript = join(import.meta.dirname, 'inbox-worker.ts');

interface LogLine {
  event: 'start' | 'done' | 'settled' | 'fail';
  id: string;
  attempt: number;
  pid: number;
  at: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The engine under test: its own server, the accepting side's inbox, and a restart. */
interface Engine {
  url: string;
  inbox: Inbox;
  /** What the workers need besides the URL: the queue (as they name it), the claims' store. */
  workerEnv?: Record<string, string>;
  /** Restarts the engine's server mid-run, its state kept. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

async function bullmqEngine(queueName: string): Promise<Engine> {
  const redis = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  const connection = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  connection.on('error', () => {});
  const queue = new Queue(queueName, { connection });
  queue.on('error', () => {});
  return {
    url: redis.url,
    inbox: chaosBullmqInbox(queue),
    restart: async () => {
      await redis.stop('SIGTERM');
      await sleep(800);
      await redis.start();
    },
    close: async () => {
      await queue.close().catch(() => {});
      connection.disconnect();
      await redis.close();
    },
  };
}

async function pgBossEngine(queueName: string): Promise<Engine> {
  const server = await startPostgresServer();
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: server.url, supervise: false, schedule: false, max: 4 });
  boss.on('error', () => {});
  await boss.start();
  const inbox = chaosPgBossInbox(boss as unknown as PgBossLike, queueName);
  await inbox.backlog(); // Creates the queues before the workers start.
  // And the workers' claims table (two workers creating it at once could collide).
  const pool = new pg.Pool({ connectionString: server.url, max: 1 });
  await postgresStore({ client: pool }).setup();
  await pool.end();
  return {
    url: server.url,
    inbox,
    restart: () => server.restart(),
    close: async () => {
      await boss.stop({ graceful: false, timeout: 2000 }).catch(() => {});
      await server.close();
    },
  };
}

/**
 * fauxqs in a child process, so that this busy process (500 accepts) does not slow the queue down,
 * its state in a folder of its own, so that the restart (a new child on the same port and folder)
 * finds the queues and the messages where the stopped one left them.
 */
async function sqsEngine(): Promise<Engine> {
  const dataDir = mkdtempSync(join(tmpdir(), 'inbox-chaos-sqs-'));
  let server = await startSqsChild(0, { dataDir });
  const port = server.port;
  const created = await new Promise<{ queueUrl: string; queueArn: string }>((resolve) => {
    const names: { queueUrl: string; queueArn: string }[] = [];
    const onMessage = (message: { created?: { queueUrl: string; queueArn: string } }) => {
      if (message.created === undefined) return;
      names.push(message.created);
      if (names.length === 1) server.child.send({ create: { name: 'chaos', attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: names[0]!.queueArn, maxReceiveCount: '8' }) } } });
      else {
        server.child.off('message', onMessage);
        resolve(message.created);
      }
    };
    server.child.on('message', onMessage);
    server.child.send({ create: { name: 'chaos-dead', attributes: {} } });
  });
  const redis = await startRedisServer();
  const client = sqsClient({ port });
  return {
    url: `http://127.0.0.1:${port}`,
    inbox: chaosSqsInbox(client, created.queueUrl),
    workerEnv: { CHAOS_QUEUE: created.queueUrl, CHAOS_STORE_URL: redis.url },
    restart: async () => {
      await server.stop();
      server = await startSqsChild(port, { dataDir });
    },
    close: async () => {
      client.destroy();
      await server.stop();
      await redis.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const ENGINES = [
  { name: 'bullmq', available: () => canStartRedis('the inbox chaos test'), make: bullmqEngine },
  // pg-boss 12 needs Node 22.12 or later. Its run takes about a minute: a killed worker's jobs wait
  // for their expiry (3 s here) and pg-boss's supervisor before they are retried.
  { name: 'pg-boss', available: () => findPostgresBin() !== undefined && pgBossRuns(), make: pgBossEngine },
  // fauxqs needs Node 22.5 or later; the workers' claims live on a private redis-server.
  { name: 'sqs', available: () => canStartRedis('the inbox chaos test') && fauxqsRuns(), make: sqsEngine },
] as const;

for (const { name: engineName, available, make } of ENGINES) {
  describe.skipIf(!available())(`inbox chaos on ${engineName}`, () => {
    let engine: Engine | undefined;
    let dir: string | undefined;
    const workers = new Set<ChildProcess>();

    afterAll(async () => {
      for (const worker of workers) worker.kill('SIGKILL');
      await engine?.close();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    it('processes every id once or dead-letters it, through two worker kills and a server restart', { timeout: RUN_BUDGET_MS + 180_000 }, async () => {
      const started = Date.now();
      const queueName = 'chaos';
      engine = await make(queueName);
      const { inbox } = engine;
      dir = mkdtempSync(join(tmpdir(), 'inbox-chaos-'));
      const healed = join(dir, 'healed');
      const kills: { pid: number; at: number }[] = [];
      let starts = 0;
      let spawned = 0;
      const onStart = new Set<() => void>();

      const spawnWorker = async (): Promise<ChildProcess> => {
        const child = fork(workerScript, [], {
          execArgv: ['--import', 'tsx'],
          env: { ...process.env, CHAOS_ENGINE: engineName, CHAOS_URL: engine!.url, CHAOS_QUEUE: queueName, CHAOS_LOG: join(dir!, `worker-${spawned++}.log`), CHAOS_HEALED: healed, ...engine!.workerEnv },
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        workers.add(child);
        child.once('exit', () => workers.delete(child));
        await new Promise<void>((resolve, reject) => {
          child.on('message', (message: { ready?: boolean; running?: string }) => {
            if (message.ready) resolve();
            if (message.running !== undefined) {
              starts++;
              for (const wake of [...onStart]) wake();
            }
          });
          child.once('exit', (code) => reject(new Error(`a worker exited before it was ready (${code})`)));
        });
        return child;
      };
      /**
       * Resolves at the first handler start once `count` have started; rejects, naming the count,
       * when the run's budget ends first (a schedule that waits for starts that never come fails
       * with what it waited for, not at the test's timeout).
       */
      const startsReach = (count: number) =>
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => {
            onStart.delete(check);
            reject(new Error(`waited for ${count} handler starts, and ${starts} came within the budget`));
          }, Math.max(0, RUN_BUDGET_MS - (Date.now() - started)));
          const check = () => {
            if (starts >= count) {
              clearTimeout(timer);
              onStart.delete(check);
              resolve();
            }
          };
          onStart.add(check);
          check();
        });
      const killOneMidJob = async (count: number) => {
        await startsReach(count);
        const [victim] = [...workers];
        if (victim === undefined) throw new Error('no worker to kill');
        kills.push({ pid: victim.pid!, at: Date.now() });
        const exited = new Promise((resolve) => victim.once('exit', resolve));
        victim.kill('SIGKILL');
        await exited;
        await spawnWorker();
      };

      await spawnWorker();
      await spawnWorker();
      const stage = (what: string) => process.env.CHAOS_TRACE === '1' && console.log(`[${Date.now() - started} ms] ${what} (starts ${starts})`);
      stage('workers ready');

      // The accepting side: the receiver's guard around the engine, retrying while it is down.
      const gate = new InboxGate(inbox);
      const ids = Array.from({ length: MESSAGES }, (_, n) => `msg_chaos_${n}`);
      let refused = 0;
      const accept = async (id: string) => {
        const job = await acceptedJob(`{"n":"${id}"}`, { id });
        for (let attempt = 1; attempt <= 300; attempt++) {
          try {
            await gate.enqueue(job, undefined);
            return;
          } catch {
            refused++;
            await sleep(100);
          }
        }
        throw new Error(`${id} was never accepted`);
      };

      /** Accepts `batch`, its deliveries spread over `ms`. */
      const acceptSpread = (batch: readonly string[], ms: number) =>
        Promise.all(
          batch.map(async (id, n) => {
            await sleep((n / batch.length) * ms);
            await accept(id);
          }),
        );

      // The deliveries come in three batches, about three seconds in all, and each chaos event
      // waits only for handler starts that the work accepted after the event before it
      // guarantees: the kills and the restart land mid-run however fast the workers drain the
      // queue. (Waiting for "60 more starts" after the restart hung on a loaded machine, where a
      // respawn took long enough for the queue to drain.)
      const [first, second, third] = [ids.slice(0, 200), ids.slice(200, 350), ids.slice(350)];
      const firstAccepted = acceptSpread(first, 1200);
      await killOneMidJob(60);
      stage('first kill done');
      await firstAccepted;
      // The accepting side goes on while the engine's server is down, retrying as a sender does.
      const secondAccepted = acceptSpread(second, 900);
      stage('restarting');
      const restartAt = Date.now();
      await engine.restart();
      const restartMs = Date.now() - restartAt;
      stage('restarted');
      const mark = starts;
      const thirdAccepted = acceptSpread(third, 900);
      // The third batch's 150 ids are accepted after `mark`, so at least 150 starts follow it.
      await killOneMidJob(mark + 60);
      stage('second kill done');
      await Promise.all([secondAccepted, thirdAccepted]);
      stage('all accepted');

      const poison = ids.filter((id) => kindOf(id) === 'poison');
      const readLogs = (): LogLine[] =>
        [...Array(spawned).keys()].flatMap((i) => {
          const file = join(dir!, `worker-${i}.log`);
          return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as LogLine) : [];
        });
      const doneIds = () => new Set(readLogs().filter((line) => line.event === 'done').map((line) => line.id));
      let deadIds = new Set<string>();
      for (;;) {
        const done = doneIds();
        deadIds = new Set((await inbox.deadLetters().catch(() => [])).map((letter) => letter.webhookId));
        if (ids.every((id) => done.has(id) || deadIds.has(id))) break;
        if (Date.now() - started > RUN_BUDGET_MS) {
          const lost = ids.filter((id) => !done.has(id) && !deadIds.has(id));
          throw new Error(`${lost.length} ids neither processed nor dead-lettered within the budget: ${lost.slice(0, 10).join(', ')}`);
        }
        await sleep(250);
      }
      const settledMs = Date.now() - started;

      const lines = readLogs();
      const successes = new Map<string, LogLine[]>();
      for (const line of lines.filter((l) => l.event === 'done')) successes.set(line.id, [...(successes.get(line.id) ?? []), line]);
      const excused: string[] = [];
      const doubled: string[] = [];
      for (const [id, runs] of successes) {
        if (runs.length < 2) continue;
        // Excused only when the first success's worker was killed after its handler succeeded and
        // before the claim's completion landed (it never logged `settled` for the id): the one
        // window the store's claim cannot close without a transaction (the Postgres store's
        // transactional mode closes it). However long that window lasted on a loaded machine.
        const first = runs.sort((a, b) => a.at - b.at)[0]!;
        const settled = lines.some((line) => line.event === 'settled' && line.id === id && line.pid === first.pid);
        if (!settled && kills.some((kill) => kill.pid === first.pid && kill.at >= first.at)) excused.push(id);
        else doubled.push(id);
      }
      expect(doubled).toEqual([]);
      expect([...deadIds].sort()).toEqual([...poison].sort());

      // A retry of a healed poison id processes it.
      const revived = poison[0]!;
      writeFileSync(healed, `${revived}\n`);
      expect(await inbox.retry(revived)).toBe(true);
      for (let round = 0; !doneIds().has(revived); round++) {
        if (round > 300) throw new Error(`${revived} was retried but not processed`);
        await sleep(100);
      }

      const flaky = ids.filter((id) => kindOf(id) === 'flaky');
      console.log(
        `inbox chaos (${engineName}): ${MESSAGES} ids, ${successes.size} processed, ${deadIds.size} dead-lettered (${poison.length} poison), ` +
          `${flaky.length} flaky, ${lines.filter((l) => l.event === 'start').length} handler starts, ${kills.length} worker kills, ` +
          `server restarted in ${restartMs} ms, ${refused} refused accepts meanwhile, ${excused.length} excused second runs, 0 doubled, 0 lost; ` +
          `settled in ${settledMs} ms, ${Date.now() - started} ms with the retry`,
      );
    });
  });
}

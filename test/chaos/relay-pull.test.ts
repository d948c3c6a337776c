/**
 * Chaos for the relay's pull: 1 000 events pulled through a trigger of the relay emulator into a
 * BullMQ inbox by a puller child process (`trigger-puller.ts`) that is SIGKILLed at random points
 * (seeded, printed; a bounded number of kills), each time started again from the cursor it saved.
 * A worker in this process runs the handler. Required: every event's handler ran exactly once
 * (a kill lands between an accept and the cursor's save: the next puller pulls that batch again,
 * and the claims answer it), none lost, and the API key in no output. Prints the counts and times.
 */

import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import type { InboxWorker } from '../../src/inbox/types.ts';
import { redisStore } from '../../src/stores/redis.ts';
import { relayEmulator, type RelayEmulator } from '../../src/testing/index.ts';
import { KEY } from '../relay/support.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';
import { SECRET } from '../testing/support.ts';
import { seededRandom } from './rng.ts';

const EVENTS = 1_000;
const KILLS = 5;
const RUN_BUDGET_MS = 180_000;
const pullerScript = join(import.meta.dirname, 'trigger-puller.ts');
const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);

describe.skipIf(sharedRedisUrl === null)('relay pull chaos', () => {
  const children = new Set<ChildProcess>();
  const closers: (() => Promise<void>)[] = [];

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    for (const close of closers.reverse()) await close().catch(() => {});
  });

  it(`pulls ${EVENTS} events into a BullMQ inbox through ${KILLS} puller kills, each processed exactly once`, { timeout: RUN_BUDGET_MS + 60_000 }, async () => {
    const started = Date.now();
    const random = seededRandom(seed);
    const emulator: RelayEmulator = await relayEmulator({ apiKeys: [{ key: KEY }] });
    closers.push(() => emulator.close());
    // Some captures share a sender's id: they must run once between them, not once each.
    const expected = new Set<string>();
    for (let n = 0; n < EVENTS; n++) {
      // The last two of every hundred: two captures of one sender event.
      const shared = n % 100 >= 98 ? `msg_shared_${Math.floor(n / 100)}` : undefined;
      const event = emulator.addEvent({ body: JSON.stringify({ n }), ...(shared === undefined ? {} : { dedupKey: shared, dedupStrategy: 'sw_webhook_id' as const }) });
      expected.add(shared ?? event.id);
    }
    expect(expected.size).toBe(EVENTS - EVENTS / 100);
    const triggerId = emulator.addTrigger();

    const client = await connectIORedis(sharedRedisUrl!, { maxRetriesPerRequest: null });
    closers.push(async () => client.disconnect());
    const queueName = `pull-chaos-${randomBytes(4).toString('hex')}`;
    const prefix = `test-pull-chaos-${randomBytes(4).toString('hex')}:`;
    const queue = new Queue(queueName, { connection: client, prefix: 'test-pull-chaos' });
    closers.push(async () => {
      await queue.obliterate({ force: true });
      await queue.close();
    });
    const inbox = bullmqInbox({ queue, backoff: { delayMs: 0 }, logger: { warn: () => {}, error: () => {} } });
    const runs = new Map<string, number>();
    let wake: (() => void) | undefined;
    const worker: InboxWorker = await inbox.work(
      (webhook) => {
        runs.set(webhook.id, (runs.get(webhook.id) ?? 0) + 1);
        wake?.();
      },
      { idempotency: { store: redisStore({ client, prefix }) }, concurrency: 4, logger: { warn: () => {}, error: () => {} } },
    );
    closers.push(() => worker.close());

    let output = '';
    let spawned = 0;
    const spawnPuller = async (): Promise<{ child: ChildProcess; accepted: () => number }> => {
      spawned++;
      let accepted = 0;
      const child = fork(pullerScript, [], {
        execArgv: ['--import', 'tsx'],
        env: { ...process.env, RELAY_URL: emulator.url, RELAY_API_KEY: KEY, PULL_REDIS_URL: sharedRedisUrl!, PULL_PREFIX: prefix, PULL_QUEUE: queueName, PULL_TRIGGER: triggerId, PULL_SECRET: SECRET },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      });
      children.add(child);
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      child.once('exit', () => children.delete(child));
      await new Promise<void>((resolve, reject) => {
        child.on('message', (message: { ready?: boolean; accepted?: number }) => {
          if (message.ready) resolve();
          if (message.accepted !== undefined) {
            accepted = message.accepted;
            wake?.();
          }
        });
        child.once('exit', (code) => reject(new Error(`a puller exited before it was ready (${code}): ${output.slice(-500)}`)));
      });
      return { child, accepted: () => accepted };
    };
    /** Resolves once `check` holds, re-checked on each accept and each handler run; fails past the budget. */
    const until = (check: () => boolean, what: string) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${what}: not within the budget (seed ${seed})`)), Math.max(1, RUN_BUDGET_MS - (Date.now() - started)));
        const test = () => {
          if (!check()) return;
          clearTimeout(timer);
          wake = undefined;
          resolve();
        };
        wake = test;
        test();
      });

    const killPoints: number[] = [];
    for (let kill = 0; kill < KILLS; kill++) {
      const puller = await spawnPuller();
      // Somewhere in its first few batches: usually mid-batch, between an accept and the cursor's save.
      const at = 20 + Math.floor(random() * 130);
      killPoints.push(at);
      await until(() => puller.accepted() >= at || runs.size === expected.size, `puller ${spawned} reaching ${at} accepts`);
      const exited = new Promise((resolve) => puller.child.once('exit', resolve));
      puller.child.kill('SIGKILL');
      await exited;
    }
    const last = await spawnPuller();
    await until(() => runs.size === expected.size, 'every event processed');
    // Drained: nothing left in the queue that could run a handler a second time.
    for (;;) {
      const counts = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized');
      if (Object.values(counts).every((count) => count === 0)) break;
      if (Date.now() - started > RUN_BUDGET_MS) throw new Error(`the queue never drained (seed ${seed})`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    last.child.kill('SIGTERM');
    await new Promise((resolve) => (children.has(last.child) ? last.child.once('exit', resolve) : resolve(undefined)));

    const twice = [...runs].filter(([, count]) => count !== 1);
    expect(twice).toEqual([]);
    expect(new Set(runs.keys())).toEqual(expected);
    expect(output).not.toContain(KEY);
    expect(output).not.toContain(KEY.slice(4));
    const waits = emulator.requests.filter((request) => request.path.endsWith('/wait')).length;
    console.log(
      `relay pull chaos (seed ${seed}): ${EVENTS} events (${expected.size} distinct after dedupKey), ${runs.size} processed once each, 0 twice, 0 lost; ` +
        `${KILLS} puller kills after ${killPoints.join(', ')} accepts, ${spawned} pullers, ${waits} waits; ${Date.now() - started} ms`,
    );
  });
});

/**
 * The inbox on BullMQ against a real redis-server: the shared contract (conformance.ts), then what
 * only BullMQ does: job ids, its own attempts and failed set, the workers' connection, and the
 * start-up durability warning.
 */

import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { hexJobId } from '../../src/inbox/job.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';
import { acceptedJob, describeInbox } from './conformance.ts';
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

describe.skipIf(!available)('bullmqInbox', () => {
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

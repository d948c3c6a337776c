/**
 * The accepting side through an idempotency store outage with `onStoreError: 'process'`, on BullMQ
 * and pg-boss against their real servers. The receiver's store is a Redis store on a private
 * redis-server that the tests stop (and restart); the workers' store is a Redis store on the shared
 * server, which stays up, so only the accept runs through the outage. A delivery accepted without
 * a claim is filed under the namespace its claim would have used (the tenant's `t.<tenant>`, or
 * the fixed one), so its job id is the one the claim would have given it: two tenants' deliveries
 * of one id stay two jobs, and the sender's retry after the outage finds the job of the first.
 */

import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { pgBossInbox, type PgBossLike } from '../../src/inbox/pg-boss.ts';
import type { Inbox, InboxJob } from '../../src/inbox/types.ts';
import { tenantKeys } from '../../src/keys.ts';
import { createReceiver } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { redisStore, type RedisStore } from '../../src/stores/redis.ts';
import { sharedPostgresUrl } from '../support/postgres.ts';
import { canStartRedis, connectIORedis, sharedRedisUrl, startRedisServer, uniquePrefix, type RedisServer } from '../support/redis.ts';
import { errorLog } from '../receiver/support.ts';
import { Outcomes } from './conformance.ts';
import { pgBossRuns } from '../support/node-version.ts';

const silent = { warn: () => {}, error: () => {} };
const closers: (() => Promise<void> | void)[] = [];
let labels = 0;
const freshId = (label: string) => `msg_${label}_${randomBytes(4).toString('hex')}_${labels++}`;

const pgBossAvailable = sharedPostgresUrl !== null && pgBossRuns();
const canRun = sharedRedisUrl !== null && canStartRedis('the inbox store-outage test');

/** An engine under test: a fresh inbox, the jobs it holds for a webhook id, and what a retry of a processed job answers. */
interface Engine {
  name: string;
  available: boolean;
  make(): Promise<{ inbox: Inbox; jobsOf(webhookId: string): Promise<InboxJob[]> }>;
  /**
   * The accept of a delivery whose job was processed already, as the engine answers it: BullMQ
   * removes a completed job, so its id is free and the job is added again (the worker's claim then
   * answers it as a duplicate); pg-boss keeps a completed job, so a second send of its id is a duplicate.
   */
  retryOfProcessed: 'enqueued' | 'duplicate';
}

let sharedRedis: Redis;
let boss: (PgBossLike & { stop(options?: object): Promise<void> }) | undefined;
const schema = `outage_${randomBytes(4).toString('hex')}`;

const engines: Engine[] = [
  {
    name: 'BullMQ',
    available: true,
    async make() {
      const connection = await connectIORedis(sharedRedisUrl!);
      const queue = new Queue(`outage-${randomBytes(6).toString('hex')}`, { connection, prefix: 'test-store-outage' });
      queue.on('error', () => {});
      closers.push(async () => {
        await queue.obliterate({ force: true });
        await queue.close();
        connection.disconnect();
      });
      return {
        inbox: bullmqInbox({ queue, backoff: { delayMs: 0 }, logger: silent }),
        async jobsOf(webhookId) {
          const jobs = await queue.getJobs(['wait', 'delayed', 'prioritized', 'active', 'completed', 'failed']);
          return jobs.map((job) => job.data as InboxJob).filter((job) => job.id === webhookId);
        },
      };
    },
    retryOfProcessed: 'enqueued',
  },
  {
    name: 'pg-boss',
    available: pgBossAvailable,
    async make() {
      const queue = `outage-${randomBytes(6).toString('hex')}`;
      return {
        inbox: pgBossInbox({ boss: boss!, queue, backoff: { delayMs: 0 }, pollingIntervalSeconds: 0.5 }),
        async jobsOf(webhookId) {
          const jobs = (await boss!.findJobs(queue, { data: { id: webhookId } })) as { data: InboxJob }[];
          return jobs.map((job) => job.data);
        },
      };
    },
    retryOfProcessed: 'duplicate',
  },
];

describe.skipIf(!canRun)('receiver.accept through a store outage (onStoreError: process)', () => {
  let redis: RedisServer;
  let storeClient: Redis;
  /** The receivers' store, on the private server the tests stop. */
  let outageStore: RedisStore;
  /** The workers' store, on the shared server. */
  let workerStore: RedisStore;

  beforeAll(async () => {
    redis = await startRedisServer();
    // Without the offline queue, a claim sent during the outage fails instead of waiting in the
    // client and landing after the restart, where it would hold the id (`in_progress`) for a lock.
    storeClient = await connectIORedis(redis.url, { enableOfflineQueue: false });
    outageStore = redisStore({ client: storeClient, prefix: uniquePrefix('outage-accept'), timeoutMs: 500 });
    sharedRedis = await connectIORedis(sharedRedisUrl!);
    workerStore = redisStore({ client: sharedRedis, prefix: uniquePrefix('outage-work') });
    if (pgBossAvailable) {
      // Loaded only where it can run: pg-boss 12 refuses older Node lines at import.
      const { PgBoss } = await import('pg-boss');
      const instance = new PgBoss({ connectionString: sharedPostgresUrl!, schema, supervise: true, schedule: false });
      instance.on('error', () => {});
      boss = (await instance.start()) as unknown as typeof boss;
    }
  });

  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    if (boss !== undefined) {
      await boss.stop({ graceful: false, timeout: 2000 });
      const pool = new pg.Pool({ connectionString: sharedPostgresUrl! });
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
    storeClient?.disconnect();
    sharedRedis?.disconnect();
    await redis?.close();
  });

  /** The private server back, and the store's client answering again. */
  async function storeBack(): Promise<void> {
    if (!redis.running) await redis.start();
    await expect.poll(() => outageStore.ping().then(() => true, () => false), { timeout: 15_000, interval: 50 }).toBe(true);
  }

  describe.each(engines)('on $name', (engine) => {
    it.skipIf(!engine.available)('two tenants send one webhook-id during the outage: two jobs, in t.acme and t.globex, each processed once', async () => {
      const { inbox, jobsOf } = await engine.make();
      const secrets: Record<string, string> = { acme: generateSecret(), globex: generateSecret() };
      const keys = tenantKeys({
        tenant: (request) => request.params.tenant,
        load: async (tenant) => (secrets[tenant] === undefined ? undefined : [secrets[tenant]]),
      });
      const log = errorLog();
      const receiver = createReceiver({ keys, inbox, idempotency: { store: outageStore, onStoreError: 'process' }, onError: log.onError });
      const id = freshId('tenants');
      const deliver = async (tenant: string) => {
        const body = `{"type":"invoice.paid","for":"${tenant}"}`;
        const signed = await signWebhook({ secret: secrets[tenant]!, body, id });
        return receiver.accept({ headers: { ...signed.headers, 'content-type': 'application/json' }, body, params: { tenant } });
      };

      await redis.stop();
      try {
        expect((await deliver('acme')).outcome).toBe('enqueued');
        expect((await deliver('globex')).outcome).toBe('enqueued');
      } finally {
        await storeBack();
      }
      // Both ran unclaimed through the outage, and said so.
      expect(log.entries.map((entry) => [entry.stage, entry.webhookId])).toEqual([
        ['claim', id],
        ['claim', id],
      ]);
      expect((await jobsOf(id)).map((job) => [job.namespace, job.tenant]).sort()).toEqual([
        ['t.acme', 'acme'],
        ['t.globex', 'globex'],
      ]);

      const outcomes = new Outcomes();
      const runs: (string | undefined)[] = [];
      const worker = await inbox.work(
        (webhook) => {
          runs.push(webhook.tenant);
        },
        { idempotency: { store: workerStore }, onOutcome: outcomes.record, logger: silent },
      );
      try {
        await outcomes.until(() => outcomes.of(id).length === 2, 30_000);
      } finally {
        await worker.close();
      }
      expect(outcomes.events.map((event) => [event.outcome, event.namespace]).sort()).toEqual([
        ['processed', 't.acme'],
        ['processed', 't.globex'],
      ]);
      expect(runs.sort()).toEqual(['acme', 'globex']);
    }, 60_000);

    it.skipIf(!engine.available)("a fixed namespace: accepted during the outage, processed, then the sender's retry after it: the handler runs once", async () => {
      const { inbox, jobsOf } = await engine.make();
      const secret = generateSecret();
      const log = errorLog();
      const receiver = createReceiver({ secrets: secret, inbox, idempotency: { store: outageStore, namespace: 'billing', onStoreError: 'process' }, onError: log.onError });
      const id = freshId('retry');
      const accept = async () => {
        const body = '{"type":"invoice.paid"}';
        const signed = await signWebhook({ secret, body, id });
        return receiver.accept({ headers: { ...signed.headers, 'content-type': 'application/json' }, body });
      };
      const outcomes = new Outcomes();
      const handler = vi.fn();
      const work = () => inbox.work(handler, { idempotency: { store: workerStore }, onOutcome: outcomes.record, logger: silent });

      await redis.stop();
      try {
        expect((await accept()).outcome).toBe('enqueued');
      } finally {
        await storeBack();
      }
      expect(log.entries.map((entry) => entry.stage)).toEqual(['claim']);
      expect((await jobsOf(id)).map((job) => job.namespace)).toEqual(['billing']);
      // The worker processes the job before the sender retries (closing waits for the engine to
      // settle it: BullMQ removes it, pg-boss marks it completed).
      const first = await work();
      try {
        await outcomes.until(() => outcomes.of(id).length === 1, 30_000);
      } finally {
        await first.close();
      }
      expect(outcomes.of(id)).toEqual(['processed']);

      // The sender's retry, with the store answering: claimed, and filed under the same job id.
      const retry = await accept();
      expect(log.entries).toHaveLength(1);
      expect((await outageStore.claim(`billing:s:${id}`, 1000)).status).toBe('completed');
      expect(retry.outcome).toBe(engine.retryOfProcessed);
      if (retry.outcome === 'enqueued') {
        const second = await work();
        try {
          await outcomes.until(() => outcomes.of(id).length === 2, 30_000);
        } finally {
          await second.close();
        }
        // The worker's claim in `billing` was completed by the first job.
        expect(outcomes.of(id)).toEqual(['processed', 'duplicate']);
      }
      expect(handler).toHaveBeenCalledTimes(1);
      expect((await jobsOf(id)).every((job) => job.namespace === 'billing')).toBe(true);
    }, 60_000);
  });
});

/**
 * Ordering through an inbox, one set of cases run on each engine against its real
 * server: the receiver computes a signed delivery's entity and version at accept (the accepting
 * claim stays unordered) and the job carries them; the worker judges staleness when it processes
 * (a stale job is acknowledged with outcome `stale`, its handler never runs), holds the entity so
 * two jobs of one entity never run at the same time (the other is deferred without spending an
 * attempt), records the version only when the handler succeeds (a failed newer job does not make
 * an older one stale), and lets unsigned jobs bypass ordering. Each engine's test file calls
 * {@link describeOrderedInbox}.
 */

import { describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors.ts';
import { encodeVersion, entityKey } from '../../src/ordering.ts';
import type { Inbox, InboxHandler, WorkOptions } from '../../src/inbox/types.ts';
import type { OrderingOptions } from '../../src/ordering.ts';
import { createReceiver, type Receiver } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import type { WebhookInput } from '../../src/verify.ts';
import { Outcomes, type InboxHarness, type InboxUnderTest } from './conformance.ts';

const secret = generateSecret();
const ordering: OrderingOptions = { key: (event) => event.data.id, version: (event) => event.data.version };

let ids = 0;
const fresh = (label: string) => `${label}_${process.pid}_${Date.now()}_${ids++}`;

/** `subscription.updated` for `entity` at `version`, signed. */
async function signed(id: string, entity: string, version: number): Promise<WebhookInput> {
  const body = JSON.stringify({ type: 'subscription.updated', timestamp: new Date().toISOString(), data: { id: entity, version } });
  const { headers } = await signWebhook({ secret, body, id });
  return { headers, body };
}

/** The same shape, unsigned (let in by `unsigned: 'accept'`). */
function unsigned(id: string, entity: string, version: number): WebhookInput {
  const body = JSON.stringify({ type: 'subscription.updated', timestamp: new Date().toISOString(), data: { id: entity, version } });
  return { headers: { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) }, body };
}

const payloadOf = (webhook: { json<T>(): T }) => webhook.json<{ data: { id: string; version: number } }>().data;

/** The handler's log: what it applied, and the most handlers of one entity that ran at once. */
class Applied {
  readonly log: string[] = [];
  #running = new Map<string, number>();
  maxAtOnce = 0;
  enter(entity: string): void {
    const running = (this.#running.get(entity) ?? 0) + 1;
    this.#running.set(entity, running);
    this.maxAtOnce = Math.max(this.maxAtOnce, running);
  }
  leave(entity: string, version: number): void {
    this.#running.set(entity, this.#running.get(entity)! - 1);
    this.log.push(`${entity}@${version}`);
  }
  /** A handler that applies each job at once. */
  readonly apply: InboxHandler = (webhook) => {
    const { id, version } = payloadOf(webhook);
    this.enter(id);
    this.leave(id, version);
  };
}

export interface OrderedInboxHarness<Made extends InboxUnderTest = InboxUnderTest> extends InboxHarness {
  make(options: { maxAttempts: number }): Promise<Made>;
  /**
   * The store the receiver and the workers share (the engine's own backend where there is a store
   * for it), for the inbox `make` just made.
   */
  store(made: Made): Promise<IdempotencyStore>;
  /**
   * Why a job accepted while another job's handler runs cannot reach a worker until that handler
   * ends, when it cannot (then the busy-entity case, which needs both at once, is skipped; the case
   * whose entity is held in the store still proves the deferral).
   */
  oneBatchAtATime?: string;
}

export function describeOrderedInbox<Made extends InboxUnderTest>(engine: string, harness: OrderedInboxHarness<Made>): void {
  describe.skipIf(!harness.available)(`ordering through the inbox: ${engine}`, () => {
    async function withWorker(
      handler: InboxHandler,
      body: (context: { receiver: Receiver; inbox: Inbox; outcomes: Outcomes; store: IdempotencyStore }) => Promise<void>,
      options: {
        work?: Partial<WorkOptions>;
        unsigned?: boolean;
        exclusive?: boolean;
        workerStore?: IdempotencyStore;
        receiver?: { store: IdempotencyStore; namespace: string; onStoreError: 'process' };
      } = {},
    ): Promise<void> {
      const made = await harness.make({ maxAttempts: 3 });
      const { inbox, cleanup } = made;
      const store = await harness.store(made);
      const receiver = createReceiver({
        secrets: secret,
        inbox,
        idempotency: options.receiver ?? { store },
        onError: () => {},
        ordering: options.exclusive === undefined ? ordering : { ...ordering, exclusive: options.exclusive },
        ...(options.unsigned === true ? { unsigned: 'accept' as const } : {}),
      });
      const outcomes = new Outcomes();
      // Quiet: the failures these cases cause on purpose would be logged as warnings.
      const logger = { warn: () => {}, error: () => {} };
      const worker = await inbox.work(handler, { onOutcome: outcomes.record, logger, ...options.work, idempotency: { store: options.workerStore ?? store } });
      try {
        await body({ receiver, inbox, outcomes, store });
      } finally {
        await worker.close({ timeoutMs: 2000 });
        await receiver.close();
        await cleanup();
      }
    }

    it('a job older than one processed for its entity is stale: acknowledged, its handler never runs; an equal version runs', async () => {
      const applied = new Applied();
      const entity = fresh('sub');
      await withWorker(applied.apply, async ({ receiver, outcomes }) => {
        const newer = fresh('evt_v3');
        // The accepting claim is unordered: an older version is never refused at accept.
        expect((await receiver.accept(await signed(newer, entity, 3))).outcome).toBe('enqueued');
        await outcomes.until(() => outcomes.of(newer).includes('processed'));
        const older = [fresh('evt_v1'), fresh('evt_v2')];
        expect((await receiver.accept(await signed(older[0]!, entity, 1))).outcome).toBe('enqueued');
        expect((await receiver.accept(await signed(older[1]!, entity, 2))).outcome).toBe('enqueued');
        const equal = fresh('evt_v3b');
        expect((await receiver.accept(await signed(equal, entity, 3))).outcome).toBe('enqueued');
        await outcomes.until(() => older.every((id) => outcomes.of(id).length > 0) && outcomes.of(equal).includes('processed'));
        expect(older.map((id) => outcomes.of(id))).toEqual([['stale'], ['stale']]);
        expect(outcomes.events.find((event) => event.webhookId === older[0])).toMatchObject({ outcome: 'stale', attempt: 1, durationMs: 0 });
        // A sender's retry of a stale delivery is a duplicate at accept: its id was accepted.
        expect((await receiver.accept(await signed(older[0]!, entity, 1))).outcome).toBe('duplicate');
      });
      expect(applied.log).toEqual([`${entity}@3`, `${entity}@3`]);
    });

    it('shuffled jobs of several entities: no handler ever applies a version lower than one applied before; two jobs of one entity never run at once', async () => {
      const applied = new Applied();
      const entities = [fresh('a'), fresh('b')];
      const handler: InboxHandler = async (webhook) => {
        const { id, version } = payloadOf(webhook);
        applied.enter(id);
        // Long enough for the other job of the entity to be delivered meanwhile (concurrency 4).
        await new Promise((resolve) => setTimeout(resolve, 30));
        applied.leave(id, version);
      };
      // Versions 1..5 of each entity, interleaved and shuffled (fixed order: newer before older).
      const order = [3, 1, 5, 2, 4];
      const jobs = order.flatMap((version) => entities.map((entity) => ({ id: fresh(`evt_${version}`), entity, version })));
      await withWorker(
        handler,
        async ({ receiver, outcomes }) => {
          for (const job of jobs) expect((await receiver.accept(await signed(job.id, job.entity, job.version))).outcome).toBe('enqueued');
          await outcomes.until(() => jobs.every((job) => outcomes.of(job.id).some((outcome) => outcome === 'processed' || outcome === 'stale')), 60_000);
          // Deferred jobs (the entity busy) spent no attempt; nothing failed.
          expect(outcomes.events.filter((event) => event.outcome === 'retried' || event.outcome === 'dead_lettered')).toEqual([]);
          for (const event of outcomes.events.filter((event) => event.outcome === 'processed' || event.outcome === 'stale')) expect(event.attempt).toBe(1);
        },
        { work: { concurrency: 4 } },
      );
      expect(applied.maxAtOnce).toBe(1);
      for (const entity of entities) {
        const versions = applied.log.filter((line) => line.startsWith(`${entity}@`)).map((line) => Number(line.slice(entity.length + 1)));
        expect(versions.length).toBeGreaterThan(0);
        expect(versions).toEqual([...versions].sort((a, b) => a - b));
        // The highest version is never stale, so it is the entity's last state.
        expect(versions.at(-1)).toBe(5);
      }
    });

    it.skipIf(harness.oneBatchAtATime !== undefined)('a job deferred while its entity is busy runs once the holder finishes, without spending an attempt', async () => {
      const entity = fresh('busy');
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started!: () => void;
      const firstStarted = new Promise<void>((resolve) => {
        started = resolve;
      });
      const applied = new Applied();
      const first = fresh('evt_first');
      const second = fresh('evt_second');
      await withWorker(
        async (webhook, context) => {
          const { id, version } = payloadOf(webhook);
          applied.enter(id);
          if (webhook.id === first) {
            started();
            await gate;
          }
          applied.leave(id, version);
          expect(context.attempt).toBe(1);
        },
        async ({ receiver, outcomes }) => {
          await receiver.accept(await signed(first, entity, 1));
          // The second job arrives while the first holds the entity.
          await firstStarted;
          await receiver.accept(await signed(second, entity, 2));
          await outcomes.until(() => outcomes.of(second).includes('deferred'));
          release();
          await outcomes.until(() => outcomes.of(first).includes('processed') && outcomes.of(second).includes('processed'));
          expect(outcomes.events.find((event) => event.webhookId === second && event.outcome === 'processed')?.attempt).toBe(1);
        },
        { work: { concurrency: 2 } },
      );
      expect(applied.maxAtOnce).toBe(1);
      expect(applied.log).toEqual([`${entity}@1`, `${entity}@2`]);
    });

    it('a job whose entity another worker holds in the store is deferred, never spending an attempt nor dead-lettered, and runs once the holder is done', async () => {
      const entity = fresh('held');
      const id = fresh('evt_held');
      const applied = new Applied();
      const attempts: number[] = [];
      await withWorker(
        (webhook, context) => {
          attempts.push(context.attempt);
          return applied.apply(webhook, context);
        },
        async ({ receiver, outcomes, store }) => {
          // Another worker's job of the entity, mid-handler: its lock in the shared store (taken
          // through the store's own operation, as a worker takes it) outlasts this case unless it ends.
          const order = { entity: entityKey('default', entity), version: encodeVersion(1), exclusive: true };
          const holder = `default:w:s:${fresh('evt_holder')}`;
          const held = await store.ordering!.claimOrdered(holder, 120_000, 120_000, order);
          if (held.status !== 'acquired') throw new Error(`the holder's claim was ${held.status}`);
          expect((await receiver.accept(await signed(id, entity, 2))).outcome).toBe('enqueued');
          // Deferred as many times as the inbox has attempts (3), past any engine's own retry count
          // (Cloudflare Queues' max_retries is maxAttempts - 1): spent, they would dead-letter it.
          await outcomes.until(() => outcomes.of(id).filter((outcome) => outcome === 'deferred').length >= 3, 30_000);
          expect(attempts).toEqual([]);
          expect(outcomes.events.filter((event) => event.webhookId === id).map((event) => [event.outcome, event.attempt])).toEqual(outcomes.of(id).map(() => ['deferred', 1]));
          // The holder succeeds with version 1: the entity is free, and version 2 is newer.
          expect(await store.ordering!.completeOrdered(holder, held.token, 120_000, order)).toBe(true);
          await outcomes.until(() => outcomes.of(id).includes('processed'));
          expect(outcomes.of(id).filter((outcome) => outcome !== 'deferred')).toEqual(['processed']);
          expect(outcomes.events.filter((event) => event.webhookId === id).every((event) => event.attempt === 1)).toBe(true);
        },
      );
      expect(attempts).toEqual([1]);
      expect(applied.log).toEqual([`${entity}@2`]);
    });

    it('a failed newer job records no version: an older job after it still runs', async () => {
      const entity = fresh('failed');
      const applied = new Applied();
      const newer = fresh('evt_new');
      const older = fresh('evt_old');
      await withWorker(
        (webhook) => {
          const { id, version } = payloadOf(webhook);
          if (version === 9) throw new PermanentError('downstream refused version 9');
          applied.enter(id);
          applied.leave(id, version);
        },
        async ({ receiver, inbox, outcomes }) => {
          await receiver.accept(await signed(newer, entity, 9));
          await outcomes.until(() => outcomes.of(newer).includes('dead_lettered'));
          // The job carries the entity as ordering.key named it, the encoded version and exclusive.
          await expect.poll(async () => (await inbox.deadLetters()).length, { timeout: 10_000 }).toBe(1);
          const [letter] = await inbox.deadLetters();
          expect(letter!.job).toMatchObject({ entity, version: encodeVersion(9), exclusive: true, signed: true });
          await receiver.accept(await signed(older, entity, 4));
          await outcomes.until(() => outcomes.of(older).length > 0);
          expect(outcomes.of(older)).toEqual(['processed']);
        },
      );
      expect(applied.log).toEqual([`${entity}@4`]);
    });

    it("receiver.forgetVersion(entity) resets the entity the workers judge: an older job after it runs", async () => {
      const entity = fresh('forgotten');
      const applied = new Applied();
      const [newer, older, oldest] = [fresh('evt_v5'), fresh('evt_v3'), fresh('evt_v2')];
      await withWorker(
        applied.apply,
        async ({ receiver, outcomes }) => {
          await receiver.accept(await signed(newer, entity, 5));
          await outcomes.until(() => outcomes.of(newer).includes('processed'));
          await receiver.accept(await signed(older, entity, 3));
          await outcomes.until(() => outcomes.of(older).length > 0);
          expect(outcomes.of(older)).toEqual(['stale']);
          // The receiver's store is the workers' store: the version it forgets is the one they judge by.
          await receiver.forgetVersion(entity);
          await receiver.accept(await signed(oldest, entity, 2));
          await outcomes.until(() => outcomes.of(oldest).length > 0);
          expect(outcomes.of(oldest)).toEqual(['processed']);
        },
      );
      expect(applied.log).toEqual([`${entity}@5`, `${entity}@2`]);
    });

    it('unsigned jobs bypass ordering: a huge unsigned version makes no signed one stale, and is never stale itself', async () => {
      const entity = fresh('unsigned');
      const applied = new Applied();
      const ids = { forged: fresh('evt_forged'), genuine: fresh('evt_genuine'), lateUnsigned: fresh('evt_late') };
      await withWorker(
        applied.apply,
        async ({ receiver, outcomes }) => {
          await receiver.accept(unsigned(ids.forged, entity, Number.MAX_SAFE_INTEGER));
          await outcomes.until(() => outcomes.of(ids.forged).length > 0);
          await receiver.accept(await signed(ids.genuine, entity, 2));
          await outcomes.until(() => outcomes.of(ids.genuine).length > 0);
          await receiver.accept(unsigned(ids.lateUnsigned, entity, 1));
          await outcomes.until(() => outcomes.of(ids.lateUnsigned).length > 0);
          expect([ids.forged, ids.genuine, ids.lateUnsigned].map((id) => outcomes.of(id))).toEqual([['processed'], ['processed'], ['processed']]);
        },
        { unsigned: true },
      );
      expect(applied.log).toEqual([`${entity}@${Number.MAX_SAFE_INTEGER}`, `${entity}@2`, `${entity}@1`]);
    });

    it('an unreadable version is refused at accept with 400 INVALID_VERSION, before the store or the engine is touched', async () => {
      const id = fresh('evt_bad_version');
      await withWorker(
        () => {},
        async ({ receiver, inbox, outcomes }) => {
          await expect(receiver.accept(await signed(id, fresh('bad'), -1))).rejects.toMatchObject({ code: 'INVALID_VERSION', status: 400 });
          expect(await inbox.backlog()).toBe(0);
          // Nothing was claimed: a corrected delivery of the id is accepted.
          expect((await receiver.accept(await signed(id, fresh('bad'), 1))).outcome).toBe('enqueued');
          await outcomes.until(() => outcomes.of(id).includes('processed'));
        },
      );
    });

    it("accepted unclaimed through a store outage (onStoreError: 'process'), a job still carries its namespace and entity, and the worker judges it", async () => {
      const working = memoryStore();
      const down: IdempotencyStore = { ...working, claim: () => Promise.reject(new Error('the store is down')) };
      const entity = fresh('outage');
      const [newer, older] = [fresh('evt_new'), fresh('evt_old')];
      await withWorker(
        () => {},
        async ({ receiver, outcomes }) => {
          expect((await receiver.accept(await signed(newer, entity, 2))).outcome).toBe('enqueued');
          await outcomes.until(() => outcomes.of(newer).includes('processed'));
          expect((await receiver.accept(await signed(older, entity, 1))).outcome).toBe('enqueued');
          await outcomes.until(() => outcomes.of(older).length > 0);
          expect(outcomes.of(older)).toEqual(['stale']);
          expect(outcomes.events.map((event) => event.namespace)).toEqual(['billing', 'billing']);
        },
        { receiver: { store: down, namespace: 'billing', onStoreError: 'process' }, workerStore: working },
      );
    });

    it("an ordered job reaching a worker whose store has no ordering operations is dead-lettered, never run unordered", async () => {
      const ran: string[] = [];
      const plain = memoryStore();
      const unordered: IdempotencyStore = {
        claim: (key, lockMs) => plain.claim(key, lockMs),
        complete: (key, token, ttlMs) => plain.complete(key, token, ttlMs),
        release: (key, token) => plain.release(key, token),
      };
      const id = fresh('evt_unordered_worker');
      const errors: unknown[] = [];
      await withWorker(
        (webhook) => {
          ran.push(webhook.id);
        },
        async ({ receiver, outcomes }) => {
          await receiver.accept(await signed(id, fresh('e'), 1));
          await outcomes.until(() => outcomes.of(id).length > 0);
          expect(outcomes.of(id)).toEqual(['dead_lettered']);
        },
        { workerStore: unordered, work: { onError: (error) => errors.push(error) } },
      );
      expect(ran).toEqual([]);
      expect(String(errors[0])).toContain("the worker's store has no ordering operations");
    });
  });
}


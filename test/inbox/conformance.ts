/**
 * The inbox contract, one set of cases run on every engine against its real server: accept and
 * process once with the synchronous mode's webhook and context, retries with attempts counted,
 * dead letters at once for permanent failures and after the last attempt, retry and purge of a
 * dead letter, a busy claim deferred without spending an attempt, a redelivery of a processed job
 * skipped, a job format the worker does not know dead-lettered, `close` aborting and releasing,
 * and jobs that carry no secret. Each engine's test file calls {@link describeInbox}.
 */

import { describe, expect, it } from 'vitest';
import { PermanentError, WebhookError } from '../../src/errors.ts';
import { jobOf } from '../../src/job-format.ts';
import { INBOX_JOB_FORMAT, type Inbox, type InboxHandler, type InboxJob, type JobOutcomeEvent, type WorkOptions } from '../../src/inbox/types.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import { createVerifier } from '../../src/verify.ts';

export interface InboxUnderTest {
  inbox: Inbox;
  /** Stops what `make` started (the queue's connections, its data). */
  cleanup(): Promise<void>;
}

export interface InboxHarness {
  /** False when the engine's server is missing here (the cases skip; the global setup said why). */
  available: boolean;
  /** A fresh inbox on a queue of its own; retries without delay unless `backoffDelayMs` is given. */
  make(options: { maxAttempts: number }): Promise<InboxUnderTest>;
  /**
   * Why the engine's workers have no `close` to check, when they have none: Cloudflare Queues'
   * consumer is the Worker's `queue()` export, which the runtime runs and ends, not the package.
   */
  noClose?: string;
}

/** Every outcome a worker reports, and a way to wait for one without sleeping. */
export class Outcomes {
  readonly events: JobOutcomeEvent[] = [];
  #waiters: (() => void)[] = [];
  readonly record = (event: JobOutcomeEvent): void => {
    this.events.push(event);
    for (const wake of this.#waiters.splice(0)) wake();
  };
  of(webhookId: string): JobOutcomeEvent['outcome'][] {
    return this.events.filter((event) => event.webhookId === webhookId).map((event) => event.outcome);
  }
  /** Resolves once `done()` holds; rejects after `timeoutMs` with what was seen. */
  async until(done: () => boolean, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; outcomes so far: ${JSON.stringify(this.events.map((e) => [e.webhookId, e.outcome, e.attempt]))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

const secret = generateSecret();
const verifier = createVerifier({ secrets: [{ key: secret, keyId: 'key-2026' }] });

/** A signed delivery verified and made into a job, as the receiver accepts one. */
export async function acceptedJob(body: string, options: { id?: string; namespace?: string; contentType?: string } = {}): Promise<InboxJob> {
  const signed = await signWebhook({ secret, body, ...(options.id === undefined ? {} : { id: options.id }) });
  const webhook = await verifier.verify({ headers: signed.headers, body });
  return jobOf(webhook, { namespace: options.namespace ?? 'default', contentType: options.contentType ?? 'application/json', acceptedAt: Date.now() });
}

let ids = 0;
const freshId = (label: string) => `msg_${label}_${process.pid}_${Date.now()}_${ids++}`;

export function describeInbox(engine: string, harness: InboxHarness): void {
  describe.skipIf(!harness.available)(`inbox contract: ${engine}`, () => {
    /** Runs `body` with a fresh inbox and a worker, closing both whatever happens. */
    async function withWorker(
      handler: InboxHandler,
      body: (context: { inbox: Inbox; outcomes: Outcomes; store: IdempotencyStore }) => Promise<void>,
      options: { maxAttempts?: number; work?: Partial<WorkOptions> } = {},
    ): Promise<void> {
      const { inbox, cleanup } = await harness.make({ maxAttempts: options.maxAttempts ?? 3 });
      const outcomes = new Outcomes();
      const store = options.work?.idempotency?.store ?? memoryStore();
      // Quiet: the failures these cases cause on purpose would be logged as warnings.
      const logger = { warn: () => {}, error: () => {} };
      const worker = await inbox.work(handler, { onOutcome: outcomes.record, logger, ...options.work, idempotency: { store, ...options.work?.idempotency } });
      try {
        await body({ inbox, outcomes, store });
      } finally {
        await worker.close({ timeoutMs: 2000 });
        await cleanup();
      }
    }

    it('processes an accepted job once, with the synchronous webhook and a context with attempt, maxAttempts, signal, acceptedAt and claim', async () => {
      const seen: unknown[] = [];
      const job = await acceptedJob('{"type":"invoice.paid","amount":42}', { id: freshId('once') });
      await withWorker(
        (webhook, context) => {
          seen.push({
            id: webhook.id,
            text: webhook.text(),
            json: webhook.json(),
            body: Array.from(webhook.body),
            timestamp: webhook.timestamp.getTime(),
            signed: webhook.signed,
            scheme: webhook.scheme,
            keyIndex: webhook.keyIndex,
            keyId: webhook.keyId,
            attempt: context.attempt,
            maxAttempts: context.maxAttempts,
            acceptedAt: context.acceptedAt.getTime(),
            aborted: context.signal.aborted,
            claimKey: context.claim?.key,
          });
        },
        async ({ inbox, outcomes }) => {
          expect(await inbox.enqueue(job)).toBe('enqueued');
          await outcomes.until(() => outcomes.of(job.id).includes('processed'));
        },
      );
      expect(seen).toEqual([
        {
          id: job.id,
          text: '{"type":"invoice.paid","amount":42}',
          json: { type: 'invoice.paid', amount: 42 },
          body: Array.from(new TextEncoder().encode('{"type":"invoice.paid","amount":42}')),
          timestamp: job.timestamp * 1000,
          signed: true,
          scheme: 'v1',
          keyIndex: 0,
          keyId: 'key-2026',
          attempt: 1,
          maxAttempts: 3,
          acceptedAt: job.acceptedAt,
          aborted: false,
          claimKey: `default:w:s:${job.id}`,
        },
      ]);
    });

    it('retries a failing handler with the attempt counted, then processes it', async () => {
      const attempts: number[] = [];
      const job = await acceptedJob('{}', { id: freshId('retry') });
      await withWorker(
        (_webhook, context) => {
          attempts.push(context.attempt);
          if (context.attempt < 3) throw new Error(`downstream unavailable (attempt ${context.attempt})`);
        },
        async ({ inbox, outcomes }) => {
          await inbox.enqueue(job);
          await outcomes.until(() => outcomes.of(job.id).includes('processed'));
          expect(outcomes.of(job.id)).toEqual(['retried', 'retried', 'processed']);
          expect(await inbox.deadLetters()).toEqual([]);
        },
        { maxAttempts: 3 },
      );
      expect(attempts).toEqual([1, 2, 3]);
    });

    it('dead-letters after the last attempt, with the payload and the last failure; retry runs it again with attempts counted anew', async () => {
      const attempts: number[] = [];
      let healed = false;
      const job = await acceptedJob('{"n":1}', { id: freshId('exhausted') });
      await withWorker(
        (_webhook, context) => {
          attempts.push(context.attempt);
          if (!healed) throw new TypeError(`cannot read property of undefined (attempt ${context.attempt})`);
        },
        async ({ inbox, outcomes }) => {
          await inbox.enqueue(job);
          await outcomes.until(() => outcomes.of(job.id).includes('dead_lettered'));
          expect(outcomes.of(job.id)).toEqual(['retried', 'dead_lettered']);
          // The worker reports the outcome as it hands the job back; the engine files it just after.
          await expect.poll(async () => (await inbox.deadLetters()).length, { timeout: 10_000 }).toBe(1);
          const letters = await inbox.deadLetters();
          expect(letters).toEqual([
            {
              webhookId: job.id,
              namespace: 'default',
              signed: true,
              attempts: 2,
              error: { name: 'TypeError', message: 'cannot read property of undefined (attempt 2)' },
              acceptedAt: new Date(job.acceptedAt),
              firstAttemptAt: expect.any(Date),
              failedAt: expect.any(Date),
              job,
            },
          ]);
          healed = true;
          expect(await inbox.retry(job.id)).toBe(true);
          await outcomes.until(() => outcomes.of(job.id).includes('processed'));
          expect(await inbox.deadLetters()).toEqual([]);
          expect(await inbox.retry(job.id)).toBe(false);
          expect(await inbox.purge(job.id)).toBe(false);
        },
        { maxAttempts: 2 },
      );
      expect(attempts).toEqual([1, 2, 1]);
    });

    it('keeps when the first attempt began and when the last one ended: a job failing three times', async () => {
      const calls: number[] = [];
      const job = await acceptedJob('{}', { id: freshId('times') });
      await withWorker(
        (_webhook, context) => {
          calls.push(Date.now());
          throw new Error(`downstream unavailable (attempt ${context.attempt})`);
        },
        async ({ inbox, outcomes }) => {
          await inbox.enqueue(job);
          await outcomes.until(() => outcomes.of(job.id).includes('dead_lettered'));
          expect(outcomes.of(job.id)).toEqual(['retried', 'retried', 'dead_lettered']);
          await expect.poll(async () => (await inbox.deadLetters()).length, { timeout: 10_000 }).toBe(1);
          const [letter] = await inbox.deadLetters();
          expect(letter).toMatchObject({ webhookId: job.id, attempts: 3, error: { name: 'Error', message: 'downstream unavailable (attempt 3)' } });
          const { firstAttemptAt, failedAt } = letter!;
          expect(firstAttemptAt).toBeInstanceOf(Date);
          expect(failedAt).toBeInstanceOf(Date);
          // Accepted, then the first attempt began (no later than its handler ran), then the last
          // attempt ended (no earlier than its handler ran).
          expect(firstAttemptAt!.getTime()).toBeGreaterThanOrEqual(job.acceptedAt);
          expect(firstAttemptAt!.getTime()).toBeLessThanOrEqual(calls[0]!);
          expect(failedAt!.getTime()).toBeGreaterThanOrEqual(calls[2]!);
          expect(letter!.job).toEqual(job);
        },
        { maxAttempts: 3 },
      );
      expect(calls).toHaveLength(3);
    });

    it('dead-letters a PermanentError, or a WebhookError below 500, at the first attempt; purge deletes it', async () => {
      const permanent = await acceptedJob('{}', { id: freshId('permanent') });
      const invalid = await acceptedJob('not json', { id: freshId('invalid') });
      await withWorker(
        (webhook) => {
          if (webhook.id === permanent.id) throw new PermanentError('account 7 was deleted');
          throw new WebhookError('INVALID_PAYLOAD', 'the body is not JSON');
        },
        async ({ inbox, outcomes }) => {
          await inbox.enqueue(permanent);
          await inbox.enqueue(invalid);
          await outcomes.until(() => outcomes.of(permanent.id).length > 0 && outcomes.of(invalid.id).length > 0);
          expect(outcomes.of(permanent.id)).toEqual(['dead_lettered']);
          expect(outcomes.of(invalid.id)).toEqual(['dead_lettered']);
          await expect.poll(async () => (await inbox.deadLetters()).length, { timeout: 10_000 }).toBe(2);
          const letters = await inbox.deadLetters();
          // One attempt: it began when the handler ran, and ended with the failure.
          for (const letter of letters) expect(letter.firstAttemptAt!.getTime()).toBeLessThanOrEqual(letter.failedAt!.getTime());
          expect(letters.map((letter) => [letter.webhookId, letter.attempts, letter.error]).sort()).toEqual(
            [
              [permanent.id, 1, { name: 'PermanentError', message: 'account 7 was deleted' }],
              [invalid.id, 1, { name: 'WebhookError', message: 'the body is not JSON' }],
            ].sort(),
          );
          expect(await inbox.purge(permanent.id)).toBe(true);
          expect((await inbox.deadLetters()).map((letter) => letter.webhookId)).toEqual([invalid.id]);
          expect(await inbox.purge(permanent.id)).toBe(false);
          expect(await inbox.purge(invalid.id, { namespace: 'other' })).toBe(false);
        },
        { maxAttempts: 5 },
      );
    });

    it('defers a job whose claim another worker holds, without spending an attempt, and runs it once the lease ends', async () => {
      const attempts: number[] = [];
      // The store's clock is the test's: the dead worker's lease ends when the test says so, after
      // the job was seen deferred, however late a loaded machine starts the worker.
      let now = Date.now();
      const store = memoryStore({ now: () => now });
      const job = await acceptedJob('{}', { id: freshId('busy') });
      // A dead worker's lease on this job, not expired yet.
      const held = await store.claim(`default:w:s:${job.id}`, 1500);
      expect(held.status).toBe('acquired');
      await withWorker(
        (_webhook, context) => {
          attempts.push(context.attempt);
        },
        async ({ inbox, outcomes }) => {
          await inbox.enqueue(job);
          await outcomes.until(() => outcomes.of(job.id).includes('deferred'), 20_000);
          now += 1500;
          await outcomes.until(() => outcomes.of(job.id).includes('processed'), 20_000);
          expect(outcomes.of(job.id)[0]).toBe('deferred');
          expect(outcomes.of(job.id).at(-1)).toBe('processed');
        },
        { maxAttempts: 1, work: { idempotency: { store } } },
      );
      // With maxAttempts 1, a deferral that spent the attempt would have dead-lettered the job.
      expect(attempts).toEqual([1]);
    });

    it('skips a redelivered job whose handler already succeeded', async () => {
      const store = memoryStore();
      const job = await acceptedJob('{}', { id: freshId('redelivered') });
      const claim = await store.claim(`default:w:s:${job.id}`, 10_000);
      if (claim.status !== 'acquired') throw new Error('not acquired');
      await store.complete(`default:w:s:${job.id}`, claim.token, 60_000);
      let runs = 0;
      await withWorker(
        () => {
          runs++;
        },
        async ({ inbox, outcomes }) => {
          await inbox.enqueue(job);
          await outcomes.until(() => outcomes.of(job.id).length > 0);
          expect(outcomes.of(job.id)).toEqual(['duplicate']);
        },
        { work: { idempotency: { store } } },
      );
      expect(runs).toBe(0);
    });

    it('keeps signed and unsigned jobs of one id apart in the workers\' claims', async () => {
      const store = memoryStore();
      const id = freshId('classes');
      const signedJob = await acceptedJob('{}', { id });
      const unsignedJob: InboxJob = { ...signedJob, signed: false, scheme: null, keyIndex: null, keyId: null };
      const ran: boolean[] = [];
      await withWorker(
        (webhook) => {
          ran.push(webhook.signed);
        },
        async ({ inbox, outcomes }) => {
          await inbox.enqueue(unsignedJob);
          await outcomes.until(() => outcomes.of(id).length === 1);
          await inbox.enqueue(signedJob);
          await outcomes.until(() => outcomes.of(id).length === 2);
          expect(outcomes.of(id)).toEqual(['processed', 'processed']);
        },
        { work: { idempotency: { store } } },
      );
      expect(ran).toEqual([false, true]);
    });

    it('dead-letters a job in a format this worker does not read, saying so, without running the handler', async () => {
      const job = { ...(await acceptedJob('{}', { id: freshId('format') })), v: INBOX_JOB_FORMAT + 1 } as unknown as InboxJob;
      let runs = 0;
      const errors: unknown[] = [];
      await withWorker(
        () => {
          runs++;
        },
        async ({ inbox, outcomes }) => {
          await inbox.enqueue(job);
          await outcomes.until(() => outcomes.events.length > 0);
          expect(outcomes.events.map((event) => event.outcome)).toEqual(['dead_lettered']);
          expect(String(outcomes.events[0]!.error)).toContain(`format ${INBOX_JOB_FORMAT + 1}, newer than this worker reads (${INBOX_JOB_FORMAT})`);
        },
        { work: { onError: (error) => errors.push(error) } },
      );
      expect(runs).toBe(0);
      expect(errors).toHaveLength(1);
    });

    it.skipIf(harness.noClose !== undefined)('close waits for a running handler up to its timeout, then aborts its signal and releases its claim', async () => {
      const { inbox, cleanup } = await harness.make({ maxAttempts: 3 });
      const store = memoryStore();
      const job = await acceptedJob('{}', { id: freshId('close') });
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      let abortReason: unknown;
      const worker = await inbox.work(
        (_webhook, context) =>
          new Promise<void>((resolve) => {
            started();
            context.signal.addEventListener('abort', () => {
              abortReason = context.signal.reason;
              resolve();
            });
          }),
        { idempotency: { store } },
      );
      try {
        await inbox.enqueue(job);
        await running;
        const before = Date.now();
        await worker.close({ timeoutMs: 300 });
        expect(Date.now() - before).toBeGreaterThanOrEqual(290);
        expect(String(abortReason)).toContain('closed before the handler finished');
        // Released: the redelivery can claim it at once.
        expect((await store.claim(`default:w:s:${job.id}`, 1000)).status).toBe('acquired');
      } finally {
        await cleanup();
      }
    });

    it('runs many jobs across two workers, each handler to success exactly once', async () => {
      const { inbox, cleanup } = await harness.make({ maxAttempts: 3 });
      const store = memoryStore();
      const outcomes = new Outcomes();
      const runs = new Map<string, number>();
      const handler: InboxHandler = (webhook) => {
        runs.set(webhook.id, (runs.get(webhook.id) ?? 0) + 1);
      };
      const workers = [
        await inbox.work(handler, { idempotency: { store }, concurrency: 4, onOutcome: outcomes.record }),
        await inbox.work(handler, { idempotency: { store }, concurrency: 4, onOutcome: outcomes.record }),
      ];
      try {
        const jobs = await Promise.all(Array.from({ length: 30 }, (_, i) => acceptedJob(`{"i":${i}}`, { id: freshId(`many${i}`) })));
        expect(await Promise.all(jobs.map((job) => inbox.enqueue(job)))).toEqual(jobs.map(() => 'enqueued'));
        await outcomes.until(() => outcomes.events.filter((event) => event.outcome === 'processed').length === jobs.length, 30_000);
        expect([...runs.values()].every((count) => count === 1)).toBe(true);
        expect(runs.size).toBe(jobs.length);
      } finally {
        await Promise.all(workers.map((worker) => worker.close({ timeoutMs: 2000 })));
        await cleanup();
      }
    });

    it('stores no secret and no signature in a job', async () => {
      const job = await acceptedJob('{"a":1}', { id: freshId('secret') });
      const text = JSON.stringify(job);
      expect(text).not.toContain(secret.slice('whsec_'.length));
      expect(text).not.toContain('v1,');
      expect(Object.keys(job).sort()).toEqual(
        ['acceptedAt', 'body', 'contentType', 'entity', 'id', 'keyId', 'keyIndex', 'namespace', 'scheme', 'signed', 'tenant', 'timestamp', 'v'].sort(),
      );
    });
  });
}

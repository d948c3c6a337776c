/**
 * The inbox on Cloudflare Queues, in workerd through Miniflare (offline): the Worker of
 * cloudflare.worker.ts accepts and consumes against real queues and real Durable Objects.
 *
 * - The shared inbox contract (conformance.ts), with the engine in workerd and the test's handler,
 *   store and hooks in Node behind a service binding (a fresh Miniflare, so fresh queues, per case).
 * - The shared ordering cases (ordering.ts) the same way, with the Durable Object store for both
 *   the receiver and the consumer, as on Cloudflare; the consumer uses it in workerd.
 * - What only Cloudflare does: a Worker that accepts and a consumer that processes through the
 *   Durable Object store; duplicates not enqueued twice; a redelivered message never run to success
 *   twice; a busy claim sent back without spending an attempt; poison dead-lettered at once,
 *   listed, retried and purged; a message Queues itself gave up on recorded by the dead-letter
 *   consumer; 413 past the message limit; 503 when the queue's send fails; two tenants' deliveries
 *   of one id, accepted unclaimed through a store outage, processed once each.
 */

import { Miniflare, Response as MiniflareResponse } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookHandler } from '../../adapters/fetch.ts';
import { base64Decode } from '../../src/lib/encoding.ts';
import { isWebhookError } from '../../src/errors.ts';
import { cloudflareQueueInbox, type CloudflareQueueInbox, type QueueLike } from '../../src/inbox/cloudflare/index.ts';
import type { Inbox, InboxHandler, JobContext, JobOutcomeEvent, WorkOptions } from '../../src/inbox/types.ts';
import { tenantKeys } from '../../src/keys.ts';
import { createReceiver } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { durableObjectStore, type DurableObjectNamespaceLike, type DurableObjectStore } from '../../src/stores/durable-object/index.ts';
import { askObject } from '../../src/stores/durable-object/rpc.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { ClaimHandle, IdempotencyStore } from '../../src/stores/types.ts';
import { rebuiltWebhook } from '../../src/verify.ts';
import { bundleWorker } from '../runtimes/harness.ts';
import { acceptedJob, describeInbox, Outcomes } from './conformance.ts';
import { describeOrderedInbox } from './ordering.ts';

const secret = generateSecret();
let script: string;

/** A request from workerd to the test, answered in Node. */
type NodeService = (request: Request) => Promise<unknown>;

function start(mode: 'app' | 'bridge', maxAttempts: number, node: NodeService): Miniflare {
  return new Miniflare({
    modules: true,
    script,
    compatibilityDate: '2025-06-01',
    bindings: { WEBHOOK_SECRET: secret, MODE: mode, MAX_ATTEMPTS: maxAttempts },
    queueProducers: { WEBHOOK_QUEUE: { queueName: 'webhooks' }, SHORT_QUEUE: { queueName: 'webhooks-short' } },
    queueConsumers: {
      // As the guide says: max_retries at least maxAttempts - 1, so the inbox decides first.
      webhooks: { maxBatchSize: 10, maxBatchTimeout: 0.05, maxRetries: maxAttempts - 1, deadLetterQueue: 'webhooks-dlq' },
      'webhooks-short': { maxBatchTimeout: 0.05, maxRetries: 0, deadLetterQueue: 'webhooks-dlq' },
      'webhooks-dlq': { maxBatchTimeout: 0.05 },
    },
    durableObjects: {
      WEBHOOK_CLAIMS: { className: 'WebhookClaims', useSQLite: true },
      WEBHOOK_CLAIMS_KV: { className: 'KeyValueClaims' },
      WEBHOOK_CLAIMS_PEEK: { className: 'PeekClaims', useSQLite: true },
      RUNS: { className: 'Runs', useSQLite: true },
    },
    serviceBindings: {
      NODE: async (request: unknown) => new MiniflareResponse(JSON.stringify((await node(request as unknown as Request)) ?? {}), { headers: { 'content-type': 'application/json' } }),
    },
  });
}

/** The inbox as Node reaches it: the queue's producer and the claims' namespace through Miniflare's proxies. */
async function nodeInbox(mf: Miniflare, maxAttempts: number, queue = 'WEBHOOK_QUEUE', claims = 'WEBHOOK_CLAIMS'): Promise<CloudflareQueueInbox> {
  return cloudflareQueueInbox({
    queue: (await mf.getQueueProducer(queue)) as unknown as QueueLike,
    claims: (await mf.getDurableObjectNamespace(claims)) as unknown as DurableObjectNamespaceLike,
    maxAttempts,
    backoff: { delayMs: 0 },
  });
}

const errorOf = ({ name, message }: { name: string; message: string }): Error => Object.assign(new Error(message), { name });

beforeAll(async () => {
  script = await bundleWorker(import.meta.dirname, 'cloudflare.worker.ts');
}, 60_000);

/**
 * The contract's harness: each case gets a Miniflare of its own (queues are fixed when it starts).
 * `work` registers the test's handler, store and hooks, which the consumer in workerd reaches over
 * NODE. `store` is the Durable Object store on the Miniflare's `WEBHOOK_CLAIMS`, reached from Node
 * through Miniflare's proxy of the binding: a worker registered with it gets no bridge for its
 * store, the consumer in workerd uses its default store (the Durable Object store on its `claims`,
 * `env.WEBHOOK_CLAIMS`): the same objects.
 */
async function makeBridged({ maxAttempts }: { maxAttempts: number }) {
  const workers: { handler: InboxHandler; options: WorkOptions }[] = [];
  let turn = 0;
  let shared: DurableObjectStore | undefined;
  const first = () => workers[0]?.options;
  const node: NodeService = async (request) => {
    const path = new URL(request.url).pathname;
    const body = (await request.json()) as Record<string, unknown>;
    const store = first()?.idempotency?.store;
    if (path === '/config') {
      return { concurrency: first()?.concurrency ?? 1, ordered: store?.ordering !== undefined, durableObject: store !== undefined && store === shared };
    }
    if (path === '/outcome') {
      const event = body as unknown as JobOutcomeEvent & { error?: { name: string; message: string } };
      first()?.onOutcome?.({ ...event, ...(event.error === undefined ? {} : { error: errorOf(event.error) }) });
      return {};
    }
    if (path === '/error') {
      first()?.onError?.(errorOf(body.error as { name: string; message: string }), body.context as never);
      return {};
    }
    if (path.startsWith('/store/')) {
      // A tripwire: with the Durable Object store, the consumer must not reach the store through Node.
      if (store === shared) throw new Error('the consumer reached the Durable Object store through the bridge');
      const op = path.slice('/store/'.length);
      // The ordering operations live in the store's `ordering`, the others on the store itself.
      const operations = (op.endsWith('Ordered') || op === 'forgetVersion' ? (store as IdempotencyStore).ordering : store) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
      return operations[op]!(...(body as unknown as unknown[]));
    }
    // /handle: the next registered worker runs the handler on the webhook as workerd rebuilt it.
    const worker = workers[turn++ % Math.max(1, workers.length)];
    if (worker === undefined) return { error: { name: 'Error', message: 'no worker is running' } };
    const webhook = rebuiltWebhook({
      id: body.id as string,
      timestamp: new Date(body.timestamp as number),
      body: base64Decode(body.body as string)!,
      signed: body.signed as boolean,
      scheme: (body.scheme as 'v1' | 'v1a' | null) ?? undefined,
      keyIndex: (body.keyIndex as number | null) ?? undefined,
      keyId: (body.keyId as string | null) ?? undefined,
      tenant: (body.tenant as string | null) ?? undefined,
    });
    const controller = new AbortController();
    if (body.aborted === true) controller.abort();
    const context: JobContext = {
      attempt: body.attempt as number,
      maxAttempts: body.maxAttempts as number,
      acceptedAt: new Date(body.acceptedAt as number),
      signal: controller.signal,
      claim: body.claimKey === null ? undefined : ({ key: body.claimKey } as ClaimHandle),
    };
    try {
      await worker.handler(webhook, context);
      return {};
    } catch (error) {
      return { error: { name: (error as Error).name, message: (error as Error).message, code: isWebhookError(error) ? error.code : undefined } };
    }
  };
  const mf = start('bridge', maxAttempts, node);
  await mf.ready;
  const engine = await nodeInbox(mf, maxAttempts);
  shared = durableObjectStore((await mf.getDurableObjectNamespace('WEBHOOK_CLAIMS')) as unknown as DurableObjectNamespaceLike);
  const inbox: Inbox = {
    engine: engine.engine,
    maxAttempts: engine.maxAttempts,
    maxBacklog: engine.maxBacklog,
    timeoutMs: engine.timeoutMs,
    enqueue: (job, options) => engine.enqueue(job, options),
    backlog: () => engine.backlog(),
    deadLetters: (options) => engine.deadLetters(options),
    retry: (webhookId, selector) => engine.retry(webhookId, selector),
    purge: (webhookId, selector) => engine.purge(webhookId, selector),
    close: () => engine.close(),
    async work(handler, options) {
      const worker = { handler, options: options ?? {} };
      workers.push(worker);
      return {
        close: async () => {
          workers.splice(workers.indexOf(worker), 1);
        },
      };
    },
  };
  return { inbox, store: shared, cleanup: () => mf.dispose() };
}

describeInbox('cloudflare-queues', {
  available: true,
  noClose: "Cloudflare Queues' consumer is the Worker's queue() export: the runtime runs and ends it",
  make: makeBridged,
});

// What the guide tells Cloudflare users: the Durable Object store for accepting and consuming
// alike. The receiver runs in Node (the store reaching the objects through Miniflare's proxy of the
// binding), the consumer in workerd on its own binding: the same objects judge every job.
describeOrderedInbox('cloudflare-queues with the Durable Object store', {
  available: true,
  make: makeBridged,
  store: async (made) => made.store,
  oneBatchAtATime: "Miniflare delivers a queue's next batch only once the consumer returned the last one",
});

// Queues has no job ids: what keeps two tenants' deliveries of one id apart is the namespace each
// job carries, which the consumer's claim (key class `w`) is made of.
describe('cloudflare-queues through a store outage', () => {
  it("two tenants send one webhook-id while the receiver's store is down (onStoreError: 'process'): jobs in t.acme and t.globex, each processed once", async () => {
    const made = await makeBridged({ maxAttempts: 3 });
    try {
      const secrets: Record<string, string> = { acme: generateSecret(), globex: generateSecret() };
      const keys = tenantKeys({
        tenant: (request) => request.params.tenant,
        load: async (tenant) => (secrets[tenant] === undefined ? undefined : [secrets[tenant]]),
      });
      // The receiver's store refuses every claim, as one that cannot be reached; the consumer's is the real one.
      const down: IdempotencyStore = {
        claim: () => Promise.reject(new Error('the store is down')),
        complete: (key, token, ttlMs) => made.store.complete(key, token, ttlMs),
        release: (key, token) => made.store.release(key, token),
      };
      const receiver = createReceiver({ keys, inbox: made.inbox, idempotency: { store: down, onStoreError: 'process' }, onError: () => {} });
      const id = `msg_cf_tenants_${Date.now()}`;
      for (const tenant of ['acme', 'globex']) {
        const body = `{"for":"${tenant}"}`;
        const signed = await signWebhook({ secret: secrets[tenant]!, body, id });
        expect((await receiver.accept({ headers: signed.headers, body, params: { tenant } })).outcome).toBe('enqueued');
      }
      const outcomes = new Outcomes();
      const runs: (string | undefined)[] = [];
      await made.inbox.work(
        (webhook) => {
          runs.push(webhook.tenant);
        },
        { onOutcome: outcomes.record, idempotency: { store: made.store } },
      );
      const processed = () => outcomes.events.filter((event) => event.outcome === 'processed');
      await outcomes.until(() => processed().length === 2 || outcomes.of(id).includes('duplicate'), 30_000);
      expect(processed().map((event) => [event.webhookId, event.namespace]).sort()).toEqual([
        [id, 't.acme'],
        [id, 't.globex'],
      ]);
      // Neither answered as the other's duplicate (a busy store may defer one: it then runs later).
      expect(outcomes.of(id).filter((outcome) => outcome !== 'processed' && outcome !== 'deferred')).toEqual([]);
      expect(runs.sort()).toEqual(['acme', 'globex']);
    } finally {
      await made.cleanup();
    }
  }, 60_000);
});

describe('cloudflareQueueInbox in workerd', () => {
  const outcomes = new Outcomes();
  const errors: unknown[] = [];
  let mf: Miniflare;
  let inbox: CloudflareQueueInbox;
  let claims: DurableObjectNamespaceLike;
  let ids = 0;
  const fresh = (label: string) => `msg_cf_${label}_${Date.now()}_${ids++}`;

  beforeAll(async () => {
    mf = start('app', 3, async (request) => {
      const path = new URL(request.url).pathname;
      const body = (await request.json()) as Record<string, unknown>;
      if (path === '/outcome') outcomes.record(body as unknown as JobOutcomeEvent);
      if (path === '/error') errors.push(body);
      return {};
    });
    await mf.ready;
    inbox = await nodeInbox(mf, 3);
    claims = (await mf.getDurableObjectNamespace('WEBHOOK_CLAIMS')) as unknown as DurableObjectNamespaceLike;
  }, 60_000);

  afterAll(async () => {
    await mf?.dispose();
  });

  async function deliver(id: string, body: string): Promise<{ status: number; body: unknown }> {
    const signed = await signWebhook({ secret, body, id });
    const response = await mf.dispatchFetch('http://worker.test/webhooks', { method: 'POST', headers: { ...signed.headers, 'content-type': 'application/json' }, body });
    return { status: response.status, body: await response.json() };
  }

  const runs = async (id: string) => (await mf.dispatchFetch(`http://worker.test/runs?id=${id}`)).json();
  const settled = (id: string) => outcomes.of(id).filter((outcome) => outcome === 'processed' || outcome === 'duplicate').length;

  it('accepts in the Worker (202) and processes in its consumer once, completing both claims in the Durable Object store', async () => {
    const id = fresh('accept');
    expect(await deliver(id, '{"type":"invoice.paid"}')).toEqual({ status: 202, body: { enqueued: true } });
    await outcomes.until(() => outcomes.of(id).includes('processed'));
    expect(outcomes.of(id)).toEqual(['processed']);
    expect(await runs(id)).toEqual({ starts: 1, successes: 1, attempts: [1], healed: false });
    const store = durableObjectStore(claims);
    expect(await store.claim(`default:w:s:${id}`, 1000)).toEqual({ status: 'completed' });
    expect(await store.claim(`default:s:${id}`, 1000)).toEqual({ status: 'completed' });
  });

  it('does not enqueue a duplicate twice, whether it comes after the first or at the same time', async () => {
    const later = fresh('dup-later');
    expect((await deliver(later, '{}')).status).toBe(202);
    // The sender's retries: a new timestamp and signature each, the same id.
    expect(await deliver(later, '{}')).toEqual({ status: 200, body: { duplicate: true } });
    expect(await deliver(later, '{}')).toEqual({ status: 200, body: { duplicate: true } });

    const together = fresh('dup-together');
    const answers = await Promise.all(Array.from({ length: 8 }, () => deliver(together, '{}')));
    expect(answers.filter((answer) => answer.status === 202)).toHaveLength(1);
    expect(answers.filter((answer) => answer.status !== 202).every((answer) => answer.status === 200 || answer.status === 409)).toBe(true);

    // A message enqueued twice would show as a second outcome (a duplicate skipped) for its id.
    const sentinel = fresh('dup-sentinel');
    await deliver(sentinel, '{}');
    await outcomes.until(() => [later, together, sentinel].every((id) => outcomes.of(id).includes('processed')));
    expect(await inbox.backlog()).toBe(0);
    expect([outcomes.of(later), outcomes.of(together)]).toEqual([['processed'], ['processed']]);
    expect(await runs(together)).toMatchObject({ starts: 1, successes: 1 });
  });

  it('never runs a handler to success twice when Queues delivers a job more than once, also at the same time', async () => {
    const job = await acceptedJob('{"slowMs":300}', { id: fresh('redelivered') });
    // Three messages of one job: what an at-least-once queue may hand over.
    await Promise.all([inbox.enqueue(job), inbox.enqueue(job), inbox.enqueue(job)]);
    await outcomes.until(() => settled(job.id) === 3, 30_000);
    expect(outcomes.of(job.id).filter((outcome) => outcome === 'processed')).toEqual(['processed']);
    expect(outcomes.of(job.id).filter((outcome) => outcome !== 'processed' && outcome !== 'duplicate' && outcome !== 'deferred')).toEqual([]);
    expect(await runs(job.id)).toMatchObject({ starts: 1, successes: 1 });
  });

  it('sends a job whose claim is held back with a delay, without spending an attempt', async () => {
    const job = await acceptedJob('{}', { id: fresh('busy') });
    // A dead consumer's lease on the job, not expired yet.
    expect((await durableObjectStore(claims).claim(`default:w:s:${job.id}`, 1500)).status).toBe('acquired');
    await inbox.enqueue(job);
    await outcomes.until(() => outcomes.of(job.id).includes('processed'), 20_000);
    expect(outcomes.of(job.id)[0]).toBe('deferred');
    // Spent, the deferral would have made this attempt 2.
    expect(await runs(job.id)).toMatchObject({ starts: 1, successes: 1, attempts: [1] });
  });

  it('dead-letters poison at once into the Durable Object store, lists it, and processes it on retry', async () => {
    const id = fresh('poison');
    expect((await deliver(id, '{"poison":true}')).status).toBe(202);
    await outcomes.until(() => outcomes.of(id).includes('dead_lettered'));
    expect(outcomes.of(id)).toEqual(['dead_lettered']);
    await expect.poll(async () => (await inbox.deadLetters()).some((letter) => letter.webhookId === id), { timeout: 10_000 }).toBe(true);
    const letter = (await inbox.deadLetters()).find((dead) => dead.webhookId === id)!;
    expect(letter).toMatchObject({ namespace: 'default', signed: true, attempts: 1, error: { name: 'PermanentError', message: `poison ${id}` }, failedAt: expect.any(Date) });
    expect(letter.job.id).toBe(id);
    expect(new TextDecoder().decode(base64Decode(letter.job.body))).toBe('{"poison":true}');

    await mf.dispatchFetch(`http://worker.test/heal?id=${id}`, { method: 'POST' });
    expect(await inbox.retry(id)).toBe(true);
    await outcomes.until(() => outcomes.of(id).includes('processed'));
    expect(await runs(id)).toEqual({ starts: 2, successes: 1, attempts: [1, 1], healed: true });
    expect((await inbox.deadLetters()).some((dead) => dead.webhookId === id)).toBe(false);
    expect(await inbox.retry(id)).toBe(false);
  });

  it('purges a dead letter; the accepting claim stays, so the sender\'s late retry is a duplicate', async () => {
    const id = fresh('purged');
    await deliver(id, '{"poison":true}');
    await expect.poll(async () => (await inbox.deadLetters()).some((letter) => letter.webhookId === id), { timeout: 10_000 }).toBe(true);
    expect(await inbox.purge(id, { namespace: 'other' })).toBe(false);
    expect(await inbox.purge(id)).toBe(true);
    expect((await inbox.deadLetters()).some((letter) => letter.webhookId === id)).toBe(false);
    expect(await inbox.purge(id)).toBe(false);
    expect(await deliver(id, '{"poison":true}')).toEqual({ status: 200, body: { duplicate: true } });
  });

  it("records a message Queues itself gave up on (its dead letter queue's consumer)", async () => {
    // max_retries 0 on this queue. The first failure sends the job again (carrying when its first
    // attempt began); the second one's retry() goes to the dead letter queue.
    const short = await nodeInbox(mf, 3, 'SHORT_QUEUE');
    const job = await acceptedJob('{"fail":5}', { id: fresh('exhausted') });
    await short.enqueue(job);
    await expect.poll(async () => (await inbox.deadLetters()).some((letter) => letter.webhookId === job.id), { timeout: 15_000 }).toBe(true);
    expect(outcomes.of(job.id)).toEqual(['retried', 'retried']);
    const letter = (await inbox.deadLetters()).find((dead) => dead.webhookId === job.id);
    expect(letter).toMatchObject({
      attempts: 2,
      error: { name: 'RetriesExhausted', message: expect.stringContaining('max_retries') },
      firstAttemptAt: expect.any(Date),
      failedAt: expect.any(Date),
      job,
    });
    expect(letter!.firstAttemptAt!.getTime()).toBeGreaterThanOrEqual(job.acceptedAt);
    expect(letter!.firstAttemptAt!.getTime()).toBeLessThanOrEqual(letter!.failedAt!.getTime());
    expect(await inbox.purge(job.id)).toBe(true);
  });

  it('a message Queues gave up on although its handler had succeeded (the invocation died before its ack) is no dead letter: not listed, not retried', async () => {
    const job = await acceptedJob('{"charge":1}', { id: fresh('acked_never') });
    const runsHere: string[] = [];
    const acks: string[] = [];
    const message = (attempts: number) => ({
      id: `m-${attempts}`,
      body: { job, attemptsBefore: 0 },
      attempts,
      ack: () => void acks.push(`ack ${attempts}`),
      retry: () => void acks.push(`retry ${attempts}`),
    });
    // The consumer's last delivery: the handler succeeds and the claim is completed in the Durable
    // Object store; its ack never reaches Queues (the invocation died), so Queues moves the message
    // to the dead letter queue, whose consumer records it.
    await inbox.consumer((webhook) => void runsHere.push(webhook.id), { logger: { warn() {}, error() {} } })({ queue: 'webhooks', messages: [message(1)] });
    expect(runsHere).toEqual([job.id]);
    await inbox.deadLetterConsumer()({ queue: 'webhooks-dlq', messages: [message(2)] });
    expect(acks).toEqual(['ack 1', 'ack 2']);
    // Recorded on the shelf, but its claim is completed: not listed, and not sent to run again.
    expect((await inbox.deadLetters()).map((letter) => letter.webhookId)).not.toContain(job.id);
    expect(await inbox.retry(job.id)).toBe(false);
    expect(await inbox.purge(job.id)).toBe(true);
    expect(runsHere).toEqual([job.id]);
  });

  it('refuses a body past the queue\'s message limit with 413 (the claim released), and takes one just inside it', async () => {
    const id = fresh('big');
    const tooBig = JSON.stringify({ pad: 'x'.repeat(96_000) });
    const refused = await deliver(id, tooBig);
    expect(refused).toEqual({ status: 413, body: { error: 'PAYLOAD_TOO_LARGE', message: expect.stringMatching(/^request body of 96010 bytes is too large for the inbox: as a queue message it takes \d+ bytes, past the limit of 128000$/) } });
    expect((await deliver(id, tooBig)).status).toBe(413);
    const fits = fresh('fits');
    expect((await deliver(fits, JSON.stringify({ pad: 'x'.repeat(95_000) }))).status).toBe(202);
    await outcomes.until(() => outcomes.of(fits).includes('processed'));
  });

  it('answers 503 INBOX_UNAVAILABLE with Retry-After when the queue refuses the message, and releases the claim for the retry', async () => {
    const gone = start('app', 3, async () => ({}));
    await gone.ready;
    const inbox = cloudflareQueueInbox({ queue: (await gone.getQueueProducer('WEBHOOK_QUEUE')) as unknown as QueueLike, claims });
    await gone.dispose(); // the queue's runtime is gone: its binding rejects every call
    const store = memoryStore();
    const receive = webhookHandler({ secrets: secret, inbox, idempotency: { store }, onRejected: () => {} });
    const id = fresh('unavailable');
    const signed = await signWebhook({ secret, body: '{}', id });
    const response = await receive(new Request('https://webhooks.test/', { method: 'POST', headers: { ...signed.headers, 'content-type': 'application/json' }, body: '{}' }));
    expect([response.status, response.headers.get('retry-after') !== null, await response.json()]).toEqual([
      503,
      true,
      { error: 'INBOX_UNAVAILABLE', message: 'the inbox could not take the webhook; retry later' },
    ]);
    expect((await store.claim(`default:s:${id}`, 1000)).status).toBe('acquired');
  });

  it("keeps a dead-letter shelf's records oldest first until their time; its alarm then clears the object's storage", async () => {
    const peekable = (await mf.getDurableObjectNamespace('WEBHOOK_CLAIMS_PEEK')) as unknown as DurableObjectNamespaceLike;
    const shelf = `:dead-letters:sweep-${Date.now()}`;
    const ask = (operation: { op: string; [field: string]: unknown }) => askObject(peekable, shelf, operation, 5000, 'durable-object');
    const call = async (path: string, body: unknown = {}) =>
      (await peekable.get(peekable.idFromName(shelf)).fetch(`https://object${path}`, { method: 'POST', headers: {}, body: JSON.stringify(body) })).json();
    const peek = () => call('/peek');
    // The object's clock stands still an hour ahead of the wall clock: however slowly this test
    // runs, no record expires until the clock is moved, and the alarm set at an expiry cannot fire
    // by itself before the test wakes it.
    const t0 = Date.now() + 3_600_000;
    await call('/clock', { time: t0 });
    try {
      await ask({ op: 'shelf.put', key: 'default:s:first', value: '"first"', ms: 600_000 });
      await ask({ op: 'shelf.put', key: 'default:s:short', value: '"short"', ms: 300 });
      expect(await ask({ op: 'shelf.list', limit: 10 })).toEqual({ values: ['"first"', '"short"'] });
      expect(await ask({ op: 'shelf.get', key: 'default:s:short' })).toEqual({ value: '"short"' });
      // The object's one alarm is at the earliest expiry.
      expect(await call('/alarm')).toEqual({ alarm: t0 + 300 });
      // A delete that names the value it read leaves a record written since.
      expect(await ask({ op: 'shelf.delete', key: 'default:s:first', value: '"older"' })).toEqual({ ok: false });
      expect(await ask({ op: 'shelf.delete', key: 'default:s:first', value: '"first"' })).toEqual({ ok: true });
      expect(await ask({ op: 'shelf.delete', key: 'default:s:first' })).toEqual({ ok: false });
      expect(await peek()).toEqual({ tables: ['webhook_receiver_shelf'], rows: [{ key: 'default:s:short' }] });
      // Until its time a record is listed; at its time it is not, though still stored until the alarm.
      await call('/clock', { time: t0 + 299 });
      expect(await ask({ op: 'shelf.list', limit: 10 })).toEqual({ values: ['"short"'] });
      await call('/clock', { time: t0 + 300 });
      expect(await ask({ op: 'shelf.list', limit: 10 })).toEqual({ values: [] });
      expect(await ask({ op: 'shelf.get', key: 'default:s:short' })).toEqual({ value: null });
      expect(await peek()).toEqual({ tables: ['webhook_receiver_shelf'], rows: [{ key: 'default:s:short' }] });
      // The alarm, run by workerd once its time has come, deletes the record, then the object's whole storage.
      await call('/wake');
      await expect.poll(peek, { timeout: 30_000, interval: 50 }).toEqual({ tables: [], rows: [] });
      expect(await ask({ op: 'shelf.list', limit: 10 })).toEqual({ values: [] });
      await expect(ask({ op: 'shelf.list', limit: 0 })).rejects.toMatchObject({ name: 'StoreError', reason: 'bad_reply' });
    } finally {
      await call('/clock', { time: null });
    }
  });

  it('keeps dead letters only on the SQLite backend, and says so', async () => {
    const kv = await nodeInbox(mf, 3, 'WEBHOOK_QUEUE', 'WEBHOOK_CLAIMS_KV');
    await expect(kv.deadLetters()).rejects.toMatchObject({ name: 'StoreError', message: expect.stringContaining('new_sqlite_classes') });
  });

  it('refuses bad options and the worker API with a TypeError or RangeError naming the fix', async () => {
    const queue = { send: async () => undefined };
    expect(() => cloudflareQueueInbox(undefined as never)).toThrow(TypeError);
    expect(() => cloudflareQueueInbox({ queue: {} as never, claims })).toThrow(new TypeError('cloudflareQueueInbox queue must be a Queue producer binding (env.WEBHOOK_QUEUE), got an object'));
    expect(() => cloudflareQueueInbox({ queue, claims: undefined as never })).toThrow(
      new TypeError('cloudflareQueueInbox claims must be the Durable Object namespace binding of the WebhookClaims class (env.WEBHOOK_CLAIMS), got undefined'),
    );
    expect(() => cloudflareQueueInbox({ queue, claims, maxAttempts: 0 })).toThrow(new RangeError('cloudflareQueueInbox maxAttempts must be a whole number from 1 to 1000 (default 12)'));
    expect(() => cloudflareQueueInbox({ queue, claims, name: '' })).toThrow(TypeError);
    const made = cloudflareQueueInbox({ queue, claims });
    await expect(made.work(() => {})).rejects.toThrow(/export inbox\.consumer\(handler\) as queue/);
    expect(() => made.consumer(undefined as never)).toThrow(TypeError);
    expect(() => made.deadLetterConsumer({ maxRetries: 101 })).toThrow(RangeError);
    await expect(made.consumer(() => {})(undefined as never)).rejects.toThrow(TypeError);
    expect(errors).toEqual([]);
  });
});

describe('the bindings as @cloudflare/workers-types declares them (the parts that matter, without that package)', () => {
  type QueueContentType = 'text' | 'bytes' | 'json' | 'v8';
  interface Queue<Body = unknown> {
    metrics(): Promise<{ backlogCount: number; backlogBytes: number; oldestMessageTimestamp?: Date }>;
    send(message: Body, options?: { contentType?: QueueContentType; delaySeconds?: number }): Promise<{ metadata: object }>;
    sendBatch(messages: Iterable<{ body: Body; contentType?: QueueContentType; delaySeconds?: number }>, options?: { delaySeconds?: number }): Promise<{ metadata: object }>;
  }
  interface Message<Body = unknown> {
    readonly id: string;
    readonly timestamp: Date;
    readonly body: Body;
    readonly attempts: number;
    retry(options?: { delaySeconds?: number }): void;
    ack(): void;
  }
  interface MessageBatch<Body = unknown> {
    readonly messages: readonly Message<Body>[];
    readonly queue: string;
    retryAll(options?: { delaySeconds?: number }): void;
    ackAll(): void;
  }
  interface ExportedHandler<Env> {
    queue?: (batch: MessageBatch, env: Env, ctx: { waitUntil(promise: Promise<unknown>): void }) => void | Promise<void>;
  }

  it('type-check: a Queue binding is a QueueLike, and the consumers are queue() exports', () => {
    const worker = (env: { WEBHOOK_QUEUE: Queue<{ id: string }>; WEBHOOK_CLAIMS: DurableObjectNamespaceLike }): ExportedHandler<unknown> => {
      const inbox = cloudflareQueueInbox({ queue: env.WEBHOOK_QUEUE, claims: env.WEBHOOK_CLAIMS });
      return { queue: (batch) => (batch.queue === 'webhooks-dlq' ? inbox.deadLetterConsumer()(batch) : inbox.consumer(() => {})(batch)) };
    };
    expect(typeof worker).toBe('function');
  });
});

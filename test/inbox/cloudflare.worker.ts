/**
 * The Worker that test/inbox/cloudflare.test.ts runs in workerd (through Miniflare): a receiver
 * that accepts into the inbox on Cloudflare Queues, and the queue consumers, all inside workerd.
 * Bundled by the test with esbuild, as Wrangler bundles a Worker.
 *
 * Two modes (the `MODE` binding):
 * - `app`: the handler runs here, counting its starts and successes per id in the RUNS object,
 *   failing as the body asks (`{ "fail": n }` fails the first n attempts, `{ "poison": true }`
 *   throws `PermanentError` until healed, `{ "slowMs": n }` takes that long); the consumer's
 *   claims live in the Durable Object store. Every job outcome is told to the test (NODE).
 * - `bridge`: for the shared inbox conformance test, the handler, the store and the hooks are the
 *   test's own, in Node, reached through the NODE service binding; the engine (the consumer, its
 *   acks, retries, deferrals and dead letters) runs here against the real queues. When the test's
 *   store is the Durable Object store on WEBHOOK_CLAIMS (the ordering cases), the consumer uses
 *   its default store, the one on its `claims` binding, here rather than through Node.
 *
 * Queues: `webhooks` (max_retries = MAX_ATTEMPTS - 1), `webhooks-short` (max_retries 0), both with
 * the dead letter queue `webhooks-dlq`, whose consumer is the inbox's deadLetterConsumer.
 *
 * Routes: POST /webhooks accepts; GET /runs?id= reads the RUNS object; POST /heal?id= heals a poison id.
 */

import { base64Encode } from '../../src/lib/encoding.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { PermanentError, WebhookError, type WebhookErrorCode } from '../../src/errors.ts';
import { cloudflareQueueInbox, type CloudflareQueueInbox, type MessageBatchLike, type QueueLike } from '../../src/inbox/cloudflare/index.ts';
import type { InboxHandler, JobOutcomeEvent, WorkOptions } from '../../src/inbox/types.ts';
import { durableObjectStore, WebhookClaims, type DurableObjectNamespaceLike, type DurableObjectStateLike } from '../../src/stores/durable-object/index.ts';
import type { ClaimResult, IdempotencyStore, OrderedClaimResult } from '../../src/stores/types.ts';

export { WebhookClaims };

/** The same class bound on the key-value backend (`new_classes`): no SQL, so no dead letters. */
export class KeyValueClaims extends WebhookClaims {}

/**
 * The class on a clock the test sets, with ways to look inside: `/peek` reads what its SQL storage
 * holds, `/alarm` when its alarm is set, `/clock` sets its clock (`{ time }`, epoch ms; `null`: the
 * wall clock again), and `/wake` moves its alarm to the wall clock's now, as if time had reached it.
 */
export class PeekClaims extends WebhookClaims {
  /** The objects' clock while a test holds it (one test uses this class at a time). */
  static time: number | undefined;

  protected override now(): number {
    return PeekClaims.time ?? Date.now();
  }

  override async fetch(request: Request): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname === '/clock') {
      const { time } = (await request.json()) as { time: number | null };
      PeekClaims.time = time ?? undefined;
      return Response.json({ ok: true });
    }
    if (pathname === '/alarm') return Response.json({ alarm: (await this.ctx.storage.getAlarm?.()) ?? null });
    if (pathname === '/wake') {
      await this.ctx.storage.setAlarm(Date.now());
      return Response.json({ ok: true });
    }
    if (pathname !== '/peek') return super.fetch(request);
    const sql = (this.ctx.storage as { sql: { exec(query: string): { toArray(): Record<string, unknown>[] } } }).sql;
    const tables = sql.exec(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%'`).toArray().map((row) => row.name);
    const rows = tables.includes('webhook_receiver_shelf') ? sql.exec('SELECT key FROM webhook_receiver_shelf').toArray() : [];
    return Response.json({ tables, rows });
  }
}

interface Namespace extends DurableObjectNamespaceLike {
  get(id: unknown): { fetch(input: Request | string, init?: RequestInit): Promise<Response> };
}

interface Env {
  WEBHOOK_SECRET: string;
  MODE: 'app' | 'bridge';
  MAX_ATTEMPTS: number;
  WEBHOOK_QUEUE: QueueLike;
  SHORT_QUEUE: QueueLike;
  WEBHOOK_CLAIMS: Namespace;
  RUNS: Namespace;
  NODE: { fetch(input: string, init?: RequestInit): Promise<Response> };
}

/** Starts, successes and attempts of the handler for one id, and whether it was healed. */
export class Runs {
  readonly #storage: DurableObjectStateLike['storage'];
  constructor(ctx: DurableObjectStateLike) {
    this.#storage = ctx.storage;
  }
  async fetch(request: Request): Promise<Response> {
    const state = ((await this.#storage.get('state')) as { starts: number; successes: number; attempts: number[]; healed: boolean } | undefined) ?? {
      starts: 0,
      successes: 0,
      attempts: [],
      healed: false,
    };
    const { pathname, searchParams } = new URL(request.url);
    if (pathname === '/start') {
      state.starts++;
      state.attempts.push(Number(searchParams.get('attempt')));
    }
    if (pathname === '/success') state.successes++;
    if (pathname === '/heal') state.healed = true;
    if (pathname !== '/') await this.#storage.put('state', state);
    return Response.json(state);
  }
}

const runsOf = (env: Env, id: string) => env.RUNS.get(env.RUNS.idFromName(id));

async function tell(env: Env, path: string, body: unknown): Promise<Response> {
  return env.NODE.fetch(`https://node.test${path}`, { method: 'POST', body: JSON.stringify(body) });
}

const inboxOf = (env: Env, queue: QueueLike = env.WEBHOOK_QUEUE): CloudflareQueueInbox =>
  cloudflareQueueInbox({ queue, claims: env.WEBHOOK_CLAIMS, maxAttempts: env.MAX_ATTEMPTS, backoff: { delayMs: 0 } });

/** The accepting side: the Fetch handler with the inbox (202, a duplicate 200, 409, 413, 503). */
function accept(request: Request, env: Env): Promise<Response> {
  return webhookHandler({ secrets: env.WEBHOOK_SECRET, inbox: inboxOf(env), idempotency: { store: durableObjectStore(env.WEBHOOK_CLAIMS) }, onRejected: () => {} })(request);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The app's handler, inside workerd. */
function appHandler(env: Env): InboxHandler {
  return async (webhook, context) => {
    const runs = runsOf(env, webhook.id);
    const state = (await (await runs.fetch(`https://runs/start?attempt=${context.attempt}`)).json()) as { healed: boolean };
    const body = webhook.json<{ fail?: number; poison?: boolean; slowMs?: number }>();
    if (body.slowMs !== undefined) await sleep(body.slowMs);
    if (body.poison === true && !state.healed) throw new PermanentError(`poison ${webhook.id}`);
    if (body.fail !== undefined && context.attempt <= body.fail) throw new Error(`failing attempt ${context.attempt}`);
    await runs.fetch('https://runs/success');
  };
}

/** An error as the bridge carries it, back into the class the handler threw. */
function rebuilt(error: { name: string; message: string; code?: WebhookErrorCode }): Error {
  if (error.name === 'PermanentError') return new PermanentError(error.message);
  if (error.code !== undefined) return new WebhookError(error.code, error.message);
  const copy = new Error(error.message);
  copy.name = error.name;
  return copy;
}

/** The conformance test's handler, in Node, called through the bridge. */
function bridgedHandler(env: Env): InboxHandler {
  return async (webhook, context) => {
    const reply = await tell(env, '/handle', {
      id: webhook.id,
      body: base64Encode(webhook.body),
      timestamp: webhook.timestamp.getTime(),
      signed: webhook.signed,
      scheme: webhook.scheme ?? null,
      keyIndex: webhook.keyIndex ?? null,
      keyId: webhook.keyId ?? null,
      tenant: webhook.tenant ?? null,
      attempt: context.attempt,
      maxAttempts: context.maxAttempts,
      acceptedAt: context.acceptedAt.getTime(),
      aborted: context.signal.aborted,
      claimKey: context.claim?.key ?? null,
    });
    const answer = (await reply.json()) as { error?: { name: string; message: string; code?: WebhookErrorCode } };
    if (answer.error !== undefined) throw rebuilt(answer.error);
  };
}

/** The conformance test's store, in Node, called through the bridge. */
function bridgedStore(env: Env, ordered: boolean): IdempotencyStore {
  const ask = async <T>(op: string, args: unknown[]): Promise<T> => (await (await tell(env, `/store/${op}`, args)).json()) as T;
  const store: IdempotencyStore = {
    name: 'bridged',
    claim: (key, lockMs) => ask<ClaimResult>('claim', [key, lockMs]),
    complete: (key, token, ttlMs) => ask<boolean>('complete', [key, token, ttlMs]),
    release: (key, token) => ask<boolean>('release', [key, token]),
    extend: (key, token, lockMs) => ask<boolean>('extend', [key, token, lockMs]),
  };
  // The ordering operations only when the test's store has them (a worker store without them is a case).
  if (!ordered) return store;
  return {
    ...store,
    ordering: {
      claimOrdered: (key, lockMs, ttlMs, order) => ask<OrderedClaimResult>('claimOrdered', [key, lockMs, ttlMs, order]),
      completeOrdered: (key, token, ttlMs, order) => ask<boolean>('completeOrdered', [key, token, ttlMs, order]),
      releaseOrdered: (key, token, order) => ask<boolean>('releaseOrdered', [key, token, order]),
      extendOrdered: (key, token, lockMs, order) => ask<boolean>('extendOrdered', [key, token, lockMs, order]),
      forgetVersion: (entity) => ask<void>('forgetVersion', [entity]),
    },
  };
}

const textOf = (error: unknown) => (error instanceof Error ? { name: error.name, message: error.message } : { name: 'Error', message: String(error) });

async function consume(batch: MessageBatchLike, env: Env): Promise<void> {
  const told: Promise<unknown>[] = [];
  const onOutcome = (event: JobOutcomeEvent) => {
    told.push(tell(env, '/outcome', { ...event, error: event.error === undefined ? undefined : textOf(event.error) }));
  };
  const onError: WorkOptions['onError'] = (error, context) => {
    told.push(tell(env, '/error', { error: textOf(error), context }));
  };
  // Quiet: the failed jobs the tests cause on purpose would be logged as warnings (onOutcome tells the test).
  const logger = { warn: () => {}, error: () => {} };
  try {
    if (batch.queue === 'webhooks-dlq') return await inboxOf(env).deadLetterConsumer({ maxRetries: 0 })(batch);
    const inbox = inboxOf(env, batch.queue === 'webhooks-short' ? env.SHORT_QUEUE : env.WEBHOOK_QUEUE);
    if (env.MODE === 'bridge') {
      const { concurrency, ordered, durableObject } = (await (await tell(env, '/config', {})).json()) as { concurrency: number; ordered: boolean; durableObject: boolean };
      // The test's Durable Object store is the one on this Worker's binding: the consumer's own
      // default (the store on `claims`), as the guide's Worker has it.
      const idempotency = durableObject ? undefined : { store: bridgedStore(env, ordered) };
      return await inbox.consumer(bridgedHandler(env), { ...(idempotency === undefined ? {} : { idempotency }), concurrency, onOutcome, onError, logger })(batch);
    }
    // A short lease: a message found busy comes back when it would have run out (3 s, not 30).
    return await inbox.consumer(appHandler(env), { concurrency: 4, idempotency: { lockSeconds: 3 }, onOutcome, onError, logger })(batch);
  } finally {
    // Told before the invocation ends: workerd may cancel what is left running after it.
    await Promise.allSettled(told);
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const id = url.searchParams.get('id') ?? '';
    if (url.pathname === '/webhooks') return accept(request, env);
    if (url.pathname === '/runs') return runsOf(env, id).fetch('https://runs/');
    if (url.pathname === '/heal') return runsOf(env, id).fetch('https://runs/heal');
    return new Response('not found', { status: 404 });
  },
  queue: consume,
};

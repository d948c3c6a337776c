/**
 * The Worker that test/stores/durable-object.test.ts runs in workerd (through Miniflare): the
 * Durable Object store and its object, the real receiver, and the conformance kit, all inside
 * workerd. Bundled by the test with esbuild, as Wrangler bundles a Worker.
 *
 * Routes:
 * - POST /check?binding=NAME runs `checkStore` against the store on that binding and answers its report;
 * - POST /webhooks runs the receiver, whose handler counts its runs in the RUNS object;
 * - GET /runs?id=… answers how many times the handler ran for an id;
 * - POST /store/<operation>[?binding=NAME][&unsignedMax=N] runs one store operation ({ key, token, ms }) and answers its result
 *   (a refused claim as `{ refused: reason }`);
 * - POST /object/<abort|peek>?key=…[&binding=NAME] restarts the key's object, or reads what it stores;
 * - POST /earlier-layout[?binding=NAME] ({ key, entity }) completes an id in its entity's object, where
 *   releases before this one kept ordered ids, then claims it with the store, ordered and not.
 */

import { createReceiver } from '../../src/receiver.ts';
import { durableObjectStore, StoreError, WebhookClaims, type DurableObjectNamespaceLike, type DurableObjectStateLike } from '../../src/stores/durable-object/index.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import { checkStore, StoreConformanceError } from '../../src/testing/check-store.ts';
import { encodeVersion } from '../../src/ordering.ts';

/** A namespace binding as workerd passes it (its stubs take a Request too). */
interface Namespace extends DurableObjectNamespaceLike {
  get(id: unknown): { fetch(input: Request | string, init?: RequestInit): Promise<Response> };
}

interface Env {
  WEBHOOK_SECRET: string;
  /** The store's object on the SQLite backend, with two test hooks. */
  WEBHOOK_CLAIMS: Namespace;
  /** The same object on the key-value backend (`new_classes`). */
  WEBHOOK_CLAIMS_KV: Namespace;
  /** An object that never answers: the store's backend unreachable. */
  UNRESPONSIVE: Namespace;
  /** Counts handler runs per id. */
  RUNS: Namespace;
}

interface TestState extends DurableObjectStateLike {
  abort(reason?: string): void;
  storage: DurableObjectStateLike['storage'] & { sql: { exec(query: string): { toArray(): Record<string, unknown>[] } } };
}

/** The store's object with two hooks for tests: restart it in place, and read its storage. */
export class TestClaims extends WebhookClaims {
  override async fetch(request: Request): Promise<Response> {
    const { pathname } = new URL(request.url);
    const ctx = this.ctx as TestState;
    if (pathname === '/abort') ctx.abort('restarted by the test');
    if (pathname === '/peek') {
      const tables = ctx.storage.sql.exec(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%'`).toArray();
      const rows = tables.length === 0 ? [] : ctx.storage.sql.exec('SELECT key, done, expires_at FROM webhook_receiver_claims').toArray();
      return Response.json({ tables: tables.map((t) => t.name), rows });
    }
    return super.fetch(request);
  }
}

/**
 * The key-value backend: the same class, bound without SQLite, with the same peek. Its storage
 * shows as one table, `kv`, while it holds anything, and its records as the SQLite rows look.
 */
export class KeyValueClaims extends WebhookClaims {
  override async fetch(request: Request): Promise<Response> {
    if (new URL(request.url).pathname !== '/peek') return super.fetch(request);
    const entries = [...(await this.ctx.storage.list())] as [string, { done: boolean; until: number }][];
    const rows = entries.map(([key, record]) => ({ key, done: record.done ? 1 : 0, expires_at: record.until }));
    return Response.json({ tables: entries.length === 0 ? [] : ['kv'], rows });
  }
}

/** Never answers. */
export class Unresponsive {
  fetch(): Promise<Response> {
    return new Promise(() => {});
  }
}

/** Counts the handler's runs per webhook id. */
export class Runs {
  readonly #storage: DurableObjectStateLike['storage'];
  constructor(ctx: DurableObjectStateLike) {
    this.#storage = ctx.storage;
  }
  async fetch(request: Request): Promise<Response> {
    const count = ((await this.#storage.get('count')) as number | undefined) ?? 0;
    if (request.method === 'POST') await this.#storage.put('count', count + 1);
    return Response.json({ count: request.method === 'POST' ? count + 1 : count });
  }
}

const stub = (namespace: Namespace, name: string) => namespace.get(namespace.idFromName(name));

/** The store's object on the SQLite backend, or on the key-value one (`?binding=WEBHOOK_CLAIMS_KV`). */
const claimsOf = (env: Env, url: URL): Namespace => (url.searchParams.get('binding') === 'WEBHOOK_CLAIMS_KV' ? env.WEBHOOK_CLAIMS_KV : env.WEBHOOK_CLAIMS);

async function check(env: Env, url: URL): Promise<Response> {
  const namespace = claimsOf(env, url);
  const name = durableObjectStore(namespace).name;
  try {
    const report = await checkStore(() => durableObjectStore(namespace), {
      shared: true,
      tokenPattern: /^[0-9a-f]{32}$/,
      unreachable: () => durableObjectStore(env.UNRESPONSIVE, { timeoutMs: 300 }),
    });
    return Response.json({ name, report });
  } catch (error) {
    if (error instanceof StoreConformanceError) return Response.json({ name, failed: error.message, report: error.report });
    throw error;
  }
}

async function webhooks(request: Request, env: Env): Promise<Response> {
  const store = durableObjectStore(env.WEBHOOK_CLAIMS);
  const receiver = createReceiver({ secrets: env.WEBHOOK_SECRET, idempotency: { store } });
  const result = await receiver.handle(request, async (webhook) => {
    const { count } = (await (await stub(env.RUNS, webhook.id).fetch(new Request('https://runs/', { method: 'POST' }))).json()) as { count: number };
    // Hold the claim a little, so duplicates arrive while the handler runs.
    await new Promise((resolve) => setTimeout(resolve, 20));
    return count;
  });
  return Response.json(result.outcome === 'processed' ? { outcome: result.outcome, run: result.value } : { outcome: result.outcome });
}

async function storeOperation(operation: string, request: Request, env: Env, url: URL): Promise<Response> {
  const unsignedMax = url.searchParams.get('unsignedMax');
  const store: IdempotencyStore = durableObjectStore(claimsOf(env, url), unsignedMax === null ? {} : { unsignedMax: Number(unsignedMax) });
  const { key, token, ms } = (await request.json()) as { key: string; token: string; ms: number };
  if (operation === 'claim') {
    // A refusal is an answer the tests read: its reason.
    return Response.json(await store.claim(key, ms).catch((error: unknown) => ({ refused: error instanceof StoreError ? error.reason : String(error) })));
  }
  if (operation === 'complete') return Response.json(await store.complete(key, token, ms));
  if (operation === 'release') return Response.json(await store.release(key, token));
  if (operation === 'extend') return Response.json(await store.extend!(key, token, ms));
  return new Response('no such operation', { status: 404 });
}

async function earlierLayout(request: Request, env: Env, url: URL): Promise<Response> {
  const namespace = claimsOf(env, url);
  const { key, entity } = (await request.json()) as { key: string; entity: string };
  // The record an ordered completion left in the entity's object before this release: the id's
  // claim record, under the id, in the object named after the entity (the store's prefix is '').
  const entityObject = stub(namespace, entity);
  const send = async (operation: { op: string; key: string; token: string; ms: number }) =>
    (await entityObject.fetch(new Request(`https://webhook-claims.invalid/${operation.op}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(operation) }))).json();
  const token = 'c'.repeat(32);
  const written = [await send({ op: 'claim', key, token, ms: 30_000 }), await send({ op: 'complete', key, token, ms: 600_000 })];
  const store = durableObjectStore(namespace);
  const ordered = await store.ordering.claimOrdered(key, 30_000, 600_000, { entity, version: encodeVersion(1), exclusive: true });
  const plain = await store.claim(key, 30_000);
  const next = await store.ordering.claimOrdered(`${key}_next`, 30_000, 600_000, { entity, version: encodeVersion(2), exclusive: true });
  return Response.json({ written, ordered, plain, next: next.status });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [, route, operation] = url.pathname.split('/');
    if (route === 'check') return check(env, url);
    if (route === 'webhooks') return webhooks(request, env);
    if (route === 'runs') return stub(env.RUNS, url.searchParams.get('id')!).fetch(new Request('https://runs/'));
    if (route === 'store') return storeOperation(operation!, request, env, url);
    if (route === 'earlier-layout') return earlierLayout(request, env, url);
    if (route === 'object') {
      try {
        return await stub(claimsOf(env, url), url.searchParams.get('key')!).fetch(new Request(`https://object/${operation}`, { method: 'POST' }));
      } catch (error) {
        return Response.json({ error: String(error) }, { status: 502 });
      }
    }
    return new Response('not found', { status: 404 });
  },
};

/**
 * The Durable Object store in workerd, through Miniflare (offline): the conformance kit inside
 * workerd on the SQLite and key-value backends, concurrent duplicates through the real receiver,
 * a claim that survives its object's restart and Miniflare's, the alarm that clears storage
 * (on both backends), and ordered ids that earlier releases kept in their entity's object.
 * The Worker under test is test/stores/durable-object.worker.ts, bundled here with esbuild.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import type { ClaimResult } from '../../src/stores/types.ts';
import type { StoreConformanceReport } from '../../src/testing/check-store.ts';
import { bundleWorker } from '../runtimes/harness.ts';

const secret = generateSecret();
let script: string;
let persist: string;
let mf: Miniflare;

function start(): Miniflare {
  return new Miniflare({
    modules: true,
    script,
    compatibilityDate: '2025-06-01',
    bindings: { WEBHOOK_SECRET: secret },
    durableObjects: {
      WEBHOOK_CLAIMS: { className: 'TestClaims', useSQLite: true },
      WEBHOOK_CLAIMS_KV: { className: 'KeyValueClaims' },
      UNRESPONSIVE: { className: 'Unresponsive' },
      RUNS: { className: 'Runs', useSQLite: true },
    },
    durableObjectsPersist: persist,
  });
}

beforeAll(async () => {
  script = await bundleWorker(import.meta.dirname, 'durable-object.worker.ts');
  persist = mkdtempSync(join(tmpdir(), 'webhook-receiver-do-'));
  mf = start();
  await mf.ready;
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
  if (persist) rmSync(persist, { recursive: true, force: true });
});

/** What the tests send: Miniflare's fetch takes undici's init, not the DOM's. */
type Init = { method?: string; headers?: Record<string, string>; body?: string };

async function call<T>(path: string, init?: Init): Promise<T> {
  const response = await mf.dispatchFetch(`http://worker.test${path}`, init);
  const text = await response.text();
  if (!response.ok) throw new Error(`${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

const operation = <T>(name: string, body: { key: string; token?: string; ms?: number }, binding = 'WEBHOOK_CLAIMS') =>
  call<T>(`/store/${name}?binding=${binding}`, { method: 'POST', body: JSON.stringify(body) });

const owner = (result: ClaimResult): string => {
  if (result.status !== 'acquired') throw new Error(`expected acquired, got ${result.status}`);
  return result.token;
};

describe('durableObjectStore in workerd', () => {
  it.each(['WEBHOOK_CLAIMS', 'WEBHOOK_CLAIMS_KV'])('keeps every rule of the store contract (checkStore inside workerd, %s)', async (binding) => {
    const result = await call<{ name: string; report: StoreConformanceReport; failed?: string }>(`/check?binding=${binding}`, { method: 'POST' });
    expect(result.name).toBe('durable-object');
    expect(result.failed).toBeUndefined();
    expect(result.report.rules.filter((rule) => rule.outcome !== 'passed')).toEqual([]);
    // The contract's 17 rules and the 10 ordering rules.
    expect(result.report.passed).toBe(27);
  }, 90_000);

  it.each(['WEBHOOK_CLAIMS', 'WEBHOOK_CLAIMS_KV'])('an id completed in its entity’s object (the layout of earlier releases) is a duplicate, ordered or not, and takes no lock (%s)', async (binding) => {
    const key = `default:s:evt_earlier_${binding}`;
    const result = await call<{ written: unknown[]; ordered: unknown; plain: unknown; next: string }>(`/earlier-layout?binding=${binding}`, {
      method: 'POST',
      body: JSON.stringify({ key, entity: `default:o:earlier_${binding}` }),
    });
    expect(result.written).toEqual([{ status: 'acquired' }, { ok: true }]);
    expect(result.ordered).toEqual({ status: 'completed' });
    // Moved to the id's own object: an unordered delivery finds it too.
    expect(result.plain).toEqual({ status: 'completed' });
    expect(result.next).toBe('acquired');
  });

  it('runs the handler once for 50 concurrent duplicates sent as separate requests', async () => {
    const id = `msg_do_${Date.now()}`;
    const body = '{"type":"invoice.paid"}';
    const signed = await signWebhook({ secret, body, id });
    const started = performance.now();
    const replies = await Promise.all(
      Array.from({ length: 50 }, () =>
        call<{ outcome: string; run?: number }>('/webhooks', { method: 'POST', headers: { ...signed.headers, 'content-type': 'application/json' }, body }),
      ),
    );
    const ms = Math.round(performance.now() - started);
    const processed = replies.filter((reply) => reply.outcome === 'processed');
    console.log(`50 concurrent duplicates in workerd: ${processed.length} handler run, ${replies.length - processed.length} refused, in ${ms} ms`);
    expect(processed).toEqual([{ outcome: 'processed', run: 1 }]);
    expect(replies.filter((reply) => reply.outcome !== 'processed' && reply.outcome !== 'in_progress' && reply.outcome !== 'duplicate')).toEqual([]);
    expect(await call<{ count: number }>(`/runs?id=${id}`)).toEqual({ count: 1 });
    // A retry after the handler finished is a duplicate, and runs nothing.
    expect(await call('/webhooks', { method: 'POST', headers: { ...signed.headers, 'content-type': 'application/json' }, body })).toEqual({ outcome: 'duplicate' });
    expect(await call<{ count: number }>(`/runs?id=${id}`)).toEqual({ count: 1 });
  });

  it('keeps a claim, and then its completion, across restarts of its object and of Miniflare', async () => {
    const held = `restart:s:held-${Date.now()}`;
    const done = `restart:s:done-${Date.now()}`;
    const heldToken = owner(await operation<ClaimResult>('claim', { key: held, ms: 60_000 }));
    const doneToken = owner(await operation<ClaimResult>('claim', { key: done, ms: 60_000 }));

    // ctx.abort() restarts the object in place; the request that asked for it fails.
    const aborted = await call<{ error: string }>(`/object/abort?key=${encodeURIComponent(held)}`, { method: 'POST' }).catch((error: Error) => error);
    expect(aborted).toBeInstanceOf(Error);
    expect((aborted as Error).message).toMatch(/restarted by the test/);
    expect(await operation<ClaimResult>('claim', { key: held, ms: 60_000 })).toMatchObject({ status: 'processing' });
    expect(await operation<boolean>('complete', { key: done, token: doneToken, ms: 600_000 })).toBe(true);
    await call(`/object/abort?key=${encodeURIComponent(done)}`, { method: 'POST' }).catch(() => undefined);
    expect(await operation<ClaimResult>('claim', { key: done, ms: 60_000 })).toEqual({ status: 'completed' });

    // Miniflare disposed and created again on the same persisted storage: a new workerd process.
    await mf.dispose();
    mf = start();
    await mf.ready;
    expect(await operation<ClaimResult>('claim', { key: held, ms: 60_000 })).toMatchObject({ status: 'processing' });
    expect(await operation<ClaimResult>('claim', { key: done, ms: 60_000 })).toEqual({ status: 'completed' });
    // The owner from before the restarts still owns its claim, and nobody else does.
    expect(await operation<boolean>('release', { key: held, token: doneToken })).toBe(false);
    expect(await operation<boolean>('complete', { key: held, token: heldToken, ms: 600_000 })).toBe(true);
    expect(await operation<ClaimResult>('claim', { key: held, ms: 60_000 })).toEqual({ status: 'completed' });
  }, 60_000);

  it.each(['WEBHOOK_CLAIMS', 'WEBHOOK_CLAIMS_KV'])('keeps unsigned ids in buckets of at most unsignedMax records (%s)', async (binding) => {
    // unsignedMax 2: one bucket of two, the object `:u:0`.
    const bucketOperation = <T>(name: string, body: { key: string; token?: string; ms?: number }) =>
      call<T>(`/store/${name}?binding=${binding}&unsignedMax=2`, { method: 'POST', body: JSON.stringify(body) });
    const run = Date.now();
    const [a, b, c] = [`bucket:u:a_${run}`, `bucket:u:b_${run}`, `bucket:u:c_${run}`];
    const peek = () => call<{ rows: { key: string }[] }>(`/object/peek?key=${encodeURIComponent(':u:0')}&binding=${binding}`, { method: 'POST' });
    const aToken = owner(await bucketOperation<ClaimResult>('claim', { key: a, ms: 60_000 }));
    const bToken = owner(await bucketOperation<ClaimResult>('claim', { key: b, ms: 60_000 }));
    // Past the budget: a third unsigned id is refused while both are being processed...
    expect(await bucketOperation('claim', { key: c, ms: 60_000 })).toEqual({ refused: 'unsigned_limit' });
    // ...and a signed id of the same name, in an object of its own, is not.
    expect((await bucketOperation<ClaimResult>('claim', { key: `bucket:s:c_${run}`, ms: 60_000 })).status).toBe('acquired');
    expect(await bucketOperation<boolean>('complete', { key: a, token: aToken, ms: 60_000 })).toBe(true);
    expect(await bucketOperation('claim', { key: a, ms: 60_000 })).toEqual({ status: 'completed' });
    // Once one completed, the next unsigned id takes its place: that one is forgotten early.
    owner(await bucketOperation<ClaimResult>('claim', { key: c, ms: 60_000 }));
    expect((await peek()).rows.map((row) => row.key).sort()).toEqual([b, c]);
    expect(await bucketOperation<boolean>('release', { key: b, token: bToken })).toBe(true);
    expect((await bucketOperation<ClaimResult>('claim', { key: a, ms: 60_000 })).status).toBe('acquired');
    expect((await peek()).rows.map((row) => row.key).sort()).toEqual([a, c]);
  });

  // The key-value backend sweeps by listing its storage (no SQL): the same alarm, another path.
  it.each(['WEBHOOK_CLAIMS', 'WEBHOOK_CLAIMS_KV'])('clears an expired completion’s storage by alarm, without any further request to its key (%s)', async (binding) => {
    const key = `alarm:s:${binding}:${Date.now()}`;
    const token = owner(await operation<ClaimResult>('claim', { key, ms: 60_000 }, binding));
    expect(await operation<boolean>('complete', { key, token, ms: 300 }, binding)).toBe(true);
    const peek = () => call<{ tables: string[]; rows: unknown[] }>(`/object/peek?key=${encodeURIComponent(key)}&binding=${binding}`, { method: 'POST' });
    expect((await peek()).rows).toEqual([{ key, done: 1, expires_at: expect.any(Number) }]);
    // Wait on the alarm (bounded): the record, then the object's whole storage, goes.
    let seen = await peek();
    for (let i = 0; i < 100 && seen.tables.length > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      seen = await peek();
    }
    expect(seen).toEqual({ tables: [], rows: [] });
    // The object works again afterwards.
    expect((await operation<ClaimResult>('claim', { key, ms: 60_000 }, binding)).status).toBe('acquired');
  });
});

/**
 * The Worker's `fetch`, called with real `Request`s and an `env` as workerd passes it, whose
 * `WEBHOOK_CLAIMS` binding is a real Durable Object namespace: the example's own `WebhookClaims`
 * running in workerd (Miniflare), reached from Node through Miniflare's binding proxy. The same
 * file also runs inside workerd itself, without Node compatibility, in test/runtimes.
 */

import { resolve } from 'node:path';
import { Miniflare } from 'miniflare';
import { generateSecret, signWebhook } from 'webhook-receiver';
import type { DurableObjectNamespaceLike } from 'webhook-receiver/cloudflare';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi, type MockInstance } from 'vitest';
import worker, { type Env } from '../../examples/cloudflare-worker.ts';
import { bundleWorker } from '../runtimes/harness.ts';
import { BODY, envelope } from './support.ts';

const URL_BASE = 'https://webhooks.example.workers.dev';

// The Worker inside workerd has one secret for the whole file (its bindings are fixed at start).
const workerdSecret = generateSecret();
let mf: Miniflare;
let claims: DurableObjectNamespaceLike;

beforeAll(async () => {
  // The example bundled as Wrangler would, so workerd runs the WebhookClaims class it exports.
  const root = resolve(import.meta.dirname, '../..');
  const script = await bundleWorker(root, 'examples/cloudflare-worker.ts', undefined, { tsconfig: resolve(root, 'tsconfig.json') });
  mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: '2025-06-01',
    bindings: { WEBHOOK_SECRET: workerdSecret },
    durableObjects: { WEBHOOK_CLAIMS: { className: 'WebhookClaims', useSQLite: true } },
  });
  claims = (await mf.getDurableObjectNamespace('WEBHOOK_CLAIMS')) as unknown as DurableObjectNamespaceLike;
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
});

/** An env as workerd passes it, with the Durable Object binding. */
const envWith = (secrets: Omit<Env, 'WEBHOOK_CLAIMS'>): Env => ({ ...secrets, WEBHOOK_CLAIMS: claims });

async function call(env: Env, path: string, init: RequestInit): Promise<{ status: number; body: unknown }> {
  const response = await worker.fetch(new Request(`${URL_BASE}${path}`, init), env);
  const text = await response.text();
  return { status: response.status, body: response.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text };
}

async function deliver(env: Env, secret: string | string[], options: { id?: string; body?: string } = {}): Promise<{ status: number; body: unknown }> {
  const signed = await signWebhook({ secret, body: BODY, id: options.id });
  return call(env, '/webhooks', { method: 'POST', headers: { 'content-type': 'application/json', ...signed.headers }, body: options.body ?? BODY });
}

let log: MockInstance<typeof console.log>;
let warn: MockInstance<typeof console.warn>;
beforeEach(() => {
  log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
  warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** The ids the example's handler logged: one line per handler run. */
const handled = (): string[] => log.mock.calls.map(([line]) => String(line).split(':')[0]!);

describe('examples/cloudflare-worker.ts', () => {
  it('processes a signed event once and answers its retry as a duplicate', async () => {
    const env = envWith({ WEBHOOK_SECRET: generateSecret() });
    expect(await deliver(env, env.WEBHOOK_SECRET, { id: 'msg_worker_1' })).toEqual({
      status: 200,
      body: { received: true, id: 'msg_worker_1', keyId: 'WEBHOOK_SECRET' },
    });
    expect(await deliver(env, env.WEBHOOK_SECRET, { id: 'msg_worker_1' })).toEqual({ status: 200, body: { duplicate: true } });
    expect(handled()).toEqual(['webhook msg_worker_1']);
  });

  it('refuses a tampered body and a forged signature in the error envelope', async () => {
    const env = envWith({ WEBHOOK_SECRET: generateSecret() });
    expect(await deliver(env, env.WEBHOOK_SECRET, { body: BODY.replace('in_1', 'in_2') })).toEqual({
      status: 401,
      body: envelope('SIGNATURE_MISMATCH', /^no signature matched: 1 v1 entry tried against 1 HMAC secret\./),
    });
    expect(await deliver(env, generateSecret())).toEqual({ status: 401, body: envelope('SIGNATURE_MISMATCH', /^no signature matched/) });
    expect(handled()).toEqual([]);
    // The default onRejected: one line per rejection in the Worker's logs, without the secret.
    expect(warn.mock.calls.map(([line]) => /^\[webhook-receiver\] rejected POST \/webhooks: ([A-Z_]+) /.exec(String(line))?.[1])).toEqual([
      'SIGNATURE_MISMATCH',
      'SIGNATURE_MISMATCH',
    ]);
    expect(warn.mock.calls.join('\n')).not.toContain(env.WEBHOOK_SECRET);
  });

  it('trusts WEBHOOK_SECRET_PREVIOUS during a rotation, names it, and stops when it is removed', async () => {
    const current = generateSecret();
    const previous = generateSecret();
    const rotating = envWith({ WEBHOOK_SECRET: current, WEBHOOK_SECRET_PREVIOUS: previous });
    expect(await deliver(rotating, [current, previous], { id: 'msg_worker_both' })).toEqual({
      status: 200,
      body: { received: true, id: 'msg_worker_both', keyId: 'WEBHOOK_SECRET' },
    });
    expect(await deliver(rotating, previous, { id: 'msg_worker_old' })).toEqual({
      status: 200,
      body: { received: true, id: 'msg_worker_old', keyId: 'WEBHOOK_SECRET_PREVIOUS' },
    });
    // The old secret retired: the binding is gone, and the handler is rebuilt without it.
    const retired = envWith({ WEBHOOK_SECRET: current });
    expect(await deliver(retired, previous)).toEqual({ status: 401, body: envelope('SIGNATURE_MISMATCH', /against 1 HMAC secret\./) });
    // The rebuilt handler shares the Durable Objects: a retry of an event processed before the
    // change is still a duplicate.
    expect(await deliver(retired, current, { id: 'msg_worker_both' })).toEqual({ status: 200, body: { duplicate: true } });
    expect(handled()).toEqual(['webhook msg_worker_both', 'webhook msg_worker_old']);
  });

  it('deduplicates across isolates: a retry that lands on the Worker inside workerd is a duplicate', async () => {
    const env = envWith({ WEBHOOK_SECRET: workerdSecret });
    expect(await deliver(env, env.WEBHOOK_SECRET, { id: 'msg_worker_isolates' })).toMatchObject({ status: 200, body: { received: true } });
    // The same Worker in workerd: another isolate, with nothing in memory from this one.
    const signed = await signWebhook({ secret: env.WEBHOOK_SECRET, body: BODY, id: 'msg_worker_isolates' });
    const other = await mf.dispatchFetch(`${URL_BASE}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signed.headers },
      body: BODY,
    });
    expect([other.status, await other.json()]).toEqual([200, { duplicate: true }]);
    expect(handled()).toEqual(['webhook msg_worker_isolates']);
  });

  it('answers 404 off the webhook path and 405 for other methods', async () => {
    const env = envWith({ WEBHOOK_SECRET: generateSecret() });
    expect(await call(env, '/', { method: 'POST', body: BODY })).toEqual({ status: 404, body: 'Not found' });
    const get = await worker.fetch(new Request(`${URL_BASE}/webhooks`), env);
    expect([get.status, get.headers.get('allow'), await get.text()]).toEqual([405, 'POST', 'Method not allowed']);
  });
});

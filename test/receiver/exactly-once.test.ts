/**
 * Exactly once under the failures that really happen: unsigned traffic kept apart,
 * lease renewal for slow handlers, failing closed on a broken store, completion idempotent for
 * its own token, tenant namespaces, per-request construction caught, `close()`.
 */

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebhookError } from '../../src/errors.ts';
import { createReceiver, type WebhookContext } from '../../src/receiver.ts';
import { signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { unsignedBucket, unsignedBuckets } from '../../src/stores/internal.ts';
import { DEFAULT_UNSIGNED_MAX, StoreError, type ClaimResult, type IdempotencyStore } from '../../src/stores/types.ts';
import type { WebhookInput } from '../../src/verify.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';
import { openBackend, STORE_KINDS, type StoreBackend } from '../support/stores.ts';
import { SECRET, delivery, errorLog } from './support.ts';

/** An unsigned delivery of `id`: the id and a timestamp, no signature. */
function unsignedDelivery(id: string, body = '{"type":"guess"}'): WebhookInput {
  return { headers: { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) }, body };
}

/** A promise and the function that resolves it. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe.each(STORE_KINDS)('exactly once over $kind', ({ kind, available }) => {
  let backend: StoreBackend;
  let spaces = 0;
  const test = it.skipIf(!available);
  beforeAll(async () => {
    if (available) backend = await openBackend(kind);
  });
  afterAll(async () => {
    await backend?.close();
  });

  test('an unsigned request with a guessed id neither claims nor blocks the signed event of that id', async () => {
    const store = backend.open(`eo${++spaces}`);
    const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept', idempotency: { store } });
    const runs: string[] = [];
    // The attacker's guess arrives first, and is processed as what it is: unsigned.
    const guess = await receiver.handle(unsignedDelivery('msg_target'), (webhook) => void runs.push(`unsigned ${webhook.id}`));
    expect(guess).toMatchObject({ outcome: 'processed', webhook: { signed: false } });
    // The genuine signed event is still processed, once.
    expect((await receiver.handle(await delivery('msg_target'), (webhook) => void runs.push(`signed ${webhook.id}`))).outcome).toBe('processed');
    expect((await receiver.handle(await delivery('msg_target'), () => void runs.push('again'))).outcome).toBe('duplicate');
    expect((await receiver.handle(unsignedDelivery('msg_target'), () => void runs.push('again'))).outcome).toBe('duplicate');
    expect(runs).toEqual(['unsigned msg_target', 'signed msg_target']);
    // The unsigned id lives in the bucket of the hashes that bound unsigned ids.
    if (kind !== 'memory') expect(await backend.keys(`eo${spaces}`)).toEqual([`:u:${unsignedBucket('default:u:msg_target', unsignedBuckets(DEFAULT_UNSIGNED_MAX).buckets)}`, 'default:s:msg_target']);
  });

  test('a handler slower than lockSeconds is renewed: a retry meanwhile is in_progress, and it runs once', async () => {
    const store = backend.open(`eo${++spaces}`);
    const log = errorLog();
    const receiver = createReceiver({ secrets: SECRET, onError: log.onError, idempotency: { store, lockSeconds: 1 } });
    let runs = 0;
    let signal: AbortSignal | undefined;
    const started = gate();
    const finish = gate();
    const first = receiver.handle(await delivery('msg_slow'), async (_webhook, context) => {
      runs++;
      signal = context.signal;
      started.open();
      await finish.promise;
      return 'done';
    });
    await started.promise;
    // Three locks long: without renewal the claim would have expired twice over.
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      const retry = await receiver.handle(await delivery('msg_slow'), () => runs++);
      expect(retry.outcome).toBe('in_progress');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    finish.open();
    expect(await first).toMatchObject({ outcome: 'processed', value: 'done' });
    expect((await receiver.handle(await delivery('msg_slow'), () => runs++)).outcome).toBe('duplicate');
    expect(runs).toBe(1);
    expect(signal?.aborted).toBe(false);
    expect(log.entries).toEqual([]);
  }, 20_000);

  test('a lost lease aborts context.signal and tells onError', async () => {
    const store = backend.open(`eo${++spaces}`);
    const log = errorLog();
    // The claim is taken over behind the handler's back: its key is deleted (Redis) or its
    // clock jumps past the lock (memory), so the next renewal finds it gone.
    let now = Date.now();
    const clockStore = kind === 'memory' ? memoryStore({ now: () => now }) : store;
    const receiver = createReceiver({ secrets: SECRET, onError: log.onError, idempotency: { store: clockStore, lockSeconds: 0.6 } });
    const aborted = gate();
    const started = gate();
    const result = receiver.handle(await delivery('msg_lost'), async (_webhook, context) => {
      context.signal.addEventListener('abort', () => aborted.open(), { once: true });
      started.open();
      await aborted.promise;
      return context.signal.reason as Error;
    });
    await started.promise;
    if (kind === 'memory') now += 10_000;
    else {
      const admin = await connectIORedis(sharedRedisUrl!);
      await admin.del(`${backend.prefix(`eo${spaces}`)}default:s:msg_lost`);
      admin.disconnect();
    }
    const outcome = await result;
    expect(outcome).toMatchObject({ outcome: 'processed' });
    expect(String((outcome as { value: Error }).value.message)).toMatch(/lost|ran out/);
    expect(log.entries.some((entry) => entry.stage === 'renew' && entry.webhookId === 'msg_lost' && entry.willRetry === false)).toBe(true);
  }, 20_000);

  test('completing again with the same token is not reported as a takeover (a completion applied late)', async () => {
    const inner = backend.open(`eo${++spaces}`);
    const log = errorLog();
    let first = true;
    // The first completion lands, but its answer is lost (a timeout): the receiver retries it.
    const store: IdempotencyStore = {
      claim: (key, lockMs) => inner.claim(key, lockMs),
      release: (key, token) => inner.release(key, token),
      extend: (key, token, lockMs) => inner.extend!(key, token, lockMs),
      async complete(key, token, ttlMs) {
        const applied = await inner.complete(key, token, ttlMs);
        if (first) {
          first = false;
          throw new StoreError('redis', 'timeout', `applied: ${applied}, but the answer timed out`);
        }
        return applied;
      },
    };
    const receiver = createReceiver({ secrets: SECRET, onError: log.onError, idempotency: { store } });
    const claim = await receiver.claim(await delivery('msg_late'));
    await claim.complete();
    await claim.pending();
    expect(log.entries).toEqual([expect.objectContaining({ stage: 'complete', webhookId: 'msg_late', willRetry: true })]);
    expect((await receiver.handle(await delivery('msg_late'), () => 1)).outcome).toBe('duplicate');
  });
});

describe('exactly once: the memory store and the receiver', () => {
  it('100 000 unsigned ids do not flush a completed signed id from the default memory store', async () => {
    const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept' });
    expect((await receiver.handle(await delivery('msg_paid'), () => 1)).outcome).toBe('processed');
    for (let i = 0; i < 100_000; i++) {
      const result = await receiver.handle(unsignedDelivery(`msg_flood_${i}`), () => 1);
      if (result.outcome !== 'processed') throw new Error(`unsigned ${i}: ${result.outcome}`);
    }
    expect((await receiver.handle(await delivery('msg_paid'), () => 2)).outcome).toBe('duplicate');
  }, 60_000);

  it('a memory store full of live claims answers STORE_UNAVAILABLE rather than evict one', async () => {
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store: memoryStore({ max: 2 }) } });
    const a = await receiver.claim(await delivery('msg_a'));
    const b = await receiver.claim(await delivery('msg_b'));
    expect([a.outcome, b.outcome]).toEqual(['acquired', 'acquired']);
    const refused = await receiver.claim(await delivery('msg_c')).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503, cause: { reason: 'full' } });
    // A duplicate of a held claim is still refused as in progress: nothing was evicted.
    expect((await receiver.claim(await delivery('msg_a'))).outcome).toBe('in_progress');
    await a.complete();
    expect((await receiver.claim(await delivery('msg_c'))).outcome).toBe('acquired');
    await receiver.close({ timeoutMs: 0 });
  });

  it('a store without extend is not renewed and keeps the 60 s default lock; one with extend defaults to 30 s', async () => {
    const seen: number[] = [];
    const inner = memoryStore();
    const plain: IdempotencyStore = {
      claim: (key, lockMs) => (seen.push(lockMs), inner.claim(key, lockMs)),
      complete: (key, token, ttlMs) => inner.complete(key, token, ttlMs),
      release: (key, token) => inner.release(key, token),
    };
    await createReceiver({ secrets: SECRET, idempotency: { store: plain } }).handle(await delivery('msg_plain'), () => 1);
    await createReceiver({ secrets: SECRET, idempotency: { store: { ...plain, extend: inner.extend } } }).handle(await delivery('msg_renewed'), () => 1);
    expect(seen).toEqual([60_000, 30_000]);
  });

  it('unsigned entries get a TTL of their own (default the smaller of ttlSeconds and an hour)', async () => {
    const ttls: [string, number][] = [];
    const inner = memoryStore();
    const store: IdempotencyStore = {
      claim: (key, lockMs) => inner.claim(key, lockMs),
      complete: (key, token, ttlMs) => (ttls.push([key, ttlMs]), inner.complete(key, token, ttlMs)),
      release: (key, token) => inner.release(key, token),
    };
    const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept', idempotency: { store } });
    await receiver.handle(await delivery('msg_1'), () => 1);
    await receiver.handle(unsignedDelivery('msg_1'), () => 1);
    const short = createReceiver({ secrets: SECRET, unsigned: 'accept', toleranceSeconds: 30, idempotency: { store, ttlSeconds: 60, unsignedTtlSeconds: 30 } });
    await short.handle(unsignedDelivery('msg_2'), () => 1);
    expect(ttls).toEqual([
      ['default:s:msg_1', 86_400_000],
      ['default:u:msg_1', 3_600_000],
      ['default:u:msg_2', 30_000],
    ]);
  });
});

describe('exactly once: a store answer outside the contract fails closed', () => {
  const answers: [string, unknown][] = [
    ['an unknown status', { status: 'maybe' }],
    ['acquired without a token', { status: 'acquired' }],
    ['acquired with an empty token', { status: 'acquired', token: '' }],
    ['processing with a negative wait', { status: 'processing', retryAfterMs: -5 }],
    ['nothing', undefined],
    ['a string', 'acquired'],
  ];
  it.each(answers)('claim answering %s: STORE_UNAVAILABLE, onError told, handler not run (also with onStoreError: process)', async (_name, answer) => {
    for (const onStoreError of ['reject', 'process'] as const) {
      const log = errorLog();
      const store: IdempotencyStore = {
        claim: async () => answer as ClaimResult,
        complete: async () => true,
        release: async () => true,
      };
      const receiver = createReceiver({ secrets: SECRET, onError: log.onError, idempotency: { store, onStoreError } });
      const handler = vi.fn();
      const error = await receiver.handle(await delivery('msg_broken'), handler).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(WebhookError);
      expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', cause: { name: 'StoreError', reason: 'bad_reply' } });
      expect(handler).not.toHaveBeenCalled();
      expect(log.entries).toMatchObject([{ stage: 'claim', webhookId: 'msg_broken', willRetry: false }]);
    }
  });

  it('complete, release or extend answering a non-boolean is reported, never taken for success', async () => {
    const log = errorLog();
    const inner = memoryStore();
    const store: IdempotencyStore = {
      claim: (key, lockMs) => inner.claim(key, lockMs),
      complete: async () => 'yes' as unknown as boolean,
      release: async () => 1 as unknown as boolean,
    };
    const receiver = createReceiver({ secrets: SECRET, onError: log.onError, idempotency: { store } });
    await receiver.handle(await delivery('msg_c'), () => 1);
    await receiver.handle(await delivery('msg_r'), () => {
      throw new Error('handler failed');
    }).catch(() => undefined);
    expect(log.entries.map((entry) => [entry.stage, entry.webhookId, (entry.error as StoreError).reason])).toEqual([
      ['complete', 'msg_c', 'bad_reply'],
      ['release', 'msg_r', 'bad_reply'],
    ]);
  });
});

describe('exactly once: tenant namespaces', () => {
  it('a namespace function keeps two senders with the same id apart', async () => {
    const SECOND = (await import('../../src/sign.ts')).generateSecret();
    const store = memoryStore();
    const receiver = createReceiver({
      secrets: [
        { key: SECRET, keyId: 'acme-2026' },
        { key: SECOND, keyId: 'globex-2026' },
      ],
      idempotency: { store, namespace: (webhook) => (webhook.keyId === 'acme-2026' ? 'acme' : 'globex') },
    });
    const fromGlobex = async (id: string) => {
      const signed = await signWebhook({ secret: SECOND, id, body: '{}' });
      return { headers: signed.headers, body: '{}' };
    };
    expect((await receiver.handle(await delivery('msg_1'), () => 'acme')).outcome).toBe('processed');
    expect((await receiver.handle(await fromGlobex('msg_1'), () => 'globex')).outcome).toBe('processed');
    expect((await receiver.handle(await fromGlobex('msg_1'), () => 'again')).outcome).toBe('duplicate');
  });

  it.each([
    ['throws', () => {
      throw new Error('no tenant');
    }],
    ['returns an empty string', () => ''],
    ['returns a namespace with a colon', () => 'acme:eu'],
    ['returns a number', () => 7 as unknown as string],
  ])('a namespace function that %s: INVALID_NAMESPACE (500), onError told, nothing claimed', async (_name, namespace) => {
    const log = errorLog();
    const claims: string[] = [];
    const inner = memoryStore();
    const store: IdempotencyStore = {
      claim: (key, lockMs) => (claims.push(key), inner.claim(key, lockMs)),
      complete: (key, token, ttlMs) => inner.complete(key, token, ttlMs),
      release: (key, token) => inner.release(key, token),
    };
    const receiver = createReceiver({ secrets: SECRET, onError: log.onError, idempotency: { store, namespace } });
    const error = await receiver.handle(await delivery('msg_ns'), () => 1).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'INVALID_NAMESPACE', status: 500 });
    expect(claims).toEqual([]);
    expect(log.entries).toMatchObject([{ stage: 'namespace', webhookId: 'msg_ns', willRetry: false }]);
  });
});

describe('exactly once: construction and shutdown', () => {
  it('warns once per process when many receivers are built with a memory store of their own', async () => {
    vi.resetModules();
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const fresh = await import('../../src/receiver.ts');
      // Built per request: three deliveries of one id run the handler three times.
      let runs = 0;
      for (let i = 0; i < 3; i++) await fresh.createReceiver({ secrets: SECRET }).handle(await delivery('msg_per_request'), () => runs++);
      expect(runs).toBe(3);
      for (let i = 0; i < 200; i++) fresh.createReceiver({ secrets: SECRET });
      const shared = memoryStore();
      for (let i = 0; i < 200; i++) fresh.createReceiver({ secrets: SECRET, idempotency: { store: shared } });
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]![0])).toMatch(/100 receivers .* not per request/);
    } finally {
      warn.mockRestore();
    }
  });

  it('close() aborts running handlers, refuses new deliveries with 503, and waits for completions', async () => {
    const receiver = createReceiver({ secrets: SECRET });
    const started = gate();
    let context: WebhookContext | undefined;
    const running = receiver.claim(await delivery('msg_running')).then(async (claim) => {
      context = claim.context;
      started.open();
      await new Promise((resolve) => claim.context.signal.addEventListener('abort', resolve, { once: true }));
      await claim.complete();
      return claim.context.signal.reason as Error;
    });
    await started.promise;
    await receiver.close();
    expect((await running).message).toBe('the webhook receiver was closed');
    expect(context?.signal.aborted).toBe(true);
    await expect(receiver.handle(await delivery('msg_after'), () => 1)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 });
    await expect(receiver.close({ timeoutMs: -1 })).rejects.toThrow(RangeError);
  });
});

describe('exactly once: a claim bounded by its holder\'s deadline', () => {
  it('takes the lock for no longer than the time left (Lambda), and checks the deadline', async () => {
    const now = Date.now();
    const inner = memoryStore({ now: () => now });
    const locks: [string, number][] = [];
    const store: IdempotencyStore = {
      claim: (key, lockMs) => (locks.push(['claim', lockMs]), inner.claim(key, lockMs)),
      complete: (key, token, ttlMs) => inner.complete(key, token, ttlMs),
      release: (key, token) => inner.release(key, token),
      extend: (key, token, lockMs) => (locks.push(['extend', lockMs]), inner.extend(key, token, lockMs)),
    };
    const receiver = createReceiver({ secrets: SECRET, now: () => now, idempotency: { store } });
    const bounded = await receiver.claim(await delivery('msg_lambda'), { deadline: now + 4_000 });
    expect(bounded.outcome).toBe('acquired');
    expect(bounded.context.claim?.lockMs).toBe(4_000);
    const unbounded = await receiver.claim(await delivery('msg_server'));
    expect(locks).toEqual([
      ['claim', 4_000],
      ['claim', 30_000],
    ]);
    await unbounded.complete();
    await bounded.complete();
    await expect(receiver.claim(await delivery('msg_bad'), { deadline: Number.NaN })).rejects.toThrow(
      new TypeError('claim deadline must be a finite number of epoch milliseconds'),
    );
    await receiver.close({ timeoutMs: 0 });
  });

  it('renews for the lock length, not up to the deadline: a holder that dies blocks the retry for about lockSeconds', async () => {
    const inner = memoryStore();
    const extended: number[] = [];
    const renewal = gate();
    const store: IdempotencyStore = {
      claim: (key, lockMs) => inner.claim(key, lockMs),
      complete: (key, token, ttlMs) => inner.complete(key, token, ttlMs),
      release: (key, token) => inner.release(key, token),
      extend: (key, token, lockMs) => (extended.push(lockMs), renewal.open(), inner.extend(key, token, lockMs)),
    };
    const holder = createReceiver({ secrets: SECRET, onError: () => {}, idempotency: { store, lockSeconds: 0.6 } });
    // A 15-minute deadline (a Lambda's longest timeout) far beyond the 600 ms lock.
    const claim = await holder.claim(await delivery('msg_dies'), { deadline: Date.now() + 15 * 60_000 });
    expect(claim.context.claim?.lockMs).toBe(600);
    await renewal.promise;
    // The holder dies (out of memory, a runtime exit): nothing renews or settles its claim again.
    await holder.close({ timeoutMs: 0 });
    expect(extended).toHaveLength(1);
    expect(extended[0]).toBeLessThanOrEqual(600);
    expect(extended[0]).toBeGreaterThan(0);

    // The sender's retry, at another instance: told to come back within the lock, not the deadline.
    const other = createReceiver({ secrets: SECRET, onError: () => {}, idempotency: { store, lockSeconds: 0.6 } });
    const started = Date.now();
    const retry = await other.claim(await delivery('msg_dies'));
    expect(retry).toMatchObject({ outcome: 'in_progress', retryAfterSeconds: 1 });
    // Once the renewed lock runs out, the retry runs: about 0.6 s, bounded loosely for a loaded
    // machine (with the deadline as the renewal, it would take 15 minutes).
    let runs = 0;
    while (Date.now() - started < 10_000) {
      const result = await other.handle(await delivery('msg_dies'), () => void runs++);
      if (result.outcome === 'processed') break;
      expect(result.outcome).toBe('in_progress');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(runs).toBe(1);
    expect(Date.now() - started).toBeLessThan(5_000);
    await other.close({ timeoutMs: 0 });
  });
});

/**
 * The receiver's idempotency: verify -> claim -> handler -> complete/release,
 * against the memory store and against a real Redis through both clients.
 */

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebhookError } from '../../src/errors.ts';
import { createReceiver, type ReceiveResult, type ReceiverOptions } from '../../src/receiver.ts';
import { signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { redisStore } from '../../src/stores/redis.ts';
import { offerSyncOperations, syncOperations, unsignedBucket, unsignedBuckets } from '../../src/stores/internal.ts';
import { DEFAULT_UNSIGNED_MAX, type IdempotencyStore } from '../../src/stores/types.ts';
import type { VerifiedWebhook } from '../../src/verify.ts';
import { CLIENT_KINDS, connectClient, countRoundTrips, sharedRedisUrl } from '../support/redis.ts';
import { openBackend, sleep, STORE_KINDS, type StoreBackend } from '../support/stores.ts';
import { SECRET, delivery, deliveryRequest, errorLog, recording } from './support.ts';

// The memory store twice: through its promises, and through the synchronous operations the
// receiver calls directly when it is given a bare memory store (what every adapter does by default).
const KINDS = [
  ...STORE_KINDS.map((target) => ({ ...target, direct: false, name: target.kind })),
  { kind: 'memory' as const, available: true, direct: true, name: 'memory, direct' },
];

describe.each(KINDS)('receiver over $name', ({ kind, available, direct }) => {
  let backend: StoreBackend;
  let spaces = 0;
  /** A receiver on a fresh, empty store space. */
  const receiverOn = (options: Partial<ReceiverOptions> & { lockSeconds?: number } = {}) => {
    const { lockSeconds, ...rest } = options;
    const log = errorLog();
    const store = recording(backend.open(`r${++spaces}`), { direct });
    const receiver = createReceiver({
      secrets: SECRET,
      onError: log.onError,
      idempotency: { store, ...(lockSeconds === undefined ? {} : { lockSeconds }) },
      ...rest,
    });
    return { receiver, store, log, space: `r${spaces}` };
  };

  beforeAll(async () => {
    if (available) backend = await openBackend(kind);
  });
  afterAll(async () => {
    await backend?.close();
  });

  const test = it.skipIf(!available);

  test('processes an id once; later deliveries are duplicates and do not run the handler', async () => {
    const { receiver, store } = receiverOn();
    const handler = vi.fn(async (webhook: VerifiedWebhook) => webhook.json<{ type: string }>().type);
    const first = await receiver.handle(await delivery('msg_once'), handler);
    expect(first).toMatchObject({ outcome: 'processed', value: 'invoice.paid', webhook: { id: 'msg_once', signed: true } });
    const again = await receiver.handle(await delivery('msg_once'), handler);
    expect(again.outcome).toBe('duplicate');
    expect(again.webhook.id).toBe('msg_once');
    expect(handler).toHaveBeenCalledTimes(1);
    expect(store.calls).toEqual(['claim default:s:msg_once', 'complete default:s:msg_once', 'claim default:s:msg_once']);
  });

  test('a throwing handler releases its claim and its error propagates; the retry is processed exactly once', async () => {
    const { receiver, store } = receiverOn();
    const failure = new Error('database down');
    let runs = 0;
    await expect(
      receiver.handle(await delivery('msg_throw'), () => {
        runs++;
        throw failure;
      }),
    ).rejects.toBe(failure);
    await expect(
      receiver.handle(await delivery('msg_throw'), async () => {
        runs++;
        throw failure;
      }),
    ).rejects.toBe(failure);
    const retry = await receiver.handle(await delivery('msg_throw'), () => {
      runs++;
      return 'ok';
    });
    expect(retry).toMatchObject({ outcome: 'processed', value: 'ok' });
    expect((await receiver.handle(await delivery('msg_throw'), () => runs++)).outcome).toBe('duplicate');
    expect(runs).toBe(3);
    expect(store.calls.filter((c) => c.startsWith('release'))).toHaveLength(2);
    expect(store.calls.filter((c) => c.startsWith('complete'))).toHaveLength(1);
  });

  test('a delivery while the handler runs is in_progress, with Retry-After from the lock left', async () => {
    const { receiver } = receiverOn({ lockSeconds: 30 });
    let finish!: () => void;
    const running = receiver.handle(await delivery('msg_slow'), () => new Promise<string>((resolve) => (finish = () => resolve('done'))));
    await vi.waitFor(() => expect(finish).toBeTypeOf('function'), { timeout: 2000, interval: 5 });
    const during = await receiver.handle(await delivery('msg_slow'), () => 'second run');
    expect(during).toMatchObject({ outcome: 'in_progress', retryAfterSeconds: 30 });
    finish();
    expect(await running).toMatchObject({ outcome: 'processed', value: 'done' });
    expect((await receiver.handle(await delivery('msg_slow'), () => 'third run')).outcome).toBe('duplicate');
  });

  test("a crashed handler's claim (never completed) expires after lockSeconds, and the retry is processed", async () => {
    const { receiver, log } = receiverOn({ lockSeconds: 1 });
    const crashed = await receiver.claim(await delivery('msg_crash'));
    expect(crashed.outcome).toBe('acquired');

    const early = await receiver.handle(await delivery('msg_crash'), () => 'too early');
    expect(early).toMatchObject({ outcome: 'in_progress', retryAfterSeconds: 1 });
    // Retried until the lock has run out (each attempt before that is in_progress and runs nothing).
    const retry = await vi.waitFor(
      async () => {
        const answer = await receiver.handle(await delivery('msg_crash'), () => 'after the lock');
        expect(answer.outcome).not.toBe('in_progress');
        return answer;
      },
      { timeout: 15_000, interval: 50 },
    );
    expect(retry).toMatchObject({ outcome: 'processed', value: 'after the lock' });

    // The "crashed" holder wakes up: its complete no longer owns the id. It is told, and nothing changes.
    await crashed.complete();
    expect(log.entries).toEqual([
      {
        stage: 'complete',
        webhookId: 'msg_crash',
        willRetry: false,
        error: new Error('the claim expired before complete (the handler ran longer than lockSeconds, 1 s, and the store cannot renew claims) and may have been taken over'),
      },
    ]);
    expect((await receiver.handle(await delivery('msg_crash'), () => 'again')).outcome).toBe('duplicate');
  });

  test("a stale owner's release cannot free the new owner's claim", async () => {
    const { receiver, log } = receiverOn({ lockSeconds: 1 });
    const stale = await receiver.claim(await delivery('msg_stale'));
    // Claimed again as soon as the stale owner's lock has run out.
    const owner = await vi.waitFor(
      async () => {
        const claim = await receiver.claim(await delivery('msg_stale'));
        expect(claim.outcome).not.toBe('in_progress');
        return claim;
      },
      { timeout: 15_000, interval: 50 },
    );
    expect(owner.outcome).toBe('acquired');
    await stale.release();
    expect(log.entries).toMatchObject([{ stage: 'release', webhookId: 'msg_stale' }]);
    expect((await receiver.handle(await delivery('msg_stale'), () => 'x')).outcome).toBe('in_progress');
    await owner.complete();
    expect((await receiver.handle(await delivery('msg_stale'), () => 'x')).outcome).toBe('duplicate');
    expect(log.entries).toHaveLength(1);
  });

  test('a claim settles once: the first of complete and release wins', async () => {
    const { receiver, store, log } = receiverOn();
    const claim = await receiver.claim(await delivery('msg_settle'));
    await Promise.all([claim.complete(), claim.complete()]);
    await claim.release();
    expect(store.calls).toEqual(['claim default:s:msg_settle', 'complete default:s:msg_settle']);
    expect(log.entries).toEqual([]);
    const duplicate = await receiver.claim(await delivery('msg_settle'));
    expect(duplicate.outcome).toBe('duplicate');
    await duplicate.complete();
    await duplicate.release();
    expect(store.calls).toHaveLength(3);
  });

  test('only verified requests touch the store', async () => {
    const { receiver, store, space } = receiverOn();
    const good = await signWebhook({ secret: SECRET, body: '{}', id: 'msg_forged' });
    const old = await signWebhook({ secret: SECRET, body: '{}', id: 'msg_old', timestamp: Math.floor(Date.now() / 1000) - 3600 });
    const attempts: [Record<string, string>, string, string][] = [
      [{ ...good.headers, 'webhook-signature': 'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' }, '{}', 'SIGNATURE_MISMATCH'],
      [good.headers, '{"tampered":true}', 'SIGNATURE_MISMATCH'],
      [{ 'webhook-id': 'msg_unsigned', 'webhook-timestamp': String(good.timestamp) }, '{}', 'MISSING_SIGNATURE'],
      [old.headers, '{}', 'TIMESTAMP_TOO_OLD'],
      [{ 'webhook-timestamp': String(good.timestamp), 'webhook-signature': good.signature }, '{}', 'MISSING_ID'],
    ];
    const handler = vi.fn();
    for (const [headers, body, code] of attempts) {
      await expect(receiver.handle({ headers, body }, handler)).rejects.toMatchObject({ name: 'WebhookError', code });
      await expect(receiver.claim({ headers, body })).rejects.toMatchObject({ code });
    }
    expect(handler).not.toHaveBeenCalled();
    expect(store.calls).toEqual([]);
    expect(await backend.keys(space)).toEqual(kind === 'memory' ? undefined : []);
  });

  test("unsigned requests accepted with unsigned: 'accept' are deduplicated too", async () => {
    const { receiver, store, space } = receiverOn({ unsigned: 'accept' });
    const unsigned = { headers: { 'webhook-id': 'msg_unsigned' }, body: '{"a":1}' };
    const handler = vi.fn((webhook: VerifiedWebhook) => webhook.signed);
    expect(await receiver.handle(unsigned, handler)).toMatchObject({ outcome: 'processed', value: false, webhook: { signed: false } });
    expect((await receiver.handle(unsigned, handler)).outcome).toBe('duplicate');
    expect(handler).toHaveBeenCalledTimes(1);
    // A signature that is present and wrong is still refused, never treated as unsigned.
    await expect(
      receiver.handle({ headers: { 'webhook-id': 'msg_x', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' }, body: '{}' }, handler),
    ).rejects.toMatchObject({ code: 'SIGNATURE_MISMATCH' });
    expect(store.calls).toEqual(['claim default:u:msg_unsigned', 'complete default:u:msg_unsigned', 'claim default:u:msg_unsigned']);
    // Unsigned ids live in the buckets that bound them.
    if (kind !== 'memory') expect(await backend.keys(space)).toEqual([`:u:${unsignedBucket('default:u:msg_unsigned', unsignedBuckets(DEFAULT_UNSIGNED_MAX).buckets)}`]);
  });

  test('namespaces keep the same id apart in one store', async () => {
    const store = backend.open(`ns${++spaces}`);
    const billing = createReceiver({ secrets: SECRET, idempotency: { store, namespace: 'billing' } });
    const shipping = createReceiver({ secrets: SECRET, idempotency: { store, namespace: 'shipping' } });
    const billingAgain = createReceiver({ secrets: SECRET, idempotency: { store, namespace: 'billing' } });
    expect((await billing.handle(await delivery('msg_ns'), () => 1)).outcome).toBe('processed');
    expect((await shipping.handle(await delivery('msg_ns'), () => 2)).outcome).toBe('processed');
    expect((await billingAgain.handle(await delivery('msg_ns'), () => 3)).outcome).toBe('duplicate');
    if (kind !== 'memory') expect(await backend.keys(`ns${spaces}`)).toEqual(['billing:s:msg_ns', 'shipping:s:msg_ns']);
  });

  test('takes a Fetch Request as well', async () => {
    const { receiver } = receiverOn();
    expect(await receiver.handle(await deliveryRequest('msg_request'), (webhook) => webhook.text())).toMatchObject({
      outcome: 'processed',
      value: '{"type":"invoice.paid"}',
    });
    expect((await receiver.handle(await deliveryRequest('msg_request'), () => 'again')).outcome).toBe('duplicate');
  });
});

describe('receiver over a store with synchronous operations', () => {
  it('a copy of a memory store, or one whose method was replaced, is called through its own methods', async () => {
    const base = memoryStore();
    const copy = recording(base);
    const spread = { ...base, claim: vi.fn((key: string, lockMs: number) => base.claim(key, lockMs)) };
    const patched = memoryStore();
    const patchedComplete = vi.fn(patched.complete);
    patched.complete = patchedComplete;
    for (const [name, store] of Object.entries({ copy, spread, patched })) {
      const receiver = createReceiver({ secrets: SECRET, idempotency: { store } });
      expect((await receiver.handle(await delivery(`msg_${name}`), () => 1)).outcome).toBe('processed');
      expect((await receiver.handle(await delivery(`msg_${name}`), () => 2)).outcome).toBe('duplicate');
    }
    expect(copy.calls).toEqual(['claim default:s:msg_copy', 'complete default:s:msg_copy', 'claim default:s:msg_copy']);
    expect(spread.claim).toHaveBeenCalledTimes(2);
    expect(patchedComplete).toHaveBeenCalledTimes(1);
  });

  /** A memory store whose synchronous operations throw while `down` says so; its promises never fail. */
  function flaky() {
    const inner = memoryStore();
    const sync = syncOperations(inner)!;
    const down = { claim: false, complete: false, release: false };
    const store: IdempotencyStore = { claim: inner.claim, complete: inner.complete, release: inner.release };
    const fail = (what: keyof typeof down) => {
      if (down[what]) throw new Error(`${what}: backend down`);
    };
    offerSyncOperations(store, {
      claim: (key, lockMs) => (fail('claim'), sync.claim(key, lockMs)),
      complete: (key, token, ttlMs) => (fail('complete'), sync.complete(key, token, ttlMs)),
      release: (key, token) => (fail('release'), sync.release(key, token)),
      extend: (key, token, lockMs) => sync.extend(key, token, lockMs),
    });
    return { store, down };
  }

  it('a throwing claim is STORE_UNAVAILABLE, or with onStoreError: process the handler runs and onError is told', async () => {
    const { store, down } = flaky();
    down.claim = true;
    const log = errorLog();
    const strict = createReceiver({ secrets: SECRET, idempotency: { store }, onError: log.onError });
    const handler = vi.fn(() => 'ran');
    const refused = await strict.handle(await delivery('msg_sync_claim'), handler).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(WebhookError);
    expect(refused).toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503, cause: new Error('claim: backend down') });
    expect(handler).not.toHaveBeenCalled();

    const lenient = createReceiver({ secrets: SECRET, idempotency: { store, onStoreError: 'process' }, onError: log.onError });
    expect(await lenient.handle(await delivery('msg_sync_claim'), handler)).toMatchObject({ outcome: 'processed', value: 'ran' });
    expect(log.entries).toEqual([{ stage: 'claim', webhookId: 'msg_sync_claim', willRetry: false, error: new Error('claim: backend down') }]);
  });

  it('a throwing completion stands, is reported, and is retried until it lands', async () => {
    const { store, down } = flaky();
    down.complete = true;
    const log = errorLog();
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store }, onError: log.onError });
    const handler = vi.fn(() => 'charged');
    expect(await receiver.handle(await delivery('msg_sync_complete'), handler)).toMatchObject({ outcome: 'processed', value: 'charged' });
    expect(log.entries).toEqual([{ stage: 'complete', webhookId: 'msg_sync_complete', willRetry: true, error: new Error('complete: backend down') }]);
    // The retry goes through the store's promise (which works here) after 100 ms.
    await vi.waitFor(async () => expect((await receiver.handle(await delivery('msg_sync_complete'), handler)).outcome).toBe('duplicate'), {
      timeout: 2000,
      interval: 20,
    });
    expect(handler).toHaveBeenCalledTimes(1);
    expect(log.entries).toHaveLength(1);
  });

  it("a throwing release: the handler's error propagates, onError is told, and the lock runs out by itself", async () => {
    const { store, down } = flaky();
    down.release = true;
    const log = errorLog();
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store, lockSeconds: 30 }, onError: log.onError });
    const failure = new Error('payment provider down');
    await expect(
      receiver.handle(await delivery('msg_sync_release'), () => {
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(log.entries).toEqual([{ stage: 'release', webhookId: 'msg_sync_release', willRetry: false, error: new Error('release: backend down') }]);
    expect(await receiver.handle(await delivery('msg_sync_release'), () => 'again')).toMatchObject({ outcome: 'in_progress', retryAfterSeconds: 30 });
  });
});

describe('receiver without idempotency', () => {
  it('idempotency: false runs the handler every time', async () => {
    const receiver = createReceiver({ secrets: SECRET, idempotency: false });
    const handler = vi.fn(() => 'ran');
    const input = await delivery('msg_every_time');
    const results: ReceiveResult<string>[] = [];
    for (let i = 0; i < 3; i++) results.push(await receiver.handle(input, handler));
    expect(results.map((r) => r.outcome)).toEqual(['processed', 'processed', 'processed']);
    expect(handler).toHaveBeenCalledTimes(3);
    const claim = await receiver.claim(input);
    expect(claim.outcome).toBe('acquired');
    await claim.complete();
    expect((await receiver.claim(input)).outcome).toBe('acquired');
  });

  it('still verifies', async () => {
    const receiver = createReceiver({ secrets: SECRET, idempotency: false });
    const input = await delivery('msg_x');
    await expect(receiver.handle({ ...input, body: 'other' }, () => 1)).rejects.toBeInstanceOf(WebhookError);
  });
});

describe.skipIf(sharedRedisUrl === null)('receivers sharing one Redis', () => {
  const backends: StoreBackend[] = [];
  beforeAll(async () => {
    // Two app instances: one on ioredis, one on node-redis, each with its own connection.
    for (const kind of CLIENT_KINDS) backends.push(await openBackend(kind));
  });
  afterAll(async () => {
    for (const backend of backends) await backend.close();
  });

  it.each([
    ['ioredis', 'ioredis'],
    ['node-redis', 'node-redis'],
    ['ioredis', 'node-redis'],
  ] as const)('50 concurrent deliveries of one id over two receivers (%s + %s): exactly one handler run', async (a, b) => {
    const space = `pair-${a}-${b}`;
    const first = backends.find((backend) => backend.kind === a)!;
    // The second app instance: its own client (of kind b) on the same prefix.
    const other = await connectClient(b, sharedRedisUrl!);
    try {
      const storeA = first.open(space);
      const storeB = redisStore({ client: other.client, prefix: first.prefix(space)! });
      const receivers = [storeA, storeB].map((store) => createReceiver({ secrets: SECRET, idempotency: { store } }));
      let runs = 0;
      const handler = async () => {
        runs++;
        await sleep(50);
        return 'charged';
      };
      const inputs = await Promise.all(Array.from({ length: 50 }, () => delivery(`msg_race_${a}_${b}`)));
      const results = await Promise.all(inputs.map((input, i) => receivers[i % 2]!.handle(input, handler)));
      const outcomes = results.map((r) => r.outcome);
      expect(runs).toBe(1);
      expect(outcomes.filter((o) => o === 'processed')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'in_progress' || o === 'duplicate')).toHaveLength(49);
      for (const receiver of receivers) expect((await receiver.handle(await delivery(`msg_race_${a}_${b}`), handler)).outcome).toBe('duplicate');
      expect(runs).toBe(1);
    } finally {
      other.close();
    }
  });

  it.each(CLIENT_KINDS)('costs one Redis round trip per claim (%s), counted with MONITOR', async (kind) => {
    const backend = backends.find((b) => b.kind === kind)!;
    const client = backend.client!;
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store: backend.open('round-trips') } });
    // Warm-up: the first use of each script on a server may need EVAL after NOSCRIPT.
    await receiver.handle(await delivery('msg_warm'), () => 0);
    const inputs = await Promise.all(Array.from({ length: 20 }, (_, i) => delivery(`msg_rt_${i}`)));

    const claims = await countRoundTrips(sharedRedisUrl!, client, async () => {
      for (const input of inputs) expect((await receiver.claim(input)).outcome).toBe('acquired');
    });
    const handled = await countRoundTrips(sharedRedisUrl!, client, async () => {
      for (let i = 0; i < 20; i++) await receiver.handle(await delivery(`msg_rt_handled_${i}`), () => i);
    });
    const duplicates = await countRoundTrips(sharedRedisUrl!, client, async () => {
      for (let i = 0; i < 20; i++) expect((await receiver.handle(await delivery(`msg_rt_handled_${i}`), () => i)).outcome).toBe('duplicate');
    });
    console.info(
      `[${kind}] Redis round trips: ${claims.count / 20} per claim, ${handled.count / 20} per processed delivery (claim + complete), ${duplicates.count / 20} per duplicate`,
    );
    expect(claims.count / 20).toBe(1);
    expect(claims.commands).toEqual(Array(20).fill('evalsha'));
    expect(handled.count / 20).toBe(2);
    expect(duplicates.count / 20).toBe(1);
  });
});


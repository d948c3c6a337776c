/**
 * Only verified requests touch the idempotency store: thousands of distinct rejected requests
 * (forged signatures, unknown keys, stale or malformed timestamps, missing headers, oversized
 * bodies), each with a fresh `webhook-id`, make no store call and add no key, with the memory
 * store (wrapped to count every call) and with a real Redis (keys counted under a unique prefix,
 * and `DBSIZE` when this file has the server to itself).
 */

import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReceiver, type Receiver } from '../../src/receiver.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { redisStore } from '../../src/stores/redis.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import type { WebhookInput } from '../../src/verify.ts';
import { expectDocumentedError, freshSecret, hmacSignature } from '../fuzz/support.ts';
import { canStartRedis, connectIORedis, keysUnder, startRedisServer, uniquePrefix, type RedisServer } from '../support/redis.ts';

const NOW = 1_700_000_000;
const REJECTED = 3_000;
const { secret, key } = freshSecret(32);
const stranger = freshSecret(32);

/** A store that counts every call into `inner`. */
function counting(inner: IdempotencyStore) {
  const calls = { claim: 0, complete: 0, release: 0 };
  const store: IdempotencyStore = {
    claim: (k, lockMs) => (calls.claim++, inner.claim(k, lockMs)),
    complete: (k, token, ttlMs) => (calls.complete++, inner.complete(k, token, ttlMs)),
    release: (k, token) => (calls.release++, inner.release(k, token)),
  };
  return { store, calls };
}

/** The i-th rejected request: a fresh id each time, and one of the ways a request fails. */
function rejected(i: number): { input: WebhookInput; code: string } {
  const id = `msg_forged_${i}_${randomBytes(6).toString('hex')}`;
  const t = String(NOW);
  const body = `{"n":${i}}`;
  const base = { 'webhook-id': id, 'webhook-timestamp': t };
  switch (i % 8) {
    case 0:
      return { input: { headers: { ...base, 'webhook-signature': `v1,${randomBytes(32).toString('base64')}` }, body }, code: 'SIGNATURE_MISMATCH' };
    case 1:
      return { input: { headers: { ...base, 'webhook-signature': `v1,${hmacSignature(stranger.key, id, t, body)}` }, body }, code: 'SIGNATURE_MISMATCH' };
    case 2: {
      const old = String(NOW - 3600);
      return { input: { headers: { ...base, 'webhook-timestamp': old, 'webhook-signature': `v1,${hmacSignature(key, id, old, body)}` }, body }, code: 'TIMESTAMP_TOO_OLD' };
    }
    case 3:
      return { input: { headers: { ...base, 'webhook-timestamp': `${t}abc`, 'webhook-signature': `v1,${hmacSignature(key, id, t, body)}` }, body }, code: 'INVALID_TIMESTAMP' };
    case 4:
      return { input: { headers: base, body }, code: 'MISSING_SIGNATURE' };
    case 5:
      return { input: { headers: { ...base, 'webhook-signature': `v1,${hmacSignature(key, id, t, body)}  v1,x` }, body }, code: 'INVALID_SIGNATURE_HEADER' };
    case 6: {
      const big = 'x'.repeat(2049);
      return { input: { headers: { ...base, 'webhook-signature': `v1,${hmacSignature(key, id, t, big)}` }, body: big }, code: 'PAYLOAD_TOO_LARGE' };
    }
    default:
      // The body of another message under this id's signature.
      return { input: { headers: { ...base, 'webhook-signature': `v1,${hmacSignature(key, id, t, body)}` }, body: `${body} ` }, code: 'SIGNATURE_MISMATCH' };
  }
}

function valid(id: string): WebhookInput {
  const t = String(NOW);
  return { headers: { 'webhook-id': id, 'webhook-timestamp': t, 'webhook-signature': `v1,${hmacSignature(key, id, t, '{}')}` }, body: '{}' };
}

async function sendRejected(receiver: Receiver, count: number): Promise<Record<string, number>> {
  const codes: Record<string, number> = {};
  let handlerRuns = 0;
  for (let i = 0; i < count; i++) {
    const { input, code } = rejected(i);
    try {
      await receiver.handle(input, () => void handlerRuns++);
      expect.fail(`request ${i} was accepted`);
    } catch (error) {
      expectDocumentedError(error);
      expect(error.code).toBe(code);
      codes[error.code] = (codes[error.code] ?? 0) + 1;
    }
  }
  expect(handlerRuns).toBe(0);
  return codes;
}

const options = { secrets: secret, now: () => NOW * 1000, maxBodyBytes: 2048 };

describe('memory store', () => {
  it(`${REJECTED} distinct rejected requests make no store call; one verified request makes one claim and one complete`, async () => {
    const { store, calls } = counting(memoryStore({ max: 10 }));
    const receiver = createReceiver({ ...options, idempotency: { store } });
    const codes = await sendRejected(receiver, REJECTED);
    expect(codes).toEqual({
      SIGNATURE_MISMATCH: (REJECTED / 8) * 3,
      TIMESTAMP_TOO_OLD: REJECTED / 8,
      INVALID_TIMESTAMP: REJECTED / 8,
      MISSING_SIGNATURE: REJECTED / 8,
      INVALID_SIGNATURE_HEADER: REJECTED / 8,
      PAYLOAD_TOO_LARGE: REJECTED / 8,
    });
    expect(calls).toEqual({ claim: 0, complete: 0, release: 0 });

    // The counter does count: a verified request claims and completes, its duplicate claims only.
    expect((await receiver.handle(valid('msg_real'), () => 'ran')).outcome).toBe('processed');
    expect((await receiver.handle(valid('msg_real'), () => 'ran')).outcome).toBe('duplicate');
    expect(calls).toEqual({ claim: 2, complete: 1, release: 0 });
  });

  it('a store bounded to 10 ids still deduplicates a verified id after thousands of rejected requests', async () => {
    // Had rejected requests been stored, they would have evicted the verified id from the LRU.
    const receiver = createReceiver({ ...options, idempotency: { store: memoryStore({ max: 10 }) } });
    expect((await receiver.handle(valid('msg_kept'), () => 1)).outcome).toBe('processed');
    await sendRejected(receiver, REJECTED);
    expect((await receiver.handle(valid('msg_kept'), () => 1)).outcome).toBe('duplicate');
  });
});

describe('Redis store', () => {
  let server: RedisServer | undefined;
  let admin: Redis | undefined;
  const enabled = canStartRedis('the store-growth test');

  beforeAll(async () => {
    if (!enabled) return;
    // A private server, so DBSIZE counts this file's keys and nothing else.
    server = await startRedisServer();
    admin = await connectIORedis(server.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.close();
  });

  it.skipIf(!enabled)(`${REJECTED} distinct rejected requests add no key; a verified one adds exactly one`, async () => {
    const prefix = uniquePrefix('growth');
    const client = await connectIORedis(server!.url);
    try {
      const { store, calls } = counting(redisStore({ client, prefix }));
      const receiver = createReceiver({ ...options, idempotency: { store } });
      expect(await admin!.dbsize()).toBe(0);
      await sendRejected(receiver, REJECTED);
      expect(calls).toEqual({ claim: 0, complete: 0, release: 0 });
      expect(await admin!.dbsize()).toBe(0);
      expect(await keysUnder(admin!, prefix)).toEqual({});

      expect((await receiver.handle(valid('msg_real'), () => 'ran')).outcome).toBe('processed');
      expect(Object.keys(await keysUnder(admin!, prefix))).toEqual(['default:s:msg_real']);
      expect(await admin!.dbsize()).toBe(1);
    } finally {
      client.disconnect();
    }
  });
});

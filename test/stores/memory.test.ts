/**
 * What only the memory store does: its bound (`max`, least recently used first), its injectable
 * clock, its synchronous operations (what the receiver calls) and its option checks. The shared
 * behaviour is in contract.test.ts.
 */

import { describe, expect, it } from 'vitest';
import { DEFAULT_MEMORY_STORE_MAX, memoryStore } from '../../src/stores/memory.ts';
import { syncOperations, type SyncOperations } from '../../src/stores/internal.ts';
import { token } from '../support/stores.ts';

function direct(store: ReturnType<typeof memoryStore>): SyncOperations {
  const operations = syncOperations(store);
  if (operations === undefined) throw new Error('the memory store offers no synchronous operations');
  return operations;
}

describe('memoryStore', () => {
  it('remembers at most max ids, forgetting the least recently used first', async () => {
    const store = memoryStore({ max: 2 });
    for (const id of ['a', 'b', 'c']) expect(await store.complete(id, token(await store.claim(id, 10_000)), 60_000)).toBe(true);
    // 'a' was pushed out by 'c', so a late duplicate of 'a' would run again: the documented cost of the bound.
    expect((await store.claim('a', 10_000)).status).toBe('acquired');
    expect(await store.claim('c', 10_000)).toEqual({ status: 'completed' });
    expect(DEFAULT_MEMORY_STORE_MAX).toBe(100_000);
  });

  it('a claim on a held or completed id counts as a use: that id stays, the least recently used goes', async () => {
    const store = memoryStore({ max: 2 });
    const a = token(await store.claim('a', 10_000));
    token(await store.claim('b', 10_000));
    expect((await store.claim('a', 10_000)).status).toBe('processing');
    token(await store.claim('c', 10_000)); // pushes out 'b', not 'a'
    // The duplicate claim left the owner's lock as it was.
    expect(await store.complete('a', a, 60_000)).toBe(true);
    expect((await store.claim('b', 10_000)).status).toBe('acquired'); // pushes out 'c'
    expect(await store.claim('a', 10_000)).toEqual({ status: 'completed' });
    expect((await store.claim('d', 10_000)).status).toBe('acquired'); // pushes out 'b'
    expect(await store.claim('a', 10_000)).toEqual({ status: 'completed' });
  });

  it('a held claim pushed out by the bound no longer owns its id', async () => {
    const store = memoryStore({ max: 1 });
    const a = token(await store.claim('a', 10_000));
    token(await store.claim('b', 10_000));
    expect(await store.complete('a', a, 60_000)).toBe(false);
    expect(await store.release('a', a)).toBe(false);
    expect((await store.claim('a', 10_000)).status).toBe('acquired');
  });

  it('reads time from the injected clock: lock and TTL expiry within a millisecond', async () => {
    let now = 1_000_000;
    const store = memoryStore({ now: () => now });
    const stale = token(await store.claim('msg_1', 1000));
    now += 999;
    expect(await store.claim('msg_1', 1000)).toEqual({ status: 'processing', retryAfterMs: 1 });
    now += 1;
    const owner = token(await store.claim('msg_1', 1000));
    expect(await store.complete('msg_1', stale, 5000)).toBe(false);
    expect(await store.complete('msg_1', owner, 5000)).toBe(true);
    now += 4999;
    expect(await store.claim('msg_1', 1000)).toEqual({ status: 'completed' });
    // A completion holds for exactly ttlMs, as a lock holds for exactly lockMs.
    now += 1;
    expect((await store.claim('msg_1', 1000)).status).toBe('acquired');
  });

  it('a clock that reads 0 expires entries like any other', async () => {
    let now = 0;
    const store = memoryStore({ now: () => now });
    expect(await store.complete('msg_1', token(await store.claim('msg_1', 1000)), 1000)).toBe(true);
    now = 999;
    expect(await store.claim('msg_1', 1000)).toEqual({ status: 'completed' });
    now = 1000;
    expect((await store.claim('msg_1', 1000)).status).toBe('acquired');
  });

  it('its synchronous operations are the same store as its promises', async () => {
    let now = 5_000;
    const store = memoryStore({ now: () => now });
    const operations = direct(store);
    const owner = token(operations.claim('msg_1', 1000));
    expect(await store.claim('msg_1', 1000)).toEqual({ status: 'processing', retryAfterMs: 1000 });
    expect(operations.claim('msg_1', 1000)).toEqual({ status: 'processing', retryAfterMs: 1000 });
    expect(operations.complete('msg_1', 'not-the-token', 60_000)).toBe(false);
    expect(await store.complete('msg_1', owner, 60_000)).toBe(true);
    expect(operations.claim('msg_1', 1000)).toEqual({ status: 'completed' });
    expect(operations.complete('msg_1', owner, 60_000)).toBe(false);

    const second = token(await store.claim('msg_2', 1000));
    expect(operations.release('msg_2', second)).toBe(true);
    expect(operations.release('msg_2', second)).toBe(false);
    now += 1;
    expect((await store.claim('msg_2', 1000)).status).toBe('acquired');

    // Bad arguments throw here (the promises reject with the same errors, see the contract suite).
    expect(() => operations.claim('', 1000)).toThrow(new TypeError('an idempotency key must be a non-empty string'));
    expect(() => operations.complete('msg_1', owner, 0)).toThrow(new RangeError('ttlMs must be a positive, finite number of milliseconds'));
    expect(() => operations.release('msg_1', '')).toThrow(new TypeError('an ownership token must be a non-empty string'));
  });

  it('offers its synchronous operations only while its methods are its own', () => {
    const store = memoryStore();
    expect(syncOperations(store)).toBeDefined();
    // A copy, or a store whose method was replaced, must be called through its methods.
    expect(syncOperations({ ...store })).toBeUndefined();
    expect(syncOperations({ ...store, claim: (key, lockMs) => store.claim(key, lockMs) })).toBeUndefined();
    const patched = memoryStore();
    patched.release = async () => false;
    expect(syncOperations(patched)).toBeUndefined();
  });

  it('a lock past its time no longer owns the key even before anyone claims it', async () => {
    let now = 0;
    const store = memoryStore({ now: () => now });
    const owner = token(await store.claim('msg_1', 1000));
    now = 1000;
    expect(await store.complete('msg_1', owner, 5000)).toBe(false);
    expect(await store.release('msg_1', owner)).toBe(false);
  });

  it('checks its options', () => {
    for (const max of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '10' as never]) {
      expect(() => memoryStore({ max })).toThrow(new RangeError('memoryStore max must be a positive whole number of ids'));
    }
    expect(() => memoryStore({ now: 5 as never })).toThrow(new TypeError('memoryStore now must be a function returning epoch milliseconds'));
  });
});

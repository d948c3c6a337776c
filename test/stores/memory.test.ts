/**
 * What only the memory store does: its bound (`max`, least recently used first), its injectable
 * clock, and its option checks. The shared behaviour is in contract.test.ts.
 */

import { describe, expect, it } from 'vitest';
import { DEFAULT_MEMORY_STORE_MAX, memoryStore } from '../../src/stores/memory.ts';
import { token } from '../support/stores.ts';

describe('memoryStore', () => {
  it('remembers at most max ids, forgetting the least recently used first', async () => {
    const store = memoryStore({ max: 2 });
    for (const id of ['a', 'b', 'c']) expect(await store.complete(id, token(await store.claim(id, 10_000)), 60_000)).toBe(true);
    // 'a' was pushed out by 'c', so a late duplicate of 'a' would run again: the documented cost of the bound.
    expect((await store.claim('a', 10_000)).status).toBe('acquired');
    expect(await store.claim('c', 10_000)).toEqual({ status: 'completed' });
    expect(DEFAULT_MEMORY_STORE_MAX).toBe(100_000);
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
    now += 2;
    expect((await store.claim('msg_1', 1000)).status).toBe('acquired');
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

/**
 * What only the memory store does: its bound (`max`: expired entries first, then the oldest
 * completed id, never a live claim), its injectable clock, its synchronous operations (what the receiver calls) and its option checks. The shared
 * behaviour is in contract.test.ts.
 */

import { describe, expect, it } from 'vitest';
import { DEFAULT_MEMORY_STORE_MAX, DEFAULT_MEMORY_STORE_UNSIGNED_MAX, memoryStore } from '../../src/stores/memory/index.ts';
import { DEFAULT_UNSIGNED_MAX } from '../../src/index.ts';
import { StoreError } from '../../src/stores/types.ts';
import { syncOperations, type SyncOperations } from '../../src/stores/internal.ts';
import { token } from '../support/stores.ts';
import { owns, Tokens, type Entry } from '../../src/stores/memory/space.ts';

function direct(store: ReturnType<typeof memoryStore>): SyncOperations {
  const operations = syncOperations(store);
  if (operations === undefined) throw new Error('the memory store offers no synchronous operations');
  return operations;
}

describe('memoryStore', () => {
  it('remembers at most max ids, forgetting the oldest completed id first', async () => {
    const store = memoryStore({ max: 2 });
    for (const id of ['d:s:a', 'd:s:b', 'd:s:c']) expect(await store.complete(id, token(await store.claim(id, 10_000)), 60_000)).toBe(true);
    // 'a' was pushed out by 'c', so a late duplicate of 'a' would run again: the documented cost of the bound.
    expect((await store.claim('d:s:a', 10_000)).status).toBe('acquired');
    expect(await store.claim('d:s:c', 10_000)).toEqual({ status: 'completed' });
    expect(DEFAULT_MEMORY_STORE_MAX).toBe(100_000);
    expect(DEFAULT_MEMORY_STORE_UNSIGNED_MAX).toBe(10_000);
    expect(DEFAULT_MEMORY_STORE_UNSIGNED_MAX).toBe(DEFAULT_UNSIGNED_MAX);
  });

  it('forgets completed ids oldest first also after ids came back past their TTL (the order of completions stays right)', () => {
    let now = 0;
    const ops = direct(memoryStore({ max: 50, now: () => now }));
    const deliver = (id: string, ttlMs: number) => {
      const claimed = ops.claim(id, 1000);
      if (claimed.status !== 'acquired') throw new Error(`${id} was ${claimed.status}`);
      expect(ops.complete(id, claimed.token, ttlMs)).toBe(true);
    };
    // One id completed, expired and delivered again 3 000 times: each round leaves its earlier
    // completion behind in the order of completions, far more than the store holds.
    for (let i = 0; i < 3000; i++) {
      deliver('d:s:again', 10);
      now += 11;
    }
    expect(ops.claim('d:s:again', 1000)).toMatchObject({ status: 'acquired' });
    // Fill the store with 49 completions that stay remembered, then one more id past the bound:
    // the oldest of them goes, and only it.
    for (let i = 0; i < 49; i++) deliver(`d:s:${i}`, 1_000_000);
    deliver('d:s:extra', 1_000_000);
    for (let i = 1; i < 49; i++) expect(ops.claim(`d:s:${i}`, 1000)).toEqual({ status: 'completed' });
    expect(ops.claim('d:s:extra', 1000)).toEqual({ status: 'completed' });
    // Last, as a claim of a forgotten id takes room itself.
    expect(ops.claim('d:s:0', 1000).status).toBe('acquired');
  });

  it('never evicts a live claim: completed ids go first, and full of live claims it refuses with StoreError full', async () => {
    let now = 0;
    const store = memoryStore({ max: 2, now: () => now });
    const a = token(await store.claim('d:s:a', 10_000));
    const b = token(await store.claim('d:s:b', 10_000));
    // Both live: a third claim would have to evict one, and a duplicate of it would then run.
    const refused = await store.claim('d:s:c', 10_000).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StoreError);
    expect(refused).toMatchObject({ name: 'StoreError', store: 'memory', reason: 'full' });
    expect((refused as Error).message).toContain('raise max');
    // The held claims still own their ids, and duplicates of them are still refused.
    expect((await store.claim('d:s:a', 10_000)).status).toBe('processing');
    expect(await store.complete('d:s:a', a, 60_000)).toBe(true);
    // Now one entry is a completed id: it goes before any live claim.
    expect((await store.claim('d:s:c', 10_000)).status).toBe('acquired');
    expect(await store.complete('d:s:b', b, 60_000)).toBe(true);
    // An expired claim makes room too, before a live one.
    token(await store.claim('d:s:e', 10_000));
    now += 10_000;
    expect((await store.claim('d:s:f', 10_000)).status).toBe('acquired');
    // The pass that found one expired claim freed both (c's and e's): f's is the only claim left.
    expect(store.usage().signed).toEqual({ claims: 1, completed: 0, max: 2 });
    expect((await store.claim('d:s:e', 10_000)).status).toBe('acquired');
  });

  it('at its bound frees an expired claim before it forgets a completed id still remembered', async () => {
    let now = 0;
    const store = memoryStore({ max: 3, now: () => now });
    token(await store.claim('d:s:a', 60_000));
    token(await store.claim('d:s:b', 1_000));
    expect(await store.complete('d:s:c', token(await store.claim('d:s:c', 60_000)), 60_000)).toBe(true);
    now = 2_000; // b's lock ran out; a is live; c is remembered
    expect((await store.claim('d:s:d', 60_000)).status).toBe('acquired');
    expect(await store.claim('d:s:c', 60_000)).toEqual({ status: 'completed' });
    expect(store.usage().signed).toEqual({ claims: 2, completed: 1, max: 3 });
  });

  it('full of live claims, refuses without rescanning until a lock can have run out, then admits', async () => {
    let now = 0;
    const store = memoryStore({ max: 2, now: () => now });
    token(await store.claim('d:s:a', 5_000));
    token(await store.claim('d:s:b', 1_000));
    await expect(store.claim('d:s:c', 1_000)).rejects.toMatchObject({ reason: 'full' });
    now = 999;
    await expect(store.claim('d:s:c', 1_000)).rejects.toMatchObject({ reason: 'full' });
    now = 1_000; // b's lock runs out exactly now
    const c = token(await store.claim('d:s:c', 1_000));
    // A shorter lock taken later lowers the bound: its expiry is seen at once.
    expect(await store.release('d:s:c', c)).toBe(true);
    token(await store.claim('d:s:e', 10));
    await expect(store.claim('d:s:f', 1_000)).rejects.toMatchObject({ reason: 'full' });
    now = 1_010;
    expect((await store.claim('d:s:f', 1_000)).status).toBe('acquired');
  });

  it('keeps unsigned ids in a space of their own: a flood of them evicts no signed id', async () => {
    const store = memoryStore({ max: 10, unsignedMax: 5 });
    const signed = token(await store.claim('d:s:msg_1', 10_000));
    expect(await store.complete('d:s:msg_1', signed, 60_000)).toBe(true);
    // An unsigned delivery of the same id is another key: it neither sees nor blocks the signed one.
    const unsigned = token(await store.claim('d:u:msg_1', 10_000));
    expect(await store.complete('d:u:msg_1', unsigned, 60_000)).toBe(true);
    for (let i = 0; i < 1000; i++) {
      const key = `d:u:flood_${i}`;
      expect(await store.complete(key, token(await store.claim(key, 10_000)), 60_000)).toBe(true);
    }
    expect(await store.claim('d:s:msg_1', 10_000)).toEqual({ status: 'completed' });
    expect(store.usage()).toEqual({ signed: { claims: 0, completed: 1, max: 10 }, unsigned: { claims: 0, completed: 5, max: 5 } });
  });

  it('full of live unsigned claims, refuses the next unsigned one with unsigned_limit; signed ids still pass', async () => {
    const store = memoryStore({ max: 2, unsignedMax: 2 });
    token(await store.claim('d:u:a', 10_000));
    token(await store.claim('d:u:b', 10_000));
    const refused = await store.claim('d:u:c', 10_000).catch((error: unknown) => error);
    expect(refused).toMatchObject({ name: 'StoreError', store: 'memory', reason: 'unsigned_limit' });
    expect((refused as Error).message).toBe(
      'memory store: no room for another unsigned id (all 2 unsigned entries are live claims; unsignedMax 2), so the claim was refused rather than evict a claim whose handler still runs',
    );
    expect((await store.claim('d:s:c', 10_000)).status).toBe('acquired');
  });

  it('a lock shortened by extend still counts as expired when the store looks for room', async () => {
    let now = 0;
    const store = memoryStore({ max: 3, now: () => now });
    for (const id of ['d:s:done1', 'd:s:done2']) expect(await store.complete(id, token(await store.claim(id, 10_000)), 1_000_000)).toBe(true);
    const short = token(await store.claim('d:s:short', 60_000));
    // Full: this claim scans the live claims (none ends before 60 s, which the store then knows
    // without scanning again) and forgets done1, the oldest completion.
    token(await store.claim('d:s:other', 60_000));
    // Shortened to 1 s: at 2 s its lock has run out, so the next claim must take its room rather
    // than forget done2, whose redelivery would then run again.
    expect(await store.extend('d:s:short', short, 1_000)).toBe(true);
    now = 2_000;
    expect((await store.claim('d:s:new', 10_000)).status).toBe('acquired');
    expect(await store.claim('d:s:done2', 10_000)).toEqual({ status: 'completed' });
  });

  it('extend renews a held lock, and only for its own token', async () => {
    let now = 0;
    const store = memoryStore({ now: () => now });
    const owner = token(await store.claim('d:s:a', 1000));
    now = 900;
    expect(await store.extend('d:s:a', 'someone-else', 1000)).toBe(false);
    expect(await store.extend('d:s:a', owner, 1000)).toBe(true);
    now = 1800;
    expect(await store.claim('d:s:a', 1000)).toEqual({ status: 'processing', retryAfterMs: 100 });
    now = 1900;
    expect(await store.extend('d:s:a', owner, 1000)).toBe(false);
    expect((await store.claim('d:s:a', 1000)).status).toBe('acquired');
  });

  it('completion is idempotent for its own token', async () => {
    const store = memoryStore();
    const owner = token(await store.claim('d:s:a', 1000));
    expect(await store.complete('d:s:a', owner, 60_000)).toBe(true);
    expect(await store.complete('d:s:a', owner, 60_000)).toBe(true);
    expect(await store.complete('d:s:a', 'another', 60_000)).toBe(false);
    expect(await store.release('d:s:a', owner)).toBe(false);
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
    // Completing again with the same token is this token's own completion: true.
    expect(operations.complete('msg_1', owner, 60_000)).toBe(true);
    expect(operations.complete('msg_1', 'not-the-token', 60_000)).toBe(false);

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

  it('hands out distinct 128-bit hex tokens and fences a stale owner whose token differs only in its serial or its prefix', async () => {
    let now = 0;
    const store = memoryStore({ now: () => now });
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) seen.add(token(await store.claim(`d:s:${i}`, 1000)));
    expect(seen.size).toBe(1000);
    for (const issued of seen) expect(issued).toMatch(/^[0-9a-f]{32}$/);
    // An owner whose lock was taken over cannot complete, release or extend; the new one can, twice.
    const first = token(await store.claim('d:s:taken', 1000));
    now = 1000;
    const second = token(await store.claim('d:s:taken', 1000));
    expect(second).not.toBe(first);
    expect(await store.complete('d:s:taken', first, 60_000)).toBe(false);
    expect(await store.extend('d:s:taken', first, 1000)).toBe(false);
    expect(await store.release('d:s:taken', first)).toBe(false);
    expect(await store.complete('d:s:taken', second, 60_000)).toBe(true);
    expect(await store.complete('d:s:taken', second, 60_000)).toBe(true);
    expect(await store.complete('d:s:taken', first, 60_000)).toBe(false);
    // Not the same text in another case, nor longer or shorter.
    const third = token(await store.claim('d:s:case', 1000));
    for (const near of [third.toUpperCase(), `${third}0`, third.slice(1), ` ${third.slice(1)}`]) expect(await store.complete('d:s:case', near, 60_000)).toBe(false);
    expect(await store.complete('d:s:case', third, 60_000)).toBe(true);
  });

  it('starts a new series with a new random prefix when a series of serials runs out', () => {
    const tokens = new Tokens();
    const a = tokens.issue();
    // A completion's record: it keeps the parts only, so `owns` reads the token's digits.
    const entryOf = (): Entry => ({ key: 'k', prefix: tokens.prefix, serial: tokens.serial, until: 1, token: undefined, done: true });
    const first = entryOf();
    expect(a.slice(24)).toBe('00000000');
    expect(tokens.issue().slice(24)).toBe('00000001');
    tokens.serial = 2 ** 30 - 2;
    const last = tokens.issue();
    expect(last.slice(24)).toBe((2 ** 30 - 1).toString(16).padStart(8, '0'));
    expect(last.slice(0, 24)).toBe(a.slice(0, 24));
    const next = tokens.issue();
    // The next series: serial 0 again under a prefix of its own, so no token of the first series repeats.
    expect(next.slice(24)).toBe('00000000');
    expect(next.slice(0, 24)).not.toBe(a.slice(0, 24));
    expect(next).not.toBe(a);
    expect(owns(first, a)).toBe(true);
    expect(owns(first, next)).toBe(false);
    expect(owns(entryOf(), next)).toBe(true);
    expect(owns(entryOf(), a)).toBe(false);
    // Every digit of the serial is read: a token one digit off in any of its last eight is not the owner's.
    tokens.serial = 0x12345677;
    const text = tokens.issue();
    const stamped = entryOf();
    expect(text.slice(24)).toBe('12345678');
    for (let at = 24; at < 32; at++) expect(owns(stamped, `${text.slice(0, at)}${text[at] === '0' ? '1' : '0'}${text.slice(at + 1)}`)).toBe(false);
    expect(owns(stamped, text)).toBe(true);
    // Tokens share their first 30 digits 256 at a time: across that boundary each one is still its serial's.
    tokens.serial = 0x2fa;
    for (let serial = 0x2fb; serial < 0x40a; serial++) expect(tokens.issue()).toBe(`${tokens.prefix}${serial.toString(16).padStart(8, '0')}`);
  });

  it("recognises a live claim's own token, and only its text, before and after the claim settles", async () => {
    let now = 0;
    const store = memoryStore({ now: () => now });
    const owner = token(await store.claim('d:s:live', 1000));
    // The same text built anew (not the string the claim handed out) is the owner too.
    const copy = [...owner].join('');
    expect(await store.extend('d:s:live', copy, 1000)).toBe(true);
    for (const near of [owner.toUpperCase(), `${owner}0`, owner.slice(1), `${owner.slice(0, 31)}${owner[31] === 'f' ? '0' : 'f'}`]) {
      expect(await store.extend('d:s:live', near, 1000)).toBe(false);
      expect(await store.complete('d:s:live', near, 60_000)).toBe(false);
    }
    expect(await store.complete('d:s:live', owner, 60_000)).toBe(true);
    // Completed, the record keeps the token's parts only: the owner's retry is still told yes, others no.
    expect(await store.complete('d:s:live', copy, 60_000)).toBe(true);
    expect(await store.complete('d:s:live', `${owner.slice(0, 31)}${owner[31] === 'f' ? '0' : 'f'}`, 60_000)).toBe(false);
    // Taken over after its lock ran out, the record holds the new owner's text.
    const stale = token(await store.claim('d:s:over', 1000));
    now = 1000;
    const fresh = token(await store.claim('d:s:over', 1000));
    expect(await store.release('d:s:over', stale)).toBe(false);
    expect(await store.release('d:s:over', fresh)).toBe(true);
  });

  it('checks its options', () => {
    for (const max of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '10' as never]) {
      expect(() => memoryStore({ max })).toThrow(new RangeError('memoryStore max must be a positive whole number of ids'));
    }
    expect(() => memoryStore({ unsignedMax: 0 })).toThrow(new RangeError('memoryStore unsignedMax must be a positive whole number of ids'));
    expect(() => memoryStore({ now: 5 as never })).toThrow(new TypeError('memoryStore now must be a function returning epoch milliseconds'));
  });
});

/**
 * createReceiver's own options: every mistake is a TypeError or RangeError at construction, with
 * a message that says what to pass.
 */

import { describe, expect, it } from 'vitest';
import { createReceiver, DEFAULT_LOCK_SECONDS, DEFAULT_RENEWED_LOCK_SECONDS, DEFAULT_TTL_SECONDS, DEFAULT_UNSIGNED_TTL_SECONDS, type ReceiverOptions } from '../../src/receiver.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import { SECRET, delivery } from './support.ts';

const make = (options: Partial<ReceiverOptions>) => () => createReceiver({ secrets: SECRET, ...options });

describe('createReceiver options', () => {
  it('idempotency is an options object or false', () => {
    for (const idempotency of ['yes', true, 1, null]) {
      expect(make({ idempotency: idempotency as never })).toThrow(new TypeError('idempotency must be an options object or false'));
    }
    expect(make({ idempotency: false })).not.toThrow();
    expect(make({ idempotency: {} })).not.toThrow();
  });

  it.each(['ttlSeconds', 'lockSeconds', 'unsignedTtlSeconds'] as const)('%s is a positive, finite number of seconds', (name) => {
    // The default store (memory) renews claims, so its default lock is the renewed one.
    const fallback = name === 'ttlSeconds' ? DEFAULT_TTL_SECONDS : name === 'lockSeconds' ? DEFAULT_RENEWED_LOCK_SECONDS : DEFAULT_UNSIGNED_TTL_SECONDS;
    for (const value of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '60', Number.MAX_SAFE_INTEGER]) {
      expect(make({ idempotency: { [name]: value as never } })).toThrow(
        new RangeError(`idempotency.${name} must be a positive, finite number of seconds (default ${fallback})`),
      );
    }
    // With a tolerance of a quarter second, so that half a second remembers ids for the window.
    expect(make({ toleranceSeconds: 0.25, idempotency: { [name]: 0.5 } })).not.toThrow();
  });

  it('ttlSeconds is at least twice toleranceSeconds: a replay inside the timestamp window is never run again', () => {
    expect(make({ idempotency: { ttlSeconds: 599 } })).toThrow(
      new RangeError(
        'idempotency.ttlSeconds (599) must be at least twice toleranceSeconds (300), 600 s: a timestamp is accepted from 300 s before ' +
          'until 300 s after it, and an id forgotten sooner lets a captured request be replayed and run again',
      ),
    );
    expect(make({ toleranceSeconds: 60, idempotency: { ttlSeconds: 119.5 } })).toThrow(/^idempotency\.ttlSeconds \(119\.5\) must be at least twice toleranceSeconds \(60\), 120 s/);
    // The default ttl (a day) against a tolerance of more than half a day: the default is named.
    expect(make({ toleranceSeconds: 50_000, idempotency: {} })).toThrow(
      /^idempotency\.ttlSeconds \(86400, the default\) must be at least twice toleranceSeconds \(50000\), 100000 s/,
    );
    expect(make({ idempotency: { ttlSeconds: 600 } })).not.toThrow();
    expect(make({ toleranceSeconds: 50_000, idempotency: { ttlSeconds: 100_000 } })).not.toThrow();
    // Without deduplication nothing is remembered, and there is no ttl to check.
    expect(make({ toleranceSeconds: 50_000, idempotency: false })).not.toThrow();
  });

  it('namespace is a non-empty string without ":"', () => {
    for (const namespace of ['', 42, ['a']]) {
      expect(make({ idempotency: { namespace: namespace as never } })).toThrow(new TypeError('idempotency.namespace must be a non-empty string'));
    }
    // 'a:b' + id 'c' and 'a' + id 'b:c' would share the key 'a:b:c'.
    expect(make({ idempotency: { namespace: 'billing:eu' } })).toThrow(
      new TypeError(`idempotency.namespace must not contain ':' (use '-' or '.' to separate words)`),
    );
    expect(make({ idempotency: { namespace: 'billing-eu.v2' } })).not.toThrow();
  });

  it("onStoreError is 'reject' or 'process'", () => {
    for (const onStoreError of ['ignore', true, '']) {
      expect(make({ idempotency: { onStoreError: onStoreError as never } })).toThrow(new TypeError(`idempotency.onStoreError must be 'reject' or 'process'`));
    }
  });

  it('store implements claim, complete and release', () => {
    const store = memoryStore();
    expect(make({ idempotency: { store: {} as never } })).toThrow(new TypeError('idempotency.store must implement claim()'));
    expect(make({ idempotency: { store: { claim: store.claim } as never } })).toThrow(new TypeError('idempotency.store must implement complete()'));
    expect(make({ idempotency: { store: { claim: store.claim, complete: store.complete } as IdempotencyStore } })).toThrow(
      new TypeError('idempotency.store must implement release()'),
    );
  });

  it('pullOnly: the verifier options are checked all the same (unsigned decides whether an unattempted pulled event runs)', () => {
    // A misspelt unsigned must be refused, not read as 'reject'.
    expect(() => createReceiver({ pullOnly: true, unsigned: 'accepted' as never })).toThrow(new TypeError(`unsigned must be 'reject' or 'accept'`));
    expect(() => createReceiver({ pullOnly: true, toleranceSeconds: -1 })).toThrow(RangeError);
    expect(() => createReceiver({ pullOnly: true, now: 5 as never })).toThrow(new TypeError('now must be a function returning epoch milliseconds'));
    expect(() => createReceiver({ pullOnly: true, unsigned: 'accept' })).not.toThrow();
  });

  it('onError is a function', () => {
    expect(make({ onError: 'log' as never })).toThrow(new TypeError('onError must be a function'));
  });

  it('handle needs a handler function', async () => {
    const receiver = createReceiver({ secrets: SECRET });
    await expect(receiver.handle(await delivery('msg_1'), undefined as never)).rejects.toThrow(new TypeError('handle needs a handler function'));
  });

  it('passes lockSeconds and ttlSeconds to the store in milliseconds, and keys ids by namespace', async () => {
    const store = memoryStore();
    const seen: unknown[][] = [];
    const spy: IdempotencyStore = {
      claim: (key, lockMs) => (seen.push(['claim', key, lockMs]), store.claim(key, lockMs)),
      complete: (key, token, ttlMs) => (seen.push(['complete', key, ttlMs]), store.complete(key, token, ttlMs)),
      release: (key, token) => store.release(key, token),
    };
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store: spy, lockSeconds: 2.5, ttlSeconds: 3600, namespace: 'orders' } });
    await receiver.handle(await delivery('msg_units'), () => 1);
    expect(seen).toEqual([
      ['claim', 'orders:s:msg_units', 2500],
      ['complete', 'orders:s:msg_units', 3_600_000],
    ]);
    const defaults = createReceiver({ secrets: SECRET, idempotency: { store: spy } });
    seen.length = 0;
    await defaults.handle(await delivery('msg_defaults'), () => 1);
    expect(seen).toEqual([
      ['claim', 'default:s:msg_defaults', DEFAULT_LOCK_SECONDS * 1000],
      ['complete', 'default:s:msg_defaults', DEFAULT_TTL_SECONDS * 1000],
    ]);
  });
});

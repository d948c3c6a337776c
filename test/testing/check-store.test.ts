/**
 * The conformance kit catches broken stores: each test breaks one rule in an otherwise correct
 * store and expects `checkStore` to reject, naming that rule in words, while the rest still pass.
 */

import { describe, expect, it } from 'vitest';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { ClaimResult, IdempotencyStore } from '../../src/stores/types.ts';
import { checkStore, StoreConformanceError, type CheckStoreOptions, type StoreFactory, type StoreRule } from '../../src/testing/check-store.ts';

type Fault =
  | 'check-then-set'
  | 'takeover-check-then-set'
  | 'no-fencing'
  | 'not-idempotent'
  | 'never-expires'
  | 'extend-ignored'
  | 'extend-revives'
  | 'no-argument-checks'
  | 'type-errors-only'
  | 'rejects-with-strings'
  | 'argument-checks-after-write'
  | 'one-key-class'
  | 'same-token'
  | 'completed-forever'
  | 'complete-after-ttl'
  | 'hangs';

interface Entry {
  token: string;
  done: boolean;
  until: number;
}

/** An argument the operation does not take. */
const NONE = Symbol('none');

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * A small correct store on the kit's clock, with one fault switched on: the kind of mistake a
 * hand-written DynamoDB or MongoDB store makes.
 */
function faultyStore(now: () => number, fault?: Fault, shared = new Map<string, Entry>()): IdempotencyStore {
  const entries = shared;
  let tokens = 0;
  const keyOf = (key: string) => (fault === 'one-key-class' ? key.replace(/:[su]:/, ':') : key);
  const check = (key: unknown, token: unknown, ms: unknown) => {
    if (fault === 'no-argument-checks') return;
    // A store that refuses everything with TypeError, or (wrongly) with a thrown string.
    const refuse = (error: Error) => {
      if (fault === 'rejects-with-strings') throw 'bad argument';
      throw fault === 'type-errors-only' ? new TypeError(error.message) : error;
    };
    if (typeof key !== 'string' || key === '') refuse(new TypeError('bad key'));
    if (token !== NONE && (typeof token !== 'string' || token === '')) refuse(new TypeError('bad token'));
    if (ms !== NONE && (typeof ms !== 'number' || !(ms > 0) || ms > Number.MAX_SAFE_INTEGER)) refuse(new RangeError('bad duration'));
  };
  const live = (entry: Entry | undefined, time: number) => entry !== undefined && (fault === 'never-expires' || entry.until > time);
  const owned = (key: string, token: string) => {
    const entry = entries.get(keyOf(key));
    return live(entry, now()) && !entry!.done && (fault === 'no-fencing' || entry!.token === token) ? entry : undefined;
  };
  return {
    async claim(key, lockMs): Promise<ClaimResult> {
      try {
        check(key, NONE, lockMs);
      } catch (error) {
        // Writes the key, then refuses: too late.
        if (fault === 'argument-checks-after-write' && typeof key === 'string' && key !== '') entries.set(keyOf(key), { token: 'written', done: false, until: now() + 60_000 });
        throw error;
      }
      const existing = entries.get(keyOf(key));
      if (fault === 'check-then-set' || (fault === 'takeover-check-then-set' && existing !== undefined)) await tick();
      const time = now();
      const entry = entries.get(keyOf(key));
      if (fault !== 'check-then-set' && fault !== 'takeover-check-then-set' && live(entry, time)) {
        return entry!.done ? { status: 'completed' } : { status: 'processing', retryAfterMs: entry!.until - time };
      }
      // The faulty variants decided on what they read before the await.
      if ((fault === 'check-then-set' || fault === 'takeover-check-then-set') && live(existing, time)) {
        return existing!.done ? { status: 'completed' } : { status: 'processing', retryAfterMs: existing!.until - time };
      }
      const token = fault === 'same-token' ? 'always-the-same' : `token-${++tokens}-${Math.random().toString(16).slice(2)}`;
      entries.set(keyOf(key), { token, done: false, until: time + lockMs });
      return { status: 'acquired', token };
    },
    async complete(key, token, ttlMs) {
      check(key, token, ttlMs);
      const entry = entries.get(keyOf(key));
      if (entry?.done && live(entry, now())) return fault !== 'not-idempotent' && entry.token === token;
      // The record of a forgotten completion, not yet cleaned up, still answers its owner.
      if (fault === 'complete-after-ttl' && entry?.done) return entry.token === token;
      const held = owned(key, token);
      if (held === undefined) return false;
      held.done = true;
      held.until = fault === 'completed-forever' ? Number.MAX_SAFE_INTEGER : now() + ttlMs;
      return true;
    },
    async release(key, token) {
      check(key, token, NONE);
      if (owned(key, token) === undefined) return false;
      entries.delete(keyOf(key));
      return true;
    },
    async extend(key, token, lockMs) {
      check(key, token, lockMs);
      const entry = entries.get(keyOf(key));
      if (fault === 'extend-revives' && entry !== undefined && !entry.done && entry.token === token) {
        entry.until = now() + lockMs;
        return true;
      }
      const held = owned(key, token);
      if (held === undefined) return false;
      if (fault !== 'extend-ignored') held.until = now() + lockMs;
      return true;
    },
    async ping() {},
  };
}

/** Runs the kit on the kit's clock and returns its failures, as rule → message. */
async function failures(makeStore: StoreFactory, options: CheckStoreOptions = {}): Promise<Map<StoreRule, string>> {
  const error = await checkStore(makeStore, { clock: 'manual', ...options }).then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(error instanceof StoreConformanceError)) throw new Error(`expected a StoreConformanceError, got ${String(error)}`);
  expect(error.name).toBe('AssertionError');
  expect(error.report.failed).toBe(error.failures.length);
  for (const failure of error.failures) expect(error.message).toContain(`- ${failure.message} [${failure.rule}]`);
  return new Map(error.failures.map((failure) => [failure.rule, failure.message]));
}

const withFault = (fault?: Fault): StoreFactory => {
  const shared = new Map<string, Entry>();
  return ({ now }) => faultyStore(now, fault, shared);
};

/** The ordering rules, in the order they run, skipped on a store without the ordering operations. */
const ORDERING_RULES = ['ordering-stale', 'ordering-compare', 'ordering-exclusive', 'ordering-failed-newer', 'ordering-never-down', 'ordering-fencing', 'ordering-concurrent', 'ordering-lock-expiry', 'ordering-forget', 'ordering-one-id'];

describe('checkStore', () => {
  it('passes the correct reference store and the memory store, with a report of every rule', async () => {
    const report = await checkStore(({ now }) => faultyStore(now), { clock: 'manual' });
    // The reference store has no ordering operations: their 10 rules are skipped.
    expect(report).toMatchObject({ passed: 15, failed: 0, skipped: 12 });
    expect(report.rules.find((rule) => rule.rule === 'unreachable')).toMatchObject({ outcome: 'skipped', message: 'no unreachable backend was given' });
    expect(report.rules.find((rule) => rule.rule === 'ordering-stale')).toMatchObject({ outcome: 'skipped', message: 'the store has no ordering operations' });
    expect(await checkStore(({ now }) => memoryStore({ now }), { clock: 'manual' })).toMatchObject({ passed: 25, failed: 0 });
  });

  it('catches a claim that checks, awaits, then sets: not atomic', async () => {
    const found = await failures(withFault('check-then-set'));
    expect(found.get('concurrent-claims')).toBe('claim is not atomic: 50 of 50 concurrent claims acquired one key');
    expect([...found.keys()]).toContain('concurrent-takeover');
  });

  it('catches a takeover of an expired key that is not atomic, even when fresh claims are', async () => {
    const found = await failures(withFault('takeover-check-then-set'), { concurrency: 20 });
    expect([...found]).toEqual([['concurrent-takeover', 'takeover is not atomic: 20 of 20 concurrent claims took over one expired key']]);
  });

  it('catches a store without token fencing', async () => {
    const found = await failures(withFault('no-fencing'));
    expect(found.get('fencing')).toMatch(/^no token fencing on complete: token "not-the-token" completed a claim owned by "token-\d+-[0-9a-f]+"$/);
    expect(found.get('release')).toBe("release with the released claim's token freed the next owner's claim: no token fencing on release");
    expect(found.get('expiry-takeover')).toBe("no token fencing after a takeover: the stale owner completed the new owner's claim");
  });

  it('catches a completion that is not idempotent for its own token', async () => {
    const found = await failures(withFault('not-idempotent'));
    expect([...found]).toEqual([
      [
        'complete-idempotent',
        'completion is not idempotent: completing again with the same token answered false (a completion retried after a timeout would be reported as a takeover)',
      ],
    ]);
  });

  it('catches locks that never expire, completions never forgotten, and extend that does nothing or revives a lost lease', async () => {
    const never = await failures(withFault('never-expires'));
    expect(never.get('expiry-takeover')).toBe('a lock of 1000 ms was never taken over: still processing once the clock passed its end');
    expect(never.get('expiry-stale-owner')).toBe("complete after the lock of 1000 ms expired answered true: an expired claim is no longer the owner's");
    expect(never.get('ttl')).toBe('a completion of 1000 ms was never forgotten: still completed once the clock passed its end');

    expect([...(await failures(withFault('completed-forever')))]).toEqual([['ttl', 'a completion of 1000 ms was never forgotten: still completed once the clock passed its end']]);
    // Forgotten, yet its owner's token still completes it (a record past its TTL, not yet deleted).
    expect([...(await failures(withFault('complete-after-ttl')))]).toEqual([
      ['ttl', "complete by the owner answered true after its completion of 1000 ms was forgotten: a forgotten id is no longer the owner's"],
    ]);
    expect([...(await failures(withFault('extend-ignored')))]).toEqual([
      ['extend', 'extend does not keep the claim alive: past its first lock of 5000 ms the key answered acquired instead of processing'],
    ]);
    expect([...(await failures(withFault('extend-revives')))]).toEqual([
      ['expiry-stale-owner', 'extend after the lock of 1000 ms expired answered true: an expired lock must not come back to life'],
      ['extend', 'extend of an expired lock answered true: a lost lease must not be renewed'],
    ]);
  });

  it('catches missing argument checks, shared key classes and reused tokens', async () => {
    const loose = await failures(withFault('no-argument-checks'));
    expect([...loose.keys()]).toEqual(['arguments']);
    expect(loose.get('arguments')).toMatch(/^bad arguments are not refused: claim\(""\, 1000\) resolved with \{"status":"acquired","token":"token-\d+-[0-9a-f]+"\} instead of rejecting with a TypeError; .*; and \d+ more$/);

    const strings = await failures(withFault('rejects-with-strings'));
    expect([...strings.keys()]).toEqual(['arguments']);
    expect(strings.get('arguments')).toMatch(/^bad arguments are not refused: claim\(""\, 1000\) rejected with "bad argument", which is not an Error; .*; and \d+ more$/);
    expect([...(await failures(withFault('argument-checks-after-write')))]).toEqual([
      ['arguments', 'a rejected call with bad arguments wrote something: the key then answered processing instead of acquired'],
    ]);

    expect([...(await failures(withFault('one-key-class')))]).toEqual([
      ['independent-keys', 'the unsigned key of an id answered processing while only the signed key was claimed: the key classes are not independent'],
    ]);
    const reused = await failures(withFault('same-token'));
    expect(reused.get('release')).toBe('the claim after a release got the same token as the released claim: tokens must be fresh, or an old owner could act on the new claim');
    expect(reused.get('expiry-takeover')).toBe("the claim that took over an expired lock got the stale owner's token");
  });

  it('passes a store that refuses every bad argument with a TypeError, recommending RangeError for durations', async () => {
    const report = await checkStore(withFault('type-errors-only'), { clock: 'manual' });
    expect(report).toMatchObject({ passed: 15, failed: 0, skipped: 12 });
    const rule = report.rules.find((r) => r.rule === 'arguments')!;
    expect(rule.outcome).toBe('passed');
    expect(rule.recommendation).toMatch(
      /^bad arguments are refused, some with another class than usual \(TypeError for a bad key or token, RangeError for a bad duration\): claim\("check[0-9a-f]+:s:arguments-1", 0\) rejected with TypeError, where RangeError is usual; .*; and \d+ more$/,
    );
    // The correct reference store gets no recommendation.
    const clean = await checkStore(withFault(), { clock: 'manual' });
    expect(clean.rules.find((r) => r.rule === 'arguments')).not.toHaveProperty('recommendation');
  });

  it('passes a store that accepts a lock or a TTL of 2 ** 53 ms, which the contract leaves to the store', async () => {
    // The memory store behind it, with every duration past 2^53 - 1 taken as 2^53 - 1 (far past
    // any clock's end): a long but finite duration is accepted, not refused.
    const longest = (ms: number) => (typeof ms === 'number' && ms > Number.MAX_SAFE_INTEGER && Number.isFinite(ms) ? Number.MAX_SAFE_INTEGER : ms);
    const accepting: StoreFactory = ({ now }) => {
      const store = memoryStore({ now });
      return {
        claim: (key, lockMs) => store.claim(key, longest(lockMs)),
        complete: (key, token, ttlMs) => store.complete(key, token, longest(ttlMs)),
        release: (key, token) => store.release(key, token),
        extend: (key, token, lockMs) => store.extend(key, token, longest(lockMs)),
        ping: () => store.ping(),
      };
    };
    const made = await accepting({ now: Date.now });
    const claimed = await made.claim('default:s:long', 2 ** 53);
    expect(claimed.status).toBe('acquired');
    expect(await made.complete('default:s:long', (claimed as { token: string }).token, 2 ** 53)).toBe(true);
    const report = await checkStore(accepting, { clock: 'manual' });
    expect(report).toMatchObject({ passed: 15, failed: 0, skipped: 12 });
    expect(report.rules.find((r) => r.rule === 'arguments')).toMatchObject({ outcome: 'passed' });
    // Durations the contract does rule out are still required to be refused.
    const found = await failures(withFault('no-argument-checks'));
    expect(found.get('arguments')).toMatch(/^bad arguments are not refused: /);
  });

  it('catches an ordering store that keeps ordered ids apart from unordered ones, or per entity', async () => {
    // Ordered ids under the entity's name, as a store keyed by the entity's slot would keep them.
    const apart: StoreFactory = ({ now }) => {
      const store = memoryStore({ now });
      const under = (key: string, entity: string) => `${entity}|${key}`;
      return {
        ...store,
        ordering: {
          ...store.ordering,
          claimOrdered: (key, lockMs, ttlMs, order) => store.ordering.claimOrdered(under(key, order.entity), lockMs, ttlMs, order),
          completeOrdered: (key, token, ttlMs, order) => store.ordering.completeOrdered(under(key, order.entity), token, ttlMs, order),
          releaseOrdered: (key, token, order) => store.ordering.releaseOrdered(under(key, order.entity), token, order),
          extendOrdered: (key, token, lockMs, order) => store.ordering.extendOrdered(under(key, order.entity), token, lockMs, order),
        },
      };
    };
    expect([...(await failures(apart))]).toEqual([
      ['ordering-one-id', 'an id completed by claim and complete answered acquired to claimOrdered instead of completed: turning ordering on would run it again'],
    ]);
  });

  it('catches a store whose instances do not share a backend when they should', async () => {
    const found = await failures(({ now }) => faultyStore(now), { shared: true });
    expect([...found]).toEqual([
      ['concurrent-claims', 'claim is not atomic: 5 of 50 concurrent claims (through 5 store instances) acquired one key'],
      ['concurrent-takeover', 'takeover is not atomic: 5 of 50 concurrent claims took over one expired key'],
      ['shared', 'a claim through one store was not seen through another on the same backend (it answered acquired)'],
    ]);
  });

  it('catches an operation that hangs, and bounds it', async () => {
    const hanging: StoreFactory = ({ now }) => ({ ...faultyStore(now), release: () => new Promise<boolean>(() => {}) });
    const found = await failures(hanging, { operationTimeoutMs: 100, skip: ['arguments'] });
    expect(found.get('release')).toMatch(/^release\("check[0-9a-f]{12}:s:release-1", "token-1-[0-9a-f]+"\) did not settle within 100 ms: a store must answer or reject, never hang$/);
  });

  it('catches an unreachable backend that hangs, and one that answers as if all were well', async () => {
    const healthy = withFault();
    const hangs = await failures(healthy, {
      unreachableTimeoutMs: 150,
      unreachable: () => ({
        claim: () => new Promise<ClaimResult>(() => {}),
        complete: () => Promise.reject(new Error('connection refused')),
        release: () => new Promise<boolean>(() => {}),
      }),
    });
    expect([...hangs]).toEqual([
      [
        'unreachable',
        'claim on an unreachable backend did not settle within 150 ms: it hangs instead of rejecting; release on an unreachable backend did not settle within 150 ms: it hangs instead of rejecting',
      ],
    ]);
    // Failing open: a store that answers `acquired` when its backend is gone lets every duplicate through.
    const failsOpen = await failures(healthy, { unreachable: () => ({ ...faultyStore(Date.now), release: () => Promise.reject(new Error('down')) }) });
    expect(failsOpen.get('unreachable')).toMatch(/^claim on an unreachable backend resolved with \{"status":"acquired",.*\} instead of rejecting \(a store must fail closed\); complete on an unreachable backend resolved with false/);
  });

  it('skips extend rules for a store without extend, and rules the caller skips', async () => {
    const noExtend: StoreFactory = ({ now }) => {
      const { extend: _dropped, ...store } = faultyStore(now);
      return store;
    };
    const report = await checkStore(noExtend, { clock: 'manual', skip: ['ttl'] });
    expect(report.rules.filter((rule) => rule.outcome === 'skipped').map((rule) => [rule.rule, rule.message])).toEqual([
      ['ttl', 'skipped by the caller'],
      ['extend', 'the store has no extend'],
      ['shared', 'the stores do not share a backend (shared: false)'],
      ['unreachable', 'no unreachable backend was given'],
      ...ORDERING_RULES.map((rule) => [rule, 'the store has no ordering operations']),
    ]);
    expect(report.failed).toBe(0);
  });

  it('runs the ordering rules on a store that has the ordering operations, and catches one that breaks them', async () => {
    // Versions ignored: every ordered claim is a plain claim, so nothing is ever stale.
    const noVersions: StoreFactory = ({ now }) => {
      const store = memoryStore({ now });
      return {
        ...store,
        ordering: {
          claimOrdered: (key, lockMs) => store.claim(key, lockMs),
          completeOrdered: (key, token, ttlMs) => store.complete(key, token, ttlMs),
          releaseOrdered: (key, token) => store.release(key, token),
          extendOrdered: (key, token, lockMs) => store.extend(key, token, lockMs),
          forgetVersion: async () => {},
        },
      };
    };
    const found = await failures(noVersions, { clock: 'manual' });
    expect(found.get('ordering-stale')).toBe('version 4 after version 5 was completed answered acquired instead of stale');
    expect(found.get('ordering-compare')).toMatch(/^version 2\^53 after 2\^53 \+ 1 answered acquired instead of stale/);
    expect(found.get('ordering-exclusive')).toBe('a second delivery of a locked entity answered acquired instead of busy');
    expect(found.get('ordering-concurrent')).toMatch(/^50 concurrent claims of one entity acquired 50 times instead of once$/);
    // Some but not all (a store written in JavaScript, which no type stops): a broken contract, reported once.
    const partial: StoreFactory = ({ now }) => {
      const store = memoryStore({ now });
      const { forgetVersion: _dropped, ...ordering } = store.ordering;
      return { ...store, ordering } as unknown as IdempotencyStore;
    };
    const some = await failures(partial, { clock: 'manual' });
    expect([...some]).toEqual([
      ['ordering-stale', "the store's ordering has no forgetVersion: the ordering operations (claimOrdered, completeOrdered, releaseOrdered, extendOrdered, forgetVersion) come all together"],
    ]);
  });

  it('refuses bad options with TypeError or RangeError', async () => {
    const make: StoreFactory = () => memoryStore();
    await expect(checkStore(undefined as unknown as StoreFactory)).rejects.toThrow(TypeError);
    await expect(checkStore(make, { clock: 'fake' as 'manual' })).rejects.toThrow(new TypeError(`checkStore clock must be 'real' or 'manual'`));
    await expect(checkStore(make, { concurrency: 1 })).rejects.toThrow(RangeError);
    await expect(checkStore(make, { lockMs: 0 })).rejects.toThrow(new RangeError('checkStore lockMs must be a positive, finite number'));
    await expect(checkStore(make, { namespace: 'a:b' })).rejects.toThrow(TypeError);
    await expect(checkStore(make, { skip: ['nope' as StoreRule] })).rejects.toThrow(new TypeError('checkStore skip: no rule named "nope"'));
  });
});

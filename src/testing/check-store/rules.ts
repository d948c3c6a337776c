/**
 * The store contract, one rule at a time, in the order the kit runs them (src/stores/types.ts
 * states the contract; each rule checks one promise of it).
 */

import { LONG, Store, TTL, bounded, describe, describeError, errorName, isError, sleep, storesFor, token, type Run } from './harness.ts';
import type { StoreRule } from './types.ts';

type Rule = readonly [StoreRule, string, (run: Run) => Promise<void>];

/** The contract, one rule at a time, in the order they run. */
export const RULES: readonly Rule[] = [
  [
    'arguments',
    'bad keys, tokens and durations reject with an Error (TypeError or RangeError recommended), and write nothing',
    async (run) => {
      const store = (await run.store()).raw;
      const key = run.key();
      const badKeys: unknown[] = ['', 42, undefined, null];
      const badTokens: unknown[] = ['', undefined, 42];
      // What the contract rules out (a duration is a positive, finite number of milliseconds);
      // a very long but finite one, such as 2 ** 53, is the store's to accept or refuse.
      const badDurations: unknown[] = [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '1000'];
      const calls: [string, unknown[], 'TypeError' | 'RangeError', () => Promise<unknown>][] = [];
      const as = <T>(value: unknown) => value as T;
      for (const bad of badKeys) {
        calls.push(['claim', [bad, 1000], 'TypeError', () => store.claim(as(bad), 1000)]);
        calls.push(['complete', [bad, 'token', 1000], 'TypeError', () => store.complete(as(bad), 'token', 1000)]);
        calls.push(['release', [bad, 'token'], 'TypeError', () => store.release(as(bad), 'token')]);
      }
      for (const bad of badTokens) {
        calls.push(['complete', [key, bad, 1000], 'TypeError', () => store.complete(key, as(bad), 1000)]);
        calls.push(['release', [key, bad], 'TypeError', () => store.release(key, as(bad))]);
      }
      for (const bad of badDurations) {
        calls.push(['claim', [key, bad], 'RangeError', () => store.claim(key, as(bad))]);
        calls.push(['complete', [key, 'token', bad], 'RangeError', () => store.complete(key, 'token', as(bad))]);
      }
      if (typeof store.extend === 'function' && run.settings.extend) {
        const extend = store.extend.bind(store);
        for (const bad of badKeys) calls.push(['extend', [bad, 'token', 1000], 'TypeError', () => extend(as(bad), 'token', 1000)]);
        for (const bad of badTokens) calls.push(['extend', [key, bad, 1000], 'TypeError', () => extend(key, as(bad), 1000)]);
        for (const bad of badDurations) calls.push(['extend', [key, 'token', bad], 'RangeError', () => extend(key, 'token', as(bad))]);
      }
      // The receiver never sends such values, and any rejection keeps a store safe: the rule asks
      // for a rejection with an Error and no write. The class is a recommendation.
      const wrong: string[] = [];
      const otherClass: string[] = [];
      for (const [operation, args, expected, call] of calls) {
        const outcome = await bounded(call, run.settings.timeoutMs);
        const shown = `${operation}(${args.map(describe).join(', ')})`;
        if (outcome.kind === 'resolved') wrong.push(`${shown} resolved with ${describe(outcome.value)} instead of rejecting with a ${expected}`);
        else if (outcome.kind === 'timeout') wrong.push(`${shown} did not settle within ${run.settings.timeoutMs} ms instead of rejecting with a ${expected}`);
        else if (!isError(outcome.error)) wrong.push(`${shown} rejected with ${describeError(outcome.error)}, which is not an Error`);
        else if (errorName(outcome.error) !== expected) otherClass.push(`${shown} rejected with ${errorName(outcome.error) ?? 'an Error'}, where ${expected} is usual`);
      }
      const list = (items: string[]) => `${items.slice(0, 3).join('; ')}${items.length > 3 ? `; and ${items.length - 3} more` : ''}`;
      if (wrong.length > 0) run.fail(`bad arguments are not refused: ${list(wrong)}`);
      const after = await new Store(store, run).claim(key, LONG);
      run.check(after.status === 'acquired', `a rejected call with bad arguments wrote something: the key then answered ${after.status} instead of acquired`);
      if (otherClass.length > 0) run.recommend(`bad arguments are refused, some with another class than usual (TypeError for a bad key or token, RangeError for a bad duration): ${list(otherClass)}`);
    },
  ],
  [
    'claim',
    'a claim acquires a free key with a token; the key is then processing (with the time left), and completed once completed',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const first = token(run, await store.claim(key, LONG), 'the first claim of a free key');
      const second = await store.claim(key, LONG);
      run.check(second.status === 'processing', `a claimed key answered ${second.status} to a second claim instead of processing`);
      const left = second.status === 'processing' ? second.retryAfterMs : undefined;
      if (left !== undefined) {
        run.check(
          typeof left === 'number' && left > 0 && left <= LONG && left > LONG / 2,
          `processing says the claim holds for ${describe(left)} ms more, but it was taken for ${LONG} ms just before`,
        );
      }
      run.check((await store.complete(key, first, TTL)) === true, 'complete by the owner of a live claim answered false');
      const third = await store.claim(key, LONG);
      run.check(third.status === 'completed', `a completed key answered ${third.status} to a claim instead of completed`);
      const again = await store.claim(key, LONG);
      run.check(again.status === 'completed', `a completed key answered completed once, then ${again.status}`);
    },
  ],
  [
    'release',
    'release frees the key for the next claim, which gets a new token; the old token then owns nothing',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const first = token(run, await store.claim(key, LONG), 'the first claim');
      run.check((await store.release(key, first)) === true, 'release by the owner of a live claim answered false');
      run.check((await store.release(key, first)) === false, 'a second release with the same token answered true: the key was already free');
      const second = token(run, await store.claim(key, LONG), 'a claim after release');
      run.check(second !== first, 'the claim after a release got the same token as the released claim: tokens must be fresh, or an old owner could act on the new claim');
      run.check((await store.release(key, first)) === false, "release with the released claim's token freed the next owner's claim: no token fencing on release");
      run.check((await store.complete(key, first, TTL)) === false, "complete with the released claim's token completed the next owner's claim: no token fencing on complete");
      const third = await store.claim(key, LONG);
      run.check(third.status === 'processing', `after an old token's release and complete, the new owner's key answered ${third.status} instead of processing`);
    },
  ],
  [
    'complete-idempotent',
    'completion is idempotent for its own token: completing again answers true; a completed key cannot be released or extended',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const owner = token(run, await store.claim(key, LONG), 'the claim');
      run.check((await store.complete(key, owner, TTL)) === true, 'complete by the owner of a live claim answered false');
      run.check(
        (await store.complete(key, owner, TTL)) === true,
        'completion is not idempotent: completing again with the same token answered false (a completion retried after a timeout would be reported as a takeover)',
      );
      const n = Math.min(run.settings.concurrency, 20);
      const together = await Promise.all(Array.from({ length: n }, () => store.complete(key, owner, TTL)));
      const refused = together.filter((ok) => !ok).length;
      run.check(refused === 0, `completion is not idempotent under concurrency: ${refused} of ${n} concurrent completions by the owner answered false`);
      run.check((await store.release(key, owner)) === false, 'release after completion answered true: a completed key must stay completed');
      if (run.settings.extend) run.check((await store.extend(key, owner, LONG)) === false, 'extend after completion answered true: a completed key holds no lock');
      const after = await store.claim(key, LONG);
      run.check(after.status === 'completed', `after the owner completed (and then tried release and extend), the key answered ${after.status} instead of completed`);
    },
  ],
  [
    'fencing',
    'token fencing: a token that does not own the claim can neither complete, release nor extend it',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const owner = token(run, await store.claim(key, LONG), 'the claim');
      const otherKey = run.key();
      const otherToken = token(run, await store.claim(otherKey, LONG), 'a claim of another key');
      const impostors = ['not-the-token', otherToken, 'lock', 'done', `lock:${owner}`, `done:${owner}`, `${owner} `, ` ${owner}`, owner.slice(0, -1)];
      if (owner.toUpperCase() !== owner) impostors.push(owner.toUpperCase());
      for (const impostor of impostors) {
        run.check((await store.complete(key, impostor, TTL)) === false, `no token fencing on complete: token ${describe(impostor)} completed a claim owned by ${describe(owner)}`);
        run.check((await store.release(key, impostor)) === false, `no token fencing on release: token ${describe(impostor)} released a claim owned by ${describe(owner)}`);
        if (run.settings.extend) {
          run.check((await store.extend(key, impostor, LONG)) === false, `no token fencing on extend: token ${describe(impostor)} extended a claim owned by ${describe(owner)}`);
        }
      }
      const held = await store.claim(key, LONG);
      run.check(held.status === 'processing', `after refused attempts by other tokens, the owner's key answered ${held.status} instead of processing`);
      run.check((await store.complete(key, owner, TTL)) === true, 'after refused attempts by other tokens, the owner could not complete its claim');
      run.check((await store.complete(otherKey, owner, TTL)) === false, "no token fencing on complete: one key's token completed another key's claim");
    },
  ],
  [
    'unknown-keys',
    'complete, release and extend of a key nobody claimed answer false and create nothing',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const stray = 'a-token-nobody-issued';
      run.check((await store.complete(key, stray, TTL)) === false, 'complete of a key nobody claimed answered true');
      run.check((await store.release(key, stray)) === false, 'release of a key nobody claimed answered true');
      if (run.settings.extend) run.check((await store.extend(key, stray, LONG)) === false, 'extend of a key nobody claimed answered true');
      const after = await store.claim(key, LONG);
      run.check(after.status === 'acquired', `complete, release or extend of an unknown key left something behind: the key then answered ${after.status} instead of acquired`);
    },
  ],
  [
    'independent-keys',
    'ids, key classes (signed and unsigned) and namespaces are independent',
    async (run) => {
      const store = await run.store();
      const id = `${run.rule}-shared-id`;
      const signed = run.key('s', id);
      const owner = token(run, await store.claim(signed, LONG), 'the signed claim');
      const unsigned = await store.claim(run.key('u', id), LONG);
      run.check(unsigned.status === 'acquired', `the unsigned key of an id answered ${unsigned.status} while only the signed key was claimed: the key classes are not independent`);
      const otherId = await store.claim(run.key('s', `${id}-other`), LONG);
      run.check(otherId.status === 'acquired', `another id answered ${otherId.status} while only one id was claimed: ids are not independent`);
      const otherNamespace = await store.claim(`${run.settings.namespace}x:s:${id}`, LONG);
      run.check(otherNamespace.status === 'acquired', `the same id in another namespace answered ${otherNamespace.status}: namespaces are not independent`);
      run.check((await store.complete(signed, owner, TTL)) === true, 'complete by the owner of the signed claim answered false');
      const unsignedAfter = await store.claim(run.key('u', id), LONG);
      run.check(unsignedAfter.status === 'processing', `completing the signed key changed the unsigned key of the same id: it answered ${unsignedAfter.status} instead of processing`);
      const signedAfter = await store.claim(signed, LONG);
      run.check(signedAfter.status === 'completed', `the completed signed key answered ${signedAfter.status}`);
    },
  ],
  [
    'fractional-durations',
    'fractional milliseconds are accepted',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const owner = token(run, await store.claim(key, 5000.5), 'a claim for 5000.5 ms');
      if (run.settings.extend) run.check((await store.extend(key, owner, 30_000.75)) === true, 'extend for 30000.75 ms answered false');
      run.check((await store.complete(key, owner, 60_000.25)) === true, 'complete for 60000.25 ms answered false');
      const after = await store.claim(key, LONG);
      run.check(after.status === 'completed', `after a completion for 60000.25 ms the key answered ${after.status} instead of completed`);
    },
  ],
  [
    'concurrent-claims',
    'concurrent claims of one free key: exactly one acquires, the others answer processing',
    async (run) => {
      const stores = await storesFor(run);
      const key = run.key();
      const n = run.settings.concurrency;
      const results = await Promise.all(Array.from({ length: n }, (_, i) => stores[i % stores.length]!.claim(key, LONG)));
      const acquired = results.filter((r) => r.status === 'acquired').length;
      const spread = stores.length > 1 ? ` (through ${stores.length} store instances)` : '';
      run.check(acquired <= 1, `claim is not atomic: ${acquired} of ${n} concurrent claims${spread} acquired one key`);
      run.check(acquired === 1, `none of ${n} concurrent claims${spread} of a free key acquired it`);
      const completed = results.filter((r) => r.status === 'completed').length;
      run.check(completed === 0, `${completed} of ${n} concurrent claims of a key nobody completed answered completed`);
    },
  ],
  [
    'expiry-takeover',
    'a lock expires after lockMs and the next claim takes it over; the stale owner can then neither complete, release nor extend',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const lockMs = run.settings.lockMs;
      const start = run.now();
      const stale = token(run, await store.claim(key, lockMs), 'the first claim');
      const owner = await run.claimOnceExpired(store, key, LONG, start + lockMs, `a lock of ${lockMs} ms was never taken over`);
      run.check(owner !== stale, "the claim that took over an expired lock got the stale owner's token");
      run.check((await store.complete(key, stale, TTL)) === false, "no token fencing after a takeover: the stale owner completed the new owner's claim");
      run.check((await store.release(key, stale)) === false, "no token fencing after a takeover: the stale owner released the new owner's claim");
      if (run.settings.extend) run.check((await store.extend(key, stale, LONG)) === false, "no token fencing after a takeover: the stale owner extended the new owner's claim");
      const held = await store.claim(key, LONG);
      run.check(held.status === 'processing', `after the stale owner's attempts the new owner's key answered ${held.status} instead of processing`);
      run.check((await store.complete(key, owner, TTL)) === true, 'the new owner could not complete the claim it took over');
      const done = await store.claim(key, LONG);
      run.check(done.status === 'completed', `the key the new owner completed answered ${done.status}`);
    },
  ],
  [
    'expiry-stale-owner',
    'once its lock expired, an owner can neither complete, release nor extend, even when nobody took over',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const lockMs = run.settings.lockMs;
      const start = run.now();
      const stale = token(run, await store.claim(key, lockMs), 'the claim');
      // No claim may be used to wait here (it would take over): wait twice the lock instead.
      await run.pass(start + 2 * lockMs + 50 - run.now());
      run.check((await store.complete(key, stale, TTL)) === false, `complete after the lock of ${lockMs} ms expired answered true: an expired claim is no longer the owner's`);
      run.check((await store.release(key, stale)) === false, `release after the lock of ${lockMs} ms expired answered true`);
      if (run.settings.extend) run.check((await store.extend(key, stale, LONG)) === false, `extend after the lock of ${lockMs} ms expired answered true: an expired lock must not come back to life`);
      // Its owner stops at the lock's end; others may take it over a little later (a store that
      // allows for clock skew between instances), within the grace period.
      await run.claimOnceExpired(store, key, LONG, start + lockMs, `a lock of ${lockMs} ms that its owner let expire was never free again`);
    },
  ],
  [
    'concurrent-takeover',
    'concurrent claims of one expired key: exactly one takes it over',
    async (run) => {
      const stores = await storesFor(run);
      const key = run.key();
      const lockMs = run.settings.lockMs;
      const start = run.now();
      token(run, await stores[0]!.claim(key, lockMs), 'the first claim');
      await run.pass(start + lockMs + 1 - run.now());
      const n = run.settings.concurrency;
      const deadline = Date.now() + run.settings.graceMs;
      for (;;) {
        const results = await Promise.all(Array.from({ length: n }, (_, i) => stores[i % stores.length]!.claim(key, LONG)));
        const acquired = results.filter((r) => r.status === 'acquired').length;
        run.check(acquired <= 1, `takeover is not atomic: ${acquired} of ${n} concurrent claims took over one expired key`);
        if (acquired === 1) return;
        run.check(!run.settings.manual && Date.now() < deadline, `none of ${n} concurrent claims took over a key whose lock of ${lockMs} ms had expired`);
        await sleep(20);
      }
    },
  ],
  [
    'ttl',
    'a completed id is forgotten after ttlMs',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const ttlMs = run.settings.lockMs;
      const owner = token(run, await store.claim(key, LONG), 'the claim');
      const start = run.now();
      run.check((await store.complete(key, owner, ttlMs)) === true, 'complete by the owner answered false');
      const done = await store.claim(key, LONG);
      if (run.settings.manual || run.now() - start < ttlMs) run.check(done.status === 'completed', `a key completed for ${ttlMs} ms answered ${done.status} at once`);
      // No claim may be used to wait here (it would take the key): wait twice the TTL instead.
      // The owner's token then owns nothing, completed or not, even while the backend still
      // holds the expired record (a row not yet cleaned up).
      await run.pass(start + 2 * ttlMs + 50 - run.now());
      const late = await store.complete(key, owner, ttlMs);
      await run.claimOnceExpired(store, key, LONG, start + ttlMs, `a completion of ${ttlMs} ms was never forgotten`);
      run.check(late === false, `complete by the owner answered true after its completion of ${ttlMs} ms was forgotten: a forgotten id is no longer the owner's`);
    },
  ],
  [
    'extend',
    'extend keeps a claim alive past its first lock, and answers false once the lock is gone',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      // Long enough that the extend surely lands inside it on a loaded machine.
      const firstLock = run.settings.lockMs * 5;
      const start = run.now();
      const owner = token(run, await store.claim(key, firstLock), 'the claim');
      run.check((await store.extend(key, owner, LONG)) === true, `extend by the owner of a live claim (lock ${firstLock} ms) answered false`);
      await run.pass(start + firstLock + run.settings.lockMs - run.now());
      const held = await store.claim(key, LONG);
      run.check(held.status === 'processing', `extend does not keep the claim alive: past its first lock of ${firstLock} ms the key answered ${held.status} instead of processing`);
      if (held.status === 'processing' && held.retryAfterMs !== undefined) {
        run.check(held.retryAfterMs > firstLock, `after extend for ${LONG} ms, processing says the claim holds for only ${held.retryAfterMs} ms more`);
      }
      run.check((await store.complete(key, owner, TTL)) === true, 'the owner could not complete its extended claim');

      const expiring = run.key();
      const lockMs = run.settings.lockMs;
      const second = run.now();
      const stale = token(run, await store.claim(expiring, lockMs), 'a second claim');
      await run.pass(second + 2 * lockMs + 50 - run.now());
      run.check((await store.extend(expiring, stale, LONG)) === false, 'extend of an expired lock answered true: a lost lease must not be renewed');
      await run.claimOnceExpired(store, expiring, LONG, second + lockMs, `a lock of ${lockMs} ms whose renewal was refused was never free again`);
    },
  ],
  [
    'shared',
    'stores on one backend share claims: a claim through one is seen, and can be completed, through another',
    async (run) => {
      const a = await run.store();
      const b = await run.store();
      const key = run.key();
      const owner = token(run, await a.claim(key, LONG), 'a claim through the first store');
      const seen = await b.claim(key, LONG);
      run.check(seen.status === 'processing', `a claim through one store was not seen through another on the same backend (it answered ${seen.status})`);
      run.check((await b.complete(key, owner, TTL)) === true, "the second store could not complete the first store's claim with its token");
      const done = await a.claim(key, LONG);
      run.check(done.status === 'completed', `a completion through the second store was not seen through the first (it answered ${done.status})`);
    },
  ],
  [
    'ping',
    'ping resolves while the backend answers',
    async (run) => {
      await (await run.store()).ping();
    },
  ],
  [
    'unreachable',
    'every operation on an unreachable backend rejects, within a bound: never resolves, never hangs',
    async (run) => {
      const make = run.settings.unreachable!;
      const store = await make();
      const key = run.key();
      const calls: [string, () => Promise<unknown>][] = [
        ['claim', () => store.claim(key, LONG)],
        ['complete', () => store.complete(key, 'a-token', TTL)],
        ['release', () => store.release(key, 'a-token')],
      ];
      const { extend, ping } = store;
      if (typeof extend === 'function' && run.settings.extend) calls.push(['extend', () => extend.call(store, key, 'a-token', LONG)]);
      if (typeof ping === 'function') calls.push(['ping', () => ping.call(store)]);
      const limit = run.settings.unreachableTimeoutMs;
      const outcomes = await Promise.all(calls.map(async ([name, call]) => [name, await bounded(call, limit)] as const));
      const wrong: string[] = [];
      for (const [name, outcome] of outcomes) {
        if (outcome.kind === 'timeout') wrong.push(`${name} on an unreachable backend did not settle within ${limit} ms: it hangs instead of rejecting`);
        else if (outcome.kind === 'resolved') wrong.push(`${name} on an unreachable backend resolved with ${describe(outcome.value)} instead of rejecting (a store must fail closed)`);
      }
      if (wrong.length > 0) run.fail(wrong.join('; '));
    },
  ],
];

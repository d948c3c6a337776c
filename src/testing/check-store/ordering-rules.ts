/**
 * The ordering rules of the store contract (`OrderingOperations` in
 * src/stores/types.ts): run on a store that has the ordering operations, skipped on one that has
 * none. Versions are made by `encodeVersion`, as the receiver makes them.
 */

import { encodeVersion } from '../../ordering.ts';
import type { EntityOrder, IdempotencyStore, OrderedClaimResult, OrderingOperations } from '../../stores/types.ts';
import { LONG, TTL, describe, sleep, token, type Run } from './harness.ts';
import type { StoreRule } from './types.ts';

type Rule = readonly [StoreRule, string, (run: Run) => Promise<void>];

/** The ordering operations of the store under test, each bounded in time and described when it fails. */
class Ordered {
  readonly #ordering: OrderingOperations;
  readonly #run: Run;
  #entities = 0;
  constructor(store: IdempotencyStore, run: Run) {
    // The first store made had a whole `ordering` (the rules are skipped otherwise); a later one
    // without it fails the rule here rather than with a TypeError from a missing method.
    const ordering = store.ordering;
    if (ordering === undefined) run.fail('a store the factory made has no ordering, although the first one had');
    this.#ordering = ordering;
    this.#run = run;
  }

  /** An entity key no other rule or run uses. */
  entity(): string {
    return `${this.#run.settings.namespace}:o:${this.#run.rule}-entity-${++this.#entities}`;
  }

  async claim(key: string, order: EntityOrder, lockMs = LONG): Promise<OrderedClaimResult> {
    const result = await this.#run.call('claimOrdered', [key, lockMs, TTL, order], () => this.#ordering.claimOrdered(key, lockMs, TTL, order));
    const status = (result as { status?: unknown } | null)?.status;
    this.#run.check(
      ['acquired', 'processing', 'completed', 'stale', 'busy'].includes(status as string),
      `claimOrdered answered ${describe(result)}, which is not an ordered claim result (acquired, processing, completed, stale or busy)`,
    );
    if (result.status === 'acquired') this.#run.check(typeof result.token === 'string' && result.token.length > 0, `claimOrdered acquired with token ${describe(result.token)}`);
    return result;
  }

  complete(key: string, token: string, order: EntityOrder): Promise<boolean> {
    return this.#run.boolean('completeOrdered', [key, token, TTL, order], () => this.#ordering.completeOrdered(key, token, TTL, order));
  }

  release(key: string, token: string, order: EntityOrder): Promise<boolean> {
    return this.#run.boolean('releaseOrdered', [key, token, order], () => this.#ordering.releaseOrdered(key, token, order));
  }

  extend(key: string, token: string, lockMs: number, order: EntityOrder): Promise<boolean> {
    return this.#run.boolean('extendOrdered', [key, token, lockMs, order], () => this.#ordering.extendOrdered(key, token, lockMs, order));
  }

  async forget(entity: string): Promise<void> {
    await this.#run.call('forgetVersion', [entity], () => this.#ordering.forgetVersion(entity));
  }

  /** Claims and completes `key` at `order`: its version is then the entity's. */
  async record(key: string, order: EntityOrder): Promise<void> {
    const claimed = await this.claim(key, order);
    if (claimed.status !== 'acquired') this.#run.fail(`claimOrdered of a fresh id at version ${order.version} answered ${claimed.status} instead of acquired`);
    this.#run.check(await this.complete(key, claimed.token, order), 'completeOrdered by the owner of a live claim answered false');
  }
}

async function ordered(run: Run): Promise<Ordered> {
  return new Ordered((await run.store()).raw, run);
}

const at = (entity: string, version: unknown, exclusive = true): EntityOrder => ({ entity, version: encodeVersion(version), exclusive });

/** The ordering rules, in the order they run (after the contract's own). */
export const ORDERING_RULES: readonly Rule[] = [
  [
    'ordering-stale',
    'a lower version than the recorded one is stale and its id is then done; an equal or higher version is acquired',
    async (run) => {
      const store = await ordered(run);
      const entity = store.entity();
      await store.record(run.key(), at(entity, 5));
      const staleKey = run.key();
      const stale = await store.claim(staleKey, at(entity, 4));
      run.check(stale.status === 'stale', `version 4 after version 5 was completed answered ${stale.status} instead of stale`);
      const again = await store.claim(staleKey, at(entity, 4));
      run.check(again.status === 'completed', `the id of a stale delivery answered ${again.status} to its retry instead of completed (a stale id is recorded as done)`);
      const equal = await store.claim(run.key(), at(entity, 5));
      run.check(equal.status === 'acquired', `an equal version answered ${equal.status} instead of acquired (two events of one version cannot be ordered: both run)`);
    },
  ],
  [
    'ordering-compare',
    'versions compare as fixed-width strings: bigints past 2^53 and nanoseconds apart order exactly',
    async (run) => {
      const store = await ordered(run);
      const big = store.entity();
      await store.record(run.key(), at(big, 2n ** 53n + 1n, false));
      const lower = await store.claim(run.key(), at(big, 2n ** 53n, false));
      run.check(lower.status === 'stale', `version 2^53 after 2^53 + 1 answered ${lower.status} instead of stale (versions compared as doubles?)`);
      const time = store.entity();
      await store.record(run.key(), at(time, '2026-03-01T10:00:10.344523Z', false));
      const earlier = await store.claim(run.key(), at(time, '2026-03-01T10:00:10.344522Z', false));
      run.check(earlier.status === 'stale', `a time one microsecond earlier answered ${earlier.status} instead of stale`);
      const later = await store.claim(run.key(), at(time, '2026-03-01T10:00:10.344523001Z', false));
      run.check(later.status === 'acquired', `a time one nanosecond later answered ${later.status} instead of acquired`);
    },
  ],
  [
    'ordering-exclusive',
    'exclusive: another delivery of a locked entity is busy (with the time left), other entities are not; the lock goes with completion and release',
    async (run) => {
      const store = await ordered(run);
      const entity = store.entity();
      const firstKey = run.key();
      const first = await store.claim(firstKey, at(entity, 1));
      if (first.status !== 'acquired') return run.fail(`the first claim of an entity answered ${first.status} instead of acquired`);
      const busy = await store.claim(run.key(), at(entity, 2));
      run.check(busy.status === 'busy', `a second delivery of a locked entity answered ${busy.status} instead of busy`);
      const left = busy.status === 'busy' ? busy.retryAfterMs : undefined;
      if (left !== undefined) run.check(typeof left === 'number' && left > 0 && left <= LONG, `busy says the lock holds for ${describe(left)} ms more, but it was taken for ${LONG} ms`);
      const other = await store.claim(run.key(), at(store.entity(), 1));
      run.check(other.status === 'acquired', `another entity answered ${other.status} while the first was locked, instead of acquired`);
      run.check(await store.release(firstKey, first.token, at(entity, 1)), 'releaseOrdered by the owner of a live claim answered false');
      const holderKey = run.key();
      const afterRelease = await store.claim(holderKey, at(entity, 2));
      if (afterRelease.status !== 'acquired') return run.fail(`a delivery after the holder released answered ${afterRelease.status} instead of acquired`);
      run.check(await store.complete(holderKey, afterRelease.token, at(entity, 2)), 'completeOrdered by the owner answered false');
      const afterComplete = await store.claim(run.key(), at(entity, 3));
      run.check(afterComplete.status === 'acquired', `a delivery after the holder completed answered ${afterComplete.status} instead of acquired (the lock goes with the completion)`);
    },
  ],
  [
    'ordering-failed-newer',
    'a released (failed) newer delivery records nothing: an older one then runs',
    async (run) => {
      const store = await ordered(run);
      const entity = store.entity();
      const newerKey = run.key();
      const newer = await store.claim(newerKey, at(entity, 9));
      if (newer.status !== 'acquired') return run.fail(`a first delivery answered ${newer.status} instead of acquired`);
      run.check(await store.release(newerKey, newer.token, at(entity, 9)), 'releaseOrdered by the owner answered false');
      const older = await store.claim(run.key(), at(entity, 3));
      run.check(older.status === 'acquired', `an older delivery after a newer one failed answered ${older.status} instead of acquired`);
    },
  ],
  [
    'ordering-never-down',
    'without exclusive, deliveries of one entity run side by side and the recorded version never goes down',
    async (run) => {
      const store = await ordered(run);
      const entity = store.entity();
      const [newKey, oldKey] = [run.key(), run.key()];
      const newer = await store.claim(newKey, at(entity, 8, false));
      const older = await store.claim(oldKey, at(entity, 6, false));
      if (newer.status !== 'acquired' || older.status !== 'acquired') {
        return run.fail(`two deliveries of one entity without exclusive answered ${newer.status} and ${older.status} instead of acquired twice`);
      }
      run.check(await store.complete(newKey, newer.token, at(entity, 8, false)), 'completeOrdered by the owner answered false');
      run.check(await store.complete(oldKey, older.token, at(entity, 6, false)), 'completeOrdered of the older delivery answered false');
      const between = await store.claim(run.key(), at(entity, 7, false));
      run.check(between.status === 'stale', `version 7 after 8 then 6 completed answered ${between.status} instead of stale: the recorded version went down`);
    },
  ],
  [
    'ordering-fencing',
    'a token that does not hold the id completes, releases and extends nothing, and records no version',
    async (run) => {
      const store = await ordered(run);
      const entity = store.entity();
      const key = run.key();
      const claimed = await store.claim(key, at(entity, 2));
      if (claimed.status !== 'acquired') return run.fail(`a first delivery answered ${claimed.status} instead of acquired`);
      run.check(!(await store.complete(key, 'not-the-token', at(entity, 50))), 'completeOrdered with a token that does not hold the id answered true');
      run.check(!(await store.extend(key, 'not-the-token', LONG, at(entity, 2))), 'extendOrdered with a token that does not hold the id answered true');
      run.check(!(await store.release(key, 'not-the-token', at(entity, 2))), 'releaseOrdered with a token that does not hold the id answered true');
      const busy = await store.claim(run.key(), at(entity, 3));
      run.check(busy.status === 'busy', `the entity answered ${busy.status} after a stranger's release instead of busy (its lock was freed by another token)`);
      run.check(await store.release(key, claimed.token, at(entity, 2)), 'releaseOrdered by the owner answered false');
      const lower = await store.claim(run.key(), at(entity, 3));
      run.check(lower.status === 'acquired', `version 3 answered ${lower.status} after a stranger's completion at 50, instead of acquired (it recorded a version)`);
    },
  ],
  [
    'ordering-concurrent',
    'concurrent exclusive claims of one entity (distinct ids): exactly one acquires, the others are busy',
    async (run) => {
      const count = run.settings.concurrency;
      const stores: Ordered[] = [];
      for (let i = 0; i < (run.settings.shared ? Math.min(5, count) : 1); i++) stores.push(await ordered(run));
      const entity = stores[0]!.entity();
      const results = await Promise.all(Array.from({ length: count }, (_, i) => stores[i % stores.length]!.claim(run.key(), at(entity, i))));
      const acquired = results.filter((result) => result.status === 'acquired').length;
      run.check(acquired === 1, `${count} concurrent claims of one entity acquired ${acquired} times instead of once`);
      const others = [...new Set(results.filter((result) => result.status !== 'acquired').map((result) => result.status))];
      run.check(others.every((status) => status === 'busy'), `the losers of concurrent claims answered ${others.join(', ')} instead of busy`);
    },
  ],
  [
    'ordering-lock-expiry',
    "an entity's lock that is not renewed expires after lockMs; extendOrdered keeps the id and the lock",
    async (run) => {
      const store = await ordered(run);
      const lockMs = run.settings.lockMs;
      const entity = store.entity();
      const start = run.now();
      const first = await store.claim(run.key(), at(entity, 1), lockMs);
      if (first.status !== 'acquired') return run.fail(`a first delivery answered ${first.status} instead of acquired`);
      await run.pass(start + lockMs - run.now() + 1);
      const deadline = Date.now() + run.settings.graceMs;
      for (;;) {
        const next = await store.claim(run.key(), at(entity, 2), LONG);
        if (next.status === 'acquired') break;
        if (run.settings.manual || Date.now() > deadline) return run.fail(`an entity's lock of ${lockMs} ms still answered ${next.status} after it should have expired`);
        await sleep(20);
      }
      // A claim, then its renewal while it is live. On a busy machine the renewal may come after
      // the short lock ran out: a false then says nothing of the store, so the pair runs again on a
      // fresh entity (a few times at most); a false while the lock was certainly live fails.
      let renewed: string;
      let key: string;
      let held: Awaited<ReturnType<typeof store.claim>>;
      for (let attempt = 1; ; attempt++) {
        renewed = store.entity();
        key = run.key();
        const sentAt = run.now();
        held = await store.claim(key, at(renewed, 1), lockMs);
        if (held.status !== 'acquired') return run.fail(`a first delivery answered ${held.status} instead of acquired`);
        const extended = await store.extend(key, held.token, LONG, at(renewed, 1));
        // Live for certain: the renewal was answered within lockMs of sending the claim.
        if (extended || attempt === 5 || run.now() - sentAt < lockMs) {
          run.check(extended, 'extendOrdered by the owner of a live claim answered false');
          break;
        }
      }
      await run.pass(lockMs * 2);
      const after = await store.claim(run.key(), at(renewed, 2));
      run.check(after.status === 'busy', `the entity answered ${after.status} past its first lock although extendOrdered renewed it, instead of busy`);
      run.check(await store.complete(key, held.token, at(renewed, 1)), 'completeOrdered after extendOrdered answered false');
    },
  ],
  [
    'ordering-forget',
    'forgetVersion forgets the recorded version: an older delivery then runs',
    async (run) => {
      const store = await ordered(run);
      const entity = store.entity();
      await store.record(run.key(), at(entity, '2026-03-01T10:05:00Z', false));
      await store.forget(entity);
      const older = await store.claim(run.key(), at(entity, '2026-03-01T10:00:00Z', false));
      run.check(older.status === 'acquired', `an older delivery after forgetVersion answered ${older.status} instead of acquired`);
      await store.forget(store.entity());
    },
  ],
  [
    'ordering-one-id',
    'an id is one id with ordering or without, under any entity: completed or held by one kind of claim, it is completed or processing to the other',
    async (run) => {
      const plain = await run.store();
      const store = new Ordered(plain.raw, run);
      // Completed without ordering, then ordering turned on.
      const unordered = run.key();
      run.check(await plain.complete(unordered, token(run, await plain.claim(unordered, LONG), 'a claim'), TTL), 'complete by the owner of a live claim answered false');
      const entity = store.entity();
      const turnedOn = await store.claim(unordered, at(entity, 1));
      run.check(turnedOn.status === 'completed', `an id completed by claim and complete answered ${turnedOn.status} to claimOrdered instead of completed: turning ordering on would run it again`);
      const next = await store.claim(run.key(), at(entity, 2));
      run.check(next.status === 'acquired', `after a duplicate's claimOrdered answered completed, another delivery of its entity answered ${next.status} instead of acquired (a duplicate takes nothing)`);
      // Completed with ordering, then ordering turned off, or keyed by another entity.
      const orderedKey = run.key();
      await store.record(orderedKey, at(store.entity(), 1));
      const turnedOff = await plain.claim(orderedKey, LONG);
      run.check(turnedOff.status === 'completed', `an id completed by claimOrdered and completeOrdered answered ${turnedOff.status} to claim instead of completed: turning ordering off would run it again`);
      const rekeyed = await store.claim(orderedKey, at(store.entity(), 1));
      run.check(rekeyed.status === 'completed', `an id completed under one entity answered ${rekeyed.status} to claimOrdered under another instead of completed: changing the ordering key would run it again`);
      // Held by one kind of claim while the other arrives (a fleet where only some instances order).
      const heldPlain = run.key();
      token(run, await plain.claim(heldPlain, LONG), 'a claim');
      const meanwhileOrdered = await store.claim(heldPlain, at(store.entity(), 1));
      run.check(meanwhileOrdered.status === 'processing', `an id held by claim answered ${meanwhileOrdered.status} to claimOrdered instead of processing: two deliveries of one id would run at once`);
      const heldOrdered = run.key();
      const held = await store.claim(heldOrdered, at(store.entity(), 1));
      if (held.status !== 'acquired') return run.fail(`claimOrdered of a fresh id answered ${held.status} instead of acquired`);
      const meanwhilePlain = await plain.claim(heldOrdered, LONG);
      run.check(meanwhilePlain.status === 'processing', `an id held by claimOrdered answered ${meanwhilePlain.status} to claim instead of processing: two deliveries of one id would run at once`);
    },
  ],
];

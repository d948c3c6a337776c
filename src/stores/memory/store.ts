import { checkFunction, checkObject } from '../../lib/checks.ts';
import {
  checkClaim,
  checkClaimOrdered,
  checkComplete,
  checkEntity,
  checkExtend,
  checkOrder,
  checkRelease,
  checkUnsignedMax,
  isUnsignedKey,
  offerSyncOperations,
  unsignedLimitError,
  type SyncOperations,
} from '../internal.ts';
import { StoreError, type ClaimResult, type EntityOrder, type OrderedClaimResult } from '../types.ts';
import { Entities } from './entities.ts';
import { DEFAULT_MEMORY_STORE_MAX, type MemoryStore, type MemoryStoreOptions } from './options.ts';
import { owns, Space, Tokens, type Entry } from './space.ts';

/** {@link idState}'s answer for an id with no entry to take over, made once (it never leaves the store). */
const NO_LOCK: { lock: Entry | undefined } = Object.freeze({ lock: undefined });

/** A bound option (`max`), checked: its default when absent. */
function bound(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`memoryStore ${name} must be a positive whole number of ids`);
  return value;
}

/**
 * An in-process idempotency store: bounded, with expiring entries. It deduplicates within one
 * process only: an app on several machines (or several processes) needs a shared store such as
 * `redisStore` from `webhook-receiver/redis`.
 *
 * - JavaScript runs one operation at a time, so each check-and-set here is atomic.
 * - Signed and unsigned ids live in two spaces with bounds of their own (`max`, `unsignedMax`):
 *   a flood of unsigned ids cannot evict a signed one.
 * - At its bound it forgets expired entries first, then the oldest completed id; it never evicts
 *   a claim whose lock still holds (a duplicate would then run beside the handler). Full of live
 *   claims, it refuses the next claim with a `StoreError`: `full` for signed ids (the receiver
 *   answers 503 `STORE_UNAVAILABLE`), `unsigned_limit` for unsigned ones (503 `UNSIGNED_LIMIT`),
 *   both with `Retry-After`.
 * - Forgetting the oldest completed id at the bound is the one way it can forget an id before
 *   `ttlSeconds` (which the receiver requires to be at least twice `toleranceSeconds`, so that a
 *   replay inside the timestamp window is answered as a duplicate): keep `max` above the signed
 *   deliveries of that window, or the replay of an id it forgot runs again.
 *
 * @example
 * ```ts
 * import { createReceiver, memoryStore } from 'webhook-receiver';
 * const receiver = createReceiver({
 *   secrets: process.env.WEBHOOK_SECRET!,
 *   idempotency: { store: memoryStore({ max: 10_000 }), ttlSeconds: 3600 },
 * });
 * ```
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  checkObject(options, 'memoryStore options must be an object');
  const max = bound(options.max, 'max', DEFAULT_MEMORY_STORE_MAX);
  const unsignedMax = checkUnsignedMax('memoryStore', options.unsignedMax);
  const now = options.now ?? Date.now;
  checkFunction(now, 'memoryStore now must be a function returning epoch milliseconds');
  const signed = new Space(max);
  const unsigned = new Space(unsignedMax);
  const spaceOf = (key: string): Space => (isUnsignedKey(key) ? unsigned : signed);
  const entities = new Entities(max);
  const tokens = new Tokens();
  /** A new record for `key`, holding the token `tokens` issued last (its text too while it is a claim). */
  const newEntry = (key: string, until: number, done: boolean): Entry => ({ key, prefix: tokens.prefix, serial: tokens.serial, until, token: done ? undefined : tokens.last, done });

  /**
   * Completes the id `token` holds: `'now'`. Otherwise, idempotent for its own token, whether a
   * completion of that token already landed. Both completions (plain and ordered) start here.
   */
  const completeId = (key: string, token: string, ttlMs: number, time: number): 'now' | boolean => {
    const space = spaceOf(key);
    const entry = space.entries.get(key);
    if (entry === undefined || !owns(entry, token)) return false;
    if (entry.done) return entry.until > time;
    if (entry.until <= time) return false;
    space.complete(entry, time + ttlMs);
    return 'now';
  };

  /**
   * The id's own answer at `time` (completed, or held by a live lock), else its expired lock if it
   * has one (to be taken over); an expired completion is forgotten. Both claims start here.
   */
  const idState = (space: Space, key: string, time: number): ClaimResult | { lock: Entry | undefined } => {
    const entry = space.entries.get(key);
    if (entry === undefined) return NO_LOCK;
    if (entry.done) {
      if (entry.until > time) return { status: 'completed' };
      space.drop(entry);
      return NO_LOCK;
    }
    if (entry.until > time) return { status: 'processing', retryAfterMs: entry.until - time };
    return { lock: entry };
  };

  const operations: SyncOperations = {
    claim(key, lockMs): ClaimResult {
      checkClaim(key, lockMs);
      const space = spaceOf(key);
      const time = now();
      const id = idState(space, key, time);
      if ('status' in id) return id;
      const { lock } = id;
      // Room first: a refused claim issues no token.
      if (lock === undefined && !space.makeRoom(time)) throw full(space);
      const token = tokens.issue();
      // An expired lock is taken over in place (its old owner's token no longer matches).
      if (lock !== undefined) space.takeOver(lock, tokens, time + lockMs);
      else space.hold(newEntry(key, time + lockMs, false));
      return { status: 'acquired', token };
    },
    complete(key, token, ttlMs) {
      checkComplete(key, token, ttlMs);
      return completeId(key, token, ttlMs, now()) !== false;
    },
    release(key, token) {
      checkRelease(key, token);
      const space = spaceOf(key);
      const lock = space.held(key, token, now());
      if (lock === undefined) return false;
      space.release(lock);
      return true;
    },
    extend(key, token, lockMs) {
      checkExtend(key, token, lockMs);
      const time = now();
      const space = spaceOf(key);
      const lock = space.held(key, token, time);
      if (lock === undefined) return false;
      space.renew(lock, time + lockMs);
      return true;
    },
  };

  /** Why a space cannot admit another claim: every entry is a live claim. */
  const full = (space: Space): Error =>
    space === unsigned
      ? unsignedLimitError('memory', space.max, `all ${space.max} unsigned entries are live claims`)
      : new StoreError('memory', 'full', `memory store: all ${space.max} signed entries are live claims, so a new claim was refused rather than evict one (raise max, or use a shared store)`);

  // Ordering: the id and its entity are checked and set in one synchronous step.
  const ordered = {
    claim(key: string, lockMs: number, ttlMs: number, order: EntityOrder): OrderedClaimResult {
      checkClaimOrdered(key, lockMs, ttlMs, order);
      const space = spaceOf(key);
      const time = now();
      const id = idState(space, key, time);
      if ('status' in id) return id;
      const { lock } = id;
      const entity = entities.get(order.entity, time);
      if (entity?.version !== undefined && entity.version > order.version) {
        // Stale: recorded as done, so its retries are duplicates.
        if (lock !== undefined) space.release(lock);
        else if (!space.makeRoom(time)) throw full(space);
        tokens.issue();
        space.remember(newEntry(key, 0, true), time + ttlMs);
        return { status: 'stale' };
      }
      if (order.exclusive && entity?.lockToken !== undefined) return { status: 'busy', retryAfterMs: entity.lockUntil - time };
      if (lock === undefined && !space.makeRoom(time)) throw full(space);
      const token = tokens.issue();
      if (order.exclusive) {
        const locked = entity ?? entities.make(order.entity, time);
        if (locked === undefined) {
          throw new StoreError('memory', 'full', `memory store: all ${entities.max} ordering entities are locked by running handlers, so a new one was refused (raise max, or use a shared store)`);
        }
        locked.lockToken = token;
        locked.lockUntil = time + lockMs;
      }
      if (lock !== undefined) space.takeOver(lock, tokens, time + lockMs);
      else space.hold(newEntry(key, time + lockMs, false));
      return { status: 'acquired', token };
    },
    complete(key: string, token: string, ttlMs: number, order: EntityOrder): boolean {
      checkComplete(key, token, ttlMs);
      checkOrder(order);
      const time = now();
      const completed = completeId(key, token, ttlMs, time);
      if (completed !== 'now') return completed;
      const record = entities.make(order.entity, time);
      // Every entity locked and none to forget: the version cannot be kept (the id is done).
      if (record === undefined) return true;
      if (record.version === undefined || record.version < order.version) record.version = order.version;
      record.until = Math.max(record.until, time + ttlMs);
      if (record.lockToken === token) record.lockToken = undefined;
      entities.touch(order.entity, record);
      return true;
    },
    release(key: string, token: string, order: EntityOrder): boolean {
      checkRelease(key, token);
      checkOrder(order);
      const time = now();
      const record = entities.get(order.entity, time);
      if (record !== undefined && record.lockToken === token) {
        record.lockToken = undefined;
        entities.tidy(order.entity, record);
      }
      const space = spaceOf(key);
      const lock = space.held(key, token, time);
      if (lock === undefined) return false;
      space.release(lock);
      return true;
    },
    extend(key: string, token: string, lockMs: number, order: EntityOrder): boolean {
      checkExtend(key, token, lockMs);
      checkOrder(order);
      const time = now();
      const space = spaceOf(key);
      const lock = space.held(key, token, time);
      if (lock === undefined) return false;
      const record = order.exclusive ? entities.get(order.entity, time) : undefined;
      if (order.exclusive && record?.lockToken !== token) return false;
      space.renew(lock, time + lockMs);
      if (record !== undefined) record.lockUntil = time + lockMs;
      return true;
    },
    forget(entity: string): void {
      checkEntity(entity);
      const record = entities.get(entity, now());
      if (record === undefined) return;
      record.version = undefined;
      entities.tidy(entity, record);
    },
  };

  // The receiver and the workers call `operations` directly (through `StoreCalls`); everyone else gets promises, and a bad argument
  // rejects rather than throws, as with every other store.
  const store: MemoryStore = {
    name: 'memory',
    async claim(key, lockMs) {
      return operations.claim(key, lockMs);
    },
    async complete(key, token, ttlMs) {
      return operations.complete(key, token, ttlMs);
    },
    async release(key, token) {
      return operations.release(key, token);
    },
    async extend(key, token, lockMs) {
      return operations.extend(key, token, lockMs);
    },
    ordering: {
      async claimOrdered(key, lockMs, ttlMs, order) {
        return ordered.claim(key, lockMs, ttlMs, order);
      },
      async completeOrdered(key, token, ttlMs, order) {
        return ordered.complete(key, token, ttlMs, order);
      },
      async releaseOrdered(key, token, order) {
        return ordered.release(key, token, order);
      },
      async extendOrdered(key, token, lockMs, order) {
        return ordered.extend(key, token, lockMs, order);
      },
      async forgetVersion(entity) {
        ordered.forget(entity);
      },
    },
    usage() {
      const of = (space: Space) => ({ claims: space.claims, completed: space.completed, max: space.max });
      return { signed: of(signed), unsigned: of(unsigned) };
    },
    async ping() {},
  };
  offerSyncOperations(store, operations);
  return store;
}

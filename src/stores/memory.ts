/**
 * The in-process idempotency store: `memoryStore` from `webhook-receiver`.
 *
 * Signed and unsigned ids are kept in two spaces (`Space`), each a map of live claims and a map of
 * completions with their order, bounded by `max` and `unsignedMax`. Every operation is a
 * synchronous check-and-set, which the receiver calls without a promise.
 */

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
  newToken,
  offerSyncOperations,
  unsignedLimitError,
  type SyncOperations,
} from './internal.ts';
import { DEFAULT_UNSIGNED_MAX, StoreError, type ClaimResult, type EntityOrder, type IdempotencyStore, type OrderedClaimResult, type OrderingOperations } from './types.ts';

/**
 * Options of {@link memoryStore}.
 *
 * @example
 * ```ts
 * const options: MemoryStoreOptions = { max: 50_000, unsignedMax: 1_000 };
 * ```
 */
export interface MemoryStoreOptions {
  /**
   * How many signed ids are held at most (live claims and completed ids together). Default
   * 100 000. At the bound the oldest completed id is forgotten, possibly before `ttlSeconds`:
   * if that happens within twice `toleranceSeconds` of its timestamp, a captured request carrying
   * it would verify and run again. Size it above the signed deliveries the endpoint receives in
   * that window (10 minutes with the defaults); {@link MemoryStore.usage} shows how full it is.
   */
  max?: number;
  /**
   * How many unsigned ids are held at most, in a space of their own: when it is full, a new one
   * makes room by forgetting the oldest unsigned completion early; when every entry is a live
   * claim, it is refused with `StoreError` `unsigned_limit` (503 `UNSIGNED_LIMIT`). Default 10 000.
   */
  unsignedMax?: number;
  /** The clock, in epoch milliseconds (tests). Default `Date.now`. */
  now?: () => number;
}

/**
 * How full a memory store is, per key class: for a gauge, and to see 503s coming.
 *
 * @example
 * ```ts
 * const { signed } = store.usage();
 * if (signed.claims > 0.9 * signed.max) console.warn('memory store nearly full of live claims');
 * ```
 */
export interface MemoryStoreUsage {
  signed: { claims: number; completed: number; max: number };
  unsigned: { claims: number; completed: number; max: number };
}

/**
 * The in-process store: {@link IdempotencyStore} plus a look at how full it is.
 *
 * @example
 * ```ts
 * import { memoryStore, type MemoryStore } from 'webhook-receiver';
 * const store: MemoryStore = memoryStore();
 * console.log(store.usage().signed.completed);
 * ```
 */
export interface MemoryStore extends Omit<IdempotencyStore, keyof OrderingOperations>, OrderingOperations {
  extend(key: string, token: string, lockMs: number): Promise<boolean>;
  /** How full each key space is: live claims, completed ids, and the bound. */
  usage(): MemoryStoreUsage;
  ping(): Promise<void>;
}

/**
 * 100 000 ids: the default bound of {@link memoryStore} for signed deliveries.
 *
 * @example
 * ```ts
 * import { memoryStore, DEFAULT_MEMORY_STORE_MAX } from 'webhook-receiver';
 * const store = memoryStore({ max: DEFAULT_MEMORY_STORE_MAX * 2 });
 * ```
 */
export const DEFAULT_MEMORY_STORE_MAX = 100_000;

/**
 * 10 000 ids: the default bound of {@link memoryStore} for unsigned deliveries, kept apart from
 * the signed ones so unsigned traffic can never push a signed id out. The same as every store's
 * {@link DEFAULT_UNSIGNED_MAX}.
 *
 * @example
 * ```ts
 * import { memoryStore, DEFAULT_MEMORY_STORE_UNSIGNED_MAX } from 'webhook-receiver';
 * const store = memoryStore({ unsignedMax: DEFAULT_MEMORY_STORE_UNSIGNED_MAX / 10 });
 * ```
 */
export const DEFAULT_MEMORY_STORE_UNSIGNED_MAX = DEFAULT_UNSIGNED_MAX;

/**
 * A live claim (its owner's token, until when its lock holds) or a completion (its token, until
 * when it is remembered). One shape for both: a completion is its claim's record, moved from one
 * map to the other, so completing allocates nothing.
 */
interface Entry {
  /** The id's key, so the order of completions can find a completion in the map. */
  key: string;
  token: string;
  until: number;
  /** A completion still in the map: set false when it leaves, so the order needs no look-up. */
  live: boolean;
}

type Completion = Entry;

/**
 * One key class's entries. Live claims and completed ids are kept in two maps. Completions are
 * also queued in the order they were recorded: completions of one endpoint share one TTL, so the
 * first completion is the first to expire, and finding room is a look at the front of the queue
 * rather than a scan.
 *
 * The queue is an array with a moving head, not the map's own order: a `Map` keeps the slots of
 * deleted entries until it is rehashed, so reading the first entry of a map used as a queue skips
 * every entry deleted from its front since, which made each claim of a full store cost a pass
 * over tens of thousands of holes.
 */
class Space {
  readonly claims = new Map<string, Entry>();
  readonly done = new Map<string, Completion>();
  #order: Completion[] = [];
  #head = 0;
  /**
   * A time before which no claim's lock runs out (a lower bound on the earliest `until`): while
   * the clock is below it, a full store of live claims is known without a scan, so a store that
   * is full under load does not pay a pass over every claim per request.
   */
  #claimsLiveUntil = 0;
  constructor(readonly max: number) {}

  /** Records a claim's lock, keeping the lower bound true (locks may differ in length). */
  hold(key: string, entry: Entry): void {
    this.claims.set(key, entry);
    this.renew(entry, entry.until);
  }

  /** Moves a held lock's end, keeping the lower bound true: an extension may also shorten it. */
  renew(entry: Entry, until: number): void {
    entry.until = until;
    if (until < this.#claimsLiveUntil) this.#claimsLiveUntil = until;
  }

  /** Records a completion, at the back of the order. */
  remember(completion: Completion, until: number): void {
    completion.until = until;
    completion.live = true;
    this.done.set(completion.key, completion);
    this.#order.push(completion);
    // A completion deleted from the map (its id claimed again after it expired) stays queued until
    // it reaches the front; rebuilt from the map when such leftovers outnumber the live ones, the
    // queue stays within twice the map's size.
    if (this.#order.length - this.#head > 2 * this.done.size + 1024) {
      this.#order = [...this.done.values()];
      this.#head = 0;
    }
  }

  /** The oldest completion still remembered, leftovers at the front dropped on the way. */
  #oldest(): Completion | undefined {
    const order = this.#order;
    while (this.#head < order.length) {
      const first = order[this.#head]!;
      if (first.live) return first;
      this.#head++;
    }
    // Drained: start again at the beginning of a fresh array rather than grow this one forever.
    if (this.#head > 0) {
      this.#order = [];
      this.#head = 0;
    }
    return undefined;
  }

  /** Forgets a completion (expired, or making room). */
  drop(completion: Completion): void {
    completion.live = false;
    this.done.delete(completion.key);
  }

  #forget(completion: Completion): true {
    this.drop(completion);
    this.#head++;
    // The array is cut down once its dropped front is at least half of it: amortised O(1).
    if (this.#head >= 1024 && this.#head * 2 >= this.#order.length) {
      this.#order = this.#order.slice(this.#head);
      this.#head = 0;
    }
    return true;
  }

  /**
   * Room for one more entry, freeing the least valuable one: an expired completion, then an
   * expired claim, then the oldest completion still remembered (the bound forgets it early:
   * documented), but never a claim whose lock still holds. `false` when every entry is a live
   * claim.
   */
  makeRoom(time: number): boolean {
    if (this.claims.size + this.done.size < this.max) return true;
    const first = this.#oldest();
    if (first !== undefined && first.until <= time) return this.#forget(first);
    if (time >= this.#claimsLiveUntil) {
      let earliest = Number.POSITIVE_INFINITY;
      for (const [key, entry] of this.claims) {
        if (entry.until <= time) {
          this.claims.delete(key);
          return true;
        }
        if (entry.until < earliest) earliest = entry.until;
      }
      this.#claimsLiveUntil = earliest;
    }
    if (first !== undefined) return this.#forget(first);
    return false;
  }
}

/** A bound option (`max`), checked: its default when absent. */
function bound(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`memoryStore ${name} must be a positive whole number of ids`);
  return value;
}

/** One ordering entity: its highest completed version (kept until `until`) and its lock. */
interface EntityRecord {
  version: string | undefined;
  until: number;
  lockToken: string | undefined;
  lockUntil: number;
}

/**
 * The ordering entities, at most `max` of them. At the bound it forgets an entity with nothing
 * live first (its version expired and no lock), then the entity recorded longest ago (its version
 * forgotten early, as the bound forgets completed ids: documented), but never one whose lock
 * holds. A `Map` keeps insertion order, and a recorded entity is moved to its end.
 */
class Entities {
  readonly map = new Map<string, EntityRecord>();
  constructor(readonly max: number) {}

  /** The entity's record with expired parts cleared, or undefined. */
  get(entity: string, time: number): EntityRecord | undefined {
    const record = this.map.get(entity);
    if (record === undefined) return undefined;
    if (record.version !== undefined && record.until <= time) record.version = undefined;
    if (record.lockToken !== undefined && record.lockUntil <= time) record.lockToken = undefined;
    return record;
  }

  /** The entity's record, made (room found) when absent; `undefined` when every entity is locked. */
  make(entity: string, time: number): EntityRecord | undefined {
    const record = this.get(entity, time);
    if (record !== undefined) return record;
    if (this.map.size >= this.max && !this.#makeRoom(time)) return undefined;
    const made: EntityRecord = { version: undefined, until: 0, lockToken: undefined, lockUntil: 0 };
    this.map.set(entity, made);
    return made;
  }

  /** Moves a record to the back of the order (the most recently recorded). */
  touch(entity: string, record: EntityRecord): void {
    this.map.delete(entity);
    this.map.set(entity, record);
  }

  /** Drops the record when nothing in it is live. */
  tidy(entity: string, record: EntityRecord): void {
    if (record.version === undefined && record.lockToken === undefined) this.map.delete(entity);
  }

  #makeRoom(time: number): boolean {
    let oldestUnlocked: string | undefined;
    for (const [entity, record] of this.map) {
      const locked = record.lockToken !== undefined && record.lockUntil > time;
      if (!locked && (record.version === undefined || record.until <= time)) {
        this.map.delete(entity);
        return true;
      }
      if (!locked && oldestUnlocked === undefined) {
        oldestUnlocked = entity;
        // The oldest unlocked entity is known; an empty one further on would cost a whole pass.
        break;
      }
    }
    if (oldestUnlocked === undefined) return false;
    this.map.delete(oldestUnlocked);
    return true;
  }
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
  if (typeof options !== 'object' || options === null) throw new TypeError('memoryStore options must be an object');
  const max = bound(options.max, 'max', DEFAULT_MEMORY_STORE_MAX);
  const unsignedMax = checkUnsignedMax('memoryStore', options.unsignedMax);
  const now = options.now ?? Date.now;
  if (typeof now !== 'function') throw new TypeError('memoryStore now must be a function returning epoch milliseconds');
  const signed = new Space(max);
  const unsigned = new Space(unsignedMax);
  const spaceOf = (key: string): Space => (isUnsignedKey(key) ? unsigned : signed);
  const entities = new Entities(max);

  /** The key's live claim, when `token` holds it. */
  const held = (space: Space, key: string, token: string, time: number): Entry | undefined => {
    const lock = space.claims.get(key);
    return lock !== undefined && lock.token === token && lock.until > time ? lock : undefined;
  };

  /**
   * Completes the id `token` holds: `'now'`. Otherwise, idempotent for its own token, whether a
   * completion of that token already landed. Both completions (plain and ordered) start here.
   */
  const completeId = (key: string, token: string, ttlMs: number, time: number): 'now' | boolean => {
    const space = spaceOf(key);
    const lock = held(space, key, token, time);
    if (lock === undefined) {
      const done = space.done.get(key);
      return done !== undefined && done.token === token && done.until > time;
    }
    space.claims.delete(key);
    space.remember(lock, time + ttlMs);
    return 'now';
  };

  /**
   * The id's own answer at `time` (completed, or held by a live lock), else its expired lock if it
   * has one (to be taken over); an expired completion is forgotten. Both claims start here.
   */
  const idState = (space: Space, key: string, time: number): ClaimResult | { lock: Entry | undefined } => {
    const done = space.done.get(key);
    if (done !== undefined) {
      if (done.until > time) return { status: 'completed' };
      space.drop(done);
    }
    const lock = space.claims.get(key);
    if (lock !== undefined && lock.until > time) return { status: 'processing', retryAfterMs: lock.until - time };
    return { lock };
  };

  const operations: SyncOperations = {
    claim(key, lockMs): ClaimResult {
      checkClaim(key, lockMs);
      const space = spaceOf(key);
      const time = now();
      const id = idState(space, key, time);
      if ('status' in id) return id;
      const { lock } = id;
      // An expired lock is taken over below (hold() sets the key again).
      if (lock === undefined && !space.makeRoom(time)) {
        throw full(space);
      }
      const token = newToken();
      space.hold(key, { key, token, until: time + lockMs, live: false });
      return { status: 'acquired', token };
    },
    complete(key, token, ttlMs) {
      checkComplete(key, token, ttlMs);
      return completeId(key, token, ttlMs, now()) !== false;
    },
    release(key, token) {
      checkRelease(key, token);
      const space = spaceOf(key);
      if (held(space, key, token, now()) === undefined) return false;
      space.claims.delete(key);
      return true;
    },
    extend(key, token, lockMs) {
      checkExtend(key, token, lockMs);
      const time = now();
      const space = spaceOf(key);
      const lock = held(space, key, token, time);
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
        if (lock !== undefined) space.claims.delete(key);
        else if (!space.makeRoom(time)) throw full(space);
        space.remember({ key, token: newToken(), until: 0, live: false }, time + ttlMs);
        return { status: 'stale' };
      }
      if (order.exclusive && entity?.lockToken !== undefined) return { status: 'busy', retryAfterMs: entity.lockUntil - time };
      if (lock === undefined && !space.makeRoom(time)) throw full(space);
      const token = newToken();
      if (order.exclusive) {
        const record = entity ?? entities.make(order.entity, time);
        if (record === undefined) {
          throw new StoreError('memory', 'full', `memory store: all ${entities.max} ordering entities are locked by running handlers, so a new one was refused (raise max, or use a shared store)`);
        }
        record.lockToken = token;
        record.lockUntil = time + lockMs;
      }
      space.hold(key, { key, token, until: time + lockMs, live: false });
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
      if (held(space, key, token, time) === undefined) return false;
      space.claims.delete(key);
      return true;
    },
    extend(key: string, token: string, lockMs: number, order: EntityOrder): boolean {
      checkExtend(key, token, lockMs);
      checkOrder(order);
      const time = now();
      const space = spaceOf(key);
      const lock = held(space, key, token, time);
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

  // The receiver calls `operations` directly; everyone else gets promises, and a bad argument
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
    usage() {
      const of = (space: Space) => ({ claims: space.claims.size, completed: space.done.size, max: space.max });
      return { signed: of(signed), unsigned: of(unsigned) };
    },
    async ping() {},
  };
  offerSyncOperations(store, operations);
  return store;
}

/**
 * The Cloudflare Durable Object store: `webhook-receiver/cloudflare`.
 *
 * Each key is routed to one object (`idFromName(prefix + key)`), and each operation is one
 * request to that object, which runs the check and the write with nothing but storage between
 * them: the object's input gate lets no other request in meanwhile, so a claim is atomic however
 * many isolates and locations send duplicates at once. On the SQLite backend the object's SQL
 * storage is synchronous, so the check-and-set is one uninterrupted piece of code; on the older
 * key-value backend it awaits only `storage.get`/`put`, which the input gate covers.
 *
 * Unsigned ids cannot evict or block a signed id here, each key having its own object;
 * what they are bounded in is cost. They go to a fixed set of objects (named `<prefix>:u:<bucket>`,
 * the bucket a hash of the key), each holding at most 16 records, `unsignedMax` in all: whatever
 * unsigned traffic sends, it creates at most `unsignedMax / 16` objects and `unsignedMax` records,
 * each deleted by the alarm once expired. A full bucket makes room by forgetting the unsigned
 * completion that expires first; full of live claims, it refuses (`unsigned_limit`).
 *
 * Expiry is checked on access (a record past its time counts as absent) and cleaned up by the
 * object's alarm, so an id's storage goes away once its completion has expired.
 *
 * With ordering, an id still lives in its own object (an id is one id, ordered or not), and the
 * entity's version and lock in the entity's object: an ordered claim or completion is a request
 * to each, the id's first.
 *
 * Nothing here imports `cloudflare:workers`: the object is a plain class with the
 * `constructor(ctx, env)`, `fetch` and `alarm` shape that workerd calls, so this module also loads
 * in Node (for types, tests and bundlers) and needs no special export condition.
 */

import {
  askObject,
  checkClaim,
  checkClaimOrdered,
  checkComplete,
  checkEntity,
  checkExtend,
  checkOrder,
  checkRelease,
  checkTimeoutOption,
  checkUnsignedMax,
  describeValue,
  isUnsignedKey,
  newToken,
  unsignedBucket,
  unsignedBuckets,
  unsignedLimitError,
  wholeMs,
  withTimeout,
} from './internal.ts';
import { StoreError, type ClaimResult, type EntityOrder, type IdempotencyStore, type OrderedClaimResult, type OrderingOperations } from './types.ts';

export { DEFAULT_UNSIGNED_MAX, StoreError, type StoreErrorReason } from './types.ts';

/**
 * The part of a Durable Object stub that {@link durableObjectStore} uses (`DurableObjectStub`).
 * The store calls `fetch(url, init)` rather than passing a `Request`: every stub takes that form,
 * including ones whose runtime has a `Request` class of its own (Miniflare's proxies from Node).
 *
 * @example
 * ```ts
 * const stub: DurableObjectStubLike = env.WEBHOOK_CLAIMS.get(env.WEBHOOK_CLAIMS.idFromName('probe'));
 * ```
 */
export interface DurableObjectStubLike {
  /** Sends one operation to the object: a POST with a JSON body. */
  fetch(url: string, init: { method: 'POST'; headers: Record<string, string>; body: string }): Promise<Response>;
}

/**
 * The part of a Durable Object namespace binding (`env.WEBHOOK_CLAIMS`, a
 * `DurableObjectNamespace`) that {@link durableObjectStore} uses. Declared here so that neither
 * the package nor its types need `@cloudflare/workers-types`.
 *
 * @example
 * ```ts
 * import type { DurableObjectNamespaceLike } from 'webhook-receiver/cloudflare';
 * interface Env { WEBHOOK_CLAIMS: DurableObjectNamespaceLike }
 * ```
 */
export interface DurableObjectNamespaceLike<Id = unknown> {
  /** The object's id for a key: the same name always reaches the same object. */
  idFromName(name: string): Id;
  /** A stub that sends requests to that object. */
  get(id: Id): DurableObjectStubLike;
}

/**
 * Options of {@link durableObjectStore}.
 *
 * @example
 * ```ts
 * const options: DurableObjectStoreOptions = { prefix: 'billing:', timeoutMs: 3000 };
 * ```
 */
export interface DurableObjectStoreOptions {
  /** Put before every key to name its object, so several apps can share one binding. Default `''`. */
  prefix?: string;
  /**
   * How long one operation may take before it rejects (the receiver then answers 503
   * `STORE_UNAVAILABLE`). Default 5000: an object's first request may create it far away.
   */
  timeoutMs?: number;
  /**
   * The unsigned budget: how many records unsigned ids may hold at most, 16 an object (see
   * {@link durableObjectStore}). Default 10 000 ({@link DEFAULT_UNSIGNED_MAX}). Changing it moves
   * unsigned ids to other objects: their deduplication starts again.
   */
  unsignedMax?: number;
}

/**
 * The Durable Object store: {@link IdempotencyStore} with lease renewal and a readiness check.
 *
 * @example
 * ```ts
 * import { durableObjectStore, type DurableObjectStore } from 'webhook-receiver/cloudflare';
 * const store: DurableObjectStore = durableObjectStore(env.WEBHOOK_CLAIMS);
 * ```
 */
export interface DurableObjectStore extends Omit<IdempotencyStore, keyof OrderingOperations>, OrderingOperations {
  extend(key: string, token: string, lockMs: number): Promise<boolean>;
  ping(): Promise<void>;
}

/** The store's name: its `name` (telemetry), its `StoreError`s' `store`, its messages. */
const STORE = 'durable-object';

/**
 * 5000 ms: the default per-operation timeout of {@link durableObjectStore}.
 *
 * @example
 * ```ts
 * import { DEFAULT_DURABLE_OBJECT_TIMEOUT_MS, durableObjectStore } from 'webhook-receiver/cloudflare';
 * const store = durableObjectStore(env.WEBHOOK_CLAIMS, { timeoutMs: DEFAULT_DURABLE_OBJECT_TIMEOUT_MS / 2 });
 * ```
 */
export const DEFAULT_DURABLE_OBJECT_TIMEOUT_MS = 5000;

/** What the store asks its object: one operation on one key (`ways`: in an unsigned bucket of that many records). */
type Operation =
  | { op: 'claim'; key: string; token: string; ms: number; ways?: number }
  | { op: 'complete'; key: string; token: string; ms: number }
  | { op: 'release'; key: string; token: string }
  | { op: 'extend'; key: string; token: string; ms: number }
  | { op: 'ping' }
  | EntityOperation;

/**
 * What the Cloudflare inbox asks the one object that keeps its dead letters: a shelf of JSON
 * records, each kept until its time, listed oldest first (SQLite backend only).
 */
type ShelfOperation =
  | { op: 'shelf.put'; key: string; value: string; ms: number }
  | { op: 'shelf.get'; key: string }
  /** With `value`: only while the record is still that one (a retry must not delete a newer failure). */
  | { op: 'shelf.delete'; key: string; value?: string }
  | { op: 'shelf.list'; limit: number };

/**
 * Ordering: sent to the entity's object, which holds the entity's version and lock. An ordered
 * delivery's id lives in the id's own object, as an unordered one's (an id is one id with ordering
 * or without), and is claimed, completed, extended there first: objects cannot change together,
 * so the entity is judged while the id is held. `entity.claim` also reads `key` among the ids
 * that releases before this one kept in the entity's object, until they expire.
 */
type EntityOperation =
  | ({ op: 'entity.claim'; key: string; token: string; ms: number } & EntityOrder)
  | { op: 'entity.complete'; entity: string; token: string; version: string; ms: number }
  | { op: 'entity.release'; entity: string; token: string }
  | { op: 'entity.extend'; entity: string; token: string; ms: number }
  | { op: 'forgetVersion'; entity: string };

type Reply =
  | { status: 'acquired' }
  | { status: 'processing'; retryAfterMs: number }
  | { status: 'completed'; /** `entity.claim`: how long the id's completion still holds. */ leftMs?: number }
  | { status: 'unsigned_limit' }
  | { status: 'stale' }
  | { status: 'busy'; retryAfterMs: number }
  | { ok: boolean }
  | { value: string | null }
  | { values: string[] };

/**
 * An idempotency store on Cloudflare Durable Objects, shared by every isolate and location of a
 * Worker: a `webhook-id` is processed once however many of its deliveries arrive at once.
 *
 * `namespace` is the binding of the {@link WebhookClaims} class, which the Worker exports and
 * binds as a SQLite-backed Durable Object (wrangler.toml):
 *
 * ```toml
 * [[durable_objects.bindings]]
 * name = "WEBHOOK_CLAIMS"
 * class_name = "WebhookClaims"
 *
 * [[migrations]]
 * tag = "v1"
 * new_sqlite_classes = ["WebhookClaims"]
 * ```
 *
 * Each key has an object of its own, and each claim, complete, release and extend is one request
 * to it: atomic, one round trip. An operation that gets no answer within `timeoutMs` rejects.
 *
 * Unsigned ids (with the receiver's `unsigned: 'accept'`) share a fixed set of objects, 16 records
 * each and `unsignedMax` in all (default 10 000: 625 objects): unsigned traffic never holds more,
 * whatever it sends. A full object makes room by forgetting the unsigned completion that expires
 * first; full of live claims, it refuses with `StoreError` `unsigned_limit` (503 `UNSIGNED_LIMIT`).
 *
 * @example
 * ```ts
 * import { createReceiver } from 'webhook-receiver';
 * import { durableObjectStore } from 'webhook-receiver/cloudflare';
 * export { WebhookClaims } from 'webhook-receiver/cloudflare';
 *
 * export default {
 *   async fetch(request: Request, env: Env): Promise<Response> {
 *     const receiver = createReceiver({ secrets: env.WEBHOOK_SECRET, idempotency: { store: durableObjectStore(env.WEBHOOK_CLAIMS) } });
 *     return receiver.handle(request, async (webhook) => Response.json({ id: webhook.id }));
 *   },
 * };
 * ```
 */
export function durableObjectStore<Id>(namespace: DurableObjectNamespaceLike<Id>, options: DurableObjectStoreOptions = {}): DurableObjectStore {
  if (typeof namespace !== 'object' || namespace === null || typeof namespace.idFromName !== 'function' || typeof namespace.get !== 'function') {
    throw new TypeError(
      `durableObjectStore needs the Durable Object namespace binding of the WebhookClaims class (env.WEBHOOK_CLAIMS), got ${describeValue(namespace)}`,
    );
  }
  if (typeof options !== 'object' || options === null) throw new TypeError('durableObjectStore options must be an object');
  const { prefix = '' } = options;
  if (typeof prefix !== 'string') throw new TypeError('durableObjectStore prefix must be a string');
  const timeoutMs = checkTimeoutOption(STORE, options.timeoutMs, DEFAULT_DURABLE_OBJECT_TIMEOUT_MS);
  const unsignedMax = checkUnsignedMax('durableObjectStore', options.unsignedMax);
  const { buckets, ways } = unsignedBuckets(unsignedMax);

  /** The object of a key: its own, or its unsigned bucket's (`:u:`: no key of the receiver's grammar starts with `:`). */
  const objectName = (key: string): string => (isUnsignedKey(key) ? `${prefix}:u:${unsignedBucket(key, buckets)}` : prefix + key);

  const send = (name: string, operation: Operation): Promise<Reply> => askObject(namespace, name, operation, timeoutMs, STORE) as Promise<Reply>;

  const okOf = (reply: Reply, op: string): boolean => {
    if (typeof reply === 'object' && reply !== null && 'ok' in reply && typeof reply.ok === 'boolean') return reply.ok;
    throw new StoreError(STORE, 'bad_reply', `${STORE} store: unexpected reply to ${op}: ${describeValue(reply)}`);
  };
  /** An operation on an id, in the id's own object. */
  const answer = async (operation: Extract<Operation, { op: 'complete' | 'release' | 'extend' }>): Promise<boolean> => okOf(await send(objectName(operation.key), operation), operation.op);
  /** An operation on an entity, in the entity's object. */
  const answerEntity = async (operation: Exclude<EntityOperation, { op: 'entity.claim' }>): Promise<boolean> => okOf(await send(prefix + operation.entity, operation), operation.op);
  // An ordering operation's steps (two objects) bounded together, as one operation.
  const bounded = <T>(operation: string, steps: () => Promise<T>): Promise<T> => withTimeout(steps(), timeoutMs, STORE, operation);

  const claimId = async (key: string, lockMs: number): Promise<ClaimResult> => {
    const token = newToken();
    const operation: Operation = { op: 'claim', key, token, ms: wholeMs(lockMs) };
    if (isUnsignedKey(key)) operation.ways = ways;
    const reply = await send(objectName(key), operation);
    const status = typeof reply === 'object' && reply !== null && 'status' in reply ? reply.status : undefined;
    if (status === 'acquired') return { status, token };
    if (status === 'completed') return { status };
    if (status === 'unsigned_limit') throw unsignedLimitError(STORE, unsignedMax, `all ${ways} ids of its bucket are live claims`);
    if (status === 'processing') {
      const left = (reply as { retryAfterMs?: unknown }).retryAfterMs;
      return typeof left === 'number' && left > 0 ? { status, retryAfterMs: left } : { status };
    }
    throw new StoreError(STORE, 'bad_reply', `${STORE} store: unexpected reply to claim: ${describeValue(reply)}`);
  };

  /** The ordered claim's second step and what follows from it, the id being held by `token`. */
  const judgeEntity = async (key: string, token: string, lockMs: number, ttlMs: number, order: EntityOrder): Promise<OrderedClaimResult> => {
    const { entity, version, exclusive } = order;
    let reply: Reply;
    try {
      reply = await send(prefix + entity, { op: 'entity.claim', key, token, ms: wholeMs(lockMs), entity, version, exclusive });
    } catch (error) {
      // Nothing was decided: free the id for the sender's retry (best effort; else it expires).
      answer({ op: 'release', key, token }).catch(() => undefined);
      throw error;
    }
    const status = typeof reply === 'object' && reply !== null && 'status' in reply ? reply.status : undefined;
    const ms = (field: 'retryAfterMs' | 'leftMs'): number | undefined => {
      const value = (reply as { retryAfterMs?: unknown; leftMs?: unknown })[field];
      return typeof value === 'number' && value > 0 ? value : undefined;
    };
    if (status === 'acquired') return { status, token };
    if (status === 'completed' || status === 'stale') {
      // Done in the entity's object by an earlier release (for leftMs more), or stale: the id is
      // done, so its retries are duplicates, and an unordered delivery of it finds it too.
      await answer({ op: 'complete', key, token, ms: (status === 'completed' ? ms('leftMs') : undefined) ?? wholeMs(ttlMs) });
      return { status };
    }
    if (status === 'processing' || status === 'busy') {
      await answer({ op: 'release', key, token });
      const left = ms('retryAfterMs');
      return left !== undefined ? { status, retryAfterMs: left } : { status };
    }
    answer({ op: 'release', key, token }).catch(() => undefined);
    throw new StoreError(STORE, 'bad_reply', `${STORE} store: unexpected reply to claim: ${describeValue(reply)}`);
  };

  return {
    name: STORE,
    async claim(key, lockMs): Promise<ClaimResult> {
      checkClaim(key, lockMs);
      return claimId(key, lockMs);
    },
    async complete(key, token, ttlMs) {
      checkComplete(key, token, ttlMs);
      return answer({ op: 'complete', key, token, ms: wholeMs(ttlMs) });
    },
    async release(key, token) {
      checkRelease(key, token);
      return answer({ op: 'release', key, token });
    },
    async extend(key, token, lockMs) {
      checkExtend(key, token, lockMs);
      return answer({ op: 'extend', key, token, ms: wholeMs(lockMs) });
    },
    // Ordered: the id first, in its own object as an unordered claim (a completed or held id
    // answers at once), then, while this token holds it, the entity in the entity's object.
    async claimOrdered(key, lockMs, ttlMs, order): Promise<OrderedClaimResult> {
      checkClaimOrdered(key, lockMs, ttlMs, order);
      return bounded('claim', async () => {
        const held = await claimId(key, lockMs);
        return held.status === 'acquired' ? judgeEntity(key, held.token, lockMs, ttlMs, order) : held;
      });
    },
    // The id first: only a token that held it records a version or frees the entity's lock.
    async completeOrdered(key, token, ttlMs, order) {
      checkComplete(key, token, ttlMs);
      checkOrder(order);
      return bounded('complete', async () => {
        if (!(await answer({ op: 'complete', key, token, ms: wholeMs(ttlMs) }))) return false;
        await answerEntity({ op: 'entity.complete', entity: order.entity, token, version: order.version, ms: wholeMs(ttlMs) });
        return true;
      });
    },
    // Both at once: each object fences by the token on its own.
    async releaseOrdered(key, token, order) {
      checkRelease(key, token);
      checkOrder(order);
      return bounded('release', async () => {
        const [released] = await Promise.all([answer({ op: 'release', key, token }), answerEntity({ op: 'entity.release', entity: order.entity, token })]);
        return released;
      });
    },
    // The id first: a token that no longer holds it renews nothing. One that lost only the
    // entity's lock meanwhile gets false; the id's renewal then runs out by itself.
    async extendOrdered(key, token, lockMs, order) {
      checkExtend(key, token, lockMs);
      checkOrder(order);
      return bounded('extend', async () => {
        if (!(await answer({ op: 'extend', key, token, ms: wholeMs(lockMs) }))) return false;
        return !order.exclusive || answerEntity({ op: 'entity.extend', entity: order.entity, token, ms: wholeMs(lockMs) });
      });
    },
    async forgetVersion(entity) {
      checkEntity(entity);
      const reply = await send(prefix + entity, { op: 'forgetVersion', entity });
      if (typeof reply !== 'object' || reply === null || !('ok' in reply) || reply.ok !== true) {
        throw new StoreError(STORE, 'bad_reply', `${STORE} store: unexpected reply to forgetVersion: ${describeValue(reply)}`);
      }
    },
    async ping() {
      // An object of its own (no key has an empty namespace), which never writes storage.
      const reply = await send(`${prefix}:ping`, { op: 'ping' });
      if (typeof reply !== 'object' || reply === null || !('ok' in reply) || reply.ok !== true) {
        throw new StoreError(STORE, 'bad_reply', `${STORE} store: unexpected reply to ping: ${describeValue(reply)}`);
      }
    },
  };
}

/**
 * The part of a Durable Object's SQL storage (`ctx.storage.sql`) that {@link WebhookClaims} uses.
 *
 * @example
 * ```ts
 * const sql: SqlStorageLike = ctx.storage.sql;
 * ```
 */
export interface SqlStorageLike {
  /** Runs one statement, synchronously, with `?` bindings. */
  exec(
    query: string,
    ...bindings: (string | number | null)[]
  ): {
    /** The rows the statement returned. */
    toArray(): Record<string, unknown>[];
  };
}

/**
 * The part of a Durable Object's storage (`ctx.storage`) that {@link WebhookClaims} uses: SQL on
 * the SQLite backend, the key-value methods otherwise, and the alarm.
 *
 * @example
 * ```ts
 * const storage: DurableObjectStorageLike = ctx.storage;
 * ```
 */
export interface DurableObjectStorageLike {
  /** Present on the SQLite backend (on the key-value backend, using it throws). */
  readonly sql?: SqlStorageLike;
  /** Key-value backend: a key's value. */
  get(key: string): Promise<unknown>;
  /** Key-value backend: writes a key. */
  put(key: string, value: unknown): Promise<void>;
  /** Key-value backend: deletes a key. */
  delete(key: string): Promise<boolean>;
  /** Key-value backend: every key, for the alarm's clean-up. */
  list(): Promise<Map<string, unknown>>;
  /** Drops the object's storage once nothing in it is live. */
  deleteAll(): Promise<void>;
  /** Schedules the alarm that clears expired records (milliseconds since the epoch). */
  setAlarm(scheduledTime: number): Promise<void>;
  /** The alarm's time, or `null` when none is set (the dead-letter shelf keeps an earlier one). */
  getAlarm?(): Promise<number | null>;
}

/**
 * The part of a Durable Object's state (`ctx`, `DurableObjectState`) that {@link WebhookClaims} uses.
 *
 * @example
 * ```ts
 * const state: DurableObjectStateLike = ctx;
 * ```
 */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike;
}

/** One key's record: a live claim (`done` false) or a completion, until `until` (epoch ms). */
interface ClaimRecord {
  token: string;
  done: boolean;
  until: number;
}

/** An ordering entity's record: its highest completed version (kept until `until`) and its lock. */
interface EntityRecord {
  version: string | null;
  lockToken: string | null;
  lockUntil: number;
  /** Never before `lockUntil`, so clean-up never drops a live lock. */
  until: number;
}

/** Where an object keeps its records: SQL (synchronous) or key-value (awaited) storage. */
interface Records {
  entity(key: string): EntityRecord | undefined | Promise<EntityRecord | undefined>;
  putEntity(key: string, record: EntityRecord): void | Promise<void>;
  get(key: string): ClaimRecord | undefined | Promise<ClaimRecord | undefined>;
  put(key: string, record: ClaimRecord): void | Promise<void>;
  delete(key: string): void | Promise<unknown>;
  /** Deletes records expired at `time`; answers the earliest `until` left, if any. */
  sweep(time: number): number | undefined | Promise<number | undefined>;
  /**
   * In an unsigned bucket's object, room for `key` among at most `ways` records: deletes other
   * keys' expired records, then, if the bucket is still full, the completion that expires first
   * (forgotten early). `false`: every other record is a live claim.
   */
  admit(key: string, time: number, ways: number): boolean | Promise<boolean>;
  /** After `deleteAll()`, which also drops the table. */
  forget(): void;
}

const TABLE = 'webhook_receiver_claims';
const ENTITIES = 'webhook_receiver_entities';

function sqlRecords(sql: SqlStorageLike): Records {
  let ready = false;
  const table = () => {
    if (!ready) {
      sql.exec(`CREATE TABLE IF NOT EXISTS ${TABLE} (key TEXT PRIMARY KEY, token TEXT NOT NULL, done INTEGER NOT NULL, expires_at INTEGER NOT NULL)`);
      sql.exec(`CREATE TABLE IF NOT EXISTS ${ENTITIES} (key TEXT PRIMARY KEY, version TEXT, lock_token TEXT, lock_until INTEGER NOT NULL, expires_at INTEGER NOT NULL)`);
    }
    ready = true;
    return sql;
  };
  return {
    entity(key) {
      const row = table().exec(`SELECT version, lock_token, lock_until, expires_at FROM ${ENTITIES} WHERE key = ?`, key).toArray()[0];
      if (row === undefined) return undefined;
      const text = (value: unknown) => (typeof value === 'string' ? value : null);
      return { version: text(row.version), lockToken: text(row.lock_token), lockUntil: Number(row.lock_until), until: Number(row.expires_at) };
    },
    putEntity(key, record) {
      table().exec(
        `INSERT INTO ${ENTITIES} (key, version, lock_token, lock_until, expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET version = excluded.version, lock_token = excluded.lock_token, lock_until = excluded.lock_until, expires_at = excluded.expires_at`,
        key,
        record.version,
        record.lockToken,
        record.lockUntil,
        record.until,
      );
    },

    get(key) {
      const row = table().exec(`SELECT token, done, expires_at FROM ${TABLE} WHERE key = ?`, key).toArray()[0];
      return row === undefined ? undefined : { token: String(row.token), done: row.done === 1, until: Number(row.expires_at) };
    },
    put(key, record) {
      table().exec(
        `INSERT INTO ${TABLE} (key, token, done, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET token = excluded.token, done = excluded.done, expires_at = excluded.expires_at`,
        key,
        record.token,
        record.done ? 1 : 0,
        record.until,
      );
    },
    delete(key) {
      table().exec(`DELETE FROM ${TABLE} WHERE key = ?`, key);
    },
    sweep(time) {
      table().exec(`DELETE FROM ${TABLE} WHERE expires_at <= ?`, time);
      table().exec(`DELETE FROM ${ENTITIES} WHERE expires_at <= ?`, time);
      const next = table().exec(`SELECT MIN(next) AS next FROM (SELECT MIN(expires_at) AS next FROM ${TABLE} UNION ALL SELECT MIN(expires_at) FROM ${ENTITIES})`).toArray()[0]?.next;
      return typeof next === 'number' ? next : undefined;
    },

    admit(key, time, ways) {
      table().exec(`DELETE FROM ${TABLE} WHERE key <> ? AND expires_at <= ?`, key, time);
      if (Number(table().exec(`SELECT count(*) AS held FROM ${TABLE} WHERE key <> ?`, key).toArray()[0]?.held) < ways) return true;
      const oldest = table().exec(`SELECT key FROM ${TABLE} WHERE key <> ? AND done = 1 ORDER BY expires_at LIMIT 1`, key).toArray()[0]?.key;
      if (oldest === undefined) return false;
      table().exec(`DELETE FROM ${TABLE} WHERE key = ?`, String(oldest));
      return true;
    },
    forget() {
      ready = false;
    },
  };
}

function keyValueRecords(storage: DurableObjectStorageLike): Records {
  return {
    // An entity's key (`…:o:…`) never names an id, so both kinds of record share the storage.
    entity: async (key) => (await storage.get(key)) as EntityRecord | undefined,
    putEntity: (key, record) => storage.put(key, record),
    get: async (key) => (await storage.get(key)) as ClaimRecord | undefined,
    put: (key, record) => storage.put(key, record),
    delete: (key) => storage.delete(key),
    async sweep(time) {
      let next: number | undefined;
      for (const [key, value] of await storage.list()) {
        const until = (value as Partial<ClaimRecord> | undefined)?.until;
        if (typeof until !== 'number' || until <= time) await storage.delete(key);
        else if (next === undefined || until < next) next = until;
      }
      return next;
    },
    async admit(key, time, ways) {
      let held = 0;
      let oldest: [string, number] | undefined;
      for (const [other, value] of await storage.list()) {
        if (other === key) continue;
        const until = (value as Partial<ClaimRecord> | undefined)?.until;
        if (typeof until !== 'number' || until <= time) await storage.delete(other);
        else {
          held++;
          if ((value as ClaimRecord).done && (oldest === undefined || until < oldest[1])) oldest = [other, until];
        }
      }
      if (held < ways) return true;
      if (oldest === undefined) return false;
      await storage.delete(oldest[0]);
      return true;
    },
    forget() {},
  };
}

/**
 * The shelf of the object that keeps the Cloudflare inbox's dead letters: JSON records by key, each
 * until its time, listed oldest first. Only on the SQLite backend, where a list is one query.
 */
interface Shelf {
  put(key: string, value: string, time: number, until: number): void;
  get(key: string, time: number): string | undefined;
  /** Deletes a live record (only if its value is `value`, when given); answers whether it did. */
  delete(key: string, time: number, value?: string): boolean;
  list(limit: number, time: number): string[];
  /** Deletes records expired at `time`; answers the earliest `until` left, if any. */
  sweep(time: number): number | undefined;
  forget(): void;
}

const SHELF = 'webhook_receiver_shelf';

function sqlShelf(sql: SqlStorageLike): Shelf {
  let ready = false;
  const table = () => {
    if (!ready) {
      sql.exec(`CREATE TABLE IF NOT EXISTS ${SHELF} (key TEXT PRIMARY KEY, value TEXT NOT NULL, at INTEGER NOT NULL, expires_at INTEGER NOT NULL)`);
      sql.exec(`CREATE INDEX IF NOT EXISTS ${SHELF}_at ON ${SHELF} (at, key)`);
    }
    ready = true;
    return sql;
  };
  const get = (key: string, time: number): string | undefined => {
    const row = table().exec(`SELECT value FROM ${SHELF} WHERE key = ? AND expires_at > ?`, key, time).toArray()[0];
    return row === undefined ? undefined : String(row.value);
  };
  return {
    put(key, value, time, until) {
      table().exec(
        `INSERT INTO ${SHELF} (key, value, at, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, at = excluded.at, expires_at = excluded.expires_at`,
        key,
        value,
        time,
        until,
      );
    },
    get,
    delete(key, time, value) {
      // Synchronous storage: nothing runs between the read and the delete.
      const found = get(key, time);
      if (found === undefined || (value !== undefined && found !== value)) return false;
      table().exec(`DELETE FROM ${SHELF} WHERE key = ?`, key);
      return true;
    },
    list(limit, time) {
      return table()
        .exec(`SELECT value FROM ${SHELF} WHERE expires_at > ? ORDER BY at, key LIMIT ?`, time, limit)
        .toArray()
        .map((row) => String(row.value));
    },
    sweep(time) {
      // An object that never shelved anything has no table: nothing to create for the alarm.
      if (!ready && sql.exec(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?`, SHELF).toArray().length === 0) return undefined;
      table().exec(`DELETE FROM ${SHELF} WHERE expires_at <= ?`, time);
      const next = table().exec(`SELECT MIN(expires_at) AS next FROM ${SHELF}`).toArray()[0]?.next;
      return typeof next === 'number' ? next : undefined;
    },
    forget() {
      ready = false;
    },
  };
}

/** Where an object keeps its records, and its dead-letter shelf when it has SQL storage. */
interface Backend {
  records: Records;
  shelf: Shelf | undefined;
}

/** The SQL storage when this object has one (a SQLite-backed class), else the key-value API. */
function backendFor(storage: DurableObjectStorageLike): Backend {
  let sql: SqlStorageLike | undefined;
  try {
    sql = storage.sql;
    sql?.exec('SELECT 1');
  } catch (error) {
    // A class declared with `new_classes` rather than `new_sqlite_classes` (workerd words it
    // "SQL is not enabled…" or "…not backed by SQLite storage, so the SQL API is not available").
    // Any other failure is no reason to look for records elsewhere: it propagates, and the store
    // fails closed.
    if (!(error instanceof Error && /\bSQL(ite)?\b/i.test(error.message))) throw error;
    sql = undefined;
  }
  return sql !== undefined ? { records: sqlRecords(sql), shelf: sqlShelf(sql) } : { records: keyValueRecords(storage), shelf: undefined };
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;
const isText = (value: unknown): value is string => typeof value === 'string' && value.length > 0;
const isMs = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

/** Most records one `shelf.list` answers. */
const SHELF_LIST_MAX = 10_000;

/** An ordering operation, for the entity's object. */
function isEntityOperation(operation: Operation): operation is EntityOperation {
  return operation.op === 'forgetVersion' || operation.op.startsWith('entity.');
}

/** The request body as an operation, or `undefined` when it is not one. */
function operationOf(body: unknown): Operation | ShelfOperation | undefined {
  if (!isObject(body)) return undefined;
  if (body.op === 'ping') return { op: 'ping' };
  if (body.op === 'shelf.list') {
    const limit = body.limit;
    return typeof limit === 'number' && Number.isInteger(limit) && limit >= 1 && limit <= SHELF_LIST_MAX ? { op: 'shelf.list', limit } : undefined;
  }
  if (body.op === 'shelf.get' && isText(body.key)) return { op: 'shelf.get', key: body.key };
  if (body.op === 'shelf.delete' && isText(body.key) && (body.value === undefined || typeof body.value === 'string')) {
    return body.value === undefined ? { op: 'shelf.delete', key: body.key } : { op: 'shelf.delete', key: body.key, value: body.value };
  }
  if (body.op === 'shelf.put' && isText(body.key) && typeof body.value === 'string' && isMs(body.ms)) return { op: 'shelf.put', key: body.key, value: body.value, ms: body.ms };
  if (body.op === 'forgetVersion') return isText(body.entity) ? { op: 'forgetVersion', entity: body.entity } : undefined;
  if (typeof body.op === 'string' && body.op.startsWith('entity.')) {
    if (!isText(body.entity) || !isText(body.token)) return undefined;
    const { entity, token } = body;
    if (body.op === 'entity.release') return { op: 'entity.release', entity, token };
    if (!isMs(body.ms)) return undefined;
    if (body.op === 'entity.extend') return { op: 'entity.extend', entity, token, ms: body.ms };
    if (!isText(body.version)) return undefined;
    if (body.op === 'entity.complete') return { op: 'entity.complete', entity, token, version: body.version, ms: body.ms };
    if (body.op === 'entity.claim' && isText(body.key) && typeof body.exclusive === 'boolean') {
      return { op: 'entity.claim', key: body.key, token, ms: body.ms, entity, version: body.version, exclusive: body.exclusive };
    }
    return undefined;
  }
  if (!isText(body.key) || !isText(body.token)) return undefined;

  if (body.op === 'claim' && isMs(body.ms)) {
    const claim: Operation = { op: 'claim', key: body.key, token: body.token, ms: body.ms };
    if (body.ways !== undefined) {
      if (!isMs(body.ways)) return undefined;
      claim.ways = body.ways;
    }
    return claim;
  }
  if (body.op === 'release') return { op: 'release', key: body.key, token: body.token };
  if ((body.op === 'complete' || body.op === 'extend') && isMs(body.ms)) return { op: body.op, key: body.key, token: body.token, ms: body.ms };
  return undefined;
}

/**
 * The Durable Object behind {@link durableObjectStore}: export it from the Worker and bind it as
 * a SQLite-backed class (`new_sqlite_classes`). One object holds one key's claim (an unsigned
 * bucket's object, up to 16); it answers the store's requests and clears its storage by alarm once
 * the record has expired. Also works on
 * the older key-value backend (`new_classes`).
 *
 * One more object of the class keeps the dead letters of a Cloudflare Queues inbox
 * (`cloudflareQueueInbox`), so they can be listed: that needs the SQLite backend.
 *
 * A plain class with the shape workerd calls (`constructor(ctx, env)`, `fetch`, `alarm`), so
 * importing it needs no `cloudflare:workers`.
 *
 * @example
 * ```ts
 * // src/index.ts of the Worker: export the class under the name wrangler.toml binds.
 * export { WebhookClaims } from 'webhook-receiver/cloudflare';
 * ```
 */
export class WebhookClaims {
  /** The object's state, as workerd passed it. */
  protected readonly ctx: DurableObjectStateLike;
  #backend: Backend | undefined;

  constructor(ctx: DurableObjectStateLike, _env?: unknown) {
    this.ctx = ctx;
  }

  get #store(): Records {
    return (this.#backend ??= backendFor(this.ctx.storage)).records;
  }

  get #shelf(): Shelf | undefined {
    return (this.#backend ??= backendFor(this.ctx.storage)).shelf;
  }

  /** One operation of {@link durableObjectStore} (or of the inbox's dead letters), as a JSON request; answers JSON. */
  async fetch(request: Request): Promise<Response> {
    let body: unknown;
    try {
      body = await request.json();
    } catch {
      body = undefined;
    }
    const operation = operationOf(body);
    if (request.method !== 'POST' || operation === undefined) {
      return new Response('WebhookClaims answers the requests of durableObjectStore() only', { status: 400 });
    }
    if (operation.op.startsWith('shelf.')) {
      const shelf = this.#shelf;
      if (shelf === undefined) {
        return new Response('the inbox keeps its dead letters in SQL storage: bind WebhookClaims as a SQLite-backed class (new_sqlite_classes)', { status: 501 });
      }
      return Response.json(await this.#shelve(shelf, operation as ShelfOperation));
    }
    return Response.json(await this.#apply(operation as Operation));
  }

  /** Clears expired records; when none is left, the object's storage altogether. */
  async alarm(): Promise<void> {
    const time = Date.now();
    const claims = await this.#store.sweep(time);
    const shelved = this.#shelf?.sweep(time);
    const next = claims === undefined ? shelved : shelved === undefined ? claims : Math.min(claims, shelved);
    if (next !== undefined) {
      await this.ctx.storage.setAlarm(next);
      return;
    }
    await this.ctx.storage.deleteAll();
    this.#store.forget();
    this.#shelf?.forget();
  }

  async #shelve(shelf: Shelf, operation: ShelfOperation): Promise<Reply> {
    const time = Date.now();
    switch (operation.op) {
      case 'shelf.get':
        return { value: shelf.get(operation.key, time) ?? null };
      case 'shelf.list':
        return { values: shelf.list(operation.limit, time) };
      case 'shelf.delete':
        return { ok: shelf.delete(operation.key, time, operation.value) };
      case 'shelf.put': {
        const until = time + operation.ms;
        shelf.put(operation.key, operation.value, time, until);
        // The object's one alarm stays at the earliest expiry; the sweep sets the next one.
        const alarm = (await this.ctx.storage.getAlarm?.()) ?? null;
        if (alarm === null || alarm > until) await this.ctx.storage.setAlarm(until);
        return { ok: true };
      }
    }
  }

  // From the first read to the last write, only storage is awaited: the input gate holds every
  // other request to this object until the operation is done.
  async #apply(operation: Operation): Promise<Reply> {
    if (operation.op === 'ping') return { ok: true };
    if (isEntityOperation(operation)) return this.#applyToEntity(operation);
    const records = this.#store;
    const { key, token } = operation;
    const time = Date.now();
    let record = await records.get(key);
    if (record !== undefined && record.until <= time) record = undefined;

    if (operation.op === 'claim') {
      if (record !== undefined) return record.done ? { status: 'completed' } : { status: 'processing', retryAfterMs: record.until - time };
      // An unsigned bucket's object holds at most `ways` ids.
      if (operation.ways !== undefined && !(await records.admit(key, time, operation.ways))) return { status: 'unsigned_limit' };
      return this.#write(key, { token, done: false, until: time + operation.ms }, { status: 'acquired' });
    }
    const owned = record !== undefined && record.token === token;
    if (operation.op === 'complete') {
      // Idempotent for its own token: a completion that already landed answers true again.
      if (!owned) return { ok: false };
      if (record!.done) return { ok: true };
      return this.#write(key, { token, done: true, until: time + operation.ms }, { ok: true });
    }
    if (!owned || record!.done) return { ok: false };
    if (operation.op === 'release') {
      await records.delete(key);
      return { ok: true };
    }
    return this.#write(key, { token, done: false, until: time + operation.ms }, { ok: true });
  }

  // The entity's object: its version and its lock (and ids that releases before this one kept
  // here, read until they expire), judged in one operation (the input gate holds other requests
  // while only storage is awaited, as in #apply).
  async #applyToEntity(operation: EntityOperation): Promise<Reply> {
    const records = this.#store;
    const time = Date.now();
    let entity = await records.entity(operation.entity);
    if (entity !== undefined) {
      if (entity.version !== null && entity.until <= time) entity = { ...entity, version: null };
      if (entity.lockToken !== null && entity.lockUntil <= time) entity = { ...entity, lockToken: null };
    }
    if (operation.op === 'forgetVersion') {
      if (entity !== undefined && entity.version !== null) await records.putEntity(operation.entity, { ...entity, version: null });
      return { ok: true };
    }
    const recorded = entity ?? { version: null, lockToken: null, lockUntil: 0, until: 0 };
    const { token } = operation;

    if (operation.op === 'entity.claim') {
      const kept = await records.get(operation.key);
      if (kept !== undefined && kept.until > time) {
        return kept.done ? { status: 'completed', leftMs: kept.until - time } : { status: 'processing', retryAfterMs: kept.until - time };
      }
      if (recorded.version !== null && recorded.version > operation.version) return { status: 'stale' };
      if (!operation.exclusive) return { status: 'acquired' };
      if (recorded.lockToken !== null) return { status: 'busy', retryAfterMs: recorded.lockUntil - time };
      const lockUntil = time + operation.ms;
      return this.#putEntity(operation.entity, { ...recorded, lockToken: token, lockUntil, until: Math.max(recorded.until, lockUntil) }, { status: 'acquired' });
    }
    if (operation.op === 'entity.complete') {
      // Sent only once the id's own object completed it for this token (or again, when retried).
      const version = recorded.version === null || recorded.version < operation.version ? operation.version : recorded.version;
      const mine = recorded.lockToken === token;
      return this.#putEntity(
        operation.entity,
        { version, lockToken: mine ? null : recorded.lockToken, lockUntil: mine ? 0 : recorded.lockUntil, until: Math.max(recorded.until, time + operation.ms) },
        { ok: true },
      );
    }
    if (operation.op === 'entity.release') {
      if (entity !== undefined && entity.lockToken === token) await records.putEntity(operation.entity, { ...entity, lockToken: null, lockUntil: 0 });
      return { ok: true };
    }
    // entity.extend: the lock, while this token holds it.
    if (entity === undefined || entity.lockToken !== token) return { ok: false };
    const lockUntil = time + operation.ms;
    return this.#putEntity(operation.entity, { ...entity, lockUntil, until: Math.max(entity.until, lockUntil) }, { ok: true });
  }

  async #putEntity(key: string, record: EntityRecord, reply: Reply): Promise<Reply> {
    await this.#store.putEntity(key, record);
    // The alarm's sweep deletes the record once it has expired; an earlier alarm (another record
    // of this object) is kept, and its sweep sets the next one.
    const alarm = (await this.ctx.storage.getAlarm?.()) ?? null;
    if (alarm === null || alarm > record.until) await this.ctx.storage.setAlarm(record.until);
    return reply;
  }

  async #write(key: string, record: ClaimRecord, reply: Reply): Promise<Reply> {
    await this.#store.put(key, record);
    // One alarm per object. A key's own object holds one record: the alarm fires when it expires.
    // An unsigned bucket's object holds several: the alarm's sweep sets the next one for those left.
    await this.ctx.storage.setAlarm(record.until);
    return reply;
  }
}

/**
 * The client side of the Durable Object store: `durableObjectStore`, which sends each operation to
 * the object of its key (an id's own, its unsigned bucket's, or an ordering entity's).
 */

import { checkObject } from '../../lib/checks.ts';
import {
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
} from '../internal.ts';
import { StoreError, type ClaimResult, type EntityOrder, type IdempotencyStore, type OrderedClaimResult, type OrderingOperations } from '../types.ts';
import type { DurableObjectNamespaceLike } from './bindings.ts';
import type { EntityOperation, Operation, Reply } from './protocol.ts';
import { askObject } from './rpc.ts';

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
export interface DurableObjectStore extends IdempotencyStore {
  /** The ordering operations: this store has all five. */
  readonly ordering: OrderingOperations;
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
  checkObject(options, 'durableObjectStore options must be an object');
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
    ordering: {
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

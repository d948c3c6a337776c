/**
 * What the Durable Object store and the Cloudflare inbox ask a `WebhookClaims` object, and what it
 * answers: one JSON operation a request. The object reads a request body with {@link operationOf},
 * which refuses anything else.
 */

import { isObject } from '../../lib/checks.ts';
import type { EntityOrder } from '../types.ts';

/** What the store asks its object: one operation on one key (`ways`: in an unsigned bucket of that many records). */
export type Operation =
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
export type ShelfOperation =
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
export type EntityOperation =
  | ({ op: 'entity.claim'; key: string; token: string; ms: number } & EntityOrder)
  | { op: 'entity.complete'; entity: string; token: string; version: string; ms: number }
  | { op: 'entity.release'; entity: string; token: string }
  | { op: 'entity.extend'; entity: string; token: string; ms: number }
  | { op: 'forgetVersion'; entity: string };

/** What the object answers an operation, as JSON. */
export type Reply =
  | { status: 'acquired' }
  | { status: 'processing'; retryAfterMs: number }
  | { status: 'completed'; /** `entity.claim`: how long the id's completion still holds. */ leftMs?: number }
  | { status: 'unsigned_limit' }
  | { status: 'stale' }
  | { status: 'busy'; retryAfterMs: number }
  | { ok: boolean }
  | { value: string | null }
  | { values: string[] };

const isText = (value: unknown): value is string => typeof value === 'string' && value.length > 0;
const isMs = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

/** Most records one `shelf.list` answers. */
const SHELF_LIST_MAX = 10_000;

/** An ordering operation, for the entity's object. */
export function isEntityOperation(operation: Operation): operation is EntityOperation {
  return operation.op === 'forgetVersion' || operation.op.startsWith('entity.');
}

/** The request body as an operation, or `undefined` when it is not one. */
export function operationOf(body: unknown): Operation | ShelfOperation | undefined {
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

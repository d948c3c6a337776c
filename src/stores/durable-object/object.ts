/** The Durable Object class behind the store: it answers the store's and the inbox's operations, and sweeps by alarm. */

import type { DurableObjectStateLike } from './bindings.ts';
import { backendFor, type Backend } from './backend.ts';
import { isEntityOperation, operationOf, type EntityOperation, type Operation, type Reply, type ShelfOperation } from './protocol.ts';
import type { ClaimRecord, EntityRecord, Records } from './records.ts';
import type { Shelf } from './shelf.ts';

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

  /**
   * The object's clock, in epoch milliseconds: when records expire and what the alarm sweeps.
   * `Date.now()`; a subclass may give another (a test that must not race the wall clock).
   *
   * @example
   * ```ts
   * class ClaimsOnTestClock extends WebhookClaims {
   *   static time = 1_700_000_000_000;
   *   protected override now(): number {
   *     return ClaimsOnTestClock.time;
   *   }
   * }
   * ```
   */
  protected now(): number {
    return Date.now();
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
    const time = this.now();
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
    const time = this.now();
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
    const time = this.now();
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
    const time = this.now();
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

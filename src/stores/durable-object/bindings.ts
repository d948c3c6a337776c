/**
 * The parts of Cloudflare's bindings that the Durable Object store and its object use, declared
 * here so that neither the package nor its types need `@cloudflare/workers-types`: the namespace
 * binding and its stubs (the client's side), the object's state and storage (the object's side).
 */

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

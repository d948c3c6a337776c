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

export { DEFAULT_UNSIGNED_MAX, StoreError, type StoreErrorReason } from '../types.ts';
export type { DurableObjectNamespaceLike, DurableObjectStateLike, DurableObjectStorageLike, DurableObjectStubLike, SqlStorageLike } from './bindings.ts';
export { WebhookClaims } from './object.ts';
export { DEFAULT_DURABLE_OBJECT_TIMEOUT_MS, durableObjectStore, type DurableObjectStore, type DurableObjectStoreOptions } from './store.ts';

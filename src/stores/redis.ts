/**
 * The Redis idempotency store: `webhook-receiver/redis`.
 *
 * Each operation is one Lua script on one key, sent with EVALSHA (EVAL when the server answers
 * NOSCRIPT, which also caches the script): atomic, one round trip, and Redis Cluster and Valkey
 * work because a script touches only the key it declares. The client is the
 * user's: `ioredis` and `redis` (node-redis) are told apart by shape, and neither is imported.
 *
 * What a key holds: `lock:<token>` while a handler runs (expiring after `lockMs`, renewed by
 * `extend`), then `done:<token>` (expiring after `ttlMs`). The completed record keeps its token so
 * a completion that Redis applied late (after the client timed out) is recognised as this
 * token's own when it is retried, rather than reported as a takeover.
 *
 * Unsigned ids live in a fixed set of hashes, `<prefix>:u:<bucket>`, the bucket a hash
 * of the whole key, each holding at most 16 ids (`unsignedMax` in all): unsigned traffic can never
 * hold more, whatever it sends, so it cannot fill Redis (under `noeviction`, an out-of-memory
 * Redis refuses signed writes too) or push signed ids out (under `volatile-*`). A field is the
 * SHA-1 of its key, so ids of any length cost the same. A full bucket makes room by forgetting the
 * unsigned completion that expires first; full of live claims, it refuses (`unsigned_limit`).
 * Each script still touches one key.
 *
 * Ordering keeps an id under the same key with or without it; the entity's version and lock live
 * under the entity's hash tag, in another slot, so an ordered operation is two scripts: the id's,
 * then the entity's (see `redis/ordering.lua.ts`).
 *
 * @module webhook-receiver/redis
 */

export * from './redis/index.ts';

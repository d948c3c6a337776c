/**
 * The PostgreSQL idempotency store: `webhook-receiver/postgres`.
 *
 * One table, one row per key: `token` (the claim's owner), `completed`, and `expires_at` (the end
 * of the lock while a handler runs, the end of the memory once completed), always on the server's
 * clock. Every operation is one SQL statement, so one round trip, atomic under concurrency without
 * locks held across round trips; the key is the primary key, so a claim is one index look-up.
 *
 * Unsigned ids live in a second table of at most `unsignedMax` slots, `<table>_unsigned`,
 * in buckets of 16, the bucket a hash of the key (`hashtextextended`, which hash partitioning relies
 * on to stay the same across PostgreSQL versions): unsigned traffic never holds more rows, whatever
 * it sends. A full bucket makes room by forgetting the unsigned completion that expires first; full
 * of live claims, it refuses (`unsigned_limit`). Still one statement per operation.
 *
 * Transactional mode (`store.transaction`) completes the claim inside the application's own
 * transaction, fenced by the claim's token: the side effect and the completion commit together or
 * not at all, which closes the one gap no external store can (a crash between the effect and the
 * completion).
 *
 * The client is the application's: a `pg` Pool (or Client) or a postgres.js `sql`, told apart by
 * shape. Neither is imported.
 *
 * @module webhook-receiver/postgres
 */

export * from './postgres/index.ts';

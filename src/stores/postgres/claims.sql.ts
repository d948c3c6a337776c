/**
 * The SQL of claims without ordering: signed ids in the claims table, unsigned ids in their slots
 * table. Each operation is one statement; `$1` is always the key, `$2` the token.
 */

import { unsignedBuckets } from '../internal.ts';

/** The operations of one key class, each one statement. */
export type KeyOperation = 'claim' | 'complete' | 'completeInTransaction' | 'release' | 'extend';

// `clock_timestamp()`, not `now()`: inside an application's transaction `now()` is the time the
// transaction began, and a lock check must use the time of the statement.
export const ms = (param: string) => `clock_timestamp() + ${param}::float8 * interval '1 millisecond'`;

/**
 * Complete, release and extend of the row that `match` finds for key `$1` and token `$2` in `t`:
 * the same for both key classes.
 */
function ownedTexts(t: string, match: string): Omit<Record<KeyOperation, string>, 'claim'> {
  return {
    // Complete: while the token holds a live lock; again for a row this token completed already,
    // while that completion lasts (once its TTL ran out the id is forgotten, even before clean-up
    // deletes the row, as in every other store).
    complete: `UPDATE ${t} SET completed = true, expires_at = CASE WHEN completed THEN expires_at ELSE ${ms('$3')} END
WHERE ${match} AND token = $2 AND expires_at > clock_timestamp()
RETURNING 1`,
    // In a transaction: only a live lock, never a completed row, so a second transaction for one
    // claim rolls back instead of committing a second effect.
    completeInTransaction: `UPDATE ${t} SET completed = true, expires_at = ${ms('$3')}
WHERE ${match} AND token = $2 AND NOT completed AND expires_at > clock_timestamp()
RETURNING 1`,
    release: `DELETE FROM ${t} WHERE ${match} AND token = $2 AND NOT completed AND expires_at > clock_timestamp() RETURNING 1`,
    extend: `UPDATE ${t} SET expires_at = ${ms('$3')}
WHERE ${match} AND token = $2 AND NOT completed AND expires_at > clock_timestamp()
RETURNING 1`,
  };
}

/**
 * The unsigned statements: the table has `buckets × ways` slots, and an id goes to a slot of its
 * bucket, computed on the server from the key, so every instance agrees on it whatever its version
 * of the package. The key is unique too, so the other operations find their row by key.
 */
export function unsignedTexts(u: string, unsignedMax: number): Record<KeyOperation, string> {
  const { buckets, ways } = unsignedBuckets(unsignedMax);
  const first = `((hashtextextended($1, 0) % ${buckets} + ${buckets}) % ${buckets})::int * ${ways}`;
  return {
    // As the signed claim when the id has a row. Otherwise into a slot of its bucket: a free one,
    // else an expired one, else the completion that expires first (that unsigned id is forgotten
    // early); a bucket full of live claims has no target (room = false), and the claim is refused.
    // Two claims of one id racing for two slots: the second breaks the key's uniqueness (23505),
    // read as `processing`; two ids racing for one slot: the second finds it taken (room = true,
    // not acquired) and tries again.
    claim: `WITH own AS (
  SELECT slot, completed, expires_at FROM ${u} WHERE key = $1
), target AS (
  SELECT s AS slot FROM generate_series(${first}, ${first} + ${ways - 1}) AS s LEFT JOIN ${u} ON ${u}.slot = s
  WHERE NOT EXISTS (SELECT 1 FROM own) AND (${u}.slot IS NULL OR ${u}.expires_at <= clock_timestamp() OR ${u}.completed)
  ORDER BY ${u}.slot IS NOT NULL, ${u}.expires_at <= clock_timestamp() DESC, ${u}.expires_at
  LIMIT 1
), claimed AS (
  INSERT INTO ${u} AS c (slot, key, token, completed, expires_at)
  SELECT coalesce((SELECT slot FROM own), (SELECT slot FROM target)), $1, $2, false, ${ms('$3')}
  WHERE EXISTS (SELECT 1 FROM own WHERE expires_at <= clock_timestamp()) OR EXISTS (SELECT 1 FROM target)
  ON CONFLICT (slot) DO UPDATE SET key = excluded.key, token = excluded.token, completed = false, expires_at = excluded.expires_at
  WHERE c.expires_at <= clock_timestamp() OR (c.completed AND c.key <> excluded.key)
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM claimed) AS acquired,
  EXISTS (SELECT 1 FROM own) AS own,
  EXISTS (SELECT 1 FROM target) AS room,
  (SELECT completed FROM own) AS completed,
  (SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 FROM own) AS left_ms`,
    ...ownedTexts(u, 'key = $1'),
  };
}

export function signedTexts(t: string): Record<KeyOperation | 'cleanup', string> {
  return {
    // One statement: look (snapshot), lock without waiting, then insert or take over
    // an expired row. `free` locks the row with SKIP LOCKED, so a row that another transaction
    // holds (an application transaction between its completion and its COMMIT, or a crashed
    // client's not yet rolled back) answers `processing` at once instead of waiting for it;
    // INSERT … ON CONFLICT DO UPDATE would lock, and so wait, even when its WHERE fails. `sweep`
    // (LIMIT 0 on most claims) deletes a few expired rows of other keys through the expires_at
    // index. Its bound is `(SELECT clock_timestamp())`, computed once: a volatile function
    // compared directly cannot bound an index scan, so `expires_at < clock_timestamp()` read the
    // whole index, every row a live one, on every sweep (3.9 ms at 50 000 rows, growing with the
    // table), where the sub-select's value bounds the scan.
    claim: `WITH seen AS (
  SELECT completed, expires_at FROM ${t} WHERE key = $1
), free AS (
  SELECT 1 FROM ${t} WHERE key = $1 FOR UPDATE SKIP LOCKED
), claimed AS (
  INSERT INTO ${t} AS c (key, token, completed, expires_at)
  SELECT $1, $2, false, ${ms('$3')}
  WHERE NOT EXISTS (SELECT 1 FROM seen) OR EXISTS (SELECT 1 FROM free)
  ON CONFLICT (key) DO UPDATE SET token = excluded.token, completed = false, expires_at = excluded.expires_at
  WHERE c.expires_at <= clock_timestamp()
  RETURNING 1
), sweep AS (
  DELETE FROM ${t} WHERE key IN (
    SELECT key FROM ${t} WHERE expires_at < (SELECT clock_timestamp()) AND key <> $1
    ORDER BY expires_at LIMIT $4::int FOR UPDATE SKIP LOCKED)
)
SELECT EXISTS (SELECT 1 FROM claimed) AS acquired,
  (SELECT completed FROM seen) AS completed,
  (SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 FROM seen) AS left_ms`,
    ...ownedTexts(t, 'key = $1'),
    cleanup: `WITH gone AS (
  DELETE FROM ${t} WHERE key IN (
    SELECT key FROM ${t} WHERE expires_at < (SELECT clock_timestamp()) ORDER BY expires_at LIMIT $1::int FOR UPDATE SKIP LOCKED)
  RETURNING 1
) SELECT count(*)::int AS deleted FROM gone`,
  };
}

/**
 * The SQL of ordered claims: a signed id's row and its entity's row, both in the claims table.
 */

import { ms } from './claims.sql.ts';

/**
 * Ordering: each operation one statement over a signed id's row and its entity's row,
 * both in the claims table.
 */
export function orderedTexts(t: string) {
  // Ordering: an entity's row (key `${namespace}:o:${entity}`) holds its highest completed
  // version (`version`, kept until `expires_at`) and its lock (`token`, `locked_until`). Its
  // `expires_at` is never before its lock's end, so clean-up never drops a live lock.
  // Completing: the id as `complete` does; in the same statement, only when the id was this
  // token's, the entity's version is raised (never lowered), kept ttlMs from now at least, and
  // the lock this token holds is freed.
  const completeOrdered = (inTransaction: boolean) => `WITH done AS (
  UPDATE ${t} SET completed = true, expires_at = ${inTransaction ? ms('$3') : `CASE WHEN completed THEN expires_at ELSE ${ms('$3')} END`}
  WHERE key = $1 AND token = $2 AND ${inTransaction ? 'NOT completed AND ' : ''}expires_at > clock_timestamp()
  RETURNING 1
), recorded AS (
  INSERT INTO ${t} AS c (key, token, completed, expires_at, version)
  SELECT $4, '', true, ${ms('$3')}, $5 WHERE EXISTS (SELECT 1 FROM done)
  ON CONFLICT (key) DO UPDATE SET
    version = CASE WHEN c.version IS NULL OR c.expires_at <= clock_timestamp() OR c.version < excluded.version COLLATE "C" THEN excluded.version ELSE c.version END,
    expires_at = greatest(c.expires_at, excluded.expires_at),
    token = CASE WHEN c.token = $2 THEN '' ELSE c.token END,
    locked_until = CASE WHEN c.token = $2 THEN NULL ELSE c.locked_until END
  RETURNING 1
)
SELECT 1 AS done FROM done`;
  return {
    // One statement, so versions are compared where the claim is made: the id as `claim` looks
    // at it, then, from the same snapshot, the entity's version: an older delivery is stale (its
    // id is inserted as completed for ttlMs). Exclusive, the entity's lock is taken by an upsert
    // whose WHERE is evaluated on the row as it is once locked, so two deliveries of one entity
    // cannot both take it, and a version recorded meanwhile is seen; only then is the id
    // inserted. A stale verdict from the snapshot is final (versions never go down); a version
    // recorded after the snapshot makes the upsert fail, answered `busy` (the retry sees it).
    claimOrdered: `WITH seen AS (
  SELECT completed, expires_at FROM ${t} WHERE key = $1
), free AS (
  SELECT 1 FROM ${t} WHERE key = $1 FOR UPDATE SKIP LOCKED
), open AS (
  SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM seen) OR (EXISTS (SELECT 1 FROM free) AND (SELECT expires_at FROM seen) <= clock_timestamp())
), ent AS (
  SELECT version, locked_until FROM ${t} WHERE key = $5 AND expires_at > clock_timestamp()
), stale AS (
  SELECT 1 FROM ent WHERE version > $6::text COLLATE "C"
), locked AS (
  INSERT INTO ${t} AS c (key, token, completed, expires_at, locked_until)
  SELECT $5, $2, true, ${ms('$3')}, ${ms('$3')}
  WHERE $7::boolean AND EXISTS (SELECT 1 FROM open) AND NOT EXISTS (SELECT 1 FROM stale)
  ON CONFLICT (key) DO UPDATE SET token = excluded.token, locked_until = excluded.locked_until,
    version = CASE WHEN c.expires_at <= clock_timestamp() THEN NULL ELSE c.version END,
    expires_at = greatest(c.expires_at, excluded.expires_at)
  WHERE (c.locked_until IS NULL OR c.locked_until <= clock_timestamp())
    AND (c.version IS NULL OR c.expires_at <= clock_timestamp() OR c.version <= $6::text COLLATE "C")
  RETURNING 1
), claimed AS (
  INSERT INTO ${t} AS c (key, token, completed, expires_at)
  SELECT $1, $2, EXISTS (SELECT 1 FROM stale), CASE WHEN EXISTS (SELECT 1 FROM stale) THEN ${ms('$4')} ELSE ${ms('$3')} END
  WHERE EXISTS (SELECT 1 FROM open) AND (EXISTS (SELECT 1 FROM stale) OR NOT $7::boolean OR EXISTS (SELECT 1 FROM locked))
  ON CONFLICT (key) DO UPDATE SET token = excluded.token, completed = excluded.completed, expires_at = excluded.expires_at
  WHERE c.expires_at <= clock_timestamp()
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM claimed) AS acquired,
  EXISTS (SELECT 1 FROM stale) AS stale,
  (SELECT completed FROM seen) AS completed,
  (SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 FROM seen) AS left_ms,
  (SELECT ceil(extract(epoch FROM locked_until - clock_timestamp()) * 1000)::float8 FROM ent WHERE locked_until > clock_timestamp()) AS busy_ms`,
    completeOrdered: completeOrdered(false),
    completeOrderedInTransaction: completeOrdered(true),
    releaseOrdered: `WITH unlocked AS (
  UPDATE ${t} SET token = '', locked_until = NULL WHERE key = $3 AND token = $2 RETURNING 1
), released AS (
  DELETE FROM ${t} WHERE key = $1 AND token = $2 AND NOT completed AND expires_at > clock_timestamp() RETURNING 1
)
SELECT 1 AS released FROM released`,
    // Both the id and (exclusive) the entity's lock, or neither.
    extendOrdered: `WITH ent AS (
  SELECT 1 FROM ${t} WHERE key = $4 AND token = $2 AND locked_until > clock_timestamp()
), id AS (
  UPDATE ${t} SET expires_at = ${ms('$3')}
  WHERE key = $1 AND token = $2 AND NOT completed AND expires_at > clock_timestamp() AND (NOT $5::boolean OR EXISTS (SELECT 1 FROM ent))
  RETURNING 1
), lock AS (
  UPDATE ${t} SET locked_until = ${ms('$3')}, expires_at = greatest(expires_at, ${ms('$3')})
  WHERE $5::boolean AND key = $4 AND token = $2 AND EXISTS (SELECT 1 FROM id)
  RETURNING 1
)
SELECT 1 AS owned FROM id`,
    forgetVersion: `UPDATE ${t} SET version = NULL WHERE key = $1`,
  };
}

/** The ordering operations, each one statement. */
export type OrderedOperation = keyof ReturnType<typeof orderedTexts>;

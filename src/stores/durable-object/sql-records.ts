/** The records of a SQLite-backed object: synchronous SQL, so a check and its write run uninterrupted. */

import type { SqlStorageLike } from './bindings.ts';
import type { Records } from './records.ts';

const TABLE = 'webhook_receiver_claims';
const ENTITIES = 'webhook_receiver_entities';

export function sqlRecords(sql: SqlStorageLike): Records {
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

/** The dead-letter shelf of the Cloudflare inbox's object: JSON records kept until their time, listed oldest first. */

import type { SqlStorageLike } from './bindings.ts';

/**
 * The shelf of the object that keeps the Cloudflare inbox's dead letters: JSON records by key, each
 * until its time, listed oldest first. Only on the SQLite backend, where a list is one query.
 */
export interface Shelf {
  put(key: string, value: string, time: number, until: number): void;
  get(key: string, time: number): string | undefined;
  /** Deletes a live record (only if its value is `value`, when given); answers whether it did. */
  delete(key: string, time: number, value?: string): boolean;
  list(limit: number, time: number): string[];
  /** Deletes records expired at `time`; answers the earliest `until` left, if any. */
  sweep(time: number): number | undefined;
  forget(): void;
}

const SHELF = 'webhook_receiver_shelf';

export function sqlShelf(sql: SqlStorageLike): Shelf {
  let ready = false;
  const table = () => {
    if (!ready) {
      sql.exec(`CREATE TABLE IF NOT EXISTS ${SHELF} (key TEXT PRIMARY KEY, value TEXT NOT NULL, at INTEGER NOT NULL, expires_at INTEGER NOT NULL)`);
      sql.exec(`CREATE INDEX IF NOT EXISTS ${SHELF}_at ON ${SHELF} (at, key)`);
    }
    ready = true;
    return sql;
  };
  const get = (key: string, time: number): string | undefined => {
    const row = table().exec(`SELECT value FROM ${SHELF} WHERE key = ? AND expires_at > ?`, key, time).toArray()[0];
    return row === undefined ? undefined : String(row.value);
  };
  return {
    put(key, value, time, until) {
      table().exec(
        `INSERT INTO ${SHELF} (key, value, at, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, at = excluded.at, expires_at = excluded.expires_at`,
        key,
        value,
        time,
        until,
      );
    },
    get,
    delete(key, time, value) {
      // Synchronous storage: nothing runs between the read and the delete.
      const found = get(key, time);
      if (found === undefined || (value !== undefined && found !== value)) return false;
      table().exec(`DELETE FROM ${SHELF} WHERE key = ?`, key);
      return true;
    },
    list(limit, time) {
      return table()
        .exec(`SELECT value FROM ${SHELF} WHERE expires_at > ? ORDER BY at, key LIMIT ?`, time, limit)
        .toArray()
        .map((row) => String(row.value));
    },
    sweep(time) {
      // An object that never shelved anything has no table: nothing to create for the alarm.
      if (!ready && sql.exec(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?`, SHELF).toArray().length === 0) return undefined;
      table().exec(`DELETE FROM ${SHELF} WHERE expires_at <= ?`, time);
      const next = table().exec(`SELECT MIN(expires_at) AS next FROM ${SHELF}`).toArray()[0]?.next;
      return typeof next === 'number' ? next : undefined;
    },
    forget() {
      ready = false;
    },
  };
}

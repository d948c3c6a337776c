/** Which storage an object keeps its records in: SQL when its class is SQLite-backed, else the key-value API. */

import type { DurableObjectStorageLike, SqlStorageLike } from './bindings.ts';
import { keyValueRecords } from './key-value-records.ts';
import type { Records } from './records.ts';
import { sqlShelf, type Shelf } from './shelf.ts';
import { sqlRecords } from './sql-records.ts';

/** Where an object keeps its records, and its dead-letter shelf when it has SQL storage. */
export interface Backend {
  records: Records;
  shelf: Shelf | undefined;
}

/** The SQL storage when this object has one (a SQLite-backed class), else the key-value API. */
export function backendFor(storage: DurableObjectStorageLike): Backend {
  let sql: SqlStorageLike | undefined;
  try {
    sql = storage.sql;
    sql?.exec('SELECT 1');
  } catch (error) {
    // A class declared with `new_classes` rather than `new_sqlite_classes` (workerd words it
    // "SQL is not enabled…" or "…not backed by SQLite storage, so the SQL API is not available").
    // Any other failure is no reason to look for records elsewhere: it propagates, and the store
    // fails closed.
    if (!(error instanceof Error && /\bSQL(ite)?\b/i.test(error.message))) throw error;
    sql = undefined;
  }
  return sql !== undefined ? { records: sqlRecords(sql), shelf: sqlShelf(sql) } : { records: keyValueRecords(storage), shelf: undefined };
}

/**
 * The tables the Postgres store needs (what `setup()` runs and docs/postgres.md prints), and the
 * SQL names a table option gives them.
 */

import { describeValue } from '../internal.ts';
import { DEFAULT_POSTGRES_TABLE } from './options.ts';

/** `name` or `schema.name`, each part a plain identifier (quoted in SQL, so case is kept). */
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/;

/**
 * The SQL that {@link PostgresStore.setup} runs for a table name (what docs/postgres.md prints), for
 * teams that migrate by hand.
 *
 * @example
 * ```ts
 * import { setupSql } from 'webhook-receiver/postgres';
 * writeFileSync('migrations/042_webhook_claims.sql', setupSql('billing.webhook_claims').join(';\n') + ';\n');
 * ```
 */
export function setupSql(table: string = DEFAULT_POSTGRES_TABLE): string[] {
  const { qualified, indexName, unsigned } = tableNames(table);
  return [
    `CREATE TABLE IF NOT EXISTS ${qualified} (
  key          text        PRIMARY KEY,
  token        text        NOT NULL,
  completed    boolean     NOT NULL DEFAULT false,
  expires_at   timestamptz NOT NULL,
  version      text        COLLATE "C",
  locked_until timestamptz
)`,
    // Ordering (an entity's row: its highest version and its lock). Added to a table made before
    // ordering existed; nothing else reads these columns. Versions compare byte by byte ("C").
    `ALTER TABLE ${qualified} ADD COLUMN IF NOT EXISTS version text COLLATE "C", ADD COLUMN IF NOT EXISTS locked_until timestamptz`,

    // Clean-up reads expired rows oldest first through this index: bounded range scans, never a
    // full one.
    `CREATE INDEX IF NOT EXISTS ${indexName} ON ${qualified} (expires_at)`,
    // The unsigned budget: at most one row a slot, however many unsigned ids arrive.
    `CREATE TABLE IF NOT EXISTS ${unsigned} (
  slot       integer     PRIMARY KEY,
  key        text        NOT NULL UNIQUE,
  token      text        NOT NULL,
  completed  boolean     NOT NULL DEFAULT false,
  expires_at timestamptz NOT NULL
)`,
  ];
}

/** The SQL names of a table option: the claims table, its index, and the unsigned slots table. */
export function tableNames(table: string): { qualified: string; indexName: string; unsigned: string } {
  if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
    throw new TypeError(`postgresStore table must be a plain identifier or schema.identifier (letters, digits, _), got ${typeof table === 'string' ? JSON.stringify(table) : describeValue(table)}`);
  }
  const parts = table.split('.');
  const bare = parts[parts.length - 1]!;
  const unsignedBare = `${bare.slice(0, 63 - '_unsigned'.length)}_unsigned`;
  // Only a 63-character name ending in `_unsigned` would name itself.
  if (unsignedBare === bare) throw new TypeError(`postgresStore table ${JSON.stringify(table)} leaves no name for its unsigned table: use a shorter name`);
  const quoted = parts.map((part) => `"${part}"`);
  return {
    qualified: quoted.join('.'),
    indexName: `"${`${bare}_expires_at`.slice(0, 63)}"`,
    unsigned: [...quoted.slice(0, -1), `"${unsignedBare}"`].join('.'),
  };
}

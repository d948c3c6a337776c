/**
 * The Postgres store's SQL, on a real PostgreSQL: the DDL of the `.sql.ts` modules runs (twice,
 * as `setup()` does at every start) on a schema-qualified table, then every statement the store
 * sends is PREPAREd on the server (parsed, analysed, its parameters' types inferred, as `pg`'s named
 * statements are) and run once with the values the store binds, inside a transaction that is
 * rolled back. The store's own tests cover the statements again through the store; this file names
 * the statement that breaks.
 */

import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ms, signedTexts, unsignedTexts } from '../../src/stores/postgres/claims.sql.ts';
import { setupSql, tableNames } from '../../src/stores/postgres/ddl.sql.ts';
import { orderedTexts } from '../../src/stores/postgres/ordering.sql.ts';
import { statements, type Statement } from '../../src/stores/postgres/statements.ts';
import { connectPostgres, sharedPostgresUrl, uniqueTable, type PostgresClient } from '../support/postgres.ts';

const key = 'default:s:msg_one';
const unsignedKey = 'default:u:msg_two';
const entity = 'default:o:order-1';
const token = randomBytes(16).toString('hex');

/**
 * What the store binds to each statement, in its order (see the store's calls): a statement
 * without values here fails the test, so a new statement cannot go unchecked.
 */
const values: Record<string, unknown[]> = {
  'signed.claim': [key, token, 60_000, 64],
  'signed.complete': [key, token, 86_400_000],
  'signed.completeInTransaction': [key, token, 86_400_000],
  'signed.release': [key, token],
  'signed.extend': [key, token, 60_000],
  'unsigned.claim': [unsignedKey, token, 60_000],
  'unsigned.complete': [unsignedKey, token, 86_400_000],
  'unsigned.completeInTransaction': [unsignedKey, token, 86_400_000],
  'unsigned.release': [unsignedKey, token],
  'unsigned.extend': [unsignedKey, token, 60_000],
  'ordered.claimOrdered': [key, token, 60_000, 86_400_000, entity, 'v0002', true],
  'ordered.completeOrdered': [key, token, 86_400_000, entity, 'v0002'],
  'ordered.completeOrderedInTransaction': [key, token, 86_400_000, entity, 'v0002'],
  'ordered.releaseOrdered': [key, token, entity],
  'ordered.extendOrdered': [key, token, 60_000, entity, true],
  'ordered.forgetVersion': [entity],
  cleanup: [1000],
};

describe('the Postgres store\'s SQL modules', () => {
  it('name every statement after its operation and a hash of its text, one name a text', () => {
    const all = listed(statements('billing.claims', 10_000));
    expect(all.map(([name]) => name).sort()).toEqual(Object.keys(values).sort());
    for (const [name, statement] of all) expect(statement.name, name).toMatch(/^webhook_receiver_[A-Za-z]+(_unsigned)?_[0-9a-f]{8}$/);
    expect(new Set(all.map(([, statement]) => statement.name)).size).toBe(all.length);
    // Another table, other texts, other names: `pg` never sees one name with two texts.
    const other = listed(statements('billing.other', 10_000));
    for (const [index, [name, statement]] of other.entries()) expect(statement.name, name).not.toBe(all[index]![1].name);
  });

  it('read times from clock_timestamp(), never now() (which stops at the start of a transaction)', () => {
    const { qualified, unsigned } = tableNames('billing.claims');
    const texts = [...Object.values(signedTexts(qualified)), ...Object.values(unsignedTexts(unsigned, 10_000)), ...Object.values(orderedTexts(qualified))];
    for (const text of texts) expect(text).not.toMatch(/\bnow\(\)/);
    expect(ms('$3')).toBe("clock_timestamp() + $3::float8 * interval '1 millisecond'");
  });
});

describe.skipIf(sharedPostgresUrl === null)('the Postgres store\'s SQL on a real PostgreSQL', () => {
  let database: PostgresClient & { kind: 'pg' };
  let session: pg.PoolClient;
  const schema = uniqueTable('sql');
  const table = `${schema}.claims`;

  beforeAll(async () => {
    database = connectPostgres('pg', sharedPostgresUrl!, 2) as PostgresClient & { kind: 'pg' };
    await database.query(`CREATE SCHEMA "${schema}"`);
    session = await database.client.connect();
  });
  afterAll(async () => {
    session?.release();
    await database?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await database?.close();
  });

  it('the DDL creates both tables and the index, and runs again over them', async () => {
    for (let run = 0; run < 2; run++) {
      for (const statement of setupSql(table)) await session.query(statement);
    }
    const tables = await database.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, [schema]);
    expect(tables.map((row) => row['table_name'])).toEqual(['claims', 'claims_unsigned']);
    const indexes = await database.query(`SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`, [schema]);
    expect(indexes.map((row) => row['indexname'])).toEqual(['claims_expires_at', 'claims_pkey', 'claims_unsigned_key_key', 'claims_unsigned_pkey']);
  });

  it('every statement PREPAREs, then runs with the store\'s values in a rolled-back transaction', async () => {
    const all = listed(statements(table, 10_000));
    for (const [name, statement] of all) {
      try {
        await session.query(`PREPARE "${statement.name}" AS ${statement.text}`);
        const prepared = await session.query(`SELECT cardinality(parameter_types) AS parameters FROM pg_prepared_statements WHERE name = $1`, [statement.name]);
        expect(prepared.rows[0]?.['parameters'], name).toBe(values[name]!.length);
        await session.query(`DEALLOCATE "${statement.name}"`);
        await session.query('BEGIN');
        await session.query(statement.text, values[name]);
      } catch (error) {
        throw new Error(`${name} (${statement.name}) failed on PostgreSQL: ${(error as Error).message}`, { cause: error });
      } finally {
        await session.query('ROLLBACK');
      }
    }
    // Rolled back: nothing was left behind.
    expect(await database.query(`SELECT key FROM ${tableNames(table).qualified} UNION ALL SELECT key FROM ${tableNames(table).unsigned}`)).toEqual([]);
  });

  it('a fresh claim, run as the store runs it, is acquired, and the row holds the token', async () => {
    const { signed } = statements(table, 10_000);
    await session.query('BEGIN');
    try {
      const [row] = (await session.query(signed.claim.text, values['signed.claim'])).rows;
      expect(row).toEqual({ acquired: true, completed: null, left_ms: null });
      const held = await session.query(`SELECT token, completed FROM ${tableNames(table).qualified} WHERE key = $1`, [key]);
      expect(held.rows).toEqual([{ token, completed: false }]);
      expect((await session.query(signed.complete.text, values['signed.complete'])).rowCount).toBe(1);
    } finally {
      await session.query('ROLLBACK');
    }
  });
});

/** Every statement of a store, named `group.operation` (`cleanup` alone). */
function listed(all: ReturnType<typeof statements>): [string, Statement][] {
  return [
    ...Object.entries(all.signed).map(([operation, statement]): [string, Statement] => [`signed.${operation}`, statement]),
    ...Object.entries(all.unsigned).map(([operation, statement]): [string, Statement] => [`unsigned.${operation}`, statement]),
    ...Object.entries(all.ordered).map(([operation, statement]): [string, Statement] => [`ordered.${operation}`, statement]),
    ['cleanup', all.cleanup],
  ];
}

/**
 * Vitest global setup: one PostgreSQL server for the whole run.
 *
 * - `DATABASE_URL` set: the tests use that database (each test file in tables of its own).
 * - Otherwise, PostgreSQL's server programs installed: a throw-away cluster started here on a free
 *   loopback port, stopped at the end.
 * - Neither: the Postgres tests are skipped with a notice, except under CI, where that is a failure.
 * - Only the unit tier running: nothing is started (it needs no server).
 *
 * Tests read the outcome with `inject('postgresUrl')` (see ./postgres.ts).
 */

import type { TestProject } from 'vitest/node';
import { findPostgresBin, isCI, startPostgresServer, type PostgresServer } from './postgres-server.ts';
import { onlyUnitTier } from './tiers.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The shared PostgreSQL for tests, or `null` when there is none (the Postgres tests skip). */
    postgresUrl: string | null;
  }
}

let server: PostgresServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  if (onlyUnitTier(project)) {
    project.provide('postgresUrl', null);
    return;
  }
  const url = process.env.DATABASE_URL;
  if (url !== undefined && url !== '') {
    project.provide('postgresUrl', url);
    return;
  }
  if (findPostgresBin() === undefined) {
    const notice = 'PostgreSQL is not installed (no initdb/pg_ctl) and DATABASE_URL is unset, so the Postgres tests are SKIPPED';
    if (isCI()) throw new Error(`${notice}; CI is set, so this is a failure (install postgresql or set DATABASE_URL)`);
    console.warn(`\n  NOTICE: ${notice}.\n  Install postgresql or set DATABASE_URL=postgres://user@host:port/db to run them.\n`);
    project.provide('postgresUrl', null);
    return;
  }
  server = await startPostgresServer();
  project.provide('postgresUrl', server.url);
}

export async function teardown(): Promise<void> {
  await server?.close();
  server = undefined;
}

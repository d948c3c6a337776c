import { defineConfig } from 'vitest/config';
import { findPostgresBin } from './test/support/postgres-server.ts';
import { isCI, redisMissingUnderCI } from './test/support/redis-server.ts';

/**
 * Why the Postgres tests cannot run and must not be skipped (`CI` set, no `DATABASE_URL`, no
 * `initdb`/`pg_ctl`), or `undefined`.
 */
function postgresMissingUnderCI(): string | undefined {
  if ((process.env.DATABASE_URL ?? '') !== '' || !isCI() || findPostgresBin() !== undefined) return undefined;
  return 'PostgreSQL is missing: initdb and pg_ctl are not on the PATH (nor in /usr/lib/postgresql/*/bin) and DATABASE_URL is unset. CI is set, so the Postgres tests may not be skipped: install postgresql (apt-get install postgresql) or set DATABASE_URL=postgres://user@host:port/db';
}

// Checked here, as the config loads, so that this is the first line printed: from the global
// setup, vitest would print its banner and a misleading "No test files found" first.
for (const missing of [redisMissingUnderCI(), postgresMissingUnderCI()]) {
  if (missing !== undefined) {
    process.stderr.write(`${missing}\n`);
    process.exit(1);
  }
}

export default defineConfig({
  // tsconfig.json maps 'webhook-receiver/*' to the source entries: examples import the package by
  // name, as a user's app does, and their tests run without a build.
  resolve: { tsconfigPaths: true },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Two cores: keep parallel files modest so timing-sensitive servers stay responsive.
    maxWorkers: 2,
    // One shared redis-server (or REDIS_URL) and one PostgreSQL (or DATABASE_URL) for the run.
    globalSetup: ['test/support/redis-setup.ts', 'test/support/postgres-setup.ts'],
  },
});

import { defineConfig } from 'vitest/config';
import { redisMissingUnderCI } from './test/support/redis-server.ts';

// Checked here, as the config loads, so that this is the first line printed: from the global
// setup, vitest would print its banner and a misleading "No test files found" first.
const redisMissing = redisMissingUnderCI();
if (redisMissing !== undefined) {
  process.stderr.write(`${redisMissing}\n`);
  process.exit(1);
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

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

/**
 * The test tiers, as vitest projects (`vitest run --project unit`; `npm run test:unit`, `test:integration`,
 * `test:e2e`). A test file is in `unit` unless listed below:
 *
 * - `unit`: no servers and no child processes (an in-process HTTP listener on 127.0.0.1 is fine).
 *   It runs with no redis-server or PostgreSQL installed: run it while working.
 * - `integration`: real servers (Redis, PostgreSQL, dynalite, workerd through Miniflare, fauxqs), and
 *   the adapters through their frameworks over HTTP.
 * - `e2e`: the packed package, the runtimes, child processes (the CLI, crash and chaos runs), the
 *   benchmark smoke run.
 */
export const INTEGRATION = [
  // Every adapter through its real framework over real HTTP on 127.0.0.1, and the endpoint
  // battery against such servers: no outside server, but most of the suite's CPU.
  'test/adapters/**/*.test.ts',
  'test/testing/check.test.ts',
  'test/examples/aws-sqs.test.ts',
  'test/examples/cloudflare-worker.test.ts',
  'test/examples/lambda.test.ts',
  'test/inbox/accept.test.ts',
  'test/inbox/adapters.test.ts',
  'test/inbox/bullmq.test.ts',
  'test/inbox/cloudflare.test.ts',
  'test/inbox/nestjs.test.ts',
  'test/inbox/pg-boss.test.ts',
  'test/inbox/sqs.test.ts',
  'test/inbox/store-outage.test.ts',
  'test/inbox/tenants.test.ts',
  'test/limits/store-growth.test.ts',
  'test/observability/job-telemetry.test.ts',
  'test/observability/logging.test.ts',
  'test/receiver/exactly-once.test.ts',
  'test/receiver/idempotency.test.ts',
  'test/receiver/outage.test.ts',
  'test/relay/trigger-inbox.test.ts',
  'test/stores/contract.test.ts',
  'test/stores/durable-object.test.ts',
  'test/stores/dynamodb.test.ts',
  'test/stores/ordering.test.ts',
  'test/stores/postgres-sql.test.ts',
  'test/stores/postgres.test.ts',
  'test/stores/redis-scripts.test.ts',
  'test/stores/redis.test.ts',
  'test/stores/unsigned-budget.test.ts',
  'test/stores/upstash.test.ts',
];

export const E2E = [
  'test/bench/**/*.test.ts',
  'test/chaos/**/*.test.ts',
  'test/cli/check.test.ts',
  'test/cli/cli.test.ts',
  'test/cli/inbox.test.ts',
  'test/cli/replay.test.ts',
  // Each example also runs as its own script (under tsx, in a child process).
  'test/examples/demo.test.ts',
  'test/examples/express.test.ts',
  'test/examples/fastify.test.ts',
  'test/examples/hono-node.test.ts',
  'test/examples/koa.test.ts',
  'test/examples/nestjs.test.ts',
  'test/examples/nestjs-guide.test.ts',
  'test/examples/resolution.test.ts',
  'test/inbox/lifecycle.test.ts',
  'test/limits/secret-leak.test.ts',
  'test/lines/built-package.test.ts',
  'test/lines/node-lines.test.ts',
  'test/packaging/consumers.test.ts',
  'test/packaging/docs-programs.test.ts',
  'test/packaging/fresh-clone.test.ts',
  'test/packaging/instanceof.test.ts',
  'test/packaging/vitest-recipe.test.ts',
  'test/relay/cli.test.ts',
  'test/relay/pull-cli.test.ts',
  'test/relay/rotation.test.ts',
  'test/runtimes/**/*.test.ts',
  'test/stores/connection-loss.test.ts',
  'test/stores/crash.test.ts',
  'test/support/server-missing.test.ts',
  // Every TypeScript block of the README and the guides through the compiler, as a user's app:
  // a minute of CPU, the documentation checked as shipped.
  'test/types/readme-blocks.test.ts',
];

/** The projects named by `--project` on the command line (none: every project runs). */
function selectedProjects(argv: readonly string[]): string[] {
  return argv.flatMap((arg, index) => (arg === '--project' ? [argv[index + 1] ?? ''] : arg.startsWith('--project=') ? [arg.slice('--project='.length)] : []));
}

/** Whether this run may need the servers: any project but `unit` selected. */
const serversWanted = selectedProjects(process.argv).some((name) => name !== 'unit') || selectedProjects(process.argv).length === 0;

// Checked here, as the config loads, so that this is the first line printed: from the global
// setup, vitest would print its banner and a misleading "No test files found" first. The unit tier
// needs no server, so it runs (and passes) on a machine without them, CI or not.
for (const missing of serversWanted ? [redisMissingUnderCI(), postgresMissingUnderCI()] : []) {
  if (missing !== undefined) {
    process.stderr.write(`${missing}\n`);
    process.exit(1);
  }
}

/** Resolution, timeouts and workers: the same in every tier (and in the Node lines' smoke run). */
export const shared = {
  // tsconfig.json maps 'webhook-receiver/*' to the source entries: examples import the package by
  // name, as a user's app does, and their tests run without a build.
  resolve: { tsconfigPaths: true },
  test: { testTimeout: 20_000, hookTimeout: 30_000 },
};

/** What a whole run sets once, at its root (the tiers' projects do not repeat it); the Node lines' smoke run too. */
export const runWide = {
  // Two cores: keep parallel files modest so timing-sensitive servers stay responsive.
  maxWorkers: 2,
  // One shared redis-server (or REDIS_URL) and one PostgreSQL (or DATABASE_URL) for the run,
  // started once here for every project, and not at all when only the unit tier runs; and the
  // command line bundled once for the tests that start it (test/support/cli-entry.ts).
  globalSetup: ['test/support/redis-setup.ts', 'test/support/postgres-setup.ts', 'test/support/cli-setup.ts'],
};

export default defineConfig({
  ...shared,
  test: {
    ...runWide,
    projects: [
      { ...shared, test: { ...shared.test, name: 'unit', include: ['test/**/*.test.ts'], exclude: [...INTEGRATION, ...E2E] } },
      { ...shared, test: { ...shared.test, name: 'integration', include: INTEGRATION } },
      { ...shared, test: { ...shared.test, name: 'e2e', include: E2E } },
    ],
  },
});

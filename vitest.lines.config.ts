import { defineConfig } from 'vitest/config';
import { runWide, shared } from './vitest.config.ts';

/**
 * The smoke subset that `npm test` runs on Node 22 and 24 (test/lines/run.ts, issue 18): the
 * suites whose outcome depends on the Node that runs them. Type checks and package lint run once
 * on the machine's own Node; chaos, fuzzing, limits, examples, bench and the edge runtimes run
 * once, in the whole suite on Node 26.
 */
export const LINE_SMOKE = [
  // The core on both crypto paths: node:crypto (found through process.getBuiltinModule) and WebCrypto.
  'test/core/**/*.test.ts',
  // The receiver and the stores: memory, Redis through ioredis, node-redis and @upstash/redis
  // (over fetch), and DynamoDB through the AWS SDK on dynalite (the contract file runs it too).
  // The Durable Object store runs in workerd, not on the line: it runs once.
  'test/receiver/idempotency.test.ts',
  'test/receiver/options.test.ts',
  'test/receiver/exactly-once.test.ts',
  'test/stores/contract.test.ts',
  'test/stores/memory.test.ts',
  'test/stores/redis.test.ts',
  'test/stores/upstash.test.ts',
  'test/stores/dynamodb.test.ts',
  // Every adapter over real HTTP on 127.0.0.1 (node:http, undici's Request/Response, a client that
  // leaves), and the Lambda adapter with the DynamoDB store.
  'test/adapters/**/*.test.ts',
  // The command line starting and answering on the line (every command, its misuse and its help),
  // and the testing kit's receiver (node:http through process.getBuiltinModule). The CLI's
  // long-running suites (replay, check, inbox: a child process per case, against servers) run
  // once, in the whole suite: they tripled the smoke runs' time (about 170 s a line on a loaded
  // machine) through the same node:http and child-process paths that cli.test.ts runs on each line.
  'test/cli/cli.test.ts',
  'test/cli/connect.test.ts',
  'test/testing/receiver.test.ts',
  'test/testing/request.test.ts',
  // The built package imported from ESM and CommonJS, and what differs by line.
  'test/lines/built-package.test.ts',
  'test/lines/platform.test.ts',
];

export default defineConfig({
  ...shared,
  // Same resolution, timeouts, workers and shared servers as the full suite; fewer files, in one
  // project (the tiers do not matter here).
  test: { ...shared.test, ...runWide, include: LINE_SMOKE },
});

import { defineConfig } from 'tsdown';

const entry = {
  index: 'src/index.ts',
  redis: 'src/stores/redis.ts',
  cloudflare: 'src/cloudflare.ts',
  postgres: 'src/stores/postgres.ts',
  dynamodb: 'src/stores/dynamodb.ts',
  bullmq: 'src/inbox/bullmq.ts',
  'pg-boss': 'src/inbox/pg-boss.ts',
  sqs: 'src/inbox/sqs/index.ts',
  relay: 'src/relay/index.ts',
  testing: 'src/testing/index.ts',
  vitest: 'src/testing/vitest.ts',
  cli: 'src/cli/index.ts',
  express: 'adapters/express.ts',
  fastify: 'adapters/fastify.ts',
  hono: 'adapters/hono.ts',
  fetch: 'adapters/fetch.ts',
  lambda: 'adapters/lambda.ts',
  koa: 'adapters/koa.ts',
  nestjs: 'adapters/nestjs.ts',
};

export default defineConfig({
  entry,
  // vitest is ESM-only: `require('webhook-receiver/vitest')` gets a module that says so (and what
  // to use instead), with the same types as the ES module.
  format: { esm: {}, cjs: { entry: { ...entry, vitest: 'src/testing/vitest-require.ts' } } },
  platform: 'neutral',
  target: 'es2022',
  dts: true,
  sourcemap: false,
  clean: true,
  treeshake: true,
  fixedExtension: true,
  // The bundler's interop helpers get a chunk of their own: left to itself it parks them in one
  // entry (fastify), and then every CommonJS chunk would load the Fastify adapter to reach them.
  outputOptions: {
    codeSplitting: { groups: [{ name: 'runtime', test: /rolldown[\\/]runtime/ }] },
  },
  // Frameworks, database clients (Redis, Postgres, the DynamoDB SDK), queue engines and Node
  // built-ins are the user's: never bundled.
  deps: { neverBundle: [/^node:/, 'express', 'fastify', 'fastify-plugin', 'hono', /^hono\//, 'koa', /^@nestjs\//, 'rxjs', /^rxjs\//, 'vitest', 'ioredis', 'redis', 'pg', 'postgres', /^@aws-sdk\//, 'bullmq', 'pg-boss'] },
});

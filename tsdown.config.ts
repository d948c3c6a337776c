import { defineConfig } from 'tsdown';
import { buildEntries } from './entry-points.ts';

export default defineConfig({
  // One list of entry points (entry-points.ts); a CommonJS build may come from a source of its own.
  entry: buildEntries('esm'),
  format: { esm: {}, cjs: { entry: buildEntries('cjs') } },
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

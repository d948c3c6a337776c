import { existsSync } from 'node:fs';
import { defineConfig } from 'tsdown';

export default defineConfig({
  // TEMPORARY while the entry points are being written: build the ones that exist.
  entry: Object.fromEntries(Object.entries({
    index: 'src/index.ts',
    redis: 'src/stores/redis.ts',
    testing: 'tools/testing.ts',
    vitest: 'tools/vitest.ts',
    cli: 'tools/cli.ts',
    express: 'adapters/express.ts',
    fastify: 'adapters/fastify.ts',
    hono: 'adapters/hono.ts',
    fetch: 'adapters/fetch.ts',
  }).filter(([, file]) => existsSync(file))),
  format: ['esm', 'cjs'],
  platform: 'neutral',
  target: 'es2022',
  dts: true,
  sourcemap: false,
  clean: true,
  treeshake: true,
  // Frameworks, Redis clients and Node built-ins are the user's: never bundled.
  fixedExtension: true,
  deps: { neverBundle: [/^node:/, 'express', 'fastify', 'fastify-plugin', 'hono', /^hono\//, 'lru-cache', 'vitest', 'ioredis', 'redis'] },
});

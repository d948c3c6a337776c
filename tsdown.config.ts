import { defineConfig } from 'tsdown';

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    redis: 'src/stores/redis.ts',
    testing: 'tools/testing.ts',
    vitest: 'tools/vitest.ts',
    cli: 'tools/cli.ts',
    express: 'adapters/express.ts',
    fastify: 'adapters/fastify.ts',
    hono: 'adapters/hono.ts',
    fetch: 'adapters/fetch.ts',
  },
  format: ['esm', 'cjs'],
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
  // Frameworks, Redis clients and Node built-ins are the user's: never bundled.
  deps: { neverBundle: [/^node:/, 'express', 'fastify', 'fastify-plugin', 'hono', /^hono\//, 'lru-cache', 'vitest', 'ioredis', 'redis'] },
});

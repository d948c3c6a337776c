// `npm run knip` (part of `npm test`): files, exports and dependencies nothing uses. The package's
// entry points (entry-points.ts) are its public API: their exports count as used.
import type { KnipConfig } from 'knip';
import { CLI, ENTRY_POINTS } from './entry-points.ts';

const config: KnipConfig = {
  entry: [
    ...[...ENTRY_POINTS, CLI].flatMap((entry) => (entry.require === undefined ? [entry.source] : [entry.source, entry.require])),
    'test/**/*.test.ts',
    'vitest.lines.config.ts',
    // Programs started by path: child processes, workers, runtime smoke scripts, benchmark parts.
    'test/**/*-child.ts',
    'test/**/*.worker.ts',
    'test/inbox/dying-worker.ts',
    'test/chaos/inbox-worker.ts',
    'test/chaos/trigger-puller.ts',
    'test/runtimes/smoke-*.ts',
    'bench/*-child.ts',
    'bench/http-server.ts',
    'bench/http-inbox.ts',
    'bench/hand-written-route.ts',
    'bench/telemetry.ts',
    'bench/before-after.ts',
    'bench/capacity-worker.ts',
    // Each example is an app of its own; the Workers guide's block is compiled as written.
    'examples/*.ts',
    'examples/aws-sqs/*.ts',
    'examples/nestjs/main.ts',
    'test/types/workers-readme.ts',
  ],
  project: ['src/**/*.ts', 'adapters/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'examples/**/*.{ts,tsx}', '*.ts'],
  ignoreDependencies: [
    // Loaded where knip cannot follow: through createRequire (dynalite, @koa/bodyparser), as a
    // runtime's binary (bun, deno, workerd) or inside a benchmark's child process (autocannon).
    'dynalite',
    '@koa/bodyparser',
    'bun',
    'deno',
    'workerd',
    'autocannon',
    // next through createRequire (the Pages Router test), react and react-dom as Next's own peers.
    'next',
    'react',
    'react-dom',
  ],
  // The benchmark report names the redis-server it ran against; it is a system package, not npm's.
  ignoreBinaries: ['redis-server'],
};

export default config;

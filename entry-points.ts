/**
 * The package's entry points, listed once. `tsdown.config.ts` builds from this list; `npm run
 * entry-points` writes package.json's `exports`, tsconfig.json's `paths` and typedoc.json's
 * `entryPoints` from it; `test/packaging/entry-points.test.ts` fails when any of them, or
 * tsconfig.core.json, disagrees with it (in either direction).
 *
 * Adding a subpath is one line here, then `npm run entry-points`.
 */

/** One `webhook-receiver/<name>` subpath. */
export interface EntryPoint {
  /** The subpath's name: `redis` is `webhook-receiver/redis` and `dist/redis.*`; `index` is the package itself. */
  readonly name: string;
  /** The source file it is built from. */
  readonly source: string;
  /**
   * Whether its code may use Node's types and built-ins. `false` puts it in tsconfig.core.json,
   * which compiles without Node's types, so `Buffer` or `process` cannot slip into code meant for
   * Workers, Deno and Bun.
   */
  readonly node: boolean;
  /** The source of the CommonJS build, where it differs from `source`. */
  readonly require?: string;
}

export const ENTRY_POINTS: readonly EntryPoint[] = [
  { name: 'index', source: 'src/index.ts', node: false },
  { name: 'redis', source: 'src/stores/redis.ts', node: false },
  { name: 'cloudflare', source: 'src/cloudflare.ts', node: false },
  { name: 'postgres', source: 'src/stores/postgres.ts', node: false },
  { name: 'dynamodb', source: 'src/stores/dynamodb.ts', node: false },
  { name: 'bullmq', source: 'src/inbox/bullmq.ts', node: false },
  { name: 'pg-boss', source: 'src/inbox/pg-boss.ts', node: false },
  { name: 'sqs', source: 'src/inbox/sqs/index.ts', node: false },
  { name: 'express', source: 'adapters/express.ts', node: true },
  { name: 'fastify', source: 'adapters/fastify.ts', node: true },
  { name: 'hono', source: 'adapters/hono.ts', node: false },
  { name: 'fetch', source: 'adapters/fetch.ts', node: false },
  { name: 'lambda', source: 'adapters/lambda.ts', node: true },
  { name: 'koa', source: 'adapters/koa.ts', node: true },
  { name: 'nestjs', source: 'adapters/nestjs.ts', node: true },
  { name: 'relay', source: 'src/relay/index.ts', node: false },
  // It re-exports the test receiver (node:http); every other module it re-exports is Node-free.
  { name: 'testing', source: 'src/testing/index.ts', node: true },
  // vitest is ESM-only: `require('webhook-receiver/vitest')` gets a module that says so (and what
  // to use instead), with the same types as the ES module.
  { name: 'vitest', source: 'src/testing/vitest.ts', node: false, require: 'src/testing/vitest-require.ts' },
];

/** The `webhook-receiver` command: built beside the entry points, reached through package.json's `bin`. */
export const CLI: EntryPoint = { name: 'cli', source: 'src/cli/index.ts', node: true };

/** The subpath in package.json's `exports`: `.` for the package itself, `./<name>` otherwise. */
export function subpathOf(entry: EntryPoint): string {
  return entry.name === 'index' ? '.' : `./${entry.name}`;
}

/** The module specifier an app imports: `webhook-receiver` or `webhook-receiver/<name>`. */
function specifierOf(entry: EntryPoint): string {
  return entry.name === 'index' ? 'webhook-receiver' : `webhook-receiver/${entry.name}`;
}

type Conditions = { readonly types: string; readonly default: string };

/** package.json's `exports`, as derived from the list. */
export function packageExports(): Record<string, { import: Conditions; require: Conditions } | string> {
  const exports: Record<string, { import: Conditions; require: Conditions } | string> = {};
  for (const entry of ENTRY_POINTS) {
    exports[subpathOf(entry)] = {
      import: { types: `./dist/${entry.name}.d.mts`, default: `./dist/${entry.name}.mjs` },
      require: { types: `./dist/${entry.name}.d.cts`, default: `./dist/${entry.name}.cjs` },
    };
  }
  exports['./package.json'] = './package.json';
  return exports;
}

/** tsconfig.json's `paths`: the package's own name resolves to the source entries. */
export function tsconfigPaths(): Record<string, string[]> {
  return Object.fromEntries(ENTRY_POINTS.map((entry) => [specifierOf(entry), [`./${entry.source}`]]));
}

/** typedoc.json's `entryPoints`: one page per subpath (the CLI has no API; docs/cli.md documents it). */
export function typedocEntryPoints(): string[] {
  return ENTRY_POINTS.map((entry) => entry.source);
}

/** tsdown's entries for one format: dist file name to source. */
export function buildEntries(format: 'esm' | 'cjs'): Record<string, string> {
  const entries = Object.fromEntries(ENTRY_POINTS.map((entry) => [entry.name, format === 'cjs' ? (entry.require ?? entry.source) : entry.source]));
  return { ...entries, [CLI.name]: CLI.source };
}

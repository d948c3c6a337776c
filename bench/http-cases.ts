/** The cells of the HTTP section: shared by the orchestrator and the server it starts. */

export const FRAMEWORKS = ['express', 'fastify', 'hono', 'node:http', 'koa', 'nestjs-express', 'nestjs-fastify'] as const;
export type Framework = (typeof FRAMEWORKS)[number];

/**
 * - none: the body parsed, nothing verified (the ceiling);
 * - inline: the hand-written `node:crypto` check (fixtures.ts);
 * - standardwebhooks: the `standardwebhooks` package's `verify`, inline;
 * - adapter: this package's adapter, verification and the memory store on.
 */
export const VARIANTS = ['none', 'inline', 'standardwebhooks', 'adapter'] as const;
export type Variant = (typeof VARIANTS)[number];

export const WEBHOOK_PATH = '/webhooks';

/**
 * The frameworks with targets of their own (all four variants); the others (Koa, NestJS on each
 * platform) are measured against their own hand-written inline check only.
 */
export const TARGETED: readonly Framework[] = ['express', 'fastify', 'hono', 'node:http'];

/** The variants measured for `framework`. */
export function variantsOf(framework: Framework): readonly Variant[] {
  return TARGETED.includes(framework) ? VARIANTS : ['inline', 'adapter'];
}

/**
 * The frameworks to measure: all, or those named in BENCH_HTTP_FRAMEWORKS (comma-separated), to
 * measure a few rows without the rest.
 */
export function selectedFrameworks(env: string | undefined): readonly Framework[] {
  if (env === undefined || env === '') return FRAMEWORKS;
  const names = env.split(',').map((name) => name.trim());
  for (const name of names) if (!(FRAMEWORKS as readonly string[]).includes(name)) throw new TypeError(`BENCH_HTTP_FRAMEWORKS: unknown framework ${JSON.stringify(name)} (${FRAMEWORKS.join(', ')})`);
  return FRAMEWORKS.filter((framework) => names.includes(framework));
}

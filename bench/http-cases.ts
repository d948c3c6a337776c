/** The cells of the HTTP section: shared by the orchestrator and the server it starts. */

export const FRAMEWORKS = ['express', 'fastify', 'hono', 'node:http'] as const;
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

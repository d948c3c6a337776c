/** The cells of the HTTP section: shared by the orchestrator and the server it starts. */

export const FRAMEWORKS = ['express', 'fastify', 'hono', 'node:http', 'koa', 'nestjs-express', 'nestjs-fastify'] as const;
export type Framework = (typeof FRAMEWORKS)[number];

/**
 * - none: the body parsed, nothing verified (the ceiling);
 * - inline: the hand-written `node:crypto` check (fixtures.ts);
 * - standardwebhooks: the `standardwebhooks` package's `verify`, inline;
 * - verify: this package's adapter with `idempotency: false`, verification only: compared with
 *   `inline` (like with like);
 * - inline-store: the hand-written check plus the bare store operations (bare-map.ts: claim the id
 *   in a bounded Map, mark it done after the handler): the floor `adapter` is compared with;
 * - adapter: this package's adapter, verification and the memory store on;
 * - fetch: Hono only: this package's Fetch handler (`webhook-receiver/fetch`, memory store) served
 *   by `@hono/node-server` with no Hono app in between, against the Hono adapter on the same
 *   server (the Fetch path on Node).
 */
export const VARIANTS = ['none', 'inline', 'standardwebhooks', 'verify', 'inline-store', 'adapter', 'fetch'] as const;
export type Variant = (typeof VARIANTS)[number];

export const WEBHOOK_PATH = '/webhooks';

/**
 * The frameworks with targets of their own (every variant); the others (Koa, NestJS on each
 * platform) are measured, verification only, against their own hand-written inline check.
 */
export const TARGETED: readonly Framework[] = ['express', 'fastify', 'hono', 'node:http'];

/** The variants measured for `framework`. */
export function variantsOf(framework: Framework): readonly Variant[] {
  if (framework === 'hono') return VARIANTS;
  return TARGETED.includes(framework) ? VARIANTS.filter((variant) => variant !== 'fetch') : ['inline', 'verify'];
}

/**
 * The shared stores measured behind the Fastify adapter (section 10): the Redis store on
 * ioredis (with `enableAutoPipelining`) and on node-redis (default client); the Postgres store on
 * a `pg` Pool. Each is also served by the hand-written route sending the same store commands bare
 * (like with like).
 */
export const SHARED_STORES = ['ioredis', 'node-redis', 'postgres'] as const;
export type SharedStoreKind = (typeof SHARED_STORES)[number];

/** The stores of section 10: the memory store (the adapter's default) beside the shared ones. */
export const STORES = ['memory', ...SHARED_STORES] as const;
export type StoreKind = (typeof STORES)[number];

/** The argument that makes http-server.ts serve the Fastify adapter with a store: `store <kind>`. */
export const STORE_MODE = 'store';

/**
 * The argument that makes http-server.ts serve the hand-written route with a shared store's
 * commands sent bare (hand-written-route.ts): `store-inline <kind>`.
 */
export const STORE_INLINE_MODE = 'store-inline';

/**
 * The servers of the inbox section: the Fastify adapter accepting into BullMQ (Redis
 * store), into pg-boss (Postgres store) and into SQS (Redis store), each beside a hand-written
 * route doing the same work (http-inbox.ts). The synchronous mode they are shown beside is section
 * 10's `store` servers. `sqs-dynamodb` (the adapter accepting into SQS with the DynamoDB store) is
 * the capacity section's shape, not the inbox section's.
 */
export const INBOX_CELLS = ['bullmq', 'bullmq-inline', 'pg-boss', 'pg-boss-inline', 'sqs', 'sqs-inline', 'sqs-dynamodb'] as const;
export type InboxCell = (typeof INBOX_CELLS)[number];

/** The argument that makes http-server.ts serve an inbox cell: `inbox <cell>`. */
export const INBOX_MODE = 'inbox';

/** Connections of the stores section (the figure its targets are set at: Fastify, 16 connections). */
export const STORE_CONNECTIONS = 16;

/** Connections of the `pg` Pool behind the Postgres-store server. */
export const POSTGRES_POOL_SIZE = 16;

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

/**
 * One server of the HTTP section, in its own process: a framework with one way of handling a
 * webhook, on 127.0.0.1 at a port the OS picks. Started by bench/http.ts with an IPC channel:
 * it sends `{ port }` when it listens, answers `{ type: 'stats' }` with how many events its
 * handler processed and the CPU time it has used, `{ type: 'ids' }` with the ids it processed (a
 * store cell with `BENCH_RECORD_IDS` set), `{ type: 'usage' }` with what it asked of DynamoDB and
 * SQS so far (the `sqs-dynamodb` cell; aws-usage.ts), `{ type: 'profile' }` by starting or
 * stopping V8's CPU profiler (profile.ts), and exits when the channel closes.
 *
 *   http-server.ts <framework> <variant>
 *   variants: none (no verification), inline (hand-written node:crypto check),
 *             standardwebhooks (inline library check), verify (this package, `idempotency: false`),
 *             inline-store (the hand-written check plus a bare bounded Map of ids),
 *             adapter (this package, memory store);
 *             Hono also: fetch (this package's Fetch handler on @hono/node-server, no Hono app);
 *             Koa and NestJS (on Express and on Fastify): inline and verify only
 *   http-server.ts store <memory|ioredis|node-redis|postgres>
 *             the Fastify adapter with that store (section 10); the Redis server's URL arrives
 *             in BENCH_REDIS_URL, the Postgres server's in BENCH_POSTGRES_URL
 *   http-server.ts store-inline <ioredis|node-redis|postgres>
 *             the hand-written route on the same Fastify doing the same work: the hand-written
 *             check, that store's own commands sent bare around the handler (section 10,
 *             hand-written-route.ts)
 *   http-server.ts inbox <bullmq|bullmq-inline|pg-boss|pg-boss-inline|sqs|sqs-inline|sqs-dynamodb>
 *             the Fastify adapter accepting into an inbox, or the hand-written route doing the
 *             same work (the inbox section, http-inbox.ts): it answers 202, its processed events
 *             are the jobs in its queue, and `{ type: 'reset' }` empties the queue; SQS's endpoint
 *             arrives in BENCH_SQS_URL, and the DynamoDB store's (sqs-dynamodb) in
 *             BENCH_DYNAMODB_URL
 *
 * Every variant but the inbox cells ends the same way: the handler gets the parsed JSON event,
 * counts it, and answers 204. The secret arrives in the environment (BENCH_SECRET), and so does the directory of
 * the built package whose adapters are measured (BENCH_BUILD).
 */

const buildDir = process.env.BENCH_BUILD;
if (buildDir === undefined) throw new Error('BENCH_BUILD must name the directory of the built package');
const build: string = buildDir;
// Each cell loads only its own framework, adapter and client (below, where it is built): a server
// child loading all of them took about 0.85 s more to start, and a run starts dozens.
const { DEFAULT_MEMORY_STORE_MAX } = await importBuilt<typeof import('../src/index.ts')>(build, 'index');

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Session } from 'node:inspector/promises';
import type { AddressInfo } from 'node:net';
import type { Type } from '@nestjs/common';
import type { Response as ExpressResponse } from 'express';
import type { Pool } from 'pg';
import type { NodeRedisClientLike, RedisClientLike } from '../src/stores/redis.ts';
import type { IdempotencyStore } from '../src/stores/types.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { BareIdMap } from './bare-map.ts';
import { barePostgresDelivery, bareRedisDelivery } from './bare-store.ts';
import { localConfig } from '../test/support/dynamodb.ts';
import { importBuilt } from './build.ts';
import { handWrittenVerify, hmacKey, type HmacKey } from './fixtures.ts';
import { handWrittenRoute, LOCK_MS, TTL_MS } from './hand-written-route.ts';
import {
  FRAMEWORKS,
  INBOX_CELLS,
  INBOX_MODE,
  POSTGRES_POOL_SIZE,
  SHARED_STORES,
  STORE_INLINE_MODE,
  STORE_MODE,
  STORES,
  VARIANTS,
  WEBHOOK_PATH as PATH,
  type Framework,
  type InboxCell,
  type SharedStoreKind,
  type StoreKind,
  type Variant,
} from './http-cases.ts';
import type { AwsUsage } from './aws-usage.ts';
import type { StoreBackend } from './http-inbox.ts';

const UNAUTHORIZED = JSON.stringify({ error: 'SIGNATURE_MISMATCH', message: 'invalid signature' });

let processed = 0;
/**
 * The ids the store cell's handler processed, kept when `BENCH_RECORD_IDS` is set (the capacity
 * section's two receivers: each id must be processed by exactly one of them), else `undefined`.
 */
const processedIds: string[] | undefined = process.env.BENCH_RECORD_IDS ? [] : undefined;
/**
 * What the store's keys are named after: this process by default, so servers never share ids;
 * `BENCH_SHARED_KEYS` names a key space servers share (the capacity section's two receivers).
 */
const keySpace = process.env.BENCH_SHARED_KEYS ?? String(process.pid);

/** The bare store operations of the inline-store variant, bounded as the memory store is. */
let bareIds: BareIdMap | undefined;
const noop = () => {};

/**
 * The hand-written check of the inline variants; with `inline-store`, also the bare claim of the
 * id. Returns what completes the delivery after the handler, or `undefined` when refused.
 */
function inlineAccept(variant: Variant, headers: IncomingMessage['headers'], body: Buffer, key: HmacKey): (() => void) | undefined {
  if (!handWrittenVerify(headers, body, key)) return undefined;
  if (variant !== 'inline-store') return noop;
  const id = headers['webhook-id'] as string;
  bareIds ??= new BareIdMap(DEFAULT_MEMORY_STORE_MAX);
  if (!bareIds.claim(id)) throw new Error('a webhook-id came twice: the load generator sends fresh ids');
  const ids = bareIds;
  return () => ids.complete(id);
}

/** Our adapter's options: `verify` is verification only, `adapter` verification and the memory store. */
function ours(variant: Variant, secret: string): { secrets: string; idempotency?: false } {
  return variant === 'verify' ? { secrets: secret, idempotency: false } : { secrets: secret };
}

/** What every handler does with the event: check it is the fixture's, count it. */
function handled(event: unknown): void {
  if ((event as { type?: unknown } | null)?.type !== 'invoice.paid') throw new Error('the handler got an unexpected event');
  processed++;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}

async function expressApp(variant: Variant, secret: string, key: HmacKey): Promise<Server> {
  const { default: express } = await import('express');
  const { webhooks: expressWebhooks } = await importBuilt<typeof import('../adapters/express.ts')>(build, 'express');
  const { Webhook } = await import('standardwebhooks');
  const app = express();
  const standard = new Webhook(secret);
  const done = (res: ExpressResponse) => void res.sendStatus(204);
  if (variant === 'none') {
    app.post(PATH, express.json(), (req, res) => {
      handled(req.body);
      done(res);
    });
  } else if (variant === 'inline' || variant === 'inline-store') {
    app.post(PATH, express.raw({ type: 'application/json' }), (req, res) => {
      const body = req.body as Buffer;
      const complete = inlineAccept(variant, req.headers, body, key);
      if (complete === undefined) {
        res.status(401).type('json').send(UNAUTHORIZED);
        return;
      }
      handled(JSON.parse(body.toString('utf8')));
      complete();
      done(res);
    });
  } else if (variant === 'standardwebhooks') {
    app.post(PATH, express.raw({ type: 'application/json' }), (req, res) => {
      let event: unknown;
      try {
        event = standard.verify(req.body as Buffer, req.headers as Record<string, string>);
      } catch {
        res.status(401).type('json').send(UNAUTHORIZED);
        return;
      }
      handled(event);
      done(res);
    });
  } else {
    app.post(PATH, expressWebhooks(ours(variant, secret)), (req, res) => {
      handled(req.webhook!.json());
      done(res);
    });
  }
  return createServer(app);
}

async function fastifyApp(variant: Variant, secret: string, key: HmacKey): Promise<Server> {
  const { default: Fastify } = await import('fastify');
  const { webhooks: fastifyWebhooks } = await importBuilt<typeof import('../adapters/fastify.ts')>(build, 'fastify');
  const { Webhook } = await import('standardwebhooks');
  const app = Fastify({ logger: false });
  const standard = new Webhook(secret);
  if (variant === 'inline' || variant === 'inline-store' || variant === 'standardwebhooks') {
    // The raw bytes are needed to verify: the usual recipe replaces the JSON parser.
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  }
  if (variant === 'none') {
    app.post(PATH, async (request, reply) => {
      handled(request.body);
      return reply.code(204).send();
    });
  } else if (variant === 'inline' || variant === 'inline-store') {
    app.post(PATH, async (request, reply) => {
      const body = request.body as Buffer;
      const complete = inlineAccept(variant, request.headers, body, key);
      if (complete === undefined) return reply.code(401).type('application/json').send(UNAUTHORIZED);
      handled(JSON.parse(body.toString('utf8')));
      complete();
      return reply.code(204).send();
    });
  } else if (variant === 'standardwebhooks') {
    app.post(PATH, async (request, reply) => {
      let event: unknown;
      try {
        event = standard.verify(request.body as Buffer, request.headers as Record<string, string>);
      } catch {
        return reply.code(401).type('application/json').send(UNAUTHORIZED);
      }
      handled(event);
      return reply.code(204).send();
    });
  } else {
    await app.register(async (scope) => {
      await scope.register(fastifyWebhooks, ours(variant, secret));
      scope.post(PATH, async (request, reply) => {
        handled(request.body);
        return reply.code(204).send();
      });
    });
  }
  await app.ready();
  return app.server;
}

async function honoApp(variant: Variant, secret: string, key: HmacKey): Promise<Server> {
  const { Hono } = await import('hono');
  const { createAdaptorServer } = await import('@hono/node-server');
  const { webhooks: honoWebhooks } = await importBuilt<typeof import('../adapters/hono.ts')>(build, 'hono');
  const { webhookHandler } = await importBuilt<typeof import('../adapters/fetch.ts')>(build, 'fetch');
  const { Webhook } = await import('standardwebhooks');
  const app = new Hono();
  const standard = new Webhook(secret);
  const unauthorized = () => new Response(UNAUTHORIZED, { status: 401, headers: { 'content-type': 'application/json' } });
  if (variant === 'none') {
    app.post(PATH, async (c) => {
      handled(await c.req.json());
      return c.body(null, 204);
    });
  } else if (variant === 'inline' || variant === 'inline-store') {
    app.post(PATH, async (c) => {
      const body = Buffer.from(await c.req.arrayBuffer());
      const headers = {
        'webhook-id': c.req.header('webhook-id'),
        'webhook-timestamp': c.req.header('webhook-timestamp'),
        'webhook-signature': c.req.header('webhook-signature'),
      };
      const complete = inlineAccept(variant, headers, body, key);
      if (complete === undefined) return unauthorized();
      handled(JSON.parse(body.toString('utf8')));
      complete();
      return c.body(null, 204);
    });
  } else if (variant === 'standardwebhooks') {
    app.post(PATH, async (c) => {
      let event: unknown;
      try {
        event = standard.verify(await c.req.text(), c.req.header());
      } catch {
        return unauthorized();
      }
      handled(event);
      return c.body(null, 204);
    });
  } else if (variant === 'adapter' || variant === 'verify') {
    app.post(PATH, honoWebhooks(ours(variant, secret)), (c) => {
      handled(c.get('webhook').json());
      return c.body(null, 204);
    });
  } else {
    // The Fetch handler alone, as `serve({ fetch })` runs it (serve is createAdaptorServer and
    // listen): no Hono app, no routing; the handler's nothing is the 204. Passed as it is, as an
    // app would pass it, so it gets the Node bindings @hono/node-server hands a fetch function.
    const receive = webhookHandler({ secrets: secret }, (webhook) => {
      handled(webhook.json());
    });
    return createAdaptorServer({ fetch: receive }) as Server;
  }
  return createAdaptorServer({ fetch: app.fetch }) as Server;
}

async function nodeApp(variant: Variant, secret: string, key: HmacKey): Promise<Server> {
  // The Express middleware is what this package offers a plain node:http server.
  const { webhooks: expressWebhooks } = await importBuilt<typeof import('../adapters/express.ts')>(build, 'express');
  const { Webhook } = await import('standardwebhooks');
  const standard = new Webhook(secret);
  const done = (res: ServerResponse) => void res.writeHead(204).end();
  const unauthorized = (res: ServerResponse) => void res.writeHead(401, { 'content-type': 'application/json' }).end(UNAUTHORIZED);
  const fail = (res: ServerResponse) => void res.writeHead(500).end();
  if (variant === 'adapter' || variant === 'verify') {
    // The Express middleware is typed on Node's own request and response: it runs as is on a
    // plain node:http server, with `next` as the handler.
    const verify = expressWebhooks(ours(variant, secret));
    return createServer((req, res) => {
      verify(req, res, (error) => {
        if (error !== undefined) return fail(res);
        handled((req as IncomingMessage & { webhook: VerifiedWebhook }).webhook.json());
        done(res);
      });
    });
  }
  return createServer((req, res) => {
    readBody(req).then((body) => {
      let event: unknown;
      let complete = noop;
      if (variant === 'none') event = JSON.parse(body.toString('utf8'));
      else if (variant === 'inline' || variant === 'inline-store') {
        const accepted = inlineAccept(variant, req.headers, body, key);
        if (accepted === undefined) return unauthorized(res);
        complete = accepted;
        event = JSON.parse(body.toString('utf8'));
      } else {
        try {
          event = standard.verify(body, req.headers as Record<string, string>);
        } catch {
          return unauthorized(res);
        }
      }
      handled(event);
      complete();
      done(res);
    }, () => fail(res));
  });
}

async function koaApp(variant: Variant, secret: string, key: HmacKey): Promise<Server> {
  const { default: Koa } = await import('koa');
  const { webhooks: koaWebhooks } = await importBuilt<typeof import('../adapters/koa.ts')>(build, 'koa');
  const app = new Koa();
  if (variant === 'inline') {
    app.use(async (ctx) => {
      const body = await readBody(ctx.req);
      if (!handWrittenVerify(ctx.req.headers, body, key)) {
        ctx.status = 401;
        ctx.type = 'application/json';
        ctx.body = UNAUTHORIZED;
        return;
      }
      handled(JSON.parse(body.toString('utf8')));
      ctx.status = 204;
    });
  } else {
    app.use(koaWebhooks(ours(variant, secret)));
    app.use((ctx) => {
      handled((ctx.state as { webhook: VerifiedWebhook }).webhook.json());
      ctx.status = 204;
    });
  }
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- Koa's callback settles every error itself (ctx.onerror): its promise never rejects.
  return createServer(app.callback());
}

/** What the store server closes when the orchestrator hangs up. */
let closeStore: () => Promise<void> = async () => {};

/**
 * The store behind the adapter: the memory store (the adapter's default), or a shared store on a
 * client built here as an app would build it. ioredis gets `enableAutoPipelining: true`, the
 * setting its README recommends for throughput: commands issued in the same tick leave in one
 * socket write. node-redis needs nothing: its default client already writes a tick's commands
 * together. The `pg` Pool keeps idle connections (`idleTimeoutMillis: 0`): the bench pauses
 * between runs, where a server with steady traffic would not.
 */
async function storeOf(kind: StoreKind, build: string): Promise<IdempotencyStore | undefined> {
  return kind === 'memory' ? undefined : (await backendOf(kind, build)).store;
}

/**
 * A shared store and the client it runs on (the inbox cells put their queue on that client, the
 * hand-written routes send the store's commands on it).
 */
async function backendOf(kind: SharedStoreKind, build: string): Promise<Exclude<StoreBackend, { kind: 'dynamodb' }>> {
  if (kind === 'postgres') {
    const url = process.env.BENCH_POSTGRES_URL;
    if (url === undefined) throw new Error('BENCH_POSTGRES_URL must name the Postgres server');
    const { postgresStore, CLEANUP_EVERY } = await importBuilt<typeof import('../src/stores/postgres.ts')>(build, 'postgres');
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: url, max: POSTGRES_POOL_SIZE, idleTimeoutMillis: 0 });
    const makeStore = (client: Pool) => postgresStore({ client, table: `bench_http_claims_${keySpace}` });
    const store = makeStore(pool);
    await store.setup();
    closeStore = () => pool.end();
    return { kind, store, client: pool, makeStore, cycle: CLEANUP_EVERY };
  }
  const url = process.env.BENCH_REDIS_URL;
  if (url === undefined) throw new Error('BENCH_REDIS_URL must name the Redis server');
  const { redisStore } = await importBuilt<typeof import('../src/stores/redis.ts')>(build, 'redis');
  const makeStore = (client: RedisClientLike) => redisStore({ client, prefix: `bench-http:${keySpace}:` });
  if (kind === 'ioredis') {
    const { Redis } = await import('ioredis');
    const redis = new Redis(url, { lazyConnect: true, enableAutoPipelining: true });
    await redis.connect();
    closeStore = async () => redis.disconnect();
    return { kind, store: makeStore(redis), client: redis, makeStore };
  }
  const { createClient } = await import('redis');
  const redis = createClient({ url });
  redis.on('error', () => {});
  await redis.connect();
  closeStore = async () => redis.destroy();
  // node-redis' client types are generic over its modules and scripts: the store takes it by shape.
  const client = redis as unknown as NodeRedisClientLike;
  return { kind, store: makeStore(client), client, makeStore };
}

/**
 * The DynamoDB store on the local DynamoDB the capacity section starts (`BENCH_DYNAMODB_URL`), its
 * client counted (aws-usage.ts): the `sqs-dynamodb` cell's. One attempt per request (the store's
 * guide advises two in production): every request the store sends is then one the count sees, and
 * one that failed would fail the run.
 */
async function dynamoBackend(build: string): Promise<Extract<StoreBackend, { kind: 'dynamodb' }>> {
  const endpoint = process.env.BENCH_DYNAMODB_URL;
  if (endpoint === undefined) throw new Error('BENCH_DYNAMODB_URL must name the local DynamoDB');
  const { dynamoStore } = await importBuilt<typeof import('../src/stores/dynamodb.ts')>(build, 'dynamodb');
  const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
  const { meteredDynamo } = await import('./aws-usage.ts');
  const client = new DynamoDBClient({ ...localConfig(endpoint), maxAttempts: 1 });
  const metered = meteredDynamo(client);
  const store = dynamoStore({ client: metered.client, table: `bench-http-claims-${keySpace}` });
  await store.setup();
  closeStore = async () => client.destroy();
  return { kind: 'dynamodb', store, usage: metered.usage };
}

/** The Fastify adapter cell of section 4 (memory store) with the store of `kind`. */
async function fastifyStoreApp(kind: StoreKind, secret: string, build: string): Promise<Server> {
  const { default: Fastify } = await import('fastify');
  const { webhooks: fastifyWebhooks } = await importBuilt<typeof import('../adapters/fastify.ts')>(build, 'fastify');
  const store = await storeOf(kind, build);
  const app = Fastify({ logger: false });
  await app.register(async (scope) => {
    await scope.register(fastifyWebhooks, store === undefined ? { secrets: secret } : { secrets: secret, idempotency: { store } });
    scope.post(PATH, async (request, reply) => {
      handled(request.body);
      processedIds?.push(request.webhook!.id);
      return reply.code(204).send();
    });
  });
  await app.ready();
  return app.server;
}

/**
 * The hand-written route doing what the Fastify adapter with the store of `kind` does (section 10,
 * like with like): the hand-written check, the store's own claim sent bare on the same client, the
 * handler's work (parse the event, count it), the store's own completion sent bare, 204.
 */
async function fastifyStoreInlineApp(kind: SharedStoreKind, key: HmacKey, build: string): Promise<Server> {
  const backend = await backendOf(kind, build);
  const bare =
    backend.kind === 'postgres'
      ? await barePostgresDelivery(backend.client, backend.makeStore, LOCK_MS, TTL_MS, backend.cycle)
      : await bareRedisDelivery(backend.client, backend.makeStore, LOCK_MS, TTL_MS);
  const app = handWrittenRoute(key, bare, (_storeKey, _headers, body) => handled(JSON.parse(body.toString('utf8'))), { status: 204 });
  await app.ready();
  return app.server;
}

/** Express's request and Fastify's both carry `rawBody` and `headers` with `rawBody: true`. */
interface NestRequest {
  rawBody?: Buffer;
  headers: IncomingMessage['headers'];
}

async function nestApp(platform: 'express' | 'fastify', variant: Variant, secret: string, key: HmacKey): Promise<Server> {
  const { Body, Controller, HttpCode, Module, Post, Req, Res, UseInterceptors } = await import('@nestjs/common');
  const { NestFactory } = await import('@nestjs/core');
  const nest = await importBuilt<typeof import('../adapters/nestjs.ts')>(build, 'nestjs');
  const adapter = platform === 'express' ? new (await import('@nestjs/platform-express')).ExpressAdapter() : new (await import('@nestjs/platform-fastify')).FastifyAdapter();
  let controller: Type;
  if (variant === 'inline') {
    @Controller()
    class Inline {
      @Post(PATH)
      @HttpCode(204)
      hook(@Req() req: NestRequest, @Body() event: unknown, @Res({ passthrough: true }) res: { status(code: number): unknown }): string | undefined {
        if (req.rawBody === undefined || !handWrittenVerify(req.headers, req.rawBody, key)) {
          res.status(401);
          return UNAUTHORIZED;
        }
        handled(event);
        return undefined;
      }
    }
    controller = Inline;
  } else {
    @Controller()
    class Adapter {
      @Post(PATH)
      @HttpCode(204)
      @UseInterceptors(nest.WebhookInterceptor)
      hook(@Body() event: unknown): void {
        handled(event);
      }
    }
    controller = Adapter;
  }
  @Module({ imports: variant === 'inline' ? [] : [nest.WebhookReceiverModule.forRoot(ours(variant, secret))], controllers: [controller] })
  class BenchModule {}
  const app = await NestFactory.create(BenchModule, adapter, { rawBody: true, logger: false });
  await app.init();
  // Fastify routes only once it is ready; main() listens on its server directly.
  if (platform === 'fastify') await (app.getHttpAdapter().getInstance() as { ready(): Promise<unknown> }).ready();
  return app.getHttpServer() as Server;
}

/** The server of one cell of section 4: `framework` with one way of handling a webhook. */
async function frameworkApp(framework: Framework, variant: Variant, secret: string, key: HmacKey): Promise<Server> {
  switch (framework) {
    case 'express':
      return expressApp(variant, secret, key);
    case 'fastify':
      return fastifyApp(variant, secret, key);
    case 'hono':
      return honoApp(variant, secret, key);
    case 'koa':
      return koaApp(variant, secret, key);
    case 'nestjs-express':
    case 'nestjs-fastify':
      return nestApp(framework === 'nestjs-express' ? 'express' : 'fastify', variant, secret, key);
    case 'node:http':
      return nodeApp(variant, secret, key);
  }
}

/** How many events the server processed: its handlers' count, or the jobs in an inbox cell's queue. */
let processedCount: () => number | Promise<number> = () => processed;
/** What `{ type: 'reset' }` does: empties an inbox cell's queue. */
let reset: () => Promise<void> = async () => {};
/** What `{ type: 'usage' }` answers: the `sqs-dynamodb` cell's requests to DynamoDB and SQS. */
let awsUsage: (() => AwsUsage) | undefined;

/** An inbox cell: the adapter accepting into an engine, or the hand-written route doing the same (http-inbox.ts). */
async function inboxServer(cell: InboxCell, secret: string, key: HmacKey, build: string): Promise<Server> {
  const { inboxApp, storeKindOf } = await import('./http-inbox.ts');
  const kind = storeKindOf(cell);
  const backend = kind === 'dynamodb' ? await dynamoBackend(build) : await backendOf(kind, build);
  const app = await inboxApp(cell, build, secret, key, backend, process.env.BENCH_POSTGRES_URL);
  processedCount = () => app.jobs();
  reset = () => app.reset();
  awsUsage = app.usage;
  const storeClose = closeStore;
  closeStore = async () => {
    await app.close();
    await storeClose();
  };
  return app.server;
}

/** bench/profile.ts's requests: start sampling, or stop and send the profile. */
interface ProfileMessage {
  action: 'start' | 'stop';
  intervalMicros?: number;
}

let inspector: Session | undefined;

/** Starts V8's CPU profiler in this process (`undefined`), or stops it and returns its profile. */
async function profiler(message: ProfileMessage): Promise<object | undefined> {
  if (message.action === 'start') {
    inspector ??= new Session();
    inspector.connect();
    await inspector.post('Profiler.enable');
    await inspector.post('Profiler.setSamplingInterval', { interval: message.intervalMicros ?? 200 });
    await inspector.post('Profiler.start');
    return undefined;
  }
  if (inspector === undefined) throw new Error('the profiler was stopped before it was started');
  const { profile } = await inspector.post('Profiler.stop');
  inspector.disconnect();
  return profile;
}

async function main(): Promise<void> {
  const [framework, variant] = process.argv.slice(2) as [Framework | typeof STORE_MODE | typeof STORE_INLINE_MODE | typeof INBOX_MODE, Variant | StoreKind | InboxCell];
  const storeMode = framework === STORE_MODE && (STORES as readonly string[]).includes(variant);
  const storeInlineMode = framework === STORE_INLINE_MODE && (SHARED_STORES as readonly string[]).includes(variant);
  const inboxMode = framework === INBOX_MODE && (INBOX_CELLS as readonly string[]).includes(variant);
  if (!storeMode && !storeInlineMode && !inboxMode && (!(FRAMEWORKS as readonly string[]).includes(framework) || !(VARIANTS as readonly string[]).includes(variant))) {
    throw new Error(
      `usage: http-server.ts <${FRAMEWORKS.join('|')}> <${VARIANTS.join('|')}>, http-server.ts ${STORE_MODE} <${STORES.join('|')}>, ` +
        `http-server.ts ${STORE_INLINE_MODE} <${SHARED_STORES.join('|')}>, or http-server.ts ${INBOX_MODE} <${INBOX_CELLS.join('|')}>`,
    );
  }
  const secret = process.env.BENCH_SECRET;
  if (secret === undefined || !secret.startsWith('whsec_')) throw new Error('BENCH_SECRET must hold a whsec_ secret');
  // Keyed as the package keys (a KeyObject): a Buffer key is four times slower on Node 24.
  const key = hmacKey(Buffer.from(secret.slice('whsec_'.length), 'base64'));
  if (typeof process.send !== 'function') throw new Error('http-server.ts runs as a child with an IPC channel');

  const server = inboxMode
    ? await inboxServer(variant as InboxCell, secret, key, build!)
    : storeMode
      ? await fastifyStoreApp(variant as StoreKind, secret, build!)
      : storeInlineMode
        ? await fastifyStoreInlineApp(variant as SharedStoreKind, key, build!)
        : await frameworkApp(framework as Framework, variant as Variant, secret, key);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const failed = (error: unknown) => process.send!({ type: 'error', message: error instanceof Error ? error.stack : String(error) });
  process.on('message', (message: { type?: string }) => {
    if (message?.type === 'stats') {
      // The CPU time first: counting an inbox's jobs is a query, not part of the run measured.
      const cpu = process.cpuUsage();
      Promise.resolve(processedCount()).then((count) => process.send!({ type: 'stats', processed: count, cpuMicros: cpu.user + cpu.system }), failed);
    } else if (message?.type === 'ids') {
      process.send!({ type: 'ids', ids: processedIds ?? [] });
    } else if (message?.type === 'reset') {
      reset().then(() => process.send!({ type: 'reset' }), failed);
    } else if (message?.type === 'profile') {
      // bench/profile.ts: a CPU profile of the window between 'start' and 'stop', sampled every
      // `intervalMicros` by V8's own profiler (what `node --cpu-prof` writes), sent back whole.
      profiler(message as ProfileMessage).then((profile) => process.send!({ type: 'profile', profile }), failed);
    } else if (message?.type === 'usage') {
      if (awsUsage === undefined) failed(new Error('this server counts no AWS requests: only the sqs-dynamodb cell does'));
      else process.send!({ type: 'usage', usage: awsUsage() });
    }
  });
  process.once('disconnect', () => {
    // Exits whatever the close did: the orchestrator has gone and reads no answer.
    void closeStore().finally(() => process.exit(0));
  });
  process.send({ type: 'ready', port: (server.address() as AddressInfo).port });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

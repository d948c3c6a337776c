/**
 * The built package, installed from its tarball into a fresh project and imported the way a user
 * would: ESM `import`, CommonJS `require`, the subpath exports, the bin, and the published types
 * (the adapters' declaration merging and the vitest matchers), type-checked by this repository's
 * TypeScript. Runs after `npm run build` (the test command builds first).
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerProject, pinned, readmeDocsLinks, root, run as runIn, typeCheck as typeCheckIn } from './support.ts';

let project: string;

function run(command: string, args: string[], cwd = project): string {
  return runIn(command, args, cwd);
}

function typeCheck(config: string): { code: number; output: string } {
  return typeCheckIn(project, config);
}

/** A tsconfig as a consumer writes it for Node: nodenext resolution, strict, libraries checked too. */
function writeTsconfig(name: string, files: string[], types: string[]): void {
  const compilerOptions = { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: false, types };
  writeFileSync(join(project, name), JSON.stringify({ compilerOptions, files }, null, 2));
}

beforeAll(() => {
  // The frameworks (and vitest, and the type packages a TypeScript user adds) are the user's own:
  // install them beside the package, at the versions this repository tests with.
  project = consumerProject([
    pinned('hono'), pinned('express'), pinned('fastify'), pinned('vitest'), pinned('@types/express'), pinned('@types/node'),
    // The Lambda, Koa and NestJS subpaths: Koa and NestJS are the user's (Lambda needs nothing).
    pinned('koa'), pinned('@types/koa'), pinned('@koa/router'), pinned('@nestjs/common'), pinned('@nestjs/core'), pinned('rxjs'), pinned('reflect-metadata'),
  ]);
}, 400_000);

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

// tsc over the published types takes 30 to 60 s on a loaded two-core machine, and each test runs
// subprocesses: the limit fits that, not a quiet machine.
describe('the installed package', { timeout: 300_000 }, () => {
  it('works from an ESM consumer, through every subpath', () => {
    writeFileSync(
      join(project, 'consumer.mjs'),
      `
import { createVerifier, createReceiver, signWebhook, WebhookError, memoryStore } from 'webhook-receiver';
import { redisStore } from 'webhook-receiver/redis';
import { postgresStore, ClaimLostError } from 'webhook-receiver/postgres';
import { dynamoStore } from 'webhook-receiver/dynamodb';
import { webhookHandler } from 'webhook-receiver/fetch';
import { webhooks as honoWebhooks } from 'webhook-receiver/hono';
import { webhooks as expressWebhooks } from 'webhook-receiver/express';
import { webhooks as fastifyWebhooks } from 'webhook-receiver/fastify';
import { signedRequest, assertSignedWebhook } from 'webhook-receiver/testing';
import pkg from 'webhook-receiver/package.json' with { type: 'json' };

const secret = ${JSON.stringify(secret)};
const body = '{"type":"ping"}';
const signed = await signWebhook({ secret, body });
const webhook = await createVerifier({ secrets: secret }).verify({ headers: signed.headers, body });
let code;
try { await createVerifier({ secrets: secret }).verify({ headers: signed.headers, body: body + ' ' }); }
catch (error) { code = error instanceof WebhookError ? error.code : 'not a WebhookError'; }
const handler = webhookHandler({ secrets: secret, onRejected: () => {} }, (w) => Response.json({ id: w.id }));
const response = await handler(await signedRequest('http://127.0.0.1/hook', { secret, body }));
const asserted = await assertSignedWebhook(await signedRequest('http://127.0.0.1/hook', { secret, body }), { secrets: secret });
// The DynamoDB SDK is not installed here: the subpath loads, and a store says what it needs on first use.
const dynamo = await dynamoStore({ client: { send: async () => ({}) }, table: 'claims' }).claim('default:s:msg_1', 1000).catch((error) => error.message);
console.log(JSON.stringify({
  id: webhook.id === signed.id, scheme: webhook.scheme, code, status: response.status, asserted: asserted.signed,
  types: [typeof createReceiver, typeof memoryStore, typeof redisStore, typeof honoWebhooks, typeof expressWebhooks, typeof fastifyWebhooks],
  name: pkg.name,
  postgres: [typeof postgresStore, typeof ClaimLostError],
  dynamo,
}));
`,
    );
    expect(JSON.parse(run('node', ['consumer.mjs']))).toEqual({
      id: true,
      scheme: 'v1',
      code: 'SIGNATURE_MISMATCH',
      status: 200,
      asserted: true,
      types: ['function', 'function', 'function', 'function', 'function', 'function'],
      name: 'webhook-receiver',
      postgres: ['function', 'function'],
      dynamo: 'dynamoStore needs @aws-sdk/client-dynamodb (v3) installed beside the client it was given',
    });
  });

  it('works from a CommonJS consumer, through every subpath', () => {
    writeFileSync(
      join(project, 'consumer.cjs'),
      `
const { createVerifier, signWebhook, WebhookError, isWebhookError } = require('webhook-receiver');
const { redisStore } = require('webhook-receiver/redis');
const { postgresStore } = require('webhook-receiver/postgres');
const { dynamoStore } = require('webhook-receiver/dynamodb');
const { webhookHandler } = require('webhook-receiver/fetch');
const { webhooks: honoWebhooks } = require('webhook-receiver/hono');
const { webhooks: expressWebhooks } = require('webhook-receiver/express');
const { webhooks: fastifyWebhooks } = require('webhook-receiver/fastify');
const { signedRequest, webhookMatchers } = require('webhook-receiver/testing');
let vitestEntry;
try { require('webhook-receiver/vitest'); vitestEntry = 'loaded'; } catch (error) { vitestEntry = error.message; }
(async () => {
  const secret = ${JSON.stringify(secret)};
  const verifier = createVerifier({ secrets: secret, now: () => 1614265330000 });
  const webhook = await verifier.verify({
    headers: { 'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek', 'webhook-timestamp': '1614265330',
               'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=' },
    body: '{"test": 2432232314}',
  });
  const error = await verifier.verify({ headers: {}, body: '' }).catch((e) => e);
  const handler = webhookHandler({ secrets: secret, onRejected: () => {} }, () => undefined);
  const response = await handler(await signedRequest('http://127.0.0.1/hook', { secret, body: { a: 1 } }));
  console.log(JSON.stringify({
    json: webhook.json(), instance: error instanceof WebhookError, guard: isWebhookError(error), code: error.code,
    status: response.status, types: [typeof signWebhook, typeof redisStore, typeof honoWebhooks, typeof expressWebhooks, typeof fastifyWebhooks],
    matchers: Object.keys(webhookMatchers), vitestEntry, postgres: typeof postgresStore, dynamo: typeof dynamoStore,
  }));
})();
`,
    );
    expect(JSON.parse(run('node', ['consumer.cjs']))).toEqual({
      json: { test: 2432232314 },
      instance: true,
      guard: true,
      code: 'MISSING_ID',
      status: 204,
      types: ['function', 'function', 'function', 'function', 'function'],
      matchers: ['toBeSignedWebhook', 'toBeUnsignedWebhook', 'toConformToStandardWebhooks'],
      postgres: 'function',
      dynamo: 'function',
      // vitest is ESM-only: the CommonJS entry says so and points at the runner-neutral matchers.
      vitestEntry:
        "webhook-receiver/vitest cannot be loaded with require(): vitest is ESM-only. Import it from an ES module (vitest runs test and setup files as ES modules, " +
        "whatever the project's module setting), or with Jest and other runners register the matchers yourself: " +
        "const { webhookMatchers } = require('webhook-receiver/testing'); expect.extend(webhookMatchers);",
    });
  });

  it('types every adapter and the vitest matchers for a TypeScript consumer (nodenext, strict, libraries checked)', () => {
    writeFileSync(
      join(project, 'typed.mts'),
      `
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { expect } from 'vitest';
import type { VerifiedWebhook } from 'webhook-receiver';
import { webhooks as expressWebhooks } from 'webhook-receiver/express';
import { webhooks as fastifyWebhooks } from 'webhook-receiver/fastify';
import { webhookHandler } from 'webhook-receiver/fetch';
import { webhooks as honoWebhooks } from 'webhook-receiver/hono';
import { signedRequest } from 'webhook-receiver/testing';
import 'webhook-receiver/vitest';

const secrets = ${JSON.stringify(secret)};

const app = express();
app.post('/hook', expressWebhooks({ secrets }), (req, res) => {
  const webhook: VerifiedWebhook | undefined = req.webhook;
  const id: string = req.webhook!.id;
  // @ts-expect-error the verified webhook is typed, not any
  req.webhook!.notAField;
  res.json({ id, type: webhook?.json<{ type: string }>().type });
});

const fastify = Fastify();
await fastify.register(async (scope) => {
  await scope.register(fastifyWebhooks, { secrets });
  scope.post('/hook', async (request) => {
    const webhook: VerifiedWebhook | null | undefined = request.webhook;
    // @ts-expect-error null before verification, undefined outside the scope
    const sure: VerifiedWebhook = request.webhook;
    return { id: webhook?.id, sure };
  });
});

const hono = new Hono();
hono.post('/hook', honoWebhooks({ secrets }), (c) => {
  const webhook: VerifiedWebhook = c.get('webhook');
  return c.json({ id: webhook.id, scheme: webhook.scheme });
});

export const handler: (request: Request) => Promise<Response> = webhookHandler({ secrets }, (webhook) => Response.json({ id: webhook.id }));

const request: Request = await signedRequest('http://127.0.0.1/hook', { secret: secrets, body: { type: 'ping' } });
await expect(request).toBeSignedWebhook({ secrets });
await expect(request).not.toBeSignedWebhook({ secrets: [secrets], toleranceSeconds: 60 });
await expect(request).toBeUnsignedWebhook();
// @ts-expect-error the options (secrets) are required
await expect(request).toBeSignedWebhook();
`,
    );
    // A CommonJS file of the same project reaches the require condition's declarations.
    writeFileSync(
      join(project, 'typed.cts'),
      `
import { expect } from 'vitest';
import 'webhook-receiver/vitest';
export async function check(request: Request): Promise<void> {
  await expect(request).toBeSignedWebhook({ secrets: ${JSON.stringify(secret)} });
  await expect(request).toBeUnsignedWebhook();
}
`,
    );
    // vitest's globals: the test files import nothing from vitest, and the setup file only imports
    // the matchers. Here the augmentation has to bring vitest in by itself.
    writeFileSync(
      join(project, 'globals.mts'),
      `
import 'webhook-receiver/vitest';
export async function check(request: Request): Promise<void> {
  await expect(request).toBeSignedWebhook({ secrets: ${JSON.stringify(secret)} });
  await expect(request).not.toBeUnsignedWebhook();
}
`,
    );
    writeTsconfig('tsconfig.typed.json', ['typed.mts', 'typed.cts'], ['node']);
    writeTsconfig('tsconfig.globals.json', ['globals.mts'], ['node', 'vitest/globals']);
    expect(typeCheck('tsconfig.typed.json')).toEqual({ code: 0, output: '' });
    expect(typeCheck('tsconfig.globals.json')).toEqual({ code: 0, output: '' });
  });

  it('loads the Lambda, Koa and NestJS subpaths from ESM and CommonJS, and types them', () => {
    const consumer = (load: (name: string) => string) => `
const { webhookHandler } = ${load('webhook-receiver/lambda')};
const { webhooks } = ${load('webhook-receiver/koa')};
const { WebhookReceiverModule, WebhookInterceptor, Webhook, WebhookCtx, WEBHOOK_RECEIVER_OPTIONS } = ${load('webhook-receiver/nestjs')};
const { signWebhook } = ${load('webhook-receiver')};
const secret = ${JSON.stringify(secret)};
const body = '{"type":"ping"}';
(async () => {
  const signed = await signWebhook({ secret, body });
  const handler = webhookHandler({ secrets: secret }, () => ({ statusCode: 202, body: 'queued' }));
  const event = { version: '2.0', rawPath: '/hook', headers: signed.headers, body: Buffer.from(body).toString('base64'), isBase64Encoded: true,
                  requestContext: { http: { method: 'POST', path: '/hook' } } };
  const answer = await handler(event, { getRemainingTimeInMillis: () => 3000 });
  const dynamic = WebhookReceiverModule.forRoot({ secrets: secret });
  console.log(JSON.stringify({
    lambda: answer.statusCode, koa: typeof webhooks({ secrets: secret }), module: dynamic.module.name, token: WEBHOOK_RECEIVER_OPTIONS,
    nest: [typeof WebhookInterceptor, typeof Webhook(), typeof WebhookCtx()],
  }));
})();
`;
    writeFileSync(join(project, 'stacks.mjs'), consumer((name) => `await import('${name}')`));
    writeFileSync(join(project, 'stacks.cjs'), consumer((name) => `require('${name}')`));
    const expected = { lambda: 202, koa: 'function', module: 'WebhookReceiverModule', token: 'WEBHOOK_RECEIVER_OPTIONS', nest: ['function', 'function', 'function'] };
    expect(JSON.parse(run('node', ['stacks.mjs']))).toEqual(expected);
    // NestJS 12 is ESM-only: the CommonJS build requires it through Node's require(esm).
    expect(JSON.parse(run('node', ['stacks.cjs']))).toEqual(expected);

    writeFileSync(
      join(project, 'stacks-typed.mts'),
      `
import type { VerifiedWebhook } from 'webhook-receiver';
import { webhookHandler, type LambdaHttpResponse } from 'webhook-receiver/lambda';
import { webhooks, type KoaContextLike, type WebhookState } from 'webhook-receiver/koa';
import { WebhookReceiverModule, type WebhookReceiverOptions } from 'webhook-receiver/nestjs';

const secrets = ${JSON.stringify(secret)};
export const handler = webhookHandler({ secrets }, (webhook, context) => ({ statusCode: 200, body: webhook.id + context.lambda.getRemainingTimeInMillis() }));
export const answer: Promise<LambdaHttpResponse> = handler({ httpMethod: 'POST', path: '/', headers: {}, body: '' }, { getRemainingTimeInMillis: () => 1 });
export const verify: (ctx: KoaContextLike, next: () => Promise<unknown>) => Promise<void> = webhooks({ secrets });
export const route = (state: WebhookState): VerifiedWebhook => state.webhook;
const options: WebhookReceiverOptions = { secrets, isGlobal: true };
export const module = WebhookReceiverModule.forRoot(options);
`,
    );
    writeTsconfig('tsconfig.stacks.json', ['stacks-typed.mts'], ['node']);
    expect(typeCheck('tsconfig.stacks.json')).toEqual({ code: 0, output: '' });

    // Through Koa's own types and @koa/router's. Library checks off for this one file only:
    // @types/koa fails its own check against the types content-disposition ships (not ours,
    // which stacks-typed.mts checks above).
    writeFileSync(
      join(project, 'koa-typed.mts'),
      `
import Koa from 'koa';
import Router from '@koa/router';
import type { VerifiedWebhook } from 'webhook-receiver';
import { webhooks, type WebhookState } from 'webhook-receiver/koa';

const router = new Router<WebhookState>();
router.post('/hook', webhooks({ secrets: ${JSON.stringify(secret)} }), (ctx) => {
  const webhook: VerifiedWebhook = ctx.state.webhook;
  // @ts-expect-error the verified webhook is typed, not any
  ctx.body = { id: webhook.id, wrong: ctx.state.webhook.notAField };
});
new Koa().use(router.routes());
`,
    );
    const compilerOptions = { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: true, types: ['node'] };
    writeFileSync(join(project, 'tsconfig.koa.json'), JSON.stringify({ compilerOptions, files: ['koa-typed.mts'] }));
    expect(typeCheck('tsconfig.koa.json')).toEqual({ code: 0, output: '' });
  }, 180_000);

  it('fails type-checking on a wrong property, a misspelt matcher and a wrong option', () => {
    writeFileSync(
      join(project, 'wrong.mts'),
      `
import express from 'express';
import { Hono } from 'hono';
import { expect } from 'vitest';
import { webhooks as expressWebhooks } from 'webhook-receiver/express';
import { webhooks as honoWebhooks } from 'webhook-receiver/hono';
import 'webhook-receiver/vitest';

const secrets = ${JSON.stringify(secret)};
express().post('/hook', expressWebhooks({ secrets }), (req, res) => {
  res.json({ id: req.webhook!.webhookId });
});
new Hono().post('/hook', honoWebhooks({ secrets }), (c) => c.json({ id: c.get('webhook').messageId }));
export async function check(request: Request): Promise<void> {
  await expect(request).toBeSignedWebhok({ secrets });
  await expect(request).toBeSignedWebhook({ secret: secrets });
}
`,
    );
    writeTsconfig('tsconfig.wrong.json', ['wrong.mts'], ['node']);
    const { code, output } = typeCheck('tsconfig.wrong.json');
    expect(code).toBe(2);
    const errors = output.split('\n').filter((line) => line.startsWith('wrong.mts(')).map((line) => line.replace(/^(wrong\.mts\(\d+),\d+\): error (TS\d+):.*$/, '$1: $2'));
    expect(errors).toEqual(['wrong.mts(11: TS2339', 'wrong.mts(13: TS2339', 'wrong.mts(15: TS2551', 'wrong.mts(16: TS2561']);
    expect(output).toContain("Property 'webhookId' does not exist on type 'VerifiedWebhook'");
    expect(output).toContain("Property 'toBeSignedWebhok' does not exist on type 'Assertion<Request>'. Did you mean 'toBeSignedWebhook'?");
  });

  it('loads the Cloudflare store in Node (ESM and CommonJS), types it, and runs checkStore from the built package', () => {
    writeFileSync(
      join(project, 'cloudflare.mjs'),
      `
import { durableObjectStore, WebhookClaims } from 'webhook-receiver/cloudflare';
import { memoryStore } from 'webhook-receiver';
import { checkStore } from 'webhook-receiver/testing';
const report = await checkStore(({ now }) => memoryStore({ now }), { clock: 'manual' });
console.log(JSON.stringify({ store: typeof durableObjectStore, object: typeof WebhookClaims, passed: report.passed, failed: report.failed }));
`,
    );
    expect(JSON.parse(run('node', ['cloudflare.mjs']))).toEqual({ store: 'function', object: 'function', passed: 25, failed: 0 });
    writeFileSync(join(project, 'cloudflare.cjs'), `const { durableObjectStore, WebhookClaims } = require('webhook-receiver/cloudflare');\nconsole.log(typeof durableObjectStore, typeof WebhookClaims);`);
    expect(run('node', ['cloudflare.cjs']).trim()).toBe('function function');
    // The binding typed as @cloudflare/workers-types declares it (the parts that matter), without that package.
    writeFileSync(
      join(project, 'typed-cloudflare.mts'),
      `
import { durableObjectStore, WebhookClaims, type DurableObjectStore } from 'webhook-receiver/cloudflare';
import { checkStore, StoreConformanceError, type StoreConformanceReport } from 'webhook-receiver/testing';
interface DurableObjectId { toString(): string; equals(other: DurableObjectId): boolean }
interface DurableObjectStub { fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response>; readonly id: DurableObjectId }
interface DurableObjectNamespace { idFromName(name: string): DurableObjectId; idFromString(id: string): DurableObjectId; get(id: DurableObjectId, options?: { locationHint?: string }): DurableObjectStub }
declare const env: { WEBHOOK_CLAIMS: DurableObjectNamespace };
export { WebhookClaims };
export const store: DurableObjectStore = durableObjectStore(env.WEBHOOK_CLAIMS, { prefix: 'app:' });
export const report: Promise<StoreConformanceReport> = checkStore(() => store, { shared: true, skip: ['ttl'] });
export const failures = (error: unknown) => (error instanceof StoreConformanceError ? error.failures.map((f) => f.rule) : []);
// @ts-expect-error not a Durable Object namespace
durableObjectStore({ get: () => undefined });
`,
    );
    writeTsconfig('tsconfig.cloudflare.json', ['typed-cloudflare.mts'], ['node']);
    expect(typeCheck('tsconfig.cloudflare.json')).toEqual({ code: 0, output: '' });
  });

  it('installs the command-line tool', () => {
    const out = run('npx', ['--no-install', 'webhook-receiver', 'generate-secret']).trim();
    expect(out).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  });

  it('ships only the build and the docs', () => {
    const files = run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], root);
    const listed = (JSON.parse(files) as [{ files: { path: string }[] }])[0].files.map((f) => f.path);
    expect(listed.filter((path) => !path.startsWith('dist/') && !path.startsWith('docs/')).sort()).toEqual(['LICENSE', 'README.md', 'SECURITY.md', 'package.json']);
    expect(listed.some((path) => path.startsWith('src/') || path.startsWith('test/'))).toBe(false);
  });

  it("holds every docs/ file the README links to, where the README's relative links point", () => {
    const installed = join(project, 'node_modules', 'webhook-receiver');
    expect(readmeDocsLinks().filter((path) => !existsSync(join(installed, path)))).toEqual([]);
  });
});

/**
 * The built package, installed from its tarball into a fresh project and imported the way a user
 * would: ESM `import`, CommonJS `require`, the subpath exports, the bin. Runs after `npm run build`
 * (the test command builds first).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
let project: string;

function run(command: string, args: string[], cwd = project): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
}

beforeAll(() => {
  if (!existsSync(join(root, 'dist/index.mjs'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
  project = mkdtempSync(join(tmpdir(), 'webhook-receiver-consumer-'));
  run('npm', ['pack', '--silent', '--pack-destination', project], root);
  const tarball = readdirSync(project).find((name) => name.endsWith('.tgz'));
  if (!tarball) throw new Error('npm pack made no tarball');
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, version: '1.0.0' }));
  // The frameworks are the user's own peer dependencies: install them beside the package, at the
  // versions this repository tests with.
  const pinned = (name: string) =>
    `${name}@${(JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version}`;
  run('npm', [
    'install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error',
    `./${tarball}`, pinned('hono'), pinned('express'), pinned('fastify'),
  ]);
}, 180_000);

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('the installed package', () => {
  it('works from an ESM consumer, through every subpath', () => {
    writeFileSync(
      join(project, 'consumer.mjs'),
      `
import { createVerifier, createReceiver, signWebhook, WebhookError, memoryStore } from 'webhook-receiver';
import { redisStore } from 'webhook-receiver/redis';
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
console.log(JSON.stringify({
  id: webhook.id === signed.id, scheme: webhook.scheme, code, status: response.status, asserted: asserted.signed,
  types: [typeof createReceiver, typeof memoryStore, typeof redisStore, typeof honoWebhooks, typeof expressWebhooks, typeof fastifyWebhooks],
  name: pkg.name,
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
    });
  });

  it('works from a CommonJS consumer, through every subpath', () => {
    writeFileSync(
      join(project, 'consumer.cjs'),
      `
const { createVerifier, signWebhook, WebhookError, isWebhookError } = require('webhook-receiver');
const { redisStore } = require('webhook-receiver/redis');
const { webhookHandler } = require('webhook-receiver/fetch');
const { webhooks: honoWebhooks } = require('webhook-receiver/hono');
const { webhooks: expressWebhooks } = require('webhook-receiver/express');
const { webhooks: fastifyWebhooks } = require('webhook-receiver/fastify');
const { signedRequest } = require('webhook-receiver/testing');
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
    });
  });

  it('installs the command-line tool', () => {
    const out = run('npx', ['--no-install', 'webhook-receiver', 'generate-secret']).trim();
    expect(out).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  });

  it('ships only the build and the docs', () => {
    const files = run('npm', ['pack', '--dry-run', '--json'], root);
    const listed = (JSON.parse(files) as [{ files: { path: string }[] }])[0].files.map((f) => f.path);
    expect(listed.filter((path) => !path.startsWith('dist/')).sort()).toEqual(['LICENSE', 'README.md', 'SECURITY.md', 'package.json']);
    expect(listed.some((path) => path.startsWith('src/') || path.startsWith('test/'))).toBe(false);
  });
});

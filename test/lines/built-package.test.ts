/**
 * The BUILT package on the Node that runs this file (the machine's own in the full suite; 22, 24
 * and 26 when `npm test` runs the line smoke subset, see test/lines/run.ts): imported by name
 * from an ES module and required from CommonJS, the way an app on that line loads it, and its
 * bin run. Each child process is started with `process.execPath`, so it is the same line.
 */

import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VECTOR } from '../core/support.ts';
import { checks, expected } from '../runtimes/expected.ts';
import { assertBuilt, createProject, reportOf, root, run, type Project } from '../runtimes/harness.ts';
import type { SmokeReport } from '../runtimes/smoke.ts';

const RUN_TIMEOUT_MS = 30_000;
let project: Project | undefined;

beforeAll(() => {
  assertBuilt();
  project = createProject();
  // The NestJS entry loads its framework at once: an app that uses it has installed these peers.
  for (const name of ['@nestjs/common', '@nestjs/core', 'rxjs']) {
    const link = join(project.dir, 'node_modules', name);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(root, 'node_modules', name), link, 'dir');
  }
  console.log(`Node ${process.versions.node} (${process.execPath}): the built package`);
});

afterAll(() => project?.remove());

function cwd(): string {
  if (!project) throw new Error('the throw-away project was not created');
  return project.dir;
}

async function node(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return run(process.execPath, args, { cwd: cwd(), env, timeoutMs: RUN_TIMEOUT_MS });
}

describe(`the built package on Node ${process.versions.node}`, () => {
  it('runs the runtime smoke suite as an ES module (core, Hono, Fetch), through node:crypto', async () => {
    // The suite is TypeScript: bundle only its own files, and leave 'webhook-receiver' and 'hono'
    // as bare imports for Node to resolve through the installed package's "exports".
    await build({
      absWorkingDir: cwd(),
      entryPoints: ['smoke-cli.ts'],
      outfile: 'out/smoke-node.mjs',
      bundle: true,
      packages: 'external',
      format: 'esm',
      platform: 'node',
      target: 'node20',
      logLevel: 'silent',
    });
    const result = await node(['out/smoke-node.mjs']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const report = reportOf<SmokeReport>(result.stdout);
    // The child is this line's Node (`navigator` arrived in Node 21), and it found node:crypto
    // through process.getBuiltinModule.
    expect(report.runtime).toEqual({ name: 'node', version: process.versions.node, userAgent: (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent, process: 'object', getBuiltinModule: 'function' });
    expect(report.subtle).toEqual({ sign: 0, verify: 0 });
    expect(checks(report)).toEqual(expected);
  });

  it('loads every entry point with require() from CommonJS, and verifies with each', async () => {
    writeFileSync(
      join(cwd(), 'consumer.cjs'),
      `
const { createVerifier, WebhookError } = require('webhook-receiver');
const { redisStore } = require('webhook-receiver/redis');
const { webhookHandler } = require('webhook-receiver/fetch');
const { webhooks: honoWebhooks } = require('webhook-receiver/hono');
const { webhooks: expressWebhooks } = require('webhook-receiver/express');
const { webhooks: fastifyWebhooks } = require('webhook-receiver/fastify');
const { webhooks: koaWebhooks } = require('webhook-receiver/koa');
const { WebhookReceiverModule } = require('webhook-receiver/nestjs');
const { webhookHandler: lambdaHandler } = require('webhook-receiver/lambda');
const { postgresStore } = require('webhook-receiver/postgres');
const { dynamoStore } = require('webhook-receiver/dynamodb');
const { durableObjectStore, WebhookClaims } = require('webhook-receiver/cloudflare');
const { signedRequest } = require('webhook-receiver/testing');
const { name } = require('webhook-receiver/package.json');
let vitestEntry;
try { require('webhook-receiver/vitest'); vitestEntry = 'loaded'; } catch (error) { vitestEntry = error.message.split(':')[0]; }
(async () => {
  const vector = ${JSON.stringify(VECTOR)};
  const headers = { 'webhook-id': vector.id, 'webhook-timestamp': vector.timestamp, 'webhook-signature': vector.signature };
  const verifier = createVerifier({ secrets: vector.secret, now: () => Number(vector.timestamp) * 1000 });
  const webhook = await verifier.verify({ headers, body: vector.body });
  const error = await verifier.verify({ headers, body: vector.body + ' ' }).catch((e) => e);
  const handler = webhookHandler({ secrets: vector.secret, onRejected: () => {} }, (w) => Response.json({ id: w.id }));
  const response = await handler(await signedRequest('http://127.0.0.1/hook', { secret: vector.secret, id: 'msg_cjs', body: { a: 1 } }));
  console.log(JSON.stringify({
    json: webhook.json(), scheme: webhook.scheme, rejected: error instanceof WebhookError && error.code,
    status: response.status, answer: await response.json(), vitestEntry, name,
    types: [typeof redisStore, typeof honoWebhooks, typeof expressWebhooks, typeof fastifyWebhooks,
      typeof koaWebhooks, typeof WebhookReceiverModule, typeof lambdaHandler, typeof postgresStore, typeof dynamoStore, typeof durableObjectStore, typeof WebhookClaims],
  }));
})();
`,
    );
    const result = await node(['consumer.cjs']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      json: { test: 2432232314 },
      scheme: 'v1',
      rejected: 'SIGNATURE_MISMATCH',
      status: 200,
      answer: { id: 'msg_cjs' },
      // vitest is ESM-only: the CommonJS entry refuses with a message that says so.
      vitestEntry: 'webhook-receiver/vitest cannot be loaded with require()',
      name: 'webhook-receiver',
      types: ['function', 'function', 'function', 'function', 'function', 'function', 'function', 'function', 'function', 'function', 'function'],
    });
  });

  it('runs the bin: verify checks the spec vector, exit 0', async () => {
    const result = await node(
      [
        join('node_modules', 'webhook-receiver', 'dist', 'cli.mjs'),
        'verify',
        '--header', `webhook-id: ${VECTOR.id}`,
        '--header', `webhook-timestamp: ${VECTOR.timestamp}`,
        '--header', `webhook-signature: ${VECTOR.signature}`,
        '--body', VECTOR.body,
        '--now', VECTOR.timestamp,
      ],
      { WEBHOOK_SECRET: VECTOR.secret },
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^verified: webhook-id "msg_p5jXN8AQM9LWM0D4loKWxJek" with secrets\[0\] \(v1\)\n/);
    expect(result.stdout).not.toContain(VECTOR.secret.slice('whsec_'.length));
  });
});

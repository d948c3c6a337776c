/**
 * The package on Bun, Deno and workerd: the smoke suite (smoke.ts) and the Bun, Deno and
 * Cloudflare Worker examples, run by the real runtimes from node_modules/.bin against the BUILT
 * package, installed in a throw-away project and imported by name (see harness.ts). Each run
 * prints its runtime's version and checks, from inside, that it ran on that runtime.
 *
 * workerd runs without the `nodejs_compat` flag: there is no `process`, so no `node:crypto`, and
 * the package has to verify through WebCrypto; the suite counts the `crypto.subtle` calls to show
 * it did. On Bun and Deno `node:crypto` is there and no `crypto.subtle` signing happens.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSecret, signWebhook } from 'webhook-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checks, expected, json, mismatch } from './expected.ts';
import { assertBuilt, bin, bundleWorker, createProject, reportOf, run, startServer, versionOf, type Project, type RuntimeName } from './harness.ts';
import { smoke, type Reply, type SmokeReport } from './smoke.ts';

// A runtime start plus a run, on a loaded two-core machine (the suite must pass with two
// CPU hogs beside it): generous, as every wait here is on a process event, never a sleep.
const RUN_TIMEOUT_MS = 90_000;
const TEST_TIMEOUT_MS = 2 * RUN_TIMEOUT_MS;
const timings: string[] = [];
let project: Project | undefined;

beforeAll(() => {
  assertBuilt();
  project = createProject();
});

afterAll(() => {
  project?.remove();
  if (timings.length > 0) console.log(`runtime timings:\n  ${timings.join('\n  ')}`);
});

function cwd(): string {
  if (!project) throw new Error('the runtime project was not created');
  return project.dir;
}

/** The same suite on Node, from source: the baseline every runtime must match word for word. */
let baseline: Pick<SmokeReport, 'core' | 'hono' | 'fetch'> | undefined;

/** One line of the timings table: `printed` is what `<runtime> --version` printed. */
function record(name: RuntimeName, printed: string, what: string, ms: number): void {
  timings.push(`${printed.startsWith(name) ? printed.split(' (')[0] : `${name} ${printed}`}: ${what} ${ms} ms`);
}

describe('the smoke suite on Node (from source, the baseline)', { timeout: TEST_TIMEOUT_MS }, () => {
  it('observes the expected outcomes, through node:crypto', async () => {
    const report = await smoke();
    expect(report.runtime).toMatchObject({ name: 'node', version: process.versions.node, process: 'object', getBuiltinModule: 'function' });
    expect(report.subtle).toEqual({ sign: 0, verify: 0 });
    expect(checks(report)).toEqual(expected);
    baseline = checks(report);
  });
});

async function smokeOn(name: Exclude<RuntimeName, 'workerd'>, args: string[]): Promise<{ version: string; report: SmokeReport }> {
  const printed = await versionOf(name);
  console.log(`${name} --version: ${printed}`);
  const result = await run(bin(name), args, { cwd: cwd(), timeoutMs: RUN_TIMEOUT_MS });
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  record(name, printed, 'smoke suite', result.ms);
  return { version: printed, report: reportOf<SmokeReport>(result.stdout) };
}

function expectSameAsBaseline(report: SmokeReport): void {
  expect(checks(report)).toEqual(expected);
  if (baseline) expect(checks(report)).toEqual(baseline);
}

describe('Bun', { timeout: TEST_TIMEOUT_MS }, () => {
  it('runs the smoke suite from the built package', async () => {
    const { version, report } = await smokeOn('bun', ['smoke-cli.ts']);
    expect(report.runtime).toEqual({ name: 'bun', version, userAgent: `Bun/${version}`, process: 'object', getBuiltinModule: 'function' });
    // node:crypto through process.getBuiltinModule: no WebCrypto signing.
    expect(report.subtle).toEqual({ sign: 0, verify: 0 });
    expectSameAsBaseline(report);
  });

  it('serves examples/bun.ts with Bun.serve on 127.0.0.1', async () => {
    await exampleServer('bun', ['bun.ts']);
  });
});

describe('Deno', { timeout: TEST_TIMEOUT_MS }, () => {
  // Deno uses the project's package.json and node_modules as npm laid them out (no npm: specifiers).
  const deno = ['run', '--no-prompt', '--no-lock', '--node-modules-dir=manual'];

  it('runs the smoke suite from the built package, with no permissions at all', async () => {
    const { version, report } = await smokeOn('deno', [...deno, 'smoke-cli.ts']);
    expect(version).toMatch(/^deno \d+\.\d+\.\d+ /);
    const number = version.split(' ')[1];
    expect(report.runtime).toEqual({ name: 'deno', version: number, userAgent: `Deno/${number}`, process: 'object', getBuiltinModule: 'function' });
    expect(report.subtle).toEqual({ sign: 0, verify: 0 });
    expectSameAsBaseline(report);
  });

  it('serves examples/deno.ts with Deno.serve, allowed only the loopback address and two variables', async () => {
    await exampleServer('deno', [...deno, '--allow-net=127.0.0.1', '--allow-env=WEBHOOK_SECRET,PORT', 'deno.ts']);
  });
});

describe('workerd, without the nodejs_compat flag', { timeout: TEST_TIMEOUT_MS }, () => {
  it('runs the smoke suite and examples/cloudflare-worker.ts through WebCrypto', async () => {
    const printed = await versionOf('workerd');
    console.log(`workerd --version: ${printed}`);
    expect(printed).toMatch(/^workerd \d{4}-\d{2}-\d{2}$/);

    const started = performance.now();
    await bundleWorker(cwd(), 'smoke-worker.ts', 'out/smoke-worker.mjs');
    await bundleWorker(cwd(), 'cloudflare-worker.ts', 'out/cloudflare-worker.mjs');
    record('workerd', printed, 'two esbuild bundles', Math.round(performance.now() - started));

    // No compatibilityFlags: no nodejs_compat, so no `process` and no node:crypto.
    const config = `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "smoke", worker = .smoke),
    (name = "example", worker = .example),
    (name = "claims-disk", disk = (path = ${JSON.stringify(join(cwd(), 'claims'))}, writable = true)),
  ],
);

const smoke :Workerd.Worker = (
  modules = [ (name = "smoke-worker.mjs", esModule = embed "out/smoke-worker.mjs") ],
  compatibilityDate = "2025-06-01",
  bindings = [
    (name = "EXAMPLE", service = "example"),
    (name = "WEBHOOK_SECRET", fromEnvironment = "WEBHOOK_SECRET"),
  ],
);

const example :Workerd.Worker = (
  modules = [ (name = "cloudflare-worker.mjs", esModule = embed "out/cloudflare-worker.mjs") ],
  compatibilityDate = "2025-06-01",
  bindings = [
    (name = "WEBHOOK_SECRET", fromEnvironment = "WEBHOOK_SECRET"),
    (name = "WEBHOOK_CLAIMS", durableObjectNamespace = "WebhookClaims"),
  ],
  durableObjectNamespaces = [ (className = "WebhookClaims", uniqueKey = "webhook-claims", enableSql = true) ],
  durableObjectStorage = (localDisk = "claims-disk"),
);
`;
    expect(config).not.toContain('compatibilityFlags');
    // The example's WebhookClaims objects, SQLite-backed as `new_sqlite_classes` makes them.
    mkdirSync(join(cwd(), 'claims'), { recursive: true });
    writeFileSync(join(cwd(), 'smoke.capnp'), config);

    const result = await run(bin('workerd'), ['test', 'smoke.capnp', 'smoke'], { cwd: cwd(), env: { WEBHOOK_SECRET: generateSecret() }, timeoutMs: RUN_TIMEOUT_MS });
    expect(result.stderr).toContain('[ PASS ] smoke');
    expect(result.code).toBe(0);
    record('workerd', printed, 'workerd test (smoke suite + example worker)', result.ms);

    const report = reportOf<SmokeReport & { example: Record<string, Reply> }>(result.stdout);
    expect(report.runtime).toEqual({ name: 'workerd', userAgent: 'Cloudflare-Workers', process: 'undefined', getBuiltinModule: 'undefined' });
    // Every HMAC went through crypto.subtle.sign and every Ed25519 check through crypto.subtle.verify.
    expect(report.subtle.sign).toBeGreaterThan(0);
    expect(report.subtle.verify).toBeGreaterThan(0);
    expectSameAsBaseline(report);

    expect(report.example).toEqual({
      valid: json(200, { received: true, id: 'msg_worker_1', keyId: 'WEBHOOK_SECRET' }),
      duplicate: json(200, { duplicate: true }),
      tampered: json(401, mismatch),
      wrongMethod: { status: 405, contentType: 'text/plain', body: 'Method not allowed' },
      wrongPath: { status: 404, contentType: 'text/plain', body: 'Not found' },
    });
    // The example's handler logged one line: the duplicate and the forgery never reached it.
    expect(result.stdout.match(/^webhook msg_worker_\d+: /gm)).toEqual(['webhook msg_worker_1: ']);
  });
});

/**
 * Starts an example server (examples/bun.ts, examples/deno.ts) with a secret made for this run,
 * and sends it real signed requests over 127.0.0.1.
 */
async function exampleServer(name: Exclude<RuntimeName, 'workerd'>, args: string[]): Promise<void> {
  const printed = await versionOf(name);
  console.log(`${name} --version: ${printed}`);
  const secret = generateSecret();
  const started = performance.now();
  const server = await startServer(bin(name), args, { cwd: cwd(), env: { WEBHOOK_SECRET: secret, PORT: '0' }, timeoutMs: RUN_TIMEOUT_MS });
  try {
    const body = '{"type":"invoice.paid","data":{"id":"in_1"}}';
    const send = async (headers: Record<string, string>, payload = body, url = server.url): Promise<{ status: number; body: unknown }> => {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: payload });
      const text = await response.text();
      return { status: response.status, body: response.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text };
    };
    const valid = await signWebhook({ secret, body, id: 'msg_example_1' });
    expect(await send(valid.headers)).toEqual({ status: 200, body: { received: true, id: 'msg_example_1', keyId: null } });
    const retry = await signWebhook({ secret, body, id: 'msg_example_1' });
    expect(await send(retry.headers)).toEqual({ status: 200, body: { duplicate: true } });
    const other = await signWebhook({ secret, body, id: 'msg_example_2' });
    expect(await send(other.headers, body.replace('in_1', 'in_2'))).toEqual({ status: 401, body: mismatch });
    const forged = await signWebhook({ secret: generateSecret(), body, id: 'msg_example_3' });
    expect(await send(forged.headers)).toEqual({ status: 401, body: mismatch });
    expect(await send({ 'webhook-id': 'msg_example_4', 'webhook-timestamp': String(valid.timestamp) })).toEqual({
      status: 401,
      body: { error: 'MISSING_SIGNATURE', message: expect.stringContaining('webhook-signature header is missing') },
    });
    expect(await send(valid.headers, body, new URL('/other', server.url).href)).toEqual({ status: 404, body: 'Not found' });
    record(name, printed, 'example server (start + 6 requests)', Math.round(performance.now() - started));
    // One handler run: only the first valid delivery reached it.
    expect(server.output().match(/^webhook msg_example_\d+: .*$/gm)).toEqual(['webhook msg_example_1: invoice.paid (key 0)']);
    expect(server.output()).not.toContain(secret);
  } finally {
    await server.stop();
  }
}

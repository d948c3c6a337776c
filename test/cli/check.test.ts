/**
 * `webhook-receiver check URL`, run as a child process against real receivers served on
 * 127.0.0.1 by this process: exit codes, the table, --json, --print-curl without the secret,
 * the refusals (ftp://, a remote host without --yes), and never a secret in the output.
 */

import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createAdaptorServer } from '@hono/node-server';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { tenantKeys } from '../../src/keys.ts';
import { generateSecret } from '../../src/sign.ts';
import type { CheckReport } from '../../src/testing/check-endpoint.ts';
import { createVerifier } from '../../src/verify.ts';
import { OTHER_SECRET, SECRET } from '../testing/support.ts';
import { noSecrets, run as runCli, type Result } from './support.ts';

const execFileAsync = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'webhook-receiver-check-'));
const SECRETS = [SECRET, OTHER_SECRET];
const hasCurl = spawnSync('curl', ['--version']).status === 0;

/** `webhook-receiver check …`, bounded by a minute: the battery sends about thirty requests. */
function run(args: string[], env: Record<string, string> = {}): Promise<Result> {
  return runCli(['check', ...args], { env, timeoutMs: 60_000 });
}

// ---------------------------------------------------------------------------------------------
// Receivers on 127.0.0.1

const servers: Server[] = [];
const urls: Record<'good' | 'firstEntryOnly' | 'validating' | 'tenants', string> = { good: '', firstEntryOnly: '', validating: '', tenants: '' };
/** Globex's secret (acme has SECRET and OTHER_SECRET), in the environment as a user keeps it. */
const GLOBEX_SECRET = generateSecret();

async function serve(fetch: (request: Request) => Promise<Response>): Promise<string> {
  const server = createAdaptorServer({ fetch }) as Server;
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', () => done()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
}

const APP_EVENT = '{"type":"invoice.paid","data":{"id":"in_1","amount":900}}';

beforeAll(async () => {
  const quiet = { onRejected: () => {} };
  urls.good = await serve(webhookHandler({ secrets: SECRETS, ...quiet }, () => new Response(null, { status: 204 })));

  // Express with tenant keys: /webhooks/:tenant, acme and globex each with their own secrets.
  const table: Record<string, string[]> = { acme: SECRETS, globex: [GLOBEX_SECRET] };
  const app = express();
  const keys = tenantKeys({ tenant: (request) => request.params.tenant, load: async (tenant) => table[tenant] });
  app.post('/webhooks/:tenant', expressWebhooks({ keys, ...quiet }), (_req, res) => {
    res.sendStatus(204);
  });
  const tenantServer = createServer(app);
  servers.push(tenantServer);
  await new Promise<void>((done) => tenantServer.listen(0, '127.0.0.1', () => done()));
  urls.tenants = `http://127.0.0.1:${(tenantServer.address() as AddressInfo).port}/webhooks`;

  // Verifies, but against the first signature entry only: a rotation fails.
  const verifier = createVerifier({ secrets: SECRETS });
  urls.firstEntryOnly = await serve(async (request) => {
    const headers = new Headers(request.headers);
    headers.set('webhook-signature', (headers.get('webhook-signature') ?? '').split(' ')[0]!);
    try {
      await verifier.verify({ headers, body: new Uint8Array(await request.arrayBuffer()) });
    } catch {
      return Response.json({ error: 'REJECTED', message: 'rejected' }, { status: 401 });
    }
    return new Response(null, { status: 204 });
  });

  // Accepts only its own event type, as an app that validates payloads does.
  urls.validating = await serve(
    webhookHandler({ secrets: SECRETS, ...quiet }, (webhook) => {
      let type: unknown;
      try {
        type = webhook.json<{ type?: unknown }>().type;
      } catch {
        type = undefined;
      }
      return new Response(null, { status: type === 'invoice.paid' ? 204 : 422 });
    }),
  );
});

afterAll(async () => {
  await Promise.all(
    servers.map(
      (server) =>
        new Promise<void>((done) => {
          server.closeAllConnections();
          server.close(() => done());
        }),
    ),
  );
  rmSync(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------

describe('webhook-receiver check', { timeout: 90_000 }, () => {
  it('exits 0 for a conforming endpoint, secrets from WEBHOOK_SECRET, and prints the table', async () => {
    const result = await run([urls.good], { WEBHOOK_SECRET: SECRETS.join(',') });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^webhook-receiver check ${urls.good}\n2 keys, tolerance 300 s, unsigned refused; \\d+ requests in \\d+\\.\\d s\n`));
    expect(result.stdout).toMatch(/^ {2}pass {11}tampered-body {11}4xx {19}401 SIGNATURE_MISMATCH/m);
    expect(result.stdout).toMatch(/^ {2}pass {11}rotation-second-key {5}2xx {19}204/m);
    expect(result.stdout).toMatch(/^CONFORMS: 16 security cases passed$/m);
    noSecrets(result);
  });

  it('--json prints the report, with repeated --secret', async () => {
    const result = await run([urls.good, '--secret', SECRET, '--secret', OTHER_SECRET, '--json']);
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as CheckReport;
    expect(report).toMatchObject({ reachable: true, conforms: true, keys: 2, failures: [] });
    expect(report.rows.find((row) => row.id === 'valid')).toMatchObject({ verdict: 'pass', status: 204 });
    expect(report.rows.every((row) => row.group === 'timing' || /^msg_check_/.test(row.sent.headers['webhook-id'] ?? row.sent.headers['svix-id'] ?? ''))).toBe(true);
    noSecrets(result);
    // The curl commands carry the whole URL, query included: in the JSON only with --print-curl.
    expect(report.rows.some((row) => 'curl' in row)).toBe(false);
    const withCurl = JSON.parse((await run([urls.good, '--secret', SECRET, '--json', '--print-curl', '--only', 'unsigned'])).stdout) as CheckReport;
    expect(withCurl.rows.map((row) => row.curl.split(' ').slice(0, 6).join(' '))).toEqual([
      `curl -sS -i -X POST '${urls.good}'`,
      `curl -sS -i -X POST '${urls.good}'`,
    ]);
  });

  it('never prints a token from the URL\'s query or userinfo', async () => {
    const token = 'tok_query_0123456789abcdef';
    const result = await run([`${urls.good}?token=${token}`, '--secret', SECRET, '--json']);
    expect(result.code).toBe(0);
    expect(result.stdout + result.stderr).not.toContain(token);
    const closed = await serve(async () => new Response(null));
    const server = servers.pop()!;
    await new Promise<void>((done) => server.close(() => done()));
    const unreachable = await run([`${closed}?token=${token}`, '--secret', SECRET]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stdout + unreachable.stderr).not.toContain(token);
    const credentials = await run([urls.good.replace('http://', `http://check:${token}@`), '--secret', SECRET]);
    expect(credentials.code).toBe(2);
    expect(credentials.stderr).toMatch(/^webhook-receiver check: the target carries credentials \(user:password@\): fetch does not send them/);
    expect(credentials.stdout + credentials.stderr).not.toContain(token);
  });

  it('exits 1 and names the failed row for a broken endpoint', async () => {
    const result = await run([urls.firstEntryOnly, '--secret', SECRET, '--secret', OTHER_SECRET]);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^ {2}FAIL {11}rotation-new-key-first {2}2xx {19}401 REJECTED/m);
    expect(result.stdout).toMatch(/^DOES NOT CONFORM: 1 security case failed: rotation-new-key-first$/m);
    noSecrets(result);
  });

  it('--tolerance: stale cases step past the window given', async () => {
    // The endpoint allows 300 s; told 60, the check sends timestamps 120 s off, which it accepts.
    const result = await run([urls.good, '--secret', SECRET, '--tolerance', '60', '--only', 'stale-past,stale-future']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^DOES NOT CONFORM: 2 security cases failed: stale-past, stale-future$/m);
  });

  it('--body-file sends the app\'s own event', async () => {
    const file = join(dir, 'event.json');
    writeFileSync(file, APP_EVENT);
    const made = await run([urls.validating, '--secret', SECRET, '--only', 'tampered-body']);
    expect(made.code).toBe(1);
    expect(made.stdout).toMatch(/^ {2}FAIL {11}valid {19}2xx {19}422/m);
    const own = await run([urls.validating, '--secret', SECRET, '--body-file', file, '--skip', 'non-ascii,oversized']);
    expect(own.stdout).toMatch(/^CONFORMS/m);
    expect(own.code).toBe(0);
  });

  it('--print-curl prints replayable commands with the signature headers, never the secret', async () => {
    const result = await run([urls.good, '--secret', SECRET, '--print-curl', '--only', 'tampered-id']);
    expect(result.code).toBe(0);
    noSecrets(result);
    const commands = result.stdout.split('\n').filter((line) => line.startsWith('      curl ') || line.startsWith('        '));
    expect(commands.length).toBeGreaterThan(4);
    expect(result.stdout).toMatch(/^ {6}curl -sS -i -X POST 'http:\/\/127\.0\.0\.1:\d+\/webhooks' \\$/m);
    expect(result.stdout).toMatch(/^ {8}-H 'webhook-signature: v1,[A-Za-z0-9+/]{43}=' \\$/m);
    // The tampered-id command, run by a shell, is refused as the row says.
    const block = result.stdout.split('\n');
    const start = block.findIndex((line) => line.includes('webhook-id changed after signing'));
    const lines: string[] = [];
    for (let i = start + 1; i < block.length && block[i]!.startsWith('      '); i++) lines.push(block[i]!.slice(6));
    expect(lines[0]).toMatch(/^curl -sS -i -X POST /);
    if (!hasCurl) {
      // Only the replay needs curl; everything above was checked without it.
      console.warn('curl is not installed: the shell replay of a --print-curl command was not run');
      return;
    }
    // Asynchronously: the receiver answering it lives in this process.
    const shell = await execFileAsync('sh', ['-c', lines.join('\n')], { encoding: 'utf8', timeout: 10_000 });
    expect(shell.stdout).toMatch(/^HTTP\/1\.1 401/);
    expect(shell.stdout).toContain('"error":"SIGNATURE_MISMATCH"');
  });

  it('exits 1 and says so when the endpoint cannot be reached', async () => {
    const closed = await serve(async () => new Response(null));
    const server = servers.pop()!;
    await new Promise<void>((done) => server.close(() => done()));
    const result = await run([closed, '--secret', SECRET]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`webhook-receiver check: cannot reach ${closed}: request failed: ECONNREFUSED\n`);
    expect(result.stdout).toMatch(/^NOT REACHABLE: request failed: ECONNREFUSED$/m);
  });

  it('exits 2 on misuse, never echoing a secret', async () => {
    const cases: [string[], string, Record<string, string>?][] = [
      [['ftp://127.0.0.1/webhooks', '--secret', SECRET], 'check only sends to http:// and https:// URLs, got ftp:'],
      [['http://hooks.example.com/webhooks', '--secret', SECRET], 'hooks.example.com is not this machine: the valid deliveries run its real handler (ids msg_check_…). Pass --yes to check it anyway'],
      [[urls.good], 'no secret: pass --secret, or set WEBHOOK_SECRET (comma-separated for several)'],
      [[], 'no URL: pass the endpoint to check, e.g. webhook-receiver check http://127.0.0.1:3000/webhooks'],
      [[urls.good, SECRET], 'one URL only: options start with --, values follow their option'],
      [[urls.good, '--secret', SECRET, '--only', 'valid,nope'], 'only: entry 2 is not a case; the cases are valid, rotation-all-keys,'],
      [[urls.good, '--secret', SECRET, '--skip', 'valid'], 'skip: the valid case cannot be left out; it is the baseline that gives every refusal its meaning'],
      [['not a url', '--secret', SECRET], 'the target must be an absolute http:// or https:// URL (or a Fetch handler)'],
      [[urls.good, '--secret', SECRET, '--unsigned', 'maybe'], "--unsigned takes 'accept' (or 'reject', the default)"],
      [[urls.good, '--secret', SECRET, '--timeout', '0'], '--timeout must be a whole number from 1 to 120'],
      [[urls.good, '--secret', `${SECRET.slice(0, 20)}`], 'secrets[0] decodes to'],
      [[urls.good], 'secrets[0] is an Ed25519 public key', { WEBHOOK_SECRET: 'whpk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo=' }],
    ];
    for (const [args, message, env] of cases) {
      const result = await run(args, env);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr.startsWith(`webhook-receiver check: ${message}`), result.stderr).toBe(true);
      expect(result.stderr).toMatch(/\nRun 'webhook-receiver check --help' for usage\.\n$/);
      noSecrets(result);
      expect(result.stderr).not.toContain(SECRET.slice(0, 20));
    }
  });

  it('--unknown-tenant-url and --tenant check an Express endpoint with tenant keys: 404 UNKNOWN_TENANT, cross-tenant refused', async () => {
    const result = await run(
      [`${urls.tenants}/acme`, '--unknown-tenant-url', `${urls.tenants}/initech`, '--tenant', `${urls.tenants}/globex=GLOBEX_SECRETS`],
      { WEBHOOK_SECRET: SECRETS.join(','), GLOBEX_SECRETS: GLOBEX_SECRET },
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^ {2}pass {11}unknown-tenant {10}404 UNKNOWN_TENANT {4}404 UNKNOWN_TENANT/m);
    expect(result.stdout).toMatch(/^ {2}pass {11}cross-tenant {12}4xx {19}401 SIGNATURE_MISMATCH/m);
    expect(result.stdout).toMatch(/^CONFORMS: 18 security cases passed$/m);
    expect(result.stdout).not.toContain('warning:');
    noSecrets(result);
    expect(result.stdout).not.toContain(GLOBEX_SECRET.slice('whsec_'.length));
  });

  it('warns when one secret is given for several tenants (exit 0: a warning, not a failure)', async () => {
    const result = await run([`${urls.tenants}/acme`, '--tenant', `${urls.tenants}/globex=SHARED`, '--json', '--only', 'cross-tenant'], {
      WEBHOOK_SECRET: SECRET,
      SHARED: `${GLOBEX_SECRET},${SECRET}`,
    });
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as CheckReport;
    expect(report.warnings).toEqual([
      `one secret is given for several tenants (${urls.tenants}/acme, ${urls.tenants}/globex): the URL is not signed, so a delivery for one verifies at the others' URLs too; give every tenant its own secret`,
    ]);
    expect(report.rows.map((row) => [row.id, row.verdict])).toEqual([
      ['valid', 'pass'],
      ['cross-tenant', 'not_observable'],
    ]);
    noSecrets(result);
    const text = await run([`${urls.tenants}/acme`, '--tenant', `${urls.tenants}/globex=SHARED`, '--only', 'cross-tenant'], { WEBHOOK_SECRET: SECRET, SHARED: SECRET });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^warning: one secret is given for several tenants \(/m);
  });

  it('--tenant takes URL=VARIABLE, never a secret, and echoes neither', async () => {
    for (const [value, message] of [
      [`${urls.tenants}/globex`, '--tenant 1: give URL=VARIABLE, the name of an environment variable holding'],
      [`${urls.tenants}/globex=${SECRET}`, '--tenant 1: the environment variable it names is not set'],
      ['http://hooks.example.com/webhooks/globex=GLOBEX', 'hooks.example.com is not this machine'],
    ]) {
      const result = await run([`${urls.tenants}/acme`, '--secret', OTHER_SECRET, '--tenant', value!], { GLOBEX: GLOBEX_SECRET });
      expect(result.code, value).toBe(2);
      expect(result.stderr.startsWith(`webhook-receiver check: ${message}`), result.stderr).toBe(true);
      noSecrets(result);
    }
    const remote = await run([`${urls.tenants}/acme`, '--secret', OTHER_SECRET, '--unknown-tenant-url', 'http://hooks.example.com/webhooks/x']);
    expect(remote.code).toBe(2);
    expect(remote.stderr).toMatch(/^webhook-receiver check: hooks\.example\.com is not this machine/);
  });

  it('--help documents the cases and exit codes; --yes lets a remote host through', async () => {
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: webhook-receiver check URL/);
    expect(help.stdout).toContain('Cases: valid, rotation-all-keys,');
    expect(help.stdout).toContain('Exit codes: 0 every security case passed');
    // A .invalid name never resolves (RFC 6761): no request leaves the machine.
    const remote = await run(['http://check.invalid/webhooks', '--secret', SECRET, '--yes', '--only', 'valid']);
    expect(remote.code).toBe(1);
    expect(remote.stderr).toMatch(/^webhook-receiver check: cannot reach http:\/\/check\.invalid\/webhooks: request failed: (ENOTFOUND|EAI_AGAIN)\n$/);
  });
});

/**
 * The `webhook-receiver` command, run as a child process the way a person runs it: output, exit
 * codes, and never a secret in what it prints (except generate-secret, whose output is the point).
 */

import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createVerifier } from '../../src/verify.ts';
import { createTestReceiver, signWebhook } from '../../src/testing/index.ts';
import { KEY_BYTES, OTHER_SECRET, SECRET, expectNoSecrets, hmac, nowSeconds } from '../testing/support.ts';
import { listen, noSecrets, root, run } from './support.ts';

const execFileAsync = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'webhook-receiver-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('help and misuse', () => {
  it('prints help for the tool and for every command, exit 0', async () => {
    for (const args of [['--help'], ['help'], ['-h']]) {
      const result = await run(args);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^Usage: webhook-receiver <command> \[options\]\n\nCommands:\n  generate-secret /);
      expect(result.stderr).toBe('');
    }
    for (const command of ['generate-secret', 'sign', 'verify', 'listen', 'check']) {
      const result = await run([command, '--help']);
      expect(result.code).toBe(0);
      expect(result.stdout.startsWith(`Usage: webhook-receiver ${command}`)).toBe(true);
      expect(result.stderr).toBe('');
    }
  });

  it('never repeats an argument\'s value in an error or usage message (a secret pasted in the wrong place)', async () => {
    const payload = SECRET.slice('whsec_'.length);
    const cases: string[][] = [
      [SECRET],
      [payload],
      ['sign', SECRET],
      ['sign', '--body', 'x', `--timestamp=${SECRET}`],
      ['sign', '--body', 'x', '--timestamp', payload],
      ['sign', '--body', 'x', `--${SECRET}`],
      ['sign', '--body', 'x', `--secret=${SECRET}`, '--curl', `https://${payload}`.replace('https', 'ftp')],
      ['sign', '--body', 'x', `--secret=${SECRET}`, '--id', 'msg_1', '--body-file', join(dir, payload.replace(/\//g, '_'))],
      ['verify', '--header', `${SECRET}`, '--body', 'x'],
      ['verify', '--header', 'webhook-id: x', '--body', 'x', '--now', payload],
      ['listen', '--forward', `ftp://${payload}`],
      ['listen', `--port=${payload}`],
      ['generate-secret', `--asymmetric=${SECRET}`],
      ['check', `--${SECRET}`],
      ['check', 'http://127.0.0.1:9/webhooks', `--${SECRET}`],
      ['check', 'http://127.0.0.1:9/webhooks', `--secret=${SECRET}`, '--only', payload],
      ['check', 'http://127.0.0.1:9/webhooks', '--skip', `valid,${SECRET}`],
      ['check', 'http://127.0.0.1:9/webhooks', '--tolerance', payload],
      ['check', 'http://127.0.0.1:9/webhooks', '--body-file', join(dir, payload.replace(/\//g, '_'))],
      ['check', 'http://127.0.0.1:9/webhooks', SECRET],
      ['check', SECRET],
      ['check', `http://check:${encodeURIComponent(payload)}@127.0.0.1:9/webhooks`],
      ['check', `ftp://127.0.0.1/webhooks?token=${encodeURIComponent(payload)}`],
    ];
    for (const args of cases) {
      const result = await run(args, { env: { WEBHOOK_SECRET: OTHER_SECRET } });
      expect(result.code, args.join(' ')).toBe(2);
      for (const part of [SECRET, payload, payload.slice(0, 16), payload.slice(-16), payload.replace(/\//g, '_').slice(0, 16)]) {
        expect(result.stderr + result.stdout, args.join(' ')).not.toContain(part);
      }
    }
    // Two dozen processes one after another: on a loaded two-core machine that is past 20 s.
  }, 120_000);

  it('prints its version with --version', async () => {
    const result = await run(['--version']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version}\n`);
    expect(result.stderr).toBe('');
  });

  it('exits 2 with a clear message on misuse', async () => {
    const none = await run([]);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe('');
    expect(none.stderr).toMatch(/^Usage: webhook-receiver <command>/);

    const unknown = await run(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^webhook-receiver: unknown command \(the first argument is none of generate-secret, sign, verify, listen, check, replay, relay, inbox\)\n\nUsage:/);
    expect(unknown.stderr).not.toContain('frobnicate');

    const option = await run(['sign', '--nope']);
    expect(option.code).toBe(2);
    expect(option.stderr).toBe(
      "webhook-receiver sign: unknown option --nope; the options are --secret, --id, --timestamp, --body, --body-file, --curl, --help\nRun 'webhook-receiver sign --help' for usage.\n",
    );

    // A mistyped option is named up to its '=' (never its value), with the nearest one.
    const mistyped = await run(['check', 'http://127.0.0.1:9/webhooks', '--secert', 'x']);
    const mistypedWithValue = await run(['check', 'http://127.0.0.1:9/webhooks', `--secert=${SECRET}`]);
    for (const result of [mistyped, mistypedWithValue]) {
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/^webhook-receiver check: unknown option --secert \(did you mean --secret\?\); the options are --secret, --json, .*, --yes, --help\nRun 'webhook-receiver check --help' for usage\.\n$/);
    }
    expect(mistypedWithValue.stderr).not.toContain(SECRET.slice('whsec_'.length, 'whsec_'.length + 8));
    // An "option" that is no option name (a secret typed after '--') is not repeated at all.
    const secretAsOption = await run(['sign', '--body', 'x', `--${SECRET}`]);
    expect(secretAsOption.stderr).toMatch(/^webhook-receiver sign: unknown option \(not repeated: it does not look like an option name, and may be a value typed after '--'\); the options are /);

    const noSecret = await run(['sign', '--body', 'x']);
    expect(noSecret.code).toBe(2);
    expect(noSecret.stderr).toBe("webhook-receiver sign: no secret: pass --secret, or set WEBHOOK_SECRET (comma-separated for several)\nRun 'webhook-receiver sign --help' for usage.\n");

    // A secret passed without --secret is never echoed back.
    const positional = await run(['sign', SECRET]);
    expect(positional.code).toBe(2);
    expect(positional.stderr).toBe("webhook-receiver sign: unexpected argument: options start with --, values follow their option\nRun 'webhook-receiver sign --help' for usage.\n");
    noSecrets(positional);

    const short = await run(['sign', '--secret', 'whsec_c2hvcnQ=', '--body', 'x']);
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/^webhook-receiver sign: secret\[0\] decodes to 5 bytes; Standard Webhooks secrets are 24 to 64 random bytes/);
    expect(short.stderr).not.toContain('c2hvcnQ');
  });
});

describe('the built command', () => {
  // `npm test` builds first; a bare `vitest run` on a fresh clone has no dist/ to check.
  const built = join(root, 'dist/cli.mjs');
  it.skipIf(!existsSync(built))('keeps its #!/usr/bin/env node line and runs', async () => {
    expect(readFileSync(built, 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
    const { stdout } = await execFileAsync(built, ['generate-secret'], { encoding: 'utf8', timeout: 10_000 });
    expect(stdout).toMatch(/^whsec_[A-Za-z0-9+/]{43}=\n$/);
  });
});

describe('generate-secret', () => {
  it('prints a whsec_ secret of 32 random bytes, different each time', async () => {
    const [a, b] = await Promise.all([run(['generate-secret']), run(['generate-secret'])]);
    for (const result of [a, b]) {
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^whsec_[A-Za-z0-9+/]{43}=\n$/);
      expect(Buffer.from(result.stdout.trim().slice(6), 'base64')).toHaveLength(32);
    }
    expect(a.stdout).not.toBe(b.stdout);
  });

  it('prints an Ed25519 pair with --asymmetric that signs and verifies', async () => {
    const result = await run(['generate-secret', '--asymmetric']);
    expect(result.code).toBe(0);
    const match = /^secret-key: (whsk_[A-Za-z0-9+/]{86}==)\npublic-key: (whpk_[A-Za-z0-9+/]{43}=)\n$/.exec(result.stdout);
    expect(match).not.toBeNull();
    const [, secretKey, publicKey] = match!;
    const signed = await signWebhook({ secret: secretKey!, body: 'x' });
    const webhook = await createVerifier({ secrets: publicKey! }).verify({ headers: signed.headers, body: 'x' });
    expect(webhook.scheme).toBe('v1a');
  });
});

describe('sign', () => {
  const expected = (id: string, timestamp: string, body: string | Uint8Array, key = KEY_BYTES) =>
    `webhook-id: ${id}\nwebhook-timestamp: ${timestamp}\nwebhook-signature: v1,${hmac(key, id, timestamp, body)}\n`;

  it('prints the three headers for --body, one name: value per line', async () => {
    const result = await run(['sign', '--secret', SECRET, '--id', 'msg_cli', '--timestamp', '1700000000', '--body', '{"a":1}']);
    expect(result).toEqual({ code: 0, stdout: expected('msg_cli', '1700000000', '{"a":1}'), stderr: '' });
  });

  it('reads the secret from WEBHOOK_SECRET (several, comma-separated) and the body from stdin', async () => {
    const result = await run(['sign', '--id', 'msg_env', '--timestamp', '1700000000'], { input: 'from stdin\n', env: { WEBHOOK_SECRET: `${SECRET}, ${OTHER_SECRET}` } });
    expect(result.code).toBe(0);
    const other = Buffer.from(OTHER_SECRET.slice(6), 'base64');
    expect(result.stdout).toBe(
      `webhook-id: msg_env\nwebhook-timestamp: 1700000000\nwebhook-signature: v1,${hmac(KEY_BYTES, 'msg_env', '1700000000', 'from stdin\n')} v1,${hmac(other, 'msg_env', '1700000000', 'from stdin\n')}\n`,
    );
    noSecrets(result);
  });

  it('signs the exact bytes of --body-file, defaults the id and the timestamp to fresh values', async () => {
    const file = join(dir, 'body.bin');
    const bytes = Uint8Array.from([0, 0xff, 0x0a, 0x41]);
    writeFileSync(file, bytes);
    const before = nowSeconds();
    const result = await run(['sign', '--secret', SECRET, '--body-file', file]);
    expect(result.code).toBe(0);
    const [, id, timestamp] = /^webhook-id: (msg_[0-9A-Za-z]{27})\nwebhook-timestamp: (\d+)\n/.exec(result.stdout) ?? [];
    expect(Number(timestamp)).toBeGreaterThanOrEqual(before);
    expect(Number(timestamp)).toBeLessThanOrEqual(nowSeconds());
    expect(result.stdout).toBe(expected(id!, timestamp!, bytes));
  });

  it('exits 2 on conflicting or bad options', async () => {
    const cases: [string[], string][] = [
      [['--body', 'x', '--body-file', 'f'], 'pass either --body or --body-file, not both'],
      [['--body', 'x', '--timestamp', '1700000000000'], '--timestamp has 13 digits: it looks like milliseconds; pass Unix seconds'],
      [['--body', 'x', '--timestamp', '12abc'], '--timestamp must be Unix seconds (digits only)'],
      [['--body', 'x', '--id', ''], '--id must not be empty'],
      [['--body', 'x', '--curl', 'ftp://example.com'], '--curl needs an http:// or https:// URL'],
      [['--body-file', join(dir, 'missing.json')], 'cannot read the file given with --body-file: ENOENT'],
    ];
    for (const [args, message] of cases) {
      const result = await run(['sign', '--secret', SECRET, ...args]);
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain(`webhook-receiver sign: ${message}`);
      noSecrets(result);
    }
    const binary = await run(['sign', '--secret', SECRET, '--curl', 'http://127.0.0.1/'], { input: Uint8Array.from([0xff, 0xfe]) });
    expect(binary.code).toBe(2);
    expect(binary.stderr).toContain('a binary body cannot go on a curl command line: pass it with --body-file');
  });

  it('labels the curl body application/json only when it is JSON', async () => {
    const binaryFile = join(dir, 'label-body.bin');
    writeFileSync(binaryFile, Uint8Array.from([0xff, 0x00, 0x7b, 0x0a]));
    const jsonFile = join(dir, 'label-body.json');
    writeFileSync(jsonFile, '[1, 2]\n');
    const cases: [string[], string][] = [
      [['--body', '{"a":1}'], 'application/json'],
      [['--body-file', jsonFile], 'application/json'],
      [['--body', 'plain text'], 'application/octet-stream'],
      [['--body', '{"a":'], 'application/octet-stream'],
      [['--body-file', binaryFile], 'application/octet-stream'],
    ];
    for (const [args, type] of cases) {
      const result = await run(['sign', '--secret', SECRET, '--id', 'msg_label', ...args, '--curl', 'http://127.0.0.1/hook']);
      expect(result.code).toBe(0);
      expect(result.stdout.split('\n')[1]).toBe(`  -H 'content-type: ${type}' \\`);
    }
  });

  const hasCurl = spawnSync('curl', ['--version']).status === 0;
  it.skipIf(!hasCurl)('prints a curl command that delivers a request the receiver verifies', async () => {
    const receiver = await createTestReceiver({ secrets: SECRET });
    try {
      const file = join(dir, 'curl-body.json');
      writeFileSync(file, '{"from":"file"}\n');
      const text = await run(['sign', '--secret', SECRET, '--id', 'msg_curl', '--body', `{"quote":"it's"}`, '--curl', `${receiver.url}/hook`]);
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(new RegExp(`^curl -sS -i -X POST '${receiver.url}/hook' \\\\\n  -H 'content-type: application/json' \\\\\n  -H 'webhook-id: msg_curl' \\\\\n`));
      expect(text.stdout).toContain(`  --data-raw '{"quote":"it'\\''s"}'\n`);
      const fromFile = await run(['sign', '--secret', SECRET, '--id', 'msg_file', '--body-file', file, '--curl', `${receiver.url}/hook`]);
      expect(fromFile.stdout).toContain(`  --data-binary @'${file}'\n`);
      const binaryFile = join(dir, 'curl-body.bin');
      writeFileSync(binaryFile, Uint8Array.from([0x00, 0xff, 0x0a]));
      const fromBinary = await run(['sign', '--secret', SECRET, '--id', 'msg_bin', '--body-file', binaryFile, '--curl', `${receiver.url}/hook`]);
      for (const command of [text.stdout, fromFile.stdout, fromBinary.stdout]) {
        // Asynchronously: the receiver answering curl lives in this process.
        const { stdout, stderr } = await execFileAsync('sh', ['-c', command], { encoding: 'utf8', timeout: 10_000 });
        // The status is printed: a 204 has no body, so without it the command would print nothing.
        expect(stdout).toMatch(/^HTTP\/1\.1 204 No Content\r\n/);
        expect(stderr).toBe('');
      }
      const deliveries = await receiver.waitForDeliveries(3);
      const contentType = (d: (typeof deliveries)[number]) => d.headers.find(([name]) => name.toLowerCase() === 'content-type')?.[1];
      expect(deliveries.map((d) => [d.status, d.verification.ok && d.verification.webhook.id, contentType(d), Buffer.from(d.body).toString('latin1')])).toEqual([
        [204, 'msg_curl', 'application/json', `{"quote":"it's"}`],
        [204, 'msg_file', 'application/json', '{"from":"file"}\n'],
        [204, 'msg_bin', 'application/octet-stream', '\x00\xff\n'],
      ]);
    } finally {
      await receiver.close();
    }
  });
});

describe('verify', () => {
  const body = '{"type":"invoice.paid"}';
  const timestamp = '1700000000';
  const signature = `v1,${hmac(KEY_BYTES, 'msg_v', timestamp, body)}`;
  const headers = ['--header', 'webhook-id: msg_v', '--header', `webhook-timestamp: ${timestamp}`, '--header', `Webhook-Signature:   ${signature}`];
  const bodyFile = join(dir, 'verify-body.json');
  writeFileSync(bodyFile, body);

  it('exits 0 and says what matched for a good capture', async () => {
    const result = await run(['verify', '--secret', OTHER_SECRET, '--secret', SECRET, ...headers, '--body-file', bodyFile, '--now', '1700000010']);
    expect(result).toEqual({
      code: 0,
      stdout: 'verified: webhook-id "msg_v" with secrets[1] (v1)\n  webhook-timestamp 2023-11-14T22:13:20.000Z (10 s ago)\n  body: 23 bytes: "{\\"type\\":\\"invoice.paid\\"}"\n',
      stderr: '',
    });
  });

  it('exits 1 with the diagnosis for a bad capture, and for a stale one', async () => {
    const tampered = await run(['verify', ...headers, '--body', `${body}\n`, '--now', timestamp], { env: { WEBHOOK_SECRET: SECRET } });
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toBe('');
    const lines = tampered.stdout.split('\n');
    expect(lines[0]).toMatch(/^NOT VERIFIED: verification failed with SIGNATURE_MISMATCH: no signature matched: 1 v1 entry tried against 1 HMAC secret\./);
    expect(lines).toContain('  webhook-id: "msg_v"');
    expect(lines).toContain('  body: 24 bytes: "{\\"type\\":\\"invoice.paid\\"}\\n"');
    expect(lines).toContain('Keys tried: secrets[0]: v1 HMAC secret');
    expect(lines).toContain(
      'Diagnosis: the signature matches the body without its trailing newline: the bytes signed are not the bytes sent. Sign exactly the body that goes on the wire, and verify the raw bytes received.',
    );
    noSecrets(tampered, [hmac(KEY_BYTES, 'msg_v', timestamp, `${body}\n`)]);

    const stale = await run(['verify', '--secret', SECRET, ...headers, '--body-file', bodyFile]);
    expect(stale.code).toBe(1);
    expect(stale.stdout).toMatch(/^NOT VERIFIED: verification failed with TIMESTAMP_TOO_OLD: webhook-timestamp is \d+ s in the past; the tolerance is 300 s/);
    expect(stale.stdout).toContain('Diagnosis: the signature is valid for this id, timestamp and body with secrets[0]; only the time check failed:');

    const tolerant = await run(['verify', '--secret', SECRET, ...headers, '--body-file', bodyFile, '--now', '1700000100', '--tolerance', '60']);
    expect(tolerant.code).toBe(1);
    expect(tolerant.stdout).toMatch(/^NOT VERIFIED: verification failed with TIMESTAMP_TOO_OLD: webhook-timestamp is 100 s in the past; the tolerance is 60 s/);
  });

  it('exits 2 on misuse', async () => {
    const cases: [string[], string][] = [
      [['--body', body], "no headers: pass the captured ones with --header 'webhook-id: …' (repeat it)"],
      [['--header', 'webhook-id msg_v', '--body', body], `--header must look like 'name: value'`],
      [[...headers, '--body', body, '--tolerance', '0'], '--tolerance must be a positive whole number of seconds'],
      [[...headers, '--body', body, '--now', 'yesterday'], '--now must be Unix seconds (digits only)'],
    ];
    for (const [args, message] of cases) {
      const result = await run(['verify', '--secret', SECRET, ...args]);
      expect(result.code).toBe(2);
      expect(result.stderr).toBe(`webhook-receiver verify: ${message}\nRun 'webhook-receiver verify --help' for usage.\n`);
    }
    const whsk = await run(['verify', '--secret', 'whsk_AAAA', ...headers, '--body', body]);
    expect(whsk.code).toBe(2);
    expect(whsk.stderr).toMatch(/^webhook-receiver verify: secrets\[0\] is an Ed25519 secret key \('whsk_…'\), which belongs to the sender/);
  });
});

describe('listen', () => {
  it('prints each delivery and its verification outcome as it arrives, then stops on SIGTERM', async () => {
    const server = await listen([], { WEBHOOK_SECRET: SECRET });
    try {
      const body = '{"type":"ping"}';
      const signed = await signWebhook({ secret: SECRET, body, id: 'msg_listen' });
      const ok = await fetch(`${server.url}/webhooks`, { method: 'POST', headers: signed.headers, body });
      expect(ok.status).toBe(204);
      const block = await server.waitFor(/^(#1 .*\n(?: {2}.*\n)*? {2}answered 204)$/m);
      expect(block.split('\n')).toEqual([
        expect.stringMatching(/^#1 \d{4}-\d\d-\d\dT[0-9:.]+Z POST \/webhooks \(attempt 1\)$/),
        '  verified: webhook-id "msg_listen" with secrets[0] (v1)',
        '  body: 15 bytes: "{\\"type\\":\\"ping\\"}"',
        '  answered 204',
      ]);

      const forged = await signWebhook({ secret: OTHER_SECRET, body, id: 'msg_forged' });
      const bad = await fetch(`${server.url}/webhooks`, { method: 'POST', headers: forged.headers, body });
      expect(bad.status).toBe(401);
      expect(await bad.json()).toEqual({ error: 'SIGNATURE_MISMATCH', message: expect.stringMatching(/^no signature matched/) });
      const rejected = await server.waitFor(/^(#2 [^\n]*\n(?:.*\n)*? {2}answered 401)$/m);
      expect(rejected).toContain('\n  REJECTED SIGNATURE_MISMATCH\n');
      expect(rejected).toContain('\n    expected a signed webhook, but verification failed with SIGNATURE_MISMATCH');
      expect(rejected).toContain('\n    Diagnosis: none of the usual sender bugs reproduces these signatures');
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await server.exit).toBe(0);
    expect(server.output()).toMatch(/stopped after 2 deliveries\n$/);
    expectNoSecrets(server.output(), [SECRET, OTHER_SECRET]);
  });

  it('answers a forged request at once, and does not diagnose a body over its limit, saying so', async () => {
    const server = await listen([], { WEBHOOK_SECRET: SECRET });
    try {
      const body = JSON.stringify({ type: 'big', padding: 'x'.repeat(1024 * 1024 - 100) });
      const forged = await signWebhook({ secret: OTHER_SECRET, body, id: 'msg_big' });
      const bad = await fetch(`${server.url}/webhooks`, { method: 'POST', headers: forged.headers, body });
      expect(bad.status).toBe(401);
      const block = await server.waitFor(/^(#1 [^\n]*\n(?:.*\n)*? {2}answered 401)$/m);
      expect(block).toContain(`\n  (not diagnosed: the body is ${Buffer.byteLength(body)} bytes, over the 65536 bytes listen diagnoses)\n`);
      expect(block).not.toContain('Diagnosis');
      // Control characters a client sends are escaped in the printed block.
      const sneaky = await signWebhook({ secret: OTHER_SECRET, body: '{}', id: 'msg_\t\u009b2J' });
      expect((await fetch(`${server.url}/hook`, { method: 'POST', headers: sneaky.headers, body: '{}' })).status).toBe(401);
      const second = await server.waitFor(/^(#2 [^\n]*\n(?:.*\n)*? {2}answered 401)$/m);
      expect(second).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await server.exit).toBe(0);
  });

  it('forwards verified deliveries and answers with the app\'s status; rejected ones are not forwarded', async () => {
    const app = await createTestReceiver({ secrets: SECRET, respond: () => 202 });
    const server = await listen(['--secret', SECRET, '--forward', `${app.url}/app`]);
    try {
      expect(server.output()).toContain(`; forwarding verified deliveries to ${app.url}/app).`);
      const body = '{"n":1}';
      const signed = await signWebhook({ secret: SECRET, body, id: 'msg_fwd' });
      const response = await fetch(`${server.url}/in`, { method: 'POST', headers: { ...signed.headers, 'x-extra': 'kept' }, body });
      expect(response.status).toBe(202);
      const forged = await signWebhook({ secret: OTHER_SECRET, body, id: 'msg_no' });
      expect((await fetch(`${server.url}/in`, { method: 'POST', headers: forged.headers, body })).status).toBe(401);
      await server.waitFor(/^#2 /m);
      await server.waitFor(/answered 401/);
      const deliveries = await app.waitForDeliveries(1);
      expect(app.deliveries).toHaveLength(1);
      expect(deliveries[0]!.path).toBe('/app');
      expect(deliveries[0]!.verification.ok && deliveries[0]!.verification.webhook.id).toBe('msg_fwd');
      expect(new TextDecoder().decode(deliveries[0]!.body)).toBe(body);
      expect(deliveries[0]!.headers).toContainEqual(['x-extra', 'kept']);
      expect(server.output()).toContain(`  forwarded to ${app.url}/app: 202\n  answered 202\n`);
    } finally {
      server.child.kill('SIGTERM');
      await app.close();
    }
    expect(await server.exit).toBe(0);
  });

  it('answers 502 when the forward target is down', async () => {
    const probe = createServer();
    await new Promise<void>((resolvePromise) => probe.listen(0, '127.0.0.1', resolvePromise));
    const deadPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolvePromise) => probe.close(() => resolvePromise()));
    const server = await listen(['--secret', SECRET, '--forward', `http://127.0.0.1:${deadPort}/`]);
    try {
      const signed = await signWebhook({ secret: SECRET, body: '{}' });
      const response = await fetch(server.url, { method: 'POST', headers: signed.headers, body: '{}' });
      expect(response.status).toBe(502);
      expect(await response.json()).toEqual({ error: 'FORWARD_FAILED', message: 'ECONNREFUSED' });
      await server.waitFor(new RegExp(`forwarding to http://127\\.0\\.0\\.1:${deadPort}/ failed: ECONNREFUSED\\n {2}answered 502`));
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await server.exit).toBe(0);
  });

  it('exits 1 when the port is taken, 2 on a bad port', async () => {
    const holder = createServer();
    await new Promise<void>((resolvePromise) => holder.listen(0, '127.0.0.1', resolvePromise));
    const port = (holder.address() as AddressInfo).port;
    try {
      const taken = await run(['listen', '--secret', SECRET, '--port', String(port)]);
      expect(taken.code).toBe(1);
      expect(taken.stderr).toBe(`webhook-receiver listen: port ${port} is in use: pick another with --port\n`);
    } finally {
      await new Promise<void>((resolvePromise) => holder.close(() => resolvePromise()));
    }
    const bad = await run(['listen', '--secret', SECRET, '--port', '99999']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("webhook-receiver listen: --port must be a number from 0 to 65535\nRun 'webhook-receiver listen --help' for usage.\n");
  });
});

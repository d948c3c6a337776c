/**
 * Secrets never leave: known secrets are fed through every failure path the package has, and
 * everything it produced is scanned for them.
 *
 * Paths: the verifier (every error code, `verify` and `verifyRequest`), start-up errors for every
 * kind of bad secret (each made from a real secret, so the message has something to leak), the
 * receiver's `onError` (custom and default `console.error`), the four adapters (responses,
 * `onRejected` contexts, the default `console.warn` line), the testing assertions and matchers,
 * and the CLI's output.
 *
 * Produced: error messages, stacks, `util.inspect` and `JSON.stringify` of each error and its
 * cause, hook arguments, response statuses, headers and bodies, everything written to
 * `console.*`, and the CLI's stdout and stderr. Scanned for each secret string, its base64
 * payload, its key bytes in hex and base64url, and every 16-character run of those (a truncated
 * secret is still a leak). Where the package promises it (verifier errors and adapter output),
 * also for the signature the trusted key would have produced. A failing scan names where the
 * leak is, never the secret.
 */

import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect, promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhooks as fastifyWebhooks } from '../../adapters/fastify.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { webhooks as honoWebhooks } from '../../adapters/hono.ts';
import { isWebhookError } from '../../src/errors.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { createReceiver, type ReceiverOptions } from '../../src/receiver.ts';
import type { SecretInput } from '../../src/secrets.ts';
import { signWebhook } from '../../src/sign.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import { assertSignedWebhook, assertUnsignedWebhook, webhookMatchers } from '../../src/testing/index.ts';
import { createVerifier, type VerifierOptions, type WebhookInput } from '../../src/verify.ts';
import { findWindow, hmacSignature, secretWindows } from '../fuzz/support.ts';
import { cliArgs } from '../support/cli-entry.ts';

const NOW = 1_700_000_000;
const now = () => NOW * 1000;

// ---------------------------------------------------------------------------------------------
// The secrets, and what counts as leaking one.

/** A key whose base64 has '+' or '/', so its base64url form differs (a bad-secret case below). */
function keyWithSymbols(bytes: number): Buffer {
  for (;;) {
    const key = randomBytes(bytes);
    if (/[+/]/.test(key.toString('base64'))) return key;
  }
}
const keyA = keyWithSymbols(32);
const keyB = keyWithSymbols(24);
const A = `whsec_${keyA.toString('base64')}`;
const B = `whsec_${keyB.toString('base64')}`;
const ed = generateKeyPairSync('ed25519');
const edSeed = Buffer.from(ed.privateKey.export({ format: 'jwk' }).d!, 'base64url');
const edPublic = Buffer.from(ed.publicKey.export({ format: 'jwk' }).x!, 'base64url');
/** The sender's Ed25519 secret key: must never appear either. The public key may. */
const SK = `whsk_${Buffer.concat([edSeed, edPublic]).toString('base64')}`;
const PK = `whpk_${edPublic.toString('base64')}`;
const TRUSTED: SecretInput[] = [A, { key: B, keyId: 'rotation-2' }, PK];
/** A sender key pair that is not trusted. */
const stranger = generateKeyPairSync('ed25519');
const SK_OTHER = `whsk_${Buffer.concat([
  Buffer.from(stranger.privateKey.export({ format: 'jwk' }).d!, 'base64url'),
  Buffer.from(stranger.publicKey.export({ format: 'jwk' }).x!, 'base64url'),
]).toString('base64')}`;

const secretTexts = [A, B, SK, keyA.toString('base64'), keyB.toString('base64'), SK.slice(5), edSeed.toString('base64')];
for (const key of [keyA, keyB, edSeed]) secretTexts.push(key.toString('hex'), key.toString('base64url'));
const SECRET_WINDOWS = secretWindows(secretTexts);
/** Signatures the trusted keys would produce for the requests below; filled as requests are made. */
const expectedSignatures = new Set<string>();

// ---------------------------------------------------------------------------------------------
// Everything produced.

const produced: { where: string; text: string; expectedToo: boolean }[] = [];

function describeValue(value: unknown): string {
  if (value instanceof Error) {
    const parts = [String(value), value.stack ?? '', inspect(value, { depth: 6 }), safeJson(value)];
    if (value.cause !== undefined) parts.push(describeValue(value.cause));
    return parts.join('\n');
  }
  return typeof value === 'string' ? value : `${inspect(value, { depth: 6 })}\n${safeJson(value)}`;
}
function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '';
  }
}
function record(where: string, value: unknown, expectedToo = false): void {
  produced.push({ where, text: describeValue(value), expectedToo });
}

const CONSOLE_METHODS = ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const;
beforeAll(() => {
  for (const method of CONSOLE_METHODS) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => record(`console.${method}`, args.map(describeValue).join(' '), true));
  }
});

afterAll(() => {
  vi.restoreAllMocks();
});

/**
 * Scans what `surface` produced. Console lines are recorded as `console.*` and relabelled by the
 * test that expects them, so an unexpected log line anywhere is caught by the last test.
 */
function expectNothingLeaked(surface: string): void {
  const expectedWindows = secretWindows(expectedSignatures, 20);
  const from = produced.filter((p) => p.where.startsWith(surface));
  expect(from.length, `${surface}: nothing was produced, so nothing was scanned`).toBeGreaterThan(0);
  for (const { where, text, expectedToo } of from) {
    // The message names where, never the secret itself.
    if (findWindow(text, SECRET_WINDOWS) !== undefined) expect.fail(`${where} contains secret material`);
    if (expectedToo && findWindow(text, expectedWindows) !== undefined) expect.fail(`${where} contains the signature the trusted key produces`);
  }
}

/** Gives the console lines recorded so far to `surface`; returns how many. */
function claimConsole(method: (typeof CONSOLE_METHODS)[number], surface: string): number {
  const lines = produced.filter((p) => p.where === `console.${method}`);
  for (const line of lines) line.where = `${surface}: console.${method}`;
  return lines.length;
}

// ---------------------------------------------------------------------------------------------
// Requests that fail in every way, made with the real secrets.

const ID = 'msg_leak';
const BODY = '{"type":"invoice.paid","amount":100}';

async function signedHeaders(options: { secret?: SecretInput | SecretInput[]; id?: string; timestamp?: number; body?: string } = {}) {
  const signed = await signWebhook({ secret: options.secret ?? A, id: options.id ?? ID, timestamp: options.timestamp ?? NOW, body: options.body ?? BODY });
  return { ...signed.headers };
}

/** The signatures A and B would give `body` under this id and timestamp: what a mismatch must not reveal. */
function rememberExpected(id: string, timestamp: string, body: string): void {
  for (const key of [keyA, keyB]) expectedSignatures.add(hmacSignature(key, id, timestamp, body));
}

interface Case {
  name: string;
  code: string;
  input: () => Promise<WebhookInput>;
}

const t = String(NOW);
const CASES: Case[] = [
  { name: 'no id', code: 'MISSING_ID', input: async () => ({ headers: { ...(await signedHeaders()), 'webhook-id': '' }, body: BODY }) },
  { name: 'no timestamp', code: 'MISSING_TIMESTAMP', input: async () => ({ headers: { ...(await signedHeaders()), 'webhook-timestamp': '' }, body: BODY }) },
  { name: 'bad timestamp', code: 'INVALID_TIMESTAMP', input: async () => ({ headers: { ...(await signedHeaders()), 'webhook-timestamp': `${t}abc` }, body: BODY }) },
  { name: 'milliseconds', code: 'INVALID_TIMESTAMP', input: async () => ({ headers: { ...(await signedHeaders()), 'webhook-timestamp': `${t}000` }, body: BODY }) },
  { name: 'stale', code: 'TIMESTAMP_TOO_OLD', input: async () => ({ headers: await signedHeaders({ timestamp: NOW - 3600 }), body: BODY }) },
  { name: 'future', code: 'TIMESTAMP_TOO_NEW', input: async () => ({ headers: await signedHeaders({ timestamp: NOW + 3600 }), body: BODY }) },
  { name: 'unsigned', code: 'MISSING_SIGNATURE', input: async () => ({ headers: { 'webhook-id': ID, 'webhook-timestamp': t }, body: BODY }) },
  { name: 'empty entry', code: 'INVALID_SIGNATURE_HEADER', input: async () => { const h = await signedHeaders(); return { headers: { ...h, 'webhook-signature': `${h['webhook-signature']}  v1,x` }, body: BODY }; } },
  // Over 64 entries; a header over 16 KiB is also over Node's own limit for all headers together,
  // so Node answers 431 before any adapter runs (the verifier test covers that length).
  { name: 'too many entries', code: 'INVALID_SIGNATURE_HEADER', input: async () => { const h = await signedHeaders(); return { headers: { ...h, 'webhook-signature': `${h['webhook-signature']}${' v1,AAAA'.repeat(64)}` }, body: BODY }; } },
  {
    name: 'tampered body',
    code: 'SIGNATURE_MISMATCH',
    input: async () => {
      const body = BODY.replace('100', '1000000');
      rememberExpected(ID, t, body);
      return { headers: await signedHeaders(), body };
    },
  },
  {
    name: 'unknown key',
    code: 'SIGNATURE_MISMATCH',
    input: async () => {
      rememberExpected(ID, t, BODY);
      return { headers: await signedHeaders({ secret: `whsec_${randomBytes(32).toString('base64')}` }), body: BODY };
    },
  },
  {
    name: 'secret used as text by the sender',
    code: 'SIGNATURE_MISMATCH',
    input: async () => {
      rememberExpected(ID, t, BODY);
      return { headers: { 'webhook-id': ID, 'webhook-timestamp': t, 'webhook-signature': `v1,${hmacSignature(Buffer.from(A), ID, t, BODY)}` }, body: BODY };
    },
  },
  {
    name: 'another id',
    code: 'SIGNATURE_MISMATCH',
    input: async () => {
      rememberExpected('msg_other', t, BODY);
      return { headers: { ...(await signedHeaders()), 'webhook-id': 'msg_other' }, body: BODY };
    },
  },
  { name: 'v1a from another key', code: 'SIGNATURE_MISMATCH', input: async () => ({ headers: await signedHeaders({ secret: SK_OTHER }), body: BODY }) },
  { name: 'body too large', code: 'PAYLOAD_TOO_LARGE', input: async () => { const body = 'x'.repeat(5000); return { headers: await signedHeaders({ body }), body }; } },
];
const verifierOptions: VerifierOptions = { secrets: TRUSTED, now, maxBodyBytes: 4096 };

// ---------------------------------------------------------------------------------------------

describe('the verifier', () => {
  const verifier = createVerifier(verifierOptions);

  it.each(CASES.map((c) => [c.name, c] as const))('%s: refused, and the error carries no secret', async (_name, c) => {
    const input = await c.input();
    const outcome = await verifier.verify(input).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isWebhookError(outcome) && outcome.code).toBe(c.code);
    record('verifier', outcome, true);

    // The same through verifyRequest, with the body as a stream.
    const request = new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: input.headers as Record<string, string>, body: input.body as string });
    const viaRequest = await verifier.verifyRequest(request).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isWebhookError(viaRequest) && viaRequest.code).toBe(c.code);
    record('verifier', viaRequest, true);
  });

  it('a signature header over 16 KiB carries no secret', async () => {
    const headers = await signedHeaders();
    const error = await verifier.verify({ headers: { ...headers, 'webhook-signature': `${headers['webhook-signature']}${' v1,AAAA'.repeat(3000)}` }, body: BODY }).catch((e: unknown) => e);
    expect(isWebhookError(error) && error.code).toBe('INVALID_SIGNATURE_HEADER');
    record('verifier', error, true);
  });

  it('BODY_UNAVAILABLE carries no secret', async () => {
    const request = new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: await signedHeaders(), body: BODY });
    await request.text();
    const error = await verifier.verifyRequest(request).catch((e: unknown) => e);
    expect(isWebhookError(error) && error.code).toBe('BODY_UNAVAILABLE');
    record('verifier', error, true);
  });

  it('every kind of bad secret is refused at start-up without repeating it', async () => {
    const payloadA = keyA.toString('base64');
    const bad: [string, SecretInput | SecretInput[]][] = [
      ['trailing newline', `${A}\n`],
      ['inner space', `${A.slice(0, 20)} ${A.slice(20)}`],
      ['pasted as a signature entry', `v1,${A}`],
      ['sender key where a public key belongs', SK],
      ['base64url', `whsec_${keyA.toString('base64url')}`],
      ['not base64', `whsec_${payloadA.slice(0, -2)}!!`],
      ['unknown prefix', `whsex_${payloadA}`],
      ['too short', `whsec_${keyA.subarray(0, 8).toString('base64')}`],
      ['too short, raw bytes', keyA.subarray(0, 8)],
      ['bare base64url', keyA.toString('base64url')],
      ['public key of the wrong length', `whpk_${keyB.toString('base64')}`],
      ['in a list with a keyId', [B, { key: `${A} `, keyId: 'k-1' }]],
    ];
    for (const [name, secrets] of bad) {
      let thrown: unknown;
      try {
        createVerifier({ secrets });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, name).toBeInstanceOf(Error);
      expect((thrown as Error).constructor === TypeError || (thrown as Error).constructor === RangeError, name).toBe(true);
      record(`verifier: start-up (${name})`, thrown);
    }
    // The signing side refuses a public key, and a secret key it cannot use, the same way.
    for (const secret of [PK, `${SK}AA`, `whsk_${keyA.subarray(0, 20).toString('base64')}`]) {
      const error = await signWebhook({ secret, body: BODY }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      record('verifier: signing start-up', error);
    }
  });

  it('scan', () => expectNothingLeaked('verifier'));
});

describe('the receiver', () => {
  const failing = (what: 'claim' | 'complete' | 'release'): IdempotencyStore => ({
    claim: async () => {
      if (what === 'claim') throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
      return { status: 'acquired', token: 't' };
    },
    complete: async () => {
      if (what === 'complete') throw new Error('Connection is closed.');
      return true;
    },
    release: async () => {
      if (what === 'release') throw new Error('Connection is closed.');
      return true;
    },
  });
  const valid = async (): Promise<WebhookInput> => ({ headers: await signedHeaders({ id: `msg_${randomBytes(4).toString('hex')}` }), body: BODY });

  it('store failures reach onError (custom and default) and the caller without a secret', async () => {
    for (const custom of [true, false]) {
      const options = (what: 'claim' | 'complete' | 'release', onStoreError: 'reject' | 'process' = 'reject'): ReceiverOptions => ({
        ...verifierOptions,
        idempotency: { store: failing(what), onStoreError },
        ...(custom ? { onError: (error: unknown, context: unknown) => record('receiver: onError', { error, context }) } : {}),
      });
      const unavailable = await createReceiver(options('claim')).handle(await valid(), () => 1).catch((e: unknown) => e);
      expect(isWebhookError(unavailable) && unavailable.code).toBe('STORE_UNAVAILABLE');
      record('receiver: STORE_UNAVAILABLE', unavailable, true);
      expect((await createReceiver(options('claim', 'process')).handle(await valid(), () => 1)).outcome).toBe('processed');
      expect((await createReceiver(options('complete')).handle(await valid(), () => 1)).outcome).toBe('processed');
      const thrown = await createReceiver(options('release')).handle(await valid(), () => {
        throw new Error('handler failed');
      }).catch((e: unknown) => e);
      expect((thrown as Error).message).toBe('handler failed');
    }
    // The default onError: one line per store failure of the uncustomised run.
    expect(claimConsole('error', 'receiver')).toBe(3);
  });

  it('verification failures through handle() carry no secret', async () => {
    const receiver = createReceiver(verifierOptions);
    for (const c of CASES) {
      const error = await receiver.handle(await c.input(), () => 1).catch((e: unknown) => e);
      expect(isWebhookError(error) && error.code, c.name).toBe(c.code);
      record('receiver: handle', error, true);
    }
  });

  it('scan', () => expectNothingLeaked('receiver'));
});

// ---------------------------------------------------------------------------------------------
// The adapters: each answers every failing request; responses, hook arguments and default log
// lines are recorded.

type Send = (input: WebhookInput, path: string) => Promise<{ status: number; headers: Record<string, string>; body: string }>;

async function expressEndpoint(options: AdapterOptions): Promise<{ send: Send; close: () => Promise<void> }> {
  const { default: express } = await import('express');
  const app = express();
  app.post('/webhooks', expressWebhooks(options), (_req, res) => void res.status(204).end());
  const server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    send: async (input, path) => {
      const response = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: input.headers as Record<string, string>, body: input.body as string });
      return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function fastifyEndpoint(options: AdapterOptions): Promise<{ send: Send; close: () => Promise<void> }> {
  const { default: Fastify } = await import('fastify');
  const app = Fastify();
  await app.register(async (scope) => {
    await scope.register(fastifyWebhooks, options);
    scope.post('/webhooks', async (_request, reply) => reply.code(204).send());
  });
  await app.ready();
  return {
    send: async (input, path) => {
      const response = await app.inject({ method: 'POST', url: path, headers: { 'content-type': 'application/json', ...(input.headers as Record<string, string>) }, payload: input.body as string });
      return { status: response.statusCode, headers: response.headers as Record<string, string>, body: response.body };
    },
    close: () => app.close(),
  };
}

async function honoEndpoint(options: AdapterOptions): Promise<{ send: Send; close: () => Promise<void> }> {
  const { Hono } = await import('hono');
  const app = new Hono();
  app.post('/webhooks', honoWebhooks(options), (c) => c.body(null, 204));
  return {
    send: async (input, path) => {
      const response = await app.request(path, { method: 'POST', headers: input.headers as Record<string, string>, body: input.body as string });
      return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
    },
    close: async () => undefined,
  };
}

async function fetchEndpoint(options: AdapterOptions): Promise<{ send: Send; close: () => Promise<void> }> {
  const handler = webhookHandler(options, () => new Response(null, { status: 204 }));
  return {
    send: async (input, path) => {
      const response = await handler(new Request(`http://127.0.0.1${path}`, { method: 'POST', headers: input.headers as Record<string, string>, body: input.body as string }));
      return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
    },
    close: async () => undefined,
  };
}

describe.each([
  ['express', expressEndpoint],
  ['fastify', fastifyEndpoint],
  ['hono', honoEndpoint],
  ['fetch', fetchEndpoint],
] as const)('the %s adapter', (name, make) => {
  it('answers every failing request, with a hook and with the default log line, without a secret', async () => {
    const unreachable: IdempotencyStore = {
      claim: async () => {
        throw new Error('connect ECONNREFUSED');
      },
      complete: async () => true,
      release: async () => true,
    };
    for (const hooked of [true, false]) {
      const options: AdapterOptions = {
        ...verifierOptions,
        ...(hooked ? { onRejected: (error, context) => record(`adapter ${name}: onRejected`, { error, context }, true) } : {}),
      };
      const endpoint = await make(options);
      const unavailable = await make({ ...options, idempotency: { store: unreachable } });
      try {
        // A secret in the query string must not reach the hook's path or a log line either.
        const path = `/webhooks?token=${encodeURIComponent(A)}`;
        for (const c of CASES) {
          const reply = await endpoint.send(await c.input(), path);
          expect(JSON.parse(reply.body), `${name} ${c.name}`).toMatchObject({ error: c.code });
          record(`adapter ${name}: response`, reply, true);
        }
        const reply = await unavailable.send({ headers: await signedHeaders(), body: BODY }, path);
        expect(reply.status).toBe(503);
        record(`adapter ${name}: response`, reply, true);
      } finally {
        await endpoint.close();
        await unavailable.close();
      }
    }
  });
});

describe('the adapters', () => {
  it('scan', () => {
    // The default onRejected: one line per refused request of the unhooked run, in each adapter.
    expect(claimConsole('warn', 'adapter')).toBe(4 * (CASES.length + 1));
    expectNothingLeaked('adapter');
  });
});

// ---------------------------------------------------------------------------------------------

describe('the testing assertions and matchers', () => {
  it('every failure message is free of the secrets it was given', async () => {
    const options = { secrets: TRUSTED, now };
    const requests: [string, () => Promise<WebhookInput>][] = [
      ...CASES.filter((c) => c.code !== 'PAYLOAD_TOO_LARGE').map((c): [string, () => Promise<WebhookInput>] => [c.name, c.input]),
      [
        'sender left the whsec_ prefix in',
        async () => ({ headers: { 'webhook-id': ID, 'webhook-timestamp': t, 'webhook-signature': `v1,${hmacSignature(Buffer.from(A.slice(6), 'utf8'), ID, t, BODY)}` }, body: BODY }),
      ],
      ['re-serialised JSON', async () => ({ headers: await signedHeaders(), body: JSON.stringify(JSON.parse(BODY), null, 2) })],
    ];
    for (const [name, input] of requests) {
      const request = await input();
      const error = await assertSignedWebhook(request, options).catch((e: unknown) => e);
      expect(error, name).toBeInstanceOf(Error);
      record(`testing: assertSignedWebhook (${name})`, error, true);
      const result = await webhookMatchers.toBeSignedWebhook.call({}, request, options);
      expect(result.pass, name).toBe(false);
      record(`testing: toBeSignedWebhook (${name})`, result.message(), true);
    }
    const signed = { headers: await signedHeaders({ secret: [A, SK] }), body: BODY };
    record('testing: assertUnsignedWebhook', await assertUnsignedWebhook(signed).catch((e: unknown) => e));
    record('testing: toBeUnsignedWebhook', (await webhookMatchers.toBeUnsignedWebhook.call({}, signed)).message());
    // The passing matcher's message (shown under .not) too.
    const pass = await webhookMatchers.toBeSignedWebhook.call({ isNot: true }, signed, options);
    expect(pass.pass).toBe(true);
    record('testing: .not.toBeSignedWebhook', pass.message());
    // Bad secrets given to the assertion.
    record('testing: bad secret', await assertSignedWebhook(signed, { secrets: `${A}\n` }).catch((e: unknown) => e));
  });

  it('scan', () => expectNothingLeaked('testing'));
});

// ---------------------------------------------------------------------------------------------

describe('the CLI', () => {
  const run = promisify(execFile);
  const exec = async (args: string[], env: Record<string, string>): Promise<string> => {
    try {
      const { stdout, stderr } = await run(process.execPath, [...cliArgs(), ...args], { env: { ...process.env, ...env }, timeout: 20_000 });
      return `${stdout}\n${stderr}`;
    } catch (error) {
      const { stdout = '', stderr = '', code } = error as { stdout?: string; stderr?: string; code?: number };
      expect([1, 2], `${args[0]} exits with 1 or 2, not a crash`).toContain(code);
      return `${stdout}\n${stderr}`;
    }
  };

  it('verify, sign and misuse print no secret', async () => {
    const headerArgs = (headers: Record<string, string>) => Object.entries(headers).flatMap(([n, v]) => ['--header', `${n}: ${v}`]);
    const wrongKey = await signedHeaders({ secret: `whsec_${randomBytes(32).toString('base64')}` });
    const asText = { 'webhook-id': ID, 'webhook-timestamp': t, 'webhook-signature': `v1,${hmacSignature(Buffer.from(A), ID, t, BODY)}` };
    const outputs = await Promise.all([
      exec(['verify', ...headerArgs(wrongKey), '--body', BODY, '--now', t], { WEBHOOK_SECRET: `${A},${B}` }),
      exec(['verify', ...headerArgs(asText), '--body', BODY, '--now', t], { WEBHOOK_SECRET: `${A},${B}` }),
      exec(['verify', ...headerArgs(await signedHeaders()), '--body', `${BODY} `, '--now', t], { WEBHOOK_SECRET: A }),
      exec(['sign', '--body', BODY, '--id', ID, '--timestamp', t], { WEBHOOK_SECRET: A }),
      exec(['verify', ...headerArgs(await signedHeaders()), '--body', BODY], { WEBHOOK_SECRET: `v1,${A}` }),
      exec(['verify', ...headerArgs(await signedHeaders()), '--body', BODY, A], { WEBHOOK_SECRET: A }),
    ]);
    // Run 3 is `sign`: printing a valid signature is its job. The others must not.
    for (const [i, output] of outputs.entries()) record(`cli: run ${i}`, output, i !== 3);
    expect(outputs[0]).toMatch(/SIGNATURE_MISMATCH|signature/i);
  }, 60_000);

  it('scan', () => expectNothingLeaked('cli'));
});

describe('everything', () => {
  it('no other console output, and a last scan of all of it', () => {
    expect(produced.filter((p) => p.where.startsWith('console.')).map((p) => p.where)).toEqual([]);
    expect(produced.length).toBeGreaterThan(150);
    for (const surface of ['verifier', 'receiver', 'adapter', 'testing', 'cli']) expectNothingLeaked(surface);
  });
});

/**
 * `checkEndpoint`: every adapter of this package conforms, served by its real
 * framework over real HTTP and, for the Fetch ones, called directly; and each deliberately broken
 * receiver below is caught by exactly the rows that describe its bug.
 */

import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import Router from '@koa/router';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { afterAll, describe, expect, it } from 'vitest';
import { webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhooks as fastifyWebhooks } from '../../adapters/fastify.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { webhooks as honoWebhooks } from '../../adapters/hono.ts';
import { webhooks as koaWebhooks, type WebhookState } from '../../adapters/koa.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { tenantKeys } from '../../src/keys.ts';
import { generateKeyPair, generateSecret } from '../../src/sign.ts';
import { createVerifier } from '../../src/verify.ts';
import {
  CHECK_CASES,
  EndpointCheckError,
  assertEndpointConforms,
  checkEndpoint,
  formatCheckReport,
  type CheckCaseId,
  type CheckReport,
  type FetchHandler,
} from '../../src/testing/index.ts';
import '../../src/testing/vitest.ts';
import { expectNoSecrets } from './support.ts';

const A = generateSecret();
const B = generateSecret();
const SECRETS = [A, B];
const quiet: Partial<AdapterOptions> = { onRejected: () => {} };
const SECURITY: CheckCaseId[] = [
  'valid',
  'rotation-all-keys',
  'rotation-new-key-first',
  'rotation-second-key',
  'json-formatting',
  'non-ascii',
  'tampered-body',
  'tampered-id',
  'tampered-timestamp',
  'unknown-key',
  'unsigned',
  'stale-past',
  'stale-future',
  'milliseconds',
  'reserialised-body',
  'many-entries',
];
/** Cases that run only for an endpoint with tenant keys (their URLs given). */
const TENANT_CASES: readonly CheckCaseId[] = ['unknown-tenant', 'cross-tenant'];

function verdicts(report: CheckReport): Record<string, string> {
  return Object.fromEntries(report.rows.map((row) => [row.id, row.verdict]));
}

function failed(report: CheckReport): string[] {
  return report.failures.map((row) => row.id).sort();
}

/** What every conforming endpoint of this package shows: every judged row passes, exactly. */
function expectConforming(report: CheckReport): void {
  expect(report.reachable).toBe(true);
  expect(report).toConformToStandardWebhooks();
  const v = verdicts(report);
  for (const id of SECURITY) expect(v[id], id).toBe('pass');
  // The package's duplicate convention makes the idempotency rows exact.
  expect([v.duplicate, v.retry, v.concurrent]).toEqual(['pass', 'pass', 'pass']);
  const notTenant = (id: CheckCaseId) => !TENANT_CASES.includes(id);
  expect(report.rows.map((row) => row.id).filter(notTenant)).toEqual(CHECK_CASES.map((c) => c.id).filter(notTenant));
  expect(report.rows.find((row) => row.id === 'oversized')).toMatchObject({ status: 413, verdict: 'reported' });
  expect(report.requests).toBe(report.rows.reduce((sum, row) => sum + row.statuses.length, 0));
  for (const row of report.rows.filter((r) => r.group !== 'timing')) expect(row.sent.headers['webhook-id'] ?? row.sent.headers['svix-id']).toMatch(/^msg_check_/);
  const text = JSON.stringify(report) + formatCheckReport(report, { curl: true });
  expectNoSecrets(text, SECRETS);
}

// ---------------------------------------------------------------------------------------------
// Servers on 127.0.0.1, stopped after the file

const servers: Server[] = [];
afterAll(async () => {
  await Promise.all(
    servers.map(
      (server) =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    ),
  );
});

async function serve(server: Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
}

const fetchApp = (options: AdapterOptions = { secrets: SECRETS, ...quiet }): FetchHandler =>
  webhookHandler(options, async () => new Response(JSON.stringify({ received: true }), { status: 200, headers: { 'content-type': 'application/json' } }));

function honoApp(options: AdapterOptions = { secrets: SECRETS, ...quiet }): Hono {
  const app = new Hono();
  app.post('/webhooks', honoWebhooks(options), (c) => c.body(null, 204));
  return app;
}

describe('every adapter of this package conforms', () => {
  it('Express, over real HTTP', async () => {
    const app = express();
    app.post('/webhooks', expressWebhooks({ secrets: SECRETS, ...quiet }), (_req, res) => void res.sendStatus(204));
    expectConforming(await checkEndpoint(await serve(createServer(app)), { secrets: SECRETS }));
  });

  it('Fastify, over real HTTP', async () => {
    const app = Fastify();
    app.register(async (scope) => {
      await scope.register(fastifyWebhooks, { secrets: SECRETS, ...quiet });
      scope.post('/webhooks', async (_request, reply) => reply.code(204).send());
    });
    await app.ready();
    servers.push(app.server);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/webhooks`;
    expectConforming(await checkEndpoint(url, { secrets: SECRETS }));
  });

  it('Hono, over real HTTP (@hono/node-server) and through app.fetch', async () => {
    const app = honoApp();
    expectConforming(await checkEndpoint(await serve(createAdaptorServer({ fetch: app.fetch }) as Server), { secrets: SECRETS }));
    expectConforming(await checkEndpoint(app.fetch, { secrets: SECRETS, url: 'http://localhost/webhooks' }));
  });

  it('the Fetch handler, called directly and over real HTTP', async () => {
    const handler = fetchApp();
    expectConforming(await checkEndpoint(handler, { secrets: SECRETS }));
    expectConforming(await checkEndpoint(await serve(createAdaptorServer({ fetch: handler }) as Server), { secrets: SECRETS }));
  });

  it('v1a (Ed25519): the check signs with whsk_, the endpoint trusts whpk_', async () => {
    const pair = await generateKeyPair();
    const second = await generateKeyPair();
    const report = await checkEndpoint(fetchApp({ secrets: [pair.publicKey, second.publicKey], ...quiet }), { secrets: [pair.secretKey, second.secretKey] });
    expect(failed(report)).toEqual([]);
    expect(report.rows.find((row) => row.id === 'valid')!.sent.headers['webhook-signature']).toMatch(/^v1a,/);
    expectNoSecrets(JSON.stringify(report), [pair.secretKey, second.secretKey]);
  });

  it('an endpoint that accepts unsigned deliveries, checked with unsigned: accept', async () => {
    const handler = fetchApp({ secrets: SECRETS, unsigned: 'accept', ...quiet });
    const report = await checkEndpoint(handler, { secrets: SECRETS, unsigned: 'accept' });
    expect(report.conforms).toBe(true);
    expect(report.rows.find((row) => row.id === 'unsigned')).toMatchObject({ expected: '2xx (unsigned accepted)', verdict: 'pass' });
    // And the default expectation catches it.
    const strict = await checkEndpoint(handler, { secrets: SECRETS, only: ['unsigned'] });
    expect(failed(strict)).toEqual(['unsigned']);
  });
});

// ---------------------------------------------------------------------------------------------
// Broken receivers, written for the test

const keyBytes = (secret: string) => Buffer.from(secret.slice('whsec_'.length), 'base64');

function hmac(secret: string, id: string, timestamp: string, body: string): Buffer {
  return createHmac('sha256', keyBytes(secret)).update(`${id}.${timestamp}.${body}`).digest();
}

function matches(entry: string, secrets: string[], id: string, timestamp: string, body: string): boolean {
  if (!entry.startsWith('v1,')) return false;
  const given = Buffer.from(entry.slice(3), 'base64');
  return secrets.some((secret) => {
    const expected = hmac(secret, id, timestamp, body);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const refuse = (status: number, error: string) => Response.json({ error, message: error.toLowerCase() }, { status });

/**
 * A hand-written receiver with one knob per classic bug; with none turned, it verifies the raw
 * bytes against every entry, checks the timestamp both ways and deduplicates on webhook-id.
 */
function handWritten(bugs: { noTimestampCheck?: boolean; firstEntryOnly?: boolean } = {}): FetchHandler {
  const seen = new Set<string>();
  return async (request) => {
    const id = request.headers.get('webhook-id');
    const timestamp = request.headers.get('webhook-timestamp');
    const header = request.headers.get('webhook-signature');
    const body = await request.text();
    if (!id || !timestamp || !/^[0-9]+$/.test(timestamp)) return refuse(400, 'BAD_HEADERS');
    if (!header) return refuse(401, 'MISSING_SIGNATURE');
    if (!bugs.noTimestampCheck && Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return refuse(401, 'STALE');
    const entries = bugs.firstEntryOnly ? header.split(' ').slice(0, 1) : header.split(' ');
    if (!entries.some((entry) => matches(entry, SECRETS, id, timestamp, body))) return refuse(401, 'SIGNATURE_MISMATCH');
    if (seen.has(id)) return Response.json({ duplicate: true });
    seen.add(id);
    return new Response(null, { status: 204 });
  };
}

describe('broken receivers are caught by the right rows', () => {
  it('the hand-written reference receiver with no bug conforms', async () => {
    const report = await checkEndpoint(handWritten(), { secrets: SECRETS });
    expect(failed(report)).toEqual([]);
  });

  it('parses the JSON and re-serialises it before verifying', async () => {
    const real = fetchApp();
    const reserialising: FetchHandler = async (request) => {
      const text = await request.text();
      let normalised: string;
      try {
        normalised = JSON.stringify(JSON.parse(text));
      } catch {
        return refuse(400, 'NOT_JSON');
      }
      return real(new Request(request.url, { method: 'POST', headers: request.headers, body: normalised }));
    };
    const report = await checkEndpoint(reserialising, { secrets: SECRETS });
    // It accepts a body that was never signed, and refuses a valid one whose bytes it rewrites.
    expect(failed(report)).toEqual(['json-formatting', 'reserialised-body']);
    expect(report.rows.find((row) => row.id === 'reserialised-body')).toMatchObject({ status: 200, reason: expect.stringMatching(/^ACCEPTED/) });
    expect(() => assertEndpointConforms(report)).toThrow(EndpointCheckError);
    expect(report).not.toConformToStandardWebhooks();
  });

  it('has no timestamp check', async () => {
    const report = await checkEndpoint(handWritten({ noTimestampCheck: true }), { secrets: SECRETS });
    expect(failed(report)).toEqual(['milliseconds', 'stale-future', 'stale-past']);
  });

  it('accepts unsigned deliveries', async () => {
    const real = fetchApp();
    const lax: FetchHandler = (request) => (request.headers.has('webhook-signature') ? real(request) : new Response(null, { status: 204 }));
    const report = await checkEndpoint(lax, { secrets: SECRETS });
    expect(failed(report)).toEqual(['unsigned']);
  });

  it('compares only the first signature entry, so a rotation fails', async () => {
    const report = await checkEndpoint(handWritten({ firstEntryOnly: true }), { secrets: SECRETS });
    expect(failed(report)).toEqual(['rotation-new-key-first']);
    expect(report.rows.find((row) => row.id === 'rotation-new-key-first')).toMatchObject({ observed: '401 SIGNATURE_MISMATCH', expected: '2xx' });
  });

  it('does not deduplicate: reported as observed, since handler runs are not visible', async () => {
    let runs = 0;
    const runsById = new Map<string, number>();
    const verifier = createVerifier({ secrets: SECRETS });
    const noDedup: FetchHandler = async (request) => {
      try {
        await verifier.verifyRequest(request);
      } catch {
        return refuse(401, 'REJECTED');
      }
      runs++;
      const id = request.headers.get('webhook-id')!;
      runsById.set(id, (runsById.get(id) ?? 0) + 1);
      return new Response(null, { status: 204 });
    };
    const report = await checkEndpoint(noDedup, { secrets: SECRETS, concurrency: 4 });
    expect(report.conforms).toBe(true);
    const rows = Object.fromEntries(report.rows.map((row) => [row.id, row]));
    expect(rows.duplicate).toMatchObject({ verdict: 'reported', statuses: [204, 204], reason: expect.stringContaining('not visible from outside') });
    expect(rows.retry).toMatchObject({ verdict: 'reported', statuses: [204, 204] });
    expect(rows.concurrent).toMatchObject({ verdict: 'reported', observed: '4 accepted', statuses: [204, 204, 204, 204] });
    // The handler really ran for every copy: what the rows could only suspect.
    expect(runs).toBeGreaterThanOrEqual(8);
    const byId = (id: string) => runsById.get(rows[id]!.sent.headers['webhook-id']!);
    expect(byId('duplicate')).toBe(2);
    expect(byId('retry')).toBe(2);
    expect(byId('concurrent')).toBe(4);
  });

  it('answers 5xx or hangs on forged deliveries: fail, bounded by the timeout', async () => {
    const real = fetchApp();
    const fragile: FetchHandler = async (request) => {
      const signature = request.headers.get('webhook-signature') ?? '';
      if (signature.split(' ').length > 8) throw new Error('index out of range');
      if (request.headers.get('webhook-timestamp')!.length > 10) return new Promise<Response>(() => {});
      return real(request);
    };
    const started = performance.now();
    const report = await checkEndpoint(fragile, { secrets: SECRETS, timeoutMs: 300, only: ['many-entries', 'milliseconds'] });
    expect(performance.now() - started).toBeLessThan(5000);
    expect(failed(report)).toEqual(['many-entries', 'milliseconds']);
    const rows = Object.fromEntries(report.rows.map((row) => [row.id, row]));
    expect(rows['many-entries']).toMatchObject({ status: null, observed: 'the handler threw (a platform answers 500): Error: index out of range' });
    expect(rows.milliseconds).toMatchObject({ status: null, observed: 'no answer within 300 ms' });
  });

  it('does slow work before refusing: a timing warning, not a failure', async () => {
    const real = fetchApp();
    const slow: FetchHandler = async (request) => {
      const response = await real(request);
      if (response.status === 401) await new Promise((resolve) => setTimeout(resolve, 400));
      return response;
    };
    const report = await checkEndpoint(slow, { secrets: SECRETS, only: ['stale-past', 'json-formatting', 'timing'] });
    expect(report.conforms).toBe(true);
    expect(report.warnings).toEqual([expect.stringMatching(/^refused cases took much longer than accepted ones \(stale-past \d+(\.\d)? ms; median accepted/)]);
    expect(report.rows.at(-1)).toMatchObject({ id: 'timing', verdict: 'reported', reason: expect.stringMatching(/^WARNING /) });
  });

  it('never repeats a secret an endpoint echoes back', async () => {
    const echo: FetchHandler = () => Response.json({ error: `BAD ${A}`, message: A }, { status: 401 });
    const report = await checkEndpoint(echo, { secrets: SECRETS, only: ['unknown-key'] });
    expect(failed(report)).toEqual(['valid']);
    expect(report.rows.find((row) => row.id === 'unknown-key')).toMatchObject({ verdict: 'not_observable' });
    expectNoSecrets(JSON.stringify(report) + formatCheckReport(report), SECRETS);
  });
});

// ---------------------------------------------------------------------------------------------
// The rest of the contract

describe('the oversized row', () => {
  /** The `oversized` row, with `valid` in front of it. */
  const oversizedRow = async (url: string) => (await checkEndpoint(url, { secrets: SECRETS, only: ['oversized'] })).rows.find((row) => row.id === 'oversized')!;

  it('reads the 413 that Fastify and Koa answer before the upload is cut, over real HTTP', async () => {
    const fastify = Fastify();
    fastify.register(async (scope) => {
      await scope.register(fastifyWebhooks, { secrets: SECRETS, ...quiet });
      scope.post('/webhooks', async (_request, reply) => reply.code(204).send());
    });
    await fastify.ready();
    servers.push(fastify.server);
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    const koa = new Koa();
    const router = new Router<WebhookState>();
    router.post('/webhooks', koaWebhooks({ secrets: SECRETS, ...quiet }), (ctx) => {
      ctx.status = 204;
    });
    koa.use(router.routes());
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- Koa's callback settles every error itself (ctx.onerror): its promise never rejects.
    const urls = [`http://127.0.0.1:${(fastify.server.address() as AddressInfo).port}/webhooks`, await serve(createServer(koa.callback()))];
    for (const url of urls) {
      // Both close the connection after the 413, while a 4 MiB upload is still being sent.
      expect(await oversizedRow(url)).toMatchObject({
        status: 413,
        observed: '413 PAYLOAD_TOO_LARGE',
        verdict: 'reported',
        reason: `refused a ${4 * 1024 * 1024} bytes body with 413`,
      });
    }
  });

  it('says the upload was cut when the endpoint closed the connection mid-upload, not that the request failed', async () => {
    // A raw endpoint over TCP: it answers the small valid delivery, and resets the connection of
    // a large upload after its first bytes, without an answer.
    const tcp = createTcpServer((socket) => {
      socket.once('data', (chunk) => {
        const declared = Number(/content-length: (\d+)/i.exec(chunk.toString('latin1'))?.[1] ?? 0);
        if (declared > 1024 * 1024) socket.resetAndDestroy();
        else socket.end('HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n');
      });
    });
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', () => resolve()));
    try {
      const row = await oversizedRow(`http://127.0.0.1:${(tcp.address() as AddressInfo).port}/webhooks`);
      expect(row).toMatchObject({ status: null, verdict: 'reported' });
      expect(row.observed).toMatch(/^upload cut \((EPIPE|ECONNRESET|UND_ERR_SOCKET)\)$/);
      expect(row.reason).toBe(
        `the endpoint closed the connection while the ${4 * 1024 * 1024} bytes body was being sent: it refused the upload part-way, as a body limit does (an answer sent before the cut, usually 413, was lost with the connection)`,
      );
    } finally {
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    }
  });
});

describe('checkEndpoint', () => {
  it('counts "1 request", not "1 requests"', async () => {
    const report = await checkEndpoint(fetchApp(), { secrets: SECRETS, only: ['timing'] });
    expect(report.requests).toBe(1);
    expect(formatCheckReport(report).split('\n')[1]).toMatch(/^2 keys, tolerance 300 s, unsigned refused; 1 request in \d+\.\d s$/);
  });

  it('says when the endpoint cannot be reached, after one request', async () => {
    const server = createServer();
    const url = await serve(server);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const report = await checkEndpoint(url, { secrets: SECRETS });
    expect(report).toMatchObject({ reachable: false, conforms: false, requests: 1, unreachableReason: 'request failed: ECONNREFUSED' });
    expect(report.rows.slice(1).every((row) => row.verdict === 'not_observable')).toBe(true);
    expect(() => assertEndpointConforms(report)).toThrow(/could not be reached: request failed: ECONNREFUSED/);
  });

  it('sends the app\'s own body: a payload-validating endpoint conforms with it, and fails without', async () => {
    const real = fetchApp();
    const validating: FetchHandler = async (request) => {
      const bytes = await request.arrayBuffer();
      const response = await real(new Request(request.url, { method: 'POST', headers: request.headers, body: bytes }));
      if (response.status !== 200 || !request.headers.get('content-type')?.startsWith('application/json')) return response;
      const event = JSON.parse(new TextDecoder().decode(bytes)) as { type?: string };
      // Accepted by the receiver, then refused by the app's own validation (after the claim:
      // a real app would answer this before completing; here it only changes the status).
      return event.type === 'invoice.paid' ? response : refuse(422, 'UNKNOWN_EVENT');
    };
    const made = await checkEndpoint(validating, { secrets: SECRETS, only: ['tampered-body'] });
    expect(failed(made)).toEqual(['valid']);
    expect(made.rows.find((row) => row.id === 'tampered-body')!.verdict).toBe('not_observable');

    const own = await checkEndpoint(validating, { secrets: SECRETS, body: '{"type":"invoice.paid","data":{"id":"in_1","amount":900}}', skip: ['non-ascii'] });
    expect(failed(own)).toEqual([]);
    const rows = Object.fromEntries(own.rows.map((row) => [row.id, row]));
    expect(rows['tampered-body']!.sent.bodyPreview).toBe('{"type":"invoice.paid","data":{"id":"in_1","amount":901}}');
    expect(rows['json-formatting']!.sent.bodyPreview).toBe('{ "type" : "invoice.paid" , "data" : { "id" : "in_1" , "amount" : 900 } }\n');
  });

  it('selects cases with only and skip; valid always runs first', async () => {
    const report = await checkEndpoint(fetchApp(), { secrets: SECRETS, only: ['unsigned', 'duplicate'] });
    expect(report.rows.map((row) => row.id)).toEqual(['valid', 'unsigned', 'duplicate']);
    expect(report.requests).toBe(4);
    const skipped = await checkEndpoint(fetchApp(), { secrets: SECRETS, skip: ['oversized', 'concurrent', 'timing'] });
    expect(skipped.rows.map((row) => row.id)).not.toContain('oversized');
    expect(skipped.rows).toHaveLength(CHECK_CASES.length - TENANT_CASES.length - 3);
  });

  it('one secret: the second-key rotation case is not observable, and the rest still run', async () => {
    const report = await checkEndpoint(fetchApp({ secrets: A, ...quiet }), { secrets: A });
    expect(report.conforms).toBe(true);
    expect(report.rows.find((row) => row.id === 'rotation-second-key')).toMatchObject({ verdict: 'not_observable', statuses: [] });
    expect(report.rows.find((row) => row.id === 'rotation-new-key-first')!.verdict).toBe('pass');
  });

  it('takes a comma-separated list as the secrets it names: two keys, the rotation cases run on each, and each is redacted', async () => {
    const report = await checkEndpoint(fetchApp({ secrets: SECRETS, ...quiet }), { secrets: `${A},${B}` });
    expect(report.keys).toBe(2);
    expect(report.conforms).toBe(true);
    expect(report.rows.find((row) => row.id === 'rotation-second-key')!.verdict).toBe('pass');
    // An endpoint that echoes the second secret alone gets it blanked in the report.
    const echo = await checkEndpoint(async () => new Response(`key ${B}`, { status: 500 }), { secrets: `${A}, ${B}`, only: ['valid'] });
    expect(JSON.stringify(echo)).not.toContain(B);
    expect(JSON.stringify(echo)).not.toContain(B.slice('whsec_'.length));
  });

  it('signs each case just before sending it: a slow endpoint still gets fresh timestamps', async () => {
    // One clock for the check and the endpoint; the endpoint takes 61 s (of this clock) over its
    // first answer. Signed up front, stale-future (tolerance + 60 s ahead) would arrive 299 s
    // ahead, inside the window, and a correct endpoint would "fail" it.
    let clock = Date.UTC(2030, 0, 1);
    const now = () => clock;
    const verifier = createVerifier({ secrets: SECRETS, now });
    let answered = 0;
    const slowFirst: FetchHandler = async (request) => {
      if (answered++ === 0) clock += 61_000;
      try {
        await verifier.verifyRequest(request);
      } catch {
        return refuse(401, 'REJECTED');
      }
      return new Response(null, { status: 204 });
    };
    const report = await checkEndpoint(slowFirst, { secrets: SECRETS, now, only: ['stale-future', 'stale-past', 'retry', 'duplicate', 'concurrent'] });
    expect(failed(report)).toEqual([]);
    expect(verdicts(report)).toMatchObject({ valid: 'pass', 'stale-future': 'pass', 'stale-past': 'pass' });
    const rows = Object.fromEntries(report.rows.map((row) => [row.id, row]));
    const sentAt = (id: string) => Number(rows[id]!.sent.headers['webhook-timestamp']);
    expect(sentAt('valid')).toBe(Date.UTC(2030, 0, 1) / 1000);
    expect(sentAt('stale-future')).toBe(Date.UTC(2030, 0, 1) / 1000 + 61 + 360);
    expect(sentAt('stale-past')).toBe(Date.UTC(2030, 0, 1) / 1000 + 61 - 360);
    // The idempotency rows were signed after the delay too: every copy accepted, none stale.
    expect(rows.duplicate).toMatchObject({ statuses: [204, 204] });
    expect(rows.retry).toMatchObject({ statuses: [204, 204] });
    expect(sentAt('retry')).toBe(Date.UTC(2030, 0, 1) / 1000 + 61 - 1);
    expect(sentAt('concurrent')).toBe(Date.UTC(2030, 0, 1) / 1000 + 61);
  });

  it('refuses bad options at once', async () => {
    await expect(checkEndpoint(fetchApp(), { secrets: 'whsec_' })).rejects.toThrow(TypeError);
    await expect(checkEndpoint(fetchApp(), { secrets: (await generateKeyPair()).publicKey })).rejects.toThrow(/cannot sign/);
    await expect(checkEndpoint('ftp://127.0.0.1/x', { secrets: A })).rejects.toThrow(/only sends to http:\/\/ and https:\/\/ URLs, got ftp:/);
    await expect(checkEndpoint('not a url', { secrets: A })).rejects.toThrow(TypeError);
    // The unknown value is not repeated (on a command line it may be a secret): its position is.
    await expect(checkEndpoint(fetchApp(), { secrets: A, only: ['valid', 'nope' as CheckCaseId] })).rejects.toThrow(/^only: entry 2 is not a case; the cases are valid, /);
    const withToken = 'http://user:tok3n-in-url@127.0.0.1:9/webhooks';
    for (const target of [withToken, new URL(withToken)]) {
      const refused = checkEndpoint(target, { secrets: A });
      await expect(refused).rejects.toThrow(TypeError);
      await expect(refused).rejects.toThrow(/carries credentials/);
      await expect(refused).rejects.not.toThrow(/tok3n/);
    }
    await expect(checkEndpoint(fetchApp(), { secrets: A, url: withToken })).rejects.toThrow(/^url carries credentials/);
    await expect(checkEndpoint(fetchApp(), { secrets: A, skip: ['valid'] })).rejects.toThrow(RangeError);
    await expect(checkEndpoint(fetchApp(), { secrets: A, timeoutMs: 0 })).rejects.toThrow(RangeError);
    await expect(checkEndpoint(fetchApp(), { secrets: A, concurrency: 1000 })).rejects.toThrow(RangeError);
    await expect(checkEndpoint(fetchApp(), { secrets: A, unknownTenantUrl: withToken })).rejects.toThrow(/^unknownTenantUrl carries credentials/);
    const badTenant = checkEndpoint(fetchApp(), { secrets: A, tenants: [{ url: 'http://localhost/webhooks/b', secrets: 'whsec_n0t-base64!' }] });
    await expect(badTenant).rejects.toThrow(/^tenants\[0\]\.secrets\[0\]/);
    await expect(badTenant).rejects.not.toThrow(/n0t-base64/);
  });

  it('prints curl commands that carry the computed headers and replay as the same request', async () => {
    const report = await checkEndpoint(fetchApp(), { secrets: SECRETS, only: ['oversized'] });
    const valid = report.rows[0]!;
    expect(valid.curl).toContain(`-H 'webhook-id: ${valid.sent.headers['webhook-id']}'`);
    expect(valid.curl).toContain(`-H 'webhook-signature: ${valid.sent.headers['webhook-signature']}'`);
    expect(valid.curl).toMatch(/--data-binary '\{"type":"check.delivery"/);
    const oversized = report.rows[1]!;
    expect(oversized.curl).toMatch(/^\{ printf '%s' .*head -c \d+ \/dev\/zero \| tr '\\0' a; .*\| curl /);
    expect(oversized.curl.length).toBeLessThan(2000);
  });

  it('formats a readable table and a readable assertion error', async () => {
    const report = await checkEndpoint(handWritten({ firstEntryOnly: true }), { secrets: SECRETS, only: ['rotation-new-key-first', 'unsigned'] });
    const table = formatCheckReport(report);
    expect(table).toMatch(/^ {2}FAIL {11}rotation-new-key-first {2}2xx {19}401 SIGNATURE_MISMATCH/m);
    expect(table).toMatch(/^DOES NOT CONFORM: 1 security case failed: rotation-new-key-first$/m);
    expect(() => assertEndpointConforms(report)).toThrow(
      new RegExp(
        '^expected fetch handler \\(http://localhost/webhooks\\) to conform to Standard Webhooks, but 1 security case failed:\\n' +
          '  - rotation-new-key-first \\(an entry from a key the endpoint does not know, then a valid one\\): expected 2xx, observed 401 SIGNATURE_MISMATCH: not accepted',
      ),
    );
  });
});

describe('an endpoint with tenant keys (one route, a tenant per URL)', () => {
  const ACME = generateSecret();
  const ACME_NEXT = generateSecret();
  const GLOBEX = generateSecret();
  const base = 'http://localhost/webhooks';
  const tenantApp = (keysOf: (tenant: string) => string[] | undefined): FetchHandler =>
    webhookHandler({ keys: tenantKeys({ tenant: (request) => request.path.split('/')[2], load: async (tenant) => keysOf(tenant) }), ...quiet }, () => new Response(null, { status: 204 }));
  const table: Record<string, string[]> = { acme: [ACME, ACME_NEXT], globex: [GLOBEX] };

  it('answers 404 UNKNOWN_TENANT to a signed delivery for an unknown tenant, and refuses one sent to another tenant', async () => {
    const report = await checkEndpoint(tenantApp((tenant) => table[tenant]), {
      secrets: [ACME, ACME_NEXT],
      url: `${base}/acme`,
      unknownTenantUrl: `${base}/no-such-tenant`,
      tenants: [{ url: `${base}/globex`, secrets: GLOBEX }],
    });
    expectConforming(report);
    const rows = Object.fromEntries(report.rows.map((row) => [row.id, row]));
    expect(rows['unknown-tenant']).toMatchObject({ verdict: 'pass', status: 404, observed: '404 UNKNOWN_TENANT', expected: '404 UNKNOWN_TENANT' });
    expect(rows['unknown-tenant']!.curl).toContain(`'${base}/no-such-tenant'`);
    expect(rows['cross-tenant']).toMatchObject({ verdict: 'pass', status: 401 });
    expect(report.warnings).toEqual([]);
    expect(report.conforms).toBe(true);
  });

  it('warns when one secret is given for several tenants, and cannot judge the cross-tenant case then', async () => {
    const shared: Record<string, string[]> = { acme: [ACME], globex: [GLOBEX, ACME] };
    const report = await checkEndpoint(tenantApp((tenant) => shared[tenant]), {
      secrets: ACME,
      url: `${base}/acme?token=t0ken`,
      only: ['cross-tenant'],
      tenants: [{ url: `${base}/globex`, secrets: [GLOBEX, `  ${ACME.slice('whsec_'.length)}`.trim()] }],
    });
    expect(report.warnings).toHaveLength(1);
    expect(report.warnings[0]).toBe(
      `one secret is given for several tenants (${base}/acme, ${base}/globex): the URL is not signed, so a delivery for one verifies at the others' URLs too; give every tenant its own secret`,
    );
    expect(report.rows.find((row) => row.id === 'cross-tenant')).toMatchObject({ verdict: 'not_observable' });
    expect(formatCheckReport(report)).toContain(`warning: one secret is given for several tenants`);
    expectNoSecrets(JSON.stringify(report) + formatCheckReport(report, { curl: true }), [ACME, GLOBEX]);
  });

  it('fails an endpoint that tries every tenant\'s keys whatever the URL', async () => {
    const everyKey = [ACME, GLOBEX];
    const report = await checkEndpoint(tenantApp(() => everyKey), {
      secrets: ACME,
      url: `${base}/acme`,
      only: ['unknown-tenant', 'cross-tenant'],
      unknownTenantUrl: `${base}/no-such-tenant`,
      tenants: [{ url: `${base}/globex`, secrets: GLOBEX }],
    });
    expect(failed(report)).toEqual(['cross-tenant', 'unknown-tenant']);
    expect(report.rows.find((row) => row.id === 'unknown-tenant')!.reason).toMatch(/^ACCEPTED/);
  });

  it('fails an unknown tenant refused with a signature answer, not 404', async () => {
    const report = await checkEndpoint(tenantApp((tenant) => table[tenant] ?? [generateSecret()]), {
      secrets: ACME,
      url: `${base}/acme`,
      only: ['unknown-tenant'],
      unknownTenantUrl: `${base}/no-such-tenant`,
    });
    expect(report.rows.find((row) => row.id === 'unknown-tenant')).toMatchObject({ verdict: 'fail', status: 401 });
    expect(report.rows.find((row) => row.id === 'unknown-tenant')!.reason).toMatch(/^refused, but with 401, not 404/);
  });

  it('leaves the tenant cases out without their URLs, and says what is missing when they are asked for', async () => {
    const report = await checkEndpoint(fetchApp(), { secrets: SECRETS, only: ['unknown-tenant', 'cross-tenant'] });
    expect(report.rows.map((row) => [row.id, row.verdict])).toEqual([
      ['valid', 'pass'],
      ['unknown-tenant', 'not_observable'],
      ['cross-tenant', 'not_observable'],
    ]);
    expect(report.requests).toBe(1);
  });
});

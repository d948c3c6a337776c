/**
 * `webhook-receiver listen --record` and `webhook-receiver replay`, run as child processes against
 * a real endpoint (the Express adapter on node:http, 127.0.0.1): record deliveries, replay them,
 * and read what arrived from the raw request (order and repeats of headers, body bytes).
 */

import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { webhooks, webhookOf } from '../../adapters/express.ts';
import { signWebhook } from '../../src/sign.ts';
import type { CapturedDelivery } from '../../src/testing/signed-replay.ts';
import { OTHER_SECRET, SECRET, expectNoSecrets } from '../testing/support.ts';
import { listen as listenProcess, run, type Result } from './support.ts';

/** CLI processes on a loaded two-core machine: generous, and still bounded. */
const TIMEOUT = 60_000;
const dir = mkdtempSync(join(tmpdir(), 'webhook-receiver-replay-'));

/** What the endpoint's handler saw: read from the raw request, after the adapter verified it. */
interface Handled {
  id: string;
  signed: boolean;
  keyIndex: number | undefined;
  rawHeaders: string[];
  body: Buffer;
}

const handled: Handled[] = [];
let server: Server;
let endpoint: string;
/** Every output of every command run here, scanned for secrets at the end. */
const outputs: string[] = [];

beforeAll(async () => {
  const app = express();
  const record = (signed: boolean) => (req: express.Request, res: express.Response) => {
    const webhook = webhookOf(req);
    handled.push({ id: webhook.id, signed: webhook.signed, keyIndex: webhook.keyIndex, rawHeaders: req.rawHeaders, body: Buffer.from(webhook.body) });
    res.sendStatus(signed ? 204 : 202);
  };
  // The developer's own endpoint, verifying with their LOCAL secret (OTHER_SECRET); production
  // deliveries were signed with SECRET.
  app.post('/webhooks', webhooks({ secrets: OTHER_SECRET, onRejected: () => {} }), record(true));
  // Stores of their own, for the duplicate test and for ids other tests replay too.
  app.post('/dedup', webhooks({ secrets: OTHER_SECRET, onRejected: () => {} }), record(true));
  app.post('/skip', webhooks({ secrets: OTHER_SECRET, onRejected: () => {} }), record(true));
  app.post('/method', webhooks({ secrets: OTHER_SECRET, onRejected: () => {} }), record(true));
  app.post('/unsigned', webhooks({ secrets: OTHER_SECRET, unsigned: 'accept', onRejected: () => {} }), record(false));
  server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
  expectNoSecrets(outputs.join('\n'), [SECRET, OTHER_SECRET]);
});

beforeEach(() => {
  handled.length = 0;
});

async function cli(args: string[], env: Record<string, string> = {}): Promise<Result> {
  const result = await run(args, { env, timeoutMs: TIMEOUT });
  outputs.push(result.stdout, result.stderr);
  return result;
}

/** Sends a request with headers exactly as given (order, case, repeats), through node:http. */
function post(url: string, headers: [string, string][], body: Uint8Array): Promise<number> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const raw = ['host', target.host, ...headers.flat(), 'content-length', String(body.byteLength)];
    const req = httpRequest(target, { method: 'POST', headers: raw, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** `listen` as a child process, with this file's patient bounds (it records every delivery to a file). */
const listen = (args: string[], env: Record<string, string>) => listenProcess(args, env, { killAfterMs: TIMEOUT, waitMs: TIMEOUT });

/** The raw header pairs the endpoint received, without the two the HTTP client owns. */
function received(rawHeaders: string[]): [string, string][] {
  const pairs: [string, string][] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) pairs.push([rawHeaders[i]!, rawHeaders[i + 1]!]);
  return pairs;
}

const header = (pairs: [string, string][], name: string) => pairs.filter(([key]) => key.toLowerCase() === name).map(([, value]) => value);

describe('listen --record, then replay', () => {
  const file = join(dir, 'deliveries.jsonl');
  const big = new TextEncoder().encode(JSON.stringify({ type: 'big', padding: 'x'.repeat(5000) }));
  const json = new TextEncoder().encode('{"type":"invoice.paid","data":{"id":"in_1"}}');
  // Not UTF-8: a lone 0xff, a NUL, a truncated sequence.
  const binary = Uint8Array.from([0x00, 0xff, 0xfe, 0x0a, 0xc3, 0x28, 0x7b, 0x80]);
  const binaryHeaders = (signed: Awaited<ReturnType<typeof signWebhook>>): [string, string][] => [
    ['Content-Type', 'application/octet-stream'],
    ['X-Trace', 'first'],
    ['webhook-id', signed.id],
    ['webhook-timestamp', String(signed.timestamp)],
    ['webhook-signature', signed.signature],
    ['x-trace', 'second'],
    ['Stripe-Signature', 't=1,v1=0000'],
    ['X-Trace', 'third'],
  ];

  beforeAll(async () => {
    const listener = await listen(['--record', file, '--max-body-bytes', '4096'], { WEBHOOK_SECRET: SECRET });
    try {
      expect(listener.output()).toContain('; recording every delivery to the --record file). Ctrl-C to stop.');
      const signedBig = await signWebhook({ secret: SECRET, body: big, id: 'msg_big' });
      expect(await post(`${listener.url}/in`, [['content-type', 'application/json'], ...Object.entries(signedBig.headers)], big)).toBe(413);
      await listener.waitFor(/^#1 [^\n]*\n(?:.*\n)*? {2}answered 413$/m);
      const signedJson = await signWebhook({ secret: SECRET, body: json, id: 'msg_json' });
      expect(await post(`${listener.url}/in?source=relay`, [['Content-Type', 'application/json'], ...Object.entries(signedJson.headers)], json)).toBe(204);
      await listener.waitFor(/^#2 [^\n]*\n(?:.*\n)*? {2}answered 204$/m);
      const signedBinary = await signWebhook({ secret: SECRET, body: binary, id: 'msg_binary' });
      expect(await post(`${listener.url}/in`, binaryHeaders(signedBinary), binary)).toBe(204);
      await listener.waitFor(/^#3 [^\n]*\n(?:.*\n)*? {2}answered 204$/m);
      // Forged at capture (another key): recorded with its verdict, and replayable all the same.
      const forged = await signWebhook({ secret: OTHER_SECRET, body: json, id: 'msg_forged' });
      expect(await post(`${listener.url}/in`, [['content-type', 'application/json'], ...Object.entries(forged.headers)], json)).toBe(401);
      await listener.waitFor(/^#4 [^\n]*\n(?:.*\n)*? {2}answered 401$/m);
    } finally {
      listener.child.kill('SIGTERM');
    }
    expect(await listener.exit).toBe(0);
    outputs.push(listener.output());
  }, TIMEOUT * 2);

  it('writes one JSON line a delivery, mode 0600, in the relay field names, bodies byte for byte', () => {
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as CapturedDelivery);
    expect(lines).toHaveLength(4);
    expect(Object.keys(lines[1]!)).toEqual(['method', 'path', 'headers', 'contentType', 'bytes', 'bodyBase64', 'receivedAt', 'status', 'verification']);
    expect(lines[0]).toMatchObject({ bytes: 0, bodyBase64: '', status: 413, verification: { ok: false, code: 'PAYLOAD_TOO_LARGE' } });
    expect(lines[1]).toMatchObject({
      method: 'POST',
      path: '/in?source=relay',
      contentType: 'application/json',
      bytes: json.byteLength,
      status: 204,
      verification: { ok: true, id: 'msg_json', scheme: 'v1', keyIndex: 0, keyId: null },
    });
    expect(Buffer.from(lines[1]!.bodyBase64, 'base64')).toEqual(Buffer.from(json));
    expect(Date.parse(lines[1]!.receivedAt)).toBeGreaterThan(Date.now() - 10 * 60_000);
    expect(Buffer.from(lines[2]!.bodyBase64, 'base64')).toEqual(Buffer.from(binary));
    // Every header as it arrived: the order and repeats of X-Trace, names in their case.
    expect(lines[2]!.headers.slice(1, 9).map(([name]) => name)).toEqual([
      'Content-Type',
      'X-Trace',
      'webhook-id',
      'webhook-timestamp',
      'webhook-signature',
      'x-trace',
      'Stripe-Signature',
      'X-Trace',
    ]);
    // Signatures are credentials: the header stays, its value does not.
    expect(lines[2]!.headers.filter(([name]) => /signature/i.test(name))).toEqual([
      ['webhook-signature', '[redacted]'],
      ['Stripe-Signature', '[redacted]'],
    ]);
    expect(lines[3]!.verification).toMatchObject({ ok: false, code: 'SIGNATURE_MISMATCH' });
  });

  it('refuses the whole file when a chosen line lost its body (asked for with --include-rejected), and sends nothing', async () => {
    const result = await cli(['replay', '--to', `${endpoint}/webhooks`, '--from', file, '--include-rejected'], { WEBHOOK_SECRET: OTHER_SECRET });
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      "webhook-receiver replay: --from line 1: its body was not kept (over the recorder's limit): record it again with a larger --max-body-bytes; nothing was sent\n" +
        "Run 'webhook-receiver replay --help' for usage.\n",
    );
    expect(handled).toEqual([]);
  }, TIMEOUT);

  it('replays the last lines re-signed with the local secret; the endpoint verifies them and gets the same bytes and headers', async () => {
    // The last three: two verified when recorded, and the forgery, which is skipped.
    const result = await cli(['replay', '--to', `${endpoint}/webhooks`, '--from', file, '--last', '3', '--secret', OTHER_SECRET]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^skipped --from line 4 \(webhook-id "msg_forged"\): refused when recorded: 401 SIGNATURE_MISMATCH: no signature matched/);
    expect(lines[1]).toBe(`replaying 2 deliveries to ${endpoint}/webhooks (signed with 1 key; ids kept)`);
    expect(lines.slice(2, 4)).toEqual([
      expect.stringMatching(/^#1 POST webhook-id "msg_json" \(captured\), 44 bytes: 204 in \d+ ms$/),
      expect.stringMatching(/^#2 POST webhook-id "msg_binary" \(captured\), 8 bytes: 204 in \d+ ms$/),
    ]);
    expect(lines[4]).toBe('2 of 2 answered 2xx; 1 skipped: refused when captured (--include-rejected replays them)');
    expect(handled.map((h) => [h.id, h.signed, h.keyIndex])).toEqual([
      ['msg_json', true, 0],
      ['msg_binary', true, 0],
    ]);
    expect(handled[0]!.body).toEqual(Buffer.from(json));
    expect(handled[1]!.body).toEqual(Buffer.from(binary));
    const pairs = received(handled[1]!.rawHeaders);
    const timestamp = header(pairs, 'webhook-timestamp')[0]!;
    expect(Number(timestamp)).toBeGreaterThan(Math.floor(Date.now() / 1000) - 120);
    // The captured order, repeats kept; signing headers replaced in place; host and length the
    // client's own; the other sender's signature, a credential, not sent at all.
    expect(pairs).toEqual([
      ['host', new URL(endpoint).host],
      ['Content-Type', 'application/octet-stream'],
      ['X-Trace', 'first'],
      ['webhook-id', 'msg_binary'],
      ['webhook-timestamp', timestamp],
      ['webhook-signature', expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/)],
      ['x-trace', 'second'],
      ['X-Trace', 'third'],
      ['content-length', '8'],
      ['Connection', 'close'],
    ]);
  }, TIMEOUT);

  it('skips captures refused when recorded, saying which and why; --include-rejected replays them, marked', async () => {
    const result = await cli(['replay', '--to', `${endpoint}/skip`, '--from', file, '--secret', OTHER_SECRET]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^skipped --from line 1 \(webhook-id "msg_big"\): refused when recorded: 413 PAYLOAD_TOO_LARGE: /),
      expect.stringMatching(/^skipped --from line 4 \(webhook-id "msg_forged"\): refused when recorded: 401 SIGNATURE_MISMATCH: no signature matched/),
      `replaying 2 deliveries to ${endpoint}/skip (signed with 1 key; ids kept)`,
      expect.stringMatching(/^#1 POST webhook-id "msg_json" \(captured\), 44 bytes: 204 in \d+ ms$/),
      expect.stringMatching(/^#2 POST webhook-id "msg_binary" \(captured\), 8 bytes: 204 in \d+ ms$/),
      '2 of 2 answered 2xx; 2 skipped: refused when captured (--include-rejected replays them)',
    ]);
    // The forged capture never reached the handler, re-signed or not.
    expect(handled.map((h) => h.id)).toEqual(['msg_json', 'msg_binary']);

    handled.length = 0;
    const byId = await cli(['replay', '--to', `${endpoint}/skip`, '--from', file, '--id', 'msg_forged', '--secret', OTHER_SECRET]);
    expect(byId.code).toBe(1);
    expect(byId.stdout).toMatch(/^skipped --from line 4 \(webhook-id "msg_forged"\): refused when recorded: 401 SIGNATURE_MISMATCH[^\n]*\nnothing replayed; 1 skipped: refused when captured \(--include-rejected replays them\)\n$/);
    expect(handled).toEqual([]);

    const asked = await cli(['replay', '--to', `${endpoint}/skip`, '--from', file, '--id', 'msg_forged', '--include-rejected', '--secret', OTHER_SECRET]);
    expect(asked.code).toBe(0);
    expect(asked.stdout).toMatch(/^#1 POST webhook-id "msg_forged" \(captured\), 44 bytes, refused when captured \(SIGNATURE_MISMATCH\): 204 in \d+ ms$/m);
    expect(handled.map((h) => h.id)).toEqual(['msg_forged']);
  }, TIMEOUT);

  it('answers a second replay of the same id as a duplicate, and runs the handler again with --new-id', async () => {
    const first = await cli(['replay', '--to', `${endpoint}/dedup`, '--from', file, '--id', 'msg_json'], { WEBHOOK_SECRET: OTHER_SECRET });
    expect(first.code).toBe(0);
    const again = await cli(['replay', '--to', `${endpoint}/dedup`, '--from', file, '--id', 'msg_json'], { WEBHOOK_SECRET: OTHER_SECRET });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^#1 POST webhook-id "msg_json" \(captured\), 44 bytes: 200 duplicate in \d+ ms$/m);
    const fresh = await cli(['replay', '--to', `${endpoint}/dedup`, '--from', file, '--id', 'msg_json', '--new-id'], { WEBHOOK_SECRET: OTHER_SECRET });
    expect(fresh.code).toBe(0);
    expect(fresh.stdout).toContain('(signed with 1 key; new ids)');
    const newId = /^#1 POST webhook-id "(msg_[0-9A-Za-z]{27})" \(new: --new-id\), 44 bytes: 204 in \d+ ms$/m.exec(fresh.stdout)?.[1];
    expect(newId).toBeDefined();
    // The handler ran for the first and the --new-id replay, not for the duplicate.
    expect(handled.map((h) => h.id)).toEqual(['msg_json', newId]);
  }, TIMEOUT);

  it('signs with every secret in WEBHOOK_SECRET, and exits 1 with the error envelope when the endpoint refuses', async () => {
    const rotated = await cli(['replay', '--to', `${endpoint}/webhooks`, '--from', file, '--id', 'msg_binary', '--new-id'], { WEBHOOK_SECRET: `${SECRET},${OTHER_SECRET}` });
    expect(rotated.code).toBe(0);
    expect(rotated.stdout).toContain('(signed with 2 keys; new ids)');
    const signature = header(received(handled[0]!.rawHeaders), 'webhook-signature')[0]!;
    expect(signature.split(' ')).toHaveLength(2);
    expect(handled[0]!.keyIndex).toBe(0);

    const wrong = await cli(['replay', '--to', `${endpoint}/webhooks`, '--from', file, '--id', 'msg_binary', '--new-id', '--secret', SECRET]);
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toMatch(/^#1 POST webhook-id "msg_[0-9A-Za-z]{27}" \(new: --new-id\), 8 bytes: 401 SIGNATURE_MISMATCH: no signature matched[^\n]* in \d+ ms$/m);
    expect(wrong.stdout).toMatch(/\n0 of 1 answered 2xx\n$/);
    expect(handled).toHaveLength(1);
  }, TIMEOUT);

  it('exits 1 when the endpoint cannot be reached', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const result = await cli(['replay', '--to', `http://127.0.0.1:${port}/webhooks`, '--from', file, '--id', 'msg_json', '--secret', OTHER_SECRET]);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^#1 POST webhook-id "msg_json" \(captured\), 44 bytes: failed: ECONNREFUSED$/m);
  }, TIMEOUT);
});

describe('listen --record: an existing file, an unwritable one, a compressed delivery', () => {
  it('warns about a file others can read, records the decoded bytes, and the replay drops content-encoding', async () => {
    const file = join(dir, 'shared.jsonl');
    writeFileSync(file, '', { mode: 0o644 });
    chmodSync(file, 0o644);
    const listener = await listen(['--record', file], { WEBHOOK_SECRET: SECRET });
    const body = JSON.stringify({ type: 'compressed', data: 'y'.repeat(200) });
    try {
      await listener.waitFor(/^listening on /m);
      const signed = await signWebhook({ secret: SECRET, body, id: 'msg_gzip' });
      const headers: [string, string][] = [['content-type', 'application/json'], ['content-encoding', 'gzip'], ...Object.entries(signed.headers)];
      expect(await post(`${listener.url}/in`, headers, gzipSync(body))).toBe(204);
      await listener.waitFor(/^#1 [^\n]*\n(?:.*\n)*? {2}answered 204$/m);
    } finally {
      listener.child.kill('SIGTERM');
    }
    expect(await listener.exit).toBe(0);
    outputs.push(listener.output());
    expect(listener.output()).toContain('note: the --record file is readable by others (mode 644); it holds real payloads: chmod 600 it\n');
    const [captured] = readFileSync(file, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as CapturedDelivery);
    expect(Buffer.from(captured!.bodyBase64, 'base64').toString('utf8')).toBe(body);
    expect(captured!.headers).toContainEqual(['content-encoding', 'gzip']);

    const result = await cli(['replay', '--to', `${endpoint}/webhooks`, '--from', file, '--secret', OTHER_SECRET]);
    expect(result.code).toBe(0);
    expect(handled.map((h) => [h.id, h.body.toString('utf8')])).toEqual([['msg_gzip', body]]);
    expect(header(received(handled[0]!.rawHeaders), 'content-encoding')).toEqual([]);
  }, TIMEOUT * 2);

  it('exits 2 when the --record file cannot be opened, or --max-body-bytes is not a size', async () => {
    const missing = await cli(['listen', '--secret', SECRET, '--record', join(dir, 'no-such-dir', 'x.jsonl')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe("webhook-receiver listen: cannot open the file given with --record: ENOENT\nRun 'webhook-receiver listen --help' for usage.\n");
    const size = await cli(['listen', '--secret', SECRET, '--max-body-bytes', '0']);
    expect(size.code).toBe(2);
    expect(size.stderr).toContain('webhook-receiver listen: --max-body-bytes must be a whole number from 1 to 1073741824\n');
  }, TIMEOUT);
});

describe('credentials: recorded as [redacted], never sent again', () => {
  it('listen --record keeps the names of credential headers and none of their values; replay sends none of them', async () => {
    const file = join(dir, 'credentials.jsonl');
    const body = '{"type":"invoice.paid","data":{"id":"in_cred"}}';
    const signed = await signWebhook({ secret: SECRET, body, id: 'msg_cred' });
    // Every value below that is a credential carries this marker, so no trace of one can hide.
    const mark = 'CREDENTIAL-VALUE';
    const sent: [string, string][] = [
      ['content-type', 'application/json'],
      ['Authorization', `Bearer ${mark}-bearer`],
      ['Proxy-Authorization', `Basic ${mark}-proxy`],
      ['Cookie', `session=${mark}-cookie`],
      ['Set-Cookie', `id=${mark}-set-cookie`],
      ['X-Api-Key', `${mark}-api-key`],
      ['X-Hub-Signature-256', `sha256=${mark}-github`],
      ['Stripe-Signature', `t=1,v1=${mark}-stripe`],
      ['X-Slack-Signature', `v0=${mark}-slack`],
      ['X-Shopify-Hmac-Sha256', `${mark}-shopify`],
      ['X-Gitlab-Token', `${mark}-gitlab`],
      ['Idempotency-Key', 'idem-1'],
      ['X-Request-Id', 'req-1'],
      ['webhook-id', signed.id],
      ['webhook-timestamp', String(signed.timestamp)],
      ['webhook-signature', signed.signature],
    ];
    const listener = await listen(['--record', file], { WEBHOOK_SECRET: SECRET });
    try {
      expect(await post(`${listener.url}/in`, sent, new TextEncoder().encode(body))).toBe(204);
      await listener.waitFor(/^#1 [^\n]*\n(?:.*\n)*? {2}answered 204$/m);
    } finally {
      listener.child.kill('SIGTERM');
    }
    expect(await listener.exit).toBe(0);
    outputs.push(listener.output());

    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(mark);
    // The captured signature still verifies at the real endpoint for minutes: not in the file either.
    expect(text).not.toContain(signed.signature.slice(3));
    const [captured] = text.trimEnd().split('\n').map((line) => JSON.parse(line) as CapturedDelivery);
    const redacted = '[redacted]';
    expect(captured!.headers.slice(1, 17)).toEqual([
      ['content-type', 'application/json'],
      ['Authorization', redacted],
      ['Proxy-Authorization', redacted],
      ['Cookie', redacted],
      ['Set-Cookie', redacted],
      ['X-Api-Key', redacted],
      ['X-Hub-Signature-256', redacted],
      ['Stripe-Signature', redacted],
      ['X-Slack-Signature', redacted],
      ['X-Shopify-Hmac-Sha256', redacted],
      ['X-Gitlab-Token', redacted],
      ['Idempotency-Key', 'idem-1'],
      ['X-Request-Id', 'req-1'],
      ['webhook-id', 'msg_cred'],
      ['webhook-timestamp', String(signed.timestamp)],
      ['webhook-signature', redacted],
    ]);
    expect(captured!.verification).toMatchObject({ ok: true, id: 'msg_cred' });

    const result = await cli(['replay', '--to', `${endpoint}/webhooks`, '--from', file, '--secret', OTHER_SECRET]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^#1 POST webhook-id "msg_cred" \(captured\), 47 bytes: 204 in \d+ ms$/m);
    expect(handled).toHaveLength(1);
    const pairs = received(handled[0]!.rawHeaders);
    const replayedSignature = header(pairs, 'webhook-signature');
    expect(replayedSignature).toHaveLength(1);
    expect(replayedSignature[0]).not.toBe(signed.signature);
    expect(pairs.map(([name]) => name)).toEqual([
      'host',
      'content-type',
      'Idempotency-Key',
      'X-Request-Id',
      'webhook-id',
      'webhook-timestamp',
      'webhook-signature',
      'content-length',
      'Connection',
    ]);
    expect(handled[0]!.rawHeaders.join('\n')).not.toContain(redacted);
  }, TIMEOUT * 2);
});

describe('replay from the relay\'s event and payload documents', () => {
  // Not UTF-8, with a NUL: only base64 carries it.
  const body = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0x0d, 0x0a]);
  const event = {
    id: 'evt_01J9Z',
    method: 'POST',
    status: 'verified',
    contentType: 'application/octet-stream',
    payloadBytes: body.byteLength,
    receivedAt: '2026-11-20T10:00:00.000Z',
    headers: [
      ['Host', 'relay.example.com'],
      ['Content-Type', 'application/octet-stream'],
      ['Accept', 'a'],
      ['X-Forwarded-For', '203.0.113.7'],
      ['accept', 'b'],
      ['Content-Encoding', 'gzip'],
      ['Content-Length', '31'],
      ['Stripe-Signature', 't=1,v1=abc'],
      ['Connection', 'keep-alive'],
      // The relay's headers come unscrubbed: credentials, and one a recorder already redacted.
      ['Authorization', 'Bearer whk_live_relay_credential'],
      ['Cookie', 'session=relay-session-credential'],
      ['X-Custom', '[redacted]'],
      ['Accept', 'c'],
    ],
  };
  const payload = { contentType: 'application/octet-stream', bytes: body.byteLength, bodyBase64: Buffer.from(body).toString('base64') };
  const eventFile = join(dir, 'event.json');
  const payloadFile = join(dir, 'payload.json');
  writeFileSync(eventFile, JSON.stringify(event));
  writeFileSync(payloadFile, JSON.stringify(payload));

  it('sends the exact bytes, the headers in order with repeats, the event id as webhook-id; drops hop-by-hop and --drop-header', async () => {
    const result = await cli(['replay', '--to', `${endpoint}/webhooks`, '--event', eventFile, '--payload', payloadFile, '--drop-header', 'X-FORWARDED-FOR'], { WEBHOOK_SECRET: OTHER_SECRET });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^#1 POST webhook-id "evt_01J9Z" \(the relay event's id\), 8 bytes: 204 in \d+ ms$/m);
    expect(handled).toHaveLength(1);
    expect(handled[0]!.id).toBe('evt_01J9Z');
    expect(handled[0]!.body).toEqual(Buffer.from(body));
    const pairs = received(handled[0]!.rawHeaders);
    expect(pairs.map(([name]) => name)).toEqual([
      'host',
      'Content-Type',
      'Accept',
      'accept',
      'Accept',
      'webhook-id',
      'webhook-timestamp',
      'webhook-signature',
      'content-length',
      'Connection',
    ]);
    expect(header(pairs, 'accept')).toEqual(['a', 'b', 'c']);
    expect(header(pairs, 'host')).toEqual([new URL(endpoint).host]);
    expect(header(pairs, 'content-length')).toEqual(['8']);
    expect(header(pairs, 'connection')).toEqual(['close']);
    expect(handled[0]!.rawHeaders.join('\n')).not.toMatch(/credential|redacted|v1=abc/);
  }, TIMEOUT);

  it('keeps a captured svix-id (the relay event id comes second) and answers svix-* with svix-*', async () => {
    const svixEvent = join(dir, 'svix-event.json');
    writeFileSync(svixEvent, JSON.stringify({ ...event, headers: [['content-type', 'application/octet-stream'], ['svix-id', 'msg_svix'], ['svix-timestamp', '1'], ['svix-signature', 'v1,old']] }));
    const result = await cli(['replay', '--to', `${endpoint}/webhooks`, '--event', svixEvent, '--payload', payloadFile, '--secret', OTHER_SECRET]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^#1 POST webhook-id "msg_svix" \(captured\), 8 bytes: 204/m);
    expect(received(handled[0]!.rawHeaders).map(([name]) => name)).toEqual(['host', 'content-type', 'svix-id', 'svix-timestamp', 'svix-signature', 'content-length', 'Connection']);
  }, TIMEOUT);

  it('refuses an event whose method was not recorded unless --method says which; skips one whose verification failed', async () => {
    const nullMethod = join(dir, 'null-method-event.json');
    writeFileSync(nullMethod, JSON.stringify({ ...event, method: null }));
    const refused = await cli(['replay', '--to', `${endpoint}/webhooks`, '--event', nullMethod, '--payload', payloadFile, '--secret', OTHER_SECRET]);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      'webhook-receiver replay: the relay event (webhook-id "evt_01J9Z") has no method (null: not recorded): pass --method to say which to send; nothing was sent\n' +
        "Run 'webhook-receiver replay --help' for usage.\n",
    );
    expect(handled).toEqual([]);
    // An endpoint of its own: evt_01J9Z already ran at /webhooks.
    const told = await cli(['replay', '--to', `${endpoint}/method`, '--event', nullMethod, '--payload', payloadFile, '--secret', OTHER_SECRET, '--method', 'POST']);
    expect(told.code).toBe(0);
    expect(told.stdout).toMatch(/^#1 POST webhook-id "evt_01J9Z" \(the relay event's id\), 8 bytes: 204 in \d+ ms$/m);
    expect(handled.map((h) => h.id)).toEqual(['evt_01J9Z']);

    handled.length = 0;
    const failed = join(dir, 'failed-event.json');
    writeFileSync(failed, JSON.stringify({ ...event, id: 'evt_forged', status: 'failed', verified: false, verificationState: 'failed' }));
    const skipped = await cli(['replay', '--to', `${endpoint}/webhooks`, '--event', failed, '--payload', payloadFile, '--secret', OTHER_SECRET]);
    expect(skipped.code).toBe(1);
    expect(skipped.stdout).toBe(
      'skipped the relay event (webhook-id "evt_forged"): the relay\'s verificationState is "failed": a signature was checked and rejected at capture\n' +
        'nothing replayed; 1 skipped: refused when captured (--include-rejected replays them)\n',
    );
    expect(handled).toEqual([]);
    const included = await cli(['replay', '--to', `${endpoint}/webhooks`, '--event', failed, '--payload', payloadFile, '--secret', OTHER_SECRET, '--include-rejected']);
    expect(included.code).toBe(0);
    expect(included.stdout).toMatch(/^#1 POST webhook-id "evt_forged" \(the relay event's id\), 8 bytes, refused when captured \(failed\): 204 in \d+ ms$/m);
    expect(handled.map((h) => h.id)).toEqual(['evt_forged']);
  }, TIMEOUT);

  it('sends unsigned only with --unsigned; a forgotten secret is an error', async () => {
    const unsigned = await cli(['replay', '--to', `${endpoint}/unsigned`, '--event', eventFile, '--payload', payloadFile, '--unsigned'], { WEBHOOK_SECRET: OTHER_SECRET });
    expect(unsigned.code).toBe(0);
    expect(unsigned.stdout).toContain('(unsigned; ids kept)');
    expect(unsigned.stdout).toMatch(/ 202 in \d+ ms$/m);
    expect(handled.map((h) => [h.id, h.signed])).toEqual([['evt_01J9Z', false]]);
    expect(header(received(handled[0]!.rawHeaders), 'webhook-signature')).toEqual([]);

    const forgotten = await cli(['replay', '--to', `${endpoint}/unsigned`, '--event', eventFile, '--payload', payloadFile]);
    expect(forgotten.code).toBe(2);
    expect(forgotten.stderr).toBe(
      "webhook-receiver replay: no secret: pass --secret or set WEBHOOK_SECRET (comma-separated for several); to send without a signature, pass --unsigned\nRun 'webhook-receiver replay --help' for usage.\n",
    );
    const both = await cli(['replay', '--to', `${endpoint}/unsigned`, '--event', eventFile, '--payload', payloadFile, '--unsigned', '--secret', OTHER_SECRET]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('webhook-receiver replay: pass either --secret or --unsigned, not both\n');
    expect(handled).toHaveLength(1);
  }, TIMEOUT);
});

describe('replay refuses malformed input and misuse with exit 2, sending nothing', () => {
  const good = {
    method: 'POST',
    path: '/in',
    headers: [['content-type', 'application/json'], ['webhook-id', 'msg_1']],
    contentType: 'application/json',
    bytes: 2,
    bodyBase64: 'e30=',
    receivedAt: '2026-11-20T10:00:00.000Z',
    status: 204,
    verification: { ok: true, id: 'msg_1', scheme: 'v1', keyIndex: 0, keyId: null },
  };
  const goodEvent = { id: 'evt_1', method: 'POST', headers: [['content-type', 'application/json']], contentType: 'application/json', payloadBytes: 2 };
  const goodPayload = { contentType: 'application/json', bytes: 2, bodyBase64: 'e30=' };
  let n = 0;
  const file = (content: string) => {
    const path = join(dir, `input-${++n}.json`);
    writeFileSync(path, content);
    return path;
  };
  const line = (change: Record<string, unknown>) => JSON.stringify({ ...good, ...change });

  it('names what is wrong with a recording line', async () => {
    const cases: [string, string][] = [
      ['{"method":', '--from line 1 is not JSON'],
      ['[1,2]', '--from line 1 is not a JSON object'],
      [`${line({})}\n${JSON.stringify({ ...good, method: undefined })}`, '--from line 2 has no method: expected an HTTP method such as "POST"'],
      [line({ headers: undefined }), '--from line 1 has no headers: expected an array of [name, value] string pairs'],
      [line({ headers: { 'content-type': 'application/json' } }), '--from line 1: headers is an object, expected an array of [name, value] string pairs'],
      [line({ headers: [['content-type', 'application/json'], ['x-one']] }), '--from line 1: headers[1] is not a [name, value] pair of two strings'],
      [line({ headers: [['x-n', 1]] }), '--from line 1: headers[0] is not a [name, value] pair of two strings'],
      [line({ headers: [['bad name', 'v']] }), '--from line 1: headers[0] has a name that is not a valid HTTP header name'],
      [line({ headers: [['x-a', 'one\r\nx-b: two']] }), '--from line 1: headers[0] (x-a) has a value with a character HTTP cannot carry (a line break, NUL, or a character past U+00FF)'],
      [line({ bodyBase64: undefined }), '--from line 1 has no bodyBase64: expected the body in standard base64'],
      [line({ bodyBase64: 'e30*' }), '--from line 1: bodyBase64 does not decode as standard base64'],
      [line({ bytes: undefined }), '--from line 1 has no bytes: expected the body length, a whole number'],
      [line({ bytes: -1 }), '--from line 1: bytes is a number, expected the body length, a whole number'],
      [line({ bytes: 3 }), '--from line 1: bytes is 3 but bodyBase64 decodes to 2 bytes: the body is not the one captured'],
      [line({ verification: undefined }), "--from line 1 has no verification: expected what listen concluded, { ok: true, … } or { ok: false, code, message }"],
      [line({ verification: { ok: 'no' } }), '--from line 1: verification.ok is a string, expected true or false'],
      [line({ verification: { ok: false, message: 'x' } }), '--from line 1: verification has no code: expected the error code'],
      [line({ method: 7 }), '--from line 1: method is a number, expected an HTTP method such as "POST" (or null: not recorded)'],
      [line({ method: null }), '--from line 1 has no method (null: not recorded): pass --method to say which to send'],
      ['\n\n', 'the --from file holds no recorded deliveries'],
    ];
    for (const [content, message] of cases) {
      const result = await cli(['replay', '--to', `${endpoint}/webhooks`, '--from', file(content), '--secret', OTHER_SECRET]);
      expect(result.code, message).toBe(2);
      expect(result.stdout, message).toBe('');
      expect(result.stderr, message).toMatch(new RegExp(`^webhook-receiver replay: ${message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    }
    expect(handled).toEqual([]);
  }, TIMEOUT * 3);

  it('names what is wrong with the relay documents', async () => {
    const cases: [unknown, unknown, string][] = [
      ['not json', goodPayload, 'the event document is not JSON'],
      [{ ...goodEvent, headers: undefined }, goodPayload, 'the event document has no headers'],
      [{ ...goodEvent, headers: [['content-type', null]] }, goodPayload, 'the event document: headers[0] is not a [name, value] pair of two strings'],
      [{ ...goodEvent, method: undefined }, goodPayload, 'the event document has no method'],
      [goodEvent, { ...goodPayload, bodyBase64: 'e30=\n' }, 'the payload document: bodyBase64 does not decode as standard base64'],
      [goodEvent, { ...goodPayload, bytes: 5 }, 'the payload document: bytes is 5 but bodyBase64 decodes to 2 bytes'],
      [goodEvent, { ...goodPayload, bytes: undefined }, 'the payload document has no bytes'],
      [goodEvent, { ...goodPayload, contentType: undefined }, 'the payload document has no contentType'],
      [{ ...goodEvent, payloadBytes: 7 }, goodPayload, "the event document's payloadBytes is 7 but the payload is 2 bytes"],
      [goodEvent, [goodPayload], 'the payload document is an array, expected a JSON object'],
    ];
    for (const [event, payload, message] of cases) {
      const eventFile = file(typeof event === 'string' ? event : JSON.stringify(event));
      const payloadFile = file(JSON.stringify(payload));
      const result = await cli(['replay', '--to', `${endpoint}/webhooks`, '--event', eventFile, '--payload', payloadFile, '--secret', OTHER_SECRET]);
      expect(result.code, message).toBe(2);
      expect(result.stdout, message).toBe('');
      expect(result.stderr, message).toContain(`webhook-receiver replay: ${message}`);
      expect(result.stderr, message).toContain('nothing was sent');
    }
    expect(handled).toEqual([]);
  }, TIMEOUT * 3);

  it('refuses misuse, never repeating a value that may be a secret', async () => {
    const from = file(line({}));
    const event = file(JSON.stringify(goodEvent));
    const payload = file(JSON.stringify(goodPayload));
    const to = `${endpoint}/webhooks`;
    const cases: [string[], string][] = [
      [['--from', from], 'no --to: pass the URL to send the deliveries to'],
      [['--to', 'ftp://127.0.0.1/', '--from', from], '--to needs an http:// or https:// URL'],
      [['--to', 'http://u:p@127.0.0.1/', '--from', from], '--to must not carry credentials (user:password@)'],
      [['--to', 'http://example.com/webhooks', '--from', from], 'example.com is not this machine: replaying runs its real handler. Pass --yes to send there anyway'],
      [['--to', to], 'nothing to replay: pass --from FILE'],
      [['--to', to, '--from', from, '--event', event, '--payload', payload], 'pass either --from FILE or --event FILE --payload FILE, not both'],
      [['--to', to, '--event', event], '--event and --payload go together'],
      [['--to', to, '--event', event, '--payload', payload, '--last', '1'], '--id and --last choose lines of a --from file'],
      [['--to', to, '--from', from, '--id', 'msg_1', '--last', '1'], 'pass either --id or --last, not both'],
      [['--to', to, '--from', from, '--last', '0'], '--last must be a whole number from 1 to 1000000'],
      [['--to', to, '--from', from, '--timeout', 'soon'], '--timeout must be a whole number from 1 to 600'],
      [['--to', to, '--from', from, '--drop-header', 'a b'], '--drop-header takes a header name'],
      [['--to', to, '--from', from, '--method', 'PO ST'], '--method takes an HTTP method such as POST'],
      [['--to', to, '--from', join(dir, 'missing.jsonl')], 'cannot read the file given with --from: ENOENT'],
      [['--to', to, '--from', from, '--id', SECRET], 'no recorded delivery in the --from file carries the webhook-id given with --id'],
      [['--to', to, '--from', from, '--secret', 'whsec_c2hvcnQ='], 'secret[0] decodes to 5 bytes'],
      [['--to', to, '--from', from, SECRET], 'unexpected argument: options start with --, values follow their option'],
      [['--to', to, '--from', from, `--secret=${SECRET}`, '--timeout', SECRET], '--timeout must be a whole number from 1 to 600'],
    ];
    for (const [args, message] of cases) {
      const result = await cli(['replay', ...args], { WEBHOOK_SECRET: OTHER_SECRET });
      expect(result.code, message).toBe(2);
      expect(result.stdout, message).toBe('');
      expect(result.stderr, message).toContain(`webhook-receiver replay: ${message}`);
    }
    expect(handled).toEqual([]);
  }, TIMEOUT * 3);

  it('lists replay in the tool\'s help, and record options in listen\'s', async () => {
    const main = await cli(['--help']);
    expect(main.stdout).toContain("\n  replay              send captured deliveries (listen --record, the relay's documents) to your endpoint, re-signed\n");
    const replay = await cli(['replay', '--help']);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toMatch(/^Usage: webhook-receiver replay --to URL/);
    const listenHelp = await cli(['listen', '--help']);
    expect(listenHelp.stdout).toContain('  --record FILE       append every delivery to FILE');
    expect(listenHelp.stdout).toContain('  --max-body-bytes N  the largest body read and recorded');
  }, TIMEOUT);
});

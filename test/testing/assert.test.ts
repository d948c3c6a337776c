/**
 * assertSignedWebhook / assertUnsignedWebhook against requests that really went over HTTP, in
 * every RecordedRequest shape, and the exact parts of their failure messages.
 */

import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookError } from '../../src/errors.ts';
import { signWebhook } from '../../src/sign.ts';
import {
  WebhookAssertionError,
  assertSignedWebhook,
  assertUnsignedWebhook,
  signedRequest,
  type RecordedRequest,
} from '../../src/testing/index.ts';
import { OTHER_SECRET, SECRET, expectNoSecrets, hmac, KEY_BYTES, nowSeconds, senderHeaders } from './support.ts';

interface Captured {
  method: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}

// A real server that records what arrives, the way a relay's test double would.
let url: string;
const captured: Captured[] = [];
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    captured.push({ method: req.method ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks) });
    res.writeHead(204).end();
  });
});

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Sends headers and body over HTTP and returns what the server recorded. */
async function send(headers: Record<string, string>, body: string | Uint8Array): Promise<Captured> {
  const before = captured.length;
  const response = await fetch(url, { method: 'POST', headers, body: body as BodyInit });
  expect(response.status).toBe(204);
  expect(captured.length).toBe(before + 1);
  return captured[before]!;
}

/** Every RecordedRequest shape of one captured request. */
function shapes(capture: Captured): [string, () => RecordedRequest][] {
  const text = capture.body.toString('utf8');
  return [
    ['a Request', () => new Request(url, { method: 'POST', headers: capture.rawHeaders.reduce<[string, string][]>((pairs, v, i, all) => (i % 2 === 0 ? [...pairs, [v, all[i + 1]!]] : pairs), []), body: new Uint8Array(capture.body) })],
    ['{ headers: IncomingHttpHeaders, body: Buffer }', () => ({ headers: capture.headers, body: capture.body })],
    ['{ headers: Headers, body: string }', () => ({ headers: new Headers(capture.headers as Record<string, string>), body: text })],
    ['{ headers: [name, value][], body: ArrayBuffer }', () => ({ headers: Object.entries(capture.headers) as [string, string][], body: new Uint8Array(capture.body).slice().buffer })],
    ['{ headers, rawBody: Uint8Array }', () => ({ headers: capture.headers, rawBody: new Uint8Array(capture.body) })],
    ['{ headers, rawBody: string }', () => ({ headers: capture.headers, rawBody: text })],
  ];
}

async function failure(promise: Promise<unknown>): Promise<WebhookAssertionError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WebhookAssertionError);
  const assertion = error as WebhookAssertionError;
  expect(assertion.name).toBe('AssertionError');
  expectNoSecrets(assertion.message, [SECRET, OTHER_SECRET]);
  return assertion;
}

describe('assertSignedWebhook', () => {
  it('passes a signed request in every recorded shape, and returns it verified', async () => {
    const body = '{"type":"invoice.paid","data":{"id":"in_1"}}';
    const signed = await signWebhook({ secret: SECRET, body, id: 'msg_shapes' });
    const capture = await send({ 'content-type': 'application/json', ...signed.headers }, body);
    for (const [name, make] of shapes(capture)) {
      const webhook = await assertSignedWebhook(make(), { secrets: [{ key: OTHER_SECRET, keyId: 'old' }, { key: SECRET, keyId: 'new' }] });
      expect({ name, id: webhook.id, keyIndex: webhook.keyIndex, keyId: webhook.keyId, scheme: webhook.scheme, json: webhook.json() }).toEqual({
        name,
        id: 'msg_shapes',
        keyIndex: 1,
        keyId: 'new',
        scheme: 'v1',
        json: { type: 'invoice.paid', data: { id: 'in_1' } },
      });
    }
  });

  it('reads a Request from a clone, so the test can still read it', async () => {
    const request = await signedRequest('http://127.0.0.1/hook', { secret: SECRET, body: { a: 1 } });
    await assertSignedWebhook(request, { secrets: SECRET });
    expect(request.bodyUsed).toBe(false);
    expect(await request.json()).toEqual({ a: 1 });
  });

  it('fails a tampered body in every shape with SIGNATURE_MISMATCH, the request as received and no diagnosis match', async () => {
    const signed = await signWebhook({ secret: SECRET, body: '{"amount":100}', id: 'msg_tampered' });
    const capture = await send(signed.headers, '{"amount":999}');
    const expected = hmac(KEY_BYTES, 'msg_tampered', String(signed.timestamp), '{"amount":999}');
    for (const [, make] of shapes(capture)) {
      const error = await failure(assertSignedWebhook(make(), { secrets: SECRET }));
      expect(error.code).toBe('SIGNATURE_MISMATCH');
      expect(error.webhookError).toBeInstanceOf(WebhookError);
      expect(error.webhookError?.code).toBe('SIGNATURE_MISMATCH');
      expect(error.findings).toEqual([]);
      const lines = error.message.split('\n');
      expect(lines[0]).toBe(
        'expected a signed webhook, but verification failed with SIGNATURE_MISMATCH: no signature matched: 1 v1 entry tried against 1 HMAC secret. ' +
          'Hint: check that the secret is current and that the body is the raw bytes received, not re-serialised JSON',
      );
      expect(lines[1]).toBe('Request:');
      expect(lines[2]).toBe('  webhook-id: "msg_tampered"');
      expect(lines[3]).toMatch(new RegExp(`^  webhook-timestamp: "${signed.timestamp}" \\(\\d{4}-\\d\\d-\\d\\dT[0-9:.]+Z; (now|[0-9] s in the past), tolerance 300 s\\)$`));
      expect(lines[4]).toBe(`  webhook-signature: 1 entry: v1,${signed.signature.slice(3, 13)}… (44 chars)`);
      expect(lines[5]).toBe('  body: 14 bytes: "{\\"amount\\":999}"');
      expect(lines[6]).toBe('Keys tried: secrets[0]: v1 HMAC secret');
      expect(lines[7]).toMatch(/^Diagnosis: none of the usual sender bugs reproduces these signatures \(tried: the secret used as UTF-8 text; the 'whsec_' prefix left in the key; /);
      expect(lines[7]).toContain('Most likely the sender signs with another secret');
      // The signature the body would need is never shown: it would be a forgery.
      expectNoSecrets(error.message, [SECRET], [expected]);
    }
  });

  it('fails a wrong secret, naming the keys tried by index and keyId, never by value', async () => {
    const signed = await signWebhook({ secret: OTHER_SECRET, body: 'hello', id: 'msg_wrong' });
    const capture = await send(signed.headers, 'hello');
    const error = await failure(
      assertSignedWebhook({ headers: capture.headers, body: capture.body }, { secrets: [{ key: SECRET, keyId: 'current' }, SECRET.replace('whsec_', '')] }),
    );
    expect(error.code).toBe('SIGNATURE_MISMATCH');
    expect(error.message).toContain('no signature matched: 1 v1 entry tried against 2 HMAC secrets.');
    expect(error.message).toContain('\nKeys tried: secrets[0] (keyId "current"): v1 HMAC secret; secrets[1]: v1 HMAC secret\n');
    expect(error.message).toContain('  body: 5 bytes: "hello"');
    expect(error.message).toContain('Diagnosis: none of the usual sender bugs reproduces these signatures');
    expectNoSecrets(error.message, [SECRET, OTHER_SECRET], [hmac(KEY_BYTES, 'msg_wrong', String(signed.timestamp), 'hello')]);
  });

  it('fails a stale request with TIMESTAMP_TOO_OLD, how far off it is, and that the signature itself is valid', async () => {
    const timestamp = nowSeconds() - 3600;
    const signed = await signWebhook({ secret: SECRET, body: '{}', id: 'msg_stale', timestamp });
    const capture = await send(signed.headers, '{}');
    const error = await failure(assertSignedWebhook({ headers: capture.headers, rawBody: capture.body }, { secrets: SECRET, now: () => (timestamp + 3600) * 1000 }));
    expect(error.code).toBe('TIMESTAMP_TOO_OLD');
    expect(error.message.split('\n')[0]).toBe(
      'expected a signed webhook, but verification failed with TIMESTAMP_TOO_OLD: webhook-timestamp is 3600 s in the past; the tolerance is 300 s ' +
        '(a replay, a late retry with an old signature, or a slow clock)',
    );
    expect(error.message).toContain(`  webhook-timestamp: "${timestamp}" (${new Date(timestamp * 1000).toISOString()}; 3600 s in the past, tolerance 300 s)`);
    expect(error.message).toContain('Diagnosis: the signature is valid for this id, timestamp and body with secrets[0]; only the time check failed:');
    // A stale request whose signature is wrong as well says so.
    const forged = await signWebhook({ secret: OTHER_SECRET, body: '{}', id: 'msg_stale', timestamp });
    const both = await failure(assertSignedWebhook({ headers: forged.headers, body: '{}' }, { secrets: SECRET, now: () => (timestamp + 3600) * 1000 }));
    expect(both.code).toBe('TIMESTAMP_TOO_OLD');
    expect(both.message).toContain('\nDiagnosis: besides the timestamp, the signature does not match either, and none of the usual sender bugs reproduces these signatures (tried: ');
    // The same capture passes when checked as of its own time.
    const webhook = await assertSignedWebhook({ headers: capture.headers, rawBody: capture.body }, { secrets: SECRET, now: () => timestamp * 1000 });
    expect(webhook.id).toBe('msg_stale');
  });

  it('fails a request from the future with TIMESTAMP_TOO_NEW and the offset, honouring toleranceSeconds', async () => {
    const timestamp = nowSeconds() + 120;
    const signed = await signWebhook({ secret: SECRET, body: '{}', id: 'msg_future', timestamp });
    const capture = await send(signed.headers, '{}');
    const error = await failure(assertSignedWebhook(capture, { secrets: SECRET, toleranceSeconds: 60, now: () => (timestamp - 120) * 1000 }));
    expect(error.code).toBe('TIMESTAMP_TOO_NEW');
    expect(error.message).toContain('webhook-timestamp is 120 s in the future; the tolerance is 60 s');
    expect(error.message).toContain('; 120 s in the future, tolerance 60 s)');
    expect(error.message).toContain("only the time check failed: the sender's clock runs ahead of this one.");
  });

  it('fails an unsigned request with MISSING_SIGNATURE and shows what is missing', async () => {
    const capture = await send({ 'webhook-id': 'msg_unsigned', 'webhook-timestamp': String(nowSeconds()) }, '{"a":1}');
    const error = await failure(assertSignedWebhook({ headers: capture.headers, body: capture.body }, { secrets: SECRET }));
    expect(error.code).toBe('MISSING_SIGNATURE');
    expect(error.message.split('\n')[0]).toMatch(/^expected a signed webhook, but verification failed with MISSING_SIGNATURE: webhook-signature header is missing: the request is unsigned/);
    expect(error.message).toContain('\n  webhook-signature: (missing)\n');
    expect(error.message).not.toContain('Diagnosis:');
  });

  it('names the missing id, a malformed signature header and a millisecond timestamp', async () => {
    const noId = await failure(assertSignedWebhook({ headers: { 'webhook-timestamp': '1', 'webhook-signature': 'v1,x' }, body: '' }, { secrets: SECRET }));
    expect(noId.code).toBe('MISSING_ID');
    expect(noId.message).toContain('\n  webhook-id: (missing)\n');
    expect(noId.message).toContain('\n  body: 0 bytes: ""\n');

    const t = String(nowSeconds());
    const malformed = await failure(assertSignedWebhook({ headers: { 'webhook-id': 'm', 'webhook-timestamp': t, 'webhook-signature': 'garbage' }, body: '' }, { secrets: SECRET }));
    expect(malformed.code).toBe('INVALID_SIGNATURE_HEADER');
    expect(malformed.message).toContain(`webhook-signature: 1 entry: "garbage" (no 'version,' prefix)`);

    const ms = String(Date.now());
    const millis = await failure(assertSignedWebhook({ headers: { 'webhook-id': 'm', 'webhook-timestamp': ms, 'webhook-signature': 'v1,x' }, body: '' }, { secrets: SECRET }));
    expect(millis.code).toBe('INVALID_TIMESTAMP');
    expect(millis.message).toContain(`webhook-timestamp: "${ms}" (13 digits: milliseconds, not Unix seconds)`);
  });

  it('names svix-* headers by the name the request used', async () => {
    const signed = await signWebhook({ secret: OTHER_SECRET, body: 'x', id: 'msg_svix' });
    const capture = await send({ 'svix-id': signed.id, 'svix-timestamp': String(signed.timestamp), 'svix-signature': signed.signature }, 'x');
    const error = await failure(assertSignedWebhook(capture, { secrets: SECRET }));
    expect(error.message).toContain('\n  svix-id: "msg_svix"\n  svix-timestamp: "');
    expect(error.message).toContain('\n  svix-signature: 1 entry: v1,');
  });

  it('shows a long body as its length and SHA-256, and a binary one as not UTF-8', async () => {
    const long = JSON.stringify({ text: 'x'.repeat(400) });
    const signed = await signWebhook({ secret: OTHER_SECRET, body: long });
    const error = await failure(assertSignedWebhook({ headers: signed.headers, body: long }, { secrets: SECRET }));
    expect(error.message).toContain(`\n  body: ${long.length} bytes, SHA-256 ${createHash('sha256').update(long).digest('hex')}\n`);

    const binary = Uint8Array.from([0xff, 0xfe, 0x00, 0x01]);
    const signedBinary = await signWebhook({ secret: OTHER_SECRET, body: binary });
    const binaryError = await failure(assertSignedWebhook({ headers: signedBinary.headers, rawBody: binary }, { secrets: SECRET }));
    expect(binaryError.message).toContain(`\n  body: 4 bytes (not UTF-8), SHA-256 ${createHash('sha256').update(binary).digest('hex')}\n`);
  });

  it('refuses misuse with a TypeError that says what to pass', async () => {
    const headers = senderHeaders({ id: 'm', timestamp: String(nowSeconds()), body: '{"a":1}' });
    await expect(assertSignedWebhook({ headers, body: { a: 1 } as unknown as string }, { secrets: SECRET })).rejects.toThrow(
      new TypeError(
        "the recorded request's body is a parsed object, not the raw bytes: a JSON body parser ran before it was recorded, and re-serialising it does not give back the signed bytes. " +
          "Record the raw body (express.raw({ type: 'application/json' }), a Fastify raw-body parser, or await request.arrayBuffer())",
      ),
    );
    await expect(assertSignedWebhook({ headers } as unknown as RecordedRequest, { secrets: SECRET })).rejects.toThrow(
      "the recorded request has no body: record the raw body bytes (an empty body is '' or an empty Uint8Array)",
    );
    const used = await signedRequest('http://127.0.0.1/', { secret: SECRET, body: 'x' });
    await used.text();
    await expect(assertSignedWebhook(used, { secrets: SECRET })).rejects.toThrow(/^the Request body was already read/);
    await expect(assertSignedWebhook({ headers, body: '' }, { secrets: 'not a secret!' })).rejects.toThrow(TypeError);
    await expect(assertSignedWebhook(null as unknown as RecordedRequest, { secrets: SECRET })).rejects.toThrow(TypeError);
  });
});

describe('assertUnsignedWebhook', () => {
  it('passes an unsigned request with an id, in every shape, without reading the body', async () => {
    const capture = await send({ 'webhook-id': 'msg_unattempted', 'webhook-timestamp': String(nowSeconds()) }, '{"a":1}');
    for (const [, make] of shapes(capture)) await expect(assertUnsignedWebhook(make())).resolves.toBeUndefined();
    const request = new Request('http://127.0.0.1/', { method: 'POST', headers: { 'svix-id': 'msg_1' }, body: 'x' });
    await assertUnsignedWebhook(request);
    expect(request.bodyUsed).toBe(false);
  });

  it('fails a signed request with UNEXPECTED_SIGNATURE and lists the entries found', async () => {
    const signed = await signWebhook({ secret: [SECRET, OTHER_SECRET], body: 'x', id: 'msg_signed' });
    const capture = await send(signed.headers, 'x');
    const error = await failure(assertUnsignedWebhook(capture));
    const [first, second] = signed.signature.split(' ').map((entry) => entry.slice(3));
    expect(error.code).toBe('UNEXPECTED_SIGNATURE');
    expect(error.message).toBe(
      `expected an unsigned webhook, but it carries webhook-signature: 2 entries: v1,${first!.slice(0, 10)}… (44 chars), v1,${second!.slice(0, 10)}… (44 chars)\n` +
        'Request:\n  webhook-id: "msg_signed"',
    );
    const empty = await failure(assertUnsignedWebhook({ headers: { 'webhook-id': 'a', 'webhook-signature': '' }, body: '' }));
    expect(empty.message).toBe('expected an unsigned webhook, but it carries webhook-signature: (empty)\nRequest:\n  webhook-id: "a"');
  });

  it('fails a request without an id, or with two different ids', async () => {
    const capture = await send({ 'webhook-timestamp': String(nowSeconds()) }, 'x');
    const error = await failure(assertUnsignedWebhook(capture));
    expect(error.code).toBe('MISSING_ID');
    expect(error.message).toBe(
      "expected an unsigned webhook, but webhook-id is missing or empty: an unsigned event still carries its id (svix-id is accepted too), the receiver's idempotency key",
    );
    const twice = await failure(assertUnsignedWebhook({ headers: [['webhook-id', 'a'], ['webhook-id', 'b']], body: '' }));
    expect(twice.message).toBe('expected an unsigned webhook, but webhook-id appears 2 times with different values');
  });
});

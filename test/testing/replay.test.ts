/**
 * The testing kit's replay builder: a captured delivery (a `listen --record` line, or the relay's
 * event and payload documents) made into a re-signed `Request` for a fetch handler, and into
 * headers supertest sends to an Express app; the id, header and signing rules; its errors.
 */

import express from 'express';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { webhookHandler } from '../../adapters/fetch.ts';
import { webhookOf, webhooks } from '../../adapters/express.ts';
import { createVerifier } from '../../src/verify.ts';
import {
  isCredentialHeader,
  parseCapturedDelivery,
  parseRelayEvent,
  redactCredentialHeaders,
  REDACTED,
  replayRequest,
  signReplay,
  type CapturedDelivery,
  type RelayEventDocument,
  type RelayPayloadDocument,
} from '../../src/testing/index.ts';
import { KEY_BYTES, OTHER_SECRET, SECRET, expectNoSecrets, hmac } from './support.ts';

const json = '{"type":"invoice.paid"}';
const binary = Uint8Array.from([0x00, 0xff, 0xfe, 0x80, 0x0a]);

const line: CapturedDelivery = {
  method: 'POST',
  path: '/in',
  headers: [
    ['Host', 'api.example.com'],
    ['Content-Type', 'application/json'],
    ['X-Tag', 'a'],
    ['webhook-id', 'msg_line'],
    ['webhook-timestamp', '1'],
    ['webhook-signature', 'v1,old'],
    ['x-tag', 'b'],
    ['Content-Encoding', 'gzip'],
    ['Stripe-Signature', 't=1,v1=abc'],
  ],
  contentType: 'application/json',
  bytes: json.length,
  bodyBase64: Buffer.from(json).toString('base64'),
  receivedAt: '2026-11-20T10:00:00.000Z',
  status: 204,
  verification: { ok: true, id: 'msg_line', scheme: 'v1', keyIndex: 0, keyId: null },
};

const event: RelayEventDocument = { id: 'evt_9', method: 'POST', headers: [['content-type', 'application/octet-stream'], ['accept', 'x'], ['accept', 'y']], payloadBytes: binary.byteLength };
const payload: RelayPayloadDocument = { contentType: 'application/octet-stream', bytes: binary.byteLength, bodyBase64: Buffer.from(binary).toString('base64') };

describe('signReplay', () => {
  it('keeps the captured id and header order, replaces the signing headers in place, drops hop-by-hop, content-encoding and credentials', async () => {
    const replay = await signReplay(parseCapturedDelivery(JSON.stringify(line)), { secret: OTHER_SECRET, timestamp: 1700000000 });
    expect(replay).toMatchObject({ id: 'msg_line', idSource: 'captured', timestamp: 1700000000, signed: true, method: 'POST', dropped: ['host', 'content-encoding', 'stripe-signature'] });
    const signature = `v1,${hmac(Buffer.from(OTHER_SECRET.slice(6), 'base64'), 'msg_line', '1700000000', json)}`;
    expect(replay.headers).toEqual([
      ['Content-Type', 'application/json'],
      ['X-Tag', 'a'],
      ['webhook-id', 'msg_line'],
      ['webhook-timestamp', '1700000000'],
      ['webhook-signature', signature],
      ['x-tag', 'b'],
    ]);
    expect(replay.headerRecord).toEqual({
      'content-type': 'application/json',
      'x-tag': ['a', 'b'],
      'webhook-id': 'msg_line',
      'webhook-timestamp': '1700000000',
      'webhook-signature': signature,
    });
    expect(replay.bodyText).toBe(json);
    expectNoSecrets(JSON.stringify(replay), [SECRET, OTHER_SECRET]);
  });

  it('takes the id from the capture, then the relay event, then a fresh one; newId always gives a fresh one', async () => {
    const source = parseRelayEvent(event, payload);
    expect((await signReplay(source, { secret: SECRET })).id).toBe('evt_9');
    expect((await signReplay(source, { secret: SECRET })).idSource).toBe('event');
    const withSvix = parseRelayEvent({ ...event, headers: [['svix-id', 'msg_svix'], ['svix-timestamp', '1'], ['svix-signature', 'v1,x']] }, payload);
    const svix = await signReplay(withSvix, { secret: SECRET, timestamp: 1700000000 });
    expect([svix.id, svix.idSource]).toEqual(['msg_svix', 'captured']);
    // Sent with svix-* names: answered with svix-* names.
    expect(svix.headers.map(([name]) => name)).toEqual(['svix-id', 'svix-timestamp', 'svix-signature', 'content-type']);
    const anonymous = parseRelayEvent({ method: 'POST', headers: [] }, payload);
    const fresh = await signReplay(anonymous, { secret: SECRET });
    expect(fresh.idSource).toBe('fresh');
    expect(fresh.id).toMatch(/^msg_[0-9A-Za-z]{27}$/);
    // No content-type among the headers: the envelope's is added.
    expect(fresh.headers.at(-1)).toEqual(['content-type', 'application/octet-stream']);
    const renewed = await signReplay(parseCapturedDelivery(line), { secret: SECRET, newId: true });
    expect(renewed.idSource).toBe('new');
    expect(renewed.id).not.toBe('msg_line');
    expect(renewed.headers).toContainEqual(['webhook-id', renewed.id]);
  });

  it('signs with every secret given, and verifies with any of them', async () => {
    const replay = await signReplay(parseRelayEvent(event, payload), { secret: [SECRET, OTHER_SECRET] });
    expect(replay.headerRecord['webhook-signature']).toMatch(/^v1,\S+ v1,\S+$/);
    const verified = await createVerifier({ secrets: OTHER_SECRET }).verify({ headers: replay.headers, body: replay.body });
    expect([verified.id, verified.keyIndex]).toEqual(['evt_9', 0]);
    expect(verified.body).toEqual(binary);
    expect(hmac(KEY_BYTES, replay.id, String(replay.timestamp), binary)).toBe(String(replay.headerRecord['webhook-signature']).split(' ')[0]!.slice(3));
  });

  it('is unsigned only when asked, and never with a secret as well', async () => {
    const source = parseCapturedDelivery(line);
    const unsigned = await signReplay(source, { unsigned: true, timestamp: new Date(1700000000_500), dropHeaders: ['Stripe-Signature'] });
    expect(unsigned.signed).toBe(false);
    expect(unsigned.headers).toEqual([
      ['Content-Type', 'application/json'],
      ['X-Tag', 'a'],
      ['webhook-id', 'msg_line'],
      ['webhook-timestamp', '1700000000'],
      ['x-tag', 'b'],
    ]);
    expect(unsigned.dropped).toEqual(['host', 'content-encoding', 'stripe-signature']);
    await expect(signReplay(source, {})).rejects.toThrow(
      new TypeError('no secret to re-sign the delivery with: pass secret, or unsigned: true to send it without a signature (as the relay forwards unattempted events)'),
    );
    await expect(signReplay(source, { secret: SECRET, unsigned: true })).rejects.toThrow(new TypeError('pass either secret (to re-sign) or unsigned: true, not both'));
    await expect(signReplay(source, { secret: SECRET, dropHeaders: ['bad name'] })).rejects.toThrow(new TypeError('dropHeaders holds a name that is not a valid HTTP header name'));
    await expect(signReplay(source, { secret: 'whsec_c2hvcnQ=' })).rejects.toThrow(RangeError);
  });
});

describe('captures refused where they were captured, and methods not recorded', () => {
  const forged: CapturedDelivery = { ...line, status: 401, verification: { ok: false, code: 'SIGNATURE_MISMATCH', message: 'no signature matched' } };

  it('re-signs a refused capture only with includeRejected: a forgery must not come out signed', async () => {
    const source = parseCapturedDelivery(forged);
    expect(source.rejected).toEqual({ code: 'SIGNATURE_MISMATCH', reason: 'refused when recorded: 401 SIGNATURE_MISMATCH: no signature matched' });
    await expect(signReplay(source, { secret: OTHER_SECRET })).rejects.toThrow(
      new TypeError(
        'the capture was refused where it was captured (refused when recorded: 401 SIGNATURE_MISMATCH: no signature matched): re-signing it would make it pass; pass includeRejected: true to replay it anyway',
      ),
    );
    expect((await signReplay(source, { secret: OTHER_SECRET, includeRejected: true })).signed).toBe(true);
    expect(parseCapturedDelivery(line).rejected).toBeUndefined();

    const failed = parseRelayEvent({ ...event, verificationState: 'failed' }, payload);
    expect(failed.rejected?.code).toBe('failed');
    await expect(signReplay(failed, { unsigned: true })).rejects.toThrow(TypeError);
    expect(parseRelayEvent({ ...event, verificationState: 'unattempted' }, payload).rejected).toBeUndefined();
    expect(parseRelayEvent({ ...event, verification: { ok: false } }, payload).rejected?.code).toBe('failed');
  });

  it('sends a capture without a recorded method only with the method given, and keeps a recorded one', async () => {
    const source = parseRelayEvent({ ...event, method: null }, payload);
    expect(source.method).toBeNull();
    await expect(signReplay(source, { secret: SECRET })).rejects.toThrow(
      new TypeError('the capture has no method (null: not recorded, and never to be read as POST): pass method to say which to send'),
    );
    expect((await signReplay(source, { secret: SECRET, method: 'PUT' })).method).toBe('PUT');
    expect((await signReplay(parseRelayEvent(event, payload), { secret: SECRET, method: 'PUT' })).method).toBe('POST');
    await expect(signReplay(source, { secret: SECRET, method: 'P T' })).rejects.toThrow(new TypeError('method must be an HTTP method such as "POST"'));
  });
});

describe('credential headers', () => {
  it('are named by a list and by the words in their names; idempotency keys and ids are not credentials', () => {
    const credentials = [
      'Authorization',
      'proxy-authorization',
      'Cookie',
      'set-cookie',
      'X-API-Key',
      'webhook-signature',
      'svix-signature',
      'Stripe-Signature',
      'X-Hub-Signature',
      'X-Hub-Signature-256',
      'X-Slack-Signature',
      'X-Twilio-Signature',
      'X-Shopify-Hmac-Sha256',
      'X-Square-HmacSha256-Signature',
      'X-Gitlab-Token',
      'X-Webhook-Secret',
      'X-Auth-Token',
      'X-Amz-Security-Token',
      'X-Goog-Api-Key',
      'X-Signature-Ed25519',
    ];
    for (const name of credentials) expect(isCredentialHeader(name), name).toBe(true);
    for (const name of ['content-type', 'webhook-id', 'webhook-timestamp', 'svix-id', 'Idempotency-Key', 'X-Request-Id', 'user-agent', 'x-forwarded-for', 'accept']) {
      expect(isCredentialHeader(name), name).toBe(false);
    }
  });

  it('are redacted in place, names, order and repeats kept; a replay sends none, nor any [redacted] value', async () => {
    const headers: [string, string][] = [
      ['Content-Type', 'application/json'],
      ['Cookie', 'a=1'],
      ['X-Tag', 'x'],
      ['cookie', 'b=2'],
      ['Stripe-Signature', 't=1,v1=abc'],
    ];
    expect(redactCredentialHeaders(headers)).toEqual([
      ['Content-Type', 'application/json'],
      ['Cookie', REDACTED],
      ['X-Tag', 'x'],
      ['cookie', REDACTED],
      ['Stripe-Signature', REDACTED],
    ]);
    expect(REDACTED).toBe('[redacted]');
    const replay = await signReplay(parseRelayEvent({ ...event, headers: [...headers, ['X-Other', REDACTED], ['Authorization', 'Bearer whk_key']] }, payload), { secret: SECRET });
    expect(replay.headers.map(([name]) => name)).toEqual(['Content-Type', 'X-Tag', 'webhook-id', 'webhook-timestamp', 'webhook-signature']);
    expect(replay.dropped).toEqual(['cookie', 'stripe-signature', 'x-other', 'authorization']);
  });
});

describe('parseCapturedDelivery and parseRelayEvent', () => {
  it('refuse what cannot be replayed faithfully, with a TypeError naming it', () => {
    expect(() => parseCapturedDelivery({ ...line, bytes: 0, bodyBase64: '', status: 413, verification: { ok: false, code: 'PAYLOAD_TOO_LARGE', message: 'too large' } })).toThrow(
      new TypeError("the recorded delivery: its body was not kept (over the recorder's limit): record it again with a larger --max-body-bytes"),
    );
    expect(() => parseCapturedDelivery('{', 'line 7')).toThrow(new TypeError('line 7 is not JSON'));
    expect(() => parseCapturedDelivery({ ...line, headers: [['a', 'b', 'c']] } as unknown as CapturedDelivery)).toThrow(
      new TypeError('the recorded delivery: headers[0] is not a [name, value] pair of two strings'),
    );
    expect(() => parseRelayEvent(event, { ...payload, bytes: 4 })).toThrow(
      new TypeError('the payload document: bytes is 4 but bodyBase64 decodes to 5 bytes: the body is not the one captured'),
    );
    expect(() => parseRelayEvent(event, { ...payload, bodyBase64: 'AP/+gAo' })).not.toThrow();
    expect(() => parseRelayEvent(event, { ...payload, bodyBase64: 'AP/+gA-o' })).toThrow(new TypeError('the payload document: bodyBase64 does not decode as standard base64'));
    expect(() => parseRelayEvent({ ...event, id: 7 } as unknown as RelayEventDocument, payload)).toThrow(new TypeError('the event document: id is a number, expected the event id, a string'));
  });
});

describe('replayRequest', () => {
  it('gives a fetch handler a Request it verifies; the Headers join repeats, as documented', async () => {
    const seen: { id: string; body: Uint8Array }[] = [];
    const handler = webhookHandler({ secrets: OTHER_SECRET, onRejected: () => {} }, (webhook) => {
      seen.push({ id: webhook.id, body: webhook.body });
    });
    const replay = await signReplay(parseRelayEvent(event, payload), { secret: OTHER_SECRET });
    const req = replayRequest('http://localhost/webhooks', replay);
    expect(req.headers.get('accept')).toBe('x, y');
    const response = await handler(req);
    expect(response.status).toBe(204);
    expect(seen).toEqual([{ id: 'evt_9', body: binary }]);
    // The same id again: the handler's deduplication answers it.
    const again = await handler(replayRequest('http://localhost/webhooks', await signReplay(parseRelayEvent(event, payload), { secret: OTHER_SECRET })));
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ duplicate: true });
    expect(seen).toHaveLength(1);
  });

  it('refuses a GET or HEAD with a body', async () => {
    const replay = await signReplay(parseRelayEvent({ ...event, method: 'GET' }, payload), { secret: SECRET });
    expect(() => replayRequest('http://localhost/', replay)).toThrow(new TypeError('a Request cannot carry a body with GET; send this replay with node:http (replay.headers)'));
  });
});

describe('supertest with headerRecord', () => {
  it('sends a text and a binary replay that an Express endpoint verifies, repeats kept', async () => {
    const seen: { id: string; body: Buffer; accept: string[] }[] = [];
    const app = express();
    app.post('/webhooks', webhooks({ secrets: OTHER_SECRET, onRejected: () => {} }), (req, res) => {
      const webhook = webhookOf(req);
      const accept: string[] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === 'accept') accept.push(req.rawHeaders[i + 1]!);
      seen.push({ id: webhook.id, body: Buffer.from(webhook.body), accept });
      res.sendStatus(204);
    });
    for (const source of [parseCapturedDelivery(line), parseRelayEvent(event, payload)]) {
      const replay = await signReplay(source, { secret: OTHER_SECRET });
      // A string is sent as is; a Buffer with a JSON content type would be serialised by supertest.
      const response = await request(app).post('/webhooks').set(replay.headerRecord).send(replay.bodyText ?? Buffer.from(replay.body));
      expect(response.status).toBe(204);
    }
    expect(seen).toEqual([
      { id: 'msg_line', body: Buffer.from(json), accept: [] },
      { id: 'evt_9', body: Buffer.from(binary), accept: ['x', 'y'] },
    ]);
  });
});

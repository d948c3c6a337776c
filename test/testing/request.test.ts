/**
 * signedRequest: a Request that a real receiver accepts, through Hono's app.request and over
 * real HTTP with fetch.
 */

import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { createVerifier } from '../../src/verify.ts';
import { createTestReceiver, generateKeyPair, signedRequest } from '../../src/testing/index.ts';
import { KEY_BYTES, OTHER_SECRET, SECRET, hmac } from './support.ts';

describe('signedRequest', () => {
  it('signs an object body as JSON, with the three headers over exactly the bytes sent', async () => {
    const request = await signedRequest('http://127.0.0.1/webhooks', { secret: SECRET, body: { type: 'ping', n: 1 }, id: 'msg_obj', timestamp: 1700000000 });
    expect(request.method).toBe('POST');
    expect(request.url).toBe('http://127.0.0.1/webhooks');
    expect(Object.fromEntries(request.headers)).toEqual({
      'content-type': 'application/json',
      'webhook-id': 'msg_obj',
      'webhook-timestamp': '1700000000',
      'webhook-signature': `v1,${hmac(KEY_BYTES, 'msg_obj', '1700000000', '{"type":"ping","n":1}')}`,
    });
    expect(await request.text()).toBe('{"type":"ping","n":1}');
  });

  it('sends strings and bytes exactly as given, signs with every secret, takes a Date, applies extra headers last', async () => {
    const bytes = Uint8Array.from([0, 1, 2, 255]);
    const request = await signedRequest(new URL('http://127.0.0.1/b'), {
      secret: [SECRET, OTHER_SECRET],
      body: bytes,
      id: 'msg_bytes',
      timestamp: new Date(1700000000_999),
      headers: { 'content-type': 'application/octet-stream', 'x-extra': 'yes' },
      method: 'PUT',
    });
    expect(request.method).toBe('PUT');
    expect(request.headers.get('content-type')).toBe('application/octet-stream');
    expect(request.headers.get('x-extra')).toBe('yes');
    expect(request.headers.get('webhook-timestamp')).toBe('1700000000');
    expect(request.headers.get('webhook-signature')?.split(' ')).toEqual([
      `v1,${hmac(KEY_BYTES, 'msg_bytes', '1700000000', bytes)}`,
      `v1,${hmac(Buffer.from(OTHER_SECRET.slice(6), 'base64'), 'msg_bytes', '1700000000', bytes)}`,
    ]);
    expect(new Uint8Array(await request.arrayBuffer())).toEqual(bytes);

    const text = await signedRequest('http://127.0.0.1/', { secret: SECRET, body: 'line\n' });
    expect(await text.text()).toBe('line\n');
    const overridden = await signedRequest('http://127.0.0.1/', { secret: SECRET, body: 'x', headers: { 'webhook-signature': 'v1,bogus' } });
    expect(overridden.headers.get('webhook-signature')).toBe('v1,bogus');
  });

  it('makes v1a requests from a whsk_ key that the public key verifies', async () => {
    const { secretKey, publicKey } = await generateKeyPair();
    const request = await signedRequest('http://127.0.0.1/', { secret: secretKey, body: { a: 1 } });
    expect(request.headers.get('webhook-signature')).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    const webhook = await createVerifier({ secrets: publicKey }).verifyRequest(request);
    expect(webhook.scheme).toBe('v1a');
  });

  it("is accepted by a Hono app through app.request", async () => {
    const verifier = createVerifier({ secrets: SECRET });
    const app = new Hono().post('/webhooks', async (c) => {
      const webhook = await verifier.verifyRequest(c.req.raw);
      return c.json({ id: webhook.id, body: webhook.json() });
    });
    const response = await app.request(await signedRequest('http://localhost/webhooks', { secret: SECRET, body: { type: 'ping' }, id: 'msg_hono' }));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ id: 'msg_hono', body: { type: 'ping' } });
  });

  it('is accepted over real HTTP by the test receiver', async () => {
    const receiver = await createTestReceiver({ secrets: SECRET });
    try {
      const response = await fetch(await signedRequest(`${receiver.url}/hook`, { secret: SECRET, body: { type: 'ping' }, id: 'msg_http' }));
      expect(response.status).toBe(204);
      const [delivery] = await receiver.waitForDeliveries(1);
      expect(delivery!.verification.ok).toBe(true);
      expect(delivery!.verification.ok && delivery!.verification.webhook.id).toBe('msg_http');
    } finally {
      await receiver.close();
    }
  });

  it('refuses a body with GET or HEAD, which would be signed and then not sent; an empty body is fine', async () => {
    for (const method of ['GET', 'head', 'Get']) {
      await expect(signedRequest('http://127.0.0.1/', { secret: SECRET, body: { a: 1 }, method })).rejects.toThrow(
        new TypeError(`signedRequest cannot send a body with ${method.toUpperCase()}: the signature covers the body, so pass body: '' or use another method`),
      );
    }
    const get = await signedRequest('http://127.0.0.1/', { secret: SECRET, body: '', method: 'GET', id: 'msg_get' });
    expect(get.method).toBe('GET');
    expect(get.body).toBeNull();
    expect((await createVerifier({ secrets: SECRET }).verify({ headers: get.headers, body: '' })).id).toBe('msg_get');
  });

  it('refuses bad input with a TypeError or RangeError', async () => {
    await expect(signedRequest('http://127.0.0.1/', { secret: SECRET, body: undefined as unknown as string })).rejects.toThrow(
      new TypeError('signedRequest needs a body: a string, bytes, or a value to send as JSON'),
    );
    await expect(signedRequest('http://127.0.0.1/', { secret: 'whsec_!!', body: 'x' })).rejects.toThrow(TypeError);
    await expect(signedRequest('http://127.0.0.1/', { secret: SECRET, body: 'x', timestamp: 1.5 })).rejects.toThrow(RangeError);
    await expect(signedRequest('http://127.0.0.1/', null as unknown as { secret: string; body: string })).rejects.toThrow(TypeError);
  });
});

/**
 * `signedLambdaEvent`: the events it builds, fed to the real Lambda adapter's handler, get the
 * answers a deployed function gives (204, then a duplicate, 401 for a broken signature), and have
 * the shapes `@types/aws-lambda` gives API Gateway's and function URLs' events.
 */

import { gzipSync } from 'node:zlib';
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2, LambdaFunctionURLEvent } from 'aws-lambda';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { webhookHandler, type LambdaHttpEvent } from '../../adapters/lambda.ts';
import { generateSecret } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { VerifiedWebhook } from '../../src/verify.ts';
import { signedLambdaEvent, type HttpApiLambdaEvent, type LambdaEventSource, type RestApiLambdaEvent } from '../../src/testing/index.ts';

const context = { getRemainingTimeInMillis: () => 30_000 };
const SOURCES: LambdaEventSource[] = ['rest-api', 'http-api', 'function-url'];

function receiver(secret: string) {
  const seen: VerifiedWebhook[] = [];
  const handler = webhookHandler({ secrets: secret, idempotency: { store: memoryStore() } }, (webhook) => {
    seen.push(webhook);
  });
  return { handler, seen };
}

/** What the Lambda runtime does with a handler's answer: JSON on the way out. */
async function invoke(handler: ReturnType<typeof receiver>['handler'], event: LambdaHttpEvent) {
  const result = await handler(JSON.parse(JSON.stringify(event)) as LambdaHttpEvent, context);
  return { status: result.statusCode, body: result.body === '' ? undefined : (JSON.parse(result.body) as unknown) };
}

describe.each(SOURCES)('signedLambdaEvent, %s, through the Lambda adapter', (source) => {
  it('is accepted once (204), then answered as a duplicate (200) without running the handler again', async () => {
    const secret = generateSecret();
    const { handler, seen } = receiver(secret);
    const event = await signedLambdaEvent({ source, secret, body: { type: 'invoice.paid', data: { id: 'in_1' } }, id: 'msg_lambda_1' });
    expect(await invoke(handler, event)).toEqual({ status: 204, body: undefined });
    expect(await invoke(handler, event)).toEqual({ status: 200, body: { duplicate: true } });
    expect(seen.map((webhook) => [webhook.id, webhook.json()])).toEqual([['msg_lambda_1', { type: 'invoice.paid', data: { id: 'in_1' } }]]);
  });

  it('is refused 401 when signed with another secret or a test replaces the signature (400 for an empty one)', async () => {
    const secret = generateSecret();
    const { handler, seen } = receiver(secret);
    const wrongKey = await signedLambdaEvent({ source, secret: generateSecret(), body: '{"type":"x"}' });
    expect(await invoke(handler, wrongKey)).toEqual({ status: 401, body: { error: 'SIGNATURE_MISMATCH', message: expect.any(String) } });
    const replaced = await signedLambdaEvent({ source, secret, body: '{"type":"x"}', headers: { 'webhook-signature': 'v1,AAAA' } });
    expect(await invoke(handler, replaced)).toMatchObject({ status: 401 });
    const unsigned = await signedLambdaEvent({ source, secret, body: '{"type":"x"}', headers: { 'Webhook-Signature': '' } });
    expect(await invoke(handler, unsigned)).toEqual({ status: 400, body: { error: 'INVALID_SIGNATURE_HEADER', message: 'webhook-signature is present but empty' } });
    expect(seen).toEqual([]);
  });

  it('carries bytes that are not UTF-8 base64-encoded, and verifies them as sent', async () => {
    const secret = generateSecret();
    const { handler, seen } = receiver(secret);
    const bytes = new Uint8Array([0xff, 0xfe, 0x00, 0x80, 0x41]);
    const event = await signedLambdaEvent({ source, secret, body: bytes, headers: { 'content-type': 'application/octet-stream' } });
    expect(event.isBase64Encoded).toBe(true);
    expect(event.body).toBe(Buffer.from(bytes).toString('base64'));
    expect((await invoke(handler, event)).status).toBe(204);
    expect([...seen[0]!.body]).toEqual([...bytes]);
  });

  it('sends a text body base64-encoded on request, and a gzip body with its content-encoding', async () => {
    const secret = generateSecret();
    const { handler, seen } = receiver(secret);
    const text = await signedLambdaEvent({ source, secret, body: '{"type":"text"}', base64: true });
    expect(text.isBase64Encoded).toBe(true);
    expect(Buffer.from(text.body!, 'base64').toString()).toBe('{"type":"text"}');
    expect((await invoke(handler, text)).status).toBe(204);
    // The sender signs the payload; content-encoding is transport, decoded before verification.
    const payload = '{"type":"gzip"}';
    const signedPayload = await signedLambdaEvent({ source, secret, body: payload, base64: true });
    const gzipped = { ...signedPayload, body: gzipSync(payload).toString('base64') };
    gzipped.headers = { ...signedPayload.headers, [source === 'rest-api' ? 'Content-Encoding' : 'content-encoding']: 'gzip' };
    if ('multiValueHeaders' in gzipped) gzipped.multiValueHeaders = { ...gzipped.multiValueHeaders, 'Content-Encoding': ['gzip'] };
    expect((await invoke(handler, gzipped)).status).toBe(204);
    expect(seen.map((webhook) => webhook.text())).toEqual(['{"type":"text"}', payload]);
  });
});

describe('signedLambdaEvent, the shapes', () => {
  it("REST API (payload 1.0): headers in the sender's case, in headers and multiValueHeaders, and a proxy request context", async () => {
    const event = await signedLambdaEvent({ source: 'rest-api', secret: generateSecret(), body: '{}', id: 'msg_1', timestamp: 1_700_000_000, path: '/webhooks/acme?source=billing&x=1&x=2', pathParameters: { tenant: 'acme' } });
    expect(event).toMatchObject({
      resource: '/webhooks/acme',
      path: '/webhooks/acme',
      httpMethod: 'POST',
      body: '{}',
      isBase64Encoded: false,
      pathParameters: { tenant: 'acme' },
      queryStringParameters: { source: 'billing', x: '2' },
      multiValueQueryStringParameters: { source: ['billing'], x: ['1', '2'] },
      requestContext: { httpMethod: 'POST', stage: 'prod', path: '/prod/webhooks/acme', resourcePath: '/webhooks/acme', identity: { sourceIp: '127.0.0.1' } },
    });
    expect(event.headers).toMatchObject({ 'Content-Type': 'application/json', 'Webhook-Id': 'msg_1', 'Webhook-Timestamp': '1700000000', 'Webhook-Signature': expect.stringMatching(/^v1,/) });
    expect(Object.keys(event.multiValueHeaders)).toEqual(Object.keys(event.headers));
    expect(event.multiValueHeaders['Webhook-Id']).toEqual(['msg_1']);
    expect(event.requestContext.requestTimeEpoch).toBeGreaterThan(0);
    expect(event.requestContext.requestTime).toMatch(/^\d\d\/[A-Z][a-z]{2}\/\d{4}:\d\d:\d\d:\d\d \+0000$/);
  });

  it('a header given in another case replaces the default one (REST keeps the case given)', async () => {
    const event = await signedLambdaEvent({ source: 'rest-api', secret: generateSecret(), body: 'x', headers: { 'content-type': 'text/plain', 'X-Tenant': 'acme' } });
    expect(event.headers['Content-Type']).toBeUndefined();
    expect(event.headers).toMatchObject({ 'content-type': 'text/plain', 'X-Tenant': 'acme' });
  });

  it('HTTP API and function URL (payload 2.0): lower-case names, cookies apart, their route keys and request contexts', async () => {
    const secret = generateSecret();
    const http = await signedLambdaEvent({ secret, body: '{}', path: '/hooks?a=1&a=2', headers: { Cookie: 'session=1; theme=dark', 'X-Tenant': 'acme' } });
    expect(http).toMatchObject({
      version: '2.0',
      routeKey: 'POST /hooks',
      rawPath: '/hooks',
      rawQueryString: 'a=1&a=2',
      queryStringParameters: { a: '1,2' },
      cookies: ['session=1', 'theme=dark'],
      requestContext: { routeKey: 'POST /hooks', stage: '$default', http: { method: 'POST', path: '/hooks', sourceIp: '127.0.0.1' } },
    });
    expect(Object.keys(http.headers).every((name) => name === name.toLowerCase())).toBe(true);
    expect(http.headers).toMatchObject({ 'x-tenant': 'acme', 'webhook-id': expect.stringMatching(/^msg_/) });
    expect(http.headers.cookie).toBeUndefined();
    const url = await signedLambdaEvent({ source: 'function-url', secret, body: '{}' });
    expect(url).toMatchObject({ routeKey: '$default', rawQueryString: '', requestContext: { routeKey: '$default', accountId: 'anonymous', domainName: expect.stringMatching(/\.lambda-url\.[a-z0-9-]+\.on\.aws$/) } });
    expect(url.headers.host).toBe(url.requestContext.domainName);
    expect('queryStringParameters' in url).toBe(false);
  });

  it("fits @types/aws-lambda's event types and the adapter's", async () => {
    const secret = generateSecret();
    const rest = await signedLambdaEvent({ source: 'rest-api', secret, body: '{}' });
    const http = await signedLambdaEvent({ source: 'http-api', secret, body: '{}' });
    const url = await signedLambdaEvent({ source: 'function-url', secret, body: '{}' });
    expectTypeOf(rest).toEqualTypeOf<RestApiLambdaEvent>();
    expectTypeOf(http).toEqualTypeOf<HttpApiLambdaEvent>();
    expectTypeOf(rest).toExtend<APIGatewayProxyEvent>();
    expectTypeOf(http).toExtend<APIGatewayProxyEventV2>();
    expectTypeOf(url).toExtend<LambdaFunctionURLEvent>();
    expectTypeOf(rest).toExtend<LambdaHttpEvent>();
    expectTypeOf(url).toExtend<LambdaHttpEvent>();
  });

  it('refuses bad input with a TypeError that says what is wrong', async () => {
    const secret = generateSecret();
    await expect(signedLambdaEvent({ source: 'alb' as LambdaEventSource, secret, body: '{}' })).rejects.toThrow(/source must be 'rest-api', 'http-api' or 'function-url', got "alb"/);
    await expect(signedLambdaEvent({ secret, body: '{}', path: 'webhooks' })).rejects.toThrow(/path must start with '\/'/);
    await expect(signedLambdaEvent({ secret, body: '{}', method: 'GET' })).rejects.toThrow(/cannot send a body with GET/);
    await expect(signedLambdaEvent(null as never)).rejects.toThrow(TypeError);
    const bodiless = await signedLambdaEvent({ source: 'rest-api', secret, body: '', method: 'GET' });
    expect(bodiless).toMatchObject({ httpMethod: 'GET', body: null, isBase64Encoded: false });
  });
});

/**
 * examples/lambda.ts as Lambda loads it: the module imported with WEBHOOK_SECRET set, `handler`
 * invoked with an HTTP API event (test/fixtures/lambda/) and a runtime-like context; then with
 * CLAIMS_TABLE set, loaded twice (two containers) against dynalite.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSecret, signWebhook } from 'webhook-receiver';
import type { LambdaHandler, LambdaHttpEvent } from 'webhook-receiver/lambda';
import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';
import { startDynalite } from '../support/dynamodb.ts';
import { BODY } from './support.ts';

const secret = generateSecret();
let handler: LambdaHandler;
let log: MockInstance<typeof console.log>;

beforeAll(async () => {
  vi.stubEnv('WEBHOOK_SECRET', secret);
  log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
  ({ handler } = await import('../../examples/lambda.ts'));
});
afterAll(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

function event(headers: Record<string, string>, body: string): LambdaHttpEvent {
  const fixture = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/lambda/http-api.json'), 'utf8')) as LambdaHttpEvent;
  return { ...fixture, headers: { ...fixture.headers, ...headers }, body: Buffer.from(body).toString('base64'), isBase64Encoded: true };
}

const context = { getRemainingTimeInMillis: () => 10_000, awsRequestId: 'req-1', functionName: 'webhooks' };

describe('examples/lambda.ts', () => {
  it('processes a signed event once and answers its retry as a duplicate', async () => {
    const signed = await signWebhook({ secret, body: BODY, id: 'msg_lambda_1' });
    const first = await handler(event(signed.headers, BODY), context);
    expect(first).toMatchObject({ statusCode: 200 });
    expect(JSON.parse(first.body)).toEqual({ received: true, id: 'msg_lambda_1', keyId: null });
    const retry = await handler(event(signed.headers, BODY), context);
    expect(retry).toMatchObject({ statusCode: 200, body: '{"duplicate":true}' });
    expect(log.mock.calls.map(([line]) => String(line))).toEqual(['webhook msg_lambda_1: invoice.paid (key 0)']);
  });

  it('refuses a tampered body with the error envelope', async () => {
    vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const signed = await signWebhook({ secret, body: BODY });
    const answer = await handler(event(signed.headers, BODY.replace('paid', 'void')), context);
    expect(answer.statusCode).toBe(401);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'SIGNATURE_MISMATCH' });
  });
});

describe('examples/lambda.ts with CLAIMS_TABLE', () => {
  it('deduplicates across two containers through the DynamoDB table', async () => {
    const dynalite = await startDynalite();
    try {
      const { table } = await dynalite.table();
      // What the Lambda runtime provides, pointed at dynalite (the SDK reads these itself).
      vi.stubEnv('CLAIMS_TABLE', table);
      vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', dynalite.endpoint);
      vi.stubEnv('AWS_REGION', 'local');
      vi.stubEnv('AWS_ACCESS_KEY_ID', 'x');
      vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'x');
      vi.resetModules();
      const first = (await import('../../examples/lambda.ts')).handler;
      vi.resetModules();
      const second = (await import('../../examples/lambda.ts')).handler;
      expect(second).not.toBe(first);
      const signed = await signWebhook({ secret, body: BODY, id: 'msg_lambda_dynamo' });
      expect(await first(event(signed.headers, BODY), context)).toMatchObject({ statusCode: 200 });
      const retry = await signWebhook({ secret, body: BODY, id: 'msg_lambda_dynamo' });
      expect(await second(event(retry.headers, BODY), context)).toMatchObject({ statusCode: 200, body: '{"duplicate":true}' });
    } finally {
      await dynalite.close();
    }
  });
});

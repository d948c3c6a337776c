/**
 * Expected rejections are cheap: built without stack frames, refused without the
 * runtime's unhandled-rejection bookkeeping, yet carrying everything a user reads (`code`,
 * `status`, `message`, `cause`). Programming errors keep their full stack.
 */

import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { WEBHOOK_ERROR_STATUS, WebhookError, isWebhookError, rejection } from '../../src/errors.ts';
import { createVerifier } from '../../src/verify.ts';
import { VECTOR, VECTOR_NOW_MS } from './support.ts';

const limit = Error.stackTraceLimit;
afterEach(() => {
  Error.stackTraceLimit = limit;
});

const verifier = createVerifier({ secrets: VECTOR.secret, now: () => VECTOR_NOW_MS });
const headers = { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp, 'webhook-signature': VECTOR.signature };

async function refusal(promise: Promise<unknown>): Promise<WebhookError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof WebhookError)) throw new Error(`expected a WebhookError, got ${String(error)}`);
  return error;
}

describe('rejection()', () => {
  it('keeps code, status, message, name and cause, with a stack of one line', () => {
    const cause = new Error('the reason');
    const error = rejection('SIGNATURE_MISMATCH', 'no signature matched', { cause });
    expect(error).toBeInstanceOf(WebhookError);
    expect(error).toBeInstanceOf(Error);
    expect(isWebhookError(error)).toBe(true);
    expect(error.code).toBe('SIGNATURE_MISMATCH');
    expect(error.status).toBe(WEBHOOK_ERROR_STATUS.SIGNATURE_MISMATCH);
    expect(error.message).toBe('no signature matched');
    expect(error.name).toBe('WebhookError');
    expect(error.cause).toBe(cause);
    expect(error.stack).toBe('WebhookError: no signature matched');
  });

  it('restores Error.stackTraceLimit, whatever the app set it to', () => {
    Error.stackTraceLimit = 37;
    rejection('MISSING_ID', 'x');
    expect(Error.stackTraceLimit).toBe(37);
    Error.stackTraceLimit = Infinity;
    rejection('MISSING_ID', 'x');
    expect(Error.stackTraceLimit).toBe(Infinity);
  });

  it('builds a normal error where the engine setting is not a number', () => {
    (Error as { stackTraceLimit?: unknown }).stackTraceLimit = undefined;
    const error = rejection('MISSING_ID', 'x');
    expect(error.code).toBe('MISSING_ID');
    expect((Error as { stackTraceLimit?: unknown }).stackTraceLimit).toBeUndefined();
  });

  it('leaves a WebhookError built directly with its stack frames', () => {
    const error = new WebhookError('BODY_UNAVAILABLE', 'x');
    expect(error.stack?.split('\n').length).toBeGreaterThan(1);
  });
});

describe('the verifier refuses cheaply and completely', () => {
  it('a forged signature: SIGNATURE_MISMATCH with its message, and no stack frames', async () => {
    const error = await refusal(verifier.verify({ headers: { ...headers, 'webhook-signature': `v1,${'A'.repeat(43)}=` }, body: VECTOR.body }));
    expect(error.code).toBe('SIGNATURE_MISMATCH');
    expect(error.status).toBe(401);
    expect(error.message).toMatch(/^no signature matched: 1 v1 entry tried against 1 HMAC secret\. Hint: /);
    expect(error.stack).toBe(`WebhookError: ${error.message}`);
  });

  it('the message of a repeated forgery is the same each time, and each error is its own object', async () => {
    const forged = { headers: { ...headers, 'webhook-signature': `v1,${'B'.repeat(43)}=` }, body: VECTOR.body };
    const [a, b] = await Promise.all([refusal(verifier.verify(forged)), refusal(verifier.verify(forged))]);
    expect(a).not.toBe(b);
    expect(a.message).toBe(b.message);
  });

  it.each([
    ['MISSING_ID', { ...headers, 'webhook-id': '' }],
    ['INVALID_TIMESTAMP', { ...headers, 'webhook-timestamp': '1614265330abc' }],
    ['TIMESTAMP_TOO_OLD', { ...headers, 'webhook-timestamp': String(Number(VECTOR.timestamp) - 3600) }],
    ['INVALID_SIGNATURE_HEADER', { ...headers, 'webhook-signature': 'v1,a  v1,b' }],
    ['MISSING_SIGNATURE', { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp }],
  ] as const)('%s: no stack frames, through verify and verifyRequest', async (code, input) => {
    const fromVerify = await refusal(verifier.verify({ headers: input, body: VECTOR.body }));
    expect(fromVerify.code).toBe(code);
    expect(fromVerify.stack).toBe(`WebhookError: ${fromVerify.message}`);
    const request = new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: input, body: VECTOR.body });
    const fromRequest = await refusal(verifier.verifyRequest(request));
    expect(fromRequest.code).toBe(code);
    expect(fromRequest.stack).toBe(`WebhookError: ${fromRequest.message}`);
  });

  it('a forgery found after reading a Request body is refused too', async () => {
    const request = new Request('http://127.0.0.1/webhooks', {
      method: 'POST',
      headers: { ...headers, 'webhook-signature': `v1,${'C'.repeat(43)}=` },
      body: VECTOR.body,
    });
    expect((await refusal(verifier.verifyRequest(request))).code).toBe('SIGNATURE_MISMATCH');
  });

  it('a programming error (a parsed body) keeps its stack frames', async () => {
    const error = await refusal(verifier.verify({ headers, body: { test: 2432232314 } as unknown as string }));
    expect(error.code).toBe('BODY_UNAVAILABLE');
    expect(error.stack?.split('\n').length).toBeGreaterThan(1);
  });

  it('hands back a pending promise, so the caller attaches its handler before the rejection', async () => {
    // A promise already rejected when returned goes through Node's unhandled-rejection bookkeeping
    // (recorded, then withdrawn when the caller's await attaches), a cost the verifier avoids by
    // rejecting later.
    const cases = [
      verifier.verify({ headers: { ...headers, 'webhook-signature': `v1,${'D'.repeat(43)}=` }, body: VECTOR.body }),
      verifier.verify({ headers: { ...headers, 'webhook-id': '' }, body: VECTOR.body }),
      verifier.verifyRequest(new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: { ...headers, 'webhook-id': '' }, body: '{}' })),
    ];
    for (const promise of cases) expect(inspect(promise)).toBe('Promise { <pending> }');
    const codes = await Promise.all(cases.map(async (promise) => (await refusal(promise)).code));
    expect(codes).toEqual(['SIGNATURE_MISMATCH', 'MISSING_ID', 'MISSING_ID']);
  });
});

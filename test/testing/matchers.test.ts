/**
 * The vitest matchers in a real vitest run: importing the entry registers them (typed through the
 * Assertion augmentation, which `tsc -p tsconfig.json` checks on this file), `.not` works, and a
 * failure carries the assertion's message. The raw matcher objects work with a Jest-style context.
 */

import { describe, expect, it } from 'vitest';
import '../../src/testing/vitest.ts';
import { webhookMatchers as fromVitestEntry } from '../../src/testing/vitest.ts';
import { signWebhook } from '../../src/sign.ts';
import { signedRequest, webhookMatchers } from '../../src/testing/index.ts';
import { OTHER_SECRET, SECRET, expectNoSecrets, nowSeconds } from './support.ts';

describe('toBeSignedWebhook / toBeUnsignedWebhook', () => {
  it('pass on a signed and an unsigned request, and .not passes on the opposite', async () => {
    const signed = await signedRequest('http://127.0.0.1/', { secret: SECRET, body: { a: 1 }, id: 'msg_m' });
    const unsigned = { headers: { 'webhook-id': 'msg_u', 'webhook-timestamp': String(nowSeconds()) }, body: '{}' };
    await expect(signed).toBeSignedWebhook({ secrets: SECRET });
    await expect(signed).toBeSignedWebhook({ secrets: [OTHER_SECRET, { key: SECRET, keyId: 'k' }] });
    await expect(signed).not.toBeSignedWebhook({ secrets: OTHER_SECRET });
    await expect(signed).not.toBeUnsignedWebhook();
    await expect(unsigned).toBeUnsignedWebhook();
    await expect(unsigned).not.toBeSignedWebhook({ secrets: SECRET });
    // The matcher read a clone: the request is still readable.
    expect(await signed.json()).toEqual({ a: 1 });
  });

  it('fail with the assertion message, never a secret', async () => {
    const tampered = await signWebhook({ secret: SECRET, body: '{"amount":1}', id: 'msg_t' });
    const recorded = { headers: tampered.headers, body: '{"amount":2}' };
    const error = await expect(recorded).toBeSignedWebhook({ secrets: { key: SECRET, keyId: 'dest' } }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error).toBeInstanceOf(Error);
    const lines = error!.message.split('\n');
    expect(lines[0]).toMatch(/^expected a signed webhook, but verification failed with SIGNATURE_MISMATCH: no signature matched/);
    expect(lines).toContain('  webhook-id: "msg_t"');
    expect(lines).toContain('  body: 12 bytes: "{\\"amount\\":2}"');
    expect(lines).toContain('Keys tried: secrets[0] (keyId "dest"): v1 HMAC secret');
    expectNoSecrets(error!.message, [SECRET]);

    await expect(expect(recorded).toBeUnsignedWebhook()).rejects.toThrow(/^expected an unsigned webhook, but it carries webhook-signature: 1 entry: v1,/);
    await expect(expect({ headers: {}, body: '' }).toBeUnsignedWebhook()).rejects.toThrow(/^expected an unsigned webhook, but webhook-id is missing or empty/);
  });

  it('.not fails with a message naming the key that verified', async () => {
    const signed = await signedRequest('http://127.0.0.1/', { secret: SECRET, body: 'x', id: 'msg_not' });
    await expect(expect(signed).not.toBeSignedWebhook({ secrets: [OTHER_SECRET, { key: SECRET, keyId: 'new' }] })).rejects.toThrow(
      'expected a request that is not a validly signed webhook, but webhook-id "msg_not" verified with secrets[1] (keyId "new") (v1)',
    );
    await expect(expect({ headers: { 'svix-id': 'msg_1' }, body: '' }).not.toBeUnsignedWebhook()).rejects.toThrow(
      'expected a request that is not an unsigned webhook, but it has a webhook-id and no signature header',
    );
  });

  it('pass misuse through as the TypeError it is, not as a failed match', async () => {
    await expect(expect({ headers: {}, body: { parsed: true } }).toBeSignedWebhook({ secrets: SECRET })).rejects.toThrow(TypeError);
    await expect(expect({ headers: {}, body: '' }).toBeSignedWebhook({ secrets: 'not base64!' })).rejects.toThrow(TypeError);
  });
});

// Type-level checks, compiled by `tsc -p tsconfig.json` and never run.
export async function typeChecks(request: Request): Promise<void> {
  // @ts-expect-error the options (secrets) are required
  await expect(request).toBeSignedWebhook();
  // @ts-expect-error toBeUnsignedWebhook takes no options
  await expect(request).toBeUnsignedWebhook({ secrets: SECRET });
  await expect(request).resolves.not.toBeUnsignedWebhook();
}

describe('webhookMatchers (for Jest users)', () => {
  it('are the same objects from both entries and return { pass, message } for a Jest-style context', async () => {
    expect(fromVitestEntry).toBe(webhookMatchers);
    const signed = await signedRequest('http://127.0.0.1/', { secret: SECRET, body: 'x', id: 'msg_jest' });
    const pass = await webhookMatchers.toBeSignedWebhook.call({ isNot: false }, signed, { secrets: SECRET });
    expect(pass.pass).toBe(true);
    expect(pass.message()).toBe('expected a request that is not a validly signed webhook, but webhook-id "msg_jest" verified with secrets[0] (v1)');
    const fail = await webhookMatchers.toBeSignedWebhook.call({ isNot: false }, signed, { secrets: OTHER_SECRET });
    expect(fail.pass).toBe(false);
    expect(fail.message()).toMatch(/^expected a signed webhook, but verification failed with SIGNATURE_MISMATCH/);
    const unsigned = await webhookMatchers.toBeUnsignedWebhook.call({}, signed);
    expect(unsigned.pass).toBe(false);
  });
});

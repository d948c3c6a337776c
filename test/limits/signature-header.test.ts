/**
 * What a request can make the verifier compute. A signature header over 16 KiB or 64 entries,
 * and every other header-level refusal (id, timestamp format, timestamp window, empty entries),
 * is refused before any HMAC or Ed25519 operation and before a byte of the body is read; a header
 * within the limits costs at most one HMAC per trusted secret, and one Ed25519 check per `v1a`
 * entry and public key. Counted by wrapping the crypto backend given to `createVerifierWith`.
 */

import { generateKeyPairSync } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultBackend, webCryptoBackend } from '../../src/crypto.ts';
import type { WebhookErrorCode } from '../../src/errors.ts';
import { createVerifierWith, MAX_SIGNATURE_ENTRIES, MAX_SIGNATURE_HEADER_LENGTH, MAX_V1A_ENTRIES } from '../../src/verify.ts';
import { countingBackend } from '../core/support.ts';
import { expectCode, freshSecret, hmacSignature } from '../fuzz/support.ts';

const NOW = 1_700_000_000;
const now = () => NOW * 1000;

const ed25519 = generateKeyPairSync('ed25519');
const publicKey = `whpk_${Buffer.from(ed25519.publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64')}`;
const hmacSecrets = [freshSecret(32), freshSecret(32), freshSecret(32)];

describe.each([
  ['node:crypto', defaultBackend],
  ['WebCrypto', webCryptoBackend],
] as const)('on %s', (_name, inner) => {
  const { backend, calls } = countingBackend(inner);
  const verifier = createVerifierWith({ secrets: [...hmacSecrets.map((s) => s.secret), publicKey], now }, backend);
  const id = 'msg_limits';
  const t = String(NOW);
  const body = '{"type":"ping"}';
  const good = `v1,${hmacSignature(hmacSecrets[0]!.key, id, t, body)}`;
  const send = (headers: Record<string, string>) => verifier.verify({ headers: { 'webhook-id': id, 'webhook-timestamp': t, ...headers }, body });
  const reset = () => {
    calls.hmac = 0;
    calls.ed25519Verify = 0;
  };
  const work = () => ({ hmac: calls.hmac, ed25519Verify: calls.ed25519Verify });

  it('a signature header over the length or entry limit is refused with no HMAC and no Ed25519 check, whatever it holds', async () => {
    const entry = fc.oneof(
      fc.constant(good),
      fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => `v1,${Buffer.from(b).toString('base64')}`),
      fc.uint8Array({ minLength: 64, maxLength: 64 }).map((b) => `v1a,${Buffer.from(b).toString('base64')}`),
      fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 300 }).map((s) => s.replace(/ /g, '_')),
    );
    const overLength = fc.array(entry, { minLength: 1, maxLength: 40 }).map((entries) => {
      // The valid entry first, then filler past the limit: refusal must not depend on where it is.
      let header = [good, ...entries].join(' ');
      while (header.length <= MAX_SIGNATURE_HEADER_LENGTH) header += ` v1,${'A'.repeat(43)}=`;
      return header;
    });
    const overCount = fc.array(entry, { minLength: MAX_SIGNATURE_ENTRIES, maxLength: MAX_SIGNATURE_ENTRIES + 30 }).map((entries) =>
      [good, ...entries].join(' ').slice(0, MAX_SIGNATURE_HEADER_LENGTH),
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(overLength, overCount), async (header) => {
        fc.pre(header.length > MAX_SIGNATURE_HEADER_LENGTH || header.split(' ').length > MAX_SIGNATURE_ENTRIES);
        reset();
        await expectCode(send({ 'webhook-signature': header }), 'INVALID_SIGNATURE_HEADER', () => `${header.length} characters`);
        expect(work()).toEqual({ hmac: 0, ed25519Verify: 0 });
      }),
      { numRuns: 60 },
    );
  });

  it.each<[string, Record<string, string>, WebhookErrorCode]>([
    ['no id', { 'webhook-id': '' }, 'MISSING_ID'],
    ['a timestamp that is not digits', { 'webhook-timestamp': '1700000000abc' }, 'INVALID_TIMESTAMP'],
    ['a millisecond timestamp', { 'webhook-timestamp': `${t}000` }, 'INVALID_TIMESTAMP'],
    ['a stale timestamp', { 'webhook-timestamp': String(NOW - 301) }, 'TIMESTAMP_TOO_OLD'],
    ['a future timestamp', { 'webhook-timestamp': String(NOW + 301) }, 'TIMESTAMP_TOO_NEW'],
    ['an empty entry', { 'webhook-signature': `${good}  ${good}` }, 'INVALID_SIGNATURE_HEADER'],
    ['only malformed entries', { 'webhook-signature': 'garbage more-garbage' }, 'INVALID_SIGNATURE_HEADER'],
  ])('%s is refused before any signature work', async (_case, headers, code) => {
    reset();
    await expectCode(send({ 'webhook-signature': good, ...headers }), code, () => _case);
    expect(work()).toEqual({ hmac: 0, ed25519Verify: 0 });
  });

  it('the most a header within the limits costs: one HMAC per secret, keys x max(2, keys) Ed25519 checks', async () => {
    // 64 entries, none valid: v1 entries and MAX_V1A_ENTRIES distinct v1a, one public key.
    const v1 = Array.from({ length: 64 - MAX_V1A_ENTRIES }, (_, i) => `v1,${Buffer.alloc(32, i).toString('base64')}`);
    const v1a = Array.from({ length: MAX_V1A_ENTRIES }, (_, i) => `v1a,${Buffer.alloc(64, i).toString('base64')}`);
    reset();
    await expectCode(send({ 'webhook-signature': [...v1, ...v1a].join(' ') }), 'SIGNATURE_MISMATCH', () => 'mixed');
    expect(work()).toEqual({ hmac: hmacSecrets.length, ed25519Verify: MAX_V1A_ENTRIES });
    // More distinct v1a entries than that: the same work, whatever the header holds.
    reset();
    const more = [...v1.slice(0, 10), ...Array.from({ length: 32 }, (_, i) => `v1a,${Buffer.alloc(64, i).toString('base64')}`)];
    await expectCode(send({ 'webhook-signature': more.join(' ') }), 'SIGNATURE_MISMATCH', () => 'many v1a');
    expect(work()).toEqual({ hmac: hmacSecrets.length, ed25519Verify: MAX_V1A_ENTRIES });
    // A valid entry last among 63 others: still one HMAC per secret at most.
    reset();
    const webhook = await send({ 'webhook-signature': [...v1.slice(0, 63 - MAX_V1A_ENTRIES), ...v1a, good].join(' ') });
    expect(webhook.keyIndex).toBe(0);
    expect(calls.hmac).toBeLessThanOrEqual(hmacSecrets.length);
    expect(calls.ed25519Verify).toBe(0);
  });

  it('verifyRequest refuses an oversized signature header before reading a byte of the body', async () => {
    let pulled = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled++;
        controller.enqueue(new Uint8Array(1024));
      },
    }, { highWaterMark: 0 });
    const request = new Request('http://127.0.0.1/webhooks', {
      method: 'POST',
      headers: { 'webhook-id': id, 'webhook-timestamp': t, 'webhook-signature': `${good} ${'v2,x '.repeat(MAX_SIGNATURE_ENTRIES)}`.trim() },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    reset();
    await expectCode(verifier.verifyRequest(request), 'INVALID_SIGNATURE_HEADER', () => 'request');
    expect({ pulled, ...work() }).toEqual({ pulled: 0, hmac: 0, ed25519Verify: 0 });
  });
});

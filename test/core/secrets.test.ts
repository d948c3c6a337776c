/**
 * Secrets as the reference libraries decode them: lenient base64, several secrets in one
 * comma-separated string, `whsk_` seeds of 32 bytes, and weak `whpk_` keys refused at start-up.
 * Signatures are compared with the references' own, so "decoded the same" means "signs the same".
 */

import { generateKeyPairSync } from 'node:crypto';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { describe, expect, it } from 'vitest';
import { generateKeyPair, signWebhook, signWebhookWith } from '../../src/sign.ts';
import { createVerifierWith } from '../../src/verify.ts';
import { BACKENDS, VECTOR, VECTOR_NOW_MS, thrown } from './support.ts';

const ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
const TIMESTAMP = 1614265330;
const BODY = '{"test": 2432232314}';

// The Python reference suite's secrets: unpadded, padded, and 34 characters with non-zero
// trailing bits. Every reference library decodes all three.
const LENIENT = ['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS=', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr'];

function referenceSignature(secret: string): string {
  return new StandardWebhook(secret).sign(ID, new Date(TIMESTAMP * 1000), BODY);
}

describe.each(BACKENDS)('secrets on %s', (_name, backend) => {
  const verifyAt = (secrets: string | string[], signature: string) =>
    createVerifierWith({ secrets, now: () => TIMESTAMP * 1000 }, backend).verify({
      headers: { 'webhook-id': ID, 'webhook-timestamp': String(TIMESTAMP), 'webhook-signature': signature },
      body: BODY,
    });

  it.each(LENIENT.flatMap((s) => [s, `whsec_${s}`]))('decodes %s as standardwebhooks and svix do, and signs the same', async (secret) => {
    const reference = referenceSignature(secret);
    expect(new SvixWebhook(secret.startsWith('whsec_') ? secret : `whsec_${secret}`).sign(ID, new Date(TIMESTAMP * 1000), BODY)).toBe(reference);
    const ours = await signWebhookWith({ secret, id: ID, timestamp: TIMESTAMP, body: BODY }, backend);
    expect(ours.signature).toBe(reference);
    const webhook = await verifyAt(secret, reference);
    expect(webhook.keyIndex).toBe(0);
  });

  it('takes several secrets in one comma-separated string, numbered in order', async () => {
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    for (const list of [`${other},${VECTOR.secret}`, `${other}, ${VECTOR.secret}`, `${other},  ${VECTOR.secret}`]) {
      const webhook = await createVerifierWith({ secrets: list, now: () => VECTOR_NOW_MS }, backend).verify({
        headers: { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp, 'webhook-signature': VECTOR.signature },
        body: VECTOR.body,
      });
      expect(webhook.keyIndex).toBe(1);
    }
    // The signing side too: one entry per secret, as a sender mid-rotation sends.
    const signed = await signWebhookWith({ secret: `${other},${VECTOR.secret}`, id: VECTOR.id, timestamp: Number(VECTOR.timestamp), body: VECTOR.body }, backend);
    expect(signed.signature.split(' ')).toHaveLength(2);
    expect(signed.signature.split(' ')[1]).toBe(VECTOR.signature);
  });
});

describe('start-up hints survive the comma rule', () => {
  const good = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
  const message = (secrets: unknown) => thrown(() => createVerifierWith({ secrets } as never, BACKENDS[0]![1]), TypeError).message;

  it('a pasted signature entry is named as one, not split', () => {
    expect(message(`v1,${good}`)).toBe("secrets[0] looks like a signature entry ('v1,…'), not a secret; pass the secret itself ('whsec_…')");
    expect(message(`${good}, v1,${good}`)).toMatch(/^secrets\[0\] \(secret 2 of 3 in the comma-separated list\) looks like part of a signature entry/);
  });

  it('a trailing newline keeps its hint, alone or in a list', () => {
    expect(message(`${good}\n`)).toMatch(/^secrets\[0\] contains whitespace \(often a trailing newline/);
    expect(message(`${good},${good}\n`)).toMatch(/^secrets\[0\] \(secret 2 of 2 in the comma-separated list\) contains whitespace/);
  });

  it('an empty item between commas is named', () => {
    expect(message(`${good},,${good}`)).toMatch(/^secrets\[0\] \(secret 2 of 3 in the comma-separated list\) is empty/);
  });

  it('a password gets a right hint, not "base64url"', () => {
    for (const password of ['my-super-secret-password', 'correct-horse-battery-staple', 'hunter2!', 'MY-SECRET-PASSWORD']) {
      const text = message(password);
      expect(text, password).not.toContain('base64url');
      expect(text, password).toContain('a password or passphrase is not a Standard Webhooks secret');
      expect(text, password).not.toContain(password);
    }
    // Key bytes in the base64url alphabet still get the base64url hint.
    expect(message(Buffer.alloc(32, 0xfb).toString('base64url'))).toContain('it looks like base64url');
    expect(message(`whsec_${Buffer.from('a3f9-Kx_7Qz0b1Lm8Pq2Rs4Tu6Vw8Xy0Zz1Aa2Bb3Cc').toString('base64url')}-_`)).toContain('base64url');
  });
});

describe('whsk_ secret keys of 64 and of 32 bytes', () => {
  it('a bare 32-byte seed signs as the full 64-byte key does', async () => {
    const { secretKey, publicKey } = await generateKeyPair();
    const full = Buffer.from(secretKey.slice(5), 'base64');
    expect(full).toHaveLength(64);
    const seedOnly = `whsk_${full.subarray(0, 32).toString('base64')}`;
    for (const [, backend] of BACKENDS) {
      const a = await signWebhookWith({ secret: secretKey, id: ID, timestamp: TIMESTAMP, body: BODY }, backend);
      const b = await signWebhookWith({ secret: seedOnly, id: ID, timestamp: TIMESTAMP, body: BODY }, backend);
      expect(b.signature).toBe(a.signature);
      const webhook = await createVerifierWith({ secrets: publicKey, now: () => TIMESTAMP * 1000 }, backend).verify({ headers: b.headers, body: BODY });
      expect(webhook.scheme).toBe('v1a');
    }
    await expect(signWebhook({ secret: `whsk_${full.subarray(0, 48).toString('base64')}`, body: BODY })).rejects.toThrow(
      /decodes to 48 bytes; a 'whsk_' key is 64 bytes \(32-byte seed, then 32-byte public key\) or the 32-byte seed alone/,
    );
  });
});

describe('weak whpk_ public keys', () => {
  const le = (hex: string) => Buffer.from(hex, 'hex');
  const ff = (first: string) => le(`${first}${'ff'.repeat(30)}7f`);
  // The small-order points of Ed25519 (y coordinates, little-endian, both signs of x where x ≠ 0),
  // and encodings that are not canonical (y ≥ p).
  const weak: [string, Buffer][] = [
    ['the identity (y = 1)', le(`01${'00'.repeat(31)}`)],
    ['the all-zero key (y = 0, order 4)', Buffer.alloc(32)],
    ['y = 0 with the sign bit (order 4)', le(`${'00'.repeat(31)}80`)],
    ['y = p - 1 (order 2)', ff('ec')],
    ['order 8, first', le('26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05')],
    ['order 8, first, other sign', le('26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85')],
    ['order 8, second', le('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a')],
    ['order 8, second, other sign', le('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa')],
    ['y = p (non-canonical 0)', ff('ed')],
    ['y = p + 1 (non-canonical identity)', ff('ee')],
    ['identity with the sign bit (x = 0, sign 1)', le(`01${'00'.repeat(30)}80`)],
  ];

  it.each(weak)('refuses %s with a RangeError at start-up', (_name, bytes) => {
    for (const [, backend] of BACKENDS) {
      const error = thrown(() => createVerifierWith({ secrets: [{ key: `whpk_${bytes.toString('base64')}`, keyId: 'k' }] }, backend), RangeError);
      expect(error.message).toMatch(/^secrets\[0\] \(keyId "k"\) is not a usable Ed25519 public key: /);
    }
  });

  it('accepts real public keys', () => {
    for (let i = 0; i < 20; i++) {
      const raw = Buffer.from(generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!, 'base64url');
      createVerifierWith({ secrets: `whpk_${raw.toString('base64')}` }, BACKENDS[0]![1]);
    }
  });
});

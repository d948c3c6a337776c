/**
 * The signing side: signWebhook on both backends, generateSecret, generateKeyPair, and v1a checked
 * against node:crypto as an independent oracle.
 */

import { createPrivateKey, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeyPair, generateMessageId, generateSecret, signWebhook, signWebhookWith, type SignInput } from '../../src/sign.ts';
import { createVerifierWith } from '../../src/verify.ts';
import { BACKENDS, VECTOR, expectNoSecretInMessages, hmacEntry, newSecret, recordMessage, track } from './support.ts';

const T = Number(VECTOR.timestamp);

afterAll(() => expectNoSecretInMessages());

async function rejectsWith(promise: Promise<unknown>, type: typeof TypeError | typeof RangeError, message: string): Promise<void> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(type);
  expect((caught as Error).constructor).toBe(type);
  expect((caught as Error).message).toBe(message);
  recordMessage(message);
}

describe.each(BACKENDS)('signWebhookWith on %s', (_name, backend) => {
  it('signs the spec vector exactly', async () => {
    const signed = await signWebhookWith({ secret: VECTOR.secret, id: VECTOR.id, timestamp: T, body: VECTOR.body }, backend);
    expect(signed).toEqual({
      id: VECTOR.id,
      timestamp: T,
      signature: VECTOR.signature,
      headers: { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp, 'webhook-signature': VECTOR.signature },
    });
  });

  it('gives one entry per secret, in order, each verifiable alone', async () => {
    const secrets = [newSecret(), newSecret(24), track(new Uint8Array(32).fill(0x11))];
    const signed = await signWebhookWith({ secret: secrets, body: '{"a":1}', id: 'msg_rot', timestamp: T }, backend);
    const entries = signed.signature.split(' ');
    expect(entries).toEqual(secrets.map((secret) => hmacEntry(secret, 'msg_rot', String(T), '{"a":1}')));
    for (const [index, secret] of secrets.entries()) {
      const verifier = createVerifierWith({ secrets: secret, now: () => T * 1000 }, backend);
      const webhook = await verifier.verify({ headers: { ...signed.headers, 'webhook-signature': entries[index]! }, body: '{"a":1}' });
      expect(webhook.keyIndex).toBe(0);
    }
  });

  it('accepts { key, keyId } secrets and bytes bodies', async () => {
    const secret = newSecret();
    const fromObject = await signWebhookWith({ secret: { key: secret, keyId: 'k' }, body: new TextEncoder().encode('é'), id: 'msg_1', timestamp: T }, backend);
    expect(fromObject.signature).toBe(hmacEntry(secret, 'msg_1', String(T), 'é'));
  });

  it('takes the timestamp as seconds or as a Date (floored to seconds)', async () => {
    const secret = newSecret();
    const fromNumber = await signWebhookWith({ secret, body: 'x', id: 'msg_1', timestamp: T }, backend);
    const fromDate = await signWebhookWith({ secret, body: 'x', id: 'msg_1', timestamp: new Date(T * 1000 + 999) }, backend);
    expect(fromDate.timestamp).toBe(T);
    expect(fromDate.headers['webhook-timestamp']).toBe(String(T));
    expect(fromDate.signature).toBe(fromNumber.signature);
  });

  it('defaults the timestamp to now and the id to a fresh msg_ id', async () => {
    const secret = newSecret();
    const before = Math.floor(Date.now() / 1000);
    const a = await signWebhookWith({ secret, body: 'x' }, backend);
    const b = await signWebhookWith({ secret, body: 'x' }, backend);
    const after = Math.floor(Date.now() / 1000);
    expect(a.timestamp).toBeGreaterThanOrEqual(before);
    expect(a.timestamp).toBeLessThanOrEqual(after);
    expect(a.id).toMatch(/^msg_[0-9A-Za-z]{27}$/);
    expect(a.headers['webhook-id']).toBe(a.id);
    expect(a.id).not.toBe(b.id);
    expect(a.signature).toBe(hmacEntry(secret, a.id, String(a.timestamp), 'x'));
  });

  it('refuses bad input with TypeError or RangeError', async () => {
    const secret = newSecret();
    const { publicKey } = await generateKeyPair();
    const sign = (input: unknown) => signWebhookWith(input as SignInput, backend);
    await rejectsWith(sign(null), TypeError, 'signWebhook needs { secret, body }');
    await rejectsWith(sign({ secret: [], body: 'x' }), TypeError, 'secret is empty: pass at least one secret');
    await rejectsWith(sign({ body: 'x' }), TypeError, "secret is required: pass the 'whsec_…' secret the sender gave you. It was undefined: usually an unset environment variable, or a module-scope handler evaluated where the runtime secrets are absent (next build, a bundler, a test import). Build it lazily, on first use inside the request handler: `receive ??= webhookHandler({ secrets: process.env.WEBHOOK_SECRET! }, handler)`");
    await rejectsWith(
      sign({ secret: [secret, publicKey], body: 'x' }),
      TypeError,
      "secret[1] is an Ed25519 public key ('whpk_…'), which cannot sign; sign with the matching 'whsk_…' secret key",
    );
    await rejectsWith(sign({ secret: `${secret} `, body: 'x' }), TypeError, 'secret[0] contains whitespace (often a trailing newline from a file or an environment variable); trim it');
    await rejectsWith(sign({ secret, body: 'x', id: '' }), TypeError, 'id must be a non-empty string');
    for (const timestamp of [-1, 1.5, Number.NaN, 2 ** 60]) {
      await rejectsWith(sign({ secret, body: 'x', timestamp }), RangeError, 'timestamp must be whole Unix seconds (or a Date)');
    }
    await rejectsWith(sign({ secret, body: 'x', timestamp: new Date(Number.NaN) }), RangeError, 'timestamp is an invalid Date');
    await rejectsWith(sign({ secret, body: 'x', timestamp: new Date(-1000) }), RangeError, 'timestamp must not be before 1970 (Unix seconds are never negative)');
    await rejectsWith(sign({ secret, body: 42 }), TypeError, 'webhook body must be a string, a Uint8Array (or Buffer) or an ArrayBuffer');
  });

  it('signs v1a with a whsk_ key; node:crypto verifies it against the whpk_ key', async () => {
    const { secretKey, publicKey } = await generateKeyPair();
    track(secretKey);
    const body = '{"type":"ed25519","text":"Grüße"}';
    const signed = await signWebhookWith({ secret: secretKey, body, id: 'msg_ed', timestamp: T }, backend);
    const [version, value] = signed.signature.split(',');
    expect(version).toBe('v1a');
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(publicKey.slice(5), 'base64')]);
    const key = createPublicKey({ key: spki, format: 'der', type: 'spki' });
    const signature = Buffer.from(value!, 'base64');
    expect(nodeVerify(null, Buffer.from(`msg_ed.${T}.${body}`), key, signature)).toBe(true);
    expect(nodeVerify(null, Buffer.from(`msg_ed.${T}.${body} `), key, signature)).toBe(false);
  });
});

describe('signWebhook', () => {
  it('uses the default backend and matches signWebhookWith', async () => {
    const secret = newSecret();
    const [a, b] = await Promise.all(BACKENDS.map(([, backend]) => signWebhookWith({ secret, body: 'x', id: 'msg_1', timestamp: T }, backend)));
    expect((await signWebhook({ secret, body: 'x', id: 'msg_1', timestamp: T })).signature).toBe(a!.signature);
    expect(a!.signature).toBe(b!.signature);
  });
});

describe('generateSecret', () => {
  it("is 'whsec_' and the base64 of 32 fresh random bytes", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const secret = generateSecret();
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
      seen.add(secret);
    }
    expect(seen.size).toBe(50);
  });
});

describe('generateMessageId', () => {
  it("is 'msg_' and 27 base-62 characters, unique", () => {
    const ids = new Set(Array.from({ length: 200 }, () => generateMessageId()));
    expect(ids.size).toBe(200);
    for (const id of ids) expect(id).toMatch(/^msg_[0-9A-Za-z]{27}$/);
  });
});

describe('generateKeyPair', () => {
  it("gives 'whsk_' (seed then public key, 64 bytes) and 'whpk_' (32 bytes) that belong together", async () => {
    const { secretKey, publicKey } = await generateKeyPair();
    track(secretKey);
    expect(secretKey).toMatch(/^whsk_[A-Za-z0-9+/]{86}==$/);
    expect(publicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    const secret = Buffer.from(secretKey.slice(5), 'base64');
    const pub = Buffer.from(publicKey.slice(5), 'base64');
    expect(secret).toHaveLength(64);
    expect(pub).toHaveLength(32);
    expect(secret.subarray(32).equals(pub)).toBe(true);
    // The seed alone derives the public key (node:crypto as the oracle).
    const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), secret.subarray(0, 32)]);
    const derived = createPublicKey(createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' })).export({ format: 'jwk' });
    expect(Buffer.from(derived.x!, 'base64url').equals(pub)).toBe(true);
    const other = await generateKeyPair();
    track(other.secretKey);
    expect(other.publicKey).not.toBe(publicKey);
  });
});

/**
 * The signing side: signWebhook on both backends, generateSecret, generateKeyPair, and v1a checked
 * against node:crypto as an independent oracle.
 */

import { createPrivateKey, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createSigner,
  createSignerWith,
  generateKeyPair,
  generateMessageId,
  generateSecret,
  signWebhook,
  signWebhookWith,
  type SignerInput,
  type SignInput,
} from '../../src/sign.ts';
import { createVerifier, createVerifierWith } from '../../src/verify.ts';
import * as pkg from '../../src/index.ts';
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
    await rejectsWith(sign({ body: 'x' }), TypeError, "secret is required: pass the 'whsec_…' secret the sender gave you");
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

describe.each(BACKENDS)('createSignerWith on %s', (_name, backend) => {
  it('signs the spec vector exactly, as signWebhook does', async () => {
    const signer = createSignerWith(VECTOR.secret, backend);
    const input = { id: VECTOR.id, timestamp: T, body: VECTOR.body };
    const signed = await signer.sign(input);
    expect(signed.signature).toBe(VECTOR.signature);
    expect(signed).toEqual(await signWebhookWith({ ...input, secret: VECTOR.secret }, backend));
  });

  it('gives the same output as signWebhook for v1, v1a and a rotation list, call after call', async () => {
    const { secretKey, publicKey } = await generateKeyPair();
    track(secretKey);
    const secrets = [newSecret(), { key: secretKey, keyId: 'ed' }, newSecret(24)];
    const signer = createSignerWith(secrets, backend);
    for (const [n, body] of ['{"a":1}', new TextEncoder().encode('Grüße'), ''].entries()) {
      const input = { body, id: `msg_${n}`, timestamp: new Date((T + n) * 1000) };
      const signed = await signer.sign(input);
      expect(signed).toEqual(await signWebhookWith({ ...input, secret: secrets }, backend));
      const entries = signed.signature.split(' ');
      expect(entries.map((entry) => entry.slice(0, entry.indexOf(',')))).toEqual(['v1', 'v1a', 'v1']);
      expect(entries[0]).toBe(hmacEntry(secrets[0] as string, `msg_${n}`, String(T + n), body));
      // A receiver holding only the public key accepts the v1a entry; one holding the last secret, the v1.
      const now = () => (T + n) * 1000;
      const byPublicKey = await createVerifierWith({ secrets: publicKey, now }, backend).verify({ headers: signed.headers, body });
      expect(byPublicKey.scheme).toBe('v1a');
      const byLast = await createVerifierWith({ secrets: secrets[2] as string, now }, backend).verify({ headers: signed.headers, body });
      expect(byLast.scheme).toBe('v1');
    }
  });

  it('defaults the id and the timestamp per call', async () => {
    const secret = newSecret();
    const signer = createSignerWith(secret, backend);
    const before = Math.floor(Date.now() / 1000);
    const [a, b] = [await signer.sign({ body: 'x' }), await signer.sign({ body: 'x' })];
    expect(a.id).toMatch(/^msg_[0-9A-Za-z]{27}$/);
    expect(a.id).not.toBe(b.id);
    expect(a.timestamp).toBeGreaterThanOrEqual(before);
    expect(a.timestamp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    expect(a.signature).toBe(hmacEntry(secret, a.id, String(a.timestamp), 'x'));
  });
});

describe('createSigner', () => {
  it('is exported from the package and signs what createVerifier accepts', async () => {
    expect(pkg.createSigner).toBe(createSigner);
    const secret = newSecret();
    const signed = await pkg.createSigner(secret).sign({ body: '{"type":"ping"}' });
    const webhook = await createVerifier({ secrets: secret }).verify({ headers: signed.headers, body: '{"type":"ping"}' });
    expect(webhook.id).toBe(signed.id);
  });

  it('refuses bad secrets at construction, synchronously, without showing them', async () => {
    const secret = newSecret();
    const { publicKey } = await generateKeyPair();
    const cases: [unknown, typeof TypeError | typeof RangeError, string][] = [
      [undefined, TypeError, "secret is required: pass the 'whsec_…' secret the sender gave you"],
      [[], TypeError, 'secret is empty: pass at least one secret'],
      [[secret, publicKey], TypeError, "secret[1] is an Ed25519 public key ('whpk_…'), which cannot sign; sign with the matching 'whsk_…' secret key"],
      [`${secret}\n`, TypeError, 'secret[0] contains whitespace (often a trailing newline from a file or an environment variable); trim it'],
      [`v1,${secret}`, TypeError, "secret[0] looks like a signature entry ('v1,…'), not a secret; pass the secret itself ('whsec_…')"],
    ];
    for (const [input, type, message] of cases) {
      let caught: unknown;
      try {
        createSigner(input as string);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(type);
      expect((caught as Error).message).toBe(message);
      recordMessage(message);
    }
  });

  it('rejects a bad id, timestamp or body per call with TypeError or RangeError', async () => {
    const signer = createSigner(newSecret());
    const sign = (input: unknown) => signer.sign(input as SignerInput);
    await rejectsWith(sign(null), TypeError, 'sign needs { body }');
    await rejectsWith(sign({ body: 'x', id: '' }), TypeError, 'id must be a non-empty string');
    await rejectsWith(sign({ body: 'x', id: 42 }), TypeError, 'id must be a non-empty string');
    await rejectsWith(sign({ body: 'x', timestamp: 1.5 }), RangeError, 'timestamp must be whole Unix seconds (or a Date)');
    await rejectsWith(sign({ body: 'x', timestamp: new Date(Number.NaN) }), RangeError, 'timestamp is an invalid Date');
    await rejectsWith(sign({ body: { type: 'ping' } }), TypeError, 'webhook body must be a string, a Uint8Array (or Buffer) or an ArrayBuffer');
    // The signer still works after refusing.
    expect((await sign({ body: 'x', id: 'msg_1', timestamp: T })).id).toBe('msg_1');
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

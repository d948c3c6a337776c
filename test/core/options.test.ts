/**
 * createVerifier refuses bad options at once, with TypeError or RangeError and a message that says
 * how to fix it and never contains the secret; verifyWebhook reuses one verifier per options object.
 */

import { afterAll, describe, expect, it } from 'vitest';
import { signWebhook } from '../../src/sign.ts';
import { createVerifier, createVerifierWith, verifyWebhook, type VerifierOptions } from '../../src/verify.ts';
import { BACKENDS, VECTOR, VECTOR_NOW_MS, expectNoSecretInMessages, newSecret, recordedMessageCount, rejection, thrown, track } from './support.ts';

afterAll(() => {
  expect(recordedMessageCount()).toBeGreaterThan(40);
  expectNoSecretInMessages();
});

const good = newSecret();
const goodPayload = good.slice('whsec_'.length);
const short = track(`whsec_${Buffer.alloc(8, 0x5a).toString('base64')}`);
const shortBare = track(Buffer.alloc(15, 0x5b).toString('base64'));
// 0xfb 0xff ... encodes to '+/' characters, so its base64url spelling has '-' and '_'.
const urlSafe = track(`whsec_${Buffer.alloc(32, 0xfb).toString('base64url')}`);
const publicKeyShort = track(`whpk_${Buffer.alloc(31, 1).toString('base64')}`);
const secretKey = track(`whsk_${Buffer.alloc(64, 2).toString('base64')}`);

type Case = [label: string, options: unknown, type: typeof TypeError | typeof RangeError, message: string];

const cases: Case[] = [
  ['no options', undefined, TypeError, 'createVerifier needs an options object with secrets'],
  ['a secret instead of options', good, TypeError, 'createVerifier needs an options object with secrets'],
  ['no secrets', {}, TypeError, "secrets is required: pass the 'whsec_…' secret the sender gave you. It was undefined: usually an unset environment variable, or a handler built where the runtime's secrets are absent (a build step, a bundler, a test import): build it lazily, on first use"],
  ['an empty list', { secrets: [] }, TypeError, 'secrets is empty: pass at least one secret'],
  ['an empty secret', { secrets: '' }, TypeError, 'secrets[0] is empty (is the environment variable set?)'],
  ['an empty second secret', { secrets: [good, ''] }, TypeError, 'secrets[1] is empty (is the environment variable set?)'],
  ['a number', { secrets: 42 }, TypeError, "secrets[0] must be a string ('whsec_…', 'whpk_…' or base64), a Uint8Array, or { key, keyId }"],
  ['null in the list', { secrets: [good, null] }, TypeError, "secrets[1] must be a string ('whsec_…', 'whpk_…' or base64), a Uint8Array, or { key, keyId }"],
  ['a key that is not a string', { secrets: { key: 42 } }, TypeError, "secrets[0] must be a string ('whsec_…', 'whpk_…' or base64), a Uint8Array, or { key, keyId }"],
  ['a keyId that is not a string', { secrets: { key: good, keyId: 7 } }, TypeError, 'secrets[0].keyId must be a string'],
  ['non-base64 after whsec_', { secrets: 'whsec_!!!!notbase64' }, TypeError, "secrets[0] is not valid base64 after the 'whsec_' prefix"],
  ['nothing after whsec_', { secrets: 'whsec_' }, TypeError, "secrets[0] is not valid base64 after the 'whsec_' prefix"],
  ['base64url after whsec_', { secrets: urlSafe }, TypeError, "secrets[0] is not valid base64 after the 'whsec_' prefix (it looks like base64url: use the standard alphabet with + and /)"],
  ['bare non-base64', { secrets: 'abc$def' }, TypeError, "secrets[0] is neither 'whsec_…', 'whpk_…' nor valid base64"],
  ['an unknown prefix', { secrets: 'sk_live_abcdef' }, TypeError, "secrets[0] is neither 'whsec_…', 'whpk_…' nor valid base64 (its prefix is not one of 'whsec_', 'whpk_')"],
  ['double quotes around it', { secrets: `"${good}"` }, TypeError, 'secrets[0] is wrapped in quotes (copied with them from a config file?); pass the value without them'],
  ['single quotes around it', { secrets: `'${good}'` }, TypeError, 'secrets[0] is wrapped in quotes (copied with them from a config file?); pass the value without them'],
  ['a trailing newline', { secrets: `${good}\n` }, TypeError, 'secrets[0] contains whitespace (often a trailing newline from a file or an environment variable); trim it'],
  ['a leading space', { secrets: ` ${good}` }, TypeError, 'secrets[0] contains whitespace (often a trailing newline from a file or an environment variable); trim it'],
  ['an inner tab', { secrets: `whsec_${goodPayload.slice(0, 10)}\t${goodPayload.slice(10)}` }, TypeError, 'secrets[0] contains whitespace (often a trailing newline from a file or an environment variable); trim it'],
  ['a CRLF in a keyed secret', { secrets: [{ key: `${good}\r\n`, keyId: 'k1' }] }, TypeError, 'secrets[0] (keyId "k1") contains whitespace (often a trailing newline from a file or an environment variable); trim it'],
  ['a pasted v1,whsec_ entry', { secrets: `v1,${good}` }, TypeError, "secrets[0] looks like a signature entry ('v1,…'), not a secret; pass the secret itself ('whsec_…')"],
  ['a pasted v1a, entry', { secrets: `v1a,${goodPayload}` }, TypeError, "secrets[0] looks like a signature entry ('v1,…'), not a secret; pass the secret itself ('whsec_…')"],
  ['a whsk_ secret key', { secrets: [good, secretKey] }, TypeError, "secrets[1] is an Ed25519 secret key ('whsk_…'), which belongs to the sender; a receiver trusts the public key ('whpk_…')"],
  ['a short whsec_ secret', { secrets: short }, RangeError, 'secrets[0] decodes to 8 bytes; Standard Webhooks secrets are 24 to 64 random bytes (at least 16 accepted)'],
  ['a short bare secret', { secrets: shortBare }, RangeError, 'secrets[0] decodes to 15 bytes; Standard Webhooks secrets are 24 to 64 random bytes (at least 16 accepted)'],
  ['short raw bytes', { secrets: new Uint8Array(8).fill(9) }, RangeError, 'secrets[0] decodes to 8 bytes'],
  ['empty raw bytes', { secrets: new Uint8Array(0) }, RangeError, 'secrets[0] decodes to 0 bytes'],
  ['a 31-byte public key', { secrets: publicKeyShort }, RangeError, "secrets[0] decodes to 31 bytes; a 'whpk_' public key is 32 bytes"],
  ['zero tolerance', { secrets: good, toleranceSeconds: 0 }, RangeError, 'toleranceSeconds must be a positive, finite number of seconds (default 300)'],
  ['negative tolerance', { secrets: good, toleranceSeconds: -300 }, RangeError, 'toleranceSeconds must be a positive, finite number of seconds (default 300)'],
  ['NaN tolerance', { secrets: good, toleranceSeconds: Number.NaN }, RangeError, 'toleranceSeconds must be a positive, finite number of seconds (default 300)'],
  ['infinite tolerance', { secrets: good, toleranceSeconds: Number.POSITIVE_INFINITY }, RangeError, 'toleranceSeconds must be a positive, finite number of seconds (default 300)'],
  ['tolerance as a string', { secrets: good, toleranceSeconds: '300' }, RangeError, 'toleranceSeconds must be a positive, finite number of seconds (default 300)'],
  ['zero maxBodyBytes', { secrets: good, maxBodyBytes: 0 }, RangeError, 'maxBodyBytes must be a positive whole number of bytes (default 1048576)'],
  ['negative maxBodyBytes', { secrets: good, maxBodyBytes: -1 }, RangeError, 'maxBodyBytes must be a positive whole number of bytes (default 1048576)'],
  ['fractional maxBodyBytes', { secrets: good, maxBodyBytes: 1.5 }, RangeError, 'maxBodyBytes must be a positive whole number of bytes (default 1048576)'],
  ['infinite maxBodyBytes', { secrets: good, maxBodyBytes: Number.POSITIVE_INFINITY }, RangeError, 'maxBodyBytes must be a positive whole number of bytes (default 1048576)'],
  ['maxBodyBytes as a string', { secrets: good, maxBodyBytes: '1024' }, RangeError, 'maxBodyBytes must be a positive whole number of bytes (default 1048576)'],
  ['an unknown unsigned mode', { secrets: good, unsigned: 'allow' }, TypeError, "unsigned must be 'reject' or 'accept'"],
  ['unsigned: true', { secrets: good, unsigned: true }, TypeError, "unsigned must be 'reject' or 'accept'"],
  ['a clock that is a number', { secrets: good, now: 1614265330000 }, TypeError, 'now must be a function returning epoch milliseconds'],
];

describe.each(BACKENDS)('createVerifier options on %s', (_name, backend) => {
  it.each(cases)('refuses %s', (_label, options, type, message) => {
    const error = thrown(() => createVerifierWith(options as VerifierOptions, backend), type);
    expect(error.message.startsWith(message)).toBe(true);
    for (const secret of [good, goodPayload, short.slice(6), shortBare, urlSafe.slice(6), secretKey.slice(5), publicKeyShort.slice(5)]) {
      expect(error.message).not.toContain(secret);
    }
  });

  it('accepts every documented form and boundary', async () => {
    const bytes = track(new Uint8Array(16).fill(0x42));
    const options: VerifierOptions[] = [
      { secrets: good },
      { secrets: goodPayload },
      { secrets: bytes },
      { secrets: Buffer.from(goodPayload, 'base64') },
      { secrets: [{ key: good, keyId: 'a' }, { key: bytes }, `whpk_${Buffer.alloc(32, 3).toString('base64')}`] },
      { secrets: `whsec_${Buffer.alloc(24, 1).toString('base64')}` },
      { secrets: `whsec_${Buffer.alloc(64, 1).toString('base64')}`, toleranceSeconds: 0.5, maxBodyBytes: 1, unsigned: 'reject', now: Date.now },
      // Unpadded base64 decodes the same.
      { secrets: good.replace(/=+$/, ''), unsigned: 'accept' },
    ];
    for (const option of options) {
      const verifier = createVerifierWith(option, backend);
      expect(typeof verifier.verify).toBe('function');
      expect(typeof verifier.verifyRequest).toBe('function');
    }
    // The unpadded spelling is the same key.
    const signed = await signWebhook({ secret: good, body: 'x', id: 'msg_1' });
    const webhook = await createVerifierWith({ secrets: good.replace(/=+$/, '') }, backend).verify({ headers: signed.headers, body: 'x' });
    expect(webhook.keyIndex).toBe(0);
  });
});

describe('verifyWebhook', () => {
  it('verifies the spec vector with the options given', async () => {
    const webhook = await verifyWebhook(
      { headers: { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp, 'webhook-signature': VECTOR.signature }, body: VECTOR.body },
      { secrets: VECTOR.secret, now: () => VECTOR_NOW_MS },
    );
    expect([webhook.id, webhook.keyIndex, webhook.scheme]).toEqual([VECTOR.id, 0, 'v1']);
    await rejection(
      verifyWebhook(
        { headers: { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp, 'webhook-signature': VECTOR.signature }, body: VECTOR.body },
        { secrets: VECTOR.secret },
      ),
      'TIMESTAMP_TOO_OLD',
    );
  });

  it('builds one verifier per options object: secrets are compared on each call, decoded once', async () => {
    const secret = newSecret();
    let reads = 0;
    const options: VerifierOptions = {
      get secrets() {
        reads++;
        return secret;
      },
    };
    for (let i = 0; i < 5; i++) {
      const signed = await signWebhook({ secret, body: `{"n":${i}}` });
      expect((await verifyWebhook({ headers: signed.headers, body: `{"n":${i}}` }, options)).json()).toEqual({ n: i });
    }
    // One read per call to see whether the secrets changed, plus the one that built the verifier.
    expect(reads).toBe(5 + 1);
  });

  it('builds anew when the options object is given new secrets (a rotation by assignment is never missed)', async () => {
    const retired = newSecret();
    const current = newSecret();
    const options: VerifierOptions = { secrets: retired };
    const oldSigned = await signWebhook({ secret: retired, body: 'x' });
    expect((await verifyWebhook({ headers: oldSigned.headers, body: 'x' }, options)).signed).toBe(true);
    options.secrets = current;
    await rejection(verifyWebhook({ headers: oldSigned.headers, body: 'x' }, options), 'SIGNATURE_MISMATCH');
    const newSigned = await signWebhook({ secret: current, body: 'x' });
    expect((await verifyWebhook({ headers: newSigned.headers, body: 'x' }, options)).signed).toBe(true);
    options.toleranceSeconds = 1;
    const stale = await signWebhook({ secret: current, body: 'x', timestamp: Math.floor(Date.now() / 1000) - 60 });
    await rejection(verifyWebhook({ headers: stale.headers, body: 'x' }, options), 'TIMESTAMP_TOO_OLD');
  });

  it('keeps the last-matched-key preference for the same options object, not for an equal one', async () => {
    const a = newSecret();
    const b = newSecret();
    // The same secret twice: which copy matches shows which key was tried first.
    const secrets = [{ key: a, keyId: 'a' }, { key: b, keyId: 'b' }, { key: a, keyId: 'a-again' }];
    const options: VerifierOptions = { secrets };
    const byB = await signWebhook({ secret: b, body: 'x' });
    expect((await verifyWebhook({ headers: byB.headers, body: 'x' }, options)).keyId).toBe('b');
    const byA = await signWebhook({ secret: a, body: 'x' });
    // Same object: the verifier now starts at 'b' (index 1), so the next key tried is index 2.
    const reused = await verifyWebhook({ headers: byA.headers, body: 'x' }, options);
    expect([reused.keyIndex, reused.keyId]).toEqual([2, 'a-again']);
    // An equal but new object gets a fresh verifier, which starts at index 0.
    const fresh = await verifyWebhook({ headers: byA.headers, body: 'x' }, { secrets });
    expect([fresh.keyIndex, fresh.keyId]).toEqual([0, 'a']);
  });

  it('refuses bad options on every call, with the same errors as createVerifier', async () => {
    const signed = await signWebhook({ secret: good, body: 'x' });
    for (let i = 0; i < 2; i++) {
      await expect(verifyWebhook({ headers: signed.headers, body: 'x' }, { secrets: [] })).rejects.toThrow(
        new TypeError('secrets is empty: pass at least one secret'),
      );
    }
    await expect(verifyWebhook({ headers: signed.headers, body: 'x' }, null as unknown as VerifierOptions)).rejects.toThrow(
      new TypeError('createVerifier needs an options object with secrets'),
    );
  });

  it('createVerifier (the public factory) validates the same way', () => {
    expect(thrown(() => createVerifier({ secrets: `${good}\n` }), TypeError).message).not.toContain(goodPayload);
    expect(thrown(() => createVerifier({ secrets: short }), RangeError).message).toContain('decodes to 8 bytes');
  });
});

describe('the secrets list', () => {
  it('numbers keys by their place in the flattened list, comma-separated strings included', async () => {
    const [a, b, c, d] = [newSecret(), newSecret(), newSecret(), newSecret()];
    const verifier = createVerifier({ secrets: [`${a},${b}`, { key: `${c}, ${d}`, keyId: 'cd' }] });
    const indexes = [];
    for (const secret of [a, b, c, d]) {
      const signed = await signWebhook({ secret, body: 'x' });
      const webhook = await verifier.verify({ headers: signed.headers, body: 'x' });
      indexes.push([webhook.keyIndex, webhook.keyId]);
    }
    expect(indexes).toEqual([[0, undefined], [1, undefined], [2, 'cd'], [3, 'cd']]);
  });

  it("the missing-secret message names no framework or build tool, and the signer's is its first sentence only", async () => {
    const message = thrown(() => createVerifier({} as VerifierOptions), TypeError).message;
    expect(message).not.toMatch(/next|webhookHandler|receive \?\?=|process\.env/i);
    await expect(signWebhook({ body: 'x' } as never)).rejects.toThrow(new TypeError("secret is required: pass the 'whsec_…' secret the sender gave you"));
  });
});

/**
 * The two crypto paths: node:crypto is the default on Node 20.16+ and 22.3+, and node:crypto and
 * WebCrypto sign identically and reach the same verdict (accept or the same code, the same
 * keyIndex) on the same random inputs.
 */

import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultBackend, hmacBase64, webCryptoBackend } from '../../src/crypto.ts';
import { generateKeyPair, signWebhookWith } from '../../src/sign.ts';
import { createVerifierWith, type VerifierOptions } from '../../src/verify.ts';
import { expectNoSecretInMessages, settle, track, type Outcome } from './support.ts';

afterAll(() => expectNoSecretInMessages());

/** Whether this Node has `process.getBuiltinModule`: added in 22.3 and backported to 20.16. */
function hasGetBuiltinModule(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (major === 20) return minor >= 16;
  if (major === 22) return minor >= 3;
  return major > 22;
}

describe('backend selection', () => {
  it('uses node:crypto by default where process.getBuiltinModule exists (Node 20.16+, 22.3+)', () => {
    expect(process.versions.node).toMatch(/^\d+\.\d+\.\d+/);
    expect(hasGetBuiltinModule(process.versions.node)).toBe(typeof process.getBuiltinModule === 'function');
    expect(defaultBackend.name).toBe(hasGetBuiltinModule(process.versions.node) ? 'node' : 'webcrypto');
    expect(webCryptoBackend.name).toBe('webcrypto');
  });

  it('this Node exercises both paths (Node 20.16+, 22.3+)', () => {
    expect(hasGetBuiltinModule(process.versions.node)).toBe(true);
    expect(defaultBackend).not.toBe(webCryptoBackend);
  });

  it.each([
    ['node', defaultBackend],
    ['webcrypto', webCryptoBackend],
  ])('%s hmacBase64 equals an independent HMAC on non-ASCII prefixes and binary bodies', async (_name, backend) => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ minLength: 16, maxLength: 64 }),
        fc.string({ unit: 'grapheme', maxLength: 40 }),
        fc.uint8Array({ maxLength: 300 }),
        async (raw, prefix, body) => {
          const expected = createHmac('sha256', raw).update(prefix, 'utf8').update(body).digest('base64');
          expect(await hmacBase64(backend, backend.importHmacKey(raw), prefix, body)).toBe(expected);
        },
      ),
      { numRuns: 100 },
    );
  });


  it('hands the MAC to `use` with its argument: at once as base64 text from node:crypto, one turn later as the raw MAC from WebCrypto', async () => {
    const raw = new Uint8Array(32).fill(7);
    const body = new TextEncoder().encode('{"type":"ping"}');
    const expected = createHmac('sha256', raw).update('msg_1.1700000000.').update(body).digest();
    const seen: unknown[] = [];
    const use = (mac: string | Uint8Array, arg: string) => {
      seen.push([mac, arg]);
      return `${arg}:${typeof mac}`;
    };
    const nodeKey = defaultBackend.importHmacKey(raw);
    expect(defaultBackend.synchronousHmac).toBe(true);
    expect(defaultBackend.hmacWith(nodeKey, 'msg_1.1700000000.', body, use, 'arg')).toBe('arg:string');
    expect(seen).toEqual([[expected.toString('base64'), 'arg']]);

    seen.length = 0;
    const webKey = webCryptoBackend.importHmacKey(raw);
    expect(webCryptoBackend.synchronousHmac).toBe(false);
    const pending = webCryptoBackend.hmacWith(webKey, 'msg_1.1700000000.', body, use, 'arg');
    expect(pending).toBeInstanceOf(Promise);
    expect(seen).toEqual([]);
    expect(await pending).toBe('arg:object');
    expect(seen).toEqual([[new Uint8Array(expected), 'arg']]);
    // What `use` throws rejects the promise, and a call after it (on a buffer from the pool) is still right.
    await expect(webCryptoBackend.hmacWith(webKey, 'msg_1.1700000000.', body, () => {
      throw new Error('refused');
    }, undefined)).rejects.toThrow('refused');
    expect(await hmacBase64(webCryptoBackend, webKey, 'msg_1.1700000000.', body)).toBe(expected.toString('base64'));
  });
});

describe('node:crypto and WebCrypto agree', () => {
  const T = 1_700_000_000;
  let pairs: { secretKey: string; publicKey: string }[] = [];

  beforeAll(async () => {
    pairs = await Promise.all([generateKeyPair(), generateKeyPair(), generateKeyPair()]);
    for (const pair of pairs) track(pair.secretKey);
  });

  it('sign identically (v1 and v1a) on random inputs', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ minLength: 16, maxLength: 64 }),
        fc.nat({ max: 2 }),
        fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 40 }),
        fc.integer({ min: 0, max: 4_000_000_000 }),
        fc.oneof(fc.uint8Array({ maxLength: 400 }), fc.string({ unit: 'grapheme', maxLength: 200 })),
        async (hmac, pair, id, timestamp, body) => {
          const input = { secret: [track(hmac), pairs[pair]!.secretKey], id, timestamp, body };
          const [node, web] = await Promise.all([signWebhookWith(input, defaultBackend), signWebhookWith(input, webCryptoBackend)]);
          expect(node).toEqual(web);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('reach the same verdict and keyIndex on random inputs, and the right one', async () => {
    const tamper = fc.constantFrom('none', 'none', 'body', 'signature', 'unsigned', 'id');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.uint8Array({ minLength: 16, maxLength: 64 }), { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        fc.nat({ max: 4 }),
        fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 40 }),
        fc.integer({ min: -400, max: 400 }),
        fc.uint8Array({ maxLength: 300 }),
        tamper,
        fc.constantFrom<'reject' | 'accept'>('reject', 'accept'),
        async (hmacKeys, withPublicKey, signerChoice, id, offset, body, how, unsigned) => {
          hmacKeys.forEach((key) => track(key));
          const trusted: VerifierOptions['secrets'] = [...hmacKeys, ...(withPublicKey ? [pairs[0]!.publicKey] : [])];
          // Signer: one of the trusted HMAC keys, the trusted Ed25519 key, or an untrusted one.
          const outsider = track(Uint8Array.from(hmacKeys[0]!, (byte) => byte ^ 0xff));
          const signer = signerChoice < hmacKeys.length ? hmacKeys[signerChoice]! : signerChoice === 3 ? pairs[0]!.secretKey : outsider;
          const signed = await signWebhookWith({ secret: signer, id, timestamp: T + offset, body }, defaultBackend);
          const headers: Record<string, string> = { ...signed.headers };
          let sentBody = body;
          if (how === 'body') sentBody = Uint8Array.from([...body, 0x20]);
          if (how === 'signature') headers['webhook-signature'] = signed.signature.replace(/,./, (m) => (m === ',A' ? ',B' : ',A'));
          if (how === 'unsigned') delete headers['webhook-signature'];
          if (how === 'id') headers['webhook-id'] = `${id}x`;

          const options = { secrets: trusted, now: () => T * 1000, unsigned };
          const [node, web] = await Promise.all(
            [defaultBackend, webCryptoBackend].map((backend) => settle(createVerifierWith(options, backend).verify({ headers, body: sentBody }))),
          );
          expect(node).toEqual(web);

          let expected: Outcome;
          const signerIndex = signerChoice < hmacKeys.length ? signerChoice : signerChoice === 3 && withPublicKey ? hmacKeys.length : undefined;
          if (Math.abs(offset) > 300) expected = { ok: false, code: offset > 0 ? 'TIMESTAMP_TOO_NEW' : 'TIMESTAMP_TOO_OLD' };
          else if (how === 'unsigned') {
            expected = unsigned === 'accept' ? { ok: true, keyIndex: undefined, scheme: undefined, signed: false } : { ok: false, code: 'MISSING_SIGNATURE' };
          } else if (how !== 'none' || signerIndex === undefined) expected = { ok: false, code: 'SIGNATURE_MISMATCH' };
          else expected = { ok: true, keyIndex: signerIndex, scheme: signerChoice === 3 ? 'v1a' : 'v1', signed: true };
          expect(node).toEqual(expected);
        },
      ),
      { numRuns: 200 },
    );
  });
});

/**
 * Signatures are compared in constant time, and this file pins how.
 *
 * The comparison is `constantTimeEqual` in src/lib/encoding.ts (node:crypto hands back base64 text)
 * or `constantTimeEqualBase64` (WebCrypto hands back the raw MAC, whose base64 is written into a
 * scratch buffer rather than a string): a loop over every character that ORs the differences
 * together, with no early exit (a length difference returns at once, which leaks nothing: a `v1`
 * signature is always 44 characters). Timing measurements in a test would be flaky on a shared
 * machine and prove little, so the pin has three parts that cannot pass by luck:
 *
 * 1. Behaviour: the module is replaced by spies around the real functions. Verifying calls the
 *    backend's one with the received and the computed signature, and its answer alone decides:
 *    forced to `false` a valid message is refused, forced to `true` a forged one is accepted. So
 *    no other comparison (`===`, `includes`, a Map lookup) can be deciding.
 * 2. Source of the verifier: it imports both from ./lib/encoding.ts, and the computed signature
 *    appears in no other comparison.
 * 3. Source of both: their comparison loop has no `return`, `break` or short-circuit operator, and
 *    they agree with `===` on random input.
 */

import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defaultBackend, webCryptoBackend } from '../../src/crypto.ts';
import * as encoding from '../../src/lib/encoding.ts';
import { createVerifierWith } from '../../src/verify.ts';
import { expectCode, freshSecret, hmacSignature } from '../fuzz/support.ts';

vi.mock('../../src/lib/encoding.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/lib/encoding.ts')>();
  return { ...real, constantTimeEqual: vi.fn(real.constantTimeEqual), constantTimeEqualBase64: vi.fn(real.constantTimeEqualBase64) };
});

const textSpy = vi.mocked(encoding.constantTimeEqual);
const bytesSpy = vi.mocked(encoding.constantTimeEqualBase64);
const source = (file: string) => readFileSync(new URL(`../../src/${file}`, import.meta.url), 'utf8');
/** The code alone: comments and the text of string literals removed (messages may say "expected"). */
const codeOf = (text: string) =>
  text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '')
    .replace(/'(?:[^'\\\n]|\\.)*'/g, "''")
    .replace(/`(?:[^`\\]|\\.)*`/g, '``');

const NOW = 1_700_000_000;
const { secret, key } = freshSecret(32);
const id = 'msg_ct';
const t = String(NOW);
const body = '{"type":"ping"}';
const expected = hmacSignature(key, id, t, body);
const forged = Buffer.alloc(32, 1).toString('base64');
const input = (signature: string) => ({ headers: { 'webhook-id': id, 'webhook-timestamp': t, 'webhook-signature': `v1,${signature}` }, body });

const actual = await vi.importActual<typeof import('../../src/lib/encoding.ts')>('../../src/lib/encoding.ts');
const realEqual = actual.constantTimeEqual;
const realEqualBase64 = actual.constantTimeEqualBase64;

afterEach(() => {
  textSpy.mockReset();
  textSpy.mockImplementation(realEqual);
  bytesSpy.mockReset();
  bytesSpy.mockImplementation(realEqualBase64);
});

const expectedBytes = new Uint8Array(Buffer.from(expected, 'base64'));

describe.each([
  ['node:crypto', defaultBackend, textSpy, expected, bytesSpy],
  ['WebCrypto', webCryptoBackend, bytesSpy, expectedBytes, textSpy],
] as const)('the verifier on %s', (_name, backend, spy, computed, unused) => {
  const verifier = createVerifierWith({ secrets: secret, now: () => NOW * 1000 }, backend);

  it('compares the received signature with the computed one through its constant-time function', async () => {
    spy.mockClear();
    unused.mockClear();
    const webhook = await verifier.verify(input(expected));
    expect(webhook.signed).toBe(true);
    expect(spy.mock.calls).toEqual([[expected, computed]]);

    spy.mockClear();
    await expectCode(verifier.verify(input(forged)), 'SIGNATURE_MISMATCH', () => 'forged');
    expect(spy.mock.calls).toEqual([[forged, computed]]);
    expect(unused).not.toHaveBeenCalled();
  });

  it('decides by its answer alone: forced false refuses a valid message, forced true accepts a forged one', async () => {
    spy.mockReturnValue(false);
    await expectCode(verifier.verify(input(expected)), 'SIGNATURE_MISMATCH', () => 'valid, comparison forced false');
    spy.mockReturnValue(true);
    const webhook = await verifier.verify(input(forged));
    expect({ signed: webhook.signed, keyIndex: webhook.keyIndex }).toEqual({ signed: true, keyIndex: 0 });
  });
});

describe('the source', () => {
  it('src/verify.ts imports both comparisons from ./lib/encoding.ts and compares the computed signature nowhere else', () => {
    expect(source('verify.ts')).toMatch(/import \{[^}]*\bconstantTimeEqual\b[^}]*\} from '\.\/lib\/encoding\.ts';/);
    expect(source('verify.ts')).toMatch(/import \{[^}]*\bconstantTimeEqualBase64\b[^}]*\} from '\.\/lib\/encoding\.ts';/);
    const verify = codeOf(source('verify.ts'));
    // The computed signature is held in `expected`; every use of it is a type test or one of the two calls.
    const uses = [...verify.matchAll(/\bexpected\b/g)].map((m) => verify.slice(Math.max(0, m.index - 40), m.index + 20));
    const comparisons = uses.filter((u) => !/const expected =|typeof expected ===/.test(u));
    expect(comparisons.length).toBe(2);
    expect(comparisons.filter((use) => /constantTimeEqual\(candidate, expected\)/.test(use))).toHaveLength(1);
    expect(comparisons.filter((use) => /constantTimeEqualBase64\(candidate, expected\)/.test(use))).toHaveLength(1);
    // No other comparison of signatures: no `===` / `!==` on candidates, no look-up by value.
    expect(verify).not.toMatch(/\bcandidate\b\s*[!=]==?|[!=]==?\s*\bcandidate\b|\.(includes|indexOf|has)\(candidate\)/);
  });

  const functionSource = (name: string) => {
    const encodingSource = source('lib/encoding.ts');
    const start = encodingSource.indexOf(`export function ${name}(`);
    expect(start).toBeGreaterThan(-1);
    return codeOf(encodingSource.slice(start, encodingSource.indexOf('\n}\n', start) + 2));
  };

  it('constantTimeEqual loops over every character with no early exit inside the loop', () => {
    const fn = functionSource('constantTimeEqual');
    const loop = fn.slice(fn.indexOf('for ('), fn.lastIndexOf('return'));
    expect(loop).toMatch(/for \(let i = 0; i < a\.length; i\+\+\)/);
    expect(loop).toMatch(/\|=/);
    expect(loop).not.toMatch(/\breturn\b|\bbreak\b|&&|\|\||\?/);
    // One exit after the loop, on the accumulated difference.
    expect(fn.slice(fn.lastIndexOf('return'))).toMatch(/^return diff === 0;/);
  });

  it('constantTimeEqualBase64 checks the length, then ORs every character\'s difference with no exit until the end', () => {
    const fn = functionSource('constantTimeEqualBase64');
    const head = fn.slice(0, fn.indexOf('let diff'));
    const body = fn.slice(fn.indexOf('let diff'), fn.lastIndexOf('return'));
    // Before the comparison: one exit, on the length (which leaks nothing: a v1 signature is 44 characters).
    expect(head.match(/\breturn\b[^;]*;/g)).toEqual(['return false;']);
    expect(head).toMatch(/if \(a\.length !== Math\.ceil\(bytes\.length \/ 3\) \* 4\) return false;/);
    // The comparison: differences ORed together, no exit, no short circuit, and the only choices
    // are on how many bytes are left over (from the length, not the content).
    expect(body.match(/diff \|= a\.charCodeAt\(i( \+ [123])?\) \^ /g)).toHaveLength(8);
    expect(body).not.toMatch(/\breturn\b|\bbreak\b|\bcontinue\b|&&|\|\|/);
    for (const choice of body.match(/[^\n;]*\?[^\n;]*/g) ?? []) expect(choice).toMatch(/\(?rest === 2 \?/);
    expect(body).toMatch(/if \(rest !== 0\)/);
    expect(fn.slice(fn.lastIndexOf('return'))).toMatch(/^return diff === 0;/);
  });

  it('constantTimeEqual agrees with === on random strings, equal lengths included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), fc.nat({ max: 59 }), fc.nat({ max: 0xffff }), (a, at, unit) => {
        const b = a.length === 0 ? a : a.slice(0, at % a.length) + String.fromCharCode(unit) + a.slice((at % a.length) + 1);
        expect(realEqual(a, b)).toBe(a === b);
        expect(realEqual(a, a)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('constantTimeEqualBase64 agrees with === against the padded base64 of the bytes, every length and one-character changes included', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 60 }), fc.nat({ max: 200 }), fc.nat({ max: 0xffff }), fc.boolean(), (bytes, at, unit, dropPadding) => {
        const text = Buffer.from(bytes).toString('base64');
        expect(realEqualBase64(text, bytes)).toBe(true);
        const changed = text.length === 0 ? String.fromCharCode(unit) : text.slice(0, at % text.length) + String.fromCharCode(unit) + text.slice((at % text.length) + 1);
        expect(realEqualBase64(changed, bytes)).toBe(changed === text);
        const unpadded = dropPadding ? text.replace(/=+$/, '') : text;
        expect(realEqualBase64(unpadded, bytes)).toBe(unpadded === text);
      }),
      { numRuns: 1000 },
    );
  });
});

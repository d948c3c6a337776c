/**
 * Signatures are compared in constant time, and this file pins how.
 *
 * The comparison is `constantTimeEqual` in src/encoding.ts: a loop over every character that ORs
 * the differences together, with no early exit (a length difference returns at once, which leaks
 * nothing: a `v1` signature is always 44 characters). Timing measurements in a test would be
 * flaky on a shared machine and prove little, so the pin has three parts that cannot pass by luck:
 *
 * 1. Behaviour: the module is replaced by a spy around the real function. Verifying calls it with
 *    the received and the expected signature, and its answer alone decides: forced to `false` a
 *    valid message is refused, forced to `true` a forged one is accepted. So no other comparison
 *    (`===`, `includes`, a Map lookup) can be deciding.
 * 2. Source of the verifier: it imports `constantTimeEqual` from ./encoding.ts, and the computed
 *    signature appears in no other comparison.
 * 3. Source of `constantTimeEqual`: its loop has no `return`, `break` or short-circuit operator,
 *    and it agrees with `===` on random strings.
 */

import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defaultBackend, webCryptoBackend } from '../../src/crypto.ts';
import * as encoding from '../../src/encoding.ts';
import { createVerifierWith } from '../../src/verify.ts';
import { expectCode, freshSecret, hmacSignature } from '../fuzz/support.ts';

vi.mock('../../src/encoding.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/encoding.ts')>();
  return { ...real, constantTimeEqual: vi.fn(real.constantTimeEqual) };
});

const spy = vi.mocked(encoding.constantTimeEqual);
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

const realEqual = (await vi.importActual<typeof import('../../src/encoding.ts')>('../../src/encoding.ts')).constantTimeEqual;

afterEach(() => {
  spy.mockReset();
  spy.mockImplementation(realEqual);
});

describe.each([
  ['node:crypto', defaultBackend],
  ['WebCrypto', webCryptoBackend],
] as const)('the verifier on %s', (_name, backend) => {
  const verifier = createVerifierWith({ secrets: secret, now: () => NOW * 1000 }, backend);

  it('compares the received signature with the expected one through constantTimeEqual', async () => {
    spy.mockClear();
    const webhook = await verifier.verify(input(expected));
    expect(webhook.signed).toBe(true);
    expect(spy.mock.calls).toEqual([[expected, expected]]);

    spy.mockClear();
    await expectCode(verifier.verify(input(forged)), 'SIGNATURE_MISMATCH', () => 'forged');
    expect(spy.mock.calls).toEqual([[forged, expected]]);
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
  it('src/verify.ts imports constantTimeEqual from ./encoding.ts and compares the computed signature nowhere else', () => {
    expect(source('verify.ts')).toMatch(/import \{[^}]*\bconstantTimeEqual\b[^}]*\} from '\.\/encoding\.ts';/);
    const verify = codeOf(source('verify.ts'));
    // The computed signature is held in `expected`; every use of it is the constantTimeEqual call.
    const uses = [...verify.matchAll(/\bexpected\b/g)].map((m) => verify.slice(Math.max(0, m.index - 40), m.index + 20));
    const comparisons = uses.filter((u) => !/const expected =/.test(u));
    expect(comparisons.length).toBeGreaterThan(0);
    for (const use of comparisons) expect(use).toMatch(/constantTimeEqual\(candidate, expected\)/);
    // No other comparison of signatures: no `===` / `!==` on candidates, no look-up by value.
    expect(verify).not.toMatch(/\bcandidate\b\s*[!=]==?|[!=]==?\s*\bcandidate\b|\.(includes|indexOf|has)\(candidate\)/);
  });

  it('constantTimeEqual loops over every character with no early exit inside the loop', () => {
    const encodingSource = source('encoding.ts');
    const start = encodingSource.indexOf('export function constantTimeEqual(');
    expect(start).toBeGreaterThan(-1);
    const fn = encodingSource.slice(start, encodingSource.indexOf('\n}\n', start) + 2);
    const loop = fn.slice(fn.indexOf('for ('), fn.lastIndexOf('return'));
    expect(loop).toMatch(/for \(let i = 0; i < a\.length; i\+\+\)/);
    expect(loop).toMatch(/\|=/);
    expect(loop).not.toMatch(/\breturn\b|\bbreak\b|&&|\|\||\?/);
    // One exit after the loop, on the accumulated difference.
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
});

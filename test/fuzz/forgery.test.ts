/**
 * No forgery: any change to the body, id, timestamp or signature of a valid message is rejected,
 * with the code that names what changed, and so is a message signed with a key that is not in
 * the list. On both crypto paths: `node:crypto` (defaultBackend) and WebCrypto.
 *
 * Each case first checks that the untouched message verifies (so a mutation that is rejected is
 * rejected because of the mutation), then applies exactly one mutation that really changes the
 * message, and asserts the exact code.
 */

import { createPrivateKey, createPublicKey, generateKeyPairSync, sign as ed25519Sign } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultBackend, webCryptoBackend, type CryptoBackend } from '../../src/crypto.ts';
import type { WebhookErrorCode } from '../../src/errors.ts';
import { createVerifierWith, MAX_SIGNATURE_ENTRIES, MAX_SIGNATURE_HEADER_LENGTH } from '../../src/verify.ts';
import { cases, check, expectCode, freshSecret, hmacSignature, timeoutFor } from './support.ts';

const NOW = 1_700_000_000;
const TOLERANCE = 300;
const clock = () => NOW * 1000 + 500;

// ---------------------------------------------------------------------------------------------
// The message and its mutations.

interface Message {
  id: string;
  timestamp: string;
  body: Uint8Array;
  /** The other entries of the header, none of them valid for a trusted key. */
  decoys: string[];
}

/** What the mutated request looks like; `signature` is the whole header value or absent. */
interface Request {
  id: string;
  timestamp: string;
  body: Uint8Array;
  signature: string | undefined;
}

type Mutation = { what: string; apply: (r: Request, valid: Set<string>) => Request | undefined };

const encoder = new TextEncoder();

/** Changes one letter's case at a position chosen by `at`; `undefined` when there is no letter. */
function flipCase(text: string, at: number): string | undefined {
  const letters = [...text.matchAll(/[A-Za-z]/g)].map((m) => m.index);
  if (letters.length === 0) return undefined;
  const i = letters[at % letters.length]!;
  const c = text[i]!;
  return text.slice(0, i) + (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase()) + text.slice(i + 1);
}

function flipBitInString(text: string, at: number, bit: number): string {
  const i = at % text.length;
  return text.slice(0, i) + String.fromCharCode(text.charCodeAt(i) ^ (1 << bit)) + text.slice(i + 1);
}

function flipBitInBytes(bytes: Uint8Array, at: number, bit: number): Uint8Array {
  // A copy: on a Node Buffer, slice() is a view, and flipping through it would change the caller's
  // key (a second flip of the same bit then restores a trusted key).
  const out = Uint8Array.from(bytes);
  out[at % out.length]! ^= 1 << bit;
  return out;
}

/**
 * Rewrites the signature of every valid entry with `change`; other entries are left alone.
 * `undefined` when `change` cannot change one of them: a valid entry left over would pass.
 */
const eachV1 = (r: Request, valid: Set<string>, change: (sig: string) => string | undefined): Request | undefined => {
  if (r.signature === undefined) return undefined;
  const entries: string[] = [];
  for (const e of r.signature.split(' ')) {
    if (!valid.has(e)) {
      entries.push(e);
      continue;
    }
    const sig = e.slice(e.indexOf(',') + 1);
    const next = change(sig);
    if (next === undefined || next === sig) return undefined;
    entries.push(`${e.slice(0, e.indexOf(',') + 1)}${next}`);
  }
  return { ...r, signature: entries.join(' ') };
};

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/**
 * Every mutation under test, each with the position/bit/text it needs. `valid` (given when the
 * mutation is applied) holds the header's entries that are valid for a trusted key.
 */
function mutations(): fc.Arbitrary<Mutation> {
  const at = fc.nat({ max: 10_000 });
  const bit = fc.nat({ max: 7 });
  const bit16 = fc.nat({ max: 15 });
  const bytes = fc.uint8Array({ minLength: 1, maxLength: 16 });
  const text = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 });
  const m = (what: string, apply: Mutation['apply']): Mutation => ({ what, apply });
  const wholeEntries = (r: Request) => r.signature?.split(' ') ?? [];

  const body = [
    fc.tuple(at, bit).map(([i, b]) => m('body: bit flip', (r) => (r.body.length === 0 ? undefined : { ...r, body: flipBitInBytes(r.body, i, b) }))),
    at.map((i) => m('body: truncation', (r) => (r.body.length === 0 ? undefined : { ...r, body: r.body.slice(0, i % r.body.length) }))),
    bytes.map((extra) => m('body: extension', (r) => ({ ...r, body: Uint8Array.from([...r.body, ...extra]) }))),
    at.map((i) =>
      m('body: case change', (r) => {
        const changed = flipCase(Buffer.from(r.body).toString('latin1'), i);
        return changed === undefined ? undefined : { ...r, body: Uint8Array.from(Buffer.from(changed, 'latin1')) };
      }),
    ),
    fc.constant(
      m('body: JSON parsed and serialised again', (r) => {
        try {
          const again = encoder.encode(JSON.stringify(JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(r.body))));
          return Buffer.from(again).equals(Buffer.from(r.body)) ? undefined : { ...r, body: again };
        } catch {
          return undefined;
        }
      }),
    ),
  ];
  const id = [
    fc.tuple(at, bit16).map(([i, b]) => m('id: bit flip', (r) => ({ ...r, id: flipBitInString(r.id, i, b) }))),
    at.map((i) => m('id: truncation', (r) => ({ ...r, id: r.id.slice(0, i % r.id.length) }))),
    text.map((extra) => m('id: extension', (r) => ({ ...r, id: r.id + extra }))),
    // U+FFFD and every lone surrogate are the same three bytes in UTF-8: the id the signature
    // covers would be one, the idempotency keys several.
    fc.tuple(at, fc.integer({ min: 0xd800, max: 0xdfff })).map(([i, unit]) =>
      m('id: a character replaced by a lone surrogate', (r) => {
        const p = i % r.id.length;
        return { ...r, id: r.id.slice(0, p) + String.fromCharCode(unit) + r.id.slice(p + 1) };
      }),
    ),
    at.map((i) => m('id: case change', (r) => ((id) => (id === undefined ? undefined : { ...r, id }))(flipCase(r.id, i)))),
  ];
  const timestamp = [
    fc.integer({ min: -2 * TOLERANCE, max: 2 * TOLERANCE }).filter((d) => d !== 0).map((d) => m('timestamp: another second', (r) => ({ ...r, timestamp: String(Number(r.timestamp) + d) }))),
    fc.tuple(at, bit).map(([i, b]) => m('timestamp: bit flip', (r) => ({ ...r, timestamp: flipBitInString(r.timestamp, i, b) }))),
    at.map((i) => m('timestamp: truncation', (r) => ({ ...r, timestamp: r.timestamp.slice(0, i % r.timestamp.length) }))),
    fc.constantFrom('0', '5', 'a', ' ', '.0', 'Z').map((extra) => m('timestamp: extension', (r) => ({ ...r, timestamp: r.timestamp + extra }))),
    fc.constantFrom('0', '+', ' ', '\t', '-').map((prefix) => m('timestamp: prefix', (r) => ({ ...r, timestamp: prefix + r.timestamp }))),
    fc.constant(m('timestamp: milliseconds', (r) => ({ ...r, timestamp: `${r.timestamp}000` }))),
  ];
  const signature = [
    fc.tuple(at, bit).map(([i, b]) =>
      m('signature: bit flip in the decoded bytes', (r, valid) => eachV1(r, valid, (s) => Buffer.from(flipBitInBytes(Buffer.from(s, 'base64'), i, b)).toString('base64'))),
    ),
    fc.tuple(at, fc.nat({ max: 63 })).map(([i, c]) =>
      m('signature: one base64 character replaced', (r, valid) =>
        eachV1(r, valid, (s) => {
          const p = i % 43; // the 43 data characters before the '=' of a 32-byte value
          return s[p] === ALPHABET[c] ? undefined : s.slice(0, p) + ALPHABET[c] + s.slice(p + 1);
        }),
      ),
    ),
    at.map((i) => m('signature: truncation', (r, valid) => eachV1(r, valid, (s) => s.slice(0, i % s.length)))),
    fc.constantFrom('A', '=', '==', 'AAAA', 'A=').map((extra) => m('signature: extension', (r, valid) => eachV1(r, valid, (s) => s + extra))),
    at.map((i) => m('signature: case change', (r, valid) => eachV1(r, valid, (s) => flipCase(s, i)))),
    fc.constant(m('signature: URL-safe alphabet', (r, valid) => eachV1(r, valid, (s) => (/[+/]/.test(s) ? s.replace(/\+/g, '-').replace(/\//g, '_') : undefined)))),
    fc.constant(m('signature: padding removed', (r, valid) => eachV1(r, valid, (s) => s.replace(/=+$/, '')))),
    fc.constantFrom(' ', '\t', '\n').chain((ws) =>
      fc.constantFrom(
        m('signature: whitespace after the comma', (r, valid) => eachV1(r, valid, (s) => ws + s)),
        m('signature: whitespace at the end of the entry', (r, valid) => eachV1(r, valid, (s) => s + ws)),
        m('signature: whitespace inside the value', (r, valid) => eachV1(r, valid, (s) => `${s.slice(0, 20)}${ws}${s.slice(20)}`)),
      ),
    ),
    // Two spaces leave an empty entry; a tab or newline joins two entries into one.
    fc.constantFrom('  ', '\t', '\n', '\r\n').map((sep) =>
      m('signature header: other whitespace between entries', (r) => {
        const entries = wholeEntries(r);
        return entries.length < 2 ? undefined : { ...r, signature: entries.join(sep) };
      }),
    ),
    fc.constantFrom(' ', '  ').chain((ws) =>
      fc.constantFrom(
        m('signature header: leading whitespace', (r) => ({ ...r, signature: ws + r.signature })),
        m('signature header: trailing whitespace', (r) => ({ ...r, signature: r.signature + ws })),
      ),
    ),
    fc.constantFrom('V1', 'v2', 'v1a', 'v0', '1').map((version) =>
      m('signature: version changed', (r, valid) => {
        if (r.signature === undefined) return undefined;
        return { ...r, signature: r.signature.split(' ').map((e) => (valid.has(e) ? `${version}${e.slice(2)}` : e)).join(' ') };
      }),
    ),
    fc.constant(m('signature header: removed', (r) => ({ ...r, signature: undefined }))),
    fc.constant(
      m('signature header: over the length limit', (r) => {
        const filler = ` v1,${'A'.repeat(43)}=`;
        return { ...r, signature: r.signature + filler.repeat(Math.ceil(MAX_SIGNATURE_HEADER_LENGTH / filler.length)) };
      }),
    ),
    fc.constant(m('signature header: over the entry limit', (r) => ({ ...r, signature: `${r.signature}${' v9,x'.repeat(MAX_SIGNATURE_ENTRIES)}` }))),
  ];
  return fc.oneof(...body, ...id, ...timestamp, ...signature);
}

/**
 * The code a mutated request must get. The order is the verifier's documented order: headers
 * (id, timestamp format, window, signature header) before any signature work.
 */
function expectedCode(r: Request): WebhookErrorCode {
  if (r.id === '' || /[\uD800-\uDFFF]/u.test(r.id)) return 'MISSING_ID';
  if (r.timestamp === '') return 'MISSING_TIMESTAMP';
  if (!/^(0|[1-9][0-9]*)$/.test(r.timestamp) || r.timestamp.length >= 13) return 'INVALID_TIMESTAMP';
  const age = NOW - Number(r.timestamp);
  if (age > TOLERANCE) return 'TIMESTAMP_TOO_OLD';
  if (-age > TOLERANCE) return 'TIMESTAMP_TOO_NEW';
  if (r.signature === undefined) return 'MISSING_SIGNATURE';
  const entries = r.signature.split(' ');
  if (r.signature.length > MAX_SIGNATURE_HEADER_LENGTH || entries.length > MAX_SIGNATURE_ENTRIES) return 'INVALID_SIGNATURE_HEADER';
  if (entries.some((e) => e === '')) return 'INVALID_SIGNATURE_HEADER';
  const wellFormed = (e: string) => e.indexOf(',') > 0 && e.indexOf(',') < e.length - 1;
  if (!entries.some(wellFormed)) return 'INVALID_SIGNATURE_HEADER';
  return 'SIGNATURE_MISMATCH';
}

const same = (a: Request, b: Request) => a.id === b.id && a.timestamp === b.timestamp && a.signature === b.signature && Buffer.from(a.body).equals(Buffer.from(b.body));

const message: fc.Arbitrary<Message> = fc.record({
  id: fc.oneof(
    fc.stringMatching(/^msg_[A-Za-z0-9]{27}$/),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
    fc.string({ unit: fc.constantFrom('a', '\uFFFD', '😀'), minLength: 1, maxLength: 6 }),
  ),
  timestamp: fc.integer({ min: -TOLERANCE + 10, max: TOLERANCE - 10 }).map((d) => String(NOW + d)),
  body: fc.oneof(
    fc.uint8Array({ maxLength: 1024 }),
    fc.json().map((j) => encoder.encode(JSON.stringify(JSON.parse(j), null, 1))),
    fc.string({ unit: 'grapheme', maxLength: 200 }).map((s) => encoder.encode(s)),
  ),
  decoys: fc.array(
    fc.oneof(
      fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => `v1,${Buffer.from(b).toString('base64')}`),
      fc.uint8Array({ minLength: 64, maxLength: 64 }).map((b) => `v1a,${Buffer.from(b).toString('base64')}`),
      fc.constantFrom('v2,abc', 'v1b,xyz='),
    ),
    { maxLength: 3 },
  ),
});

// ---------------------------------------------------------------------------------------------

const BACKENDS: [string, CryptoBackend, number][] = [
  ['node:crypto', defaultBackend, 0.12],
  ['WebCrypto', webCryptoBackend, 0.06],
];

describe.each(BACKENDS)('no forgery on %s', (name, backend, weight) => {
  // Three trusted keys (a rotation in progress); the sender signs with one or two of them.
  const trusted = [freshSecret(24), freshSecret(32), freshSecret(64)];
  const verifier = createVerifierWith({ secrets: trusted.map((t) => t.secret), now: clock }, backend);
  const runs = cases(weight, 300);

  const build = (m: Message, signers: number[]): { request: Request; valid: Set<string> } => {
    const valid = signers.map((k) => `v1,${hmacSignature(trusted[k]!.key, m.id, m.timestamp, m.body)}`);
    const entries = [...m.decoys, ...valid].sort();
    return { request: { id: m.id, timestamp: m.timestamp, body: m.body, signature: entries.join(' ') }, valid: new Set(valid) };
  };
  const send = (r: Request) =>
    verifier.verify({
      headers: { 'webhook-id': r.id, 'webhook-timestamp': r.timestamp, ...(r.signature === undefined ? {} : { 'webhook-signature': r.signature }) },
      body: r.body,
    });

  it(
    'any change to body, id, timestamp or signature is rejected with the code that names it',
    async () => {
      const seen = new Map<string, number>();
      const property = fc.asyncProperty(
        message,
        fc.subarray([0, 1, 2], { minLength: 1, maxLength: 2 }),
        mutations(),
        fc.context(),
        async (m, signers, mutation, ctx) => {
          const { request, valid } = build(m, signers);
          const original = await send(request);
          expect(signers).toContain(original.keyIndex);
          const mutated = mutation.apply(request, valid);
          fc.pre(mutated !== undefined && !same(mutated, request)); // this message has nothing that mutation changes
          ctx.log(mutation.what);
          seen.set(mutation.what, (seen.get(mutation.what) ?? 0) + 1);
          const code = expectedCode(mutated);
          await expectCode(send(mutated), code, () => `${mutation.what} on ${JSON.stringify({ ...mutated, body: Buffer.from(mutated.body).toString('base64') })}`);
        },
      );
      await check(`forgery (${name})`, property, runs);
      // Every family of mutation ran at least once.
      for (const family of ['body:', 'id:', 'timestamp:', 'signature:', 'signature header:']) {
        expect([...seen.keys()].some((k) => k.startsWith(family)), family).toBe(true);
      }
    },
    timeoutFor(runs, 1),
  );

  it(
    'a message signed only with keys not in the list is rejected, including keys one bit or one byte away from a trusted one',
    async () => {
      const property = fc.asyncProperty(
        message,
        fc.oneof(
          fc.constant({ kind: 'fresh' as const }),
          fc.record({ kind: fc.constant('bit' as const), key: fc.nat({ max: 2 }), at: fc.nat(), bit: fc.nat({ max: 7 }) }),
          fc.record({ kind: fc.constant('shorter' as const), key: fc.nat({ max: 2 }), drop: fc.integer({ min: 1, max: 8 }) }),
          // Appending 0x00 bytes gives the same HMAC key (RFC 2104 pads short keys with zeros), so
          // the extension here is by a non-zero byte: a different key.
          fc.record({ kind: fc.constant('longer' as const), key: fc.nat({ max: 2 }), extra: fc.integer({ min: 1, max: 255 }) }),
        ),
        async (m, variant) => {
          let key: Uint8Array;
          if (variant.kind === 'fresh') key = freshSecret(32).key;
          else {
            const base = trusted[variant.key]!.key;
            if (variant.kind === 'bit') key = flipBitInBytes(base, variant.at, variant.bit);
            else if (variant.kind === 'shorter') {
              // Dropping only trailing 0x00 bytes leaves the same HMAC key (RFC 2104 pads with zeros).
              fc.pre(base.subarray(base.length - variant.drop).some((byte) => byte !== 0));
              key = base.subarray(0, base.length - variant.drop);
            }
            else key = Uint8Array.from([...base, variant.extra]);
          }
          const signature = [...m.decoys, `v1,${hmacSignature(key, m.id, m.timestamp, m.body)}`].join(' ');
          await expectCode(send({ id: m.id, timestamp: m.timestamp, body: m.body, signature }), 'SIGNATURE_MISMATCH', () => variant.kind);
        },
      );
      await check(`wrong key (${name})`, property, Math.max(1, Math.round(runs / 3)));
    },
    timeoutFor(runs, 1),
  );
});

describe.each(BACKENDS)('no v1a (Ed25519) forgery on %s', (name, backend) => {
  const pair = generateKeyPairSync('ed25519');
  const other = generateKeyPairSync('ed25519');
  const raw = (k: ReturnType<typeof createPublicKey>) => Buffer.from(k.export({ format: 'jwk' }).x!, 'base64url');
  const verifier = createVerifierWith({ secrets: `whpk_${raw(pair.publicKey).toString('base64')}`, now: clock }, backend);
  const runs = cases(0.02, 60);
  // The order of the Ed25519 group, little-endian as in a signature's S half (RFC 8032 5.1).
  const L = 2n ** 252n + 27742317777372353535851937790883648493n;

  const signWith = (key: ReturnType<typeof createPrivateKey>, m: Message) =>
    ed25519Sign(null, Buffer.concat([Buffer.from(`${m.id}.${m.timestamp}.`), m.body]), key);
  const send = (m: Message, signature: Uint8Array) =>
    verifier.verify({
      headers: { 'webhook-id': m.id, 'webhook-timestamp': m.timestamp, 'webhook-signature': `v1a,${Buffer.from(signature).toString('base64')}` },
      body: m.body,
    });

  it(
    'a changed signature, body or id, a non-canonical S (S + L), or another key is rejected',
    async () => {
      const property = fc.asyncProperty(message, fc.nat(), fc.nat({ max: 7 }), fc.constantFrom('bit', 'malleable', 'body', 'id', 'other key'), async (m, at, bit, kind) => {
        const signature = signWith(pair.privateKey, m);
        const original = await send(m, signature);
        expect({ scheme: original.scheme, keyIndex: original.keyIndex }).toEqual({ scheme: 'v1a', keyIndex: 0 });
        let forged: Promise<unknown>;
        if (kind === 'bit') forged = send(m, flipBitInBytes(signature, at, bit));
        else if (kind === 'malleable') {
          // The same signature with S replaced by S + L: valid arithmetic, refused by a strict verifier.
          const s = BigInt(`0x${Buffer.from(signature.subarray(32)).reverse().toString('hex')}`) + L;
          const sBytes = Buffer.from(s.toString(16).padStart(64, '0'), 'hex').reverse();
          forged = send(m, Buffer.concat([signature.subarray(0, 32), sBytes]));
        } else if (kind === 'body') forged = send({ ...m, body: Uint8Array.from([...m.body, 0x20]) }, signature);
        else if (kind === 'id') forged = send({ ...m, id: `${m.id}x` }, signature);
        else forged = send(m, signWith(other.privateKey, m));
        await expectCode(forged, 'SIGNATURE_MISMATCH', () => kind);
      });
      await check(`v1a forgery (${name})`, property, runs);
    },
    timeoutFor(runs, 2),
  );
});

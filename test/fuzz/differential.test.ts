/**
 * Differential test against the `standardwebhooks` package (1.1, which `svix` wraps), the
 * reference library, as an oracle. On random valid and mutated messages both must agree on
 * accept/reject, except where an input matches one of the named predicates below. Each predicate
 * says in which direction it may differ and names the row of docs/security.md's tables that documents
 * it; a test checks that the tables and this list are the same, and every row has a worked
 * example here that runs both libraries.
 *
 * Oracle details this test accounts for: it JSON-parses the body after a match unless given
 * `{ jsonParse: false }` (used here, so any body can be compared); it reads headers from a plain
 * object (names lower-cased, the last spelling of a name wins; a `string[]` id or timestamp is
 * joined with ',') and crashes on a `string[]` signature, so it never gets one; it knows
 * `webhook-*` names and `v1` only; it reads the clock through `Date.now`, which is fixed here for
 * both libraries.
 */

import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { Webhook as Oracle } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { defaultBackend, webCryptoBackend, type CryptoBackend } from '../../src/crypto.ts';
import { generateKeyPair, signWebhook } from '../../src/sign.ts';
import { MAX_ID_LENGTH, createVerifierWith, MAX_SIGNATURE_ENTRIES, MAX_SIGNATURE_HEADER_LENGTH } from '../../src/verify.ts';
import { cases, check, expectCode, expectDocumentedError, NIGHTLY, settle, timeoutFor } from './support.ts';

const NOW = 1_700_000_000;
const NOW_MS = NOW * 1000 + 500;

/** Plain objects, as the oracle reads them; `string[]` only for id and timestamp. */
type PlainHeaders = Record<string, string | string[]>;
interface Input {
  headers: PlainHeaders;
  body: string;
}

// ---------------------------------------------------------------------------------------------
// Where the two may differ, as predicates over the request itself.

const valuesOf = (headers: PlainHeaders, name: string): string[] =>
  Object.entries(headers)
    .filter(([n]) => n.toLowerCase() === name)
    .flatMap(([, v]) => v);

const isLoose = (t: string) => !/^[0-9]+$/.test(t) && !Number.isNaN(Number.parseInt(t, 10));

/** The entries of every signature header, with the header they came from. */
const entriesOf = (headers: PlainHeaders): string[][] => valuesOf(headers, 'webhook-signature').map((v) => v.split(' '));

interface Difference {
  /** The first cell of the docs/security.md row that documents it. */
  row: string;
  /** `stricter`: we refuse what the oracle accepts. `lenient`: we accept what it refuses. */
  direction: 'stricter' | 'lenient';
  applies(input: Input): boolean;
}

const STRICTER_TABLE = 'Deliberately stricter than the reference libraries';
const LENIENT_TABLE = 'Accepted here, refused by the reference libraries';

const ROW = {
  looseTimestamp: '`webhook-timestamp` not in plain digits: `1614265330abc`, `+1614265330`, ` 1614265330`, `1614265330.5`',
  leadingZeros: '`webhook-timestamp` with leading zeros (`01614265330`)',
  milliseconds: 'millisecond timestamp (13+ digits)',
  emptyEntry: 'an empty entry in `webhook-signature` (two spaces in a row, a leading or trailing space)',
  extraField: 'an entry with more after its signature (`v1,<signature>,x`)',
  oversized: 'signature header over 16 KiB or over 64 entries',
  repeated: '`webhook-id` or `webhook-timestamp` repeated with different values (two spellings of the name, or a `string[]`)',
  loneSurrogate: '`webhook-id` with a lone UTF-16 surrogate (only possible in a hand-built headers object)',
  longId: '`webhook-id` longer than 256 characters',
  shortSecret: 'HMAC secret under 16 bytes',
  svix: '`svix-id`, `svix-timestamp`, `svix-signature`',
  repeatedSignature: '`webhook-signature` under two spellings of its name',
  weakKey: '`whpk_` key of small order (identity, all-zero, the other points of order 2, 4, 8) or non-canonical',
  v1aBound: 'more distinct well-formed `v1a` entries than max(2, public keys)',
  encoding: '`Content-Encoding` other than `gzip`, `deflate` (or `identity`): `br`, `zstd`, several codings',
  commaSecrets: 'several secrets in one comma-separated string (`whsec_a…,whsec_b…`)',
  compressed: 'a body sent with `Content-Encoding: gzip` or `deflate`',
} as const;

const DIFFERENCES: Record<string, Difference> = {
  looseTimestamp: {
    row: ROW.looseTimestamp,
    direction: 'stricter',
    applies: ({ headers }) => valuesOf(headers, 'webhook-timestamp').some(isLoose),
  },
  leadingZeros: {
    row: ROW.leadingZeros,
    direction: 'stricter',
    applies: ({ headers }) => valuesOf(headers, 'webhook-timestamp').some((t) => /^0[0-9]+$/.test(t)),
  },
  emptyEntry: {
    row: ROW.emptyEntry,
    direction: 'stricter',
    applies: ({ headers }) => entriesOf(headers).some((entries) => entries.includes('')),
  },
  extraField: {
    row: ROW.extraField,
    direction: 'stricter',
    applies: ({ headers }) =>
      entriesOf(headers).some((entries) =>
        entries.some((e, i) => {
          const commas = e.split(',').length - 1;
          // 'v1,a, v1,b' is one header repeated and joined with ', ': the comma before the space is
          // the join, and both libraries read 'a'.
          const joinComma = i < entries.length - 1 && commas === 2 && e.endsWith(',');
          return commas >= 2 && !joinComma;
        }),
      ),
  },
  oversized: {
    row: ROW.oversized,
    direction: 'stricter',
    applies: ({ headers }) => valuesOf(headers, 'webhook-signature').some((v) => v.length > MAX_SIGNATURE_HEADER_LENGTH || v.split(' ').length > MAX_SIGNATURE_ENTRIES),
  },
  repeated: {
    row: ROW.repeated,
    direction: 'stricter',
    applies: ({ headers }) => ['webhook-id', 'webhook-timestamp'].some((name) => new Set(valuesOf(headers, name)).size > 1),
  },
  loneSurrogate: {
    row: ROW.loneSurrogate,
    direction: 'stricter',
    applies: ({ headers }) => valuesOf(headers, 'webhook-id').some((id) => /[\uD800-\uDFFF]/u.test(id)),
  },
  longId: {
    row: ROW.longId,
    direction: 'stricter',
    applies: ({ headers }) => valuesOf(headers, 'webhook-id').some((id) => id.length > MAX_ID_LENGTH),
  },
  svix: {
    row: ROW.svix,
    direction: 'lenient',
    applies: ({ headers }) => Object.keys(headers).some((n) => n.toLowerCase().startsWith('svix-')),
  },
  repeatedSignature: {
    row: ROW.repeatedSignature,
    direction: 'lenient',
    applies: ({ headers }) => valuesOf(headers, 'webhook-signature').length > 1,
  },
};

// ---------------------------------------------------------------------------------------------
// Both libraries.

function oracleAccepts(secret: string, input: Input): boolean {
  try {
    new Oracle(secret).verify(input.body, input.headers as Record<string, string>, { jsonParse: false });
    return true;
  } catch (error) {
    // Its own error class for every refusal it means; anything else would be a crash of the oracle.
    expect((error as Error).name).toBe('WebhookVerificationError');
    return false;
  }
}

const verifiers = new Map<string, ReturnType<typeof createVerifierWith>>();
async function weAccept(secret: string, input: Input, backend: CryptoBackend): Promise<boolean> {
  const cacheKey = `${backend.name}:${secret}`;
  let verifier = verifiers.get(cacheKey);
  if (verifier === undefined) verifiers.set(cacheKey, (verifier = createVerifierWith({ secrets: secret, now: () => NOW_MS }, backend)));
  const result = await settle(verifier.verify(input));
  if (!result.ok) expectDocumentedError(result.error);
  return result.ok;
}

const hmac = (key: Uint8Array, content: string) => createHmac('sha256', key).update(content).digest('base64');

// ---------------------------------------------------------------------------------------------
// Random cases: a valid message, then zero or more changes of the kinds where libraries differ.

interface Case {
  key: Uint8Array;
  input: Input;
}

const TIMESTAMP_FORMS = ['+', ' ', '\t', 'trailing space', 'abc', '.5', 'e3', '0', '00', 'ms'] as const;
const SIGNATURE_CHANGES = ['url-safe', 'no padding', 'bit flip', 'case', 'extra field', 'trailing comma', 'space after comma', 'wrong key'] as const;
const HEADER_CHANGES = ['name case', 'svix', 'repeat id', 'repeat timestamp', 'repeat signature', 'id list', 'timestamp list', 'double space', 'leading space', 'trailing space', 'tab', 'too long', 'too many', 'lone surrogate'] as const;
const CONTENT_CHANGES = ['body', 'id'] as const;

/** `none` three times in four, else one of `changes`: about a third of the cases are untouched. */
const sometimes = <T extends string>(none: T, changes: readonly T[]): fc.Arbitrary<T> =>
  fc.oneof({ weight: 3, arbitrary: fc.constant(none) }, { weight: 1, arbitrary: fc.constantFrom(...changes) });

const caseArb: fc.Arbitrary<Case> = fc
  .record({
    key: fc.uint8Array({ minLength: 16, maxLength: 64 }),
    otherKey: fc.uint8Array({ minLength: 16, maxLength: 64 }),
    id: fc.oneof(fc.stringMatching(/^msg_[A-Za-z0-9]{27}$/), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 })),
    delta: fc.integer({ min: -320, max: 320 }),
    body: fc.oneof(fc.json(), fc.string({ unit: 'grapheme', maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 100 })),
    timestampForm: sometimes<'plain' | (typeof TIMESTAMP_FORMS)[number]>('plain', TIMESTAMP_FORMS),
    signOver: fc.constantFrom('text', 'number'),
    signatureChange: sometimes<'none' | (typeof SIGNATURE_CHANGES)[number]>('none', SIGNATURE_CHANGES),
    headerChange: sometimes<'none' | (typeof HEADER_CHANGES)[number]>('none', HEADER_CHANGES),
    contentChange: sometimes<'none' | (typeof CONTENT_CHANGES)[number]>('none', CONTENT_CHANGES),
    decoys: fc.array(fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => `v1,${Buffer.from(b).toString('base64')}`), { maxLength: 3 }),
    position: fc.nat(),
    at: fc.nat(),
    bit: fc.nat({ max: 7 }),
    upper: fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
    first: fc.boolean(),
  })
  .map((c): Case => {
    const number = NOW + c.delta;
    const timestamp = ((): string => {
      switch (c.timestampForm) {
        case 'plain': return String(number);
        case '+': return `+${number}`;
        case ' ': return ` ${number}`;
        case '\t': return `\t${number}`;
        case 'trailing space': return `${number} `;
        case 'abc': return `${number}abc`;
        case '.5': return `${number}.5`;
        case 'e3': return `${number}e3`;
        case '0': return `0${number}`;
        case '00': return `00${number}`;
        case 'ms': return `${number}000`;
      }
    })();
    // The oracle signs the number parseInt read; a sender may have signed either.
    const signedTimestamp = c.signOver === 'text' ? timestamp : String(Number.parseInt(timestamp, 10));
    const signingKey = c.signatureChange === 'wrong key' ? c.otherKey : c.key;
    let signature = hmac(signingKey, `${c.id}.${signedTimestamp}.${c.body}`);
    switch (c.signatureChange) {
      case 'url-safe': signature = signature.replace(/\+/g, '-').replace(/\//g, '_'); break;
      case 'no padding': signature = signature.replace(/=+$/, ''); break;
      case 'bit flip': {
        const bytes = Buffer.from(signature, 'base64');
        bytes[c.at % bytes.length]! ^= 1 << c.bit;
        signature = bytes.toString('base64');
        break;
      }
      case 'case': signature = signature.replace(/[A-Za-z]/, (l) => (l === l.toUpperCase() ? l.toLowerCase() : l.toUpperCase())); break;
      case 'extra field': signature = `${signature},x`; break;
      case 'trailing comma': signature = `${signature},`; break;
      case 'space after comma': signature = ` ${signature}`; break;
    }
    const entries = [...c.decoys];
    entries.splice(c.position % (entries.length + 1), 0, `v1,${signature}`);
    let signatureHeader = entries.join(' ');
    let id = c.id;
    let body = c.body;
    if (c.contentChange === 'body') body = `${body} `;
    if (c.contentChange === 'id') id = `${id}_`;

    const spell = (name: string) => [...name].map((ch, i) => (c.upper[i % c.upper.length] ? ch.toUpperCase() : ch)).join('');
    let headers: PlainHeaders = { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signatureHeader };
    const other = (value: string) => `${value}_other`;
    switch (c.headerChange) {
      case 'name case':
        headers = { [spell('webhook-id')]: id, [spell('webhook-timestamp')]: timestamp, [spell('webhook-signature')]: signatureHeader };
        break;
      case 'svix':
        headers = { 'svix-id': id, 'svix-timestamp': timestamp, 'svix-signature': signatureHeader };
        break;
      case 'repeat id':
      case 'repeat timestamp':
      case 'repeat signature': {
        // The same header under a second spelling, before or after the first, with another value.
        const name = c.headerChange === 'repeat id' ? 'webhook-id' : c.headerChange === 'repeat timestamp' ? 'webhook-timestamp' : 'webhook-signature';
        const second = c.headerChange === 'repeat signature' ? `v1,${Buffer.alloc(32, 9).toString('base64')}` : other(headers[name] as string);
        headers = c.first ? { [name.toUpperCase()]: second, ...headers } : { ...headers, [name.toUpperCase()]: second };
        break;
      }
      case 'id list':
        headers['webhook-id'] = c.first ? [id, other(id)] : [other(id), id];
        break;
      case 'timestamp list':
        headers['webhook-timestamp'] = c.first ? [timestamp, '1'] : ['1', timestamp];
        break;
      case 'double space': signatureHeader = `${Buffer.alloc(32, 5).toString('base64').replace(/^/, 'v1,')}  ${signatureHeader}`; break;
      case 'leading space': signatureHeader = ` ${signatureHeader}`; break;
      case 'trailing space': signatureHeader = `${signatureHeader} `; break;
      case 'tab': signatureHeader = signatureHeader.replace(/ /g, '\t'); break;
      case 'too long': signatureHeader = `${`v1,${'A'.repeat(43)}= `.repeat(Math.ceil(MAX_SIGNATURE_HEADER_LENGTH / 48))}${signatureHeader}`; break;
      case 'too many': signatureHeader = `${'v2,x '.repeat(MAX_SIGNATURE_ENTRIES)}${signatureHeader}`; break;
      case 'lone surrogate': {
        // A lone surrogate and U+FFFD are the same bytes in UTF-8, so this is what the oracle signs.
        const lone = `${id}\uD800`;
        signatureHeader = `v1,${hmac(signingKey, `${id}\uFFFD.${signedTimestamp}.${body}`)}`;
        headers['webhook-id'] = lone;
        break;
      }
    }
    if (['double space', 'leading space', 'trailing space', 'tab', 'too long', 'too many', 'lone surrogate'].includes(c.headerChange)) {
      headers['webhook-signature'] = signatureHeader;
    }
    return { key: c.key, input: { headers, body } };
  });

// ---------------------------------------------------------------------------------------------

const secretOf = (key: Uint8Array) => `whsec_${Buffer.from(key).toString('base64')}`;

beforeAll(() => {
  vi.spyOn(Date, 'now').mockReturnValue(NOW_MS);
});
afterAll(() => {
  vi.restoreAllMocks();
});

const BACKENDS: [string, CryptoBackend, number][] = [
  ['node:crypto', defaultBackend, 0.22],
  ['WebCrypto', webCryptoBackend, 0.1],
];

describe.each(BACKENDS)('differential against standardwebhooks on %s', (name, backend, weight) => {
  const runs = cases(weight, 500);

  it(
    'accept/reject matches the oracle except where a listed difference applies, in its direction',
    async () => {
      const tally = { agree: 0, accepted: 0, differ: new Map<string, number>() };
      const property = fc.asyncProperty(caseArb, async ({ key, input }) => {
        const secret = secretOf(key);
        const ours = await weAccept(secret, input, backend);
        const theirs = oracleAccepts(secret, input);
        if (ours) tally.accepted++;
        if (ours === theirs) {
          tally.agree++;
          return;
        }
        const direction = ours ? 'lenient' : 'stricter';
        const explained = Object.entries(DIFFERENCES).filter(([, d]) => d.direction === direction && d.applies(input));
        if (explained.length === 0) {
          expect.fail(`unlisted difference: we ${ours ? 'accept' : 'reject'}, standardwebhooks ${theirs ? 'accepts' : 'rejects'}: ${JSON.stringify(input)}`);
        }
        for (const [n] of explained) tally.differ.set(n, (tally.differ.get(n) ?? 0) + 1);
      });
      await check(`differential (${name})`, property, runs);
      if (NIGHTLY || process.env.FUZZ_REPORT) {
        console.log(`[fuzz] differential (${name}): ${tally.agree} agree, ${tally.accepted} accepted by us; differences: ${JSON.stringify(Object.fromEntries(tally.differ))}`);
      }
      // Both outcomes and real differences were exercised, or the comparison proved nothing.
      expect(tally.agree).toBeGreaterThan(runs / 2);
      expect(tally.accepted).toBeGreaterThan(runs / 10);
      expect(tally.differ.size).toBeGreaterThan(2);
    },
    timeoutFor(runs, 1),
  );
});

// ---------------------------------------------------------------------------------------------
// One worked example per docs/security.md row, run through both libraries.

describe('every documented difference, by example', () => {
  const key = Buffer.alloc(32, 0x2a);
  const secret = secretOf(key);
  const id = 'msg_example';
  const body = '{"type":"invoice.paid"}';
  const t = String(NOW);
  const sign = (ts: string, signedId = id, k: Uint8Array = key) => `v1,${hmac(k, `${signedId}.${ts}.${body}`)}`;
  const request = (headers: PlainHeaders): Input => ({ headers, body });
  const standard = (ts: string, signature: string): PlainHeaders => ({ 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': signature });

  /** Runs both and returns [ours, oracle] plus our error code. */
  async function both(input: Input, s = secret): Promise<{ ours: string; oracle: 'accepted' | 'rejected' }> {
    const verifier = createVerifierWith({ secrets: s, now: () => NOW_MS }, defaultBackend);
    const result = await settle(verifier.verify(input));
    let ours = 'accepted';
    if (!result.ok) {
      expectDocumentedError(result.error);
      ours = result.error.code;
    }
    return { ours, oracle: oracleAccepts(s, input) ? 'accepted' : 'rejected' };
  }

  const EXAMPLES: { row: string; input: () => Input; expected: { ours: string; oracle: 'accepted' | 'rejected' } }[] = [
    ...['1700000000abc', '+1700000000', ' 1700000000', '1700000000.5'].map((ts) => ({
      row: ROW.looseTimestamp,
      input: () => request(standard(ts, sign(String(Number.parseInt(ts, 10))))),
      expected: { ours: 'INVALID_TIMESTAMP', oracle: 'accepted' as const },
    })),
    { row: ROW.leadingZeros, input: () => request(standard(`0${t}`, sign(t))), expected: { ours: 'INVALID_TIMESTAMP', oracle: 'accepted' } },
    { row: ROW.milliseconds, input: () => request(standard(`${t}000`, sign(`${t}000`))), expected: { ours: 'INVALID_TIMESTAMP', oracle: 'rejected' } },
    ...[(s: string) => `v1,${'A'.repeat(43)}=  ${s}`, (s: string) => ` ${s}`, (s: string) => `${s} `].map((make) => ({
      row: ROW.emptyEntry,
      input: () => request(standard(t, make(sign(t)))),
      expected: { ours: 'INVALID_SIGNATURE_HEADER', oracle: 'accepted' as const },
    })),
    ...[',x', ','].map((extra) => ({
      row: ROW.extraField,
      input: () => request(standard(t, `${sign(t)}${extra}`)),
      expected: { ours: 'SIGNATURE_MISMATCH', oracle: 'accepted' as const },
    })),
    {
      row: ROW.oversized,
      input: () => request(standard(t, `${`v1,${'A'.repeat(43)}= `.repeat(400)}${sign(t)}`)),
      expected: { ours: 'INVALID_SIGNATURE_HEADER', oracle: 'accepted' },
    },
    { row: ROW.oversized, input: () => request(standard(t, `${'v2,x '.repeat(64)}${sign(t)}`)), expected: { ours: 'INVALID_SIGNATURE_HEADER', oracle: 'accepted' } },
    {
      row: ROW.repeated,
      input: () => request({ 'Webhook-Id': 'msg_other', 'webhook-id': id, 'webhook-timestamp': t, 'webhook-signature': sign(t) }),
      expected: { ours: 'MISSING_ID', oracle: 'accepted' },
    },
    {
      row: ROW.repeated,
      input: () => request({ 'webhook-id': id, 'webhook-timestamp': t, 'Webhook-Timestamp': '1', 'webhook-signature': sign(t) }),
      expected: { ours: 'INVALID_TIMESTAMP', oracle: 'rejected' },
    },
    {
      row: ROW.repeated,
      input: () => request({ 'webhook-id': id, 'webhook-timestamp': [t, '1'], 'webhook-signature': sign(t) }),
      expected: { ours: 'INVALID_TIMESTAMP', oracle: 'accepted' },
    },
    {
      row: ROW.repeated,
      input: () => request({ 'webhook-id': [id, 'msg_other'], 'webhook-timestamp': t, 'webhook-signature': sign(t, `${id},msg_other`) }),
      expected: { ours: 'MISSING_ID', oracle: 'accepted' },
    },
    {
      row: ROW.loneSurrogate,
      input: () => request({ ...standard(t, sign(t, `${id}\uFFFD`)), 'webhook-id': `${id}\uD800` }),
      expected: { ours: 'MISSING_ID', oracle: 'accepted' },
    },
    {
      row: ROW.longId,
      input: () => request({ ...standard(t, sign(t, 'i'.repeat(MAX_ID_LENGTH + 1))), 'webhook-id': 'i'.repeat(MAX_ID_LENGTH + 1) }),
      expected: { ours: 'MISSING_ID', oracle: 'accepted' },
    },
    { row: ROW.svix, input: () => request({ 'svix-id': id, 'svix-timestamp': t, 'svix-signature': sign(t) }), expected: { ours: 'accepted', oracle: 'rejected' } },
    {
      row: ROW.repeatedSignature,
      input: () => request({ 'webhook-id': id, 'webhook-timestamp': t, 'webhook-signature': sign(t), 'Webhook-Signature': `v1,${'A'.repeat(43)}=` }),
      expected: { ours: 'accepted', oracle: 'rejected' },
    },
  ];

  it.each(EXAMPLES.map((e) => [e.row, e] as const))('%s', async (_row, example) => {
    expect(await both(example.input())).toEqual(example.expected);
  });

  it(`${ROW.milliseconds}: the oracle says "too new", we say it looks like milliseconds`, async () => {
    const input = request(standard(`${t}000`, sign(`${t}000`)));
    expect(() => new Oracle(secret).verify(input.body, input.headers as Record<string, string>, { jsonParse: false })).toThrow('Message timestamp too new');
    const result = await settle(createVerifierWith({ secrets: secret, now: () => NOW_MS }, defaultBackend).verify(input));
    expect(result.ok).toBe(false);
    if (!result.ok) expect((result.error as Error).message).toMatch(/looks like milliseconds/);
  });

  it(`${ROW.shortSecret}: the oracle verifies with an 8-byte secret, we refuse it at start-up`, () => {
    const short = secretOf(Buffer.alloc(8, 1));
    const input = request(standard(t, sign(t, id, Buffer.alloc(8, 1))));
    expect(oracleAccepts(short, input)).toBe(true);
    expect(() => createVerifierWith({ secrets: short }, defaultBackend)).toThrow(RangeError);
  });

  // Rows shown by a test of their own below (the oracle has no v1a, and reads no Content-Encoding).
  const BY_HAND = [ROW.weakKey, ROW.v1aBound, ROW.encoding, ROW.commaSecrets, ROW.compressed];

  it(`${ROW.weakKey}: refused at start-up`, () => {
    for (const raw of [Buffer.from(`01${'00'.repeat(31)}`, 'hex'), Buffer.alloc(32), Buffer.from(`ed${'ff'.repeat(30)}7f`, 'hex')]) {
      expect(() => createVerifierWith({ secrets: `whpk_${raw.toString('base64')}` }, defaultBackend)).toThrow(RangeError);
    }
  });

  it(`${ROW.v1aBound}: the entries past the bound are not checked`, async () => {
    const { secretKey, publicKey } = await generateKeyPair();
    const signed = await signWebhook({ secret: secretKey, body, id, timestamp: NOW });
    const junk = [1, 2].map((n) => `v1a,${Buffer.alloc(64, n).toString('base64')}`);
    const verifier = createVerifierWith({ secrets: publicKey, now: () => NOW_MS }, defaultBackend);
    const at = (header: string) => settle(verifier.verify({ headers: { ...signed.headers, 'webhook-signature': header }, body }));
    expect((await at([junk[0], signed.signature].join(' '))).ok).toBe(true);
    // Refused as a mismatch (the third entry was never checked), not as a malformed header.
    expect(await at([...junk, signed.signature].join(' '))).toMatchObject({ ok: false, error: { code: 'SIGNATURE_MISMATCH' } });
  });

  it(`${ROW.encoding}: the oracle never sees the encoding; verifyRequest refuses it with 415`, async () => {
    const headers = standard(t, sign(t));
    expect(oracleAccepts(secret, request(headers))).toBe(true);
    const verifier = createVerifierWith({ secrets: secret, now: () => NOW_MS }, defaultBackend);
    const sent = new Request('http://127.0.0.1/hook', { method: 'POST', headers: { ...headers, 'content-encoding': 'br' }, body: brotliCompressSync(body) });
    await expectCode(verifier.verifyRequest(sent), 'UNSUPPORTED_ENCODING', () => 'br');
  });

  it(`${ROW.commaSecrets}: the oracle cannot use the string, we try each secret`, async () => {
    const other = secretOf(Buffer.alloc(32, 7));
    const input = request(standard(t, sign(t)));
    expect(() => new Oracle(`${other},${secret}`)).toThrow();
    const result = await settle(createVerifierWith({ secrets: `${other},${secret}`, now: () => NOW_MS }, defaultBackend).verify(input));
    expect(result).toMatchObject({ ok: true, value: { keyIndex: 1 } });
  });

  it(`${ROW.compressed}: the oracle given the bytes on the wire refuses; verifyRequest decodes and verifies`, async () => {
    const headers = standard(t, sign(t));
    const wire = gzipSync(body);
    expect(oracleAccepts(secret, { headers, body: wire.toString('latin1') })).toBe(false);
    const verifier = createVerifierWith({ secrets: secret, now: () => NOW_MS }, defaultBackend);
    const sent = new Request('http://127.0.0.1/hook', { method: 'POST', headers: { ...headers, 'content-encoding': 'gzip' }, body: wire });
    expect((await settle(verifier.verifyRequest(sent))).ok).toBe(true);
  });

  it('docs/security.md lists exactly these differences, and each row has an example here', () => {
    const page = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
    const table = (heading: string): string[] => {
      const lines = page.split('\n');
      const start = lines.findIndex((l) => l.replace(/^#+\s*/, '') === heading && l.startsWith('#'));
      expect(start, `docs/security.md heading "${heading}"`).toBeGreaterThan(-1);
      const rows: string[] = [];
      for (const line of lines.slice(start + 1)) {
        if (line.startsWith('#')) break;
        if (!line.startsWith('|')) continue;
        rows.push(line.split(' | ')[0]!.replace(/^\|\s*/, '').trim());
      }
      return rows.slice(2); // header and separator
    };
    const stricter = [
      ROW.looseTimestamp, ROW.leadingZeros, ROW.milliseconds, ROW.emptyEntry, ROW.extraField, ROW.oversized, ROW.repeated, ROW.loneSurrogate,
      ROW.longId, ROW.shortSecret, ROW.weakKey, ROW.v1aBound, ROW.encoding,
    ];
    const lenient = [ROW.svix, ROW.repeatedSignature, ROW.commaSecrets, ROW.compressed];
    expect(table(STRICTER_TABLE)).toEqual(stricter);
    expect(table(LENIENT_TABLE)).toEqual(lenient);
    for (const d of Object.values(DIFFERENCES)) expect(d.direction === 'stricter' ? stricter : lenient).toContain(d.row);
    const exemplified = new Set([...EXAMPLES.map((e) => e.row), ROW.milliseconds, ROW.shortSecret, ...BY_HAND]);
    for (const row of [...stricter, ...lenient]) expect(exemplified).toContain(row);
  });
});

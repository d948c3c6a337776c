/**
 * Hostile input: whatever headers and body arrive, `verify` (and `verifyRequest`) either resolves
 * for an authentic message or rejects with a documented `WebhookError`. Never another exception,
 * never a hang (each case is bounded by fast-check's timeout plugin), never a message accepted
 * that the trusted key did not sign, never a signed request downgraded to "unsigned".
 *
 * Headers come in every shape the package accepts (a Fetch `Headers`, a plain object with names in
 * any case and `string[]` values, Node's lower-cased `req.headers`, an array of pairs, a `Map`),
 * with duplicates, huge values, control characters, lone surrogates and non-ASCII text, mixed
 * with the real headers of an authentic message so that the interesting paths are reached.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultBackend, webCryptoBackend, type CryptoBackend } from '../../src/crypto.ts';
import type { HeadersInput } from '../../src/headers.ts';
import { createVerifierWith, type VerifiedWebhook, type VerifierOptions } from '../../src/verify.ts';
import { cases, check, expectDocumentedError, findWindow, freshSecret, hmacSignature, secretWindows, settle, timeoutFor } from './support.ts';

const NOW = 1_700_000_000;
const { secret, key } = freshSecret(32);
const SECRET_WINDOWS = secretWindows([secret, secret.slice('whsec_'.length)]);

const WEBHOOK_NAMES = ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'svix-id', 'svix-timestamp', 'svix-signature'] as const;

// ---------------------------------------------------------------------------------------------
// Generators.

/** `name` with each letter in a random case. */
const anyCase = (name: string): fc.Arbitrary<string> =>
  fc.array(fc.boolean(), { minLength: name.length, maxLength: name.length }).map((upper) =>
    [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(''),
  );

/** Any UTF-16 code unit, lone surrogates and control characters included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n));

const junk = fc.oneof(
  fc.string({ unit: 'binary-ascii', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: codeUnit, maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
);

/** Up to about 70 000 characters, past every header limit. */
const huge = fc
  .tuple(fc.oneof(fc.constantFrom('v1,', 'v1,AAAA ', ' ', ',', '9', 'a'), fc.string({ minLength: 1, maxLength: 8 })), fc.integer({ min: 1_000, max: 20_000 }))
  .map(([piece, times]) => piece.repeat(times).slice(0, 70_000));

const timestampText = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: -400, max: 400 }).map((delta) => String(NOW + delta)) },
  // Well outside the window either way, so every run reaches both window codes.
  { weight: 3, arbitrary: fc.constantFrom(String(NOW - 3600), String(NOW + 3600), String(NOW + 86_400)) },
  {
    weight: 2,
    arbitrary: fc.constantFrom('', '0', '-1', '+1700000000', ' 1700000000', '1700000000 ', '1700000000abc', '1700000000.5', '01700000000', '1700000000000', '1e9', 'NaN', 'Infinity', '９９'),
  },
  { weight: 1, arbitrary: fc.nat().map(String) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: 10n ** 30n }).map(String) },
);

const base64ish = fc.oneof(
  fc.uint8Array({ minLength: 0, maxLength: 70 }).map((b) => Buffer.from(b).toString('base64')),
  fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('base64url')),
  junk,
);
const entry = fc.oneof(
  fc.tuple(fc.constantFrom('v1', 'v1a', 'v2', 'V1', '', 'v1 '), base64ish).map(([v, s]) => `${v},${s}`),
  junk,
);
const separator = fc.constantFrom(' ', ' ', ' ', '  ', ', ', ',', '\t', '\n', '');

/** The authentic message of one case. */
interface Message {
  id: string;
  timestamp: string;
  body: Uint8Array;
  signature: string;
}

const message: fc.Arbitrary<Message> = fc
  .record({
    id: fc.oneof(fc.stringMatching(/^msg_[A-Za-z0-9]{1,27}$/), fc.string({ unit: 'binary', minLength: 1, maxLength: 30 })),
    delta: fc.integer({ min: -290, max: 290 }),
    body: fc.oneof(
      fc.uint8Array({ maxLength: 512 }),
      fc.json().map((j) => new TextEncoder().encode(j)),
      fc.string({ unit: 'binary', maxLength: 256 }).map((s) => new TextEncoder().encode(s)),
    ),
  })
  .map(({ id, delta, body }) => {
    const timestamp = String(NOW + delta);
    return { id, timestamp, body, signature: `v1,${hmacSignature(key, id, timestamp, body)}` };
  });

type Value = string | string[];
type Pair = [name: string, value: Value];

/** Signature header values built from the real entry and noise. */
const signatureValue = (m: Message): fc.Arbitrary<string> =>
  fc
    .array(fc.oneof({ weight: 2, arbitrary: fc.constant(m.signature) }, { weight: 3, arbitrary: entry }), { minLength: 1, maxLength: 6 })
    .chain((entries) => fc.array(separator, { minLength: entries.length, maxLength: entries.length }).map((seps) =>
      entries.map((e, i) => (i === 0 ? e : seps[i]! + e)).join(''),
    ));

const valueFor = (m: Message, kind: 'id' | 'timestamp' | 'signature' | 'other'): fc.Arbitrary<string> => {
  const real = kind === 'id' ? fc.constant(m.id) : kind === 'timestamp' ? fc.constant(m.timestamp) : kind === 'signature' ? signatureValue(m) : junk;
  const plausible = kind === 'timestamp' ? timestampText : kind === 'signature' ? fc.array(entry, { maxLength: 4 }).map((e) => e.join(' ')) : junk;
  // Timestamps lean more on the plausible ones, so each run reaches every window and format code.
  const plausibleWeight = kind === 'timestamp' ? 4 : 2;
  return fc.oneof({ weight: 6, arbitrary: real }, { weight: plausibleWeight, arbitrary: plausible }, { weight: 1, arbitrary: junk }, { weight: 1, arbitrary: huge });
};

const valueOrList = (m: Message, kind: 'id' | 'timestamp' | 'signature' | 'other'): fc.Arbitrary<Value> =>
  fc.oneof({ weight: 4, arbitrary: valueFor(m, kind) }, { weight: 1, arbitrary: fc.array(valueFor(m, kind), { minLength: 0, maxLength: 3 }) });

const kindOf = (name: string): 'id' | 'timestamp' | 'signature' | 'other' => {
  const lower = name.toLowerCase();
  return lower.endsWith('-id') ? 'id' : lower.endsWith('-timestamp') ? 'timestamp' : lower.endsWith('-signature') ? 'signature' : 'other';
};

/** The pairs of one request: mostly the real three headers (any case, aliases), plus noise. */
const pairs = (m: Message): fc.Arbitrary<Pair[]> => {
  const webhookPair = fc
    .constantFrom(...WEBHOOK_NAMES)
    .chain(anyCase)
    .chain((name) => valueOrList(m, kindOf(name)).map((value): Pair => [name, value]));
  const otherPair = fc.tuple(fc.oneof(fc.constantFrom('content-type', 'x-forwarded-for', 'webhook-idx', 'webhook', 'id'), junk), junk).map(([n, v]): Pair => [n, v]);
  return fc.array(fc.oneof({ weight: 5, arbitrary: webhookPair }, { weight: 1, arbitrary: otherPair }), { maxLength: 10 });
};

type Shape = 'object' | 'node' | 'pairs' | 'map' | 'headers';

/** Builds the headers in one of the accepted shapes. `Headers` refuses some values itself: those pairs are left out. */
function shape(kind: Shape, list: Pair[]): { headers: HeadersInput; present: [string, string][] } {
  const flat: [string, string][] = list.flatMap(([n, v]) => (Array.isArray(v) ? v.map((x): [string, string] => [n, x]) : [[n, v]]));
  switch (kind) {
    case 'object': {
      const record: Record<string, string | string[]> = {};
      for (const [n, v] of list) {
        const prior = record[n];
        record[n] = prior === undefined ? v : [...[prior].flat(), ...[v].flat()];
      }
      return { headers: record, present: Object.entries(record).flatMap(([n, v]) => [v].flat().map((x): [string, string] => [n, x])) };
    }
    case 'node': {
      const record: Record<string, string | string[]> = {};
      for (const [n, v] of flat) {
        const name = n.toLowerCase();
        const prior = record[name];
        record[name] = prior === undefined ? v : [...[prior].flat(), v];
      }
      return { headers: record, present: Object.entries(record).flatMap(([n, v]) => [v].flat().map((x): [string, string] => [n, x])) };
    }
    case 'pairs':
      return { headers: flat, present: flat };
    case 'map': {
      const map = new Map(flat);
      return { headers: map, present: [...map] };
    }
    case 'headers': {
      const headers = new Headers();
      for (const [n, v] of flat) {
        try {
          headers.append(n, v);
        } catch {
          // Not a legal header name or value: a Fetch runtime would never hand it to us.
        }
      }
      return { headers, present: [...headers] };
    }
  }
}

const bodyShape = fc.constantFrom('bytes', 'buffer', 'arraybuffer', 'subarray', 'string');

function asBody(kind: string, bytes: Uint8Array): string | Uint8Array | ArrayBuffer {
  switch (kind) {
    case 'buffer':
      return Buffer.from(bytes);
    case 'arraybuffer':
      return bytes.slice().buffer;
    case 'subarray': {
      // A view into a larger buffer, at an offset: the verifier must hash exactly the view.
      const padded = new Uint8Array(bytes.length + 7);
      padded.fill(0x41);
      padded.set(bytes, 3);
      return padded.subarray(3, 3 + bytes.length);
    }
    case 'string':
      // Only bytes that are UTF-8 have a string form that encodes back to them.
      try {
        return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
      } catch {
        return bytes;
      }
    default:
      return bytes;
  }
}

function bytesOf(body: string | Uint8Array | ArrayBuffer): Uint8Array {
  return typeof body === 'string' ? new TextEncoder().encode(body) : body instanceof Uint8Array ? body : new Uint8Array(body);
}

// ---------------------------------------------------------------------------------------------
// The invariant.

const lowerNamed = (present: [string, string][], suffix: string) =>
  present.filter(([n]) => n.toLowerCase() === `webhook-${suffix}` || n.toLowerCase() === `svix-${suffix}`).map(([, v]) => v);

/**
 * A verification that resolved must be authentic: the HMAC of the verified id, one of the
 * timestamp values present and the verified body appears in a signature header. An unsigned
 * success is allowed only when unsigned requests were accepted and no signature header exists.
 */
function expectAuthentic(webhook: VerifiedWebhook, present: [string, string][], sent: Uint8Array, acceptUnsigned: boolean): void {
  expect(Buffer.from(webhook.body).equals(Buffer.from(sent))).toBe(true);
  const signatures = lowerNamed(present, 'signature');
  if (!webhook.signed) {
    expect(acceptUnsigned).toBe(true);
    expect(signatures).toEqual([]);
    return;
  }
  expect(webhook.scheme).toBe('v1');
  expect(webhook.keyIndex).toBe(0);
  const stamps = lowerNamed(present, 'timestamp').flatMap((v) => v.split(', '));
  const allSignatures = signatures.join(' ');
  const genuine = stamps.some(
    (t) => Number(t) * 1000 === webhook.timestamp.getTime() && allSignatures.includes(hmacSignature(key, webhook.id, t, webhook.body)),
  );
  expect(genuine, 'a verified webhook carries the HMAC of its own id, timestamp and body').toBe(true);
}

const BACKENDS: [string, CryptoBackend, number][] = [
  ['node:crypto', defaultBackend, 0.2],
  ['WebCrypto', webCryptoBackend, 0.08],
];

describe.each(BACKENDS)('hostile input on %s', (name, backend, weight) => {
  const options = (variant: number): VerifierOptions => ({
    secrets: secret,
    now: () => NOW * 1000 + 250,
    ...(variant === 1 ? { unsigned: 'accept' as const } : {}),
    ...(variant === 2 ? { maxBodyBytes: 64 } : {}),
  });
  const verifiers = [0, 1, 2].map((v) => createVerifierWith(options(v), backend));
  const runs = cases(weight, 400);

  it(
    'verify resolves only for an authentic message and otherwise rejects with a documented WebhookError',
    async () => {
      let accepted = 0;
      let rejected = 0;
      const codes = new Set<string>();
      const property = fc.asyncProperty(
        message.chain((m) => fc.tuple(fc.constant(m), pairs(m))),
        fc.constantFrom<Shape>('object', 'node', 'pairs', 'map', 'headers'),
        bodyShape,
        fc.constantFrom(0, 1, 2),
        async ([m, list], kind, bodyKind, variant) => {
          const { headers, present } = shape(kind, list);
          const body = asBody(bodyKind, m.body);
          const result = await settle(verifiers[variant]!.verify({ headers, body }));
          if (result.ok) {
            accepted++;
            expectAuthentic(result.value, present, bytesOf(body), variant === 1);
          } else {
            rejected++;
            expectDocumentedError(result.error);
            codes.add(result.error.code);
            expect(findWindow(result.error.message, SECRET_WINDOWS)).toBeUndefined();
          }
        },
      );
      // Both window codes need a valid id and timestamp pair, which random header lists reach only
      // now and then: one example each makes every run cover them; the random cases come after.
      const windowCase = (seconds: number): [[Message, Pair[]], Shape, string, number] => {
        const m: Message = { id: 'msg_window', timestamp: String(seconds), body: new Uint8Array(), signature: 'v1,AAAA' };
        return [[m, [['webhook-id', m.id], ['webhook-timestamp', m.timestamp], ['webhook-signature', m.signature]]], 'object', 'bytes', 0];
      };
      await check(`hostile verify (${name})`, property, runs, [windowCase(NOW + 3600), windowCase(NOW - 3600)]);
      // The generator must reach both outcomes and most of the codes, or it tests nothing.
      // About 15 of 400 cases are authentic (9 to 22 seen over 24 runs): a floor of 3 proves the
      // generator reaches acceptance without failing one run in twelve by chance, as `> runs / 50`
      // (8) did.
      expect(accepted).toBeGreaterThanOrEqual(3);
      expect(rejected).toBeGreaterThan(runs / 4);
      for (const code of ['MISSING_ID', 'INVALID_TIMESTAMP', 'INVALID_SIGNATURE_HEADER', 'SIGNATURE_MISMATCH', 'TIMESTAMP_TOO_OLD', 'TIMESTAMP_TOO_NEW']) {
        expect(codes).toContain(code);
      }
    },
    timeoutFor(runs, 1),
  );

  it(
    'an authentic message passes whatever shape, name case, alias and harmless extra headers it comes in',
    async () => {
      const property = fc.asyncProperty(
        message.filter((m) => /^msg_[A-Za-z0-9]+$/.test(m.id)),
        fc.constantFrom<Shape>('object', 'node', 'pairs', 'map', 'headers'),
        bodyShape,
        fc.constantFrom('webhook', 'svix'),
        fc.tuple(anyCase('id'), anyCase('timestamp'), anyCase('signature')),
        fc.boolean(),
        fc.array(fc.tuple(fc.constantFrom('content-type', 'x-request-id', 'user-agent'), fc.string({ unit: 'grapheme-ascii', maxLength: 30 })), { maxLength: 4 }),
        async (m, kind, bodyKind, brand, [idName, tsName, sigName], listed, extra) => {
          const decoy = `v1,${Buffer.alloc(32, 7).toString('base64')}`;
          const list: Pair[] = [
            // Fetch joins a repeated header with ', ', which would change the id itself.
            [`${brand}-${idName}`, listed && kind !== 'headers' ? [m.id, m.id] : m.id],
            [`${brand}-${tsName}`, m.timestamp],
            [`${brand}-${sigName}`, listed ? [decoy, m.signature] : `${decoy} ${m.signature}`],
            ...extra.map(([n, v]): Pair => [n, v.trim()]),
          ];
          const { headers } = shape(kind, list);
          const body = asBody(bodyKind, m.body);
          const webhook = await verifiers[0]!.verify({ headers, body });
          expect({ id: webhook.id, seconds: webhook.timestamp.getTime() / 1000, signed: webhook.signed, keyIndex: webhook.keyIndex }).toEqual({
            id: m.id,
            seconds: Number(m.timestamp),
            signed: true,
            keyIndex: 0,
          });
        },
      );
      await check(`authentic in every shape (${name})`, property, Math.max(1, Math.round(runs / 4)));
    },
    timeoutFor(runs, 1),
  );
});

describe('hostile Fetch requests', () => {
  const verifier = createVerifierWith({ secrets: secret, now: () => NOW * 1000 + 250, maxBodyBytes: 256 }, defaultBackend);
  const runs = cases(0.04, 150);

  it(
    'verifyRequest reads at most maxBodyBytes and ends as verify does, whatever content-length claims',
    async () => {
      const property = fc.asyncProperty(
        message.chain((m) => fc.tuple(fc.constant(m), pairs(m))),
        fc.oneof(fc.constant(undefined), fc.nat({ max: 1_000 }).map(String), junk),
        fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 1, maxLength: 8 }),
        async ([m, list], contentLength, chunkSizes) => {
          const headers = shape('headers', list).headers as Headers;
          if (contentLength !== undefined) {
            try {
              headers.set('content-length', contentLength);
            } catch {
              // An illegal value: the Fetch API would not let it through either.
            }
          }
          // The body arrives in chunks, as it does from a socket.
          let offset = 0;
          let pulled = 0;
          const stream = new ReadableStream<Uint8Array>({
            pull(controller) {
              if (offset >= m.body.length) return controller.close();
              const size = chunkSizes[pulled++ % chunkSizes.length]!;
              controller.enqueue(m.body.slice(offset, offset + size));
              offset += size;
            },
          });
          const request = new Request('http://127.0.0.1/webhooks', { method: 'POST', headers, body: stream, duplex: 'half' } as RequestInit);
          const result = await settle(verifier.verifyRequest(request));
          // Never more than the limit, the chunk that crossed it and the one the stream pulled ahead.
          expect(Math.min(offset, m.body.length)).toBeLessThanOrEqual(256 + 2 * 200);
          if (result.ok) {
            expect(m.body.length).toBeLessThanOrEqual(256);
            expectAuthentic(result.value, [...request.headers], m.body, false);
          } else {
            expectDocumentedError(result.error);
            if (result.error.code === 'PAYLOAD_TOO_LARGE') {
              const declared = Number(request.headers.get('content-length'));
              expect(m.body.length > 256 || (/^[0-9]+$/.test(request.headers.get('content-length') ?? '') && declared > 256)).toBe(true);
            }
          }
        },
      );
      await check('hostile verifyRequest', property, runs);
    },
    timeoutFor(runs, 2),
  );
});

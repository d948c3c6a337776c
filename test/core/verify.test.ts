/**
 * The verifier, run once on each crypto backend (node:crypto and WebCrypto): the spec vector,
 * every error code with its status, rotation, header and body shapes, the timestamp window,
 * unsigned requests, v1a, and the work the verifier does (or avoids) per request.
 */

import { inspect } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { WEBHOOK_ERROR_STATUS, WebhookError, isWebhookError, type WebhookErrorCode } from '../../src/errors.ts';
import { generateKeyPair, signWebhookWith } from '../../src/sign.ts';
import { createVerifierWith, MAX_ID_LENGTH, MAX_V1A_ENTRIES, type VerifierOptions, type WebhookInput } from '../../src/verify.ts';
import type { CryptoBackend } from '../../src/crypto.ts';
import {
  BACKENDS,
  VECTOR,
  VECTOR_NOW_MS,
  countingBackend,
  expectNoSecretInMessages,
  hmacEntry,
  newSecret,
  recordedMessageCount,
  rejection,
  track,
} from './support.ts';

const T = Number(VECTOR.timestamp);
const at = (seconds: number) => () => seconds * 1000;

afterAll(() => {
  expect(recordedMessageCount()).toBeGreaterThan(50);
  expectNoSecretInMessages();
});

describe.each(BACKENDS)('verifier on %s', (_name, backend: CryptoBackend) => {
  const verifier = (options: VerifierOptions) => createVerifierWith({ now: at(T), ...options }, backend);
  const sign = (secret: Parameters<typeof signWebhookWith>[0]['secret'], body: string | Uint8Array = '{"type":"ping"}', id = 'msg_1', timestamp = T) =>
    signWebhookWith({ secret, body, id, timestamp }, backend);

  describe('the spec vector', () => {
    it('verifies with the clock at the vector timestamp', async () => {
      const webhook = await createVerifierWith({ secrets: VECTOR.secret, now: () => VECTOR_NOW_MS }, backend).verify({
        headers: { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp, 'webhook-signature': VECTOR.signature },
        body: VECTOR.body,
      });
      expect(webhook.id).toBe(VECTOR.id);
      expect(webhook.timestamp.toISOString()).toBe('2021-02-25T15:02:10.000Z');
      expect(webhook.text()).toBe(VECTOR.body);
      expect(webhook.json()).toEqual({ test: 2432232314 });
      expect(webhook.signed).toBe(true);
      expect(webhook.scheme).toBe('v1');
      expect(webhook.keyIndex).toBe(0);
      expect(webhook.keyId).toBeUndefined();
    });

    it('signs the vector to the same signature', async () => {
      const signed = await signWebhookWith({ secret: VECTOR.secret, id: VECTOR.id, timestamp: T, body: VECTOR.body }, backend);
      expect(signed.signature).toBe(VECTOR.signature);
      expect(signed.headers).toEqual({
        'webhook-id': VECTOR.id,
        'webhook-timestamp': VECTOR.timestamp,
        'webhook-signature': VECTOR.signature,
      });
    });

    it('accepts the vector secret as bare base64 and as raw bytes', async () => {
      const bare = VECTOR.secret.slice('whsec_'.length);
      const raw = Uint8Array.from(Buffer.from(bare, 'base64'));
      for (const secrets of [bare, raw, { key: raw, keyId: 'bytes' }]) {
        const webhook = await verifier({ secrets }).verify({
          headers: { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp, 'webhook-signature': VECTOR.signature },
          body: VECTOR.body,
        });
        expect(webhook.keyIndex).toBe(0);
      }
    });

    it('refuses the vector with one body byte changed, or another id or timestamp', async () => {
      const v = verifier({ secrets: VECTOR.secret });
      const headers = { 'webhook-id': VECTOR.id, 'webhook-timestamp': VECTOR.timestamp, 'webhook-signature': VECTOR.signature };
      await rejection(v.verify({ headers, body: '{"test": 2432232315}' }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers, body: '{"test":2432232314}' }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers: { ...headers, 'webhook-id': `${VECTOR.id}x` }, body: VECTOR.body }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers: { ...headers, 'webhook-timestamp': String(T + 1) }, body: VECTOR.body }), 'SIGNATURE_MISMATCH');
    });
  });

  describe('missing and malformed headers', () => {
    const secret = newSecret();

    it('MISSING_ID when webhook-id is absent or empty', async () => {
      const signed = await sign(secret);
      const v = verifier({ secrets: secret });
      const { 'webhook-id': _id, ...withoutId } = signed.headers;
      const error = await rejection(v.verify({ headers: withoutId, body: '{"type":"ping"}' }), 'MISSING_ID');
      expect(error.status).toBe(400);
      expect(error.message).toContain('webhook-id');
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-id': '' }, body: '{"type":"ping"}' }), 'MISSING_ID');
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-id': [] }, body: '{"type":"ping"}' }), 'MISSING_ID');
    });

    it('MISSING_TIMESTAMP when webhook-timestamp is absent or empty', async () => {
      const signed = await sign(secret);
      const v = verifier({ secrets: secret });
      const { 'webhook-timestamp': _ts, ...withoutTimestamp } = signed.headers;
      const error = await rejection(v.verify({ headers: withoutTimestamp, body: '{"type":"ping"}' }), 'MISSING_TIMESTAMP');
      expect(error.status).toBe(400);
      expect(error.message).toContain('webhook-timestamp');
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-timestamp': '' }, body: '{"type":"ping"}' }), 'MISSING_TIMESTAMP');
    });

    it('MISSING_SIGNATURE (401) when the signature header is absent, with the opt-in named', async () => {
      const signed = await sign(secret);
      const { 'webhook-signature': _sig, ...unsigned } = signed.headers;
      const error = await rejection(verifier({ secrets: secret }).verify({ headers: unsigned, body: '{"type":"ping"}' }), 'MISSING_SIGNATURE');
      expect(error.status).toBe(401);
      expect(error.message).toContain("unsigned: 'accept'");
    });

    it.each([
      ['1614265330abc'],
      ['+1614265330'],
      [' 1614265330'],
      ['1614265330 '],
      ['1.5'],
      ['-1614265330'],
      ['1e9'],
      ['0x60378bf2'],
      ['１６１４２６５３３０'],
    ])('INVALID_TIMESTAMP for %j', async (timestamp) => {
      const signed = await sign(secret);
      const error = await rejection(
        verifier({ secrets: secret }).verify({ headers: { ...signed.headers, 'webhook-timestamp': timestamp }, body: '{"type":"ping"}' }),
        'INVALID_TIMESTAMP',
      );
      expect(error.status).toBe(400);
      expect(error.message).toContain('Unix seconds in ASCII digits');
      expect(error.message).toContain(JSON.stringify(timestamp));
    });

    it('INVALID_TIMESTAMP with a milliseconds hint for 13 digits', async () => {
      const signed = await sign(secret);
      const error = await rejection(
        verifier({ secrets: secret }).verify({ headers: { ...signed.headers, 'webhook-timestamp': '1614265330000' }, body: '{"type":"ping"}' }),
        'INVALID_TIMESTAMP',
      );
      expect(error.message).toContain('has 13 digits: it looks like milliseconds');
      expect(error.message).toContain('Unix seconds');
    });

    it('signs the timestamp and id text exactly as received', async () => {
      const v = verifier({ secrets: secret });
      // Leading zero: the same number, a different string. Refused in either signing, so no two
      // header values name the same instant.
      for (const signedAs of ['01614265330', '1614265330']) {
        const entry = hmacEntry(secret, 'msg_1', signedAs, 'x');
        const error = await rejection(
          v.verify({ headers: { 'webhook-id': 'msg_1', 'webhook-timestamp': '01614265330', 'webhook-signature': entry }, body: 'x' }),
          'INVALID_TIMESTAMP',
        );
        expect(error.message).toBe('webhook-timestamp "01614265330" has a leading zero; Unix seconds are written without one');
      }
    });
  });

  describe('rotation, signed with old and new keys at once', () => {
    const fresh = newSecret();
    const old = newSecret();
    const body = '{"type":"rotated"}';
    const headersFor = (...secrets: string[]) => ({
      'webhook-id': 'msg_rot',
      'webhook-timestamp': String(T),
      'webhook-signature': secrets.map((secret) => hmacEntry(secret, 'msg_rot', String(T), body)).join(' '),
    });

    it('reports the first-listed key that matches, whatever matched last, and then costs one HMAC', async () => {
      const { backend: counted, calls } = countingBackend(backend);
      const v = createVerifierWith({ secrets: [{ key: fresh, keyId: 'new' }, { key: old, keyId: 'old' }], now: at(T) }, counted);
      // Old-key traffic makes the old key the one tried first.
      expect((await v.verify({ headers: headersFor(old), body })).keyId).toBe('old');
      calls.hmac = 0;
      // Signed with both: the old key matches first, but the new one is listed first and matches too.
      const both = await v.verify({ headers: headersFor(old, fresh), body });
      expect([both.keyId, both.keyIndex]).toEqual(['new', 0]);
      expect(calls.hmac).toBe(2);
      calls.hmac = 0;
      expect((await v.verify({ headers: headersFor(fresh, old), body })).keyId).toBe('new');
      expect(calls.hmac).toBe(1);
    });

    it('reports the key that matched when only a later-listed one does', async () => {
      const { backend: counted, calls } = countingBackend(backend);
      const v = createVerifierWith({ secrets: [{ key: fresh, keyId: 'new' }, { key: old, keyId: 'old' }], now: at(T) }, counted);
      const other = newSecret();
      const result = await v.verify({ headers: headersFor(other, old), body });
      expect([result.keyId, result.keyIndex]).toEqual(['old', 1]);
      // Tried the new key, then the old one: the search began at the first slot, so nothing extra.
      expect(calls.hmac).toBe(2);
    });
  });

  describe('the signature header', () => {
    const secret = newSecret();
    const body = '{"type":"ping"}';
    const base = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(T) };

    it('INVALID_SIGNATURE_HEADER over 16 KiB, before any HMAC', async () => {
      const good = hmacEntry(secret, 'msg_1', String(T), body);
      const { backend: counted, calls } = countingBackend(backend);
      const v = createVerifierWith({ secrets: secret, now: at(T) }, counted);
      // Exactly 16384 characters in 2 entries: accepted.
      const filler = `v9,${'A'.repeat(16 * 1024 - good.length - 1 - 3)}`;
      const atLimit = `${good} ${filler}`;
      expect(atLimit.length).toBe(16384);
      expect((await v.verify({ headers: { ...base, 'webhook-signature': atLimit }, body })).keyIndex).toBe(0);
      calls.hmac = 0;
      const error = await rejection(v.verify({ headers: { ...base, 'webhook-signature': `${atLimit}A` }, body }), 'INVALID_SIGNATURE_HEADER');
      expect(error.status).toBe(400);
      expect(error.message).toBe('webhook-signature is 16385 characters long; the limit is 16384');
      expect(calls.hmac).toBe(0);
    });

    it('INVALID_SIGNATURE_HEADER with more than 64 entries, before any HMAC', async () => {
      const good = hmacEntry(secret, 'msg_1', String(T), body);
      const { backend: counted, calls } = countingBackend(backend);
      const v = createVerifierWith({ secrets: secret, now: at(T) }, counted);
      const sixtyFour = [...Array.from({ length: 63 }, (_, i) => `v1,${Buffer.alloc(32, i).toString('base64')}`), good].join(' ');
      expect((await v.verify({ headers: { ...base, 'webhook-signature': sixtyFour }, body })).keyIndex).toBe(0);
      calls.hmac = 0;
      const error = await rejection(v.verify({ headers: { ...base, 'webhook-signature': `v1,AAAA ${sixtyFour}` }, body }), 'INVALID_SIGNATURE_HEADER');
      expect(error.message).toBe('webhook-signature has 65 entries; the limit is 64');
      expect(calls.hmac).toBe(0);
    });

    it.each([
      ['two spaces', (good: string) => `v1,AAAA  ${good}`],
      ['a leading space', (good: string) => ` ${good}`],
      ['a trailing space', (good: string) => `${good} `],
    ])('INVALID_SIGNATURE_HEADER for an empty entry (%s)', async (_case, make) => {
      const good = hmacEntry(secret, 'msg_1', String(T), body);
      const error = await rejection(verifier({ secrets: secret }).verify({ headers: { ...base, 'webhook-signature': make(good) }, body }), 'INVALID_SIGNATURE_HEADER');
      expect(error.message).toContain('empty entry');
    });

    it('INVALID_SIGNATURE_HEADER when present but empty, or when every entry is malformed', async () => {
      const v = verifier({ secrets: secret });
      const empty = await rejection(v.verify({ headers: { ...base, 'webhook-signature': '' }, body }), 'INVALID_SIGNATURE_HEADER');
      expect(empty.message).toBe('webhook-signature is present but empty');
      const garbage = await rejection(v.verify({ headers: { ...base, 'webhook-signature': 'garbage v1, ,abc' }, body }), 'INVALID_SIGNATURE_HEADER');
      expect(garbage.message).toContain("no entry of the form 'version,signature' (3 entries malformed)");
    });

    it('skips unknown versions and malformed entries and matches the good one', async () => {
      const good = hmacEntry(secret, 'msg_1', String(T), body);
      const header = `v2,AAAA garbage v1, ,x v1,${'B'.repeat(44)} ${good} v0,zzz`;
      const webhook = await verifier({ secrets: secret }).verify({ headers: { ...base, 'webhook-signature': header }, body });
      expect(webhook.scheme).toBe('v1');
      expect(webhook.keyIndex).toBe(0);
    });

    it('a refusal is handed back pending and rejects a turn later, so the caller\'s handler is in place first', async () => {
      // Rejected before the caller's await, it would go through the runtime's unhandled-rejection
      // bookkeeping (about the cost of a 1 KiB HMAC in Node). Pending when handed back, it is not.
      const v = verifier({ secrets: secret });
      const cases: [Record<string, string>, WebhookErrorCode][] = [
        [{ ...base, 'webhook-signature': `v1,${'A'.repeat(43)}=` }, 'SIGNATURE_MISMATCH'],
        [{ ...base, 'webhook-signature': '' }, 'INVALID_SIGNATURE_HEADER'],
        [{ 'webhook-timestamp': String(T) }, 'MISSING_ID'],
      ];
      for (const [headers, code] of cases) {
        const refused = v.verify({ headers, body });
        expect(inspect(refused)).toBe('Promise { <pending> }');
        let settled = false;
        const watched = refused.then(
          () => (settled = true),
          () => (settled = true),
        );
        await Promise.resolve();
        await Promise.resolve();
        // WebCrypto's MAC arrives later; every other refusal is known at once.
        expect(settled).toBe(code !== 'SIGNATURE_MISMATCH' || backend.synchronousHmac);
        await watched;
        await rejection(refused, code);
      }
    });

    it('SIGNATURE_MISMATCH says what was tried, and never the expected signature', async () => {
      const others = [newSecret(), newSecret()];
      const v = verifier({ secrets: [secret, ...others] });
      const header = `v1,${'A'.repeat(43)}= v1,${'B'.repeat(43)}= v2,xyz garbage`;
      const error = await rejection(v.verify({ headers: { ...base, 'webhook-signature': header }, body }), 'SIGNATURE_MISMATCH');
      expect(error.status).toBe(401);
      expect(error.message).toBe(
        'no signature matched: 2 v1 entries tried against 3 HMAC secrets; 1 entry of other versions ignored; 1 malformed entry skipped. ' +
          'Hint: check that the secret is current and that the body is the raw bytes received, not re-serialised JSON',
      );
      for (const key of [secret, ...others]) {
        expect(error.message).not.toContain(hmacEntry(key, 'msg_1', String(T), body).slice(3));
      }
    });

    it('SIGNATURE_MISMATCH hints when only other versions are present', async () => {
      const error = await rejection(
        verifier({ secrets: secret }).verify({ headers: { ...base, 'webhook-signature': 'v2,abc v3,def' }, body }),
        'SIGNATURE_MISMATCH',
      );
      expect(error.message).toBe(
        'no signature matched: 0 v1 entries tried against 1 HMAC secret; 2 entries of other versions ignored. ' +
          'Hint: the header has no v1 or v1a entry this receiver understands',
      );
    });

    it('a v1 entry with a signature of the wrong length or alphabet is a mismatch, not a crash', async () => {
      const v = verifier({ secrets: secret });
      for (const value of ['AAAA', '!!!!', 'é'.repeat(44), `${'A'.repeat(43)}=${'A'.repeat(100)}`]) {
        await rejection(v.verify({ headers: { ...base, 'webhook-signature': `v1,${value}` }, body }), 'SIGNATURE_MISMATCH');
      }
    });
  });

  describe('rotation', () => {
    const secrets = [newSecret(), newSecret(24), newSecret(64)];
    const withIds = secrets.map((key, i) => ({ key, keyId: `00000000-0000-4000-8000-00000000000${i}` }));

    it.each([0, 1, 2])('matches the secret in position %i and reports keyIndex and keyId', async (position) => {
      const signed = await sign(secrets[position]!);
      const webhook = await verifier({ secrets: withIds }).verify({ headers: signed.headers, body: '{"type":"ping"}' });
      expect(webhook.keyIndex).toBe(position);
      expect(webhook.keyId).toBe(`00000000-0000-4000-8000-00000000000${position}`);
      expect(webhook.scheme).toBe('v1');
    });

    it('reports keyIndex without keyId for secrets given without one, across mixed forms', async () => {
      const bytes = track(Uint8Array.from(Buffer.alloc(32, 7)));
      const bare = secrets[1]!.slice('whsec_'.length);
      const v = verifier({ secrets: [secrets[0]!, bare, { key: bytes, keyId: 'raw' }] });
      const byBare = await v.verify({ headers: (await sign(secrets[1]!)).headers, body: '{"type":"ping"}' });
      expect([byBare.keyIndex, byBare.keyId]).toEqual([1, undefined]);
      const byBytes = await v.verify({ headers: (await sign(bytes)).headers, body: '{"type":"ping"}' });
      expect([byBytes.keyIndex, byBytes.keyId]).toEqual([2, 'raw']);
    });

    it('accepts a message the sender signed with old and new secrets when only one is trusted', async () => {
      const retired = newSecret();
      const signed = await sign([retired, secrets[2]!]);
      expect(signed.signature.split(' ')).toHaveLength(2);
      const webhook = await verifier({ secrets: withIds }).verify({ headers: signed.headers, body: '{"type":"ping"}' });
      expect(webhook.keyIndex).toBe(2);
    });

    it('tries the last matched key first', async () => {
      const { backend: counted, calls } = countingBackend(backend);
      const v = createVerifierWith({ secrets: withIds, now: at(T) }, counted);
      expect(calls.importHmac).toBe(3);
      const bySlot = await Promise.all(secrets.map((s) => sign(s)));
      const run = async (slot: number) => {
        calls.hmac = 0;
        const webhook = await v.verify({ headers: bySlot[slot]!.headers, body: '{"type":"ping"}' });
        return [webhook.keyIndex, calls.hmac];
      };
      expect(await run(2)).toEqual([2, 3]); // 0, 1, 2
      expect(await run(2)).toEqual([2, 1]); // 2
      expect(await run(0)).toEqual([0, 2]); // 2, 0
      expect(await run(0)).toEqual([0, 1]); // 0
      expect(await run(1)).toEqual([1, 2]); // 0, 1
      expect(await run(1)).toEqual([1, 1]);
      calls.hmac = 0;
      await rejection(v.verify({ headers: { ...bySlot[0]!.headers, 'webhook-signature': `v1,${'A'.repeat(43)}=` }, body: '{"type":"ping"}' }), 'SIGNATURE_MISMATCH');
      expect(calls.hmac).toBe(3);
      // Keys were imported once, at construction, never per request.
      expect(calls.importHmac).toBe(3);
    });
  });

  describe('header shapes', () => {
    const secret = newSecret();
    const body = '{"type":"ping"}';

    it('accepts a Headers object', async () => {
      const signed = await sign(secret);
      const webhook = await verifier({ secrets: secret }).verify({ headers: new Headers(signed.headers), body });
      expect(webhook.id).toBe('msg_1');
    });

    it('accepts a plain object with names in any case', async () => {
      const signed = await sign(secret);
      for (const headers of [
        { 'Webhook-Id': signed.id, 'WEBHOOK-TIMESTAMP': String(signed.timestamp), 'webhook-Signature': signed.signature },
        { 'WEBHOOK-ID': signed.id, 'Webhook-Timestamp': String(signed.timestamp), 'WEBHOOK-SIGNATURE': signed.signature, other: undefined },
      ]) {
        expect((await verifier({ secrets: secret }).verify({ headers, body })).id).toBe('msg_1');
      }
    });

    it('joins string[] signature values, and in any position the good one matches', async () => {
      const signed = await sign(secret);
      const v = verifier({ secrets: secret });
      for (const values of [[`v1,${'A'.repeat(43)}=`, signed.signature], [signed.signature, 'v2,other']]) {
        const webhook = await v.verify({ headers: { ...signed.headers, 'webhook-signature': values }, body });
        expect(webhook.keyIndex).toBe(0);
      }
    });

    it('matches a repeated signature header that arrives joined with ", " (Headers, Node req.headers)', async () => {
      const signed = await sign(secret);
      const v = verifier({ secrets: secret });
      for (const order of [[signed.signature, 'v1,AAAA'], ['v1,AAAA', signed.signature]]) {
        const headers = new Headers({ 'webhook-id': signed.id, 'webhook-timestamp': String(signed.timestamp) });
        for (const value of order) headers.append('webhook-signature', value);
        expect(headers.get('webhook-signature')).toBe(order.join(', '));
        expect((await v.verify({ headers, body })).keyIndex).toBe(0);
        expect((await v.verify({ headers: { ...signed.headers, 'webhook-signature': order.join(', ') }, body })).keyIndex).toBe(0);
      }
    });

    it('accepts an id or timestamp repeated with the same value and refuses different values', async () => {
      const signed = await sign(secret);
      const v = verifier({ secrets: secret });
      const same = await v.verify({ headers: { ...signed.headers, 'webhook-id': ['msg_1', 'msg_1'], 'webhook-timestamp': [String(T), String(T)] }, body });
      expect(same.id).toBe('msg_1');
      const id = await rejection(v.verify({ headers: { ...signed.headers, 'webhook-id': ['msg_1', 'msg_2'] }, body }), 'MISSING_ID');
      expect(id.message).toBe('webhook-id appears 2 times with different values; a message has exactly one');
      const ts = await rejection(v.verify({ headers: { ...signed.headers, 'webhook-timestamp': [String(T), String(T + 1)] }, body }), 'INVALID_TIMESTAMP');
      expect(ts.message).toBe('webhook-timestamp appears 2 times with different values; a message has exactly one');
      // Two spellings of one name in a plain object are the same header repeated.
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-id': undefined, 'Webhook-Id': 'msg_1', 'WEBHOOK-ID': 'msg_2' }, body }), 'MISSING_ID');
    });

    it('accepts iterables: an array of pairs (with a repeated signature) and a Map', async () => {
      const signed = await sign(secret);
      const v = verifier({ secrets: secret });
      const pairs: [string, string][] = [
        ['Content-Type', 'application/json'],
        ['Webhook-Id', signed.id],
        ['Webhook-Timestamp', String(signed.timestamp)],
        ['Webhook-Signature', 'v1,AAAA'],
        ['webhook-signature', signed.signature],
      ];
      expect((await v.verify({ headers: pairs, body })).keyIndex).toBe(0);
      expect((await v.verify({ headers: new Map(Object.entries(signed.headers)), body })).keyIndex).toBe(0);
      expect((await v.verify({ headers: Object.entries(signed.headers) as [string, string][], body })).keyIndex).toBe(0);
      await rejection(v.verify({ headers: [...pairs, ['webhook-id', 'msg_2']], body }), 'MISSING_ID');
    });

    it('accepts svix-* headers where webhook-* are absent', async () => {
      const signed = await sign(secret);
      const svix = { 'svix-id': signed.id, 'svix-timestamp': String(signed.timestamp), 'svix-signature': signed.signature };
      const v = verifier({ secrets: secret });
      expect((await v.verify({ headers: svix, body })).id).toBe('msg_1');
      expect((await v.verify({ headers: new Headers(svix), body })).id).toBe('msg_1');
      const { 'svix-id': _id, ...noId } = svix;
      const missing = await rejection(v.verify({ headers: noId, body }), 'MISSING_ID');
      expect(missing.message).toContain('svix-id is accepted too');
    });

    it('prefers webhook-* when both webhook-* and svix-* are present', async () => {
      const signed = await sign(secret);
      const v = verifier({ secrets: secret });
      const wrongSvix = { 'svix-id': 'msg_other', 'svix-timestamp': String(T - 10_000), 'svix-signature': 'v1,AAAA' };
      const webhook = await v.verify({ headers: { ...signed.headers, ...wrongSvix }, body });
      expect(webhook.id).toBe('msg_1');
      // Good svix-*, forged webhook-*: the webhook-* signature is the one checked.
      const goodSvix = { 'svix-id': signed.id, 'svix-timestamp': String(signed.timestamp), 'svix-signature': signed.signature };
      await rejection(v.verify({ headers: { ...goodSvix, ...signed.headers, 'webhook-signature': `v1,${'A'.repeat(43)}=` }, body }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers: { ...goodSvix, ...signed.headers, 'webhook-timestamp': String(T - 10_000) }, body }), 'TIMESTAMP_TOO_OLD');
    });
  });

  describe('body shapes', () => {
    const secret = newSecret();

    it('accepts string, Uint8Array, Buffer, ArrayBuffer and a view into a larger buffer', async () => {
      const text = '{"type":"invoice.paid","amount":100}';
      const signed = await sign(secret, text);
      const v = verifier({ secrets: secret });
      const bytes = new TextEncoder().encode(text);
      const larger = new Uint8Array(bytes.length + 20);
      larger.set(bytes, 10);
      for (const body of [text, bytes, Buffer.from(text), bytes.slice().buffer, larger.subarray(10, 10 + bytes.length)]) {
        const webhook = await v.verify({ headers: signed.headers, body });
        expect(webhook.text()).toBe(text);
        expect(Buffer.from(webhook.body).equals(Buffer.from(bytes))).toBe(true);
      }
      await rejection(v.verify({ headers: signed.headers, body: larger }), 'SIGNATURE_MISMATCH');
    });

    it('verifies non-ASCII text as its UTF-8 bytes, given as a string or as bytes', async () => {
      const text = '{"name":"Zoë","city":"Kraków","emoji":"🚀","jp":"日本語"}';
      const signedString = await sign(secret, text);
      const signedBytes = await sign(secret, new TextEncoder().encode(text));
      expect(signedString.signature).toBe(signedBytes.signature);
      const v = verifier({ secrets: secret });
      const webhook = await v.verify({ headers: signedString.headers, body: Buffer.from(text, 'utf8') });
      expect(webhook.json()).toEqual({ name: 'Zoë', city: 'Kraków', emoji: '🚀', jp: '日本語' });
      expect(webhook.body.byteLength).toBe(Buffer.byteLength(text));
      // The same text in Latin-1 bytes is other bytes.
      await rejection(v.verify({ headers: signedString.headers, body: Buffer.from(text, 'latin1') }), 'SIGNATURE_MISMATCH');
    });

    it('verifies binary bodies byte for byte, including invalid UTF-8', async () => {
      const binary = Uint8Array.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a, 0x00, 0xed, 0xa0, 0x80]);
      const signed = await sign(secret, binary);
      const v = verifier({ secrets: secret });
      const webhook = await v.verify({ headers: signed.headers, body: binary.slice().buffer });
      expect([...webhook.body]).toEqual([...binary]);
      expect(webhook.text()).toContain('\uFFFD');
      // As text it would be altered by decoding, so a string body of it does not match.
      await rejection(v.verify({ headers: signed.headers, body: new TextDecoder().decode(binary) }), 'SIGNATURE_MISMATCH');
    });

    it('verifies an empty body', async () => {
      const signed = await sign(secret, '');
      const webhook = await verifier({ secrets: secret }).verify({ headers: signed.headers, body: new Uint8Array(0) });
      expect(webhook.body.byteLength).toBe(0);
      expect(webhook.text()).toBe('');
    });

    it('text() and json() read the verified bytes; json() on a body that is not JSON throws INVALID_PAYLOAD (400), the SyntaxError as its cause', async () => {
      for (const body of ['not json {', '']) {
        const signed = await sign(secret, body);
        const webhook = await verifier({ secrets: secret }).verify({ headers: signed.headers, body });
        expect(webhook.text()).toBe(body);
        expect(webhook.text()).toBe(body);
        let caught: unknown;
        try {
          webhook.json();
        } catch (error) {
          caught = error;
        }
        expect(caught).toBeInstanceOf(WebhookError);
        expect(caught).toMatchObject({ code: 'INVALID_PAYLOAD', status: 400, message: 'the payload is not valid JSON' });
        // The parser's own message (which quotes the body) stays in the cause, for the log.
        expect((caught as Error).cause).toBeInstanceOf(SyntaxError);
        expect((caught as Error).message).not.toContain(body || '\u0000');
      }
      const typed = await verifier({ secrets: secret }).verify({ headers: (await sign(secret, '[1,{"a":null}]')).headers, body: '[1,{"a":null}]' });
      expect(typed.json<[number, { a: null }]>()).toEqual([1, { a: null }]);
    });

    it('BODY_UNAVAILABLE (500) for a parsed or missing body, saying how to pass the raw bytes', async () => {
      const signed = await sign(secret);
      const v = verifier({ secrets: secret });
      const cases: [unknown, string][] = [
        [JSON.parse('{"type":"ping"}'), 'a parsed object'],
        [[1, 2], 'a parsed array'],
        [42, 'a parsed number'],
        [undefined, 'no body (undefined)'],
        [null, 'no body (null)'],
      ];
      for (const [body, what] of cases) {
        const error = await rejection(v.verify({ headers: signed.headers, body } as unknown as WebhookInput), 'BODY_UNAVAILABLE');
        expect(error.status).toBe(500);
        // The remote caller learns the code and that much; how the server is built is the hint's.
        expect(error.message).toBe('the server could not read the raw request body, so the signature cannot be checked');
        expect(error.hint).toMatch(new RegExp(`^verify was given ${what.replace(/[()]/g, '\\$&')} instead of the raw bytes received`));
        expect(error.hint).toContain('express.raw({ type: "*/*" })');
      }
      await expect(v.verify(undefined as unknown as WebhookInput)).rejects.toThrow(new TypeError('verify needs { headers, body }'));
    });

    it('MISSING_ID for an id longer than MAX_ID_LENGTH, before any HMAC', async () => {
      const { backend: counted, calls } = countingBackend(backend);
      const v = createVerifierWith({ secrets: secret, now: at(T) }, counted);
      const atLimit = 'i'.repeat(MAX_ID_LENGTH);
      const ok = await v.verify({ headers: { 'webhook-id': atLimit, 'webhook-timestamp': String(T), 'webhook-signature': hmacEntry(secret, atLimit, String(T), 'x') }, body: 'x' });
      expect(ok.id).toBe(atLimit);
      calls.hmac = 0;
      const long = `${atLimit}i`;
      const error = await rejection(
        v.verify({ headers: { 'webhook-id': long, 'webhook-timestamp': String(T), 'webhook-signature': hmacEntry(secret, long, String(T), 'x') }, body: 'x' }),
        'MISSING_ID',
      );
      expect(error.message).toBe(`webhook-id is ${MAX_ID_LENGTH + 1} characters long; the limit is ${MAX_ID_LENGTH}`);
      expect(calls.hmac).toBe(0);
    });

    it('PAYLOAD_TOO_LARGE (413) past maxBodyBytes, counted in bytes', async () => {
      const v = verifier({ secrets: secret, maxBodyBytes: 10 });
      const ten = await sign(secret, '0123456789');
      expect((await v.verify({ headers: ten.headers, body: '0123456789' })).body.byteLength).toBe(10);
      const eleven = await sign(secret, '0123456789A');
      const error = await rejection(v.verify({ headers: eleven.headers, body: '0123456789A' }), 'PAYLOAD_TOO_LARGE');
      expect(error.status).toBe(413);
      expect(error.message).toBe('request body is 11 bytes, over the limit of 10 bytes (maxBodyBytes)');
      // Six characters, twelve bytes.
      const accented = await sign(secret, 'éééééé');
      await rejection(v.verify({ headers: accented.headers, body: 'éééééé' }), 'PAYLOAD_TOO_LARGE');
    });
  });

  describe('the timestamp window', () => {
    const secret = newSecret();

    it('accepts exactly 300 s old and new, refuses 301', async () => {
      const signed = await sign(secret);
      const input = { headers: signed.headers, body: '{"type":"ping"}' };
      const make = (nowMs: number) => createVerifierWith({ secrets: secret, now: () => nowMs }, backend);
      expect((await make((T + 300) * 1000).verify(input)).id).toBe('msg_1');
      expect((await make((T + 300) * 1000 + 999).verify(input)).id).toBe('msg_1');
      expect((await make((T - 300) * 1000).verify(input)).id).toBe('msg_1');
      const old = await rejection(make((T + 301) * 1000).verify(input), 'TIMESTAMP_TOO_OLD');
      expect(old.status).toBe(401);
      expect(old.message).toBe(
        'webhook-timestamp is 301 s in the past; the tolerance is 300 s (a replay, a late retry with an old signature, or a slow clock)',
      );
      const early = await rejection(make((T - 301) * 1000).verify(input), 'TIMESTAMP_TOO_NEW');
      expect(early.status).toBe(401);
      expect(early.message).toBe("webhook-timestamp is 301 s in the future; the tolerance is 300 s (check the sender's and this machine's clocks)");
    });

    it('honours a custom tolerance', async () => {
      const signed = await sign(secret);
      const input = { headers: signed.headers, body: '{"type":"ping"}' };
      const make = (offset: number) => createVerifierWith({ secrets: secret, toleranceSeconds: 10, now: at(T + offset) }, backend);
      expect((await make(10).verify(input)).id).toBe('msg_1');
      expect((await make(-10).verify(input)).id).toBe('msg_1');
      expect((await rejection(make(11).verify(input), 'TIMESTAMP_TOO_OLD')).message).toContain('11 s in the past; the tolerance is 10 s');
      expect((await rejection(make(-11).verify(input), 'TIMESTAMP_TOO_NEW')).message).toContain('11 s in the future; the tolerance is 10 s');
      const day = createVerifierWith({ secrets: secret, toleranceSeconds: 86_400, now: at(T + 86_000) }, backend);
      expect((await day.verify(input)).id).toBe('msg_1');
    });

    it('checks the window before any signature work, so a stale forgery reads as stale', async () => {
      const { backend: counted, calls } = countingBackend(backend);
      const v = createVerifierWith({ secrets: secret, now: at(T + 3600) }, counted);
      await rejection(
        v.verify({ headers: { 'webhook-id': 'msg_1', 'webhook-timestamp': String(T), 'webhook-signature': `v1,${'A'.repeat(43)}=` }, body: 'x' }),
        'TIMESTAMP_TOO_OLD',
      );
      expect(calls.hmac).toBe(0);
    });

    it('refuses a 12-digit timestamp as too new, and a clock that is not a number with a TypeError', async () => {
      const signed = await sign(secret);
      await rejection(
        verifier({ secrets: secret }).verify({ headers: { ...signed.headers, 'webhook-timestamp': '999999999999' }, body: '{"type":"ping"}' }),
        'TIMESTAMP_TOO_NEW',
      );
      const broken = createVerifierWith({ secrets: secret, now: () => Number.NaN, unsigned: 'accept' }, backend);
      await expect(broken.verify({ headers: signed.headers, body: '{"type":"ping"}' })).rejects.toThrow(
        new TypeError('now() returned NaN; it must return epoch milliseconds (like Date.now())'),
      );
      // Also where no window is checked: an unsigned request without a timestamp is stamped with the clock.
      await expect(broken.verify({ headers: { 'webhook-id': 'msg_1' }, body: '' })).rejects.toThrow(
        new TypeError('now() returned NaN; it must return epoch milliseconds (like Date.now())'),
      );
      const textClock = createVerifierWith({ secrets: secret, now: (() => '1614265330000') as unknown as () => number }, backend);
      await expect(textClock.verify({ headers: signed.headers, body: '{"type":"ping"}' })).rejects.toThrow(
        new TypeError('now() returned a string; it must return epoch milliseconds (like Date.now())'),
      );
    });
  });

  describe('unsigned requests', () => {
    const secret = newSecret();

    it("with unsigned: 'accept', a request without signature or timestamp passes as signed: false", async () => {
      const v = createVerifierWith({ secrets: secret, unsigned: 'accept', now: () => T * 1000 + 123 }, backend);
      const webhook = await v.verify({ headers: { 'webhook-id': 'msg_unsigned' }, body: '{"a":1}' });
      expect(webhook).toMatchObject({ id: 'msg_unsigned', signed: false, scheme: undefined, keyIndex: undefined, keyId: undefined });
      expect(webhook.timestamp.getTime()).toBe(T * 1000 + 123);
      expect(webhook.json()).toEqual({ a: 1 });
    });

    it("with unsigned: 'accept', a present timestamp is still checked", async () => {
      const v = verifier({ secrets: secret, unsigned: 'accept' });
      const fresh = await v.verify({ headers: { 'webhook-id': 'msg_u', 'webhook-timestamp': String(T - 5) }, body: '' });
      expect(fresh.signed).toBe(false);
      expect(fresh.timestamp.getTime()).toBe((T - 5) * 1000);
      await rejection(v.verify({ headers: { 'webhook-id': 'msg_u', 'webhook-timestamp': String(T - 301) }, body: '' }), 'TIMESTAMP_TOO_OLD');
      await rejection(v.verify({ headers: { 'webhook-id': 'msg_u', 'webhook-timestamp': String(T + 301) }, body: '' }), 'TIMESTAMP_TOO_NEW');
      await rejection(v.verify({ headers: { 'webhook-id': 'msg_u', 'webhook-timestamp': '1614265330abc' }, body: '' }), 'INVALID_TIMESTAMP');
    });

    it("with unsigned: 'accept', the id is still required", async () => {
      const v = verifier({ secrets: secret, unsigned: 'accept' });
      await rejection(v.verify({ headers: {}, body: '' }), 'MISSING_ID');
      await rejection(v.verify({ headers: { 'webhook-timestamp': String(T) }, body: '' }), 'MISSING_ID');
    });

    it("with unsigned: 'accept', a present signature that does not match is SIGNATURE_MISMATCH, never unsigned", async () => {
      const v = verifier({ secrets: secret, unsigned: 'accept' });
      const signed = await sign(secret);
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-signature': `v1,${'A'.repeat(43)}=` }, body: '{"type":"ping"}' }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers: signed.headers, body: '{"type":"pong"}' }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-signature': 'v2,abc' }, body: '{"type":"ping"}' }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-signature': '' }, body: '{"type":"ping"}' }), 'INVALID_SIGNATURE_HEADER');
      // A signature without a timestamp cannot be checked.
      await rejection(v.verify({ headers: { 'webhook-id': 'msg_1', 'webhook-signature': signed.signature }, body: '{"type":"ping"}' }), 'MISSING_TIMESTAMP');
      // And a good signature is reported as signed.
      const webhook = await v.verify({ headers: signed.headers, body: '{"type":"ping"}' });
      expect([webhook.signed, webhook.scheme, webhook.keyIndex]).toEqual([true, 'v1', 0]);
    });

    it("by default (unsigned: 'reject'), no signature is MISSING_SIGNATURE even with every other header valid", async () => {
      await rejection(verifier({ secrets: secret, unsigned: 'reject' }).verify({ headers: { 'webhook-id': 'msg_1', 'webhook-timestamp': String(T) }, body: '' }), 'MISSING_SIGNATURE');
      await rejection(verifier({ secrets: secret }).verify({ headers: { 'webhook-id': 'msg_1' }, body: '' }), 'MISSING_TIMESTAMP');
    });
  });

  describe('v1a (Ed25519)', () => {
    it('round trip: generateKeyPair, sign with whsk_, verify with whpk_', async () => {
      const { secretKey, publicKey } = await generateKeyPair();
      track(secretKey);
      const hmac = newSecret();
      const signed = await sign(secretKey, '{"type":"ed"}');
      expect(signed.signature).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
      const v = verifier({ secrets: [hmac, { key: publicKey, keyId: 'ed-key' }] });
      const webhook = await v.verify({ headers: signed.headers, body: '{"type":"ed"}' });
      expect([webhook.scheme, webhook.keyIndex, webhook.keyId, webhook.signed]).toEqual(['v1a', 1, 'ed-key', true]);
    });

    it('refuses a tampered body, id, timestamp or signature', async () => {
      const { secretKey, publicKey } = await generateKeyPair();
      track(secretKey);
      const signed = await sign(secretKey, '{"type":"ed"}');
      const v = verifier({ secrets: publicKey });
      await rejection(v.verify({ headers: signed.headers, body: '{"type":"eD"}' }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-id': 'msg_2' }, body: '{"type":"ed"}' }), 'SIGNATURE_MISMATCH');
      await rejection(v.verify({ headers: { ...signed.headers, 'webhook-timestamp': String(T - 1) }, body: '{"type":"ed"}' }), 'SIGNATURE_MISMATCH');
      const raw = Buffer.from(signed.signature.slice(4), 'base64');
      raw[10] = raw[10]! ^ 1;
      const flipped = await rejection(
        v.verify({ headers: { ...signed.headers, 'webhook-signature': `v1a,${raw.toString('base64')}` }, body: '{"type":"ed"}' }),
        'SIGNATURE_MISMATCH',
      );
      expect(flipped.message).toBe(
        'no signature matched: 0 v1 entries tried against 0 HMAC secrets; 1 v1a entry against 1 Ed25519 public key. ' +
          'Hint: check that the secret is current and that the body is the raw bytes received, not re-serialised JSON',
      );
      // Not base64, or not 64 bytes: skipped, so still a mismatch and not a crash.
      for (const value of ['!!!!', 'AAAA', raw.subarray(0, 63).toString('base64')]) {
        await rejection(v.verify({ headers: { ...signed.headers, 'webhook-signature': `v1a,${value}` }, body: '{"type":"ed"}' }), 'SIGNATURE_MISMATCH');
      }
    });

    it('checks each distinct v1a entry once, and at most max(MAX_V1A_ENTRIES, keys) well-formed ones: keys x max(2, keys) verifications', async () => {
      const { secretKey, publicKey } = await generateKeyPair();
      track(secretKey);
      const signed = await sign(secretKey, '{"type":"ed"}');
      const { backend: counted, calls } = countingBackend(backend);
      const v = createVerifierWith({ secrets: [publicKey, (await generateKeyPair()).publicKey], now: at(T) }, counted);
      const junk = (i: number) => `v1a,${Buffer.alloc(64, i + 1).toString('base64')}`;
      const send = (header: string) => v.verify({ headers: { ...signed.headers, 'webhook-signature': header }, body: '{"type":"ed"}' });
      // The same junk entry 40 times, then the real one: 1 distinct junk entry x 2 keys, then a match.
      expect((await send([...Array.from({ length: 40 }, () => junk(0)), signed.signature].join(' '))).scheme).toBe('v1a');
      expect(calls.ed25519Verify).toBe(3);
      calls.ed25519Verify = 0;
      expect((await send([...Array.from({ length: MAX_V1A_ENTRIES - 1 }, (_, i) => junk(i)), signed.signature].join(' '))).keyIndex).toBe(0);
      // Past the bound: the header is not refused, the entries past it are not checked, and the
      // work stays at keys x max(2, keys) = 4 whatever the header holds (62 distinct entries here).
      for (const count of [MAX_V1A_ENTRIES, 62]) {
        calls.ed25519Verify = 0;
        const error = await rejection(send([...Array.from({ length: count }, (_, i) => junk(i)), signed.signature].join(' ')), 'SIGNATURE_MISMATCH');
        expect(error.message).toContain(`${count + 1} v1a entries (only the first 2 well-formed ones checked) against 2 Ed25519 public keys`);
        expect([calls.ed25519Verify, calls.hmac]).toEqual([4, 0]);
      }
      // Malformed entries cost nothing and do not use up the bound.
      calls.ed25519Verify = 0;
      expect((await send(['v1a,!!!!', 'v1a,AAAA', junk(1), signed.signature].join(' '))).keyIndex).toBe(0);
      expect(calls.ed25519Verify).toBe(3);
      // Without public keys configured, v1a entries are ignored, however many.
      const hmac = newSecret();
      const over = Array.from({ length: 20 }, (_, i) => junk(i)).join(' ');
      const both = `${over} ${hmacEntry(hmac, signed.id, String(signed.timestamp), '{"type":"ed"}')}`;
      expect((await verifier({ secrets: hmac }).verify({ headers: { ...signed.headers, 'webhook-signature': both }, body: '{"type":"ed"}' })).scheme).toBe('v1');
    });

    it('with three public keys the bound is three entries: the third distinct entry is still checked, the fourth is not', async () => {
      const { secretKey, publicKey } = await generateKeyPair();
      track(secretKey);
      const signed = await sign(secretKey, '{"type":"ed"}');
      const { backend: counted, calls } = countingBackend(backend);
      const keys = [(await generateKeyPair()).publicKey, (await generateKeyPair()).publicKey, publicKey];
      const v = createVerifierWith({ secrets: keys, now: at(T) }, counted);
      const junk = (i: number) => `v1a,${Buffer.alloc(64, i + 1).toString('base64')}`;
      const send = (header: string) => v.verify({ headers: { ...signed.headers, 'webhook-signature': header }, body: '{"type":"ed"}' });
      // Two junk entries, then the real one, third: within max(2, 3) = 3, so it is checked.
      expect((await send([junk(0), junk(1), signed.signature].join(' '))).keyIndex).toBe(2);
      calls.ed25519Verify = 0;
      // Three junk entries first: the real one is fourth, past the bound; 3 x 3 checks at most.
      const error = await rejection(send([junk(0), junk(1), junk(2), signed.signature].join(' ')), 'SIGNATURE_MISMATCH');
      expect(error.message).toContain('4 v1a entries (only the first 3 well-formed ones checked) against 3 Ed25519 public keys');
      expect(calls.ed25519Verify).toBe(9);
    });

    it('accepts an honest sender mid-rotation: old and new key entries, against one public key (two verifications at most)', async () => {
      const older = await generateKeyPair();
      const newer = await generateKeyPair();
      track(older.secretKey);
      track(newer.secretKey);
      const signed = await signWebhookWith({ secret: [older.secretKey, newer.secretKey], body: '{"type":"ed"}', timestamp: T }, backend);
      for (const [trusted, index] of [[older.publicKey, 0], [newer.publicKey, 0]] as const) {
        const { backend: counted, calls } = countingBackend(backend);
        const webhook = await createVerifierWith({ secrets: trusted, now: at(T) }, counted).verify({ headers: signed.headers, body: '{"type":"ed"}' });
        expect(webhook.keyIndex).toBe(index);
        expect(calls.ed25519Verify).toBeLessThanOrEqual(2);
      }
    });

    it('another key pair does not verify it; with two public keys the right one is reported', async () => {
      const a = await generateKeyPair();
      const b = await generateKeyPair();
      track(a.secretKey);
      track(b.secretKey);
      const signed = await sign(b.secretKey);
      await rejection(verifier({ secrets: a.publicKey }).verify({ headers: signed.headers, body: '{"type":"ping"}' }), 'SIGNATURE_MISMATCH');
      const webhook = await verifier({ secrets: [a.publicKey, b.publicKey] }).verify({ headers: signed.headers, body: '{"type":"ping"}' });
      expect(webhook.keyIndex).toBe(1);
    });

    it('v1a entries with only HMAC keys, and v1 entries with only public keys, say so', async () => {
      const { secretKey, publicKey } = await generateKeyPair();
      track(secretKey);
      const hmac = newSecret();
      const ed = await sign(secretKey);
      const onlyHmac = await rejection(verifier({ secrets: hmac }).verify({ headers: ed.headers, body: '{"type":"ping"}' }), 'SIGNATURE_MISMATCH');
      expect(onlyHmac.message).toBe(
        'no signature matched: 0 v1 entries tried against 1 HMAC secret; 1 v1a entry against 0 Ed25519 public keys. ' +
          "Hint: the header carries v1a (Ed25519) signatures but no 'whpk_' public key is configured",
      );
      const v1 = await sign(hmac);
      const onlyPublic = await rejection(verifier({ secrets: publicKey }).verify({ headers: v1.headers, body: '{"type":"ping"}' }), 'SIGNATURE_MISMATCH');
      expect(onlyPublic.message).toBe(
        'no signature matched: 1 v1 entry tried against 0 HMAC secrets; 0 v1a entries against 1 Ed25519 public key. ' +
          "Hint: the header carries v1 (HMAC) signatures but only 'whpk_' public keys are configured",
      );
    });

    it('a message signed v1 and v1a passes with either kind of key', async () => {
      const { secretKey, publicKey } = await generateKeyPair();
      track(secretKey);
      const hmac = newSecret();
      const both = await sign([hmac, secretKey]);
      expect(both.signature).toMatch(/^v1,\S{44} v1a,\S{88}$/);
      expect((await verifier({ secrets: publicKey }).verify({ headers: both.headers, body: '{"type":"ping"}' })).scheme).toBe('v1a');
      expect((await verifier({ secrets: hmac }).verify({ headers: both.headers, body: '{"type":"ping"}' })).scheme).toBe('v1');
    });
  });

  describe('verifyRequest', () => {
    const secret = newSecret();
    const url = 'http://127.0.0.1/webhooks';

    /** A body stream that yields `chunk`-byte pieces, at most `max` of them, counting reads. */
    function stream(chunk: number, max: number) {
      const state = { pulls: 0, cancelled: false };
      const body = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            state.pulls++;
            if (state.pulls > max) controller.close();
            else controller.enqueue(new Uint8Array(chunk).fill(0x61));
          },
          cancel() {
            state.cancelled = true;
          },
        },
        { highWaterMark: 0 },
      );
      return { body, state };
    }

    it('verifies a Request and returns its exact bytes', async () => {
      const text = '{"type":"request","emoji":"🚀"}';
      const signed = await sign(secret, text);
      const webhook = await verifier({ secrets: secret }).verifyRequest(new Request(url, { method: 'POST', headers: signed.headers, body: text }));
      expect(webhook.text()).toBe(text);
      expect(webhook.keyIndex).toBe(0);
    });

    it('verifies a streamed body of several chunks', async () => {
      const { body, state } = stream(1000, 5);
      const expected = 'a'.repeat(5000);
      const signed = await sign(secret, expected);
      const request = new Request(url, { method: 'POST', headers: signed.headers, body, duplex: 'half' } as RequestInit);
      const webhook = await verifier({ secrets: secret }).verifyRequest(request);
      expect(webhook.text()).toBe(expected);
      expect(state.pulls).toBe(6);
    });

    it('PAYLOAD_TOO_LARGE from content-length, without reading the body', async () => {
      const signed = await sign(secret, 'x');
      const { body, state } = stream(1024, 100);
      const request = new Request(url, { method: 'POST', headers: { ...signed.headers, 'content-length': '5000' }, body, duplex: 'half' } as RequestInit);
      const error = await rejection(verifier({ secrets: secret, maxBodyBytes: 4096 }).verifyRequest(request), 'PAYLOAD_TOO_LARGE');
      expect(error.message).toBe('request body is 5000 bytes, over the limit of 4096 bytes (maxBodyBytes)');
      expect(state.pulls).toBe(0);
    });

    it('PAYLOAD_TOO_LARGE for a streamed body without content-length, stopping at the limit', async () => {
      const signed = await sign(secret, 'x');
      const { body, state } = stream(1024, 100);
      const request = new Request(url, { method: 'POST', headers: signed.headers, body, duplex: 'half' } as RequestInit);
      expect(request.headers.get('content-length')).toBeNull();
      const error = await rejection(verifier({ secrets: secret, maxBodyBytes: 4096 }).verifyRequest(request), 'PAYLOAD_TOO_LARGE');
      expect(error.status).toBe(413);
      expect(error.message).toBe('request body is more than the limit of 4096 bytes (maxBodyBytes)');
      expect(state.pulls).toBe(5);
      expect(state.cancelled).toBe(true);
    });

    it('reads a declared-length body with arrayBuffer(), never building its stream (the body getter)', async () => {
      const body = '{"type":"a"}';
      const signed = await sign(secret, body);
      const request = new Request(url, { method: 'POST', headers: { ...signed.headers, 'content-length': String(body.length) }, body });
      const touched: string[] = [];
      // Lazy requests (@hono/node-server's) build a web stream when `body` is read; the fast path
      // must not read it.
      const watched = new Proxy(request, {
        get(target, key) {
          if (key === 'body') touched.push('body');
          const value: unknown = Reflect.get(target, key, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const webhook = await verifier({ secrets: secret }).verifyRequest(watched);
      expect([webhook.text(), touched]).toEqual([body, []]);
    });

    it('BODY_UNAVAILABLE for a declared-length body locked by a reader, not a bare TypeError', async () => {
      const body = '{"a":1}';
      const signed = await sign(secret, body);
      const locked = new Request(url, { method: 'POST', headers: { ...signed.headers, 'content-length': String(body.length) }, body });
      locked.body!.getReader();
      await rejection(verifier({ secrets: secret }).verifyRequest(locked), 'BODY_UNAVAILABLE');
    });

    it('passes on the error of a declared-length body that fails while read (the client went away)', async () => {
      const signed = await sign(secret, 'x');
      const failure = new Error('connection reset');
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new Uint8Array(10));
          controller.error(failure);
        },
      });
      const request = new Request(url, { method: 'POST', headers: { ...signed.headers, 'content-length': '100' }, body, duplex: 'half' } as RequestInit);
      await expect(verifier({ secrets: secret }).verifyRequest(request)).rejects.toBe(failure);
    });

    // A body that came over HTTP cannot outrun its content-length (the parser frames it by that
    // length), so the declared-length path reads it whole; a Request built by hand with a length
    // that does not hold is still refused once read.
    it('PAYLOAD_TOO_LARGE when content-length understates the body', async () => {
      const signed = await sign(secret, 'x');
      const { body } = stream(1024, 100);
      const request = new Request(url, { method: 'POST', headers: { ...signed.headers, 'content-length': '10' }, body, duplex: 'half' } as RequestInit);
      await rejection(verifier({ secrets: secret, maxBodyBytes: 4096 }).verifyRequest(request), 'PAYLOAD_TOO_LARGE');
    });

    it('refuses stale or unsigned requests before reading the body', async () => {
      const { body, state } = stream(1024, 100);
      const request = new Request(url, {
        method: 'POST',
        headers: { 'webhook-id': 'msg_1', 'webhook-timestamp': String(T - 3600), 'webhook-signature': 'v1,AAAA' },
        body,
        duplex: 'half',
      } as RequestInit);
      await rejection(verifier({ secrets: secret }).verifyRequest(request), 'TIMESTAMP_TOO_OLD');
      const unsigned = new Request(url, { method: 'POST', headers: { 'webhook-id': 'msg_1', 'webhook-timestamp': String(T) }, body: 'x' });
      await rejection(verifier({ secrets: secret }).verifyRequest(unsigned), 'MISSING_SIGNATURE');
      expect(state.pulls).toBe(0);
    });

    it('BODY_UNAVAILABLE (500) when the body was already read, or is locked by a reader', async () => {
      const signed = await sign(secret, '{"a":1}');
      const read = new Request(url, { method: 'POST', headers: signed.headers, body: '{"a":1}' });
      expect(await read.json()).toEqual({ a: 1 });
      const error = await rejection(verifier({ secrets: secret }).verifyRequest(read), 'BODY_UNAVAILABLE');
      expect(error.status).toBe(500);
      expect(error.hint).toContain('the request body was already read');
      expect(error.hint).toContain('Verify before reading the body');
      expect(error.message).not.toContain('request.json()');
      const locked = new Request(url, { method: 'POST', headers: signed.headers, body: '{"a":1}' });
      locked.body!.getReader();
      await rejection(verifier({ secrets: secret }).verifyRequest(locked), 'BODY_UNAVAILABLE');
    });

    it("a Request without a body verifies as empty (unsigned: 'accept' and signed)", async () => {
      const v = verifier({ secrets: secret, unsigned: 'accept' });
      const unsigned = await v.verifyRequest(new Request(url, { headers: { 'webhook-id': 'msg_get' } }));
      expect([unsigned.signed, unsigned.body.byteLength]).toEqual([false, 0]);
      const signed = await sign(secret, '');
      const webhook = await v.verifyRequest(new Request(url, { headers: signed.headers }));
      expect([webhook.signed, webhook.body.byteLength]).toEqual([true, 0]);
    });
  });
});

describe('the error table', () => {
  it('maps every code to its documented status', () => {
    expect(WEBHOOK_ERROR_STATUS).toEqual({
      MISSING_ID: 400,
      MISSING_TIMESTAMP: 400,
      INVALID_TIMESTAMP: 400,
      INVALID_SIGNATURE_HEADER: 400,
      MISSING_SIGNATURE: 401,
      SIGNATURE_MISMATCH: 401,
      TIMESTAMP_TOO_OLD: 401,
      TIMESTAMP_TOO_NEW: 401,
      PAYLOAD_TOO_LARGE: 413,
      INVALID_PAYLOAD: 400,
      INVALID_VERSION: 400,
      ENTITY_BUSY: 409,
      UNKNOWN_TENANT: 404,
      UNSUPPORTED_ENCODING: 415,
      PERMANENT_FAILURE: 422,
      BODY_UNAVAILABLE: 500,
      INVALID_NAMESPACE: 500,
      INVALID_TENANT_KEYS: 500,
      STORE_UNAVAILABLE: 503,
      INBOX_UNAVAILABLE: 503,
      KEYS_UNAVAILABLE: 503,
      UNSIGNED_LIMIT: 503,
    });
  });

  it('WebhookError carries code, status, name and cause; isWebhookError recognises copies', () => {
    const cause = new Error('root');
    const error = new WebhookError('SIGNATURE_MISMATCH', 'no', { cause });
    expect([error.code, error.status, error.name, error.message, error.cause]).toEqual(['SIGNATURE_MISMATCH', 401, 'WebhookError', 'no', cause]);
    expect(error).toBeInstanceOf(Error);
    expect(isWebhookError(error)).toBe(true);
    expect(isWebhookError({ name: 'WebhookError', code: 'MISSING_ID', status: 400, message: 'x' })).toBe(true);
    expect(isWebhookError({ name: 'WebhookError', code: 'NOT_A_CODE', status: 400 })).toBe(false);
    expect(isWebhookError({ name: 'Error', code: 'MISSING_ID', status: 400 })).toBe(false);
    expect(isWebhookError(new TypeError('x'))).toBe(false);
    expect(isWebhookError(null)).toBe(false);
  });
});

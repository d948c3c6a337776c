/**
 * The sender-bug diagnosis: each usual bug is made on purpose by a sender written with plain
 * node:crypto, and the assertion must name exactly that bug (and no other).
 */

import { createPrivateKey, sign as edSign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { defaultBackend, webCryptoBackend, type CryptoBackend } from '../../src/crypto.ts';
import { generateKeyPair } from '../../src/sign.ts';
import { DIAGNOSED_ENTRIES_PER_VERSION, diagnoseSignatures, diagnosisKeys, lenientBase64Decode } from '../../src/testing/diagnose.ts';
import { parseSignatureHeader } from '../../src/verify.ts';
import { WebhookAssertionError, assertSignedWebhook } from '../../src/testing/index.ts';
import { KEY_BYTES, OTHER_SECRET, SECRET, SECRET_B64, expectNoSecrets, hmac, nowSeconds, senderHeaders, type SenderInput } from './support.ts';

const BODY = '{"type":"invoice.paid","data":{"id":"in_42","amount":100}}';

async function diagnosed(input: SenderInput, secrets: Parameters<typeof assertSignedWebhook>[1]['secrets'] = SECRET): Promise<WebhookAssertionError> {
  const error = await assertSignedWebhook({ headers: senderHeaders(input), body: input.body }, { secrets }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WebhookAssertionError);
  const assertion = error as WebhookAssertionError;
  expectNoSecrets(assertion.message, [SECRET, OTHER_SECRET]);
  // Whatever the bug, the signature this body needs is never printed.
  expect(assertion.message).not.toContain(hmac(KEY_BYTES, input.id, input.timestamp, input.body));
  return assertion;
}

describe('the diagnosis names the sender bug that reproduces the signature', () => {
  const ts = String(nowSeconds());

  it('the secret used as UTF-8 text instead of base64-decoded', async () => {
    const error = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, key: SECRET_B64 });
    expect(error.code).toBe('SIGNATURE_MISMATCH');
    expect(error.findings).toEqual([
      "the sender used secrets[0] as UTF-8 text instead of base64-decoding it: the HMAC key must be the bytes that the base64 after 'whsec_' decodes to",
    ]);
    expect(error.message).toContain(`\nDiagnosis: ${error.findings[0]}.`);
  });

  it('the whsec_ prefix left in the key, used as text', async () => {
    const error = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, key: SECRET }, [{ key: OTHER_SECRET, keyId: 'a' }, { key: SECRET, keyId: 'b' }]);
    expect(error.findings).toEqual([
      `the sender left the 'whsec_' prefix in secrets[1] (keyId "b") and used the whole string as UTF-8 text: strip 'whsec_' and base64-decode the rest`,
    ]);
  });

  it("the whsec_ prefix left in before Buffer.from(secret, 'base64')", async () => {
    const error = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, key: Buffer.from(SECRET, 'base64') });
    expect(error.findings).toEqual([
      "the sender left the 'whsec_' prefix in secrets[0] before base64-decoding it (a lenient decoder such as Node's Buffer.from(secret, 'base64') reads 'whsec_' as data): strip the prefix first",
    ]);
  });

  it('the text-key bugs also for a secret configured as bare base64 or as bytes', async () => {
    const bare = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, key: SECRET_B64 }, SECRET_B64);
    expect(bare.findings).toHaveLength(1);
    expect(bare.findings[0]).toMatch(/^the sender used secrets\[0\] as UTF-8 text/);
    const bytes = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, key: SECRET }, new Uint8Array(KEY_BYTES));
    expect(bytes.findings).toHaveLength(1);
    expect(bytes.findings[0]).toMatch(/^the sender left the 'whsec_' prefix in secrets\[0\] and used the whole string/);
  });

  it('a millisecond timestamp in the signature while the header carries seconds', async () => {
    const error = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, signedTimestamp: `${ts}837` });
    expect(error.findings).toEqual([
      `the signature was made over the millisecond timestamp ${ts}837 while webhook-timestamp carries the seconds ${ts}: sign the same seconds value that is sent`,
    ]);
  });

  it('a millisecond timestamp in both the header and the signature', async () => {
    const ms = String(Date.now());
    const error = await diagnosed({ id: 'msg_1', timestamp: ms, body: BODY });
    expect(error.code).toBe('INVALID_TIMESTAMP');
    expect(error.message).toContain(
      'Diagnosis: the signature is valid for this id, timestamp and body with secrets[0]; the sender signed its millisecond timestamp consistently; ' +
        'it must use Unix seconds (Math.floor(Date.now() / 1000)) in both the header and the signature.',
    );
  });

  it('seconds signed, milliseconds sent', async () => {
    const ms = String(Date.now());
    const error = await diagnosed({ id: 'msg_1', timestamp: ms, body: BODY, signedTimestamp: ms.slice(0, -3) });
    expect(error.code).toBe('INVALID_TIMESTAMP');
    expect(error.findings).toEqual([
      `the signature was made over the seconds ${ms.slice(0, -3)}, but webhook-timestamp carries milliseconds (${ms}): send the seconds that were signed`,
    ]);
  });

  it('a timestamp changed after signing (a retry that re-stamped an old signature)', async () => {
    const error = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, signedTimestamp: String(Number(ts) - 42) });
    expect(error.findings).toEqual([
      `the signature was made for webhook-timestamp ${Number(ts) - 42}, 42 s before the one sent: the timestamp was changed after signing (a retry must sign again with its new timestamp)`,
    ]);
  });

  const tail = ': the bytes signed are not the bytes sent. Sign exactly the body that goes on the wire, and verify the raw bytes received';
  const reserialised: [string, string, string][] = [
    ['pretty-printed JSON signed, compact sent', JSON.stringify(JSON.parse(BODY), null, 2), 'JSON.stringify(JSON.parse(body), null, 2) (pretty-printed)'],
    ['4-space JSON signed', JSON.stringify(JSON.parse(BODY), null, 4), 'JSON.stringify(JSON.parse(body), null, 4) (pretty-printed)'],
    ['tab-indented JSON signed', JSON.stringify(JSON.parse(BODY), null, '\t'), "JSON.stringify(JSON.parse(body), null, '\\t') (pretty-printed)"],
    ['Python json.dumps signed', '{"type": "invoice.paid", "data": {"id": "in_42", "amount": 100}}', 'Python-style json.dumps (", " and ": " separators)'],
  ];
  for (const [name, signedBody, how] of reserialised) {
    it(`JSON re-serialised: ${name}`, async () => {
      const error = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, signedBody });
      expect(error.findings).toEqual([`the signature matches the body re-serialised as ${how}${tail}`]);
    });
  }

  it('JSON re-serialised after signing: signed with spaces, recorded compact by JSON.stringify(JSON.parse(body))', async () => {
    const sent = '{ "type": "ping",  "n": 1 }';
    const error = await diagnosed({ id: 'msg_1', timestamp: ts, body: '{"type":"ping","n":1}', signedBody: sent });
    // The recorded body is the compact one; the original layout cannot be rebuilt, and the
    // message says plainly that nothing reproduced it.
    expect(error.findings).toEqual([]);
    const recordedCompactSignedCompact = await diagnosed({ id: 'msg_1', timestamp: ts, body: '{ "type": "ping" }', signedBody: '{"type":"ping"}' });
    expect(recordedCompactSignedCompact.findings).toEqual([`the signature matches the body re-serialised as JSON.stringify(JSON.parse(body)) (compact)${tail}`]);
  });

  it('a trailing newline added or removed', async () => {
    const added = await diagnosed({ id: 'msg_1', timestamp: ts, body: `${BODY}\n`, signedBody: BODY });
    expect(added.findings).toEqual([`the signature matches the body without its trailing newline${tail}`]);
    const removed = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, signedBody: `${BODY}\n` });
    expect(removed.findings).toEqual([`the signature matches the body with a trailing newline added${tail}`]);
    const crlf = await diagnosed({ id: 'msg_1', timestamp: ts, body: 'plain text', signedBody: 'plain text\r\n' });
    expect(crlf.findings).toEqual([`the signature matches the body with a trailing CRLF added${tail}`]);
    const binary = Uint8Array.from([0xff, 0x00, 0x0a]);
    const binaryError = await diagnosed({ id: 'msg_1', timestamp: ts, body: binary, signedBody: binary.subarray(0, 2) });
    expect(binaryError.findings).toEqual([`the signature matches the body without its trailing newline${tail}`]);
  });

  it('signed for another id: the body id, an svix-id beside the webhook-id, or a missing value', async () => {
    const bodyId = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, signedId: 'in_42' });
    expect(bodyId.findings).toEqual([`the signature was made for the id "in_42" (the body's "data.id" field), not for webhook-id "msg_1": sign the id that is sent`]);

    const undefinedId = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, signedId: 'undefined' });
    expect(undefinedId.findings).toEqual([
      `the signature was made for the id "undefined" (a missing value interpolated as "undefined"), not for webhook-id "msg_1": sign the id that is sent`,
    ]);

    const headers = { ...senderHeaders({ id: 'msg_new', timestamp: ts, body: 'x', signedId: 'msg_old' }), 'svix-id': 'msg_old' };
    const error = await assertSignedWebhook({ headers, body: 'x' }, { secrets: SECRET }).then(() => undefined, (e: unknown) => e as WebhookAssertionError);
    expect(error?.findings).toEqual([`the signature was made for the id "msg_old" (the svix-id header), not for webhook-id "msg_new": sign the id that is sent`]);
  });

  it('a wrong secret: nothing reproduces it, and the message lists what was tried', async () => {
    const error = await diagnosed({ id: 'msg_1', timestamp: ts, body: BODY, key: Buffer.from(OTHER_SECRET.slice(6), 'base64') });
    expect(error.findings).toEqual([]);
    const line = error.message.split('\n').find((l) => l.startsWith('Diagnosis: '));
    expect(line).toBe(
      "Diagnosis: none of the usual sender bugs reproduces these signatures (tried: the secret used as UTF-8 text; the 'whsec_' prefix left in the key; " +
        `a millisecond timestamp in the signature; a timestamp changed after signing (±300 s); JSON re-serialised (compact, indented by 2, 4 or a tab, Python-style); ` +
        `a trailing newline added or removed; other ids (body's "data.id" field; a missing value interpolated as "undefined"; ` +
        `a missing value interpolated as "null"; an empty id)). Most likely the sender signs with another secret (a different destination's, or one rotated since), ` +
        'or the body changed in transit.',
    );
  });

  it('Ed25519 (v1a) signatures are diagnosed too', async () => {
    const { secretKey, publicKey } = await generateKeyPair();
    const seed = Buffer.from(secretKey.slice(5), 'base64').subarray(0, 32);
    const key = createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]), format: 'der', type: 'pkcs8' });
    const signature = edSign(null, Buffer.from(`msg_ed.${ts}.${JSON.stringify(JSON.parse(BODY), null, 2)}`), key).toString('base64');
    const headers = { 'webhook-id': 'msg_ed', 'webhook-timestamp': ts, 'webhook-signature': `v1a,${signature}` };
    const error = await assertSignedWebhook({ headers, body: BODY }, { secrets: { key: publicKey, keyId: 'ed' } }).then(() => undefined, (e: unknown) => e as WebhookAssertionError);
    expect(error?.code).toBe('SIGNATURE_MISMATCH');
    expect(error?.message).toContain('Keys tried: secrets[0] (keyId "ed"): v1a Ed25519 public key');
    expect(error?.findings).toEqual([`the signature matches the body re-serialised as JSON.stringify(JSON.parse(body), null, 2) (pretty-printed)${tail}`]);
  });

  it('gives the same findings on the WebCrypto backend (edge runtimes)', async () => {
    const cases: SenderInput[] = [
      { id: 'msg_1', timestamp: ts, body: BODY, key: SECRET_B64 },
      { id: 'msg_1', timestamp: ts, body: BODY, signedTimestamp: `${ts}005` },
      { id: 'msg_1', timestamp: ts, body: BODY, signedBody: `${BODY}\n` },
      { id: 'msg_1', timestamp: ts, body: BODY, signedId: 'in_42' },
    ];
    for (const input of cases) {
      const subject = {
        id: input.id,
        timestampText: input.timestamp,
        body: new TextEncoder().encode(input.body as string),
        signatures: parseSignatureHeader(senderHeaders(input)['webhook-signature']!),
        headerIds: [{ name: 'webhook-id', value: input.id }],
      };
      const node = await diagnoseSignatures(diagnosisKeys(SECRET, defaultBackend), subject, defaultBackend);
      const web = await diagnoseSignatures(diagnosisKeys(SECRET, webCryptoBackend), subject, webCryptoBackend);
      expect(web).toEqual(node);
      expect(node.findings).toHaveLength(1);
    }
  });

  it('stays fast when nothing matches, on both backends', async () => {
    const input: SenderInput = { id: 'msg_1', timestamp: ts, body: BODY, key: Buffer.alloc(32, 7) };
    const subject = {
      id: input.id,
      timestampText: ts,
      body: new TextEncoder().encode(BODY),
      signatures: parseSignatureHeader(senderHeaders(input)['webhook-signature']!),
      headerIds: [],
    };
    for (const backend of [defaultBackend, webCryptoBackend]) {
      const started = performance.now();
      const diagnosis = await diagnoseSignatures(diagnosisKeys([SECRET, OTHER_SECRET], backend), subject, backend);
      const elapsed = performance.now() - started;
      expect(diagnosis.findings).toEqual([]);
      // About 3 300 HMACs for two keys; generous bound for a shared CI machine.
      expect(elapsed).toBeLessThan(5000);
    }
  });
});

/** The default backend, counting the HMACs and Ed25519 checks asked of it. */
function countingBackend(): { backend: CryptoBackend; calls: { hmac: number; verify: number } } {
  const calls = { hmac: 0, verify: 0 };
  const backend: CryptoBackend = {
    ...defaultBackend,
    hmacWith(key, prefix, body, use, arg) {
      calls.hmac += 1;
      return defaultBackend.hmacWith(key, prefix, body, use, arg);
    },
    ed25519Verify(key, content, signature) {
      calls.verify += 1;
      return defaultBackend.ed25519Verify(key, content, signature);
    },
  };
  return { backend, calls };
}

describe('the diagnosis is bounded by the distinct entries it tries', () => {
  const ts = String(nowSeconds());
  const body = new TextEncoder().encode(BODY);
  /** 64-byte strings that decode like Ed25519 signatures but match nothing. */
  const fakeV1a = (n: number): string => `v1a,${Buffer.alloc(64, n).toString('base64')}`;
  const fakeV1 = (n: number): string => `v1,${Buffer.alloc(32, n).toString('base64')}`;

  async function work(header: string, secrets: Parameters<typeof diagnosisKeys>[0]) {
    const { backend, calls } = countingBackend();
    const subject = { id: 'msg_cap', timestampText: ts, body, signatures: parseSignatureHeader(header), headerIds: [] };
    const diagnosis = await diagnoseSignatures(diagnosisKeys(secrets, backend), subject, backend);
    return { diagnosis, calls };
  }

  it('checks a repeated v1a entry once, and at most 4 distinct ones, whatever the header holds', async () => {
    const { publicKey } = await generateKeyPair();
    const one = await work(fakeV1a(1), publicKey);
    expect(one.calls.hmac).toBe(0);
    expect(one.calls.verify).toBeGreaterThan(1600);
    expect(one.diagnosis.capped).toEqual([]);

    // The review's case: one entry repeated 64 times costs what one entry costs.
    const repeated = await work(Array.from({ length: 64 }, () => fakeV1a(1)).join(' '), publicKey);
    expect(repeated.calls.verify).toBe(one.calls.verify);
    expect(repeated.diagnosis.capped).toEqual([]);

    const distinct = await work(Array.from({ length: 64 }, (_, i) => fakeV1a(i)).join(' '), publicKey);
    expect(DIAGNOSED_ENTRIES_PER_VERSION).toBe(4);
    expect(distinct.calls.verify).toBe(4 * one.calls.verify);
    expect(distinct.diagnosis.capped).toEqual([{ version: 'v1a', tried: 4, distinct: 64 }]);
  });

  it('computes each HMAC once however many v1 entries there are, and reports the cap', async () => {
    const one = await work(fakeV1(1), SECRET);
    const many = await work(Array.from({ length: 64 }, (_, i) => fakeV1(i)).join(' '), SECRET);
    expect(many.calls.hmac).toBe(one.calls.hmac);
    expect(many.diagnosis.capped).toEqual([{ version: 'v1', tried: 4, distinct: 64 }]);
    expect(many.diagnosis.findings).toEqual([]);
  });

  it('says in the message that it capped, and still finds a bug in the entries it tried', async () => {
    const { secretKey, publicKey } = await generateKeyPair();
    const seed = Buffer.from(secretKey.slice(5), 'base64').subarray(0, 32);
    const key = createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]), format: 'der', type: 'pkcs8' });
    // The sender's real entry (signed over the body with a newline) first, then junk entries: eight
    // distinct v1a entries in all, past the diagnosis's own cap of four.
    const real = `v1a,${edSign(null, Buffer.from(`msg_cap.${ts}.${BODY}\n`), key).toString('base64')}`;
    const header = [real, ...Array.from({ length: 7 }, (_, i) => fakeV1a(i))].join(' ');
    const error = await assertSignedWebhook(
      { headers: { 'webhook-id': 'msg_cap', 'webhook-timestamp': ts, 'webhook-signature': header }, body: BODY },
      { secrets: publicKey },
    ).then(() => undefined, (e: unknown) => e as WebhookAssertionError);
    expect(error?.code).toBe('SIGNATURE_MISMATCH');
    expect(error?.findings).toEqual([`the signature matches the body with a trailing newline added: the bytes signed are not the bytes sent. Sign exactly the body that goes on the wire, and verify the raw bytes received`]);
    expect(error?.message.split('\n').at(-1)).toBe(
      `Diagnosis limit: only the first 4 of the 8 distinct v1a entries were diagnosed (a sender sends one entry per key it signs with); the others were not tried.`,
    );
  });
});

describe('lenientBase64Decode', () => {
  it("decodes exactly like Node's Buffer.from(text, 'base64'), prefix and all", () => {
    const samples = [SECRET, OTHER_SECRET, `whsec_${Buffer.alloc(24, 0xab).toString('base64')}`, 'whsec_', 'abc', 'ab-_cd==', `whsec_${Buffer.from('x').toString('base64')}`];
    for (let n = 1; n < 70; n++) samples.push(`whsec_${Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + n) & 0xff)).toString('base64')}`);
    for (const sample of samples) expect(Buffer.from(lenientBase64Decode(sample)).toString('hex')).toBe(Buffer.from(sample, 'base64').toString('hex'));
  });
});

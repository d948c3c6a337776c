/**
 * Interoperability on random inputs, both ways, with the reference `standardwebhooks` package and
 * the `svix` package (whose `Webhook` class signs and verifies with svix-* or webhook-* headers).
 * Each direction also sends tampered copies, which both sides must refuse.
 */

import fc from 'fast-check';
import { Webhook as StandardWebhook, WebhookVerificationError } from 'standardwebhooks';
import { Webhook as SvixWebhook, WebhookVerificationError as SvixVerificationError } from 'svix';
import { afterAll, describe, expect, it } from 'vitest';
import { signWebhookWith } from '../../src/sign.ts';
import { createVerifierWith } from '../../src/verify.ts';
import { BACKENDS, expectNoSecretInMessages, settle, track } from './support.ts';

const RUNS = 200;

afterAll(() => expectNoSecretInMessages());

interface Case {
  secret: string;
  second: string;
  id: string;
  offset: number;
  text: string;
  asBytes: boolean;
  tamper: 'none' | 'body' | 'id' | 'timestamp';
}

const secretText = fc
  .tuple(fc.uint8Array({ minLength: 24, maxLength: 64 }), fc.boolean())
  .map(([bytes, prefixed]) => track(`${prefixed ? 'whsec_' : ''}${Buffer.from(bytes).toString('base64')}`));

/** Random cases; `json` keeps bodies JSON for svix, whose verify always parses the body. */
function cases(json: boolean): fc.Arbitrary<Case> {
  const text = json
    ? fc.oneof(fc.json(), fc.string({ unit: 'grapheme', maxLength: 200 }).map((s) => JSON.stringify({ text: s, n: s.length })))
    : fc.oneof(fc.string({ unit: 'grapheme', maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 100 }), fc.json());
  return fc.record({
    secret: secretText,
    second: secretText,
    id: fc.oneof(fc.stringMatching(/^msg_[0-9A-Za-z]{27}$/), fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 40 })),
    offset: fc.integer({ min: -240, max: 240 }),
    text,
    asBytes: fc.boolean(),
    tamper: fc.constantFrom('none', 'none', 'none', 'body', 'id', 'timestamp'),
  });
}

/** The request as sent, with the chosen tampering applied after signing. */
function tampered(c: Case, headers: { id: string; timestamp: string; signature: string }) {
  return {
    id: c.tamper === 'id' ? `${headers.id}_` : headers.id,
    timestamp: c.tamper === 'timestamp' ? String(Number(headers.timestamp) - 1) : headers.timestamp,
    signature: headers.signature,
    text: c.tamper === 'body' ? `${c.text} ` : c.text,
  };
}

/**
 * Runs a reference verifier; true when it accepted, false when it refused with its verification
 * error (svix bundles its own copy of standardwebhooks, hence two classes).
 */
function referenceAccepts(verify: () => unknown): boolean {
  try {
    verify();
    return true;
  } catch (error) {
    if (error instanceof WebhookVerificationError || error instanceof SvixVerificationError) return false;
    throw error;
  }
}

describe.each(BACKENDS)('interoperability on %s', (_name, backend) => {
  const nowSeconds = () => Math.floor(Date.now() / 1000);

  it(`standardwebhooks verifies what we sign (${RUNS} random cases)`, async () => {
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(cases(false), async (c) => {
        const signed = await signWebhookWith({ secret: c.secret, id: c.id, timestamp: nowSeconds() + c.offset, body: c.asBytes ? Buffer.from(c.text) : c.text }, backend);
        const sent = tampered(c, { id: signed.id, timestamp: String(signed.timestamp), signature: signed.signature });
        const ok = referenceAccepts(() =>
          new StandardWebhook(c.secret).verify(
            sent.text,
            { 'webhook-id': sent.id, 'webhook-timestamp': sent.timestamp, 'webhook-signature': sent.signature },
            { jsonParse: false },
          ),
        );
        expect(ok).toBe(c.tamper === 'none');
        if (ok) accepted++;
      }),
      { numRuns: RUNS },
    );
    expect(accepted).toBeGreaterThan(RUNS / 3);
  });

  it(`we verify what standardwebhooks signs, also among two signatures (${RUNS} random cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(cases(false), fc.boolean(), async (c, rotating) => {
        const timestamp = nowSeconds() + c.offset;
        const date = new Date(timestamp * 1000);
        let signature = new StandardWebhook(c.secret).sign(c.id, date, c.text);
        if (rotating) signature = `${new StandardWebhook(c.second).sign(c.id, date, c.text)} ${signature}`;
        const sent = tampered(c, { id: c.id, timestamp: String(timestamp), signature });
        const verifier = createVerifierWith({ secrets: [c.second, c.secret] }, backend);
        const outcome = await settle(
          verifier.verify({
            headers: { 'webhook-id': sent.id, 'webhook-timestamp': sent.timestamp, 'webhook-signature': sent.signature },
            body: c.asBytes ? Buffer.from(sent.text) : sent.text,
          }),
        );
        expect(outcome).toEqual(
          c.tamper === 'none' ? { ok: true, keyIndex: rotating ? 0 : 1, scheme: 'v1', signed: true } : { ok: false, code: 'SIGNATURE_MISMATCH' },
        );
        // And the reference agrees with us on the same request.
        const reference = referenceAccepts(() =>
          new StandardWebhook(c.secret).verify(
            sent.text,
            { 'webhook-id': sent.id, 'webhook-timestamp': sent.timestamp, 'webhook-signature': sent.signature },
            { jsonParse: false },
          ),
        );
        expect(reference).toBe(outcome.ok);
      }),
      { numRuns: RUNS },
    );
  });

  it(`svix verifies what we sign, with svix-* and webhook-* headers (${RUNS} random cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(cases(true), fc.boolean(), async (c, branded) => {
        const signed = await signWebhookWith({ secret: c.secret, id: c.id, timestamp: nowSeconds() + c.offset, body: c.asBytes ? Buffer.from(c.text) : c.text }, backend);
        const sent = tampered(c, { id: signed.id, timestamp: String(signed.timestamp), signature: signed.signature });
        const headers = branded
          ? { 'svix-id': sent.id, 'svix-timestamp': sent.timestamp, 'svix-signature': sent.signature }
          : { 'webhook-id': sent.id, 'webhook-timestamp': sent.timestamp, 'webhook-signature': sent.signature };
        let parsed: unknown;
        const ok = referenceAccepts(() => {
          parsed = new SvixWebhook(c.secret).verify(sent.text, headers);
        });
        expect(ok).toBe(c.tamper === 'none');
        if (ok) expect(parsed).toEqual(c.text === '' ? undefined : JSON.parse(c.text));
      }),
      { numRuns: RUNS },
    );
  });

  it(`we verify what svix signs, sent with svix-* headers (${RUNS} random cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(cases(true), async (c) => {
        // Headers trims values, so an id with surrounding spaces would arrive as another id.
        const id = c.id.trim() || 'msg_1';
        const timestamp = nowSeconds() + c.offset;
        const signature = new SvixWebhook(c.secret).sign(id, new Date(timestamp * 1000), c.text);
        const sent = tampered(c, { id, timestamp: String(timestamp), signature });
        const outcome = await settle(
          createVerifierWith({ secrets: { key: c.secret, keyId: 'svix' } }, backend).verify({
            headers: new Headers({ 'svix-id': sent.id, 'svix-timestamp': sent.timestamp, 'svix-signature': sent.signature }),
            body: c.asBytes ? new TextEncoder().encode(sent.text).buffer : sent.text,
          }),
        );
        expect(outcome).toEqual(c.tamper === 'none' ? { ok: true, keyIndex: 0, scheme: 'v1', signed: true } : { ok: false, code: 'SIGNATURE_MISMATCH' });
      }),
      { numRuns: RUNS },
    );
  });
});

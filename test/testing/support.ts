/**
 * Helpers for the testing-toolkit tests: secrets, a sender written independently of the core
 * (plain node:crypto) that can make each classic sender bug on purpose, and a leak check that
 * proves no message carries a secret or a full expected signature.
 */

import { createHmac } from 'node:crypto';
import { expect } from 'vitest';

export const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
export const SECRET_B64 = SECRET.slice('whsec_'.length);
export const OTHER_SECRET = 'whsec_dGhpcy1pcy1hLWRpZmZlcmVudC1zZWNyZXQtMTIz';

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

export interface SenderInput {
  id: string;
  /** The webhook-timestamp header value. */
  timestamp: string;
  /** The body on the wire. */
  body: string | Uint8Array;
  /** The HMAC key bytes (or text) the sender uses. Default: the correct bytes of SECRET. */
  key?: Uint8Array | string;
  /** What the sender signs, when it differs from what it sends. */
  signedId?: string;
  signedTimestamp?: string;
  signedBody?: string | Uint8Array;
}

/** The correct HMAC key of SECRET. */
export const KEY_BYTES = Buffer.from(SECRET_B64, 'base64');

/** base64 HMAC-SHA256 over `id.timestamp.body`, computed with node:crypto alone. */
export function hmac(key: Uint8Array | string, id: string, timestamp: string, body: string | Uint8Array): string {
  return createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64');
}

/** The headers a (possibly buggy) sender sends. */
export function senderHeaders(input: SenderInput): Record<string, string> {
  const signature = hmac(input.key ?? KEY_BYTES, input.signedId ?? input.id, input.signedTimestamp ?? input.timestamp, input.signedBody ?? input.body);
  return { 'content-type': 'application/json', 'webhook-id': input.id, 'webhook-timestamp': input.timestamp, 'webhook-signature': `v1,${signature}` };
}

/** Asserts that `message` carries no secret (whole, payload, or a long piece of it) and no listed signature. */
export function expectNoSecrets(message: string, secrets: readonly string[], signatures: readonly string[] = []): void {
  for (const secret of secrets) {
    const payload = secret.replace(/^wh(sec|pk|sk)_/, '');
    expect(message).not.toContain(secret);
    expect(message).not.toContain(payload);
    for (let i = 0; i + 12 <= payload.length; i += 6) expect(message).not.toContain(payload.slice(i, i + 12));
  }
  for (const signature of signatures) expect(message).not.toContain(signature);
}

/**
 * Shared helpers for the core tests: the spec vector, both crypto backends, signing arbitrary
 * id/timestamp text, and a record of every error message a test file produced so that the file
 * can prove no secret ever appeared in one.
 */

import { createHmac, randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { defaultBackend, webCryptoBackend, type CryptoBackend } from '../../src/crypto.ts';
import { base64Encode } from '../../src/lib/encoding.ts';
import { WEBHOOK_ERROR_STATUS, WebhookError, type WebhookErrorCode } from '../../src/errors.ts';

/** The known vector from the Standard Webhooks reference libraries' tests. */
export const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: '1614265330',
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
} as const;

/** The vector's clock: exactly its timestamp, in epoch milliseconds. */
export const VECTOR_NOW_MS = Number(VECTOR.timestamp) * 1000;

export const BACKENDS: [string, CryptoBackend][] = [
  ['node', defaultBackend],
  ['webcrypto', webCryptoBackend],
];

// ---------------------------------------------------------------------------------------------
// Secrets used in a file, and every message its errors carried.

const secretTexts = new Set<string>();
const messages: string[] = [];

/** Remembers `secret` (and its base64 payload) so that the leak scan looks for it. */
export function track<T extends string | Uint8Array>(secret: T): T {
  if (typeof secret === 'string') {
    secretTexts.add(secret);
    const underscore = secret.indexOf('_');
    if (underscore > 0 && underscore < 6) secretTexts.add(secret.slice(underscore + 1));
  } else {
    secretTexts.add(base64Encode(secret));
  }
  return secret;
}

/** A fresh tracked `whsec_` secret of `bytes` random bytes. */
export function newSecret(bytes = 32): string {
  return track(`whsec_${randomBytes(bytes).toString('base64')}`);
}

export function recordMessage(message: string): void {
  messages.push(message);
}

export function recordedMessageCount(): number {
  return messages.length;
}

/**
 * Fails when any recorded message contains a tracked secret, its payload, or any 16-character
 * run of either (a truncated secret is still a leak).
 */
export function expectNoSecretInMessages(): void {
  const WINDOW = 16;
  const seen = new Set<string>();
  for (const message of messages) {
    for (let i = 0; i + WINDOW <= message.length; i++) seen.add(message.slice(i, i + WINDOW));
  }
  for (const text of secretTexts) {
    if (text.length < WINDOW) {
      const leak = messages.find((message) => message.includes(text));
      if (leak !== undefined) expect.fail(`an error message contains a secret: ${JSON.stringify(leak)}`);
      continue;
    }
    for (let i = 0; i + WINDOW <= text.length; i++) {
      if (seen.has(text.slice(i, i + WINDOW))) {
        const leak = messages.find((message) => message.includes(text.slice(i, i + WINDOW)));
        expect.fail(`an error message contains secret material: ${JSON.stringify(leak)}`);
      }
    }
  }
}

/** How a verification ended, for comparing outcomes; a rejection's message is recorded. */
export type Outcome = { ok: true; keyIndex: number | undefined; scheme: string | undefined; signed: boolean } | { ok: false; code: string };

export async function settle(promise: Promise<{ keyIndex: number | undefined; scheme: string | undefined; signed: boolean }>): Promise<Outcome> {
  try {
    const { keyIndex, scheme, signed } = await promise;
    return { ok: true, keyIndex, scheme, signed };
  } catch (error) {
    if (!(error instanceof WebhookError)) throw error;
    recordMessage(error.message);
    return { ok: false, code: error.code };
  }
}

/** Awaits `promise`, which must reject with a `WebhookError` of `code`; returns the error. */
export async function rejection(promise: Promise<unknown>, code: WebhookErrorCode): Promise<WebhookError> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  if (caught === undefined) expect.fail(`expected a WebhookError ${code}, but it resolved`);
  if (!(caught instanceof WebhookError)) throw caught;
  recordMessage(caught.message);
  expect({ code: caught.code, status: caught.status, name: caught.name }).toEqual({
    code,
    status: WEBHOOK_ERROR_STATUS[code],
    name: 'WebhookError',
  });
  return caught;
}

/** Calls `fn`, which must throw exactly an instance of `type` (not a subclass's sibling); returns it. */
export function thrown<E extends Error>(fn: () => unknown, type: new (...args: never[]) => E): E {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  if (caught === undefined) expect.fail(`expected ${type.name}, but nothing was thrown`);
  expect(caught).toBeInstanceOf(type);
  expect((caught as Error).constructor).toBe(type);
  recordMessage((caught as Error).message);
  return caught as E;
}

// ---------------------------------------------------------------------------------------------
// Signing by hand, for inputs signWebhook cannot express (timestamp text such as '01614265330').

/** The base64 payload of a `whsec_` secret (or bare base64) as key bytes. */
function keyBytes(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
}

/** `v1,<base64 HMAC-SHA256>` over `${id}.${timestamp}.${body}`, computed independently of src/. */
export function hmacEntry(secret: string | Uint8Array, id: string, timestamp: string, body: string | Uint8Array): string {
  const key = typeof secret === 'string' ? keyBytes(secret) : secret;
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
}

/** Counts calls into a backend, to observe which work the verifier does. */
export function countingBackend(inner: CryptoBackend): { backend: CryptoBackend; calls: { hmac: number; importHmac: number; ed25519Verify: number } } {
  const calls = { hmac: 0, importHmac: 0, ed25519Verify: 0 };
  const backend: CryptoBackend = {
    ...inner,
    importHmacKey(raw) {
      calls.importHmac++;
      return inner.importHmacKey(raw);
    },
    hmacWith(key, prefix, body, use, arg) {
      calls.hmac++;
      return inner.hmacWith(key, prefix, body, use, arg);
    },
    ed25519Verify(key, content, signature) {
      calls.ed25519Verify++;
      return inner.ed25519Verify(key, content, signature);
    },
  };
  return { backend, calls };
}

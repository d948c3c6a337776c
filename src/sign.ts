/**
 * The signing side: what a sender does. Tests, examples and the demo use it to make requests a
 * receiver will accept, and the relay-side testing helpers use it to reason about signatures.
 */

import { defaultBackend, generateEd25519, hmacBase64, randomBytes, type CryptoBackend, type Ed25519SecretKey, type HmacKey } from './crypto.ts';
import { base64Encode, toBytes } from './lib/encoding.ts';
import { decodeSecretList, type SecretInput } from './secrets.ts';

/**
 * What to sign.
 *
 * @example
 * ```ts
 * import type { SignInput } from 'webhook-receiver';
 * const input: SignInput = { secret: 'whsec_…', body: '{"type":"ping"}', id: 'msg_1' };
 * ```
 */
export interface SignInput {
  /**
   * `'whsec_…'`, bare base64 or bytes sign `v1` (HMAC); `'whsk_…'` (64 bytes, or the 32-byte seed
   * alone) signs `v1a` (Ed25519).
   * Several secrets give several space-separated signatures, as a sender does during a rotation.
   */
  secret: SecretInput | readonly SecretInput[];
  /** The exact body bytes that will be sent. */
  body: string | Uint8Array;
  /** Default: a fresh `msg_…` id. */
  id?: string;
  /** Unix seconds, or a `Date`. Default: now. */
  timestamp?: number | Date;
}

/**
 * A signed message: the three headers to send with the body.
 *
 * @example
 * ```ts
 * const signed: SignedWebhook = await signWebhook({ secret, body });
 * await fetch(url, { method: 'POST', headers: signed.headers, body });
 * ```
 */
export interface SignedWebhook {
  id: string;
  timestamp: number;
  /** The `webhook-signature` value: `v1,…` / `v1a,…` entries separated by spaces. */
  signature: string;
  headers: { 'webhook-id': string; 'webhook-timestamp': string; 'webhook-signature': string };
}

const ID_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A fresh message id in the style senders use: `msg_` and 27 random base-62 characters. */
export function generateMessageId(): string {
  let id = 'msg_';
  // 62 * 4 = 248: rejecting bytes from 248 up keeps every character equally likely.
  while (id.length < 31) {
    for (const byte of randomBytes(32)) {
      if (byte < 248 && id.length < 31) id += ID_ALPHABET[byte % 62];
    }
  }
  return id;
}

/** Unix seconds of a timestamp given as seconds or a `Date` (default: now), checked. */
export function toUnixSeconds(timestamp: number | Date | undefined): number {
  if (timestamp === undefined) return Math.floor(Date.now() / 1000);
  if (timestamp instanceof Date) {
    const ms = timestamp.getTime();
    if (!Number.isFinite(ms)) throw new RangeError('timestamp is an invalid Date');
    if (ms < 0) throw new RangeError('timestamp must not be before 1970 (Unix seconds are never negative)');
    return Math.floor(ms / 1000);
  }
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new RangeError('timestamp must be whole Unix seconds (or a Date)');
  return timestamp;
}

/**
 * What a {@link Signer} signs: the body, and optionally the id and timestamp.
 *
 * @example
 * ```ts
 * import type { SignerInput } from 'webhook-receiver';
 * const input: SignerInput = { body: '{"type":"ping"}', id: 'msg_1', timestamp: new Date() };
 * ```
 */
export interface SignerInput {
  /** The exact body bytes that will be sent. */
  body: string | Uint8Array;
  /** Default: a fresh `msg_…` id. */
  id?: string;
  /** Unix seconds, or a `Date`. Default: now. */
  timestamp?: number | Date;
}

/**
 * A signer with its secrets decoded and its keys imported once: what a sender (or a test that
 * sends many requests) keeps, as a receiver keeps a verifier.
 *
 * @example
 * ```ts
 * import { createSigner } from 'webhook-receiver';
 * const signer = createSigner(process.env.WEBHOOK_SECRET!);
 * const { headers } = await signer.sign({ body: '{"type":"ping"}' });
 * ```
 */
export interface Signer {
  /** Signs one message; rejects with `TypeError` / `RangeError` on a bad id, timestamp or body. */
  sign(input: SignerInput): Promise<SignedWebhook>;
}

type SignerKey =
  | { kind: 'hmac'; key: HmacKey }
  | { kind: 'ed25519'; key: Ed25519SecretKey };

class SignerImpl implements Signer {
  readonly #backend: CryptoBackend;
  readonly #keys: SignerKey[] = [];

  constructor(secret: SecretInput | readonly SecretInput[], backend: CryptoBackend) {
    this.#backend = backend;
    // Decoded and imported here, once: per call this was most of the cost of signing.
    for (const material of decodeSecretList(secret, 'sign', 'secret')) {
      if (material.kind === 'hmac') this.#keys.push({ kind: 'hmac', key: backend.importHmacKey(material.raw) });
      else if (material.kind === 'ed25519-secret') this.#keys.push({ kind: 'ed25519', key: backend.importEd25519SecretKey(material.seed) });
    }
  }

  async sign(input: SignerInput): Promise<SignedWebhook> {
    if (typeof input !== 'object' || input === null) throw new TypeError('sign needs { body }');
    const id = input.id ?? generateMessageId();
    if (typeof id !== 'string' || id.length === 0) throw new TypeError('id must be a non-empty string');
    const timestamp = toUnixSeconds(input.timestamp);
    const body = toBytes(input.body);
    const prefix = `${id}.${timestamp}.`;

    let signature = '';
    for (const { kind, key } of this.#keys) {
      let entry: string;
      if (kind === 'hmac') {
        // node:crypto answers at once: awaiting its string would only cost a promise turn.
        const mac = hmacBase64(this.#backend, key, prefix, body);
        entry = `v1,${typeof mac === 'string' ? mac : await mac}`;
      } else {
        entry = `v1a,${await this.#backend.ed25519SignBase64(key, prefix, body)}`;
      }
      signature = signature === '' ? entry : `${signature} ${entry}`;
    }
    return {
      id,
      timestamp,
      signature,
      headers: { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature },
    };
  }
}

/** A signer on a chosen crypto backend. Internal: tests and benchmarks use it to cover WebCrypto. */
export function createSignerWith(secret: SecretInput | readonly SecretInput[], backend: CryptoBackend): Signer {
  return new SignerImpl(secret, backend);
}

/**
 * Creates a signer: the secrets are checked, decoded and imported once, here (a bad one throws
 * `TypeError` or `RangeError` at once, never showing the secret), so each `sign` call costs about
 * one HMAC. Several secrets give several space-separated signatures, as a sender does during a
 * rotation; a `'whsk_…'` key signs `v1a` (Ed25519).
 *
 * @example
 * ```ts
 * import { createSigner } from 'webhook-receiver';
 *
 * const signer = createSigner([process.env.WEBHOOK_SECRET!, process.env.WEBHOOK_SECRET_NEXT!]);
 * for (const event of events) {
 *   const body = JSON.stringify(event);
 *   const { headers } = await signer.sign({ body });
 *   await fetch('http://127.0.0.1:3000/webhooks', { method: 'POST', headers, body });
 * }
 * ```
 */
export function createSigner(secret: SecretInput | readonly SecretInput[]): Signer {
  return new SignerImpl(secret, defaultBackend);
}

/** Signing on a chosen crypto backend. Internal: tests use it to cover the WebCrypto path. */
export async function signWebhookWith(input: SignInput, backend: CryptoBackend): Promise<SignedWebhook> {
  if (typeof input !== 'object' || input === null) throw new TypeError('signWebhook needs { secret, body }');
  return new SignerImpl(input.secret, backend).sign(input);
}

/**
 * Signs a message the way a Standard Webhooks sender does. It decodes the secrets on every call:
 * to sign many messages with the same secrets, build a {@link createSigner} once.
 *
 * @example
 * ```ts
 * import { signWebhook } from 'webhook-receiver';
 * const body = JSON.stringify({ type: 'invoice.paid' });
 * const { headers } = await signWebhook({ secret: process.env.WEBHOOK_SECRET!, body });
 * await fetch('http://127.0.0.1:3000/webhooks', { method: 'POST', headers, body });
 * ```
 */
export function signWebhook(input: SignInput): Promise<SignedWebhook> {
  return signWebhookWith(input, defaultBackend);
}

/**
 * A fresh `v1` secret: `whsec_` and the base64 of 32 random bytes.
 *
 * @example
 * ```ts
 * import { generateSecret } from 'webhook-receiver';
 * const secret = generateSecret(); // 'whsec_…'
 * ```
 */
export function generateSecret(): string {
  return `whsec_${base64Encode(randomBytes(32))}`;
}

/**
 * A fresh `v1a` Ed25519 key pair: `secretKey` (`whsk_`, for the sender) and `publicKey`
 * (`whpk_`, for receivers).
 *
 * @example
 * ```ts
 * import { generateKeyPair, createVerifier } from 'webhook-receiver';
 * const { secretKey, publicKey } = await generateKeyPair();
 * const verifier = createVerifier({ secrets: publicKey });
 * ```
 */
export async function generateKeyPair(): Promise<{ secretKey: string; publicKey: string }> {
  const { seed, publicKey } = await generateEd25519();
  const secret = new Uint8Array(64);
  secret.set(seed, 0);
  secret.set(publicKey, 32);
  return { secretKey: `whsk_${base64Encode(secret)}`, publicKey: `whpk_${base64Encode(publicKey)}` };
}

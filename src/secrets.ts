/**
 * Secrets and keys, decoded and checked once, at start-up. Every message names the secret by its
 * position (and keyId) and says how to fix it; none ever contains the secret itself.
 */

import { ed25519PublicKeyProblem } from './crypto.ts';
import { base64DecodeLenient } from './lib/encoding.ts';

/**
 * A trusted key, in any of the forms a relay service or a secrets manager hands out:
 * - `'whsec_<base64>'` or bare base64: a `v1` HMAC-SHA256 secret (decoded as every reference
 *   library decodes it: `=` padding optional, unused trailing bits ignored);
 * - several of those in one string, separated by commas (`'whsec_new,whsec_old'`, optionally with a
 *   space after each comma): one environment variable carries a rotation overlap;
 * - `'whpk_<base64>'`: a `v1a` Ed25519 public key (32 bytes);
 * - a `Uint8Array`: raw HMAC key bytes;
 * - `{ key, keyId }`: any of the above with an identifier that is reported when it matches
 *   (for example the `keyId` the relay service returned when the secret was rotated).
 *
 * @example
 * ```ts
 * import type { SecretInput } from 'webhook-receiver';
 * const secrets: SecretInput[] = [
 *   { key: process.env.WEBHOOK_SECRET_NEW!, keyId: '7d3f…' },
 *   { key: process.env.WEBHOOK_SECRET_OLD!, keyId: 'c01a…' },
 * ];
 * ```
 */
export type SecretInput = string | Uint8Array | { key: string | Uint8Array; keyId?: string };

/** The smallest HMAC key accepted. Standard Webhooks secrets are 24 to 64 random bytes. */
const MIN_HMAC_KEY_BYTES = 16;

interface HmacKeyMaterial {
  kind: 'hmac';
  raw: Uint8Array;
  index: number;
  keyId: string | undefined;
}
interface Ed25519PublicKeyMaterial {
  kind: 'ed25519-public';
  raw: Uint8Array;
  index: number;
  keyId: string | undefined;
}
interface Ed25519SecretKeyMaterial {
  kind: 'ed25519-secret';
  seed: Uint8Array;
  publicKey: Uint8Array;
  index: number;
  keyId: string | undefined;
}

type Role = 'verify' | 'sign';

function describe(index: number, keyId: string | undefined, listName: string): string {
  return keyId === undefined ? `${listName}[${index}]` : `${listName}[${index}] (keyId ${JSON.stringify(keyId)})`;
}

/**
 * The hint for a string that is not base64. base64url only when it could be key bytes in that
 * alphabet; a password made of words (`my-super-secret-password`) is told it is not a secret.
 */
function notBase64Hint(text: string, prefixed = false): string {
  const words = /^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$/.test(text) || /^[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)*$/.test(text);
  if (/^[A-Za-z0-9_-]+$/.test(text) && /[-_]/.test(text) && !words) {
    return ' (it looks like base64url: use the standard alphabet with + and /)';
  }
  return !prefixed && (words || /[^A-Za-z0-9+/=_-]/.test(text))
    ? ` (a password or passphrase is not a Standard Webhooks secret: pass the 'whsec_…' value the sender gave you, or make one with generateSecret())`
    : '';
}

function decodePrefixed(text: string, prefix: string, where: string): Uint8Array {
  const payload = text.slice(prefix.length);
  const bytes = base64DecodeLenient(payload);
  if (bytes === undefined || bytes.length === 0) {
    throw new TypeError(`${where} is not valid base64 after the '${prefix}' prefix${notBase64Hint(payload, true)}`);
  }
  return bytes;
}

function checkHmacLength(bytes: Uint8Array, where: string): Uint8Array {
  if (bytes.length < MIN_HMAC_KEY_BYTES) {
    throw new RangeError(
      `${where} decodes to ${bytes.length} bytes; Standard Webhooks secrets are 24 to 64 random bytes ` +
        `(at least ${MIN_HMAC_KEY_BYTES} accepted). Pass the 'whsec_…' value the sender gave you, or make one with generateSecret()`,
    );
  }
  return bytes;
}

export type KeyMaterial = HmacKeyMaterial | Ed25519PublicKeyMaterial | Ed25519SecretKeyMaterial;

/**
 * Decodes every secret of `secrets` for verifying (`role: 'verify'`) or signing (`role: 'sign'`).
 * A string holding several secrets separated by commas counts as that many secrets, in order:
 * `index` is the position in that flattened list.
 */
export function decodeSecretList(secrets: unknown, role: Role, listName = 'secrets'): KeyMaterial[] {
  const out: KeyMaterial[] = [];
  secretList(secrets as SecretInput | readonly SecretInput[] | undefined, listName).forEach((input, position) => {
    out.push(...decodeSecrets(input, position, role, listName, out.length));
  });
  return out;
}

/**
 * Decodes the entry at `position` of a secrets list: one secret, or several in a comma-separated
 * string. Messages name `position`; the keys are numbered from `firstIndex` (their place in the
 * flattened list, which is `position` while no earlier entry held several).
 */
export function decodeSecrets(input: SecretInput, position: number, role: Role, listName = 'secrets', firstIndex = position): KeyMaterial[] {
  let key: unknown = input;
  let keyId: string | undefined;
  if (typeof input === 'object' && input !== null && !(input instanceof Uint8Array)) {
    key = (input as { key?: unknown }).key;
    const id = (input as { keyId?: unknown }).keyId;
    if (id !== undefined && typeof id !== 'string') throw new TypeError(`${listName}[${position}].keyId must be a string`);
    keyId = id;
  }
  const where = describe(position, keyId, listName);

  if (key instanceof Uint8Array) {
    return [{ kind: 'hmac', raw: checkHmacLength(Uint8Array.from(key), where), index: firstIndex, keyId }];
  }
  if (typeof key !== 'string') {
    throw new TypeError(`${where} must be a string ('whsec_…', 'whpk_…' or base64), a Uint8Array, or { key, keyId }`);
  }
  if (key.length === 0) throw new TypeError(`${where} is empty (is the environment variable set?)`);
  if (/^["'`]|["'`]$/.test(key)) {
    throw new TypeError(`${where} is wrapped in quotes (copied with them from a config file?); pass the value without them`);
  }
  // Before the comma split: 'v1,whsec_…' is a pasted signature entry, not a list of two secrets.
  if (/^v1a?,/.test(key)) {
    throw new TypeError(`${where} looks like a signature entry ('v1,…'), not a secret; pass the secret itself ('whsec_…')`);
  }
  // Base64 has no comma, so a comma separates secrets (a space may follow it). Other whitespace,
  // a trailing newline above all, is still refused below, with its hint.
  if (key.includes(',')) {
    const parts = key.split(SECRET_LIST_SEPARATOR);
    return parts.map((part, n) => {
      const partWhere = `${where} (secret ${n + 1} of ${parts.length} in the comma-separated list)`;
      if (part.length === 0) throw new TypeError(`${partWhere} is empty (a doubled, leading or trailing comma)`);
      if (/^v1a?,?$/.test(part)) {
        throw new TypeError(`${partWhere} looks like part of a signature entry ('v1,…'), not a secret; pass the secret itself ('whsec_…')`);
      }
      return decodeOne(part, firstIndex + n, keyId, partWhere, role);
    });
  }
  return [decodeOne(key, firstIndex, keyId, where, role)];
}

/** Base64 has no comma, so a comma separates secrets in one string (a space may follow it). */
const SECRET_LIST_SEPARATOR = /,[ ]*/;

/**
 * The secrets one input names, one input each: a comma-separated string (or `{ key }` with one,
 * its `keyId` kept on each part) is several; a pasted signature entry (`v1,…`) is left whole for
 * {@link decodeSecrets} to refuse.
 */
export function eachSecret(input: SecretInput): SecretInput[] {
  const key = typeof input === 'object' && input !== null && !(input instanceof Uint8Array) ? input.key : input;
  if (typeof key !== 'string' || !key.includes(',') || /^v1a?,/.test(key)) return [input];
  return key.split(SECRET_LIST_SEPARATOR).map((part) => (typeof input === 'string' ? part : { ...(input as object), key: part } as SecretInput));
}

function decodeOne(key: string, index: number, keyId: string | undefined, where: string, role: Role): KeyMaterial {
  if (/\s/.test(key)) {
    throw new TypeError(`${where} contains whitespace (often a trailing newline from a file or an environment variable); trim it`);
  }

  if (key.startsWith('whsk_')) {
    if (role === 'verify') {
      throw new TypeError(
        `${where} is an Ed25519 secret key ('whsk_…'), which belongs to the sender; a receiver trusts the public key ('whpk_…')`,
      );
    }
    const bytes = decodePrefixed(key, 'whsk_', where);
    // 64 bytes (seed, then public key) as generateKeyPair() and the JS reference write it; 32
    // (the seed alone) as the Python reference's asymmetric branch writes it.
    if (bytes.length !== 64 && bytes.length !== 32) {
      throw new RangeError(
        `${where} decodes to ${bytes.length} bytes; a 'whsk_' key is 64 bytes (32-byte seed, then 32-byte public key) or the 32-byte seed alone`,
      );
    }
    return { kind: 'ed25519-secret', seed: bytes.slice(0, 32), publicKey: bytes.slice(32), index, keyId };
  }
  if (key.startsWith('whpk_')) {
    if (role === 'sign') {
      throw new TypeError(`${where} is an Ed25519 public key ('whpk_…'), which cannot sign; sign with the matching 'whsk_…' secret key`);
    }
    const bytes = decodePrefixed(key, 'whpk_', where);
    if (bytes.length !== 32) throw new RangeError(`${where} decodes to ${bytes.length} bytes; a 'whpk_' public key is 32 bytes`);
    const problem = ed25519PublicKeyProblem(bytes);
    if (problem !== undefined) throw new RangeError(`${where} is not a usable Ed25519 public key: ${problem}. Pass the 'whpk_…' key the sender published`);
    return { kind: 'ed25519-public', raw: bytes, index, keyId };
  }
  if (key.startsWith('whsec_')) {
    return { kind: 'hmac', raw: checkHmacLength(decodePrefixed(key, 'whsec_', where), where), index, keyId };
  }
  const bytes = base64DecodeLenient(key);
  if (bytes === undefined) {
    const hint = /^[a-z]+_/i.test(key)
      ? ` (its prefix is not one of 'whsec_', 'whpk_')`
      : notBase64Hint(key);
    throw new TypeError(`${where} is neither 'whsec_…', 'whpk_…' nor valid base64${hint}`);
  }
  return { kind: 'hmac', raw: checkHmacLength(bytes, where), index, keyId };
}

/** Normalises `secrets` to a non-empty array, or throws a `TypeError` saying what is wrong. */
export function secretList<T>(secrets: T | readonly T[] | undefined, listName = 'secrets'): readonly T[] {
  if (secrets === undefined || secrets === null) {
    const required = `${listName} is required: pass the 'whsec_…' secret the sender gave you`;
    // The receiving side's usual cause; a signer (`secret`) is built by the app's own code.
    if (listName !== 'secrets') throw new TypeError(required);
    throw new TypeError(
      `${required}. It was ${String(secrets)}: usually an unset environment variable, or a handler built where the ` +
        "runtime's secrets are absent (a build step, a bundler, a test import): build it lazily, on first use",
    );
  }
  const list = Array.isArray(secrets) ? (secrets as readonly T[]) : [secrets as T];
  if (list.length === 0) throw new TypeError(`${listName} is empty: pass at least one secret`);
  return list;
}

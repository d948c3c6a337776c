/**
 * The one seam between runtimes. Everything else in the package is plain Web-standard code.
 *
 * On Node (and Bun and Deno, which implement `node:crypto`), HMAC goes through `node:crypto`: it is
 * synchronous and several times faster than WebCrypto, whose every call in Node crosses to the
 * thread pool (about 50 µs a call whatever the size). Everywhere else (Cloudflare Workers without
 * the Node compatibility flag, Vercel Edge, browsers) it goes through `crypto.subtle`.
 *
 * `node:crypto` is reached through `process.getBuiltinModule` (Node 22.3+ and 20.16+), never
 * through an `import`, so bundlers for edge runtimes see no Node built-in and this file compiles
 * without Node types. On Node 22.0 to 22.2 (and older 20.x) the WebCrypto path is used: correct,
 * but slower.
 */

import { base64Decode, base64Encode, concatBytes, useBulkBase64Encoder, utf8Encoder } from './lib/encoding.ts';

/** An HMAC-SHA256 key, imported once per verifier or signer. */
export interface HmacKey {
  readonly raw: Uint8Array;
}
/** An Ed25519 public key, imported once per verifier. */
export interface Ed25519PublicKey {
  readonly raw: Uint8Array;
}
/** An Ed25519 private key (from the 32-byte seed), imported once per signer. */
export interface Ed25519SecretKey {
  readonly seed: Uint8Array;
}

export interface CryptoBackend {
  readonly name: 'node' | 'webcrypto';
  /** Whether {@link hmacWith} calls `use` before it returns (node:crypto) rather than a turn later (WebCrypto). */
  readonly synchronousHmac: boolean;
  importHmacKey(raw: Uint8Array): HmacKey;
  /**
   * HMAC-SHA256(key, prefix ‖ body), `prefix` encoded as UTF-8, handed to `use` with `arg`: at once
   * as base64 text where the backend computes synchronously (node:crypto, whose native base64 is
   * cheapest), or as the raw MAC in the one promise turn after WebCrypto's `sign` settles, the
   * promise settling with what `use` returns or throws (no turn to encode, none to adopt a second
   * promise). `arg` lets a caller pass a module-level `use` rather than a closure per call.
   */
  hmacWith<A, T>(key: HmacKey, prefix: string, body: Uint8Array, use: (mac: string | Uint8Array, arg: A) => T, arg: A): T | Promise<T>;
  importEd25519PublicKey(raw: Uint8Array): Ed25519PublicKey;
  /** Ed25519 over `content`, the signed content built once by the caller (see {@link signedContent}). */
  ed25519Verify(key: Ed25519PublicKey, content: Uint8Array, signature: Uint8Array): Promise<boolean>;
  importEd25519SecretKey(seed: Uint8Array): Ed25519SecretKey;
  ed25519SignBase64(key: Ed25519SecretKey, prefix: string, body: Uint8Array): Promise<string>;
}

// DER framing that turns raw Ed25519 key bytes into SPKI / PKCS #8 documents (RFC 8410).
const SPKI_ED25519_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);
const PKCS8_ED25519_PREFIX = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
]);

/**
 * `prefix` (UTF-8) followed by `body`, written at the start of `into`: the length written, or
 * `undefined` when they do not fit (a prefix that is not ASCII may take up to 3 bytes per UTF-16
 * unit). One-shot APIs (WebCrypto, Ed25519) sign one buffer, so the two are joined here, for a
 * fresh buffer and a pooled one alike.
 */
function writeSignedContent(prefix: string, body: Uint8Array, into: Uint8Array): number | undefined {
  const { read, written } = utf8Encoder.encodeInto(prefix, into);
  if (read !== prefix.length || written + body.length > into.length) return undefined;
  into.set(body, written);
  return written + body.length;
}

/**
 * `prefix` (UTF-8) followed by `body`, in one buffer: what one-shot APIs (WebCrypto, Ed25519) sign.
 * One allocation for an ASCII prefix (every id and timestamp a sender uses), the prefix encoded
 * straight into it.
 */
export function signedContent(prefix: string, body: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(prefix.length + body.length);
  if (writeSignedContent(prefix, body, out) !== undefined) return out;
  // Not ASCII (an id may be any text): UTF-8 takes at most 3 bytes per UTF-16 unit, so this fits.
  const wide = new Uint8Array(prefix.length * 3 + body.length);
  return wide.subarray(0, writeSignedContent(prefix, body, wide));
}

/** A MAC as {@link CryptoBackend.hmacWith} hands it over, as base64 text. */
function macText(mac: string | Uint8Array): string {
  return typeof mac === 'string' ? mac : base64Encode(mac);
}

/**
 * base64(HMAC-SHA256(key, prefix ‖ body)), `prefix` encoded as UTF-8: a string at once from
 * node:crypto, a promise from WebCrypto.
 */
export function hmacBase64(backend: CryptoBackend, key: HmacKey, prefix: string, body: Uint8Array): string | Promise<string> {
  return backend.hmacWith(key, prefix, body, macText, undefined);
}

/** WebCrypto's types want an `ArrayBuffer`-backed view; every view this package makes is one. */
function source(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return bytes as Uint8Array<ArrayBuffer>;
}

// ---------------------------------------------------------------------------------------------
// WebCrypto: every runtime has it.

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error('webhook-receiver needs WebCrypto (globalThis.crypto.subtle), which this runtime lacks');
  return s;
}

interface WebHmacKey extends HmacKey {
  cryptoKey: CryptoKey | undefined;
  pending: Promise<CryptoKey> | undefined;
}
interface WebEd25519PublicKey extends Ed25519PublicKey {
  pending: Promise<CryptoKey> | undefined;
}
interface WebEd25519SecretKey extends Ed25519SecretKey {
  pending: Promise<CryptoKey> | undefined;
}

async function webHmacCryptoKey(key: WebHmacKey): Promise<CryptoKey> {
  key.pending ??= subtle().importKey('raw', source(key.raw), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  key.cryptoKey = await key.pending;
  return key.cryptoKey;
}

/**
 * Buffers for the signed content of WebCrypto HMACs up to this size are reused. WebCrypto signs one
 * buffer, so `id.timestamp.` and the body must be joined per call, and a fresh buffer per call was
 * most of what the verifier cost beside the MAC (64 in flight, 1 KiB bodies). A buffer goes back
 * to the pool only once its `sign` has settled: no runtime, however it reads its input, can see a
 * buffer rewritten under it.
 */
const POOLED_CONTENT_BYTES = 4096;
/** Enough for 64 calls in flight; beyond that, a call allocates and its buffer is dropped. */
const CONTENT_POOL_MAX = 64;
const contentPool: Uint8Array<ArrayBuffer>[] = [];

/**
 * HMAC of `prefix` ‖ `body` through WebCrypto, the MAC handed to `use` in the one turn after `sign`
 * settles. The signed content goes into a pooled buffer when it fits.
 */
function webHmac<A, T>(
  cryptoKey: CryptoKey,
  prefix: string,
  body: Uint8Array,
  use: (mac: Uint8Array, arg: A) => T,
  arg: A,
): Promise<T> {
  if (prefix.length + body.length <= POOLED_CONTENT_BYTES) {
    const buffer = contentPool.pop() ?? new Uint8Array(POOLED_CONTENT_BYTES);
    const length = writeSignedContent(prefix, body, buffer);
    if (length !== undefined) {
      // The buffer goes back in each handler itself: a shared `release` closure called from them
      // made every call cost 20-30% more main-thread time with 64 in flight (Node 20).
      return subtle().sign('HMAC', cryptoKey, buffer.subarray(0, length)).then(
        (mac) => {
          if (contentPool.length < CONTENT_POOL_MAX) contentPool.push(buffer);
          return use(new Uint8Array(mac), arg);
        },
        (error: unknown) => {
          if (contentPool.length < CONTENT_POOL_MAX) contentPool.push(buffer);
          throw error;
        },
      );
    }
    // A prefix whose UTF-8 did not fit: the buffer was not handed out.
    contentPool.push(buffer);
  }
  return subtle()
    .sign('HMAC', cryptoKey, signedContent(prefix, body))
    .then((mac) => use(new Uint8Array(mac), arg));
}

function webHmacWith<A, T>(key: HmacKey, prefix: string, body: Uint8Array, use: (mac: Uint8Array, arg: A) => T, arg: A): Promise<T> {
  const webKey = key as WebHmacKey;
  // Once the key is imported, one promise per call: no async wrapper around WebCrypto's own.
  const cryptoKey = webKey.cryptoKey;
  if (cryptoKey === undefined) return webHmacCryptoKey(webKey).then((imported) => webHmac(imported, prefix, body, use, arg));
  return webHmac(cryptoKey, prefix, body, use, arg);
}

/** The WebCrypto backend, used where `node:crypto` is absent (and by tests, to cover this path). */
export const webCryptoBackend: CryptoBackend = {
  name: 'webcrypto',
  synchronousHmac: false,
  importHmacKey(raw) {
    const key: WebHmacKey = { raw, cryptoKey: undefined, pending: undefined };
    return key;
  },
  hmacWith: webHmacWith,
  importEd25519PublicKey(raw) {
    const key: WebEd25519PublicKey = { raw, pending: undefined };
    return key;
  },
  async ed25519Verify(key, content, signature) {
    const webKey = key as WebEd25519PublicKey;
    webKey.pending ??= subtle().importKey('raw', source(webKey.raw), { name: 'Ed25519' }, false, ['verify']);
    return subtle().verify({ name: 'Ed25519' }, await webKey.pending, source(signature), source(content));
  },
  importEd25519SecretKey(seed) {
    const key: WebEd25519SecretKey = { seed, pending: undefined };
    return key;
  },
  async ed25519SignBase64(key, prefix, body) {
    const webKey = key as WebEd25519SecretKey;
    webKey.pending ??= subtle().importKey('pkcs8', concatBytes(PKCS8_ED25519_PREFIX, webKey.seed), { name: 'Ed25519' }, false, ['sign']);
    const signature = await subtle().sign({ name: 'Ed25519' }, await webKey.pending, signedContent(prefix, body));
    return base64Encode(new Uint8Array(signature));
  },
};

// ---------------------------------------------------------------------------------------------
// node:crypto, typed by the little of it this file uses (the core compiles without Node types).

interface NodeKeyObject {
  readonly type: string;
}
interface NodeHmac {
  update(data: string | Uint8Array): NodeHmac;
  digest(encoding: 'base64'): string;
}
interface NodeCrypto {
  createHmac(algorithm: 'sha256', key: NodeKeyObject): NodeHmac;
  createHash?(algorithm: 'sha256'): { update(data: Uint8Array): { digest(): Uint8Array } };
  createSecretKey(key: Uint8Array): NodeKeyObject;
  createPublicKey(key: { key: Uint8Array; format: 'der'; type: 'spki' }): NodeKeyObject;
  createPrivateKey(key: { key: Uint8Array; format: 'der'; type: 'pkcs8' }): NodeKeyObject;
  verify(algorithm: null, data: Uint8Array, key: NodeKeyObject, signature: Uint8Array): boolean;
  sign(algorithm: null, data: Uint8Array, key: NodeKeyObject): Uint8Array;
}

interface NodeHmacKey extends HmacKey {
  keyObject: NodeKeyObject;
}
interface NodeEd25519PublicKey extends Ed25519PublicKey {
  keyObject: NodeKeyObject;
}
interface NodeEd25519SecretKey extends Ed25519SecretKey {
  keyObject: NodeKeyObject;
}

function nodeBackend(node: NodeCrypto): CryptoBackend {
  return {
    name: 'node',
    synchronousHmac: true,
    importHmacKey(raw) {
      const key: NodeHmacKey = { raw, keyObject: node.createSecretKey(raw) };
      return key;
    },
    hmacWith(key, prefix, body, use, arg) {
      // Two update() calls cost the same as hashing one pre-built buffer, with no copy of the body.
      return use(node.createHmac('sha256', (key as NodeHmacKey).keyObject).update(prefix).update(body).digest('base64'), arg);
    },
    importEd25519PublicKey(raw) {
      const keyObject = node.createPublicKey({ key: concatBytes(SPKI_ED25519_PREFIX, raw), format: 'der', type: 'spki' });
      const key: NodeEd25519PublicKey = { raw, keyObject };
      return key;
    },
    async ed25519Verify(key, content, signature) {
      return node.verify(null, content, (key as NodeEd25519PublicKey).keyObject, signature);
    },
    importEd25519SecretKey(seed) {
      const der = concatBytes(PKCS8_ED25519_PREFIX, seed);
      const key: NodeEd25519SecretKey = { seed, keyObject: node.createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }) };
      return key;
    },
    async ed25519SignBase64(key, prefix, body) {
      const signature = node.sign(null, signedContent(prefix, body), (key as NodeEd25519SecretKey).keyObject);
      return base64Encode(signature);
    },
  };
}

function findNodeCrypto(): NodeCrypto | undefined {
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  if (typeof proc?.getBuiltinModule !== 'function') return undefined;
  try {
    const mod = proc.getBuiltinModule('node:crypto') as Partial<NodeCrypto> | undefined;
    return typeof mod?.createHmac === 'function' && typeof mod.createSecretKey === 'function' ? (mod as NodeCrypto) : undefined;
  } catch {
    return undefined;
  }
}

const foundNodeCrypto = findNodeCrypto();

/** node:buffer's base64, for Node lines whose `Uint8Array` has no `toBase64` (22 and 24). */
function registerNodeBase64(): void {
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  if (typeof proc?.getBuiltinModule !== 'function') return;
  try {
    type NodeBuffer = { from(buffer: ArrayBufferLike, offset: number, length: number): { toString(encoding: 'base64'): string } };
    const buffer = (proc.getBuiltinModule('node:buffer') as { Buffer?: NodeBuffer } | undefined)?.Buffer;
    if (typeof buffer?.from === 'function') useBulkBase64Encoder((bytes) => buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64'));
  } catch {
    // No node:buffer: the portable encoder stays.
  }
}
registerNodeBase64();

/**
 * SHA-256 of `data`: at once with node:crypto (about 1 µs for a short input), else through
 * WebCrypto's `digest` (a promise; on Node its thread-pool round trip cost some 17 µs of CPU).
 */
export function sha256(data: Uint8Array): Uint8Array | Promise<Uint8Array> {
  const node = foundNodeCrypto;
  if (typeof node?.createHash === 'function') return node.createHash('sha256').update(data).digest();
  return subtle()
    .digest('SHA-256', source(data))
    .then((digest) => new Uint8Array(digest));
}

/** The backend this runtime uses by default: `node:crypto` when present, else WebCrypto. */
export const defaultBackend: CryptoBackend = foundNodeCrypto ? nodeBackend(foundNodeCrypto) : webCryptoBackend;

/** Fresh random bytes from the runtime's CSPRNG (`crypto.getRandomValues` exists everywhere). */
export function randomBytes(length: number): Uint8Array {
  return globalThis.crypto.getRandomValues(new Uint8Array(length));
}

/** A fresh Ed25519 key pair as raw bytes: the 32-byte seed and the 32-byte public key. */
export async function generateEd25519(): Promise<{ seed: Uint8Array; publicKey: Uint8Array }> {
  const pair = (await subtle().generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair;
  const jwk = await subtle().exportKey('jwk', pair.privateKey);
  if (typeof jwk.d !== 'string' || typeof jwk.x !== 'string') throw new Error('the runtime exported an Ed25519 key without its seed');
  return { seed: base64UrlDecode(jwk.d), publicKey: base64UrlDecode(jwk.x) };
}

function base64UrlDecode(text: string): Uint8Array {
  const bytes = base64Decode(text.replace(/-/g, '+').replace(/_/g, '/'));
  if (!bytes) throw new Error('the runtime exported an Ed25519 JWK that is not base64url');
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Ed25519 public keys checked once, at start-up (BigInt arithmetic: slow, but never per request).

const P = (1n << 255n) - 19n;
const D = (-121665n * modPow(121666n, P - 2n)) % P;
const SQRT_M1 = modPow(2n, (P - 1n) / 4n);

function mod(a: bigint): bigint {
  const r = a % P;
  return r < 0n ? r + P : r;
}
function modPow(base: bigint, exponent: bigint): bigint {
  let result = 1n;
  let b = ((base % P) + P) % P;
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
  }
  return result;
}
const inverse = (a: bigint): bigint => modPow(a, P - 2n);

/** Edwards addition (complete on Ed25519: `d` is not a square), affine coordinates. */
function addPoints([x1, y1]: [bigint, bigint], [x2, y2]: [bigint, bigint]): [bigint, bigint] {
  const t = mod(D * x1 * x2 * y1 * y2);
  return [mod((x1 * y2 + y1 * x2) * inverse(1n + t)), mod((y1 * y2 + x1 * x2) * inverse(1n - t))];
}

/**
 * Why a 32-byte Ed25519 public key must not be trusted, or `undefined` when it is sound. Refused:
 * a non-canonical encoding (y ≥ p, or x = 0 with the sign bit set: RFC 8032 section 5.1.3), bytes
 * that are no point on the curve, and the points of small order (the identity, the all-zero key
 * and the others of order 2, 4 or 8). A small-order key is no key: with the identity, a
 * signature whose R is the identity and S is 0 verifies for every message under lax verifiers.
 */
export function ed25519PublicKeyProblem(raw: Uint8Array): string | undefined {
  if (raw.length !== 32) return `it is ${raw.length} bytes, not 32`;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? raw[i]! & 0x7f : raw[i]!);
  const sign = raw[31]! >> 7;
  if (y >= P) return 'its encoding is not canonical (y is not reduced modulo 2^255 - 19)';
  const y2 = mod(y * y);
  const u = mod(y2 - 1n);
  const v = mod(D * y2 + 1n);
  let x = mod(u * v * v * v * modPow(u * modPow(v, 7n), (P - 5n) / 8n));
  if (mod(v * x * x) !== u) {
    if (mod(v * x * x) !== mod(-u)) return 'its bytes are not a point on the Ed25519 curve';
    x = mod(x * SQRT_M1);
  }
  if (x === 0n && sign === 1) return 'its encoding is not canonical (x is 0 with the sign bit set)';
  if (Number(x & 1n) !== sign) x = mod(-x);
  let point: [bigint, bigint] = [x, y];
  for (let i = 0; i < 3; i++) point = addPoints(point, point);
  if (point[0] === 0n && point[1] === 1n) return 'it is a point of small order (the identity, the all-zero key, or another point of order 2, 4 or 8), which any signature can be forged for';
  return undefined;
}

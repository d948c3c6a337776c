/**
 * Byte helpers that run everywhere: no `Buffer`, no `atob` quirks. Base64 here is the standard
 * alphabet (RFC 4648 section 4), the one Standard Webhooks uses for secrets, keys and signatures.
 *
 * Encoders use the runtime's native `Uint8Array.prototype.toBase64` / `toHex` (ES2026) where it
 * has them, and the loops below otherwise. The decoders stay on the loops: the native
 * `Uint8Array.fromBase64` skips ASCII whitespace, which a secret pasted with a newline must not
 * get through, and none of its modes is "padding optional, unused bits zero", the strictness
 * signatures are checked with.
 */

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const DECODE = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;

export const utf8Encoder = new TextEncoder();
export const utf8Decoder = new TextDecoder();

/** `Uint8Array.prototype.toBase64` (ES2026), where the runtime has it (Node 26, current browsers). */
const nativeToBase64 = (Uint8Array.prototype as { toBase64?: (this: Uint8Array) => string }).toBase64;

/**
 * A native encoder for long inputs, where the runtime has one: the standard method, or one the
 * runtime module registers (node:buffer on Node lines without it). Each call through the loop
 * below costs about 7 µs per KiB, which an inbox's accept paid for every body.
 */
let bulkEncoder: ((bytes: Uint8Array) => string) | undefined = nativeToBase64 === undefined ? undefined : (bytes) => nativeToBase64.call(bytes);

/** Registers the runtime's native base64 encoder when the language has none. Internal (crypto.ts). */
export function useBulkBase64Encoder(encode: (bytes: Uint8Array) => string): void {
  bulkEncoder ??= encode;
}

/** '00' to 'ff': one look-up per byte. */
export const HEX_PAIRS: readonly string[] = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

/** `Uint8Array.prototype.toHex` (ES2026), where the runtime has it (Node 26, current browsers). */
const nativeToHex = (Uint8Array.prototype as { toHex?: (this: Uint8Array) => string }).toHex;

/**
 * Lower-case hex of `bytes` (of `bytes[start..end)` when given). A range is read in place, by the
 * loop: a view for the native method would cost an object on every call (ownership tokens).
 */
export function toHex(bytes: Uint8Array, start = 0, end = bytes.length): string {
  if (nativeToHex !== undefined && start === 0 && end === bytes.length) return nativeToHex.call(bytes);
  let hex = '';
  for (let i = start; i < end; i++) hex += HEX_PAIRS[bytes[i]!]!;
  return hex;
}

/** Standard base64 with padding. */
export function base64Encode(bytes: Uint8Array): string {
  // Short inputs (MACs, keys) are as quick in the loop as through a native call.
  if (bytes.length > 96 && bulkEncoder !== undefined) return bulkEncoder(bytes);
  let out = '';
  const full = bytes.length - (bytes.length % 3);
  let i = 0;
  for (; i < full; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += ALPHABET[n >>> 18]! + ALPHABET[(n >>> 12) & 63]! + ALPHABET[(n >>> 6) & 63]! + ALPHABET[n & 63]!;
  }
  const rest = bytes.length - full;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += ALPHABET[n >>> 18]! + ALPHABET[(n >>> 12) & 63]! + '==';
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += ALPHABET[n >>> 18]! + ALPHABET[(n >>> 12) & 63]! + ALPHABET[(n >>> 6) & 63]! + '=';
  }
  return out;
}

/**
 * Strict standard base64: only the standard alphabet, padding optional but correct when present,
 * no whitespace. Returns `undefined` for anything else, so callers can say what was wrong.
 */
export function base64Decode(text: string): Uint8Array | undefined {
  return decodeBase64(text, true);
}

/**
 * Base64 as every Standard Webhooks reference library decodes a secret: the standard alphabet,
 * `=` padding optional, and the unused bits of the last character ignored (the Python suite's
 * `MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS`, its padded form and the 34-character `…LaSwBr` all decode).
 * Secrets only: signatures keep the strict {@link base64Decode}. `undefined` for anything else.
 */
export function base64DecodeLenient(text: string): Uint8Array | undefined {
  return decodeBase64(text, false);
}

/**
 * Both decoders. `strict` adds two checks: padding, when present, makes the length a multiple of
 * four, and the unused bits of the last character are zero.
 */
function decodeBase64(text: string, strict: boolean): Uint8Array | undefined {
  let end = text.length;
  if (end > 0 && text.charCodeAt(end - 1) === 61 /* = */) end--;
  if (end > 0 && text.charCodeAt(end - 1) === 61) end--;
  if (strict && end < text.length && text.length % 4 !== 0) return undefined;
  // One character alone carries 6 bits: no byte, and no library decodes it.
  if (end % 4 === 1) return undefined;
  const out = new Uint8Array(Math.floor((end * 3) / 4));
  // Only the low `bits` bits of `buffer` are ever read: the 32-bit shift drops the rest.
  let buffer = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < end; i++) {
    const code = text.charCodeAt(i);
    const value = code < 128 ? DECODE[code]! : -1;
    if (value < 0) return undefined;
    buffer = (buffer << 6) | value;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (buffer >>> bits) & 0xff;
    }
  }
  // Leftover bits must be zero, or two different strings would decode to the same bytes.
  if (strict && (buffer & ((1 << bits) - 1)) !== 0) return undefined;
  return out;
}

/** The bytes of a body given as a string, `Uint8Array` (a Node `Buffer` is one) or `ArrayBuffer`. */
export function toBytes(body: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (body instanceof Uint8Array) return body;
  if (typeof body === 'string') return utf8Encoder.encode(body);
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  // Cross-realm ArrayBuffer or a typed array from another realm (vm contexts, iframes).
  if (ArrayBuffer.isView(body)) {
    const view = body as ArrayBufferView;
    return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  }
  if (Object.prototype.toString.call(body) === '[object ArrayBuffer]') return new Uint8Array(body);
  throw new TypeError('webhook body must be a string, a Uint8Array (or Buffer) or an ArrayBuffer');
}

/** Chunks read from a stream, joined into one array of `total` bytes. */
export function concatChunks(chunks: readonly Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

export function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/**
 * Compares two strings in time that depends only on their length, never on where they differ.
 * Callers compare values of public, fixed length (a base64 HMAC-SHA256 is always 44 characters),
 * so returning early on a length difference leaks nothing secret.
 */
export function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** Base64 alphabet as character codes, for {@link constantTimeEqualBase64}. */
const ALPHABET_CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const PAD = 0x3d;

/**
 * Whether `a` is the padded base64 of `bytes`, compared in constant time like
 * {@link constantTimeEqual}, without building the base64 text: each character is encoded and
 * compared in one pass (WebCrypto hands back a MAC as bytes; encoding it to a string cost a tenth of
 * a verification with 64 in flight).
 */
export function constantTimeEqualBase64(a: string, bytes: Uint8Array): boolean {
  if (a.length !== Math.ceil(bytes.length / 3) * 4) return false;
  const full = bytes.length - (bytes.length % 3);
  let diff = 0;
  let i = 0;
  for (let at = 0; at < full; at += 3, i += 4) {
    const n = (bytes[at]! << 16) | (bytes[at + 1]! << 8) | bytes[at + 2]!;
    diff |= a.charCodeAt(i) ^ ALPHABET_CODES[n >>> 18]!;
    diff |= a.charCodeAt(i + 1) ^ ALPHABET_CODES[(n >>> 12) & 63]!;
    diff |= a.charCodeAt(i + 2) ^ ALPHABET_CODES[(n >>> 6) & 63]!;
    diff |= a.charCodeAt(i + 3) ^ ALPHABET_CODES[n & 63]!;
  }
  const rest = bytes.length - full;
  if (rest !== 0) {
    // One or two bytes left: two or three characters, then padding to four.
    const n = (bytes[full]! << 16) | ((rest === 2 ? bytes[full + 1]! : 0) << 8);
    diff |= a.charCodeAt(i) ^ ALPHABET_CODES[n >>> 18]!;
    diff |= a.charCodeAt(i + 1) ^ ALPHABET_CODES[(n >>> 12) & 63]!;
    diff |= a.charCodeAt(i + 2) ^ (rest === 2 ? ALPHABET_CODES[(n >>> 6) & 63]! : PAD);
    diff |= a.charCodeAt(i + 3) ^ PAD;
  }
  return diff === 0;
}

/**
 * `text` with every control character written as a visible escape (`\n` as `\x0a`, ESC as
 * `\x1b`): C0, DEL, C1 and the Unicode line and paragraph separators. For text log lines built
 * from request values, so a client cannot end a line and forge the next one, or send terminal
 * escape sequences to whoever reads the log.
 */
export function escapeControlCharacters(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => {
    const code = c.charCodeAt(0);
    return code > 0xff ? `\\u${code.toString(16).padStart(4, '0')}` : `\\x${code.toString(16).padStart(2, '0')}`;
  });
}

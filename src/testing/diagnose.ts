/**
 * Diagnosing a signature that does not match: redo the usual sender bugs and see which one
 * reproduces a signature found in the header. Every candidate goes through the core's own HMAC and
 * Ed25519 (crypto.ts) and the core's constant-time comparison; nothing computed here is ever
 * printed, since an expected signature for this body would be a valid forgery.
 */

import { defaultBackend, hmacBase64, signedContent, type CryptoBackend, type Ed25519PublicKey, type HmacKey } from '../crypto.ts';
import { base64Decode, base64Encode, constantTimeEqual, utf8Encoder } from '../lib/encoding.ts';
import { decodeSecrets, secretList, type SecretInput } from '../secrets.ts';
import type { ParsedSignatures } from '../verify.ts';
import { bodyText } from './recorded.ts';

interface HmacCandidate {
  label: string;
  key: HmacKey;
  /** The secret's base64 text (without `whsec_`), from which the text-key bugs are rebuilt. */
  text: string;
}
interface Ed25519Candidate {
  label: string;
  key: Ed25519PublicKey;
}

/** The trusted keys, decoded for diagnosis. */
export interface DiagnosisKeys {
  hmac: HmacCandidate[];
  ed25519: Ed25519Candidate[];
  /** One line per key: how it is named in messages (by index and keyId, never by value). */
  described: string[];
}

/** How a key is named in a message: `secrets[1] (keyId "old")`. */
export function keyLabel(index: number, keyId: string | undefined): string {
  return keyId === undefined ? `secrets[${index}]` : `secrets[${index}] (keyId ${JSON.stringify(keyId)})`;
}

/** Decodes `secrets` the way the verifier does (same errors for bad ones). */
export function diagnosisKeys(secrets: SecretInput | readonly SecretInput[], backend: CryptoBackend = defaultBackend): DiagnosisKeys {
  const keys: DiagnosisKeys = { hmac: [], ed25519: [], described: [] };
  let index = 0;
  secretList(secrets).forEach((input, position) => {
    const given = typeof input === 'string' ? input : typeof input === 'object' && !(input instanceof Uint8Array) ? input.key : undefined;
    // A comma-separated string is several secrets, numbered as the verifier numbers them.
    const texts = typeof given === 'string' ? given.split(/,[ ]*/) : [];
    decodeSecrets(input, position, 'verify').forEach((material, part) => {
      const label = keyLabel(index++, material.keyId);
      if (material.kind === 'hmac') {
        const one = texts[part];
        const text = typeof one === 'string' ? (one.startsWith('whsec_') ? one.slice(6) : one) : base64Encode(material.raw);
        keys.hmac.push({ label, key: backend.importHmacKey(material.raw), text });
        keys.described.push(`${label}: v1 HMAC secret`);
      } else if (material.kind === 'ed25519-public') {
        keys.ed25519.push({ label, key: backend.importEd25519PublicKey(material.raw) });
        keys.described.push(`${label}: v1a Ed25519 public key`);
      }
    });
  });
  return keys;
}

/** What was signed, as the request carries it. */
export interface DiagnosisSubject {
  id: string;
  timestampText: string;
  body: Uint8Array;
  signatures: ParsedSignatures;
  /** Other ids the request carries (an `svix-id` beside a different `webhook-id`). */
  headerIds: { name: string; value: string }[];
}

/** The outcome: whether the signature is valid as sent, and which sender bugs reproduce it. */
export interface Diagnosis {
  /** The key that verifies the request exactly as sent (only the time check failed). */
  validAsSent: string | undefined;
  /** One sentence per reproduced bug. */
  findings: string[];
  /** What was tried, for the message when nothing matched. */
  tried: string[];
  /** Per version, when the header had more distinct entries than the diagnosis tries. */
  capped: { version: 'v1' | 'v1a'; tried: number; distinct: number }[];
  /** True when the deadline passed before every candidate was tried. */
  stopped?: boolean;
}

/** Bounds on the brute-force parts, so a failing assertion stays fast on every backend. */
const TIMESTAMP_DRIFT_SECONDS = 300;
/**
 * Distinct entries per version the diagnosis tries. Every candidate Ed25519 check runs once per
 * v1a entry, about 1 600 candidates per key: a header of 64 entries made one failed assertion take
 * seconds, and `listen` diagnoses each failed delivery before it answers. A sender sends one entry
 * per key it signs with, so a handful covers any real rotation.
 */
export const DIAGNOSED_ENTRIES_PER_VERSION = 4;

/**
 * Base64 decoded the lenient way Node's `Buffer.from(text, 'base64')` does it: both alphabets,
 * other characters skipped, leftover bits dropped. That is how a `whsec_` prefix left in the
 * secret turns into key bytes without any error on the sender's side.
 */
export function lenientBase64Decode(text: string): Uint8Array {
  const out: number[] = [];
  let buffer = 0;
  let bits = 0;
  for (const char of text) {
    let value: number;
    if (char >= 'A' && char <= 'Z') value = char.charCodeAt(0) - 65;
    else if (char >= 'a' && char <= 'z') value = char.charCodeAt(0) - 71;
    else if (char >= '0' && char <= '9') value = char.charCodeAt(0) + 4;
    else if (char === '+' || char === '-') value = 62;
    else if (char === '/' || char === '_') value = 63;
    else if (char === '=') break;
    else continue;
    buffer = ((buffer << 6) | value) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push((buffer >>> bits) & 0xff);
    }
  }
  return Uint8Array.from(out);
}

/** The first `DIAGNOSED_ENTRIES_PER_VERSION` distinct entries, and how many distinct ones there were. */
function firstDistinct(entries: readonly string[]): { kept: string[]; distinct: number } {
  const distinct = [...new Set(entries)];
  return { kept: distinct.slice(0, DIAGNOSED_ENTRIES_PER_VERSION), distinct: distinct.length };
}

class SignatureMatcher {
  readonly #backend: CryptoBackend;
  readonly #v1: string[];
  readonly #v1a: Uint8Array[];
  readonly capped: Diagnosis['capped'] = [];

  constructor(backend: CryptoBackend, signatures: ParsedSignatures) {
    this.#backend = backend;
    const v1 = firstDistinct(signatures.v1);
    // Only entries that can be Ed25519 signatures at all count towards the cap.
    const v1a = firstDistinct(signatures.v1a.filter((entry) => base64Decode(entry)?.length === 64));
    this.#v1 = v1.kept;
    this.#v1a = v1a.kept.map((entry) => base64Decode(entry)!);
    if (v1.distinct > v1.kept.length) this.capped.push({ version: 'v1', tried: v1.kept.length, distinct: v1.distinct });
    if (v1a.distinct > v1a.kept.length) this.capped.push({ version: 'v1a', tried: v1a.kept.length, distinct: v1a.distinct });
  }

  get hasEntries(): boolean {
    return this.#v1.length > 0 || this.#v1a.length > 0;
  }

  /** The label of the first key whose signature over `id.timestamp.body` is in the header. */
  async match(hmac: readonly { label: string; key: HmacKey }[], ed25519: readonly Ed25519Candidate[], id: string, timestamp: string, body: Uint8Array): Promise<string | undefined> {
    const prefix = `${id}.${timestamp}.`;
    if (this.#v1.length > 0) {
      for (const candidate of hmac) {
        const expected = await hmacBase64(this.#backend, candidate.key, prefix, body);
        if (this.#v1.some((entry) => constantTimeEqual(entry, expected))) return candidate.label;
      }
    }
    const content = this.#v1a.length > 0 && ed25519.length > 0 ? signedContent(prefix, body) : undefined;
    for (const signature of this.#v1a) {
      for (const candidate of ed25519) {
        if (await this.#backend.ed25519Verify(candidate.key, content!, signature)) return candidate.label;
      }
    }
    return undefined;
  }
}

/** Python's `json.dumps` default layout (`", "` and `": "`), which many senders sign with. */
function pythonStyleJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonStyleJson).join(', ')}]`;
  if (typeof value === 'object' && value !== null) {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pythonStyleJson(v)}`).join(', ')}}`;
  }
  return JSON.stringify(value);
}

interface BodyVariant {
  body: Uint8Array;
  how: string;
}

function bodyVariants(body: Uint8Array): { variants: BodyVariant[]; jsonTried: boolean } {
  const text = bodyText(body);
  const variants: BodyVariant[] = [];
  const seen = new Set<string>(text === undefined ? [] : [text]);
  const add = (candidate: string, how: string) => {
    if (seen.has(candidate)) return;
    seen.add(candidate);
    variants.push({ body: utf8Encoder.encode(candidate), how });
  };
  let jsonTried = false;
  if (text !== undefined) {
    // The newline first: when a body differs only by it, that is the simpler explanation.
    if (text.endsWith('\r\n')) add(text.slice(0, -2), 'without its trailing CRLF');
    if (text.endsWith('\n')) add(text.slice(0, -1), 'without its trailing newline');
    else {
      add(`${text}\n`, 'with a trailing newline added');
      add(`${text}\r\n`, 'with a trailing CRLF added');
    }
    let parsed: unknown;
    let isJson = false;
    try {
      parsed = JSON.parse(text);
      isJson = true;
    } catch {
      // Not JSON: only the newline variants apply.
    }
    if (isJson) {
      jsonTried = true;
      const forms: [string, string][] = [
        [JSON.stringify(parsed), 'JSON.stringify(JSON.parse(body)) (compact)'],
        [JSON.stringify(parsed, null, 2), 'JSON.stringify(JSON.parse(body), null, 2) (pretty-printed)'],
        [JSON.stringify(parsed, null, 4), 'JSON.stringify(JSON.parse(body), null, 4) (pretty-printed)'],
        [JSON.stringify(parsed, null, '\t'), "JSON.stringify(JSON.parse(body), null, '\\t') (pretty-printed)"],
        [pythonStyleJson(parsed), 'Python-style json.dumps (", " and ": " separators)'],
      ];
      for (const [form, how] of forms) {
        add(form, `re-serialised as ${how}`);
        add(`${form}\n`, `re-serialised as ${how} with a trailing newline`);
      }
    }
  } else {
    // Binary body: the newline variants only, on the bytes.
    const last = body[body.length - 1];
    if (last === 0x0a) variants.push({ body: body.slice(0, -1), how: 'without its trailing newline' });
    else {
      const added = new Uint8Array(body.length + 1);
      added.set(body);
      added[body.length] = 0x0a;
      variants.push({ body: added, how: 'with a trailing newline added' });
    }
  }
  return { variants, jsonTried };
}

const ID_FIELDS = ['id', 'webhook_id', 'webhookId', 'message_id', 'messageId', 'msg_id', 'event_id', 'eventId'] as const;

/** Ids a sender may have signed instead of the one it sent. */
function idVariants(subject: DiagnosisSubject): { id: string; where: string }[] {
  const out: { id: string; where: string }[] = [];
  const seen = new Set<string>([subject.id]);
  const add = (id: string, where: string) => {
    if (seen.has(id)) return;
    seen.add(id);
    out.push({ id, where });
  };
  for (const { name, value } of subject.headerIds) add(value, `the ${name} header`);
  const text = bodyText(subject.body);
  if (text !== undefined) {
    try {
      const parsed: unknown = JSON.parse(text);
      const records: [Record<string, unknown>, string][] = [];
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
        const root = parsed as Record<string, unknown>;
        records.push([root, '']);
        if (typeof root.data === 'object' && root.data !== null && !Array.isArray(root.data)) records.push([root.data as Record<string, unknown>, 'data.']);
      }
      for (const [record, path] of records) {
        for (const field of ID_FIELDS) {
          const value = record[field];
          if (typeof value === 'string' || typeof value === 'number') add(String(value), `the body's "${path}${field}" field`);
        }
      }
    } catch {
      // Not JSON: no ids in the body.
    }
  }
  // A template string over a missing field (`${event.id}`) signs these.
  add('undefined', 'a missing value interpolated as "undefined"');
  add('null', 'a missing value interpolated as "null"');
  add('', 'an empty id');
  return out;
}

/**
 * Tries the usual sender bugs against the signatures in the header.
 *
 * Bounded: at most `2 * TIMESTAMP_DRIFT_SECONDS + 1000 + a few dozen` candidates per key, each an
 * HMAC (compared with every kept v1 entry) or one Ed25519 check per kept v1a entry.
 */
export async function diagnoseSignatures(
  keys: DiagnosisKeys,
  subject: DiagnosisSubject,
  backend: CryptoBackend = defaultBackend,
  deadlineMs = Number.POSITIVE_INFINITY,
): Promise<Diagnosis> {
  const inner = new SignatureMatcher(backend, subject.signatures);
  const diagnosis: Diagnosis = { validAsSent: undefined, findings: [], tried: [], capped: inner.capped };
  if (!inner.hasEntries || (keys.hmac.length === 0 && keys.ed25519.length === 0)) return diagnosis;
  // Past the deadline every candidate counts as tried and failed: the loops below then end at
  // once, and the diagnosis says it stopped (the CLI's listen bounds each diagnosis in time).
  const matcher = {
    match: async (...args: Parameters<SignatureMatcher['match']>) => {
      if (Date.now() > deadlineMs) {
        diagnosis.stopped = true;
        return undefined;
      }
      return inner.match(...args);
    },
  };
  const { id, timestampText, body } = subject;
  const match = (id2: string, timestamp: string, body2: Uint8Array) => matcher.match(keys.hmac, keys.ed25519, id2, timestamp, body2);

  diagnosis.validAsSent = await match(id, timestampText, body);
  if (diagnosis.validAsSent !== undefined) return diagnosis;

  // The key: Standard Webhooks secrets are base64; the bytes it decodes to are the HMAC key.
  if (keys.hmac.length > 0) {
    diagnosis.tried.push(`the secret used as UTF-8 text`, `the 'whsec_' prefix left in the key`);
    for (const candidate of keys.hmac) {
      const variants: [Uint8Array, string][] = [
        [
          utf8Encoder.encode(candidate.text),
          `the sender used ${candidate.label} as UTF-8 text instead of base64-decoding it: the HMAC key must be the bytes that the base64 after 'whsec_' decodes to`,
        ],
        [
          utf8Encoder.encode(`whsec_${candidate.text}`),
          `the sender left the 'whsec_' prefix in ${candidate.label} and used the whole string as UTF-8 text: strip 'whsec_' and base64-decode the rest`,
        ],
        [
          lenientBase64Decode(`whsec_${candidate.text}`),
          `the sender left the 'whsec_' prefix in ${candidate.label} before base64-decoding it (a lenient decoder such as Node's Buffer.from(secret, 'base64') reads 'whsec_' as data): strip the prefix first`,
        ],
      ];
      for (const [raw, finding] of variants) {
        if (raw.length === 0) continue;
        const label = await matcher.match([{ label: candidate.label, key: backend.importHmacKey(raw) }], [], id, timestampText, body);
        if (label !== undefined) diagnosis.findings.push(finding);
      }
    }
  }

  // The timestamp: Unix seconds, signed exactly as sent.
  if (/^[0-9]{1,12}$/.test(timestampText)) {
    diagnosis.tried.push('a millisecond timestamp in the signature', `a timestamp changed after signing (±${TIMESTAMP_DRIFT_SECONDS} s)`);
    for (let ms = 0; ms < 1000; ms++) {
      const signed = `${timestampText}${String(ms).padStart(3, '0')}`;
      const label = await match(id, signed, body);
      if (label !== undefined) {
        diagnosis.findings.push(
          `the signature was made over the millisecond timestamp ${signed} while webhook-timestamp carries the seconds ${timestampText}: sign the same seconds value that is sent`,
        );
        break;
      }
    }
    const seconds = Number(timestampText);
    for (let drift = 1; drift <= TIMESTAMP_DRIFT_SECONDS; drift++) {
      const found = await Promise.all([seconds - drift, seconds + drift].map(async (t) => (t >= 0 && (await match(id, String(t), body)) !== undefined ? t : undefined)));
      const t = found.find((value) => value !== undefined);
      if (t !== undefined) {
        diagnosis.findings.push(
          `the signature was made for webhook-timestamp ${t}, ${drift} s ${t < seconds ? 'before' : 'after'} the one sent: the timestamp was changed after signing (a retry must sign again with its new timestamp)`,
        );
        break;
      }
    }
  } else if (/^[0-9]{13,}$/.test(timestampText)) {
    diagnosis.tried.push('the seconds of a millisecond timestamp');
    const seconds = timestampText.slice(0, -3);
    if ((await match(id, seconds, body)) !== undefined) {
      diagnosis.findings.push(
        `the signature was made over the seconds ${seconds}, but webhook-timestamp carries milliseconds (${timestampText}): send the seconds that were signed`,
      );
    }
  }

  // The body: the exact bytes sent.
  const { variants, jsonTried } = bodyVariants(body);
  if (jsonTried) diagnosis.tried.push('JSON re-serialised (compact, indented by 2, 4 or a tab, Python-style)');
  diagnosis.tried.push('a trailing newline added or removed');
  for (const variant of variants) {
    if ((await match(id, timestampText, variant.body)) !== undefined) {
      diagnosis.findings.push(
        `the signature matches the body ${variant.how}: the bytes signed are not the bytes sent. Sign exactly the body that goes on the wire, and verify the raw bytes received`,
      );
    }
  }

  // The id: the one sent, exactly.
  const ids = idVariants(subject);
  diagnosis.tried.push(`other ids (${ids.map((candidate) => candidate.where.replace(/^the /, '')).join('; ')})`);
  for (const candidate of ids) {
    if ((await match(candidate.id, timestampText, body)) !== undefined) {
      diagnosis.findings.push(
        `the signature was made for the id ${JSON.stringify(candidate.id)} (${candidate.where}), not for webhook-id ${JSON.stringify(id)}: sign the id that is sent`,
      );
    }
  }
  return diagnosis;
}

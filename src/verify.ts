/**
 * The verifier: header parsing, the timestamp window, the signature list, the keys tried.
 * Standard Webhooks 1.0.0; see CONTRACT.md for what a receiver checks.
 *
 * The limits a request is held to live in `verify/limits.ts`, the reading of the three headers as
 * they come on the wire in `verify/wire.ts`; this file decodes the keys once, checks the window
 * and tries the keys.
 */

import { DEFAULT_MAX_BODY_BYTES, payloadTooLarge, readRequestBody } from './body.ts';
import { usePayload, validatedPayload, type StandardSchemaV1 } from './schema.ts';
import { defaultBackend, signedContent, type CryptoBackend, type Ed25519PublicKey, type HmacKey } from './crypto.ts';
import { base64Decode, constantTimeEqual, constantTimeEqualBase64, toBytes, utf8Decoder } from './encoding.ts';
import { bodyUnavailable, rejection, WebhookError } from './errors.ts';
import { webhookHeaders, type HeadersInput } from './headers.ts';
import { withTenant } from './rejection.ts';
import { decodeSecretList, type KeyMaterial, type SecretInput } from './secrets.ts';
import { DEFAULT_TOLERANCE_SECONDS, MAX_ID_LENGTH, MAX_V1A_ENTRIES } from './verify/limits.ts';
import { joined, parseSignatureHeader, parseTimestamp, plural, single, type ParsedSignatures } from './verify/wire.ts';

export { DEFAULT_TOLERANCE_SECONDS, MAX_ID_LENGTH, MAX_SIGNATURE_ENTRIES, MAX_SIGNATURE_HEADER_LENGTH, MAX_V1A_ENTRIES } from './verify/limits.ts';
export { parseSignatureHeader, type ParsedSignatures } from './verify/wire.ts';

/** A UTF-16 surrogate without its pair (in `u` mode a paired one is a single code point). */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * How a verifier decides what is authentic.
 *
 * @example
 * ```ts
 * import type { VerifierOptions } from 'webhook-receiver';
 * const options: VerifierOptions = {
 *   secrets: [process.env.WEBHOOK_SECRET!, process.env.WEBHOOK_SECRET_PREVIOUS!],
 *   toleranceSeconds: 300,
 * };
 * ```
 */
export interface VerifierOptions {
  /** Every trusted key. All are tried, so old and new secrets both validate during a rotation. */
  secrets: SecretInput | readonly SecretInput[];
  /** How far `webhook-timestamp` may be from the clock, past or future. Default 300. */
  toleranceSeconds?: number;
  /** The clock, in epoch milliseconds. Default `Date.now`. */
  now?: () => number;
  /**
   * What to do with a request that has no signature header at all. Default `'reject'`
   * (`MISSING_SIGNATURE`). With `'accept'` it passes with `signed: false`. A signature that is
   * present and does not match is always `SIGNATURE_MISMATCH`, never "unsigned".
   */
  unsigned?: 'reject' | 'accept';
  /** The largest body accepted, wherever the package reads one. Default 1 MiB. */
  maxBodyBytes?: number;
}

/**
 * A received request as headers and the exact bytes of its body.
 *
 * @example
 * ```ts
 * import type { WebhookInput } from 'webhook-receiver';
 * const input: WebhookInput = { headers: req.headers, body: rawBodyBuffer };
 * ```
 */
export interface WebhookInput {
  headers: HeadersInput;
  /** The raw body exactly as received. A Node `Buffer` is a `Uint8Array`. */
  body: string | Uint8Array | ArrayBuffer;
  /**
   * Where the request was sent, for tenant keys' `tenant` function (see `tenantKeys`); a verifier
   * with fixed `secrets` never reads these. The method, default `'POST'`.
   */
  method?: string;
  /**
   * The request's path as sent (percent-encoding intact), or its URL (`req.url`, a full URL): the
   * origin and anything from a `?` on are left out.
   */
  path?: string;
  /** The `Host` the request was sent to. */
  host?: string;
  /** The route's parameters, where the framework has them (`req.params` in Express). */
  params?: Readonly<Record<string, string | undefined>>;
}

/**
 * A webhook that passed verification (or, with `unsigned: 'accept'`, an unsigned one: check
 * `signed`).
 *
 * @example
 * ```ts
 * const webhook = await verifier.verify({ headers, body });
 * if (!webhook.signed) console.warn('unsigned event', webhook.id);
 * const event = webhook.json<{ type: string }>(); // unchecked; webhook.json(schema) validates
 * console.log(event.type, 'verified with key', webhook.keyId ?? webhook.keyIndex);
 * ```
 */
export interface VerifiedWebhook {
  /** `webhook-id`: the idempotency key, stable across retries. */
  readonly id: string;
  /** `webhook-timestamp`; for an unsigned request without one, the time it was received. */
  readonly timestamp: Date;
  /** Exactly the bytes that were verified. */
  readonly body: Uint8Array;
  /** The body decoded as UTF-8. */
  text(): string;
  /**
   * The body parsed as JSON, unchecked. A body that is not JSON throws a `WebhookError`
   * `INVALID_PAYLOAD` (400, the parser's `SyntaxError` as its `cause`): every adapter answers it
   * 400 and releases the claim, where a plain error would be a 500 the sender retries forever.
   */
  json<T = unknown>(): T;
  /**
   * The body parsed as JSON and validated by a Standard Schema (zod, valibot, arktype, …): the
   * typed value, or a `WebhookError` `INVALID_PAYLOAD` (400; the adapters answer it after
   * releasing the claim, so the sender sees why). A schema that validates asynchronously is
   * refused with a `TypeError`: use {@link VerifiedWebhook.parse}.
   */
  json<S extends StandardSchemaV1>(schema: S): StandardSchemaV1.InferOutput<S>;
  /** Like `json(schema)`, for schemas that validate synchronously or asynchronously. */
  parse<S extends StandardSchemaV1>(schema: S): Promise<StandardSchemaV1.InferOutput<S>>;
  /** False only when `unsigned: 'accept'` let an unsigned request in. */
  readonly signed: boolean;
  /** Which kind of signature matched. */
  readonly scheme: 'v1' | 'v1a' | undefined;
  /** Index in `secrets` of the key that matched. */
  readonly keyIndex: number | undefined;
  /** That key's `keyId`, when it was given one. */
  readonly keyId: string | undefined;
  /**
   * The tenant whose keys verified it (see `tenantKeys`); `undefined` for a verifier with fixed
   * `secrets`.
   */
  readonly tenant: string | undefined;
}

/**
 * A verifier with its keys decoded and imported once. Create one per endpoint, at start-up.
 *
 * @example
 * ```ts
 * import { createVerifier } from 'webhook-receiver';
 * const verifier = createVerifier({ secrets: process.env.WEBHOOK_SECRET! });
 * export default { fetch: async (request: Request) => {
 *   const webhook = await verifier.verifyRequest(request);
 *   return new Response(null, { status: 204 });
 * } };
 * ```
 */
export interface Verifier {
  /** Verifies headers and raw body. Rejects with a `WebhookError`. */
  verify(input: WebhookInput): Promise<VerifiedWebhook>;
  /** Verifies a Fetch `Request`, reading at most `maxBodyBytes` of its body. */
  verifyRequest(request: Request): Promise<VerifiedWebhook>;
}

/** `json()` without a schema: the parsed payload as it is. */
const asIs = (payload: unknown): unknown => payload;

class Webhook implements VerifiedWebhook {
  #text: string | undefined;
  constructor(
    readonly id: string,
    readonly timestamp: Date,
    readonly body: Uint8Array,
    readonly signed: boolean,
    readonly scheme: 'v1' | 'v1a' | undefined,
    readonly keyIndex: number | undefined,
    readonly keyId: string | undefined,
    readonly tenant: string | undefined,
  ) {}
  text(): string {
    return (this.#text ??= utf8Decoder.decode(this.body));
  }
  json<T = unknown>(): T;
  json<S extends StandardSchemaV1>(schema: S): StandardSchemaV1.InferOutput<S>;
  json(schema?: StandardSchemaV1): unknown {
    if (schema === undefined) return usePayload(this, asIs);
    return validatedPayload(this, schema, 'webhook.json(schema)', { sync: true });
  }
  parse<S extends StandardSchemaV1>(schema: S): Promise<StandardSchemaV1.InferOutput<S>> {
    return validatedPayload(this, schema, 'webhook.parse(schema)', { sync: false });
  }
}

/**
 * The raw bytes of a body handed to `verify`. Anything but text or bytes means the bytes that were
 * signed are gone (the classic failure: a JSON body parser ran first), which is a server-side
 * mistake with one fix, so it gets `BODY_UNAVAILABLE` with that fix as its `hint` rather than a bare TypeError.
 */
function rawBytes(body: unknown): Uint8Array {
  if (body instanceof Uint8Array) return body;
  if (typeof body === 'string' || body instanceof ArrayBuffer || ArrayBuffer.isView(body)) return toBytes(body as string | ArrayBuffer);
  if (Object.prototype.toString.call(body) === '[object ArrayBuffer]') return toBytes(body as ArrayBuffer);
  const what = body === undefined || body === null ? `no body (${String(body)})` : `a parsed ${Array.isArray(body) ? 'array' : typeof body}`;
  throw bodyUnavailable(
    `verify was given ${what} instead of the raw bytes received, so the signed content cannot be rebuilt ` +
      '(re-serialising parsed JSON does not give the same bytes). Pass the body as received: a string, Buffer, ' +
      'Uint8Array or ArrayBuffer (in Express, express.raw({ type: "*/*" }) on this route or the webhooks() middleware ' +
      'from webhook-receiver/express; with a Fetch Request, verifyRequest(request) before anything reads it)',
  );
}

interface Inspected {
  id: string;
  timestampText: string | undefined;
  timestampSeconds: number | undefined;
  signatures: ParsedSignatures | undefined;
}

/**
 * Whether a signature a key computed (base64 text from node:crypto, the raw MAC from WebCrypto) is
 * among the received `v1` candidates, each compared in constant time. (The computed one is named
 * `expected` where it is compared, as the source check in test/limits/constant-time.test.ts
 * requires.)
 */
function anyMatches(computed: string | Uint8Array, candidates: readonly string[]): boolean {
  const expected = computed;
  if (typeof expected === 'string') {
    for (const candidate of candidates) if (constantTimeEqual(candidate, expected)) return true;
  } else {
    for (const candidate of candidates) if (constantTimeEqualBase64(candidate, expected)) return true;
  }
  return false;
}

const SETTLED = Promise.resolve();

/**
 * A promise that rejects with `error` one turn from now. One rejected before its caller's `await`
 * attaches a handler goes through the runtime's unhandled-rejection bookkeeping (in Node: recorded,
 * then withdrawn), which cost about as much as the HMAC of a 1 KiB body (issue 17); handed back
 * pending, it has its handler by the time it rejects. Rejected from a microtask rather than by a
 * `then` callback that throws: a throw there cost twice as much (0.48 against 0.27 µs a refusal,
 * awaited and caught, on Node 20).
 */
export function rejectLater(error: unknown): Promise<never> {
  return new Promise<never>((_resolve, reject) => {
    queueMicrotask(() => reject(error));
  });
}

interface TrustedHmac {
  key: HmacKey;
  index: number;
  keyId: string | undefined;
}
interface TrustedEd25519 {
  key: Ed25519PublicKey;
  index: number;
  keyId: string | undefined;
}

/** A verifier's options other than its keys, checked. */
export interface VerifierSettings {
  readonly tolerance: number;
  readonly now: () => number;
  readonly acceptUnsigned: boolean;
  readonly maxBodyBytes: number;
}

/**
 * Checks a verifier's options other than `secrets` (a `TypeError` or `RangeError` saying how to
 * fix one). Internal: tenant keys check them once and build each tenant's verifier from them.
 */
export function verifierSettings(options: Omit<VerifierOptions, 'secrets'>): VerifierSettings {
  const { toleranceSeconds, now, unsigned, maxBodyBytes } = options;
  if (toleranceSeconds !== undefined && !(typeof toleranceSeconds === 'number' && Number.isFinite(toleranceSeconds) && toleranceSeconds > 0)) {
    throw new RangeError('toleranceSeconds must be a positive, finite number of seconds (default 300)');
  }
  if (now !== undefined && typeof now !== 'function') throw new TypeError('now must be a function returning epoch milliseconds');
  if (unsigned !== undefined && unsigned !== 'reject' && unsigned !== 'accept') {
    throw new TypeError(`unsigned must be 'reject' or 'accept'`);
  }
  if (maxBodyBytes !== undefined && !(Number.isSafeInteger(maxBodyBytes) && maxBodyBytes > 0)) {
    throw new RangeError('maxBodyBytes must be a positive whole number of bytes (default 1048576)');
  }
  return {
    tolerance: toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS,
    now: now ?? Date.now,
    acceptUnsigned: unsigned === 'accept',
    maxBodyBytes: maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
  };
}

class VerifierImpl implements Verifier {
  readonly #backend: CryptoBackend;
  readonly #hmac: TrustedHmac[] = [];
  readonly #ed25519: TrustedEd25519[] = [];
  readonly #tolerance: number;
  readonly #now: () => number;
  readonly #acceptUnsigned: boolean;
  readonly #maxBodyBytes: number;
  /** The tenant whose keys these are (tenant keys), set on every webhook this verifier passes. */
  readonly #tenant: string | undefined;
  /** The HMAC key that matched last: tried first, so steady state after a rotation costs one HMAC. */
  #preferred = 0;
  /** The mismatch message of the usual forgery (one v1 entry, nothing else), built once. */
  #oneEntryMismatch: string | undefined;
  /** How many well-formed `v1a` entries are checked at most: max(MAX_V1A_ENTRIES, public keys). */
  #v1aBound = 0;

  constructor(settings: VerifierSettings, keys: readonly KeyMaterial[], backend: CryptoBackend, tenant: string | undefined) {
    this.#backend = backend;
    this.#tolerance = settings.tolerance;
    this.#now = settings.now;
    this.#acceptUnsigned = settings.acceptUnsigned;
    this.#maxBodyBytes = settings.maxBodyBytes;
    this.#tenant = tenant;

    for (const material of keys) {
      const { index } = material;
      if (material.kind === 'hmac') this.#hmac.push({ key: backend.importHmacKey(material.raw), index, keyId: material.keyId });
      else if (material.kind === 'ed25519-public') {
        this.#ed25519.push({ key: backend.importEd25519PublicKey(material.raw), index, keyId: material.keyId });
      }
    }
    this.#v1aBound = Math.max(MAX_V1A_ENTRIES, this.#ed25519.length);
  }

  verify(input: WebhookInput): Promise<VerifiedWebhook> {
    if (typeof input !== 'object' || input === null || input.headers === undefined || input.headers === null) {
      return Promise.reject(new TypeError('verify needs { headers, body }'));
    }
    let outcome: Webhook | Promise<Webhook> | WebhookError;
    try {
      const inspected = this.#inspect(input.headers);
      const body = rawBytes(input.body);
      if (body.byteLength > this.#maxBodyBytes) throw payloadTooLarge(this.#maxBodyBytes, body.byteLength);
      outcome = this.#authenticate(inspected, body);
    } catch (error) {
      return rejectLater(withTenant(error, this.#tenant));
    }
    if (outcome instanceof Webhook) return Promise.resolve(outcome);
    if (outcome instanceof Error) return rejectLater(withTenant(outcome, this.#tenant));
    // The search's (or WebCrypto's) own promise, handed back as it is: an async function would
    // adopt it through more promise turns (64 in flight, issue 17).
    return outcome;
  }

  async verifyRequest(request: Request): Promise<VerifiedWebhook> {
    // Headers first: a stale or unsigned request is refused before its body is read.
    let inspected: Inspected;
    try {
      inspected = this.#inspect(request.headers);
    } catch (error) {
      // Not rejectLater: a promise returned from an async function is adopted a turn later, after
      // it rejected unwatched. One turn here, then the throw, has the caller's handler in place.
      await SETTLED;
      throw withTenant(error, this.#tenant);
    }
    let body: Uint8Array;
    try {
      body = await readRequestBody(request, this.#maxBodyBytes);
    } catch (error) {
      throw withTenant(error, this.#tenant);
    }
    // Past an await: the caller's handler is attached, so a rejection may happen at once.
    const outcome = this.#authenticate(inspected, body);
    if (outcome instanceof Webhook) return outcome;
    if (outcome instanceof Error) throw withTenant(outcome, this.#tenant);
    return await outcome;
  }

  #inspect(headers: HeadersInput): Inspected {
    const values = webhookHeaders(headers);
    const id = single(values.id, 'webhook-id', 'MISSING_ID');
    if (id === undefined || id === '') {
      throw rejection('MISSING_ID', 'webhook-id header is missing or empty (svix-id is accepted too)');
    }
    if (id.length > MAX_ID_LENGTH) {
      // Ids become idempotency keys: a cap keeps unsigned traffic (with unsigned: 'accept') from
      // filling a store with kilobyte-long keys.
      throw rejection('MISSING_ID', `webhook-id is ${id.length} characters long; the limit is ${MAX_ID_LENGTH}`);
    }
    if (LONE_SURROGATE.test(id)) {
      // The id is signed as UTF-8, where every lone surrogate becomes U+FFFD: 'a\uFFFD', 'a\uD800'
      // and 'a\uDFFD' would share one signature yet be three idempotency keys, so a captured
      // message could be replayed under a new key. No HTTP header carries one (header values are
      // bytes); only a hand-built headers object can.
      throw rejection('MISSING_ID', 'webhook-id contains a lone UTF-16 surrogate, which no HTTP header can carry');
    }
    const signatureHeader = joined(values.signature);
    const timestampText = single(values.timestamp, 'webhook-timestamp', 'INVALID_TIMESTAMP');
    let timestampSeconds: number | undefined;
    if (timestampText === undefined || timestampText === '') {
      if (signatureHeader !== undefined || !this.#acceptUnsigned) {
        throw rejection('MISSING_TIMESTAMP', 'webhook-timestamp header is missing or empty (svix-timestamp is accepted too)');
      }
    } else {
      timestampSeconds = parseTimestamp(timestampText);
      this.#checkWindow(timestampSeconds);
    }
    if (signatureHeader === undefined) {
      if (!this.#acceptUnsigned) {
        throw rejection(
          'MISSING_SIGNATURE',
          `webhook-signature header is missing: the request is unsigned. Unsigned events are refused unless the receiver opts in with unsigned: 'accept'`,
        );
      }
      return { id, timestampText, timestampSeconds, signatures: undefined };
    }
    return { id, timestampText, timestampSeconds, signatures: parseSignatureHeader(signatureHeader) };
  }

  /** The injected clock, checked: one returning NaN would make every window comparison false and let any timestamp through. */
  #clock(): number {
    const ms = this.#now();
    if (typeof ms !== 'number' || !Number.isFinite(ms)) {
      throw new TypeError(`now() returned ${typeof ms === 'number' ? String(ms) : `a ${typeof ms}`}; it must return epoch milliseconds (like Date.now())`);
    }
    return ms;
  }

  #checkWindow(timestamp: number): void {
    const now = Math.floor(this.#clock() / 1000);
    if (now - timestamp > this.#tolerance) {
      throw rejection(
        'TIMESTAMP_TOO_OLD',
        `webhook-timestamp is ${now - timestamp} s in the past; the tolerance is ${this.#tolerance} s (a replay, a late retry with an old signature, or a slow clock)`,
      );
    }
    if (timestamp - now > this.#tolerance) {
      throw rejection(
        'TIMESTAMP_TOO_NEW',
        `webhook-timestamp is ${timestamp - now} s in the future; the tolerance is ${this.#tolerance} s (check the sender's and this machine's clocks)`,
      );
    }
  }

  /**
   * The usual request in one synchronous step: one `v1` entry, signed by the key tried first, whose
   * HMAC node:crypto computes synchronously. An async function here would cost every request
   * several promise turns (a tenth of the verification at 1 KiB). Everything else (other keys,
   * several entries, Ed25519, WebCrypto's promises, a mismatch) goes on in {@link #search}, which
   * is handed the first key's outcome, so no key is hashed or compared twice. A forgery against
   * one key comes back as its error, for the caller to reject with (see {@link rejectLater}).
   */
  #authenticate(inspected: Inspected, body: Uint8Array): Webhook | Promise<Webhook> | WebhookError {
    const { id, timestampText, timestampSeconds, signatures } = inspected;
    const timestamp = new Date(timestampSeconds === undefined ? this.#clock() : timestampSeconds * 1000);
    if (signatures === undefined || timestampText === undefined) {
      return new Webhook(id, timestamp, body, false, undefined, undefined, undefined, this.#tenant);
    }
    const prefix = `${id}.${timestampText}.`;
    const first = this.#preferred;
    let tried: boolean | Promise<boolean> | undefined;
    if (signatures.v1.length === 1 && this.#hmac.length > 0) {
      // With one key and no Ed25519 work left, this key's outcome decides: a forgery is refused
      // at once, and WebCrypto's MAC is compared and answered in the one turn after its `sign`
      // settles rather than through the search's promise turns (issue 17).
      const decisive = this.#hmac.length === 1 && (signatures.v1a.length === 0 || this.#ed25519.length === 0);
      if (decisive && !this.#backend.synchronousHmac) {
        return this.#backend.hmacWith(
          this.#hmac[first]!.key,
          prefix,
          body,
          (mac, candidates) => {
            if (anyMatches(mac, candidates)) return this.#hmacWebhook(id, timestamp, body, first);
            throw this.#mismatch(signatures);
          },
          signatures.v1,
        );
      }
      const matched = this.#hmacMatches(first, prefix, body, signatures.v1);
      if (matched === true) return this.#hmacWebhook(id, timestamp, body, first);
      if (decisive && matched === false) return this.#mismatch(signatures);
      tried = matched;
    }
    return this.#search(id, timestamp, body, prefix, signatures, first, tried);
  }

  /** The keys tried in turn, from `first` (whose outcome may be `tried` already). */
  async #search(
    id: string,
    timestamp: Date,
    body: Uint8Array,
    prefix: string,
    signatures: ParsedSignatures,
    first: number,
    tried: boolean | Promise<boolean> | undefined,
  ): Promise<Webhook> {
    const hmacKeys = this.#hmac;
    if (signatures.v1.length > 0 && hmacKeys.length > 0) {
      for (let k = 0; k < hmacKeys.length; k++) {
        let slot = (first + k) % hmacKeys.length;
        if (!(await (k === 0 && tried !== undefined ? tried : this.#hmacMatches(slot, prefix, body, signatures.v1)))) continue;
        // A sender mid-rotation signs with old and new key alike. Report the first key in
        // `secrets` that matches, not whichever was tried first, so keyId says which key is still
        // needed. Only a multi-signed message whose match is not the first-listed key pays for it.
        if (signatures.v1.length > 1) {
          // Keys listed before `first` were not tried yet unless the search wrapped past the end.
          for (let earlier = 0; earlier < (slot >= first ? first : 0); earlier++) {
            if (await this.#hmacMatches(earlier, prefix, body, signatures.v1)) {
              slot = earlier;
              break;
            }
          }
        }
        return this.#hmacWebhook(id, timestamp, body, slot);
      }
    }

    if (signatures.v1a.length > 0 && this.#ed25519.length > 0) {
      // Unlike HMAC (one digest per key, whatever the entries), every v1a entry costs one Ed25519
      // verification per public key, each hashing the whole body: checked once per distinct entry
      // (the parser keeps them distinct), over signed content built once, and only the first
      // max(MAX_V1A_ENTRIES, keys) well-formed entries, so a forged header costs a bounded amount.
      const content = signedContent(prefix, body);
      let budget = this.#v1aBound;
      for (const candidate of signatures.v1a) {
        const signature = base64Decode(candidate);
        if (signature === undefined || signature.length !== 64) continue;
        if (budget-- === 0) break;
        for (const trusted of this.#ed25519) {
          if (await this.#backend.ed25519Verify(trusted.key, content, signature)) {
            return new Webhook(id, timestamp, body, true, 'v1a', trusted.index, trusted.keyId, this.#tenant);
          }
        }
      }
    }

    throw this.#mismatch(signatures);
  }

  /** No key matched: the refusal, noting this verifier's tenant (tenant keys) for the log. */
  #mismatch(signatures: ParsedSignatures): WebhookError {
    return withTenant(rejection('SIGNATURE_MISMATCH', this.#mismatchMessage(signatures)), this.#tenant);
  }

  /** The webhook signed by the HMAC key in `slot`, which is tried first from now on. */
  #hmacWebhook(id: string, timestamp: Date, body: Uint8Array, slot: number): Webhook {
    if (slot !== this.#preferred) this.#preferred = slot;
    const trusted = this.#hmac[slot]!;
    return new Webhook(id, timestamp, body, true, 'v1', trusted.index, trusted.keyId, this.#tenant);
  }

  /**
   * Whether the HMAC key in `slot` produced any of the `v1` candidates: at once when the backend
   * computes synchronously (node:crypto), as a promise when it does not (WebCrypto).
   */
  #hmacMatches(slot: number, prefix: string, body: Uint8Array, candidates: readonly string[]): boolean | Promise<boolean> {
    return this.#backend.hmacWith(this.#hmac[slot]!.key, prefix, body, anyMatches, candidates);
  }

  #mismatchMessage(s: ParsedSignatures): string {
    if (s.v1.length === 1 && s.v1a.length === 0 && s.unknown === 0 && s.malformed === 0) {
      return (this.#oneEntryMismatch ??= this.#buildMismatchMessage(s));
    }
    return this.#buildMismatchMessage(s);
  }

  #buildMismatchMessage(s: ParsedSignatures): string {
    const parts = [`${plural(s.v1.length, 'v1 entry', 'v1 entries')} tried against ${plural(this.#hmac.length, 'HMAC secret', 'HMAC secrets')}`];
    if (s.v1a.length > 0 || this.#ed25519.length > 0) {
      const bound = this.#v1aBound;
      const unchecked = this.#ed25519.length > 0 && s.v1a.length > bound ? ` (only the first ${bound} well-formed ones checked)` : '';
      parts.push(`${plural(s.v1a.length, 'v1a entry', 'v1a entries')}${unchecked} against ${plural(this.#ed25519.length, 'Ed25519 public key', 'Ed25519 public keys')}`);
    }
    if (s.unknown > 0) parts.push(`${plural(s.unknown, 'entry', 'entries')} of other versions ignored`);
    if (s.malformed > 0) parts.push(`${plural(s.malformed, 'malformed entry', 'malformed entries')} skipped`);
    let hint = 'check that the secret is current and that the body is the raw bytes received, not re-serialised JSON';
    if (s.v1.length === 0 && s.v1a.length === 0) hint = 'the header has no v1 or v1a entry this receiver understands';
    else if (s.v1.length > 0 && this.#hmac.length === 0 && s.v1a.length === 0) hint = `the header carries v1 (HMAC) signatures but only 'whpk_' public keys are configured`;
    else if (s.v1a.length > 0 && this.#ed25519.length === 0 && s.v1.length === 0) hint = `the header carries v1a (Ed25519) signatures but no 'whpk_' public key is configured`;
    return `no signature matched: ${parts.join('; ')}. Hint: ${hint}`;
  }
}

/** A verifier on a chosen crypto backend. Internal: tests and benchmarks use it to force WebCrypto. */
export function createVerifierWith(options: VerifierOptions, backend: CryptoBackend): Verifier {
  if (typeof options !== 'object' || options === null) throw new TypeError('createVerifier needs an options object with secrets');
  const settings = verifierSettings(options);
  return new VerifierImpl(settings, decodeSecretList(options.secrets, 'verify'), backend, undefined);
}

/**
 * A verifier of one tenant's keys, decoded and checked by the caller, with settings checked by
 * {@link verifierSettings}; the webhooks it passes carry `tenant`. Internal: tenant keys build one
 * per tenant and cache it.
 */
export function createTenantVerifier(settings: VerifierSettings, keys: readonly KeyMaterial[], backend: CryptoBackend, tenant: string): Verifier {
  return new VerifierImpl(settings, keys, backend, tenant);
}

/**
 * Creates a verifier. Options are validated at once: a bad secret throws `TypeError` or
 * `RangeError` here, at start-up, with a message that says how to fix it (and never the secret).
 *
 * @example
 * ```ts
 * import { createVerifier, WebhookError } from 'webhook-receiver';
 *
 * const verifier = createVerifier({
 *   secrets: [
 *     { key: process.env.WEBHOOK_SECRET!, keyId: 'current' },
 *     { key: process.env.WEBHOOK_SECRET_PREVIOUS!, keyId: 'previous' },
 *   ],
 * });
 *
 * try {
 *   const webhook = await verifier.verify({ headers: req.headers, body: rawBody });
 *   console.log('verified', webhook.id, 'with', webhook.keyId);
 * } catch (error) {
 *   if (error instanceof WebhookError) res.status(error.status).json({ error: error.code, message: error.message });
 * }
 * ```
 */
export function createVerifier(options: VerifierOptions): Verifier {
  return createVerifierWith(options, defaultBackend);
}

interface CachedVerifier {
  verifier: Verifier;
  /** The options' values it was built from: a changed value (say, rotated secrets) builds anew. */
  built: readonly unknown[];
}
const verifierCache = new WeakMap<VerifierOptions, CachedVerifier>();
const optionValues = (o: VerifierOptions): unknown[] => [o.secrets, o.toleranceSeconds, o.now, o.unsigned, o.maxBodyBytes];

/**
 * Verifies one webhook. Reuses the verifier built for the same `options` object while its values
 * (`secrets`, `toleranceSeconds`, `now`, `unsigned`, `maxBodyBytes`) are the same, so a constant
 * options object costs no key decoding per call, and assigning new `secrets` takes effect at once.
 * (Changing the secrets array in place is not seen: assign a new array.)
 *
 * @example
 * ```ts
 * import { verifyWebhook } from 'webhook-receiver';
 * const options = { secrets: process.env.WEBHOOK_SECRET! };
 * const webhook = await verifyWebhook({ headers: request.headers, body: await request.arrayBuffer() }, options);
 * ```
 */
export async function verifyWebhook(input: WebhookInput, options: VerifierOptions): Promise<VerifiedWebhook> {
  if (typeof options !== 'object' || options === null) return createVerifier(options).verify(input);
  const values = optionValues(options);
  let cached = verifierCache.get(options);
  if (cached === undefined || cached.built.some((value, i) => value !== values[i])) {
    cached = { verifier: createVerifier(options), built: values };
    verifierCache.set(options, cached);
  }
  return cached.verifier.verify(input);
}

/**
 * A verified webhook rebuilt from what was recorded when it was verified (an inbox job): the same
 * object, with the same methods, that the synchronous mode hands a handler. Internal: the inbox's
 * worker uses it; it checks nothing, so only data this package wrote after verifying may reach it.
 */
export function rebuiltWebhook(fields: {
  id: string;
  timestamp: Date;
  body: Uint8Array;
  signed: boolean;
  scheme: 'v1' | 'v1a' | undefined;
  keyIndex: number | undefined;
  keyId: string | undefined;
  tenant: string | undefined;
}): VerifiedWebhook {
  return new Webhook(fields.id, fields.timestamp, fields.body, fields.signed, fields.scheme, fields.keyIndex, fields.keyId, fields.tenant);
}

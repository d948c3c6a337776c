/**
 * The verifier: header parsing, the timestamp window, the signature list, the keys tried.
 * Standard Webhooks 1.0.0; SECURITY.md lists what a receiver checks.
 *
 * Its public shapes live in `verify/types.ts`, the limits a request is held to in
 * `verify/limits.ts`, the reading of the three headers as they come on the wire in
 * `verify/wire.ts`, the checks on them (the id, the timestamp window) in `verify/inspect.ts`, the
 * options checked in `verify/settings.ts` and the webhook handed back in `verify/webhook.ts`; this
 * file decodes the keys once and tries them.
 */

import { payloadTooLarge, readRequestBody } from './body.ts';
import { defaultBackend, signedContent, type CryptoBackend, type Ed25519PublicKey, type HmacKey } from './crypto.ts';
import { base64Decode, constantTimeEqual, constantTimeEqualBase64, toBytes } from './lib/encoding.ts';
import { bodyUnavailable, rejection, WebhookError } from './errors.ts';
import { withTenant } from './rejection.ts';
import { decodeSecretList, type KeyMaterial } from './secrets.ts';
import { clock, inspect, type Inspected } from './verify/inspect.ts';
import { MAX_V1A_ENTRIES } from './verify/limits.ts';
import { verifierSettings, type VerifierSettings } from './verify/settings.ts';
import type { VerifiedWebhook, Verifier, VerifierOptions, WebhookInput } from './verify/types.ts';
import { Webhook } from './verify/webhook.ts';
import { plural, type ParsedSignatures } from './verify/wire.ts';

export { DEFAULT_TOLERANCE_SECONDS, MAX_ID_LENGTH, MAX_SIGNATURE_ENTRIES, MAX_SIGNATURE_HEADER_LENGTH, MAX_V1A_ENTRIES } from './verify/limits.ts';
export { verifierSettings, type VerifierSettings } from './verify/settings.ts';
export type { VerifiedWebhook, Verifier, VerifierOptions, WebhookInput } from './verify/types.ts';
export { rebuiltWebhook } from './verify/webhook.ts';
export { parseSignatureHeader, type ParsedSignatures } from './verify/wire.ts';

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
 * then withdrawn), which cost about as much as the HMAC of a 1 KiB body; handed back
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

class VerifierImpl implements Verifier {
  readonly #backend: CryptoBackend;
  readonly #hmac: TrustedHmac[] = [];
  readonly #ed25519: TrustedEd25519[] = [];
  /** The options other than the keys, checked: the window, the clock, unsigned requests, the body's limit. */
  readonly #settings: VerifierSettings;
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
    this.#settings = settings;
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
      const inspected = inspect(input.headers, this.#settings);
      const body = rawBytes(input.body);
      if (body.byteLength > this.#maxBodyBytes) throw payloadTooLarge(this.#maxBodyBytes, body.byteLength);
      outcome = this.#authenticate(inspected, body);
    } catch (error) {
      return rejectLater(withTenant(error, this.#tenant));
    }
    if (outcome instanceof Webhook) return Promise.resolve(outcome);
    if (outcome instanceof Error) return rejectLater(withTenant(outcome, this.#tenant));
    // The search's (or WebCrypto's) own promise, handed back as it is: an async function would
    // adopt it through more promise turns, measurably slower with 64 in flight.
    return outcome;
  }

  async verifyRequest(request: Request): Promise<VerifiedWebhook> {
    // Headers first: a stale or unsigned request is refused before its body is read.
    let inspected: Inspected;
    try {
      inspected = inspect(request.headers, this.#settings);
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
    const timestamp = new Date(timestampSeconds === undefined ? clock(this.#settings) : timestampSeconds * 1000);
    if (signatures === undefined || timestampText === undefined) {
      return new Webhook(id, timestamp, body, false, undefined, undefined, undefined, this.#tenant);
    }
    const prefix = `${id}.${timestampText}.`;
    const first = this.#preferred;
    let tried: boolean | Promise<boolean> | undefined;
    if (signatures.v1.length === 1 && this.#hmac.length > 0) {
      // With one key and no Ed25519 work left, this key's outcome decides: a forgery is refused
      // at once, and WebCrypto's MAC is compared and answered in the one turn after its `sign`
      // settles rather than through the search's promise turns.
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

/**
 * The verifier's public shapes: its options, what it is handed, what it hands back, and the
 * verifier itself. Below the verifier's parts (the settings, the header checks, the webhook
 * object, the verifier), so each of them imports its types from here.
 */

import type { HeadersInput } from '../headers.ts';
import type { StandardSchemaV1 } from '../schema.ts';
import type { SecretInput } from '../secrets.ts';

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
  /**
   * Which kind of signature matched; `'relay'` for an event pulled from the relay's API (see
   * `triggerSource`), which no signature covers: the API key over TLS authenticated it.
   */
  readonly scheme: 'v1' | 'v1a' | 'relay' | undefined;
  /**
   * For a pulled event (`scheme: 'relay'`): how the relay judged the event's inbound signature
   * when it captured it. `verified` and `authenticated` count as signed, `unattempted` as unsigned
   * (`failed` events are never handed out). `undefined` for a delivery received over HTTP.
   */
  readonly verificationState?: 'verified' | 'authenticated' | 'unattempted' | undefined;
  /**
   * For a pulled event: the relay's event id (its `id` may be the event's `dedupKey` instead, the
   * sender's own id). `undefined` for a delivery received over HTTP.
   */
  readonly relayEventId?: string | undefined;
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

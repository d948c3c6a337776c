/**
 * The destination side of a test: a signed request, ready for a fetch handler, Hono's
 * `app.request`, a Next.js route or `fetch` itself.
 */

import type { SecretInput } from '../secrets.ts';
import { signWebhook } from '../sign.ts';
import { toBytes } from '../lib/encoding.ts';

/**
 * What {@link signedRequest} signs and sends.
 *
 * @example
 * ```ts
 * import type { SignedRequestInit } from 'webhook-receiver/testing';
 * const init: SignedRequestInit = { secret: 'whsec_…', body: { type: 'invoice.paid' }, id: 'msg_1' };
 * ```
 */
export interface SignedRequestInit {
  /** The sender's key or keys (`whsec_…`, bare base64, bytes, or `whsk_…` for v1a); several give several entries. */
  secret: SecretInput | readonly SecretInput[];
  /** The body: sent exactly as given when a string or bytes; any other value is sent as `JSON.stringify(body)`. */
  body: string | Uint8Array | object;
  /** `webhook-id`. Default: a fresh `msg_…` id. */
  id?: string;
  /** `webhook-timestamp`, as Unix seconds or a `Date`. Default: now. */
  timestamp?: number | Date;
  /**
   * Extra headers. They are applied last, so a test can replace a `webhook-*` header to build a
   * bad request on purpose. `content-type` defaults to `application/json`.
   */
  headers?: Record<string, string>;
  /** Default `POST`. `GET` and `HEAD` carry no body: with them, `body` must be empty. */
  method?: string;
}

/** The bytes `body` stands for: a string or bytes as given, anything else as JSON. */
export function bodyBytes(body: SignedRequestInit['body']): Uint8Array {
  if (typeof body === 'string' || body instanceof Uint8Array || body instanceof ArrayBuffer) return toBytes(body);
  if (body === null || body === undefined) throw new TypeError('signedRequest needs a body: a string, bytes, or a value to send as JSON');
  const json = JSON.stringify(body);
  if (json === undefined) throw new TypeError('signedRequest body cannot be sent as JSON (JSON.stringify returned undefined)');
  return toBytes(json);
}

/**
 * A `Request` signed the way a Standard Webhooks sender signs it: the body, and the
 * `webhook-id`, `webhook-timestamp` and `webhook-signature` headers over exactly those bytes.
 *
 * @example
 * ```ts
 * import { signedRequest } from 'webhook-receiver/testing';
 * const request = await signedRequest('http://localhost/webhooks', {
 *   secret: process.env.WEBHOOK_SECRET!,
 *   body: { type: 'invoice.paid', data: { id: 'in_1' } },
 * });
 * const response = await app.request(request); // Hono; or handler(request), or fetch(request)
 * expect(response.status).toBe(204);
 * ```
 */
export async function signedRequest(url: string | URL, init: SignedRequestInit): Promise<Request> {
  if (typeof init !== 'object' || init === null) throw new TypeError('signedRequest needs { secret, body }');
  const body = bodyBytes(init.body);
  const method = init.method ?? 'POST';
  const bodiless = /^(GET|HEAD)$/i.test(method);
  // A Request with these methods cannot carry a body: it would be signed and then not sent.
  if (bodiless && body.byteLength > 0) {
    throw new TypeError(`signedRequest cannot send a body with ${method.toUpperCase()}: the signature covers the body, so pass body: '' or use another method`);
  }
  const signed = await signWebhook({ secret: init.secret, body, id: init.id, timestamp: init.timestamp });
  const headers = new Headers({ 'content-type': 'application/json', ...signed.headers });
  for (const [name, value] of Object.entries(init.headers ?? {})) headers.set(name, value);
  return new Request(url, { method, headers, body: bodiless ? null : (body as Uint8Array<ArrayBuffer>) });
}

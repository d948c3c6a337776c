/**
 * `webhook-receiver/hono`: Hono middleware that verifies and claims a webhook and hands it to the
 * route as `c.get('webhook')`. Web APIs only: it runs on `@hono/node-server`, Bun, Deno and
 * Cloudflare Workers alike.
 *
 * Translation only: the receiver reads `c.req.raw` with its byte limit, and the core's table
 * gives the responses (`errorResponse`, `claimResponse`) and settles the claim (`settleClaim`).
 */

import type { Context, MiddlewareHandler } from 'hono';
import { DEFAULT_MAX_BODY_BYTES, declaredLength } from '../src/body.ts';
import { WebhookError, isWebhookError } from '../src/errors.ts';
import { claimResponse, errorResponse, rejectionContext, rejectionReporter, settleClaim, type AdapterOptions, type WebhookResponse } from '../src/http.ts';
import { createReceiver, type Claim } from '../src/receiver.ts';
import type { VerifiedWebhook, WebhookInput } from '../src/verify.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

/**
 * The variables `webhooks()` sets, for apps that type their own: `new Hono<{ Variables:
 * WebhookVariables }>()`. Apps that do not get the same type through `ContextVariableMap`.
 *
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { webhooks, type WebhookVariables } from 'webhook-receiver/hono';
 * const app = new Hono<{ Variables: WebhookVariables & { tenant: string } }>();
 * app.post('/webhooks', webhooks({ secrets }), (c) => c.text(c.get('webhook').id));
 * ```
 */
export interface WebhookVariables {
  webhook: VerifiedWebhook;
}

declare module 'hono' {
  interface ContextVariableMap {
    /** The verified webhook, on routes behind `webhooks()`. */
    webhook: VerifiedWebhook;
  }
}

/**
 * Hono keeps each body it read in `c.req.bodyCache`, as a promise (its declared type lists the
 * resolved values, but `HonoRequest` calls `.then` on the entries), and derives `json()`,
 * `text()` and the others from whichever entry is there.
 */
type BodyCache = { arrayBuffer?: Promise<ArrayBuffer> };

const CONSUMED_MESSAGE =
  'the request body was already read before webhooks() ran (c.req.json(), c.req.text() or a validator in an earlier ' +
  'middleware), so the raw bytes that were signed are gone. Mount webhooks() before any middleware that reads the ' +
  'body; in the route, c.req.json() and c.req.text() still work after it';

function respond(response: WebhookResponse): Response {
  return new Response(response.body, response);
}

function arrayBufferOf(bytes: Uint8Array): ArrayBuffer {
  const { buffer } = bytes;
  if (buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength) return buffer;
  return bytes.slice().buffer;
}

/**
 * What to verify: the bytes an earlier middleware already read with `c.req.arrayBuffer()` (the raw
 * bytes too); a body whose `content-length` is within the limit, read whole with
 * `c.req.arrayBuffer()`; else the raw request, read with the byte limit, headers checked first.
 *
 * The declared length is trusted as the server framed the body by it (Hono's own `bodyLimit` does
 * the same); one over the limit is refused before any of it is read. Reading through
 * `c.req.arrayBuffer()` matters on @hono/node-server: it reads the Node stream directly, where
 * `request.body` builds a Fetch `Request` and a web stream first, which cost three times the
 * rest of the request (benchmark issue, section 4). A chunked body still goes through the stream,
 * stopping at the limit.
 */
async function claimInput(c: Context, limit: number): Promise<Request | WebhookInput> {
  const cached = (c.req.bodyCache as BodyCache).arrayBuffer;
  if (cached !== undefined) return { headers: c.req.raw.headers, body: await cached };
  if (c.req.raw.bodyUsed) throw new WebhookError('BODY_UNAVAILABLE', CONSUMED_MESSAGE);
  const declared = declaredLength(c.req.header('content-length'));
  if (declared !== undefined && declared <= limit) return { headers: c.req.raw.headers, body: await c.req.arrayBuffer() };
  return c.req.raw;
}

/**
 * Hono middleware that verifies the webhook, deduplicates it on `webhook-id`, and sets
 * `c.get('webhook')` for the route.
 *
 * - The body is read from `c.req.raw` up to `maxBodyBytes` (413 beyond it); the route can still
 *   call `c.req.json()`, `c.req.text()` or `c.req.arrayBuffer()` afterwards.
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`; a duplicate
 *   gets 200 `{ "duplicate": true }` and an id being processed 409 `IN_PROGRESS`, and neither
 *   reaches the route.
 * - The claim is completed when the route's response is a 2xx, and released for any other
 *   status or a thrown error (which `app.onError` answers), so the sender's retry runs it again.
 *   A Web runtime does not tell a handler when the client went away, so a response that was
 *   returned counts as sent.
 *
 * Options are validated here, once: a bad secret throws at start-up.
 *
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { webhooks } from 'webhook-receiver/hono';
 *
 * const app = new Hono();
 * app.post('/webhooks', webhooks({ secrets: process.env.WEBHOOK_SECRET! }), async (c) => {
 *   const webhook = c.get('webhook');
 *   const event = await c.req.json<{ type: string }>();
 *   await handle(webhook.id, event);
 *   return c.body(null, 204);
 * });
 * export default app;
 * ```
 */
export function webhooks(options: AdapterOptions): MiddlewareHandler<{ Variables: WebhookVariables }> {
  const receiver = createReceiver(options);
  const report = rejectionReporter(options);
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;

  return async function webhooks(c, next) {
    let claim: Claim;
    try {
      claim = await receiver.claim(await claimInput(c, limit));
    } catch (error) {
      if (!isWebhookError(error)) throw error;
      report(error, rejectionContext(c.req.method, c.req.path, c.req.raw.headers));
      return respond(errorResponse(error));
    }
    const early = claimResponse(claim);
    if (early !== undefined) return respond(early);

    const cache = c.req.bodyCache as BodyCache;
    cache.arrayBuffer ??= Promise.resolve(arrayBufferOf(claim.webhook.body));
    c.set('webhook', claim.webhook);
    try {
      await next();
    } catch (error) {
      // Hono's compose normally catches route errors and sets c.error; this covers a throw it
      // lets through (no onError in a sub-app, for instance).
      await claim.release();
      throw error;
    }
    await (c.error === undefined ? settleClaim(claim, c.res.status) : claim.release());
    return undefined;
  };
}

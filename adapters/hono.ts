/**
 * `webhook-receiver/hono`: Hono middleware that verifies and claims a webhook and hands it to the
 * route as `c.get('webhook')`. Web APIs only: it runs on `@hono/node-server`, Bun, Deno and
 * Cloudflare Workers alike.
 *
 * Translation only: it reads the raw bytes with the byte limit, and goes through the adapters'
 * shared flow (`AdapterFlow`): refusals and early answers from the core's one table, and the claim
 * settled by the route's answer.
 *
 * @module webhook-receiver/hono
 */

import type { Context, Env, MiddlewareHandler } from 'hono';
import { contentCoding, decodeBody, type ContentCoding } from '../src/body.ts';
import { bodyUnavailable } from '../src/errors.ts';
import { acceptResponse, AdapterFlow, CLIENT_GONE, handlerRefusal, type AdapterOptions, type WaitUntil, type WebhookResponse } from '../src/http.ts';
import type { Claim, WebhookContext } from '../src/receiver.ts';
import type { HeadersInput } from '../src/headers.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { clientLeftResponse, nodeBindingsOf, readBodyOf, respond, signalAborted, type NodeBindings } from './web.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { WebhookContext } from '../src/receiver.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

/**
 * The variables `webhooks()` sets. The middleware declares them in its own type (as Hono's
 * `createMiddleware<Env>` does), so `c.get('webhook')` is typed on the routes that use it, and
 * only there: a route without the middleware does not compile when it reads them. No global
 * `ContextVariableMap` is augmented.
 *
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { webhooks } from 'webhook-receiver/hono';
 * const app = new Hono();
 * app.post('/webhooks', webhooks({ secrets }), (c) => c.text(c.get('webhook').id)); // typed here
 * // app.get('/health', (c) => c.text(c.get('webhook').id)); // does not compile: no middleware
 * ```
 */
export interface WebhookVariables {
  webhook: VerifiedWebhook;
  /** The handler's context: `signal` (aborted when the claim is lost) and the `claim` handle. */
  webhookContext: WebhookContext;
}

/**
 * The environment `webhooks()` declares: what a handler behind it sees. For handlers written
 * apart from the route (`const onWebhook: Handler<WebhookEnv> = (c) => …`).
 *
 * @example
 * ```ts
 * import type { Handler } from 'hono';
 * import type { WebhookEnv } from 'webhook-receiver/hono';
 * const onWebhook: Handler<WebhookEnv> = (c) => c.text(c.get('webhook').id);
 * ```
 */
export type WebhookEnv = { Variables: WebhookVariables };

// ---------------------------------------------------------------------------------------------
// Body: the raw bytes (Hono's body cache, or the request), and what the route reads after

/**
 * Hono keeps each body it read in `c.req.bodyCache`, as a promise (its declared type lists the
 * resolved values, but `HonoRequest` calls `.then` on the entries), and derives `json()`,
 * `text()` and the others from whichever entry is there.
 */
type BodyCache = { arrayBuffer?: Promise<ArrayBuffer> };

const CONSUMED_HINT =
  'the request body was already read before webhooks() ran (c.req.json(), c.req.text() or a validator in an earlier ' +
  'middleware), so the raw bytes that were signed are gone. Mount webhooks() before any middleware that reads the ' +
  'body; in the route, c.req.json() and c.req.text() still work after it';

/** The Node request and response behind `c` (see {@link nodeBindingsOf}). */
function nodeBindings(c: Context): NodeBindings | undefined {
  return nodeBindingsOf(c.env);
}

/** `bytes` as an `ArrayBuffer` for Hono's body cache: its own buffer when it is all of it, else a copy. */
function arrayBufferOf(bytes: Uint8Array): ArrayBuffer {
  const { buffer } = bytes;
  if (buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength) return buffer;
  return bytes.slice().buffer;
}

/**
 * The route's `c.req.json()`: `webhook.json()` as a promise. Made here, outside the middleware, so
 * that it holds the webhook alone: a closure made inside the middleware holds its whole scope (the
 * context, the Node request and response), and stored on `c.req` it kept every request's objects
 * alive through the young generation's collections into the old one (measured on Node 26: some
 * 2.5 KB promoted per request, a quarter of the adapter's server CPU).
 */
function verifiedJson(webhook: VerifiedWebhook): () => Promise<unknown> {
  return () => new Promise((resolve) => resolve(webhook.json()));
}

// ---------------------------------------------------------------------------------------------
// Claim: a client already gone is not run for

/**
 * `true` when the client went away: the Node response is destroyed once the connection closed
 * (@hono/node-server); elsewhere the request's signal tells, where the runtime aborts it (Bun and
 * Deno do).
 */
function clientLeft(c: Context, node: NodeBindings | undefined): boolean {
  return node !== undefined ? node.outgoing.destroyed : signalAborted(c.req.raw);
}

// ---------------------------------------------------------------------------------------------
// Settle: work left after the answer goes to Workers' waitUntil

/** Workers' `ctx.waitUntil`, when the runtime has an execution context (Hono's getter throws elsewhere). */
function executionWaitUntil(c: Context): WaitUntil | undefined {
  try {
    const context = c.executionCtx;
    return (promise) => context.waitUntil(promise);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// The middleware, in the same order: options, body, claim, answer, settle

/**
 * Hono middleware that verifies the webhook, deduplicates it on `webhook-id`, and sets
 * `c.get('webhook')` for the route.
 *
 * - The body is read from `c.req.raw` up to `maxBodyBytes` (413 beyond it); the route can still
 *   call `c.req.json()`, `c.req.text()` or `c.req.arrayBuffer()` afterwards. `c.req.json()` there
 *   is `webhook.json()`: a body that is not JSON is `INVALID_PAYLOAD`, answered 400 in the envelope.
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`; a duplicate
 *   gets 200 `{ "duplicate": true }` and an id being processed 409 `IN_PROGRESS`, and neither
 *   reaches the route.
 * - The claim is completed when the route's response is a 2xx, and released for any other
 *   status or a thrown error (which `app.onError` answers; a `StoreError`, the store failing under
 *   the route, is answered 503 `STORE_UNAVAILABLE` in the envelope), so the sender's retry runs it again.
 *   A route that returns no Response is answered 500 by Hono, and its claim is released.
 *   A client that left while the route ran changes nothing: a route that succeeded completes,
 *   and the sender's retry is answered as a duplicate. A client that left before the route was
 *   reached (@hono/node-server, Bun and Deno tell) gets its claim released and an empty 499, and
 *   the route does not run.
 * - The claim is renewed while the route runs; `c.get('webhookContext').signal` aborts if it is
 *   lost. On Workers, work left after the answer goes to `c.executionCtx.waitUntil`.
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
export function webhooks<AppEnv extends Env = {}>(options: AdapterOptions): MiddlewareHandler<AppEnv & WebhookEnv> {
  const flow = new AdapterFlow(options);
  const { receiver, limit } = flow;

  /**
   * The raw bytes, decoded from `coding` (the request's `content-encoding`, parsed once): those an
   * earlier middleware already read with `c.req.arrayBuffer()`, else the request's body as the
   * core reads it (`readBodyOf`: whole when its declared length is within the limit, else counted
   * as it arrives; a declared length over the limit is refused unread).
   */
  function bodyOf(c: Context, node: NodeBindings | undefined, coding: ContentCoding | undefined): Promise<Uint8Array | ArrayBuffer> {
    const cached = (c.req.bodyCache as BodyCache).arrayBuffer;
    if (cached !== undefined) return coding === undefined ? cached : cached.then((body) => decodeBody(new Uint8Array(body), coding, limit));
    if (c.req.raw.bodyUsed) return Promise.reject(bodyUnavailable(CONSUMED_HINT));
    return readBodyOf(c.req.raw, node, coding, limit);
  }

  // Typed with the app's own environment (`webhooks<{ Bindings: … }>()`), so a wrapper that
  // builds it on the first request (Workers) can call it with its own context.
  return async function webhooks(c: Context<WebhookEnv>, next: () => Promise<void>) {
    const node = nodeBindings(c);
    const headers: HeadersInput = node?.incoming.headers ?? c.req.raw.headers;
    let coding: ContentCoding | undefined;
    let claimed: Claim;
    try {
      coding = contentCoding(node !== undefined ? node.incoming.headers['content-encoding'] : c.req.header('content-encoding'));
      const body = await bodyOf(c, node, coding);
      // Hono builds the route's parameters per call: read only for tenant keys' `tenant` function.
      const where = flow.tenants ? { method: c.req.method, path: c.req.url, host: c.req.header('host'), params: c.req.param() } : undefined;
      const input = { headers, body, ...where };
      // With an inbox this middleware is the route's last step: it answers, and never calls next().
      if (receiver.inbox !== undefined) return respond(acceptResponse(await receiver.accept(input)));
      claimed = await receiver.claim(input);
    } catch (error) {
      return respond(flow.refuse(error, c.req.method, c.req.url, headers));
    }
    const early = flow.admit(claimed, clientLeft(c, node));
    if (early === CLIENT_GONE) return clientLeftResponse();
    if (early !== undefined) return respond(early);

    const cache = c.req.bodyCache as BodyCache;
    // The route reads the payload the signature covers: decoded, also when the cache held the
    // bytes as they came.
    if (coding !== undefined) cache.arrayBuffer = Promise.resolve(arrayBufferOf(claimed.webhook.body));
    else cache.arrayBuffer ??= Promise.resolve(arrayBufferOf(claimed.webhook.body));
    // The route's c.req.json() parses the verified bytes the way webhook.json() does: a body that
    // is not JSON is INVALID_PAYLOAD (400, claim released), not a SyntaxError answered 500.
    (c.req as { json: () => Promise<unknown> }).json = verifiedJson(claimed.webhook);
    c.set('webhook', claimed.webhook);
    c.set('webhookContext', claimed.context);
    // Hono's compose catches the route's errors, sets c.error and answers through app.onError; a
    // throw it lets through (no onError in a sub-app, for instance) releases in run() and goes on.
    // A route that refused the payload (INVALID_PAYLOAD from webhook.json(schema)) is answered in
    // the envelope once its claim was released; any other error stays app.onError's answer.
    // The core's rule for a route's error, applied once: a refusal of the payload is its
    // envelope's status, anything else 500.
    let refusal: WebhookResponse | undefined;
    const statusOf = (): number => {
      // A route that returned no Response leaves the context unfinalized: Hono then answers 500
      // ("Context is not finalized"), whatever the default c.res says (200).
      if (c.error === undefined) return c.finalized ? c.res.status : 500;
      refusal = handlerRefusal(c.error);
      return refusal?.status ?? 500;
    };
    // Hono's next() resolves to its context: only a refusal is this middleware's own answer.
    const refused = await flow.runOrRefuse(claimed, async () => void (await next()), statusOf, respond, () => executionWaitUntil(c));
    if (refused !== undefined) return refused;
    if (refusal !== undefined) c.res = respond(refusal);
    return undefined;
  } as unknown as MiddlewareHandler<AppEnv & WebhookEnv>;
}

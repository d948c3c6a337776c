/**
 * `webhook-receiver/koa`: Koa middleware (Koa 2 and 3) that verifies and claims a webhook and
 * hands it to the next middleware as `ctx.state.webhook`.
 *
 * Translation only: it finds the raw bytes (the request stream, or the `rawBody` a body parser
 * kept), calls the receiver, writes the core's answers, and settles the claim by the status the
 * downstream middleware set. Koa's types are matched by shape, so the adapter works with Koa 2
 * and 3 and needs no `@types/koa` at run time.
 *
 * @module webhook-receiver/koa
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { acceptResponse, AdapterFlow, CLIENT_GONE, type AdapterOptions, type WebhookResponse } from '../src/http.ts';
import type { WebhookContext } from '../src/receiver.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { clientLeft, rawBodyOf } from './node.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { WebhookContext } from '../src/receiver.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

/**
 * What `webhooks()` puts in `ctx.state` for the middleware after it. Type the route's context
 * with it (`ParameterizedContext<WebhookState>` in Koa's types, or `Router<WebhookState>` from
 * `@koa/router`), so only routes behind the middleware see the fields.
 *
 * @example
 * ```ts
 * import Router from '@koa/router';
 * import { webhooks, type WebhookState } from 'webhook-receiver/koa';
 *
 * const router = new Router<WebhookState>();
 * router.post('/webhooks', webhooks({ secrets }), (ctx) => {
 *   ctx.body = { id: ctx.state.webhook.id };
 * });
 * ```
 */
export interface WebhookState {
  /** The verified webhook. */
  webhook: VerifiedWebhook;
  /** The handler's context (`signal`, `claim`): the same object every adapter gives. */
  webhookContext: WebhookContext;
}

/**
 * The part of Koa's context the middleware uses (Koa 2 and 3 alike).
 *
 * @example
 * ```ts
 * import type { KoaContextLike } from 'webhook-receiver/koa';
 * const path = (ctx: KoaContextLike) => ctx.path;
 * ```
 */
export interface KoaContextLike {
  req: IncomingMessage;
  res: ServerResponse;
  request: { rawBody?: unknown };
  method: string;
  path: string;
  /** The URL as sent, before a mounting middleware (koa-mount) rewrote `path`. */
  originalUrl: string;
  status: number;
  body: unknown;
  state: object;
  /** Sets a response header. */
  set(field: string, value: string): void;
}

/**
 * The middleware `webhooks()` returns, typed by shape so it fits `app.use()` and `@koa/router`
 * routes in Koa 2 and 3.
 *
 * @example
 * ```ts
 * import type { KoaWebhookMiddleware } from 'webhook-receiver/koa';
 * const verifyBilling: KoaWebhookMiddleware = webhooks({ secrets: process.env.BILLING_SECRET! });
 * ```
 */
export type KoaWebhookMiddleware = (ctx: KoaContextLike, next: () => Promise<unknown>) => Promise<void>;

// ---------------------------------------------------------------------------------------------
// Body: the request stream, or the raw body a parser kept

const CONSUMED_HINT =
  'the request body was already read by a body parser that did not keep it, so the raw bytes that were signed are ' +
  'gone. Fix it in one of two ways: mount webhooks() before the body parser (router.post(path, webhooks(options), ' +
  'handler) with app.use(bodyParser()) after the router, or on other routes only); or use a parser that keeps the ' +
  'raw body in ctx.request.rawBody (koa-bodyparser or @koa/bodyparser do, for the types they parse)';

// ---------------------------------------------------------------------------------------------
// Answer: the core's responses on Koa's context

function send(ctx: KoaContextLike, response: WebhookResponse, close: boolean): void {
  ctx.status = response.status;
  for (const [name, value] of Object.entries(response.headers)) ctx.set(name, value);
  // The upload was refused part-way (or before it started): close the connection rather than
  // let Node read the rest of it to keep the connection alive.
  if (close) ctx.set('connection', 'close');
  ctx.body = response.body;
}

// ---------------------------------------------------------------------------------------------
// The middleware, in the same order: options, body and claim, answer, settle

/**
 * Koa middleware that verifies the webhook, deduplicates it on `webhook-id`, and sets
 * `ctx.state.webhook` and `ctx.state.webhookContext` for the middleware after it.
 *
 * - The raw body is the request stream, read here up to `maxBodyBytes` (413 beyond it, without
 *   reading the rest), or `ctx.request.rawBody` when `koa-bodyparser` or `@koa/bodyparser` ran
 *   first (the parser's own limit and errors then apply first, and `rawBody` is the body decoded
 *   as UTF-8: a body that is not UTF-8 only verifies when webhooks() reads the stream). When a
 *   parser consumed the stream without keeping it, the answer is 500 `BODY_UNAVAILABLE` (the fix
 *   is in the log line, as the error's `hint`). A body a parser kept was already decoded by it; a `content-encoding` other than gzip or
 *   deflate is still refused (415), as every adapter does. When the middleware read the stream
 *   (gzip and deflate decoded), read the event with `ctx.state.webhook.json()`.
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`; a
 *   duplicate gets 200 `{ "duplicate": true }` and an id being processed 409 `IN_PROGRESS`, and
 *   neither reaches the next middleware.
 * - The claim settles by `ctx.status` once `await next()` returns: a 2xx completes it, anything
 *   else (Koa's default 404 included) releases it, and so does a throw, which goes on to Koa's
 *   error handling; a `WebhookError` below 500 (`INVALID_PAYLOAD` from `webhook.json()`, 400; a
 *   `PermanentError`, 422), or a `StoreError` (503 `STORE_UNAVAILABLE`), is answered in the
 *   envelope instead, after the claim was released. A
 *   client that leaves while the handler works changes nothing; one that left before it was
 *   reached gets its claim released, and the handler does not run.
 * - The claim is renewed while the handler works; `ctx.state.webhookContext.signal` aborts if
 *   it is lost.
 *
 * Options are validated here, once: a bad secret throws at start-up.
 *
 * @example
 * ```ts
 * import Koa from 'koa';
 * import Router from '@koa/router';
 * import { webhooks, type WebhookState } from 'webhook-receiver/koa';
 *
 * const router = new Router<WebhookState>();
 * router.post('/webhooks', webhooks({ secrets: process.env.WEBHOOK_SECRET! }), async (ctx) => {
 *   await handle(ctx.state.webhook.json<{ type: string }>());
 *   ctx.status = 204;
 * });
 * new Koa().use(router.routes()).listen(3000);
 * ```
 */
export function webhooks(options: AdapterOptions): KoaWebhookMiddleware {
  const flow = new AdapterFlow(options);
  const { receiver, limit } = flow;

  return async function webhooks(ctx, next) {
    let claim;
    try {
      const body = await rawBodyOf(ctx.request.rawBody, ctx.req, limit, CONSUMED_HINT);
      // @koa/router's route parameters, where a router ran.
      const params = (ctx as { params?: Record<string, string | undefined> }).params;
      const input = { headers: ctx.req.headers, body, method: ctx.method, path: ctx.originalUrl, host: ctx.req.headers.host, params };
      // With an inbox this middleware is the route's last step: it answers, and never calls next().
      if (receiver.inbox !== undefined) {
        send(ctx, acceptResponse(await receiver.accept(input)), false);
        return;
      }
      claim = await receiver.claim(input);
    } catch (error) {
      // originalUrl, not path: koa-mount strips its prefix from ctx.path. The path as sent.
      send(ctx, flow.refuse(error, ctx.method, ctx.originalUrl, ctx.req.headers), !ctx.req.readableEnded);
      return;
    }
    const early = flow.admit(claim, clientLeft(ctx.req, ctx.res));
    if (early === CLIENT_GONE) {
      // Nobody reads an answer; the claim was released and the sender retries.
      ctx.status = 499;
      return;
    }
    if (early !== undefined) {
      send(ctx, early, false);
      return;
    }
    const state = ctx.state as Partial<WebhookState>;
    state.webhook = claim.webhook;
    state.webhookContext = claim.context;
    // Koa runs the rest of the chain inside next(): its status is the handler's answer. A payload
    // the handler refused (INVALID_PAYLOAD, a PermanentError), its claim released: the envelope,
    // not Koa's text/plain error page. Anything else goes on to Koa.
    await flow.runOrRefuse(claim, next, () => ctx.status, (refusal) => send(ctx, refusal, false));
  };
}

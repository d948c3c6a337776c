/**
 * `webhook-receiver/express`: Express middleware (Express 5 and 4) that verifies and claims a
 * webhook, then hands it to the route handler as `req.webhook`.
 *
 * Translation only: it finds the raw bytes, calls the receiver, and goes through the adapters'
 * shared flow (`AdapterFlow`): refusals and early answers from the core's one table, and the claim
 * settled by the final status.
 *
 * @module webhook-receiver/express
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { bodyUnavailable } from '../src/errors.ts';
import { acceptResponse, AdapterFlow, CLIENT_GONE, handlerRefusal, type AdapterOptions, type WebhookResponse } from '../src/http.ts';
import type { Claim, WebhookContext } from '../src/receiver.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { clientLeft, collectNodeBody, encodingRefusal, settleWhenSent } from './node.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { WebhookContext } from '../src/receiver.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

// The fix BODY_UNAVAILABLE suggests, `express.json({ verify: (req, res, buf) => { req.rawBody = buf } })`,
// assigns to Node's request type (body-parser types `req` as `http.IncomingMessage`): declared
// here so that line compiles in strict TypeScript as written.
declare module 'http' {
  interface IncomingMessage {
    /** The raw body a parser's `verify` callback kept, read by `webhooks()` when present. */
    rawBody?: Buffer;
  }
}

declare global {
  // Express's own request type extends `Express.Request` (in @types/express 4 and 5 alike), so
  // merging here types `req.webhook` in every route handler.
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The verified webhook, on routes behind `webhooks()`. */
      webhook?: VerifiedWebhook;
      /** The handler's context (`signal`, `claim`), on routes behind `webhooks()`. */
      webhookContext?: WebhookContext;
    }
  }
}

/**
 * The middleware `webhooks()` returns. Typed on Node's request and response, so it fits
 * Express 4 and 5 (and Connect-style routers) without depending on one version's types.
 *
 * @example
 * ```ts
 * import type { WebhookMiddleware } from 'webhook-receiver/express';
 * const verifyBilling: WebhookMiddleware = webhooks({ secrets: process.env.BILLING_SECRET! });
 * ```
 */
export type WebhookMiddleware = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

/** What the middleware reads from Express's request besides Node's fields. */
interface ExpressRequest extends IncomingMessage {
  body?: unknown;
  originalUrl?: string;
  /** The route's parameters (`/webhooks/:tenant`), which tenant keys' `tenant` function sees. */
  params?: Record<string, string | undefined>;
  webhook?: VerifiedWebhook;
  webhookContext?: WebhookContext;
}

// ---------------------------------------------------------------------------------------------
// Body: what a parser kept, else the request stream

const CONSUMED_HINT =
  'the request body was already read by another middleware (express.json() or another body parser), so the raw ' +
  'bytes that were signed are gone. Fix it in one of three ways: mount webhooks() before express.json() ' +
  `(app.post('/webhooks', webhooks(options), handler) above app.use(express.json())); or put ` +
  `express.raw({ type: '*/*' }) before webhooks() on this route; or keep the bytes where the parser runs: ` +
  'express.json({ verify: (req, res, buf) => { req.rawBody = buf } })';

const RECODED_HINT =
  'the request body reached webhooks() as text that a parser (express.text()) decoded from a charset other than ' +
  'UTF-8 and re-encoded, so the bytes that were signed are gone. Put ' +
  `express.raw({ type: '*/*' }) before webhooks() on this route instead, or mount webhooks() before the text parser`;

/** Whether a `content-type` declares no charset (a text parser then reads UTF-8) or UTF-8. */
function declaresUtf8(contentType: string | undefined): boolean {
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType ?? '')?.[1]?.toLowerCase();
  return charset === undefined || charset === 'utf-8' || charset === 'utf8';
}

// ---------------------------------------------------------------------------------------------
// Answer: the core's responses on Node's response

function send(res: ServerResponse, response: WebhookResponse, close: boolean): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  // The upload was refused part-way (or before it started): close the connection rather than let
  // Node read the rest of it to keep the connection alive.
  if (close) res.setHeader('connection', 'close');
  res.end(response.body);
}

// ---------------------------------------------------------------------------------------------
// The middleware, in the same order: options, body, claim, answer, settle (when the response is sent)

/**
 * Express middleware that verifies the webhook, deduplicates it on `webhook-id`, and passes it to
 * the next handler as `req.webhook`.
 *
 * - The raw body is `req.body` when `express.raw()` or `express.text()` ran first, `req.rawBody`
 *   when a parser's `verify` callback stored it, and otherwise the request stream, read here up to
 *   `maxBodyBytes` (413 beyond it, without reading the rest). When `express.json()` already
 *   consumed the stream, the answer is 500 `BODY_UNAVAILABLE`; the log line gives the three ways
 *   to fix it (the error's `hint`), the answer does not.
 *   Reading the stream here is the simplest; a parser in front applies its own `limit` (100 kB
 *   by default) and its own error responses first.
 * - When this middleware read the stream, `req.body` is left as it was: read the event with
 *   `req.webhook.json()` or `req.webhook.text()`.
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`; a
 *   duplicate gets 200 `{ "duplicate": true }` and an id being processed 409 `IN_PROGRESS`, and
 *   neither reaches the handler.
 * - The claim is completed when the handler answers a 2xx, and released for any other status
 *   (an error passed to `next(error)` becomes Express's 500), so the sender's retry runs the
 *   handler again. A client that leaves while the handler works changes nothing: the claim is
 *   settled by the status the handler sets when it ends its response (`res.send()`, `res.json()`,
 *   `res.end()`, or Express's answer to `next(error)`), so a successful handler is never run again
 *   for the sender's retry; meanwhile a retry is answered 409 `IN_PROGRESS`. A client that left
 *   before the handler was reached gets its claim released at once, and the handler does not run.
 * - The claim is renewed while the handler works; `req.webhookContext.signal` aborts if it is lost.
 *
 * Options are validated here, once: a bad secret throws at start-up.
 *
 * With `inbox` in the options, the middleware accepts instead and is the route's terminal step:
 * it verifies, deduplicates, enqueues, and answers 202 `{ "enqueued": true }` itself once the
 * engine acknowledged the job (503 `INBOX_UNAVAILABLE` with `Retry-After` when it did not). A
 * handler mounted after it never runs: the workers run it, `inbox.work(handler)`.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { webhooks } from 'webhook-receiver/express';
 *
 * const app = express();
 * // Before app.use(express.json()), or on a route that has no JSON parser.
 * app.post('/webhooks', webhooks({ secrets: process.env.WEBHOOK_SECRET! }), async (req, res, next) => {
 *   try {
 *     await handle(req.webhook!.json<{ type: string }>());
 *     res.sendStatus(204);
 *   } catch (error) {
 *     next(error); // Express 4 ignores a rejected promise: pass errors on by hand
 *   }
 * });
 * app.use(express.json());
 * ```
 */
export function webhooks(options: AdapterOptions): WebhookMiddleware {
  const flow = new AdapterFlow(options);
  const { receiver, limit } = flow;

  function fail(req: ExpressRequest, res: ServerResponse, next: (error?: unknown) => void, error: unknown): void {
    let response: WebhookResponse;
    try {
      response = flow.refuse(error, req.method ?? 'POST', req.originalUrl ?? req.url ?? '/', req.headers);
    } catch (unexpected) {
      next(unexpected);
      return;
    }
    send(res, response, !req.readableEnded);
  }

  function proceed(req: ExpressRequest, res: ServerResponse, next: (error?: unknown) => void, claim: Claim): void {
    // A client gone while the body was read or the claim taken (or before this middleware ran)
    // gets no answer: nobody would read it, and the sender will retry.
    const early = flow.admit(claim, clientLeft(req, res));
    if (early === CLIENT_GONE) return;
    if (early !== undefined) {
      send(res, early, false);
      return;
    }
    settleWhenSent(res, claim);
    req.webhook = claim.webhook;
    req.webhookContext = claim.context;
    flow.within(claim, next);
  }

  function claimBody(req: ExpressRequest, res: ServerResponse, next: (error?: unknown) => void, body: Uint8Array | string): void {
    // Where it was sent, for tenant keys' `tenant` function: plain reads, nothing built.
    const input = { headers: req.headers, body, method: req.method, path: req.originalUrl ?? req.url, host: req.headers.host, params: req.params };
    if (receiver.inbox !== undefined) {
      // With an inbox this middleware is the route's last step: it answers, and never calls next().
      receiver.accept(input).then(
        (result) => send(res, acceptResponse(result), false),
        (error: unknown) => fail(req, res, next, error),
      );
      return;
    }
    receiver.claim(input).then(
      (claim) => proceed(req, res, next, claim),
      (error: unknown) => fail(req, res, next, error),
    );
  }

  // Not an async middleware: Express 4 ignores returned promises, so failures are routed to
  // next(error) here (Express 5 would do the same with a rejected promise).
  return function webhooks(req: ExpressRequest, res, next) {
    // The raw body: what express.raw()/express.text() or a verify callback kept, else the stream.
    const { body } = req;
    // Typed as a Buffer by the declaration above; a string kept by some parsers works too.
    const kept: unknown = req.rawBody;
    const raw = body instanceof Uint8Array || typeof body === 'string' ? body : kept;
    if (raw instanceof Uint8Array || typeof raw === 'string') {
      // A parser ran and already decoded the body: decode nothing twice, but refuse what the
      // other adapters refuse (the same check as rawBodyOf's, kept synchronous here: this
      // middleware answers through callbacks).
      const refused = encodingRefusal(req.headers['content-encoding']);
      if (refused !== undefined) return fail(req, res, next, refused);
      // express.text() decoded a non-UTF-8 charset and re-encoded it as UTF-8: other bytes.
      if (typeof body === 'string' && !(kept instanceof Uint8Array) && !declaresUtf8(req.headers['content-type'])) {
        return fail(req, res, next, bodyUnavailable(RECODED_HINT));
      }
      return claimBody(req, res, next, raw);
    }
    // The stream's own state, not `req.body`, says whether a parser read it: body-parser 1.x sets
    // `req.body = {}` even for requests it skips, and leaves their stream unread.
    if (req.readableEnded || req.readableDidRead) return fail(req, res, next, bodyUnavailable(CONSUMED_HINT));
    collectNodeBody(req, limit, req.headers, (error, bytes) => {
      if (error === null) claimBody(req, res, next, bytes!);
      else fail(req, res, next, error);
    });
  };
}

/**
 * The error handler `webhookErrorHandler()` returns: Express knows an error handler by its four
 * parameters. Typed on Node's request and response, like {@link WebhookMiddleware}.
 *
 * @example
 * ```ts
 * import { webhookErrorHandler, type WebhookErrorHandler } from 'webhook-receiver/express';
 * const answerRefusals: WebhookErrorHandler = webhookErrorHandler();
 * app.use(answerRefusals);
 * ```
 */
export type WebhookErrorHandler = (error: unknown, req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

/**
 * Express error handler that answers the package's refusals in the `{ "error": CODE, "message": "…" }`
 * envelope, as every other adapter does: `INVALID_PAYLOAD` (400) from `webhook.json()` on a body
 * that is not JSON, from `webhook.json(schema)` or the router, and `PERMANENT_FAILURE` (422) from
 * a `PermanentError` (any `WebhookError` below 500 that a route throws or passes to `next`), and a
 * `StoreError` the route let through (503 `STORE_UNAVAILABLE` with `Retry-After`: the store failed
 * under the handler, and the sender should retry later). Without it, Express answers them with its own error page: HTML, and with a stack trace outside production.
 *
 * Mount it once, after the routes (`app.use(webhookErrorHandler())`). Express hands an error
 * handler only the error, so the middleware cannot see what a route threw: this is the one place
 * that does. Everything else goes on to the next error handler unchanged: errors that are not the
 * package's, any other `WebhookError` of 500 or more (a server fault, for your error handler or Express's
 * to answer and log), and any error once the response has started. The claim was already
 * released by the status of the answer: the sender's retry runs the route again.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { webhookErrorHandler, webhookOf, webhooks } from 'webhook-receiver/express';
 *
 * const app = express();
 * app.post('/webhooks', webhooks({ secrets: process.env.WEBHOOK_SECRET! }), (req, res) => {
 *   webhookOf(req).json(); // a body that is not JSON: 400 INVALID_PAYLOAD, in the envelope
 *   res.sendStatus(204);
 * });
 * app.use(webhookErrorHandler()); // after the routes
 * ```
 */
export function webhookErrorHandler(): WebhookErrorHandler {
  return function webhookErrorHandler(error, _req, res, next) {
    const refusal = handlerRefusal(error);
    // Express's own rule: once the headers are out, only its final handler may close the response.
    if (refusal === undefined || res.headersSent) {
      next(error);
      return;
    }
    send(res, refusal, false);
  };
}

const OFF_ROUTE_MESSAGE =
  'webhookOf(req) found no verified webhook: this route is not behind webhooks(). Mount it on the route ' +
  "(app.post('/webhooks', webhooks(options), handler)) or on a router the route belongs to";

/**
 * The verified webhook of a request, typed as present: for route handlers behind `webhooks()`.
 * Off such a route it throws a `TypeError` that says so (a wiring mistake, answered 500), instead
 * of letting `req.webhook!` fail later with `undefined`.
 *
 * @example
 * ```ts
 * import { webhookOf, webhooks } from 'webhook-receiver/express';
 * app.post('/webhooks', webhooks({ secrets: process.env.WEBHOOK_SECRET! }), async (req, res) => {
 *   const webhook = webhookOf(req);
 *   await handle(webhook.id, webhook.json());
 *   res.sendStatus(204);
 * });
 * ```
 */
export function webhookOf(req: { webhook?: VerifiedWebhook | undefined }): VerifiedWebhook {
  const webhook = req.webhook;
  if (webhook === undefined || webhook === null) throw new TypeError(OFF_ROUTE_MESSAGE);
  return webhook;
}

/**
 * The handler's context (`signal`, `claim`) of a request behind `webhooks()`, typed as present;
 * throws like {@link webhookOf} off such a route.
 *
 * @example
 * ```ts
 * await fetch(url, { signal: webhookContextOf(req).signal });
 * ```
 */
export function webhookContextOf(req: { webhookContext?: WebhookContext | undefined }): WebhookContext {
  const context = req.webhookContext;
  if (context === undefined || context === null) throw new TypeError(OFF_ROUTE_MESSAGE.replace('webhookOf', 'webhookContextOf'));
  return context;
}

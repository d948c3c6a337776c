/**
 * `webhook-receiver/express`: Express middleware (Express 5 and 4) that verifies and claims a
 * webhook, then hands it to the route handler as `req.webhook`.
 *
 * Translation only: it finds the raw bytes, calls the receiver, writes the core's responses
 * (`errorResponse`, `claimResponse`), and settles the claim by the final status (`settleClaim`).
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { DEFAULT_MAX_BODY_BYTES } from '../src/body.ts';
import { WebhookError, isWebhookError } from '../src/errors.ts';
import { claimResponse, errorResponse, rejectionContext, rejectionReporter, type AdapterOptions, type WebhookResponse } from '../src/http.ts';
import { createReceiver, type Claim } from '../src/receiver.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { readNodeBody, settleWhenSent } from './node.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

declare global {
  // Express's own request type extends `Express.Request` (in @types/express 4 and 5 alike), so
  // merging here types `req.webhook` in every route handler.
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The verified webhook, on routes behind `webhooks()`. */
      webhook?: VerifiedWebhook;
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
  rawBody?: unknown;
  originalUrl?: string;
  webhook?: VerifiedWebhook;
}

const CONSUMED_MESSAGE =
  'the request body was already read by another middleware (express.json() or another body parser), so the raw ' +
  'bytes that were signed are gone. Fix it in one of three ways: mount webhooks() before express.json() ' +
  `(app.post('/webhooks', webhooks(options), handler) above app.use(express.json())); or put ` +
  `express.raw({ type: '*/*' }) before webhooks() on this route; or keep the bytes where the parser runs: ` +
  'express.json({ verify: (req, res, buf) => { req.rawBody = buf } })';

/**
 * The raw body: what `express.raw()`/`express.text()` or a `verify` callback kept, else the
 * stream itself, read up to `limit`.
 */
function rawBody(req: ExpressRequest, limit: number): Uint8Array | string | Promise<Uint8Array> {
  const { body, rawBody: kept } = req;
  if (body instanceof Uint8Array || typeof body === 'string') return body;
  if (kept instanceof Uint8Array || typeof kept === 'string') return kept;
  // The stream's own state, not `req.body`, says whether a parser read it: body-parser 1.x sets
  // `req.body = {}` even for requests it skips, and leaves their stream unread.
  if (req.readableEnded || req.readableDidRead) throw new WebhookError('BODY_UNAVAILABLE', CONSUMED_MESSAGE);
  return readNodeBody(req, limit, req.headers['content-length']);
}

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

/**
 * Express middleware that verifies the webhook, deduplicates it on `webhook-id`, and passes it to
 * the next handler as `req.webhook`.
 *
 * - The raw body is `req.body` when `express.raw()` or `express.text()` ran first, `req.rawBody`
 *   when a parser's `verify` callback stored it, and otherwise the request stream, read here up to
 *   `maxBodyBytes` (413 beyond it, without reading the rest). When `express.json()` already
 *   consumed the stream, the answer is 500 `BODY_UNAVAILABLE` with the three ways to fix it.
 *   Reading the stream here is the simplest; a parser in front applies its own `limit` (100 kB
 *   by default) and its own error responses first.
 * - When this middleware read the stream, `req.body` is left as it was: read the event with
 *   `req.webhook.json()` or `req.webhook.text()`.
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`; a
 *   duplicate gets 200 `{ "duplicate": true }` and an id being processed 409 `IN_PROGRESS`, and
 *   neither reaches the handler.
 * - The claim is completed when the response finishes with a 2xx, and released for any other
 *   status (an error passed to `next(error)` becomes Express's 500) or when the connection closes
 *   before the response finished, so the sender's retry runs the handler again.
 *
 * Options are validated here, once: a bad secret throws at start-up.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { webhooks } from 'webhook-receiver/express';
 *
 * const app = express();
 * // Before app.use(express.json()), or on a route that has no JSON parser.
 * app.post('/webhooks', webhooks({ secrets: process.env.WEBHOOK_SECRET! }), async (req, res) => {
 *   const event = req.webhook!.json<{ type: string }>();
 *   await handle(event);
 *   res.sendStatus(204);
 * });
 * app.use(express.json());
 * ```
 */
export function webhooks(options: AdapterOptions): WebhookMiddleware {
  const receiver = createReceiver(options);
  const report = rejectionReporter(options);
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;

  async function verifyAndClaim(req: ExpressRequest, res: ServerResponse): Promise<boolean> {
    let closed = false;
    const onEarlyClose = (): void => {
      closed = true;
    };
    res.once('close', onEarlyClose);

    let claim: Claim;
    try {
      claim = await receiver.claim({ headers: req.headers, body: await rawBody(req, limit) });
    } catch (error) {
      res.off('close', onEarlyClose);
      if (!isWebhookError(error)) throw error;
      report(error, rejectionContext(req.method ?? 'POST', req.originalUrl ?? req.url ?? '/', req.headers));
      send(res, errorResponse(error), !req.readableEnded);
      return false;
    }
    res.off('close', onEarlyClose);

    const early = claimResponse(claim);
    if (early !== undefined) {
      send(res, early, false);
      return false;
    }
    if (closed) {
      // The client left while the body was read or the claim taken: nobody will see the answer,
      // and the sender will retry.
      await claim.release();
      return false;
    }
    settleWhenSent(res, claim);
    req.webhook = claim.webhook;
    return true;
  }

  return function webhooks(req, res, next) {
    // Not an async middleware: Express 4 ignores returned promises, so failures are routed to
    // next(error) here (Express 5 would do the same with a rejected promise).
    verifyAndClaim(req, res).then(
      (proceed) => {
        if (proceed) next();
      },
      (error: unknown) => next(error),
    );
  };
}

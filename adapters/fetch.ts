/**
 * `webhook-receiver/fetch`: a `(request: Request) => Promise<Response>` handler for any runtime
 * built on the Fetch API: Next.js route handlers, Cloudflare Workers, `Deno.serve`, `Bun.serve`.
 *
 * Translation only: the receiver reads the request with its byte limit, and the adapters' shared
 * flow (`AdapterFlow`) gives the answers from the core's one table and settles the claim.
 *
 * @module webhook-receiver/fetch
 */

import { acceptResponse, AdapterFlow, CLIENT_GONE, type AdapterOptions, type WaitUntil } from '../src/http.ts';
import type { Inbox } from '../src/inbox/types.ts';
import type { WebhookContext } from '../src/receiver.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { contentCoding } from '../src/body.ts';
import { clientLeftResponse, nodeBindingsOf, readBodyOf, respond, signalAborted } from './web.ts';

export type { AdapterOptions, RejectionContext, WaitUntil } from '../src/http.ts';
export type { WebhookContext } from '../src/receiver.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

/**
 * What runs for a verified, first-seen webhook: return a `Response`, or nothing for 204.
 * `context` carries the `signal` (aborted when the claim is lost or the receiver closed) and
 * the `claim` handle stores use (`store.transaction(context, …)`).
 *
 * @example
 * ```ts
 * import type { WebhookHandler } from 'webhook-receiver/fetch';
 * const onEvent: WebhookHandler = async (webhook, request, context) => {
 *   await queue.send(webhook.json(), { signal: context.signal });
 * };
 * ```
 */
export type WebhookHandler = (webhook: VerifiedWebhook, request: Request, context: WebhookContext) => Response | void | Promise<Response | void>;

/**
 * Options of {@link webhookHandler}: every adapter's, plus how to keep work going after the
 * answer on runtimes that stop a request once it answered.
 *
 * @example
 * ```ts
 * import { after } from 'next/server';
 * const options: FetchHandlerOptions = { secrets: process.env.WEBHOOK_SECRET!, waitUntil: after };
 * ```
 */
export interface FetchHandlerOptions extends AdapterOptions {
  /**
   * Hands background work (a completion retried during a store outage) to the platform. On
   * Cloudflare Workers it is found by itself: the handler takes `(request, env, ctx)` and uses
   * `ctx.waitUntil`. Without one, that work is awaited before answering.
   */
  waitUntil?: WaitUntil;
}

/**
 * The handler {@link webhookHandler} returns: a Fetch handler, which also takes the extra
 * arguments platforms pass (Workers' `env` and `ctx`) to find `waitUntil`.
 *
 * @example
 * ```ts
 * const receive: FetchWebhookHandler = webhookHandler({ secrets }, onEvent);
 * export default { fetch: receive };
 * ```
 */
export type FetchWebhookHandler = (request: Request, ...platform: unknown[]) => Promise<Response>;

// ---------------------------------------------------------------------------------------------
// Answer: the handler's Response

/** The handler's answer as a `Response`; anything else is a programming error (and releases). */
async function answerOf(handler: WebhookHandler, webhook: VerifiedWebhook, request: Request, context: WebhookContext): Promise<Response> {
  const response = await handler(webhook, request, context);
  if (response === undefined) return new Response(null, { status: 204 });
  // Duck-typed: a framework's Response subclass or another realm's Response is still one.
  if (typeof response !== 'object' || response === null || typeof (response as Partial<Response>).status !== 'number') {
    throw new TypeError(`the webhook handler must return a Response or nothing, got ${response === null ? 'null' : typeof response}`);
  }
  return response;
}

// ---------------------------------------------------------------------------------------------
// Settle: by the answer's status, with work left after it handed to the platform

/** `ctx.waitUntil` among a platform's extra arguments (Workers: `(request, env, ctx)`). */
function platformWaitUntil(platform: unknown[]): WaitUntil | undefined {
  for (const argument of platform) {
    const candidate = (argument as { waitUntil?: unknown } | null | undefined)?.waitUntil;
    if (typeof candidate === 'function') return (promise) => (candidate as WaitUntil).call(argument, promise);
  }
  return undefined;
}

/** The status that settles the claim: the handler's Response's. */
function statusOf(response: Response): number {
  return response.status;
}

// ---------------------------------------------------------------------------------------------
// The handler, in the same order: options, body and claim, answer, settle

/**
 * Creates a Fetch handler that verifies the webhook, deduplicates it on `webhook-id`, and calls
 * `handler(webhook, request)` for a first-seen one.
 *
 * - The body is read up to `maxBodyBytes` (413 beyond it). It is then consumed: read the event
 *   with `webhook.json()` or `webhook.text()`, not `request.json()`.
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`; a duplicate
 *   gets 200 `{ "duplicate": true }` and an id being processed 409 `IN_PROGRESS`, and neither
 *   calls the handler.
 * - The handler's `Response` is returned as it is (nothing means 204). The claim is completed
 *   when its status is a 2xx and released otherwise, also when the client left meanwhile: a
 *   sender that timed out retries, and its retry is then answered as a duplicate instead of
 *   running a successful handler twice. A client that left before the handler was called gets
 *   its claim released and an empty 499, and the handler does not run.
 * - A handler that throws releases the claim and the error is rethrown, not turned into a
 *   response: the platform logs it with its stack and answers 500 (Next.js, Workers, Deno and
 *   Bun all do), and the sender retries. Catch inside the handler to answer differently. A
 *   `WebhookError` below 500 (`INVALID_PAYLOAD` from `webhook.json()`, 400; a `PermanentError`,
 *   422) is answered in the envelope instead, after the claim was released, and so is a
 *   `StoreError` (the store failed under the handler: 503 `STORE_UNAVAILABLE`, `Retry-After`).
 * - The claim is renewed while the handler runs; `context.signal` aborts if it is lost.
 *
 * Options are validated here, once: a bad secret throws at start-up.
 *
 * With `inbox` and no handler, it accepts instead: verifies, deduplicates, enqueues, and answers
 * 202 `{ "enqueued": true }` once the engine acknowledged the job (503 `INBOX_UNAVAILABLE` with
 * `Retry-After` when it did not); the handler runs in the workers, `inbox.work(handler)`. An inbox
 * and a handler together are a `TypeError`.
 *
 * @example
 * ```ts
 * // app/api/webhooks/route.ts (Next.js): built on the first request, as `next build` loads
 * // route modules without the deployment's secrets.
 * import { webhookHandler } from 'webhook-receiver/fetch';
 *
 * let receive: ((request: Request) => Promise<Response>) | undefined;
 * export async function POST(request: Request): Promise<Response> {
 *   receive ??= webhookHandler({ secrets: process.env.WEBHOOK_SECRET! }, async (webhook) => {
 *     await handle(webhook.json<{ type: string }>());
 *     return Response.json({ received: true });
 *   });
 *   return receive(request);
 * }
 * ```
 */
export function webhookHandler(options: FetchHandlerOptions & { inbox: Inbox }): FetchWebhookHandler;
export function webhookHandler(options: FetchHandlerOptions, handler: WebhookHandler): FetchWebhookHandler;
export function webhookHandler(options: FetchHandlerOptions, handler?: WebhookHandler): FetchWebhookHandler {
  if (options?.inbox !== undefined) return acceptingHandler(options, handler);
  if (typeof handler !== 'function') throw new TypeError('webhookHandler needs a handler function: webhookHandler(options, (webhook, request, context) => …)');
  const configured = options.waitUntil;
  if (configured !== undefined && typeof configured !== 'function') throw new TypeError('waitUntil must be a function');
  const flow = new AdapterFlow(options);

  return async function webhookHandler(request, ...platform) {
    // On @hono/node-server, Node's own request and response come along: their headers and their
    // state cost nothing, where the Request's headers and signal are built on first use.
    const node = nodeBindingsOf(platform[0]);
    let claim;
    try {
      if (node === undefined) claim = await flow.receiver.claim(request);
      else {
        const { incoming } = node;
        const body = await readBodyOf(request, node, contentCoding(incoming.headers['content-encoding']), flow.limit);
        // Where it was sent, for tenant keys' `tenant` function only: the Request builds its URL on first use.
        const host = incoming.headers.host;
        const where = flow.tenants ? { method: request.method, path: request.url, host: typeof host === 'string' ? host : undefined } : undefined;
        claim = await flow.receiver.claim({ headers: incoming.headers, body, ...where });
      }
    } catch (error) {
      // The URL as sent: the path keeps its percent-encoding, so a decoded path cannot break a log
      // line.
      return respond(flow.refuse(error, request.method, request.url, node?.incoming.headers ?? request.headers));
    }
    const early = flow.admit(claim, node !== undefined ? node.outgoing.destroyed : signalAborted(request));
    if (early === CLIENT_GONE) return clientLeftResponse();
    if (early !== undefined) return respond(early);
    // A payload the handler refused (INVALID_PAYLOAD, a PermanentError): the claim is released,
    // and the sender is told why in the envelope. Anything else goes to the platform.
    return flow.runOrRefuse(claim, () => answerOf(handler, claim.webhook, request, claim.context), statusOf, respond, () => configured ?? platformWaitUntil(platform));
  };
}

/**
 * With an inbox: verify, deduplicate, enqueue, and answer 202 `{ "enqueued": true }` once the
 * engine acknowledged the job (a duplicate 200, an id being accepted 409, the engine unavailable
 * 503 `INBOX_UNAVAILABLE` with `Retry-After`). The handler runs in the workers (`inbox.work`).
 */
function acceptingHandler(options: FetchHandlerOptions, handler: WebhookHandler | undefined): FetchWebhookHandler {
  if (handler !== undefined) {
    throw new TypeError('webhookHandler was given an inbox and a handler: with an inbox the handler runs in the workers, inbox.work(handler); pass no handler here');
  }
  const flow = new AdapterFlow(options);
  return async function webhookHandler(request, ...platform) {
    const node = nodeBindingsOf(platform[0]);
    try {
      const input = node === undefined ? request : { headers: node.incoming.headers, body: await readBodyOf(request, node, contentCoding(node.incoming.headers['content-encoding']), flow.limit) };
      return respond(acceptResponse(await flow.receiver.accept(input)));
    } catch (error) {
      return respond(flow.refuse(error, request.method, request.url, node?.incoming.headers ?? request.headers));
    }
  };
}

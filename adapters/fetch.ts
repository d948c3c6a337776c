/**
 * `webhook-receiver/fetch`: a `(request: Request) => Promise<Response>` handler for any runtime
 * built on the Fetch API: Next.js route handlers, Cloudflare Workers, `Deno.serve`, `Bun.serve`.
 *
 * Translation only: the receiver reads the request with its byte limit, and the core's table gives
 * the responses (`errorResponse`, `claimResponse`) and settles the claim (`settleClaim`).
 */

import { isWebhookError } from '../src/errors.ts';
import { claimResponse, errorResponse, rejectionContext, rejectionReporter, settleClaim, type AdapterOptions } from '../src/http.ts';
import { createReceiver, type Claim } from '../src/receiver.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { clientLeftResponse, respond, signalAborted } from './web.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

/**
 * What runs for a verified, first-seen webhook: return a `Response`, or nothing for 204.
 *
 * @example
 * ```ts
 * import type { WebhookHandler } from 'webhook-receiver/fetch';
 * const onEvent: WebhookHandler = async (webhook) => {
 *   await queue.send(webhook.json());
 * };
 * ```
 */
export type WebhookHandler = (webhook: VerifiedWebhook, request: Request) => Response | void | Promise<Response | void>;

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

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
 *   when its status is a 2xx and released otherwise, or when `request.signal` was aborted by the
 *   time the handler returned: Next.js, Deno and Bun abort it when the client leaves, and the
 *   sender then retries. A client that left before the handler was called gets its claim
 *   released and an empty 499, and the handler does not run.
 * - A handler that throws releases the claim and the error is rethrown, not turned into a
 *   response: the platform logs it with its stack and answers 500 (Next.js, Workers, Deno and
 *   Bun all do), and the sender retries. Catch inside the handler to answer differently.
 *
 * Options are validated here, once: a bad secret throws at start-up.
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
export function webhookHandler(options: AdapterOptions, handler: WebhookHandler): (request: Request) => Promise<Response> {
  if (typeof handler !== 'function') throw new TypeError('webhookHandler needs a handler function: webhookHandler(options, (webhook, request) => …)');
  const receiver = createReceiver(options);
  const report = rejectionReporter(options);

  return async function webhookHandler(request) {
    let claim: Claim;
    try {
      claim = await receiver.claim(request);
    } catch (error) {
      if (!isWebhookError(error)) throw error;
      report(error, rejectionContext(request.method, pathOf(request.url), request.headers));
      return respond(errorResponse(error));
    }
    const early = claimResponse(claim);
    if (early !== undefined) return respond(early);
    if (signalAborted(request)) {
      // The client left while the body was read or the claim taken: nobody will see the answer,
      // and the sender will retry.
      await claim.release();
      return clientLeftResponse();
    }

    let response: Response | void;
    try {
      response = await handler(claim.webhook, request);
    } catch (error) {
      await claim.release();
      throw error;
    }
    if (response === undefined) response = new Response(null, { status: 204 });
    else if (typeof response !== 'object' || response === null || typeof (response as Partial<Response>).status !== 'number') {
      // Duck-typed: a framework's Response subclass or another realm's Response is still one.
      await claim.release();
      throw new TypeError(`the webhook handler must return a Response or nothing, got ${response === null ? 'null' : typeof response}`);
    }
    // A client that left while the handler ran will not get this answer: the sender retries.
    await (signalAborted(request) ? claim.release() : settleClaim(claim, response.status));
    return response;
  };
}

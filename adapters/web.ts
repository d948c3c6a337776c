/**
 * What the Hono and Fetch adapters share about Fetch API objects: turning the core's responses
 * into `Response`s, and telling that the client left. Internal: not an entry point. Web APIs
 * only, like the adapters that use it (they run on Workers, Deno and Bun).
 */

import type { WebhookResponse } from '../src/http.ts';

/** The core's framework-neutral response as a Fetch `Response`. */
export function respond(response: WebhookResponse): Response {
  return new Response(response.body, response);
}

/**
 * `true` when the client went away: @hono/node-server, Bun, Deno and Next.js abort
 * `request.signal` when the connection closes before the response was sent. Runtimes that do
 * not (workerd without its `enable_request_signal` flag) never abort it, or have no signal at
 * all, and a response that was returned then counts as sent.
 */
export function signalAborted(request: Request): boolean {
  // Optional: a `Request` from another realm or an older runtime may lack the signal.
  return (request.signal as AbortSignal | undefined)?.aborted === true;
}

/**
 * The answer to a request whose client already left, so the handler was not run: nobody reads
 * it. 499 is the status servers log for "client closed the request" (nginx's convention), which
 * keeps the access log honest about what happened.
 */
export function clientLeftResponse(): Response {
  return new Response(null, { status: 499 });
}

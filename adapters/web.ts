/**
 * What the Hono and Fetch adapters share about Fetch API objects: turning the core's responses
 * into `Response`s, and telling that the client left. Internal: not an entry point. Web APIs
 * only, like the adapters that use it (they run on Workers, Deno and Bun).
 */

import { readCodedBody, type ContentCoding } from '../src/body.ts';
import type { WebhookResponse } from '../src/http.ts';

/** The core's framework-neutral response as a Fetch `Response`. */
export function respond(response: WebhookResponse): Response {
  return new Response(response.body, response);
}

/** What @hono/node-server passes a Fetch handler after the request (its `HttpBindings`): the Node request and response. */
export interface NodeBindings {
  incoming: { headers: Record<string, string | string[] | undefined> };
  outgoing: { destroyed: boolean };
}

/**
 * The Node request and response that @hono/node-server passes with a request served over HTTP/1
 * (a Hono `c.env`, or a Fetch handler's second argument), else `undefined` (Bun, Deno, Workers,
 * `app.request()`). Both are checked by shape, so a Worker binding that happens to be named
 * `incoming` is never taken for them.
 *
 * They are what the platform itself says, read at no cost. On @hono/node-server,
 * `request.headers` builds a Fetch `Headers` from Node's header object on first use, and
 * `request.signal` an AbortController (some 2 µs on Node 20), for every request.
 */
export function nodeBindingsOf(env: unknown): NodeBindings | undefined {
  const candidate = env as { incoming?: { headers?: unknown }; outgoing?: { destroyed?: unknown } } | null | undefined;
  const headers = candidate?.incoming?.headers;
  return typeof headers === 'object' && headers !== null && typeof candidate?.outgoing?.destroyed === 'boolean' ? (candidate as NodeBindings) : undefined;
}

/**
 * `request`'s raw body, as `verifyRequest` reads it (`readCodedBody`: whole when its declared
 * length is within `limit`, else counted as it arrives), the declared length taken from Node's own
 * headers when @hono/node-server passed them, so the `Request`'s `Headers` are never built.
 */
export function readBodyOf(request: Request, node: NodeBindings | undefined, coding: ContentCoding | undefined, limit: number): Promise<Uint8Array> {
  if (node === undefined) return readCodedBody(request, coding, limit);
  const length = node.incoming.headers['content-length'];
  return readCodedBody(request, coding, limit, typeof length === 'string' ? length : null);
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

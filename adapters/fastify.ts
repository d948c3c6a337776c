/**
 * `webhook-receiver/fastify`: a Fastify plugin (Fastify 5 and 4) that verifies and claims every
 * request of the scope it is registered in, and hands the webhook to the route as
 * `request.webhook`.
 *
 * Translation only: a content-type parser keeps the raw bytes, a `preValidation` hook calls the
 * receiver and writes the core's responses, and the response's end settles the claim.
 *
 * @module webhook-receiver/fastify
 */

import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import fp from 'fastify-plugin';
import { bodyUnavailable, isWebhookError, type WebhookError } from '../src/errors.ts';
import { acceptResponse, AdapterFlow, CLIENT_GONE, errorResponse, handlerRefusal, type AdapterOptions, type WebhookResponse } from '../src/http.ts';
import type { Claim, WebhookContext } from '../src/receiver.ts';
import { notJson } from '../src/schema.ts';
import { noteAnswer } from '../src/telemetry.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { clientLeft, collectNodeBody, settleWhenSent } from './node.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { WebhookContext } from '../src/receiver.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The verified webhook, in a scope where the `webhooks` plugin is registered: set by the time
     * a route handler runs there (`null` in hooks that run before verification). `undefined` in
     * other scopes: decorators are encapsulated like everything else in Fastify.
     */
    webhook?: VerifiedWebhook | null;
    /** The handler's context (`signal`, `claim`), set beside `webhook`. */
    webhookContext?: WebhookContext | null;
  }
}

/** Options: the plugin belongs in a scope; registered on the root instance it would verify every route. */
const ROOT_WARNING =
  'the webhooks plugin is registered on the root instance, so every route of the app is verified as a webhook ' +
  "(GET /health would be answered 400 MISSING_ID) and parses its body with this plugin's parser. Register it inside " +
  "a scope that holds only the webhook routes: app.register(async (scope) => { await scope.register(webhooks, options); scope.post('/webhooks', handler) })";

// ---------------------------------------------------------------------------------------------
// Body: one parser for the scope keeps the raw bytes and parses them as Fastify would

/** What the scope's parser learnt about one request's body. */
interface BodyState {
  raw?: Uint8Array;
  /** The body was refused while it was read (`PAYLOAD_TOO_LARGE`): answered after the parser. */
  rejection?: WebhookError;
  /** The body is not valid JSON: Fastify's own 400, thrown only once the request is verified. */
  parseError?: Error;
}

const EMPTY = new Uint8Array(0);

/** How a content-type parser hands Fastify the parsed body. */
type ParserDone = (error: Error | null, body?: unknown) => void;

const OTHER_PARSER_HINT =
  'another content-type parser read this request body in the webhook scope, so the raw bytes that were signed are ' +
  'gone. The webhooks plugin parses every body in its scope (JSON into request.body, text/plain as a string, other ' +
  'types as a Buffer); add custom parsers outside that scope';

function mediaType(contentType: string | undefined): string {
  if (contentType === undefined) return '';
  const semicolon = contentType.indexOf(';');
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
}

function isJson(type: string): boolean {
  return type === 'application/json' || (type.endsWith('+json') && type.includes('/'));
}

// ---------------------------------------------------------------------------------------------
// Answer: the core's responses on Fastify's reply

function send(reply: FastifyReply, response: WebhookResponse, close: boolean): FastifyReply {
  reply.code(response.status).headers(response.headers);
  // The upload was refused part-way (or before it started): close the connection rather than let
  // Node read the rest of it to keep the connection alive.
  if (close) reply.header('connection', 'close');
  return reply.send(response.body);
}

/**
 * The route's handler, with its refusals of the payload (`INVALID_PAYLOAD`, a `PermanentError`:
 * a `WebhookError` below 500, thrown or rejected; and a `StoreError`, answered 503
 * `STORE_UNAVAILABLE`) answered in the envelope, as every adapter
 * answers them, rather than in the body of Fastify's error handler. Any other error goes on to
 * the scope's error handler unchanged.
 */
function answeringRefusals(handler: RouteHandlerMethod): RouteHandlerMethod {
  const refused = (reply: FastifyReply, error: unknown): FastifyReply => {
    const refusal = handlerRefusal(error);
    if (refusal === undefined || reply.sent) throw error;
    return send(reply, refusal, false);
  };
  return function webhookRoute(this: FastifyInstance, request, reply) {
    let result: unknown;
    try {
      result = handler.call(this, request, reply);
    } catch (error) {
      // A handler that returns nothing: Fastify waits for the reply sent here.
      refused(reply, error);
      return undefined;
    }
    if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') {
      return (result as Promise<unknown>).then(undefined, (error: unknown) => refused(reply, error));
    }
    return result;
  } as RouteHandlerMethod;
}

// ---------------------------------------------------------------------------------------------
// The plugin, in the same order: options, body (the parser), claim (the hook), answer, settle (when the reply is sent)

const webhooksPlugin: FastifyPluginAsync<AdapterOptions> = async function webhooks(scope, options) {
  // fastify-plugin hands the plugin the instance it was registered on; only the root one is a
  // plain object (each encapsulated scope is created from its parent with Object.create).
  if (Object.getPrototypeOf(scope) === Object.prototype) {
    if (typeof scope.log.level === 'string' && scope.log.level !== 'silent') scope.log.warn({ plugin: 'webhook-receiver' }, ROOT_WARNING);
    else console.warn(`[webhook-receiver] ${ROOT_WARNING}`);
  }
  // Fastify's own logger is the default target when the app turned it on: `Fastify({ logger:
  // true })` gets JSON lines with the request id. With it off (no level), the console line stays,
  // so a refused request is never silently dropped.
  const fastifyLogs = typeof scope.log.level === 'string' && scope.log.level !== 'silent';
  const flow = new AdapterFlow({ ...options, logger: options.logger ?? (fastifyLogs ? scope.log : undefined) });
  const { receiver, limit } = flow;
  const accepting = receiver.inbox !== undefined;
  const { onProtoPoisoning = 'error', onConstructorPoisoning = 'error' } = scope.initialConfig;
  // Fastify's own JSON parser, with the app's prototype-poisoning settings: handlers in the scope
  // get the same request.body they would get anywhere else.
  const parseJson = scope.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
  // Where this registration's parser leaves what it learnt about a request's body for its hook:
  // a symbol of its own (another registration has another), declared as a request decorator so
  // Fastify's request objects keep one shape, and cheaper per request than a WeakMap.
  const bodyKey = Symbol('webhook-receiver body');
  scope.decorateRequest(bodyKey, null);
  const bodies = (request: FastifyRequest) => request as unknown as Record<symbol, BodyState | null | undefined>;

  if (!scope.hasRequestDecorator('webhook')) scope.decorateRequest('webhook', null);
  if (!scope.hasRequestDecorator('webhookContext')) scope.decorateRequest('webhookContext', null);

  // One parser for every content type of the scope, reading the stream itself with our limit so
  // an oversize body is answered in our envelope. Routes outside the scope keep their parsers.
  scope.removeAllContentTypeParsers();
  function keepRawBody(request: FastifyRequest, payload: IncomingMessage, done: ParserDone): void {
    const state: BodyState = {};
    bodies(request)[bodyKey] = state;
    collectNodeBody(payload, limit, request.headers, (error, raw) => {
      if (error !== null) {
        if (!isWebhookError(error)) return done(error);
        state.rejection = error;
        return done(null, undefined);
      }
      state.raw = raw;
      // Accepting into an inbox, no route handler reads request.body: the workers parse the job.
      if (accepting) return done(null, raw);
      const type = mediaType(request.headers['content-type']);
      if (isJson(type)) {
        // Fastify's default JSON parser answers through the callback; its return type merely
        // allows a promise, and there is none.
        void parseJson(request, raw!.toString('utf8'), (parseError, value: unknown) => {
          if (parseError) state.parseError = parseError;
          done(null, parseError ? undefined : value);
        });
      } else if (type === 'text/plain') {
        done(null, raw!.toString('utf8'));
      } else {
        done(null, raw);
      }
    });
  }
  // The catch-all, and the usual types by name: Fastify caches the parser it finds for a
  // content-type header, but not the catch-all it falls back to, which it would look up again
  // (parsing the header each time) for every request.
  scope.addContentTypeParser('*', keepRawBody);
  scope.addContentTypeParser(['application/json', 'text/plain'], keepRawBody);

  // Every route added to the scope from here on answers its refusals in the envelope. A hook on
  // the routes rather than an error handler: the scope's error handler stays the app's to set.
  if (!accepting) {
    scope.addHook('onRoute', (route) => {
      route.handler = answeringRefusals(route.handler);
    });
  }

  function refuse(request: FastifyRequest, reply: FastifyReply, error: WebhookError): void {
    // Closed when the upload was not read to its end (refused before or part-way), whatever the
    // reason, as the Express and Koa adapters decide it.
    send(reply, flow.refuse(error, request.method, request.url, request.headers, options.logger ?? (fastifyLogs ? request.log : undefined)), !request.raw.readableEnded);
  }

  function proceed(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void, claim: Claim, state: BodyState | undefined): void {
    const early = flow.admit(claim, clientLeft(request.raw, reply.raw));
    if (early === CLIENT_GONE) {
      // The client left while the claim was taken (released): nobody will see the answer, and
      // the sender retries. hijack() ends the lifecycle here (a hook that neither answers nor
      // calls done() would leave the request hanging).
      reply.hijack();
      return;
    }
    if (early !== undefined) {
      send(reply, early, false);
      return;
    }
    // On the raw response's 'finish', not in an onResponse hook: hooks registered before this
    // plugin may await first, and 'close' would then overtake the completion.
    settleWhenSent(reply.raw, claim);
    request.webhook = claim.webhook;
    request.webhookContext = claim.context;
    if (state?.parseError !== undefined) {
      // Verified, but a JSON content type over a body that is not JSON: refused as the route's
      // webhook.json() would refuse it, 400 INVALID_PAYLOAD in the envelope, and the answer's
      // status releases the claim. The route does not run: it has no body to read.
      const refusal = notJson(state.parseError);
      noteAnswer(claim, undefined, refusal);
      send(reply, errorResponse(refusal), false);
      return;
    }
    flow.within(claim, () => done());
  }

  // preValidation, not preHandler: a forged request is refused before schema validation could
  // tell it anything about the route. A callback hook rather than an async one: Fastify then
  // continues straight from done() instead of through another promise.
  scope.addHook('preValidation', function verifyWebhook(request, reply, done) {
    const state = bodies(request)[bodyKey] ?? undefined;
    if (state?.rejection !== undefined) return refuse(request, reply, state.rejection);
    if (state === undefined && request.body !== undefined) return refuse(request, reply, bodyUnavailable(OTHER_PARSER_HINT));
    const failed = (error: unknown) => {
      if (isWebhookError(error)) refuse(request, reply, error);
      else done(error instanceof Error ? error : new Error(String(error)));
    };
    const where = { method: request.method, path: request.url, host: request.headers.host, params: request.params as Record<string, string | undefined> };
    const input = { headers: request.headers, body: state?.raw ?? EMPTY, ...where };
    // With an inbox the plugin answers every request of its scope itself: the route's handler never runs.
    if (accepting) receiver.accept(input).then((result) => send(reply, acceptResponse(result), false), failed);
    else receiver.claim(input).then((claim) => proceed(request, reply, done, claim, state), failed);
  });
};

/**
 * Fastify plugin that verifies every request of the scope it is registered in, deduplicates it on
 * `webhook-id`, and sets `request.webhook`.
 *
 * - Register it inside a scope (`app.register(async (scope) => { … })`): the scope's routes are
 *   verified; routes outside it, and their body parsing, are untouched.
 * - In the scope it parses bodies itself, to keep the raw bytes that were signed: JSON
 *   (`application/json`, `*+json`) becomes `request.body` as with Fastify's own parser (same
 *   prototype-poisoning protection), `text/plain` a string, anything else a `Buffer`. Bodies over
 *   `maxBodyBytes` get 413 `PAYLOAD_TOO_LARGE` without being read further.
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`, before
 *   schema validation; a duplicate gets 200 `{ "duplicate": true }` and an id being processed
 *   409 `IN_PROGRESS`, and neither reaches the handler.
 * - A verified request whose JSON content type covers a body that is not JSON is answered 400
 *   `INVALID_PAYLOAD` in the envelope (the route does not run); a route that throws a refusal of
 *   the payload (`INVALID_PAYLOAD`, a `PermanentError`: a `WebhookError` below 500) is answered in
 *   the envelope with its status, and a `StoreError` as 503 `STORE_UNAVAILABLE`. The plugin wraps the handlers of the routes added to its scope
 *   after it for that, so the scope's error handler stays the app's, and gets every other error.
 * - The claim is completed when the handler answers a 2xx and released for any other status (a
 *   thrown error is Fastify's 500), so the sender's retry runs the handler again. A client that
 *   leaves while the handler works changes nothing: the claim is settled by the status of the
 *   handler's reply (`reply.send()`, a returned value, or a thrown error), so a successful handler
 *   is never run again for the sender's retry; meanwhile a retry is answered 409 `IN_PROGRESS`.
 * - The claim is renewed while the handler works; `request.webhookContext.signal` aborts if it
 *   is lost. A handler that never sends keeps its claim renewed.
 *
 * Options are validated when the plugin is registered: a bad secret fails `app.ready()`.
 *
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { webhooks } from 'webhook-receiver/fastify';
 *
 * const app = Fastify();
 * app.register(async (scope) => {
 *   await scope.register(webhooks, { secrets: process.env.WEBHOOK_SECRET! });
 *   scope.post('/webhooks', async (request, reply) => {
 *     const event = request.body as { type: string }; // parsed JSON, verified
 *     request.log.info({ id: request.webhook!.id, type: event.type }, 'webhook');
 *     return reply.code(204).send();
 *   });
 * });
 * ```
 */
export const webhooks: FastifyPluginAsync<AdapterOptions> = fp(webhooksPlugin, { name: 'webhook-receiver', fastify: '4.x || 5.x' });

const OFF_ROUTE_MESSAGE =
  'webhookOf(request) found no verified webhook: this route is not in a scope where the webhooks plugin is ' +
  "registered. Register it in the route's scope: app.register(async (scope) => { await scope.register(webhooks, options); scope.post(…) })";

/**
 * The verified webhook of a request, typed as present: for routes in a scope where the plugin is
 * registered. Elsewhere (another scope, or a hook that runs before verification) it throws a
 * `TypeError` that says so, instead of letting `request.webhook!` fail later.
 *
 * @example
 * ```ts
 * import { webhookOf } from 'webhook-receiver/fastify';
 * scope.post('/webhooks', async (request, reply) => {
 *   const webhook = webhookOf(request);
 *   request.log.info({ id: webhook.id }, 'webhook');
 *   return reply.code(204).send();
 * });
 * ```
 */
export function webhookOf(request: FastifyRequest): VerifiedWebhook {
  const webhook = request.webhook;
  if (webhook === undefined || webhook === null) throw new TypeError(OFF_ROUTE_MESSAGE);
  return webhook;
}

/**
 * The handler's context (`signal`, `claim`) of a verified request, typed as present; throws like
 * {@link webhookOf} elsewhere.
 *
 * @example
 * ```ts
 * await fetch(url, { signal: webhookContextOf(request).signal });
 * ```
 */
export function webhookContextOf(request: FastifyRequest): WebhookContext {
  const context = request.webhookContext;
  if (context === undefined || context === null) throw new TypeError(OFF_ROUTE_MESSAGE.replace('webhookOf', 'webhookContextOf'));
  return context;
}

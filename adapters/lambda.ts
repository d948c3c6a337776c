/**
 * `webhook-receiver/lambda`: an AWS Lambda handler for webhooks that arrive through API Gateway
 * REST APIs (payload 1.0), HTTP APIs (payload 2.0), Lambda function URLs and Application Load
 * Balancers, told apart by the event's shape.
 *
 * Translation only: it takes the raw bytes and headers out of the event, calls the receiver
 * through the adapters' shared flow (`AdapterFlow`), and writes the core's answers in the shape the
 * event's source expects. The event and context types are declared here by shape, so neither the adapter nor its
 * users need `@types/aws-lambda` (its types fit these ones).
 *
 * @module webhook-receiver/lambda
 */

import { STATUS_CODES } from 'node:http';
import { decodedBody } from '../src/body.ts';
import { toBytes } from '../src/lib/encoding.ts';
import { headerValues, type HeadersInput } from '../src/headers.ts';
import { acceptResponse, AdapterFlow, claimResponse, type AdapterOptions, type WebhookResponse } from '../src/http.ts';
import type { Inbox } from '../src/inbox/types.ts';
import type { ClaimOptions, WebhookContext } from '../src/receiver.ts';
import type { VerifiedWebhook } from '../src/verify.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { WebhookContext } from '../src/receiver.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

/**
 * The part of the Lambda context this adapter reads: the time left before Lambda stops the
 * invocation. The runtime's `Context` (from `@types/aws-lambda`) fits it.
 *
 * @example
 * ```ts
 * import type { LambdaContextLike } from 'webhook-receiver/lambda';
 * const context: LambdaContextLike = { getRemainingTimeInMillis: () => 3000 };
 * ```
 */
export interface LambdaContextLike {
  /** Milliseconds until the invocation times out: bounds each claim's lock. */
  getRemainingTimeInMillis(): number;
}

/**
 * An HTTP event from any of the four sources, by shape: API Gateway REST (`httpMethod`, `path`,
 * `headers`, `multiValueHeaders`), HTTP API and function URLs (`version: '2.0'`, `rawPath`,
 * `requestContext.http`), and ALB (`requestContext.elb`, with `headers` or, when multi-value
 * headers are on, `multiValueHeaders`). `APIGatewayProxyEvent`, `APIGatewayProxyEventV2`,
 * `LambdaFunctionURLEvent` and `ALBEvent` from `@types/aws-lambda` all fit it.
 *
 * @example
 * ```ts
 * import type { LambdaHttpEvent } from 'webhook-receiver/lambda';
 * const event: LambdaHttpEvent = { version: '2.0', rawPath: '/webhooks', headers: {}, body: '{}', isBase64Encoded: false, requestContext: { http: { method: 'POST', path: '/webhooks' } } };
 * ```
 */
export interface LambdaHttpEvent {
  /** `'2.0'` for HTTP APIs and function URLs (`'1.0'` for HTTP APIs on payload 1.0). */
  version?: string;
  httpMethod?: string;
  path?: string;
  rawPath?: string;
  headers?: Record<string, string | undefined> | null;
  multiValueHeaders?: Record<string, string[] | undefined> | null;
  body?: string | null;
  isBase64Encoded?: boolean;
  /** The route's parameters (API Gateway), which tenant keys' `tenant` function sees as `params`. */
  pathParameters?: Record<string, string | undefined> | null;
  /**
   * The source's request context: `http` (`method`, `path`) for payload 2.0, `elb` for ALB; the
   * rest is not read. Typed loosely so every source's own context type fits.
   */
  requestContext?: object;
}

/** A header value in a Lambda result. */
type ResultHeaderValue = string | number | boolean;

/**
 * What a Lambda answers to an HTTP event: `statusCode`, and optionally `headers`, `body`
 * (base64 with `isBase64Encoded: true`), `multiValueHeaders` (REST and ALB), `cookies` (HTTP API
 * and function URLs) and `statusDescription` (ALB; filled in when missing).
 *
 * @example
 * ```ts
 * import type { LambdaHttpResult } from 'webhook-receiver/lambda';
 * const accepted: LambdaHttpResult = { statusCode: 202, headers: { 'content-type': 'application/json' }, body: '{"queued":true}' };
 * ```
 */
export interface LambdaHttpResult {
  statusCode: number;
  headers?: Record<string, ResultHeaderValue>;
  multiValueHeaders?: Record<string, ResultHeaderValue[]>;
  body?: string;
  isBase64Encoded?: boolean;
  cookies?: string[];
  statusDescription?: string;
}

/**
 * What the Lambda handler returns: a {@link LambdaHttpResult} whose `body` is always there (API
 * Gateway REST wants one, also for a 204), in the shape of the event's source.
 *
 * @example
 * ```ts
 * import type { LambdaHttpResponse } from 'webhook-receiver/lambda';
 * const noContent: LambdaHttpResponse = { statusCode: 204, body: '' };
 * ```
 */
export interface LambdaHttpResponse extends LambdaHttpResult {
  body: string;
}

/**
 * The handler's second argument: the {@link WebhookContext} every adapter gives (`signal`,
 * `claim`) plus the Lambda context as `lambda`.
 *
 * @example
 * ```ts
 * import type { LambdaWebhookContext } from 'webhook-receiver/lambda';
 * const log = (context: LambdaWebhookContext) => console.log('time left', context.lambda.getRemainingTimeInMillis());
 * ```
 */
export interface LambdaWebhookContext<C extends LambdaContextLike = LambdaContextLike> extends WebhookContext {
  readonly lambda: C;
}

/**
 * What runs for a verified, first-seen webhook: return the Lambda result, or nothing for 204.
 * A 2xx completes the claim; another status or a throw releases it, so the sender's retry runs
 * it again.
 *
 * @example
 * ```ts
 * import type { LambdaWebhookHandler } from 'webhook-receiver/lambda';
 * const onEvent: LambdaWebhookHandler = async (webhook, context) => {
 *   await queue.send(webhook.json(), { signal: context.signal });
 * };
 * ```
 */
export type LambdaWebhookHandler<C extends LambdaContextLike = LambdaContextLike> = (
  webhook: VerifiedWebhook,
  context: LambdaWebhookContext<C>,
) => LambdaHttpResult | void | Promise<LambdaHttpResult | void>;

/**
 * The handler {@link webhookHandler} returns, called by the Lambda runtime with `(event, context)`.
 *
 * @example
 * ```ts
 * import type { LambdaHandler } from 'webhook-receiver/lambda';
 * export const handler: LambdaHandler = webhookHandler({ secrets }, onEvent);
 * ```
 */
export type LambdaHandler<C extends LambdaContextLike = LambdaContextLike> = (event: LambdaHttpEvent, context: C) => Promise<LambdaHttpResponse>;

// ---------------------------------------------------------------------------------------------
// Body: the request inside the event, and the bytes the signature covers

/** Which source sent the event, which decides the answer's shape. */
type Source = 'rest' | 'http' | 'alb' | 'alb-multi';

interface Request {
  source: Source;
  method: string;
  path: string;
  headers: HeadersInput;
  body: Uint8Array | string;
}

/** The parts of a request context the adapter reads. */
interface RequestContext {
  http?: { method: string; path: string };
  elb?: { targetGroupArn: string };
}

function requestContextOf(event: LambdaHttpEvent): RequestContext {
  const context = event.requestContext;
  return typeof context === 'object' && context !== null ? (context as RequestContext) : {};
}

function sourceOf(event: LambdaHttpEvent, context: RequestContext): Source {
  if (event.version === '2.0' && typeof context.http === 'object' && context.http !== null) return 'http';
  if (context.elb !== undefined) return event.multiValueHeaders != null ? 'alb-multi' : 'alb';
  if (typeof event.httpMethod === 'string') return 'rest';
  throw new TypeError(
    'webhook-receiver/lambda handles HTTP events (API Gateway REST or HTTP APIs, function URLs, ALB); this event has none of their shapes',
  );
}

/**
 * The request inside `event`. Multi-value headers win where both are present (API Gateway REST
 * sends both; only they keep every value of a repeated header). Names keep their case: the
 * core reads headers in any case. A base64 body is decoded to bytes, never to a string: API
 * Gateway encodes binary bodies, and a detour through text would change bytes that are not
 * UTF-8, and with them the signature.
 */
/** The first of a header's values. */
function firstValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function requestOf(event: LambdaHttpEvent): Request {
  const context = requestContextOf(event);
  const source = sourceOf(event, context);
  const multi = event.multiValueHeaders;
  const headers: HeadersInput = (multi != null && Object.keys(multi).length > 0 ? multi : event.headers) ?? {};
  const raw = event.body ?? '';
  // A Buffer is a Uint8Array: no copy.
  const body = event.isBase64Encoded === true ? Buffer.from(raw, 'base64') : raw;
  const http = context.http;
  const method = (source === 'http' ? http?.method : event.httpMethod) ?? 'POST';
  const path = (source === 'http' ? (event.rawPath ?? http?.path) : event.path) ?? '/';
  return { source, method, path, headers, body };
}

/**
 * The bytes the signature covers: the event's body decoded by its `content-encoding` (gzip or
 * deflate; 415 for any other), with `maxBodyBytes` applied to the decoded size. API Gateway and
 * function URLs pass a compressed body on as it came (base64).
 */
function bodyOf(request: Request, limit: number): Promise<Uint8Array | string> {
  const encoding = headerValues(request.headers, 'content-encoding');
  if (encoding === undefined) return Promise.resolve(request.body);
  const { body } = request;
  return decodedBody(toBytes(body), encoding, limit);
}

// ---------------------------------------------------------------------------------------------
// Claim: bounded by the invocation's deadline; the handler's context

/**
 * The claim's deadline: the end of the invocation, when Lambda stops it. Nothing settles a claim
 * then; bounded by it, the lock runs out by that time, and the sender's retry is not refused as
 * `IN_PROGRESS` for the rest of `lockSeconds`. None for a direct call without a Lambda context.
 */
function claimOptionsOf(context: LambdaContextLike | undefined): ClaimOptions | undefined {
  return typeof context?.getRemainingTimeInMillis === 'function' ? { deadline: Date.now() + context.getRemainingTimeInMillis() } : undefined;
}

/** The shared `WebhookContext`, with the Lambda context beside it (its `signal` stays lazy). */
function lambdaContext<C extends LambdaContextLike>(context: WebhookContext, lambda: C): LambdaWebhookContext<C> {
  return {
    get signal() {
      return context.signal;
    },
    claim: context.claim,
    attempt: context.attempt,
    maxAttempts: context.maxAttempts,
    get acceptedAt() {
      return context.acceptedAt;
    },
    lambda,
  };
}

// ---------------------------------------------------------------------------------------------
// Answer: in the shape of the event's source

/** `statusDescription` as ALB wants it: `'200 OK'`. */
function statusDescription(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
}

/** `result` in the shape the source expects (ALB: a status description, and multi-value headers when on). */
function shaped(source: Source, result: LambdaHttpResult): LambdaHttpResponse {
  if (source !== 'alb' && source !== 'alb-multi') return result.body === undefined ? { ...result, body: '' } : (result as LambdaHttpResponse);
  const out: LambdaHttpResponse = { ...result, body: result.body ?? '', statusDescription: result.statusDescription ?? statusDescription(result.statusCode) };
  if (source === 'alb-multi' && result.headers !== undefined) {
    // A target group with multi-value headers on reads only `multiValueHeaders` from the answer.
    const multi: Record<string, ResultHeaderValue[]> = { ...result.multiValueHeaders };
    for (const [name, value] of Object.entries(result.headers)) multi[name] = [...(multi[name] ?? []), value];
    delete out.headers;
    out.multiValueHeaders = multi;
  }
  return out;
}

function resultOf(source: Source, response: WebhookResponse): LambdaHttpResponse {
  return shaped(source, { statusCode: response.status, headers: response.headers, body: response.body, isBase64Encoded: false });
}

function checkedResult(result: unknown): LambdaHttpResult {
  if (result === undefined) return { statusCode: 204, body: '' };
  const status = (result as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status !== 'number' || !Number.isInteger(status)) {
    throw new TypeError(`the webhook handler must return { statusCode, headers?, body? } or nothing, got ${result === null ? 'null' : typeof result}`);
  }
  return result as LambdaHttpResult;
}

// ---------------------------------------------------------------------------------------------
// Settle: by the handler's status, everything before the invocation returns

/** The status that settles the claim: the handler's result's. */
function statusOf(result: LambdaHttpResult): number {
  return result.statusCode;
}

// ---------------------------------------------------------------------------------------------
// The handler, in the same order: options, body, claim, answer, settle

/**
 * Creates a Lambda handler that verifies the webhook, deduplicates it on `webhook-id`, and calls
 * `handler(webhook, context)` for a first-seen one.
 *
 * - The event's source is told from its shape: API Gateway REST (payload 1.0), HTTP API
 *   (payload 2.0), function URL, or ALB; the answer takes that source's shape (ALB: with a
 *   `statusDescription`, and in `multiValueHeaders` when the target group has them on). An event
 *   of no HTTP shape throws a `TypeError` (the invocation fails).
 * - The body is verified as the bytes that were sent: a base64 body (`isBase64Encoded`) is
 *   decoded to bytes, then from its `content-encoding` (gzip or deflate; 415 for any other), as
 *   the other adapters decode it. Headers come from `multiValueHeaders` when present, else `headers`, in
 *   any case. `maxBodyBytes` applies (API Gateway itself stops at 10 MB, function URLs and ALB
 *   at 1 MB).
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`
 *   (`Retry-After` with 503); a duplicate gets 200 `{ "duplicate": true }` and an id being
 *   processed 409 `IN_PROGRESS`, and neither calls the handler.
 * - The handler's result is returned (nothing means 204). A 2xx completes the claim; another
 *   status releases it; a throw releases it and is rethrown, so Lambda reports the error (API
 *   Gateway answers 500 or 502) and the sender retries. A `WebhookError` below 500
 *   (`INVALID_PAYLOAD` from `webhook.json()`, 400; a `PermanentError`, 422), or a `StoreError`
 *   (503 `STORE_UNAVAILABLE`), is answered in the envelope instead.
 * - Everything is settled before the handler returns, completion retries included: Lambda
 *   freezes the container once it has the answer, and work left over would be lost.
 * - Each claim's lock is bounded by `context.getRemainingTimeInMillis()`: an invocation that
 *   times out frees its id by the time Lambda stops it.
 *
 * The default memory store lives in one warm container and deduplicates nothing across
 * containers or cold starts: in production give a shared store (`redisStore`, a Postgres store).
 * Build the handler once, at module scope, so warm invocations share it.
 *
 * @example
 * ```ts
 * import { webhookHandler } from 'webhook-receiver/lambda';
 * import { redisStore } from 'webhook-receiver/redis';
 * import { createClient } from 'redis';
 *
 * const redis = await createClient({ url: process.env.REDIS_URL })
 *   .on('error', (error: Error) => console.error(`redis: ${error.message}`))
 *   .connect();
 * export const handler = webhookHandler(
 *   { secrets: process.env.WEBHOOK_SECRET!, idempotency: { store: redisStore({ client: redis }) } },
 *   async (webhook, context) => {
 *     await orders.markPaid(webhook.json<{ orderId: string }>().orderId, { signal: context.signal });
 *     return { statusCode: 200, body: JSON.stringify({ received: true }) };
 *   },
 * );
 * ```
 */
export function webhookHandler<C extends LambdaContextLike = LambdaContextLike>(options: AdapterOptions & { inbox: Inbox }): LambdaHandler<C>;
export function webhookHandler<C extends LambdaContextLike = LambdaContextLike>(options: AdapterOptions, handler: LambdaWebhookHandler<C>): LambdaHandler<C>;
export function webhookHandler<C extends LambdaContextLike = LambdaContextLike>(options: AdapterOptions, handler?: LambdaWebhookHandler<C>): LambdaHandler<C> {
  if (typeof options !== 'object' || options === null) throw new TypeError('webhookHandler needs an options object: webhookHandler({ secrets }, handler)');
  const accepting = options.inbox !== undefined;
  if (accepting && handler !== undefined) {
    throw new TypeError('webhookHandler was given an inbox and a handler: with an inbox the handler runs in the workers, inbox.work(handler); pass no handler here');
  }
  if (!accepting && typeof handler !== 'function') throw new TypeError('webhookHandler needs a handler function: webhookHandler(options, (webhook, context) => …)');
  const flow = new AdapterFlow(options);

  return async function webhookHandler(event, context) {
    if (typeof event !== 'object' || event === null) throw new TypeError('webhook-receiver/lambda handles HTTP events; this event is not an object');
    const request = requestOf(event);
    let claim;
    try {
      const body = await bodyOf(request, flow.limit);
      // The host is a search of the headers: made only for tenant keys' `tenant` function.
      const where = flow.tenants ? { method: request.method, path: request.path, host: firstValue(headerValues(request.headers, 'host')), params: event.pathParameters ?? undefined } : undefined;
      const input = { headers: request.headers, body, ...where };
      // With an inbox: accepted, and answered 202 once the engine acknowledged the job.
      if (accepting) return resultOf(request.source, acceptResponse(await flow.receiver.accept(input)));
      claim = await flow.receiver.claim(input, claimOptionsOf(context));
    } catch (error) {
      return resultOf(request.source, flow.refuse(error, request.method, request.path, request.headers));
    }
    // Nothing tells a Lambda that the client left: the answer always counts as delivered.
    const early = claimResponse(claim);
    if (early !== undefined) return resultOf(request.source, early);
    const webhookContext = lambdaContext(claim.context, context);
    // No waitUntil: what is left after the completion is awaited, so nothing runs frozen. A
    // payload the handler refused (INVALID_PAYLOAD, a PermanentError), its claim released, is
    // answered in the envelope; anything else is rethrown: the invocation fails.
    return flow.runOrRefuse(
      claim,
      async () => shaped(request.source, checkedResult(await handler!(claim.webhook, webhookContext))),
      statusOf,
      (refusal) => resultOf(request.source, refusal),
    );
  };
}

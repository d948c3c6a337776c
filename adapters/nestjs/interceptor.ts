/** The interceptor, in the same order as every adapter: body, claim, answer, settle. */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Inject, Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { from, lastValueFrom, type Observable } from 'rxjs';
import { acceptResponse, AdapterFlow, CLIENT_GONE, type WebhookResponse } from '../../src/http.ts';
import type { Claim } from '../../src/receiver.ts';
import { clientLeft, rawBodyOf } from '../node.ts';
import { VERIFIED, type MarkedRequest } from './decorators.ts';
import { WebhookReceiverService } from './service.ts';

// Body: the raw bytes Nest kept (`rawBody: true`), else the request stream

/** Express's request, or Fastify's (`raw` is Node's request there). */
interface NestRequest {
  raw?: IncomingMessage;
  rawBody?: unknown;
  method?: string;
  url?: string;
  originalUrl?: string;
  /** The route's parameters (Express and Fastify alike). */
  params?: Record<string, string | undefined>;
  headers: IncomingMessage['headers'];
}

/** Express's response, or Fastify's reply (`raw` is Node's response there). */
interface NestResponse {
  raw?: ServerResponse;
  statusCode: number;
}

const NO_RAW_BODY_HINT =
  'Nest parsed the request body without keeping its raw bytes, so the bytes that were signed are gone. Create the app ' +
  'with the raw body kept: NestFactory.create(AppModule, { rawBody: true }) (the same option on ' +
  '@nestjs/platform-express and @nestjs/platform-fastify); the interceptor then reads req.rawBody';

/**
 * Verifies and claims the webhook before the route handler runs, and settles the claim by how
 * the handler ended.
 *
 * - The raw body is `req.rawBody`, which Nest keeps for JSON and form bodies when the app is
 *   created with `rawBody: true`; a body of another type that Nest did not parse is read from the
 *   request, up to `maxBodyBytes`. When Nest parsed the body without keeping it, the answer is
 *   500 `BODY_UNAVAILABLE`, and the log names the fix (`rawBody: true`). Nest's own body size limit applies
 *   first (Express: 100 kB for JSON by default; Fastify: 1 MiB).
 * - Rejected requests get the error's status and `{ "error": CODE, "message": "…" }`
 *   (`Retry-After` with 503); a duplicate gets 200 `{ "duplicate": true }` and an id being
 *   processed 409 `IN_PROGRESS`. The handler does not run for any of them.
 * - When the handler returns (with a 2xx, which is Nest's default), the claim is completed
 *   before Nest sends the answer; when it throws, the claim is released and the error goes on to
 *   Nest's exception filters, so the sender's retry runs it again; a `WebhookError` below 500
 *   (`INVALID_PAYLOAD` from `webhook.json()`, 400; a `PermanentError`, 422), or a `StoreError`
 *   (503 `STORE_UNAVAILABLE`), is answered in the envelope instead.
 *   A client that leaves while the handler works changes nothing; one that left before it was
 *   reached gets its claim released, and the handler does not run.
 * - The handler reads the webhook with `@Webhook()` and its context with `@WebhookCtx()`.
 * - Rejections (a warning) and store failures (an error) are logged through Nest's `Logger`, with
 *   the context `WebhookReceiver` and the fields (code, status, webhookId, method, path) in the
 *   message, unless the options give a `logger`, `onRejected` or `onError`.
 *
 * With `inbox` in the module's options, the interceptor accepts instead: it verifies, deduplicates,
 * enqueues, and answers 202 `{ "enqueued": true }` itself once the engine acknowledged the job
 * (200 for a duplicate, 409 `IN_PROGRESS` while another delivery of the id is being accepted, 503
 * `INBOX_UNAVAILABLE` with `Retry-After` when the engine refused or did not answer, the claim
 * released), without calling the route's method: the workers run the handler (`inbox.work`).
 *
 * @example
 * ```ts
 * import { Controller, HttpCode, Post, UseInterceptors } from '@nestjs/common';
 * import { Webhook, WebhookInterceptor, type VerifiedWebhook } from 'webhook-receiver/nestjs';
 *
 * @Controller('webhooks')
 * export class WebhooksController {
 *   @Post()
 *   @HttpCode(200)
 *   @UseInterceptors(WebhookInterceptor)
 *   receive(@Webhook() webhook: VerifiedWebhook) {
 *     return { received: webhook.id };
 *   }
 * }
 * ```
 *
 * @example
 * With `WebhookReceiverModule.forRoot({ secrets, inbox })`: the method never runs.
 * ```ts
 * @Controller('webhooks')
 * export class AcceptingController {
 *   @Post()
 *   @UseInterceptors(WebhookInterceptor)
 *   accept(): never {
 *     // Throws so that, in a module built without an inbox, the route fails instead of answering 2xx with nothing done.
 *     throw new Error('WebhookReceiverModule was built without an inbox');
 *   }
 * }
 * ```
 */
export class WebhookInterceptor implements NestInterceptor {
  readonly #flow: AdapterFlow;
  readonly #adapters: HttpAdapterHost;

  constructor(service: WebhookReceiverService, adapters: HttpAdapterHost) {
    this.#flow = service.flow;
    this.#adapters = adapters;
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') throw new TypeError('WebhookInterceptor handles HTTP routes only');
    const http = context.switchToHttp();
    return from(this.#receive(http.getRequest<NestRequest>(), http.getResponse<NestResponse>(), next));
  }

  async #receive(req: NestRequest, res: NestResponse, next: CallHandler): Promise<unknown> {
    const flow = this.#flow;
    const nodeReq = req.raw ?? (req as unknown as IncomingMessage);
    const nodeRes = res.raw ?? (res as unknown as ServerResponse);
    const { receiver } = flow;
    let claim: Claim;
    try {
      const body = await rawBodyOf(req.rawBody, nodeReq, flow.limit, NO_RAW_BODY_HINT);
      const input = { headers: req.headers, body, method: req.method, path: req.originalUrl ?? req.url, host: req.headers.host, params: req.params };
      // With an inbox the interceptor answers itself and never calls next.handle(): the route's
      // method (and its parameter decorators, resolved only inside next.handle()) never runs; the
      // workers run the handler. As Nest's CacheInterceptor answers a hit without the route.
      if (receiver.inbox !== undefined) return this.#answer(res, acceptResponse(await receiver.accept(input)));
      claim = await receiver.claim(input);
    } catch (error) {
      return this.#answer(res, flow.refuse(error, req.method ?? 'POST', req.originalUrl ?? req.url ?? '/', req.headers));
    }
    const early = flow.admit(claim, clientLeft(nodeReq, nodeRes));
    if (early === CLIENT_GONE) {
      // Nobody reads an answer; the claim was released and the sender retries.
      this.#adapters.httpAdapter.status(res, 499);
      return undefined;
    }
    if (early !== undefined) return this.#answer(res, early);
    (req as MarkedRequest)[VERIFIED] = { webhook: claim.webhook, context: claim.context };
    // Nest set the route's status (201 for POST unless @HttpCode says otherwise) before the
    // interceptors ran; a throw releases in run(). A payload the handler refused (INVALID_PAYLOAD,
    // a PermanentError): the envelope. Any other error goes on to Nest's exception filters.
    return flow.runOrRefuse(claim, () => lastValueFrom(next.handle(), { defaultValue: undefined }), () => res.statusCode, (refusal) => this.#answer(res, refusal));
  }

  /**
   * Writes the core's status and headers through Nest's platform adapter, and returns the body
   * as the string it is: both platforms send a string as it is, under the content-type set here.
   */
  #answer(res: NestResponse, response: WebhookResponse): string {
    const adapter = this.#adapters.httpAdapter;
    adapter.status(res, response.status);
    for (const [name, value] of Object.entries(response.headers)) adapter.setHeader(res, name, value);
    return response.body;
  }
}
Injectable()(WebhookInterceptor);
Inject(WebhookReceiverService)(WebhookInterceptor, undefined, 0);
Inject(HttpAdapterHost)(WebhookInterceptor, undefined, 1);

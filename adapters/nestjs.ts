/**
 * `webhook-receiver/nestjs`: a NestJS module, an interceptor and parameter decorators that verify
 * and claim a webhook on `@nestjs/platform-express` and `@nestjs/platform-fastify` alike, or, with
 * an inbox in the module's options, verify, deduplicate, enqueue and answer 202 themselves.
 *
 * Translation only: the interceptor takes the raw bytes Nest keeps with `rawBody: true`, calls
 * the receiver, answers from the core's table, and settles the claim by the route handler's
 * outcome. A guard would not do: it runs before the handler and never learns how it ended, and it
 * cannot answer a request itself (it lets it through or throws), which accepting needs.
 *
 * No decorator syntax here: the decorators are applied as functions, and every dependency is
 * injected by an explicit token, so the integration works whatever compiles the app (tsc, SWC,
 * or esbuild and tsx, which emit no decorator metadata).
 *
 * @module webhook-receiver/nestjs
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  Inject,
  Injectable,
  Logger,
  Module,
  createParamDecorator,
  type CallHandler,
  type DynamicModule,
  type ExecutionContext,
  type InjectionToken,
  type ModuleMetadata,
  type NestInterceptor,
  type OnApplicationShutdown,
  type Provider,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { from, lastValueFrom, type Observable } from 'rxjs';
import { escapeControlCharacters } from '../src/lib/encoding.ts';
import { errorText } from '../src/errors.ts';
import { acceptResponse, AdapterFlow, CLIENT_GONE, type AdapterOptions, type WebhookResponse } from '../src/http.ts';
import type { WebhookLogger } from '../src/logger.ts';
import type { Claim, Receiver, WebhookContext } from '../src/receiver.ts';
import type { VerifiedWebhook } from '../src/verify.ts';
import { clientLeft, rawBodyOf } from './node.ts';

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { WebhookContext } from '../src/receiver.ts';
export type { VerifiedWebhook } from '../src/verify.ts';

/**
 * The injection token of the module's options (what `forRoot` was given, or what the
 * `forRootAsync` factory returned).
 *
 * @example
 * ```ts
 * import { Inject } from '@nestjs/common';
 * import { WEBHOOK_RECEIVER_OPTIONS, type WebhookReceiverOptions } from 'webhook-receiver/nestjs';
 * class Health { constructor(@Inject(WEBHOOK_RECEIVER_OPTIONS) readonly options: WebhookReceiverOptions) {} }
 * ```
 */
export const WEBHOOK_RECEIVER_OPTIONS = 'WEBHOOK_RECEIVER_OPTIONS';

/**
 * Options of {@link WebhookReceiverModule.forRoot}: every adapter's, plus whether the module is
 * global.
 *
 * @example
 * ```ts
 * const options: WebhookReceiverOptions = { secrets: process.env.WEBHOOK_SECRET!, isGlobal: true };
 * ```
 */
export interface WebhookReceiverOptions extends AdapterOptions {
  /** Makes the interceptor usable in every module without importing this one. Default `false`. */
  isGlobal?: boolean;
}

/**
 * Options of {@link WebhookReceiverModule.forRootAsync}: the options built by a factory, for
 * instance from `ConfigService`.
 *
 * @example
 * ```ts
 * const async: WebhookReceiverAsyncOptions = {
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ secrets: config.getOrThrow<string>('WEBHOOK_SECRET') }),
 * };
 * ```
 */
export interface WebhookReceiverAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Builds the options from the providers named in `inject`, in that order. */
  useFactory: (...args: never[]) => AdapterOptions | Promise<AdapterOptions>;
  inject?: InjectionToken[];
  isGlobal?: boolean;
}

/**
 * Where the interceptor leaves the verified webhook for the parameter decorators: a property of
 * the request under a symbol of this module's own (as the Fastify adapter keeps its body state),
 * cheaper per request than a WeakMap entry and gone with the request.
 */
const VERIFIED = Symbol('webhook-receiver verified');

interface Verified {
  webhook: VerifiedWebhook;
  context: WebhookContext;
}

/** A request the interceptor may have marked as verified. */
interface MarkedRequest {
  [VERIFIED]?: Verified;
}

/** The context Nest's log lines of the receiver carry (`[WebhookReceiver]` in Nest's console format). */
const LOG_CONTEXT = 'WebhookReceiver';

/** `fields` as `name=value` pairs for a text line: strings quoted (and escaped), `undefined` left out. */
function fieldsText(fields: object): string {
  const pairs: string[] = [];
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined) pairs.push(`${name}=${typeof value === 'string' ? JSON.stringify(value) : String(value)}`);
  }
  return pairs.join(' ');
}

/**
 * The receiver's default logging through Nest's `Logger` (context `WebhookReceiver`), so
 * rejections and store failures take the app's own log format and level: Nest's loggers take one
 * message, so the fields go into it. Request values (the path, the claimed id) are escaped.
 */
function nestLogger(): WebhookLogger {
  const logger = new Logger(LOG_CONTEXT);
  return {
    warn(fields, message) {
      logger.warn(escapeControlCharacters(`${message} ${fieldsText(fields)}`));
    },
    error(fields, message) {
      const { err, ...rest } = fields as { err?: unknown };
      const stack = err instanceof Error ? err.stack : undefined;
      logger.error(escapeControlCharacters(`${message} ${fieldsText(rest)}: ${errorText(err)}`), stack);
    },
  };
}

/**
 * The receiver the module builds from its options, once per app. Inject it to reach the
 * receiver (a readiness check with `receiver.ping()`, or `receiver.inbox` when the module accepts
 * into one); on shutdown (`app.close()`, or a signal with `app.enableShutdownHooks()`) it closes
 * the receiver, which stops renewals and lets completions in flight finish.
 *
 * @example
 * ```ts
 * import { Inject } from '@nestjs/common';
 * import { WebhookReceiverService } from 'webhook-receiver/nestjs';
 * class Ready { constructor(@Inject(WebhookReceiverService) private readonly webhooks: WebhookReceiverService) {}
 *   check() { return this.webhooks.receiver.ping(); } }
 * ```
 */
export class WebhookReceiverService implements OnApplicationShutdown {
  /** @internal The adapters' shared flow. */
  readonly flow: AdapterFlow;
  /** The receiver behind the interceptor. */
  readonly receiver: Receiver;

  constructor(options: AdapterOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError('WebhookReceiverModule needs an options object: WebhookReceiverModule.forRoot({ secrets })');
    const { isGlobal: _isGlobal, ...receiverOptions } = options as WebhookReceiverOptions;
    // Nest's Logger unless the app chose a logger; `onRejected` and `onError`, when given, still
    // replace the logging they cover.
    this.flow = new AdapterFlow({ ...receiverOptions, logger: receiverOptions.logger ?? nestLogger() });
    this.receiver = this.flow.receiver;
  }

  /** Closes the receiver when Nest shuts down (`app.enableShutdownHooks()`). */
  onApplicationShutdown(): Promise<void> {
    return this.receiver.close();
  }
}

// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
// The interceptor, in the same order as every adapter: body, claim, answer, settle

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

function verifiedOf(context: ExecutionContext, decorator: string): Verified {
  const found = context.switchToHttp().getRequest<MarkedRequest>()[VERIFIED];
  if (found === undefined) {
    throw new TypeError(`${decorator} is used on a route without WebhookInterceptor: add @UseInterceptors(WebhookInterceptor) to the route or its controller`);
  }
  return found;
}

/**
 * Parameter decorator: the verified webhook of a route behind {@link WebhookInterceptor}.
 *
 * @example
 * ```ts
 * @Post() @UseInterceptors(WebhookInterceptor)
 * receive(@Webhook() webhook: VerifiedWebhook) { return { id: webhook.id }; }
 * ```
 */
export const Webhook: () => ParameterDecorator = createParamDecorator((_data: unknown, context: ExecutionContext) => verifiedOf(context, '@Webhook()').webhook);

/**
 * Parameter decorator: the handler's {@link WebhookContext} (`signal`, aborted when the claim is
 * lost; `claim`, for stores that settle it in the handler's transaction), the same object every
 * adapter gives.
 *
 * @example
 * ```ts
 * @Post() @UseInterceptors(WebhookInterceptor)
 * async receive(@Webhook() webhook: VerifiedWebhook, @WebhookCtx() context: WebhookContext) {
 *   await this.orders.apply(webhook.json(), { signal: context.signal });
 * }
 * ```
 */
export const WebhookCtx: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext) => verifiedOf(context, '@WebhookCtx()').context,
);

function moduleOf(optionsProvider: Provider, imports: ModuleMetadata['imports'], isGlobal: boolean | undefined): DynamicModule {
  const service: Provider = {
    provide: WebhookReceiverService,
    useFactory: (options: AdapterOptions) => new WebhookReceiverService(options),
    inject: [WEBHOOK_RECEIVER_OPTIONS],
  };
  return {
    module: WebhookReceiverModule,
    global: isGlobal === true,
    imports: imports ?? [],
    providers: [optionsProvider, service, WebhookInterceptor],
    exports: [WEBHOOK_RECEIVER_OPTIONS, WebhookReceiverService, WebhookInterceptor],
  };
}

/**
 * The module that configures the receiver: `forRoot(options)`, or `forRootAsync` to build the
 * options from other providers (`ConfigService`, a provider of the app's inbox). Import it in the
 * module whose controllers use {@link WebhookInterceptor} (or pass `isGlobal: true`). Create the
 * app with `rawBody: true`. With `inbox` in the options the interceptor accepts into it and
 * answers 202 itself; run `inbox.work(handler)` from a provider's `onApplicationBootstrap`.
 *
 * @example
 * ```ts
 * import { Module } from '@nestjs/common';
 * import { ConfigModule, ConfigService } from '@nestjs/config';
 * import { WebhookReceiverModule } from 'webhook-receiver/nestjs';
 *
 * @Module({
 *   imports: [
 *     WebhookReceiverModule.forRootAsync({
 *       imports: [ConfigModule.forRoot()],
 *       inject: [ConfigService],
 *       useFactory: (config: ConfigService) => ({ secrets: config.getOrThrow<string>('WEBHOOK_SECRET') }),
 *     }),
 *   ],
 *   controllers: [WebhooksController],
 * })
 * export class AppModule {}
 * // main.ts: const app = await NestFactory.create(AppModule, { rawBody: true });
 * ```
 */
export class WebhookReceiverModule {
  /**
   * The module with fixed options. They are checked when the app starts: a bad secret fails it.
   *
   * @example
   * ```ts
   * @Module({ imports: [WebhookReceiverModule.forRoot({ secrets: process.env.WEBHOOK_SECRET! })], controllers: [WebhooksController] })
   * export class AppModule {}
   * ```
   */
  static forRoot(options: WebhookReceiverOptions): DynamicModule {
    if (typeof options !== 'object' || options === null) throw new TypeError('WebhookReceiverModule.forRoot needs an options object: forRoot({ secrets })');
    return moduleOf({ provide: WEBHOOK_RECEIVER_OPTIONS, useValue: options }, [], options.isGlobal);
  }

  /**
   * The module with options from a factory (which may be async and inject other providers).
   *
   * @example
   * ```ts
   * WebhookReceiverModule.forRootAsync({
   *   imports: [ConfigModule],
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ secrets: config.getOrThrow<string>('WEBHOOK_SECRET') }),
   * });
   * ```
   */
  static forRootAsync(options: WebhookReceiverAsyncOptions): DynamicModule {
    if (typeof options?.useFactory !== 'function') throw new TypeError('WebhookReceiverModule.forRootAsync needs a useFactory function');
    const provider: Provider = { provide: WEBHOOK_RECEIVER_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] };
    return moduleOf(provider, options.imports, options.isGlobal);
  }
}
Module({})(WebhookReceiverModule);

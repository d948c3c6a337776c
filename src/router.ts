/**
 * A small typed router for the Standard Webhooks payload shape, `{ type, timestamp, data }`: one
 * handler per event type, its `data` validated by a Standard Schema before the handler sees it.
 *
 * It sits after verification and idempotency (it takes a verified webhook), so it works the same
 * behind every adapter and behind `receiver.handle`.
 */

import { WebhookError } from './errors.ts';
import type { WebhookContext } from './receiver.ts';
import { checkSchema, usePayload, validateUnchecked, type StandardSchemaV1 } from './schema.ts';
import type { VerifiedWebhook } from './verify.ts';

/**
 * A Standard Webhooks event: its `type`, its ISO 8601 `timestamp`, and the validated `data`.
 *
 * @example
 * ```ts
 * const onPaid = (event: WebhookEvent<'invoice.paid', { invoiceId: string }>) => markPaid(event.data.invoiceId);
 * ```
 */
export interface WebhookEvent<Type extends string = string, Data = unknown> {
  readonly type: Type;
  readonly timestamp: string;
  readonly data: Data;
}

/**
 * A route's handler: the event with its validated data, the webhook it came in, and the
 * delivery's context (`signal`, `claim`) when the caller passed one.
 *
 * @example
 * ```ts
 * const handler: EventHandler<'invoice.paid', { invoiceId: string }> = async (event, webhook, context) => {
 *   await invoices.markPaid(event.data.invoiceId, { signal: context?.signal });
 * };
 * ```
 */
export type EventHandler<Type extends string, Data> = (
  event: WebhookEvent<Type, Data>,
  webhook: VerifiedWebhook,
  context: WebhookContext | undefined,
) => unknown;

/**
 * What happens to an event of a type no route handles:
 * - `'acknowledge'` (default): resolves as unhandled, so the adapter answers 2xx and the sender
 *   stops retrying an event this endpoint will never handle;
 * - `'retry'`: throws, so the claim is released and the endpoint answers 500; the sender retries
 *   (useful while a deployment that handles the type rolls out);
 * - a function: called with the event (its `data` unvalidated); what it throws propagates.
 *
 * @example
 * ```ts
 * const router = createRouter({ unhandled: (event) => console.info('ignored', event.type) });
 * ```
 */
export type UnhandledEvents = 'acknowledge' | 'retry' | ((event: WebhookEvent<string, unknown>, webhook: VerifiedWebhook) => unknown);

/**
 * Options of {@link createRouter}.
 *
 * @example
 * ```ts
 * const options: RouterOptions = { unhandled: 'retry' };
 * ```
 */
export interface RouterOptions {
  /** Default `'acknowledge'`. */
  unhandled?: UnhandledEvents;
}

/**
 * What {@link WebhookRouter.handle} resolves to: the type, and whether a route handled it (with
 * what its handler returned).
 *
 * @example
 * ```ts
 * const routed = await router.handle(webhook);
 * if (!routed.handled) console.info('no route for', routed.type);
 * ```
 */
export type RouteResult = { handled: true; type: string; value: unknown } | { handled: false; type: string };

/**
 * Routes verified webhooks by their payload's `type`.
 *
 * @example
 * ```ts
 * const router = createRouter().on('invoice.paid', InvoicePaid, (event) => markPaid(event.data.invoiceId));
 * await router.handle(webhook, context);
 * ```
 */
export interface WebhookRouter {
  /**
   * Handles events of `type`: their `data` is validated by `schema` (sync or async), and a
   * payload that does not match throws `INVALID_PAYLOAD` (400) before the handler runs.
   */
  on<Type extends string, Schema extends StandardSchemaV1>(
    type: Type,
    schema: Schema,
    handler: EventHandler<Type, StandardSchemaV1.InferOutput<Schema>>,
  ): WebhookRouter;
  /**
   * Parses the webhook's payload, validates its `data` and runs the route's handler. A payload
   * that is not `{ type, timestamp, data }` throws `INVALID_PAYLOAD`.
   */
  handle(webhook: VerifiedWebhook, context?: WebhookContext): Promise<RouteResult>;
}

interface Route {
  schema: StandardSchemaV1;
  handler: EventHandler<string, unknown>;
}

/** An event as the envelope gave it: its `data` is replaced by the validated one, in place. */
interface ParsedEvent {
  type: string;
  timestamp: string;
  data: unknown;
}

/** The envelope, checked by hand: its shape is the specification's, not the app's. */
function envelope(payload: unknown): ParsedEvent {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new WebhookError('INVALID_PAYLOAD', 'the payload is not a Standard Webhooks event: expected a JSON object { type, timestamp, data }');
  }
  const { type, timestamp, data } = payload as { type?: unknown; timestamp?: unknown; data?: unknown };
  if (typeof type === 'string' && type !== '' && typeof timestamp === 'string' && data !== undefined) return { type, timestamp, data };
  // Only a refused envelope pays for saying what is wrong with it.
  const missing: string[] = [];
  if (typeof type !== 'string' || type === '') missing.push('type (a non-empty string)');
  if (typeof timestamp !== 'string') missing.push('timestamp (a string)');
  if (data === undefined) missing.push('data');
  throw new WebhookError('INVALID_PAYLOAD', `the payload is not a Standard Webhooks event: ${missing.join(', ')} missing or of the wrong type`);
}

class Router implements WebhookRouter {
  readonly #routes = new Map<string, Route>();
  readonly #unhandled: UnhandledEvents;

  constructor(options: RouterOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError('createRouter takes an options object');
    const unhandled = options.unhandled ?? 'acknowledge';
    if (unhandled !== 'acknowledge' && unhandled !== 'retry' && typeof unhandled !== 'function') {
      throw new TypeError(`unhandled must be 'acknowledge', 'retry' or a function`);
    }
    this.#unhandled = unhandled;
  }

  on<Type extends string, Schema extends StandardSchemaV1>(type: Type, schema: Schema, handler: EventHandler<Type, StandardSchemaV1.InferOutput<Schema>>): WebhookRouter {
    if (typeof type !== 'string' || type === '') throw new TypeError('on(type, schema, handler): type must be a non-empty string');
    checkSchema(schema, `on('${type}', schema, handler)`);
    if (typeof handler !== 'function') throw new TypeError(`on('${type}', schema, handler): handler must be a function`);
    if (this.#routes.has(type)) throw new TypeError(`a handler for '${type}' is already registered: one route per type`);
    this.#routes.set(type, { schema, handler: handler as EventHandler<string, unknown> });
    return this;
  }

  async handle(webhook: VerifiedWebhook, context?: WebhookContext): Promise<RouteResult> {
    // The route is looked up once, where the data is validated by its schema: one registered for
    // the type while a validation is awaited must not get this event's unvalidated data.
    let route: Route | undefined;
    const event = await usePayload(webhook, (payload) => {
      const parsed = envelope(payload);
      route = this.#routes.get(parsed.type);
      return route === undefined ? parsed : withValidData(parsed, route.schema);
    });
    if (route === undefined) {
      const unhandled = this.#unhandled;
      if (unhandled === 'retry') throw new Error(`no handler for webhook events of type '${event.type}' (unhandled: 'retry'), so the sender will retry it`);
      if (typeof unhandled === 'function') await unhandled(event, webhook);
      return { handled: false, type: event.type };
    }
    const value: unknown = await route.handler(event, webhook, context);
    return { handled: true, type: event.type, value };
  }
}

/**
 * `event` with its `data` replaced by what `schema` made of it, or the `INVALID_PAYLOAD` it raised.
 * The schema is the one `on()` checked: not checked again per delivery.
 */
function withValidData(event: ParsedEvent, schema: StandardSchemaV1): ParsedEvent | Promise<ParsedEvent> {
  const data = validateUnchecked(schema, event.data);
  if (!(data instanceof Promise)) {
    event.data = data;
    return event;
  }
  return data.then((valid) => {
    event.data = valid;
    return event;
  });
}

/**
 * Creates a typed router for Standard Webhooks events. Register one handler per `type` with a
 * Standard Schema for its `data`; events of types no route handles are acknowledged (2xx) by
 * default, so the sender does not retry them forever (see {@link RouterOptions}).
 *
 * Validation failures throw `INVALID_PAYLOAD`, which every adapter answers 400 after releasing
 * the claim; the error's message lists where the issues are, never the payload's values.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { createRouter } from 'webhook-receiver';
 * import { webhookHandler } from 'webhook-receiver/fetch';
 *
 * const router = createRouter()
 *   .on('invoice.paid', z.object({ invoiceId: z.string(), amount: z.number() }), async (event) => {
 *     await invoices.markPaid(event.data.invoiceId, event.data.amount);
 *   });
 *
 * export const POST = webhookHandler({ secrets: process.env.WEBHOOK_SECRET! }, async (webhook, request, context) => {
 *   await router.handle(webhook, context);
 * });
 * ```
 */
export function createRouter(options: RouterOptions = {}): WebhookRouter {
  return new Router(options);
}

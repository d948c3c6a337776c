/**
 * The error model: one class, one stable `code` per failure, and one table from code to HTTP
 * status that every adapter answers from. Tests and apps match on `code`, never on message text.
 */

import { StoreError } from './stores/types.ts';

/**
 * HTTP status for every {@link WebhookErrorCode}. Adapters answer rejected requests with it.
 *
 * @example
 * ```ts
 * import { WEBHOOK_ERROR_STATUS } from 'webhook-receiver';
 * WEBHOOK_ERROR_STATUS.SIGNATURE_MISMATCH; // 401
 * ```
 */
export const WEBHOOK_ERROR_STATUS = {
  MISSING_ID: 400,
  MISSING_TIMESTAMP: 400,
  INVALID_TIMESTAMP: 400,
  INVALID_SIGNATURE_HEADER: 400,
  MISSING_SIGNATURE: 401,
  SIGNATURE_MISMATCH: 401,
  TIMESTAMP_TOO_OLD: 401,
  TIMESTAMP_TOO_NEW: 401,
  PAYLOAD_TOO_LARGE: 413,
  INVALID_PAYLOAD: 400,
  INVALID_VERSION: 400,
  ENTITY_BUSY: 409,
  UNKNOWN_TENANT: 404,
  UNSUPPORTED_ENCODING: 415,
  PERMANENT_FAILURE: 422,
  BODY_UNAVAILABLE: 500,
  INVALID_NAMESPACE: 500,
  INVALID_TENANT_KEYS: 500,
  STORE_UNAVAILABLE: 503,
  INBOX_UNAVAILABLE: 503,
  KEYS_UNAVAILABLE: 503,
  UNSIGNED_LIMIT: 503,
} as const;

/**
 * Every way a webhook can be refused. Each code maps to one HTTP status in
 * {@link WEBHOOK_ERROR_STATUS}.
 *
 * @example
 * ```ts
 * import type { WebhookErrorCode } from 'webhook-receiver';
 * const retryable: WebhookErrorCode[] = ['STORE_UNAVAILABLE'];
 * ```
 */
export type WebhookErrorCode = keyof typeof WEBHOOK_ERROR_STATUS;

/** The brand of every `WebhookError`, shared by all copies of the package through `Symbol.for`. */
const BRAND = Symbol.for('webhook-receiver.WebhookError');
/** The brand of every `PermanentError`, likewise. */
const PERMANENT_BRAND = Symbol.for('webhook-receiver.PermanentError');

/** `true` when `value` carries `brand` (set on the prototype of every copy's class). */
function branded(value: unknown, brand: symbol): boolean {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[brand] === true;
}

/**
 * What a {@link WebhookError} may carry besides its message.
 *
 * @example
 * ```ts
 * import { WebhookError, type WebhookErrorOptions } from 'webhook-receiver';
 * const options: WebhookErrorOptions = { hint: 'mount webhooks() before express.json()' };
 * throw new WebhookError('BODY_UNAVAILABLE', 'the raw request body is not available', options);
 * ```
 */
export interface WebhookErrorOptions {
  /** The underlying error (a `SyntaxError` from the JSON parser, a store's error). */
  cause?: unknown;
  /**
   * How to fix it, for the operator: the log line shows it, the answer to the remote caller never
   * does (it may describe how the server is built).
   */
  hint?: string;
  /** Seconds before a retry may succeed, sent as `Retry-After` (`ENTITY_BUSY`). */
  retryAfterSeconds?: number;
}

/**
 * Why a webhook was refused. `code` is stable (match on it); `status` is the HTTP status an
 * endpoint should answer with; `message` says which check failed and never contains a secret or
 * an expected signature; `hint`, when there is one, says how to fix a server-side mistake and is
 * written to the log only, never into an answer.
 *
 * @example
 * ```ts
 * import { WebhookError, verifyWebhook } from 'webhook-receiver';
 * try {
 *   await verifyWebhook({ headers, body }, { secrets: process.env.WEBHOOK_SECRET! });
 * } catch (error) {
 *   if (error instanceof WebhookError) console.warn(error.code, error.status, error.message, error.hint ?? '');
 *   else throw error;
 * }
 * ```
 */
export class WebhookError extends Error {
  /**
   * `instanceof WebhookError` holds for an error made by any copy of this package in the process
   * (the CommonJS and the ES module build, or two installed versions), each of which has its own
   * class: the test is the registry-wide brand every copy sets on its prototype. A subclass keeps
   * the ordinary prototype test.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== WebhookError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return branded(value, BRAND);
  }

  /** The stable machine-readable reason. */
  readonly code: WebhookErrorCode;
  /** The HTTP status to answer with. */
  readonly status: number;
  /** How to fix it, for the log; never part of an HTTP answer. */
  readonly hint: string | undefined;

  /**
   * How long to wait before retrying, in seconds, when the refusal is temporary and the receiver
   * knows (`ENTITY_BUSY`: until the entity's lock runs out); adapters send it as `Retry-After`.
   */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: WebhookErrorCode, message: string, options?: WebhookErrorOptions) {
    super(message, options !== undefined && 'cause' in options ? { cause: options.cause } : undefined);
    this.name = 'WebhookError';
    this.code = code;
    this.status = WEBHOOK_ERROR_STATUS[code];
    this.hint = options?.hint;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}
Object.defineProperty(WebhookError.prototype, BRAND, { value: true });

const PERMANENT_MESSAGE = 'the handler cannot process this webhook, and retrying it will not help';

/**
 * Thrown by a handler that can never process this delivery (the order it names does not exist,
 * the account was closed): retrying will not help. It is a {@link WebhookError} with the code
 * `PERMANENT_FAILURE`: every adapter releases the claim and answers 422 in the
 * `{ error, message }` envelope, with this error's `message` (written for the sender: keep
 * internals out of it, in `cause` or `hint`), so the sender stops retrying when its schedule says
 * so; a plain `Error` would be a 500 that it keeps retrying. Like `WebhookError`, `instanceof
 * PermanentError` holds across the CommonJS and ES module builds.
 *
 * @example
 * ```ts
 * import { PermanentError } from 'webhook-receiver';
 * await receiver.handle(request, async (webhook) => {
 *   const { orderId } = webhook.json<{ orderId: string }>();
 *   const order = await orders.find(orderId);
 *   if (order === undefined) throw new PermanentError(`no order ${orderId}`);
 *   await order.markPaid();
 * });
 * ```
 */
export class PermanentError extends WebhookError {
  /** The brand test, as {@link WebhookError}'s: every copy's `PermanentError` is recognised. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== PermanentError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return branded(value, PERMANENT_BRAND);
  }

  constructor(message: string = PERMANENT_MESSAGE, options?: WebhookErrorOptions) {
    super('PERMANENT_FAILURE', message, options);
    this.name = 'PermanentError';
  }
}
Object.defineProperty(PermanentError.prototype, PERMANENT_BRAND, { value: true });

/**
 * True when `value` is a {@link WebhookError}, also across bundles (an ESM and a CommonJS copy of
 * this package in one process each have their own class).
 *
 * @example
 * ```ts
 * import { isWebhookError } from 'webhook-receiver';
 * if (isWebhookError(error) && error.code === 'SIGNATURE_MISMATCH') metrics.increment('forged');
 * ```
 */
export function isWebhookError(value: unknown): value is WebhookError {
  if (value instanceof WebhookError) return true;
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as { name?: unknown; code?: unknown; status?: unknown };
  return (
    (candidate.name === 'WebhookError' || candidate.name === 'PermanentError') &&
    typeof candidate.code === 'string' &&
    Object.hasOwn(WEBHOOK_ERROR_STATUS, candidate.code) &&
    typeof candidate.status === 'number'
  );
}

/** `Error.stackTraceLimit` where the engine has it (V8, JavaScriptCore); the core has no Node types. */
const ErrorWithLimit = Error as { stackTraceLimit?: number };

/**
 * A {@link WebhookError} for an expected rejection: a forged signature, a stale timestamp, a
 * malformed header. It is built without stack frames (its `stack` is `WebhookError: <message>`):
 * the request is what failed, not the code, and capturing frames cost more than the HMAC that
 * decided it (a third of the time spent refusing a forged request). `code`, `status`, `message`
 * and `cause` are those of any WebhookError. Programming errors (a body parser that ran first, bad options) keep
 * `new WebhookError` / `TypeError` and their full stack. Internal: not exported from the package.
 */
export function rejection(code: WebhookErrorCode, message: string, options?: WebhookErrorOptions): WebhookError {
  const limit = ErrorWithLimit.stackTraceLimit;
  // Engines without the setting (or with it made non-numeric by the app) get a normal error.
  if (typeof limit !== 'number') return new WebhookError(code, message, options);
  ErrorWithLimit.stackTraceLimit = 0;
  try {
    return new WebhookError(code, message, options);
  } finally {
    ErrorWithLimit.stackTraceLimit = limit;
  }
}

/**
 * `BODY_UNAVAILABLE`: the raw bytes that were signed are gone, a mistake in how the server is
 * built. The remote caller is told only that; `hint` (the fix for this framework) goes to the
 * log. Internal: not exported from the package.
 */
export function bodyUnavailable(hint: string): WebhookError {
  return new WebhookError('BODY_UNAVAILABLE', 'the server could not read the raw request body, so the signature cannot be checked', { hint });
}

/**
 * The `UNSIGNED_LIMIT` refusal (503, answered with `Retry-After`) of an unsigned delivery whose
 * store has no room left in its unsigned budget; `cause` is the store's error. The message names
 * no setting: the caller is remote and unauthenticated. Internal: not exported from the package.
 */
export function unsignedLimit(cause: unknown): WebhookError {
  return rejection('UNSIGNED_LIMIT', 'unsigned deliveries have reached their budget in the idempotency store; retry later', { cause });
}

/**
 * What a handler's failure is answered as: a `StoreError` it let through (the Postgres store's
 * `transaction` lost its connection, or timed out) is the store's outage, `STORE_UNAVAILABLE` (503,
 * with `Retry-After`) as when a claim fails, with the store's error as `cause`; anything else is the
 * handler's own failure, unchanged. Internal: not exported from the package.
 */
export function handlerFailure(error: unknown): unknown {
  if (!(error instanceof StoreError)) return error;
  return new WebhookError('STORE_UNAVAILABLE', 'the idempotency store became unreachable while the handler ran; retry later', { cause: error });
}

/**
 * An error as one line of text, `Name: message` (anything thrown that is not an `Error`, as
 * `String` writes it): how a store failure or an exhausted retry is written into a log line or a
 * message. Internal: not exported from the package.
 *
 * @example
 * ```ts
 * errorText(new TypeError('no store')); // 'TypeError: no store'
 * errorText('gone'); // 'gone'
 * ```
 */
export function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}


/**
 * The error model: one class, one stable `code` per failure, and one table from code to HTTP
 * status that every adapter answers from. Tests and apps match on `code`, never on message text.
 */

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
  UNSUPPORTED_ENCODING: 415,
  BODY_UNAVAILABLE: 500,
  INVALID_NAMESPACE: 500,
  STORE_UNAVAILABLE: 503,
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

/**
 * Why a webhook was refused. `code` is stable (match on it); `status` is the HTTP status an
 * endpoint should answer with; `message` says which check failed and never contains a secret or
 * an expected signature.
 *
 * @example
 * ```ts
 * import { WebhookError, verifyWebhook } from 'webhook-receiver';
 * try {
 *   await verifyWebhook({ headers, body }, { secrets: process.env.WEBHOOK_SECRET! });
 * } catch (error) {
 *   if (error instanceof WebhookError) console.warn(error.code, error.status, error.message);
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
    return typeof value === 'object' && value !== null && (value as { [BRAND]?: unknown })[BRAND] === true;
  }

  /** The stable machine-readable reason. */
  readonly code: WebhookErrorCode;
  /** The HTTP status to answer with. */
  readonly status: number;

  /**
   * How long to wait before retrying, in seconds, when the refusal is temporary and the receiver
   * knows (`ENTITY_BUSY`: until the entity's lock runs out); adapters send it as `Retry-After`.
   */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: WebhookErrorCode, message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options);
    this.name = 'WebhookError';
    this.code = code;
    this.status = WEBHOOK_ERROR_STATUS[code];
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}
Object.defineProperty(WebhookError.prototype, BRAND, { value: true });

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
    candidate.name === 'WebhookError' &&
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
 * decided it (issue 17: a third of a forged request). `code`, `status`, `message` and `cause` are
 * those of any WebhookError. Programming errors (a body parser that ran first, bad options) keep
 * `new WebhookError` / `TypeError` and their full stack. Internal: not exported from the package.
 */
export function rejection(code: WebhookErrorCode, message: string, options?: { cause?: unknown; retryAfterSeconds?: number }): WebhookError {
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

/**
 * The app's own logger as the target of the default logging: a pino-style logger gets structured
 * fields (`warn(fields, message)`), the console keeps the one readable line it always had.
 * Nothing logged here ever holds a secret, a signature, a header value other than the webhook id,
 * or the body.
 */

import { escapeControlCharacters } from './lib/encoding.ts';
import { errorText, type WebhookError } from './errors.ts';
import type { RejectionContext } from './rejection.ts';

/**
 * A logger the receiver can write to: pino, bunyan-style child loggers, Fastify's `request.log`,
 * or the console. Only `warn` (rejected requests; an inbox worker's failed jobs) and `error`
 * (store failures) are called, always as `(fields, message)`.
 *
 * @example
 * ```ts
 * import pino from 'pino';
 * const logger: WebhookLogger = pino();
 * createReceiver({ secrets, logger });
 * ```
 */
export interface WebhookLogger {
  /**
   * A rejected request: `code`, `status`, `webhookId`, `method`, `path` (and `tenant`, with tenant
   * keys). A job an inbox worker's handler failed: {@link JobFailureLogFields} and `err`.
   */
  warn(fields: object, message: string): void;
  /** A store failure: `stage`, `webhookId`, `willRetry`, `err` (and `tenant`, with tenant keys). */
  error(fields: object, message: string): void;
}

/**
 * The fields of a rejection log entry: what the request claimed to be (its
 * {@link RejectionContext}: the `webhookId` is unverified), never what it carried, with the
 * error's `code` and `status`.
 *
 * @example
 * ```ts
 * const fields: RejectionLogFields = { code: 'SIGNATURE_MISMATCH', status: 401, webhookId: 'msg_1', method: 'POST', path: '/webhooks' };
 * ```
 */
export type RejectionLogFields = RejectionContext & Pick<WebhookError, 'code' | 'status'>;

/**
 * Where the diagnosis of a signature that does not match is: the CLI replays the request against
 * each secret and says what differs (a re-serialised body, the wrong secret, a proxy's rewrite).
 */
const SIGNATURE_MISMATCH_HINT =
  "to see why, capture the request's headers and exact body bytes and run `npx webhook-receiver verify --header 'webhook-id: …' " +
  "--header 'webhook-timestamp: …' --header 'webhook-signature: …' --body-file body.bin` with WEBHOOK_SECRET set";

/** Checks the `logger` option; `undefined` means the console. */
export function checkLogger(logger: unknown): WebhookLogger | undefined {
  if (logger === undefined) return undefined;
  const candidate = logger as Partial<WebhookLogger> | null;
  if (typeof candidate !== 'object' || candidate === null || typeof candidate.warn !== 'function' || typeof candidate.error !== 'function') {
    throw new TypeError('logger must have warn(fields, message) and error(fields, message) methods (pino, console, …)');
  }
  return candidate as WebhookLogger;
}

/** The console gets a line it can print; any other logger gets fields. */
function isConsole(logger: WebhookLogger | undefined): boolean {
  return logger === undefined || logger === (globalThis as { console?: unknown }).console;
}

/** One rejected request, logged as a warning. */
export function logRejection(logger: WebhookLogger | undefined, error: WebhookError, request: RejectionContext): void {
  // The error's own hint (how to fix a server-side mistake) is for the operator: shown here, never
  // in the answer to the remote caller.
  const fix = error.hint ?? (error.code === 'SIGNATURE_MISMATCH' ? SIGNATURE_MISMATCH_HINT : undefined);
  const hint = fix === undefined ? '' : ` (${fix})`;
  if (isConsole(logger)) {
    // Request values are escaped, so a client cannot break the line or send terminal escapes.
    const tenant = request.tenant === undefined ? '' : ` (tenant ${JSON.stringify(request.tenant)})`;
    console.warn(escapeControlCharacters(`[webhook-receiver] rejected ${request.method} ${request.path}${tenant}: ${error.code} ${error.message}${hint}`));
    return;
  }
  const fields: RejectionLogFields = { code: error.code, status: error.status, webhookId: request.webhookId, method: request.method, path: request.path };
  if (request.tenant !== undefined) fields.tenant = request.tenant;
  logger!.warn(fields, `webhook rejected: ${error.message}${hint}`);
}

/** One failure outside a request's own outcome (a store failure), logged as an error. */
export function logFailure(
  logger: WebhookLogger | undefined,
  fields: { stage: string; webhookId: string; willRetry: boolean; tenant?: string },
  message: string,
  error: unknown,
): void {
  if (isConsole(logger)) {
    // The tenant came from the request (route, host, header): escaped like the other request values.
    const tenant = fields.tenant === undefined ? '' : ` of tenant ${escapeControlCharacters(JSON.stringify(fields.tenant))}`;
    console.error(`[webhook-receiver] ${message} for webhook ${JSON.stringify(fields.webhookId)}${tenant}: ${errorText(error)}`);
    return;
  }
  // pino serialises `err` with its stack and cause.
  logger!.error({ ...fields, err: error }, `webhook receiver: ${message}`);
}

/**
 * The fields of an inbox worker's log entry for a job whose handler failed (with `err`, the error
 * it threw): retried, or dead-lettered. What the job is, never what it holds.
 *
 * @example
 * ```ts
 * const fields: JobFailureLogFields = { outcome: 'retried', webhookId: 'msg_1', namespace: 'default', attempt: 1, maxAttempts: 12, engine: 'bullmq' };
 * ```
 */
export interface JobFailureLogFields {
  outcome: 'retried' | 'dead_lettered';
  webhookId: string;
  namespace: string;
  /** The attempt that failed, 1-based. */
  attempt: number;
  maxAttempts: number;
  engine: string;
  /** The tenant the job was verified for (tenant keys). */
  tenant?: string;
}

/**
 * A job whose handler failed, logged as a warning: the job is retried or kept as a dead letter,
 * so nothing is lost, but someone should look. Successes are not logged, as in the synchronous mode.
 */
export function logJobFailure(logger: WebhookLogger | undefined, fields: JobFailureLogFields, error: unknown): void {
  const what = fields.outcome === 'retried' ? 'will be retried' : 'was dead-lettered';
  if (isConsole(logger)) {
    const tenant = fields.tenant === undefined ? '' : ` of tenant ${JSON.stringify(fields.tenant)}`;
    console.warn(
      escapeControlCharacters(
        `[webhook-receiver] inbox worker: job ${JSON.stringify(fields.webhookId)}${tenant} failed on attempt ${fields.attempt} of ${fields.maxAttempts} (${fields.engine}) and ${what}: ${errorText(error)}`,
      ),
    );
    return;
  }
  logger!.warn({ ...fields, err: error }, `inbox worker: a job failed and ${what}`);
}

/**
 * The one error the relay client throws for anything that went wrong talking to the relay: an
 * answer that was not 200, a request that never got an answer, an answer that was not what the
 * API document says. Never carries the API key: every text that reaches it is scrubbed first.
 */

/**
 * Codes the client gives to failures that have no code of the relay's own: the relay's envelope
 * codes (`NOT_FOUND`, `FORBIDDEN`, …) are passed through as they come.
 *
 * - `UNAUTHORIZED`, `FORBIDDEN`: a 401 or 403, whose body the relay leaves empty.
 * - `SERVER_ERROR`: a 5xx, whose body is plain text.
 * - `HTTP_ERROR`: any other status without the `{ error, message }` envelope.
 * - `NETWORK_ERROR`: no answer (connection refused or reset, DNS).
 * - `TIMEOUT`: no answer within `timeoutMs`.
 * - `ABORTED`: the caller's `signal` aborted the call.
 * - `BAD_RESPONSE`: a 200 whose body is not the document the API describes.
 * - `PAYLOAD_LENGTH_MISMATCH`: a raw body whose decoded length is not the `bytes` it declares.
 * - `OPENAPI_UNAVAILABLE`: the relay's OpenAPI description could not be read.
 * - `QUERY_NAMES`: the OpenAPI description does not say which query parameter plays a role
 *   the call needs (none, or two, candidates), or requires one the client does not know.
 *
 * @example
 * ```ts
 * import { RelayError, type RelayClientErrorCode } from 'webhook-receiver/relay';
 * const retryable: RelayClientErrorCode[] = ['NETWORK_ERROR', 'TIMEOUT', 'SERVER_ERROR'];
 * function shouldRetry(error: RelayError): boolean {
 *   return (retryable as string[]).includes(error.code);
 * }
 * ```
 */
export type RelayClientErrorCode =
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'SERVER_ERROR'
  | 'HTTP_ERROR'
  | 'NETWORK_ERROR'
  | 'TIMEOUT'
  | 'ABORTED'
  | 'BAD_RESPONSE'
  | 'PAYLOAD_LENGTH_MISMATCH'
  | 'OPENAPI_UNAVAILABLE'
  | 'QUERY_NAMES';

/**
 * What a {@link RelayError} is made of.
 *
 * @example
 * ```ts
 * import { RelayError, type RelayErrorInit } from 'webhook-receiver/relay';
 * const init: RelayErrorInit = { status: 404, code: 'NOT_FOUND', message: 'no such event', operation: 'GET /v1/events/{eventId}' };
 * const error = new RelayError(init);
 * ```
 */
export interface RelayErrorInit {
  /** The HTTP status, or 0 when no answer came. */
  status: number;
  code: string;
  /** What went wrong, without the request id (the error's `message` adds it). */
  message: string;
  /** Method and path template, e.g. `GET /v1/events/{eventId}`. */
  operation: string;
  requestId?: string | undefined;
  retryAfter?: number | undefined;
  challenge?: string | undefined;
  cause?: unknown;
}

/**
 * A failed call to the relay's API. `code` is the relay's own (the `error` of its
 * `{ error, message }` envelope) or one of {@link RelayClientErrorCode}; `requestId` is the
 * answer's `x-request-id`, which the relay's support asks for and which the message quotes;
 * `retryAfter` is the seconds a 429 asked to wait (set when the client gave up waiting within its
 * retry budget); `challenge` is the `WWW-Authenticate` header of a 401 or 403. The API key never
 * appears in it: not in the message, not in a field, not in the stack.
 *
 * @example
 * ```ts
 * import { relayClient, RelayError } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * try {
 *   await relay.event('0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80');
 * } catch (error) {
 *   if (error instanceof RelayError && error.status === 404) console.log('no such event', error.requestId);
 *   else throw error;
 * }
 * ```
 */
export class RelayError extends Error {
  /** The HTTP status, or 0 when no answer came (`NETWORK_ERROR`, `TIMEOUT`, `ABORTED`). */
  readonly status: number;
  /** The relay's error code, or the client's own (see {@link RelayClientErrorCode}). */
  readonly code: string;
  /** The `x-request-id` of the answer, when one came. */
  readonly requestId: string | undefined;
  /** Seconds the relay asked to wait (429), when the client gave up waiting. */
  readonly retryAfter: number | undefined;
  /** The `WWW-Authenticate` challenge of a 401 or 403. */
  readonly challenge: string | undefined;
  /** Method and path template of the call, e.g. `POST /v1/replay-destinations/{destinationId}/signing-secret`. */
  readonly operation: string;

  constructor(init: RelayErrorInit) {
    const quoted = init.requestId === undefined ? '' : ` (request id ${init.requestId})`;
    super(`${init.operation}: ${init.message}${quoted}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'RelayError';
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.retryAfter = init.retryAfter;
    this.challenge = init.challenge;
    this.operation = init.operation;
  }
}

/** Anything that looks like a relay API key, wherever it turns up in a text. */
const KEY_PATTERN = /whk_[^\s"'`,;&)\]}]*/g;

/**
 * `text` with every API key in it replaced by `whk_[redacted]`: the client's own key and any other
 * that a server echoed back.
 */
export function scrubKeys(text: string): string {
  return text.replace(KEY_PATTERN, 'whk_[redacted]');
}

/**
 * One call to the relay's API: the bearer key in the header and nowhere else, a time limit per
 * attempt, and the retry rules of the API document: a 429 waits its `Retry-After` while the wait
 * fits the retry budget; network failures and 5xx answers are tried again with backoff only for
 * reads, which repeat harmlessly (a second rotation would discard the secret the first issued).
 */

import { RelayError, scrubKeys } from './errors.ts';

/** The `fetch` the client calls: the global one unless the options give another. */
export type RelayFetch = (input: string, init: RequestInit) => Promise<Response>;

export interface TransportOptions {
  /** The base URL, checked, without a trailing slash. */
  baseUrl: string;
  /** `Bearer whk_…`: kept here, in a closure, and sent only in the `authorization` header. */
  authorization: string;
  fetch: RelayFetch | undefined;
  timeoutMs: number;
  retryBudgetMs: number;
}

interface CallInit {
  method: 'GET' | 'POST';
  /** The path under the base URL, ids already checked. */
  path: string;
  /** Method and path template, for errors. */
  operation: string;
  query?: URLSearchParams | undefined;
  /** A read: safe to send again after a network failure or a 5xx. */
  idempotent: boolean;
  signal?: AbortSignal | undefined;
  /** Added to the message of a failure that leaves it unknown whether the call took effect. */
  unknownOutcomeNote?: string;
}

interface CallResult {
  body: unknown;
  requestId: string | undefined;
}

export type Call = (init: CallInit) => Promise<CallResult>;

const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 5_000;
const TEXT_SHOWN = 300;

/** Seconds from a `Retry-After` header (delta-seconds or an HTTP date), or `undefined`. */
function retryAfterSeconds(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** Resolves after `ms`; rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function envelope(text: string): { error: string; message: string } | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null) {
      const { error, message } = parsed as { error?: unknown; message?: unknown };
      if (typeof error === 'string' && error !== '') return { error, message: typeof message === 'string' ? message : '' };
    }
  } catch {
    // Not the envelope: the status decides the code.
  }
  return undefined;
}

/**
 * A text from the server or the network made safe to show: the client's own key is removed
 * verbatim first (a key may hold characters that end the generic pattern), then anything else
 * shaped like a key.
 */
function scrub(text: string, key: string): string {
  return scrubKeys(key === '' ? text : text.split(key).join('whk_[redacted]'));
}

function shown(text: string, key: string): string {
  const line = scrub(text, key).replace(/\s+/g, ' ').trim();
  return line.length > TEXT_SHOWN ? `${line.slice(0, TEXT_SHOWN)}…` : line;
}

/** An answer, its body read within the time limit. */
interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/** The answer's `x-request-id`, scrubbed and bounded like any text the server sends. */
function requestIdOf(headers: Headers, key: string): string | undefined {
  const value = headers.get('x-request-id');
  return value === null ? undefined : shown(value, key);
}

function failure(response: Answer, text: string, operation: string, retryAfter: number | undefined, key: string): RelayError {
  const requestId = requestIdOf(response.headers, key);
  const status = response.status;
  const challenge = status === 401 || status === 403 ? (response.headers.get('www-authenticate') ?? undefined) : undefined;
  const parsed = envelope(text);
  let code: string;
  let message: string;
  if (parsed !== undefined) {
    code = scrub(parsed.error, key);
    message = `${status} ${code}${parsed.message === '' ? '' : `: ${shown(parsed.message, key)}`}`;
  } else if (status === 401 || status === 403) {
    code = status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN';
    message = `${status} ${code}: ${status === 401 ? 'the API key is missing, unknown or revoked' : 'the API key lacks the scope this operation needs'}`;
  } else {
    code = status >= 500 ? 'SERVER_ERROR' : 'HTTP_ERROR';
    const body = shown(text, key);
    message = `${status} ${code}${body === '' ? '' : `: ${body}`}`;
  }
  if (challenge !== undefined) message += ` (challenge: ${shown(challenge, key)})`;
  if (retryAfter !== undefined) message += `; the relay asked to wait ${retryAfter} s, more than the retry budget left`;
  return new RelayError({ status, code, message, operation, requestId, retryAfter, challenge: challenge === undefined ? undefined : shown(challenge, key) });
}

/** A function that makes calls to one relay with one key. */
export function createTransport(options: TransportOptions): Call {
  const { baseUrl, authorization, timeoutMs, retryBudgetMs } = options;
  const key = authorization.replace(/^Bearer /, '');

  async function attempt(init: CallInit): Promise<Answer | RelayError> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const onAbort = () => controller.abort();
    init.signal?.addEventListener('abort', onAbort, { once: true });
    const url = `${baseUrl}${init.path}${init.query === undefined || init.query.toString() === '' ? '' : `?${init.query.toString()}`}`;
    try {
      const fetchImpl = options.fetch ?? globalThis.fetch;
      const response = await fetchImpl(url, {
        method: init.method,
        headers: { authorization, accept: 'application/json' },
        signal: controller.signal,
        redirect: 'error',
      });
      // The body is read inside the same time limit.
      return { status: response.status, headers: response.headers, text: await response.text() };
    } catch (error) {
      const note = init.unknownOutcomeNote === undefined ? '' : `; ${init.unknownOutcomeNote}`;
      if (init.signal?.aborted === true) {
        return new RelayError({ status: 0, code: 'ABORTED', operation: init.operation, message: `aborted by the caller${note}` });
      }
      if (timedOut) {
        return new RelayError({ status: 0, code: 'TIMEOUT', operation: init.operation, message: `no answer within ${timeoutMs} ms${note}` });
      }
      const reason = error instanceof Error ? shown(error.message, key) : 'unknown error';
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${shown(error.cause.message, key)}` : '';
      return new RelayError({ status: 0, code: 'NETWORK_ERROR', operation: init.operation, message: `could not reach ${baseUrl} (${reason}${cause})${note}` });
    } finally {
      clearTimeout(timer);
      init.signal?.removeEventListener('abort', onAbort);
    }
  }

  return async function call(init: CallInit): Promise<CallResult> {
    const deadline = Date.now() + retryBudgetMs;
    for (let tries = 0; ; tries++) {
      const outcome = await attempt(init);
      let waitMs: number | undefined;
      if (outcome instanceof RelayError) {
        if (!init.idempotent || outcome.code === 'ABORTED') throw outcome;
        waitMs = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** tries);
        if (Date.now() + waitMs > deadline) throw outcome;
      } else {
        const text = outcome.text;
        if (outcome.status === 200) {
          const requestId = requestIdOf(outcome.headers, key);
          try {
            return { body: JSON.parse(text) as unknown, requestId };
          } catch {
            throw new RelayError({ status: 200, code: 'BAD_RESPONSE', operation: init.operation, requestId, message: 'the answer is not JSON' });
          }
        }
        const asked = retryAfterSeconds(outcome.headers.get('retry-after'), Date.now());
        const retryable = outcome.status === 429 || (init.idempotent && outcome.status >= 500 && outcome.status !== 501);
        if (!retryable) throw failure(outcome, text, init.operation, undefined, key);
        waitMs = asked !== undefined ? asked * 1000 : Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** tries);
        if (Date.now() + waitMs > deadline) throw failure(outcome, text, init.operation, outcome.status === 429 ? asked : undefined, key);
      }
      try {
        await sleep(waitMs, init.signal);
      } catch {
        throw new RelayError({ status: 0, code: 'ABORTED', operation: init.operation, message: 'aborted by the caller while waiting to retry' });
      }
    }
  };
}

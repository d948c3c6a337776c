/**
 * The sending side of the check: one request out, its answer back (status, the first bytes of the
 * body, the time), to a URL through `fetch` or straight to a Fetch handler, bounded in time. Also
 * each request as a `curl` command.
 */

import { concatChunks, utf8Decoder } from '../../lib/encoding.ts';
import type { FetchHandler } from './table.ts';

const RESPONSE_READ_BYTES = 16 * 1024;

export interface Outgoing {
  /** Where this request goes, when not to the checked URL (another tenant's URL). */
  url?: string;
  headers: Record<string, string>;
  body: string;
  /** A shell expression that writes the body, for bodies too big for a command line. */
  curlData?: string;
}

export interface Answer {
  status: number | null;
  /** The first bytes of the answer's body, as text. */
  body: string;
  ms: number;
  /** Why there is no status: a timeout, a refused connection, a handler that threw. */
  error?: string;
  /** No HTTP answer came back (connection refused, DNS failure, TLS error, timeout). */
  unreachable?: boolean;
  /**
   * The connection was closed by the endpoint while the request was being sent (EPIPE,
   * ECONNRESET): what it may have answered before the cut is lost to the sender.
   */
  cut?: boolean;
}

/** Failures that mean the other side closed the connection mid-request. */
const CUT_CODES: ReadonlySet<string> = new Set(['EPIPE', 'ECONNRESET', 'UND_ERR_SOCKET']);

export type Send = (request: Outgoing) => Promise<Answer>;

/** The text as one POSIX shell word. Internal: shared with the command line. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export function curlOf(url: string, request: Outgoing): string {
  const lines = [`curl -sS -i -X POST ${shellQuote(request.url ?? url)}`];
  for (const [name, value] of Object.entries(request.headers)) lines.push(`-H ${shellQuote(`${name}: ${value}`)}`);
  if (request.curlData !== undefined) return `${request.curlData} | ${lines.join(' \\\n  ')} \\\n  --data-binary @-`;
  if (request.body !== '') lines.push(`--data-binary ${shellQuote(request.body)}`);
  return lines.join(' \\\n  ');
}

async function readSome(response: Response): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    while (total < RESPONSE_READ_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      total += value.byteLength;
    }
  } finally {
    // The rest is not needed: cancel rather than download an endless answer.
    void reader.cancel().catch(() => {});
  }
  return utf8Decoder.decode(concatChunks(chunks, total).subarray(0, RESPONSE_READ_BYTES));
}

/**
 * A fetch failure in a few words: the cause's code (ECONNREFUSED, ENOTFOUND…) when there is one.
 * Any URL in the text is cut out: fetch names the whole URL in some errors, and its query or
 * userinfo may carry a token.
 */
function fetchFailureText(error: unknown): string {
  const err = error as { message?: unknown; cause?: { code?: unknown; message?: unknown } } | null;
  if (typeof err?.cause?.code === 'string') return err.cause.code;
  const text = typeof err?.cause?.message === 'string' ? err.cause.message : typeof err?.message === 'string' ? err.message : String(error);
  return withoutUrls(text);
}

function withoutUrls(text: string): string {
  return text.replace(/[A-Za-z][A-Za-z0-9+.-]*:\/\/\S*/g, '<url>');
}

export function urlSender(url: string, timeoutMs: number): Send {
  return async (request) => {
    const started = performance.now();
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const response = await fetch(request.url ?? url, { method: 'POST', headers: request.headers, body: request.body, redirect: 'manual', signal });
      const body = await readSome(response);
      return { status: response.status, body, ms: performance.now() - started };
    } catch (error) {
      const ms = performance.now() - started;
      // No HTTP answer at all: on the first request, that means the endpoint cannot be reached.
      if (signal.aborted) return { status: null, body: '', ms, error: `no answer within ${timeoutMs} ms`, unreachable: true };
      const failure = fetchFailureText(error);
      return { status: null, body: '', ms, error: `request failed: ${failure}`, unreachable: true, ...(CUT_CODES.has(failure) ? { cut: true } : {}) };
    }
  };
}

export function handlerSender(handler: FetchHandler, url: string, timeoutMs: number): Send {
  return async (request) => {
    const started = performance.now();
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const outcome = await Promise.race([
        (async () => {
          const response = await handler(new Request(request.url ?? url, { method: 'POST', headers: request.headers, body: request.body, signal: controller.signal }));
          return { status: response.status, body: await readSome(response) };
        })(),
        timedOut,
      ]);
      const ms = performance.now() - started;
      if (outcome === 'timeout') {
        // The handler is told (through request.signal) that nobody waits any more.
        controller.abort();
        return { status: null, body: '', ms, error: `no answer within ${timeoutMs} ms` };
      }
      return { ...outcome, ms };
    } catch (error) {
      const message = withoutUrls(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
      return { status: null, body: '', ms: performance.now() - started, error: `the handler threw (a platform answers 500): ${message}` };
    } finally {
      clearTimeout(timer);
    }
  };
}

/**
 * A conformance battery for a live webhook endpoint, whatever it is written in (issue 16): it
 * sends signed, forged, stale and replayed deliveries, and says for each what a conforming
 * receiver answers and what came back. The sending side is the package's own signer; the
 * endpoint is only ever seen from outside, through its HTTP answers.
 *
 * Web types only (`fetch`, `Request`, `Response`, `AbortSignal`), so it runs wherever the core
 * runs, against a URL or directly against a Fetch handler.
 */

import { randomBytes } from '../crypto.ts';
import { base64Encode, concatChunks, utf8Decoder, utf8Encoder } from '../encoding.ts';
import { decodeSecretList, eachSecret, secretList, type SecretInput } from '../secrets.ts';
import { createSigner, generateKeyPair, generateMessageId, generateSecret, type Signer } from '../sign.ts';
import { bodyText } from './recorded.ts';

/**
 * A Fetch handler: Hono's `app.fetch`, a Next.js route, a Worker's `fetch`, or this package's
 * `webhookHandler(…)`.
 *
 * @example
 * ```ts
 * import type { FetchHandler } from 'webhook-receiver/testing';
 * const handler: FetchHandler = (request) => app.fetch(request);
 * ```
 */
export type FetchHandler = (request: Request) => Response | Promise<Response>;

/**
 * Which part of the battery a row belongs to.
 *
 * @example
 * ```ts
 * const refused = report.rows.filter((row) => row.group === ('refused' satisfies CheckGroup));
 * ```
 */
export type CheckGroup = 'accepted' | 'compatibility' | 'refused' | 'idempotency' | 'timing';

/**
 * A row's verdict: `pass` and `fail` judge the endpoint; `not_observable` says why the case could
 * not be judged from outside; `reported` rows are the endpoint's own choice and only say what it
 * did.
 *
 * @example
 * ```ts
 * const judged = report.rows.filter((row) => row.verdict === 'pass' || row.verdict === 'fail');
 * ```
 */
export type CheckVerdict = 'pass' | 'fail' | 'not_observable' | 'reported';

/**
 * The cases of the battery, in the order they run. `valid` always runs first: it is the baseline
 * that gives every refusal its meaning. `security` says whether a row decides conformance and
 * `expected` what a conforming receiver answers; two options change them for one case each
 * (`unsigned: 'accept'` expects the unsigned delivery accepted; with `body` given, `non-ascii`
 * sends a made-up payload and is not judged).
 *
 * @example
 * ```ts
 * import { CHECK_CASES } from 'webhook-receiver/testing';
 * console.log(CHECK_CASES.map((c) => c.id).join(', '));
 * ```
 */
export const CHECK_CASES = [
  { id: 'valid', group: 'accepted', title: 'a valid delivery', security: true, expected: '2xx' },
  { id: 'rotation-all-keys', group: 'accepted', title: 'signed with every configured key (rotation overlap)', security: true, expected: '2xx' },
  { id: 'rotation-new-key-first', group: 'accepted', title: 'an entry from a key the endpoint does not know, then a valid one', security: true, expected: '2xx' },
  { id: 'rotation-second-key', group: 'accepted', title: 'signed only with the second configured key', security: true, expected: '2xx' },
  { id: 'json-formatting', group: 'accepted', title: 'JSON with spacing, key order and number forms a re-serialisation changes', security: true, expected: '2xx' },
  { id: 'non-ascii', group: 'accepted', title: 'a JSON body with non-ASCII text', security: true, expected: '2xx' },
  { id: 'non-json', group: 'compatibility', title: 'a body that is not JSON (text/plain)', security: false, expected: '2xx or 4xx' },
  { id: 'empty-body', group: 'compatibility', title: 'an empty body', security: false, expected: '2xx or 4xx' },
  { id: 'svix-headers', group: 'compatibility', title: 'svix-id, svix-timestamp, svix-signature header names', security: false, expected: '2xx or 4xx' },
  { id: 'tampered-body', group: 'refused', title: 'the body changed after signing (one digit)', security: true, expected: '4xx' },
  { id: 'tampered-id', group: 'refused', title: 'webhook-id changed after signing', security: true, expected: '4xx' },
  { id: 'tampered-timestamp', group: 'refused', title: 'webhook-timestamp changed after signing (1 s earlier)', security: true, expected: '4xx' },
  { id: 'unknown-key', group: 'refused', title: 'signed with a key the endpoint does not know', security: true, expected: '4xx' },
  { id: 'unsigned', group: 'refused', title: 'no webhook-signature header', security: true, expected: '4xx' },
  { id: 'stale-past', group: 'refused', title: 'signed, timestamp tolerance + 60 s in the past', security: true, expected: '4xx' },
  { id: 'stale-future', group: 'refused', title: 'signed, timestamp tolerance + 60 s in the future', security: true, expected: '4xx' },
  { id: 'milliseconds', group: 'refused', title: 'signed, webhook-timestamp in milliseconds', security: true, expected: '4xx' },
  { id: 'reserialised-body', group: 'refused', title: 'signed compact JSON, sent pretty-printed', security: true, expected: '4xx' },
  { id: 'many-entries', group: 'refused', title: 'a signature header of 32 entries, none matching', security: true, expected: '4xx' },
  { id: 'oversized', group: 'refused', title: 'a signed body larger than common limits', security: false, expected: 'any (413 usual)' },
  { id: 'duplicate', group: 'idempotency', title: 'the same delivery twice', security: false, expected: '2xx, then duplicate' },
  { id: 'retry', group: 'idempotency', title: 'a retry: same webhook-id, new timestamp and signature', security: false, expected: '2xx, then duplicate' },
  { id: 'concurrent', group: 'idempotency', title: 'identical copies sent at once', security: false, expected: '1 ran, rest duplicate' },
  { id: 'timing', group: 'timing', title: 'response times of refused cases against accepted ones', security: false, expected: 'no slow refusals' },
] as const satisfies readonly { id: string; group: CheckGroup; title: string; security: boolean; expected: string }[];

/**
 * The id of a case of the battery.
 *
 * @example
 * ```ts
 * const only: CheckCaseId[] = ['valid', 'tampered-body', 'stale-past'];
 * ```
 */
export type CheckCaseId = (typeof CHECK_CASES)[number]['id'];

const CASE_IDS: readonly string[] = CHECK_CASES.map((c) => c.id);

/**
 * Options of {@link checkEndpoint}.
 *
 * @example
 * ```ts
 * const options: CheckEndpointOptions = { secrets: [current, previous], toleranceSeconds: 300, only: ['valid', 'unsigned'] };
 * ```
 */
export interface CheckEndpointOptions {
  /**
   * The endpoint's signing secrets, as the sender holds them: `whsec_…` (or bare base64, or bytes)
   * for v1, `whsk_…` for v1a. With two or more, the rotation cases use the first two.
   */
  secrets: SecretInput | readonly SecretInput[];
  /** The endpoint's accepted timestamp distance, in seconds: the stale cases step 60 s past it. Default 300. */
  toleranceSeconds?: number;
  /** `'accept'` when the endpoint is meant to accept unsigned deliveries. Default `'reject'`. */
  unsigned?: 'reject' | 'accept';
  /**
   * The app's own event, sent as the valid payload (and tampered with for the refused cases): an
   * endpoint that validates its payloads refuses a made-up one. Default: a small JSON event.
   */
  body?: string | Uint8Array;
  /** Run only these cases (`valid` always runs: it is the baseline). */
  only?: readonly CheckCaseId[];
  /** Leave these cases out (`valid` cannot be left out). */
  skip?: readonly CheckCaseId[];
  /** How long each request may take, in milliseconds. Default 10 000, at most 120 000. */
  timeoutMs?: number;
  /** How many identical copies the `concurrent` case sends at once. Default 5, from 2 to 50. */
  concurrency?: number;
  /** Size of the `oversized` body, in bytes. Default 4 MiB, from 64 KiB to 64 MiB. */
  oversizedBytes?: number;
  /**
   * The URL requests carry when the target is a Fetch handler, for routing (Hono matches on its
   * path). Default `http://localhost/webhooks`.
   */
  url?: string;
  /** The clock, in epoch milliseconds, for the timestamps sent. Default `Date.now`. */
  now?: () => number;
  /** Called with each row as soon as it is judged (for progress output). */
  onRow?: (row: CheckRow) => void;
}

/**
 * What a row sent: enough to read it and to send it again (`curl`).
 *
 * @example
 * ```ts
 * console.log(report.rows[0]!.sent.headers['webhook-id']); // 'msg_check_…'
 * ```
 */
export interface CheckSent {
  /** Every header sent (no secret is ever among them: signatures are computed values). */
  headers: Record<string, string>;
  bodyBytes: number;
  /** The body's first 200 characters. */
  bodyPreview: string;
  /** How many requests the row sent. */
  requests: number;
}

/**
 * One case of the battery, judged.
 *
 * @example
 * ```ts
 * for (const row of report.rows) console.log(row.id, row.expected, row.status, row.verdict, row.reason);
 * ```
 */
export interface CheckRow {
  id: CheckCaseId;
  group: CheckGroup;
  title: string;
  /** Whether the row decides conformance: a `fail` here fails the check (and the CLI exits 1). */
  security: boolean;
  sent: CheckSent;
  /** What a conforming receiver answers, e.g. `'2xx'`, `'4xx'`, `'2xx, then duplicate'`. */
  expected: string;
  /** The status of the (last) answer; `null` when there was none. */
  status: number | null;
  /** Every status answered, for rows that send several requests. */
  statuses: (number | null)[];
  /** What came back, in words: `'401 SIGNATURE_MISMATCH'`, `'204'`, `'no answer within 10000 ms'`. */
  observed: string;
  verdict: CheckVerdict;
  /** Why the verdict, in a sentence. */
  reason: string;
  /** Response time in milliseconds (the slowest, for rows with several requests); `null` when nothing was sent. */
  ms: number | null;
  /** The row's (first) request as a `curl` command: the computed headers, never a secret. */
  curl: string;
}

/**
 * The outcome of {@link checkEndpoint}.
 *
 * @example
 * ```ts
 * const report = await checkEndpoint(app.fetch, { secrets });
 * if (!report.conforms) console.log(formatCheckReport(report));
 * ```
 */
export interface CheckReport {
  /** The URL (without its query), or `fetch handler (<url>)`. */
  target: string;
  startedAt: string;
  durationMs: number;
  /** Requests sent in all. */
  requests: number;
  toleranceSeconds: number;
  unsigned: 'reject' | 'accept';
  keys: number;
  /** `false` when the first request got no HTTP answer at all (connection refused, DNS, TLS, timeout). */
  reachable: boolean;
  /** Why the endpoint could not be reached. */
  unreachableReason?: string;
  rows: CheckRow[];
  /** The security rows that failed. */
  failures: CheckRow[];
  /** Reachable, and no security row failed. */
  conforms: boolean;
  /** Things worth a look that are not failures (slow refusals). */
  warnings: string[];
}

// ---------------------------------------------------------------------------------------------
// Bodies

const DEFAULT_BODY = '{"type":"check.delivery","data":{"amount":1250,"currency":"EUR","note":"sent by webhook-receiver check"}}';
// Keys out of alphabetical order, spaces around ':' and ',', a trailing zero, an exponent and an
// escape: a parse and re-serialise (in any language) changes these bytes, so a receiver that
// verifies its own re-serialisation refuses this valid delivery.
const FORMATTING_BODY = '{ "type" : "check.formatting",\n  "zeta" : 1.50, "alpha" : [ 1e2, -0.0 ],\n  "escaped" : "caf\\u00e9 \\/ tab\\t" }\n';
const NON_ASCII_BODY = '{"type":"check.non_ascii","data":{"name":"Zoë Ångström","city":"東京","note":"🎉 ünïcödé"}}';
const NON_JSON_BODY = 'check: this body is plain text, not JSON\n';

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_CONCURRENCY = 5;
const DEFAULT_OVERSIZED_BYTES = 4 * 1024 * 1024;
const MANY_ENTRIES = 32;
const RESPONSE_READ_BYTES = 16 * 1024;
const PREVIEW_CHARS = 200;

/** Whether the text parses as JSON. Internal: shared with the command line. */
export function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * The same JSON with a space around every structural token, found token by token so numbers and
 * strings keep their exact text (a parse and re-serialise would round big integers).
 */
function respaced(json: string): string {
  let out = '';
  let inString = false;
  let escaped = false;
  for (const char of json) {
    if (inString) {
      out += char;
      if (escaped) escaped = false;
      else if (char === '\\') escaped = true;
      else if (char === '"') inString = false;
      continue;
    }
    if (char === '"') {
      inString = true;
      out += char;
    } else if (char === ' ' || char === '\n' || char === '\r' || char === '\t') {
      // Dropped: the structural tokens get their own spacing.
    } else if (char === '{' || char === '[') out += `${char} `;
    else if (char === '}' || char === ']') out += ` ${char}`;
    else if (char === ',' || char === ':') out += ` ${char} `;
    else out += char;
  }
  return `${out}\n`;
}

/** One digit changed (the last one), so a payload validator still accepts the tampered body. */
function tampered(body: string): string {
  for (let i = body.length - 1; i >= 0; i--) {
    const code = body.charCodeAt(i);
    if (code >= 48 && code <= 57) return `${body.slice(0, i)}${(code - 48 + 1) % 10}${body.slice(i + 1)}`;
  }
  return `${body} `;
}

function preview(text: string): string {
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text;
}

// ---------------------------------------------------------------------------------------------
// Requests and answers

interface Outgoing {
  headers: Record<string, string>;
  body: string;
  /** A shell expression that writes the body, for bodies too big for a command line. */
  curlData?: string;
}

interface Answer {
  status: number | null;
  /** The first bytes of the answer's body, as text. */
  body: string;
  ms: number;
  /** Why there is no status: a timeout, a refused connection, a handler that threw. */
  error?: string;
  /** No HTTP answer came back (connection refused, DNS failure, TLS error, timeout). */
  unreachable?: boolean;
}

type Send = (request: Outgoing) => Promise<Answer>;

/** The text as one POSIX shell word. Internal: shared with the command line. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

function curlOf(url: string, request: Outgoing): string {
  const lines = [`curl -sS -i -X POST ${shellQuote(url)}`];
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

function urlSender(url: string, timeoutMs: number): Send {
  return async (request) => {
    const started = performance.now();
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const response = await fetch(url, { method: 'POST', headers: request.headers, body: request.body, redirect: 'manual', signal });
      const body = await readSome(response);
      return { status: response.status, body, ms: performance.now() - started };
    } catch (error) {
      const ms = performance.now() - started;
      // No HTTP answer at all: on the first request, that means the endpoint cannot be reached.
      if (signal.aborted) return { status: null, body: '', ms, error: `no answer within ${timeoutMs} ms`, unreachable: true };
      return { status: null, body: '', ms, error: `request failed: ${fetchFailureText(error)}`, unreachable: true };
    }
  };
}

function handlerSender(handler: FetchHandler, url: string, timeoutMs: number): Send {
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
          const response = await handler(new Request(url, { method: 'POST', headers: request.headers, body: request.body, signal: controller.signal }));
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

type AnswerKind = 'processed' | 'duplicate' | 'in_progress' | 'refused' | 'redirect' | 'server_error' | 'none';

function envelope(body: string): { error?: string; duplicate?: boolean } {
  try {
    const value: unknown = JSON.parse(body);
    if (typeof value !== 'object' || value === null) return {};
    const { error, duplicate } = value as { error?: unknown; duplicate?: unknown };
    return { error: typeof error === 'string' ? error : undefined, duplicate: duplicate === true ? true : undefined };
  } catch {
    return {};
  }
}

/** What an answer means, including this package's duplicate convention (200 `{"duplicate":true}`, 409 `IN_PROGRESS`). */
function kindOf(answer: Answer): AnswerKind {
  const { status } = answer;
  if (status === null) return 'none';
  if (status >= 200 && status < 300) return envelope(answer.body).duplicate ? 'duplicate' : 'processed';
  if (status === 409 && envelope(answer.body).error === 'IN_PROGRESS') return 'in_progress';
  if (status >= 300 && status < 400) return 'redirect';
  if (status >= 400 && status < 500) return 'refused';
  return 'server_error';
}

// ---------------------------------------------------------------------------------------------
// The battery

interface Judgement {
  answers: Answer[];
  observed?: string;
  verdict: CheckVerdict;
  reason: string;
}

/** Sends a case's requests (built a moment before) and judges the answers. */
type Judge = (send: Send, requests: Outgoing[], context: CaseContext) => Promise<Judgement>;

/** A case's requests, signed when it is its turn to run, so no timestamp ages in a queue. */
interface Built {
  requests: Outgoing[];
  /** For a case the options change: its judge, and what it expects, in place of the table's. */
  judge?: Judge;
  expected?: string;
  security?: boolean;
}

interface SignedOutgoing extends Outgoing {
  id: string;
  timestamp: number;
  signature: string;
}

/** What the cases share: the run's options, its signers, and the rows judged so far. */
interface CaseContext {
  body: string;
  userBody: string | undefined;
  bodyIsJson: boolean;
  unsignedPolicy: 'reject' | 'accept';
  toleranceSeconds: number;
  concurrency: number;
  oversizedBytes: number;
  redactor: Redactor;
  signers: { current: Signer; all: Signer; second: Signer | undefined; unknown: Signer };
  now: () => number;
  nowSeconds: () => number;
  newId: () => string;
  signed: (text: string, options?: { signer?: Signer; id?: string; timestamp?: number; type?: string }) => Promise<SignedOutgoing>;
  rows: readonly CheckRow[];
  warnings: string[];
}

class Redactor {
  readonly #needles: string[] = [];

  constructor(secrets: readonly SecretInput[]) {
    for (const secret of secrets) {
      const key = typeof secret === 'object' && !(secret instanceof Uint8Array) ? secret.key : secret;
      const text = typeof key === 'string' ? key : base64Encode(key);
      for (const needle of [text, text.replace(/^wh(sec|sk|pk)_/, '')]) if (needle.length >= 8) this.#needles.push(needle);
    }
  }

  /** Text from the endpoint, with any configured secret blanked (an endpoint may echo anything). */
  clean(text: string): string {
    let out = text;
    for (const needle of this.#needles) out = out.split(needle).join('[secret]');
    return out;
  }
}

function positiveInteger(value: number | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new RangeError(`${name} must be a whole number from ${min} to ${max}, got ${String(value)}`);
  return value;
}

function caseList(list: readonly CheckCaseId[] | undefined, name: string): Set<string> | undefined {
  if (list === undefined) return undefined;
  if (!Array.isArray(list)) throw new TypeError(`${name} must be an array of case ids`);
  list.forEach((id, index) => {
    // The value is not repeated: on a command line it may be a secret pasted in the wrong place.
    if (!CASE_IDS.includes(id)) throw new RangeError(`${name}: entry ${index + 1} is not a case; the cases are ${CASE_IDS.join(', ')}`);
  });
  return new Set(list);
}

/**
 * The URL, checked: http(s) only, and no credentials, which fetch refuses to send (and which
 * would otherwise show in the report's curl commands). Neither message repeats the URL.
 */
function httpUrl(value: string | URL, name: string): URL {
  const parsed = value instanceof URL ? value : typeof value === 'string' && URL.canParse(value) ? new URL(value) : undefined;
  if (parsed === undefined) throw new TypeError(`${name} must be an absolute http:// or https:// URL${name === 'the target' ? ' (or a Fetch handler)' : ''}`);
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError(`check only sends to http:// and https:// URLs, got ${parsed.protocol}`);
  if (parsed.username !== '' || parsed.password !== '') {
    throw new TypeError(`${name} carries credentials (user:password@): fetch does not send them; give the endpoint a URL without them`);
  }
  return parsed;
}

function describeAnswer(answer: Answer, redactor: Redactor): string {
  if (answer.status === null) return redactor.clean(answer.error ?? 'no answer');
  const { error, duplicate } = envelope(answer.body);
  if (duplicate) return `${answer.status} duplicate`;
  if (error !== undefined) return `${answer.status} ${redactor.clean(error).slice(0, 40)}`;
  return String(answer.status);
}

/** The verdict of a case whose expected answer is a 2xx (`accept`) or a 4xx (`refuse`). */
function judge(answer: Answer, expect: 'accept' | 'refuse'): { verdict: CheckVerdict; reason: string } {
  const kind = kindOf(answer);
  if (expect === 'accept') {
    if (kind === 'processed') return { verdict: 'pass', reason: 'accepted' };
    if (kind === 'duplicate') return { verdict: 'fail', reason: 'answered as a duplicate, but this webhook-id was never sent before' };
    if (kind === 'none') return { verdict: 'fail', reason: answer.error ?? 'no answer' };
    return { verdict: 'fail', reason: `not accepted: a conforming receiver answers 2xx, and the sender would retry and give up on this event` };
  }
  if (kind === 'refused' || kind === 'in_progress') return { verdict: 'pass', reason: 'refused' };
  if (kind === 'processed' || kind === 'duplicate') return { verdict: 'fail', reason: 'ACCEPTED: the handler ran on a delivery that is not authentic' };
  if (kind === 'server_error') return { verdict: 'fail', reason: 'answered 5xx instead of 4xx: senders retry a 5xx, and it suggests work (or a crash) before the signature check' };
  if (kind === 'redirect') return { verdict: 'fail', reason: 'answered a redirect: a refused delivery gets a 4xx' };
  return { verdict: 'fail', reason: answer.error ?? 'no answer' };
}

const single = (expect: 'accept' | 'refuse'): Judge => async (send, [request]) => {
  const answer = await send(request!);
  return { answers: [answer], ...judge(answer, expect) };
};

const reported = (accepted: string, refused: string): Judge => async (send, [request]) => {
  const answer = await send(request!);
  const kind = kindOf(answer);
  const reason = kind === 'processed' ? accepted : kind === 'refused' ? refused : answer.status === null ? (answer.error ?? 'no answer') : `answered ${answer.status}`;
  return { answers: [answer], verdict: 'reported', reason };
};

const notObservable = (reason: string): Built => ({ requests: [], judge: async () => ({ answers: [], verdict: 'not_observable', reason }) });

const DUPLICATE_NOTE = 'handler runs are not visible from outside: whether it ran twice cannot be told (this package answers a duplicate with 200 {"duplicate":true})';

const twice = (label: string): Judge => async (send, [first, second], { redactor }) => {
  const a = await send(first!);
  if (kindOf(a) !== 'processed') {
    return { answers: [a], verdict: 'not_observable', reason: `the first copy was not accepted (${describeAnswer(a, redactor)}), so there is nothing to deduplicate` };
  }
  const b = await send(second!);
  const kind = kindOf(b);
  const observed = `${describeAnswer(a, redactor)}, then ${describeAnswer(b, redactor)}`;
  if (kind === 'duplicate') return { answers: [a, b], observed, verdict: 'pass', reason: `the ${label} was answered as a duplicate: the handler did not run again` };
  if (kind === 'in_progress') return { answers: [a, b], observed, verdict: 'pass', reason: `the ${label} found the first claim still held (409 IN_PROGRESS): the handler did not run again` };
  if (kind === 'processed') return { answers: [a, b], observed, verdict: 'reported', reason: `both accepted without a duplicate answer; ${DUPLICATE_NOTE}` };
  return {
    answers: [a, b],
    observed,
    verdict: 'reported',
    reason: `the ${label} was not acknowledged with a 2xx: a sender treats that as a failure and keeps retrying an event that was handled`,
  };
};

const concurrentJudge: Judge = async (send, requests) => {
  const answers = await Promise.all(requests.map((r) => send(r)));
  const count = (k: AnswerKind) => answers.filter((a) => kindOf(a) === k).length;
  const processed = count('processed');
  const deduplicated = count('duplicate') + count('in_progress');
  const others = answers.length - processed - deduplicated;
  const parts: [number, string][] = [
    [processed, 'accepted'],
    [count('duplicate'), 'duplicate'],
    [count('in_progress'), 'in progress'],
    [others, 'other'],
  ];
  const observed = parts.filter(([n]) => n > 0).map(([n, label]) => `${n} ${label}`).join(', ');
  if (deduplicated > 0) {
    // The endpoint speaks the convention, so every copy it did not run says so: the number of
    // plain 2xx answers is the number of handler runs.
    if (processed === 1) return { answers, observed, verdict: 'pass', reason: 'exactly one copy ran the handler; the others were answered as duplicates or in progress' };
    if (processed > 1) return { answers, observed, verdict: 'fail', reason: `${processed} copies ran the handler: the claim on webhook-id is not atomic` };
  }
  if (processed === answers.length) return { answers, observed, verdict: 'reported', reason: `every copy was accepted without a duplicate answer; ${DUPLICATE_NOTE}` };
  return { answers, observed, verdict: 'reported', reason: 'not every copy was acknowledged with a 2xx: a sender retries those' };
};

const oversizedJudge: Judge = async (send, [request], { oversizedBytes }) => {
  const answer = await send(request!);
  const kind = kindOf(answer);
  const size = `${oversizedBytes} bytes`;
  const reason =
    kind === 'processed'
      ? `accepted a ${size} body: its limit is above that (or there is none)`
      : answer.status === 413
        ? `refused a ${size} body with 413`
        : answer.status === null
          ? `${answer.error ?? 'no answer'} (an endpoint may close the connection on an oversized upload)`
          : `answered ${answer.status} to a ${size} body`;
  return { answers: [answer], verdict: 'reported', reason };
};

/** Judged from the rows before it: no request of its own. */
const timingJudge: Judge = async (_send, _requests, { rows, warnings }) => {
  const accepted = rows.filter((r) => r.group === 'accepted' && r.verdict === 'pass' && r.ms !== null).map((r) => r.ms!);
  const refused = rows.filter((r) => r.group === 'refused' && r.id !== 'oversized' && r.ms !== null);
  if (accepted.length === 0 || refused.length === 0) return { answers: [], verdict: 'not_observable', reason: 'needs at least one accepted and one refused case' };
  const sorted = [...accepted].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  const slowest = refused.reduce((a, b) => (b.ms! > a.ms! ? b : a));
  // Only well beyond noise: several times the accepted time, and a quarter second more.
  const slow = refused.filter((r) => r.ms! > median * 3 && r.ms! > median + 250);
  if (slow.length === 0) return { answers: [], verdict: 'reported', reason: `median accepted ${median} ms; slowest refused ${slowest.ms} ms (${slowest.id})` };
  const warning = `refused cases took much longer than accepted ones (${slow.map((r) => `${r.id} ${r.ms} ms`).join(', ')}; median accepted ${median} ms): the endpoint may do work before checking the signature`;
  warnings.push(warning);
  return { answers: [], verdict: 'reported', reason: `WARNING ${warning}` };
};

/** One valid request, changed after signing (the refused cases). */
async function changed(context: CaseContext, change: (request: SignedOutgoing) => Outgoing): Promise<Built> {
  return { requests: [change(await context.signed(context.body))] };
}

/**
 * How each case of {@link CHECK_CASES} builds its requests and judges its answers. A `Record`
 * over the ids, so a case added to the table without its runner does not compile.
 */
const RUNNERS: Record<CheckCaseId, { build: (context: CaseContext) => Promise<Built>; judge: Judge }> = {
  valid: { build: async (c) => ({ requests: [await c.signed(c.body)] }), judge: single('accept') },

  // The sender signs with its current key, the first one; during a rotation it signs with all.
  'rotation-all-keys': { build: async (c) => ({ requests: [await c.signed(c.body, { signer: c.signers.all })] }), judge: single('accept') },

  'rotation-new-key-first': {
    build: async (c) => {
      const valid = await c.signed(c.body);
      const ahead = await c.signers.unknown.sign({ body: c.body, id: valid.id, timestamp: valid.timestamp });
      // A sender that rotated before the receiver did signs with its new key first (contract:
      // "any secret matching any v1 entry passes"); a receiver reading only the first entry fails.
      return { requests: [{ ...valid, headers: { ...valid.headers, 'webhook-signature': `${ahead.signature} ${valid.signature}` } }] };
    },
    judge: single('accept'),
  },

  'rotation-second-key': {
    build: async (c) =>
      c.signers.second === undefined
        ? notObservable('one secret given: pass the previous and the current one to test rotation')
        : { requests: [await c.signed(c.body, { signer: c.signers.second })] },
    judge: single('accept'),
  },

  'json-formatting': {
    build: async (c) => {
      if (c.userBody !== undefined && !c.bodyIsJson) return notObservable('the body given is not JSON');
      return { requests: [await c.signed(c.userBody === undefined ? FORMATTING_BODY : respaced(c.userBody), { type: 'application/json' })] };
    },
    judge: single('accept'),
  },

  'non-ascii': {
    build: async (c) => {
      const requests = [await c.signed(NON_ASCII_BODY, { type: 'application/json; charset=utf-8' })];
      if (c.userBody === undefined) return { requests };
      // A made-up payload: an endpoint that validates its own events may refuse it for that.
      return { requests, security: false, judge: reported('accepted', 'refused (the payload is made up, so this is not judged when --body-file is given)') };
    },
    judge: single('accept'),
  },

  'non-json': {
    build: async (c) => ({ requests: [await c.signed(NON_JSON_BODY, { type: 'text/plain; charset=utf-8' })] }),
    judge: reported('accepted', 'refused: the standard lets a receiver refuse a body it cannot use'),
  },

  'empty-body': {
    build: async (c) => {
      const { 'content-type': _, ...headers } = (await c.signed('')).headers;
      return { requests: [{ headers, body: '' }] };
    },
    judge: reported('accepted', 'refused: the standard lets a receiver refuse an empty body'),
  },

  'svix-headers': {
    build: (c) =>
      changed(c, (request) => ({
        ...request,
        headers: {
          'content-type': request.headers['content-type']!,
          'svix-id': request.id,
          'svix-timestamp': String(request.timestamp),
          'svix-signature': request.signature,
        },
      })),
    judge: reported('accepted (reads svix-* names too)', 'refused: the endpoint reads only webhook-* names, which the standard allows'),
  },

  'tampered-body': { build: (c) => changed(c, (request) => ({ ...request, body: tampered(c.body) })), judge: single('refuse') },

  'tampered-id': { build: (c) => changed(c, (request) => ({ ...request, headers: { ...request.headers, 'webhook-id': c.newId() } })), judge: single('refuse') },

  'tampered-timestamp': {
    build: (c) => changed(c, (request) => ({ ...request, headers: { ...request.headers, 'webhook-timestamp': String(request.timestamp - 1) } })),
    judge: single('refuse'),
  },

  'unknown-key': { build: async (c) => ({ requests: [await c.signed(c.body, { signer: c.signers.unknown })] }), judge: single('refuse') },

  unsigned: {
    build: async (c) => {
      const { 'webhook-signature': _, ...headers } = (await c.signed(c.body)).headers;
      const requests = [{ headers, body: c.body }];
      return c.unsignedPolicy === 'accept' ? { requests, expected: '2xx (unsigned accepted)', judge: single('accept') } : { requests };
    },
    judge: single('refuse'),
  },

  'stale-past': { build: async (c) => ({ requests: [await c.signed(c.body, { timestamp: c.nowSeconds() - c.toleranceSeconds - 60 })] }), judge: single('refuse') },

  'stale-future': { build: async (c) => ({ requests: [await c.signed(c.body, { timestamp: c.nowSeconds() + c.toleranceSeconds + 60 })] }), judge: single('refuse') },

  milliseconds: {
    build: async (c) => {
      const ms = c.now();
      return { requests: [await c.signed(c.body, { timestamp: ms - (ms % 1000) + 123 })] };
    },
    judge: single('refuse'),
  },

  'reserialised-body': {
    build: async (c) => {
      // The compact form a parse and re-serialise produces; sent pretty. A receiver that verifies
      // its own re-serialisation instead of the raw bytes finds the signature "valid".
      const parsed: unknown = JSON.parse(c.bodyIsJson ? c.body : DEFAULT_BODY);
      const compact = JSON.stringify(parsed);
      const pretty = JSON.stringify(parsed, null, 2);
      const request = await c.signed(compact, { type: 'application/json' });
      return { requests: [{ ...request, body: pretty === compact ? ` ${compact}` : pretty }] };
    },
    judge: single('refuse'),
  },

  'many-entries': {
    build: (c) =>
      changed(c, (request) => {
        const entries: string[] = [];
        for (let i = 0; i < MANY_ENTRIES; i++) entries.push(i % 8 === 7 ? `v1a,${base64Encode(randomBytes(64))}` : `v1,${base64Encode(randomBytes(32))}`);
        return { ...request, headers: { ...request.headers, 'webhook-signature': entries.join(' ') } };
      }),
    judge: single('refuse'),
  },

  oversized: {
    build: async (c) => {
      const head = '{"type":"check.oversized","padding":"';
      const tail = '"}';
      const fill = c.oversizedBytes - head.length - tail.length;
      const request = await c.signed(`${head}${'a'.repeat(fill)}${tail}`, { type: 'application/json' });
      return { requests: [{ ...request, curlData: `{ printf '%s' ${shellQuote(head)}; head -c ${fill} /dev/zero | tr '\\0' a; printf '%s' ${shellQuote(tail)}; }` }] };
    },
    judge: oversizedJudge,
  },

  duplicate: {
    build: async (c) => {
      const request = await c.signed(c.body);
      return { requests: [request, request] };
    },
    judge: twice('second copy'),
  },

  retry: {
    build: async (c) => {
      // The contract: "a retry carries the same id with a new timestamp and signature".
      const first = await c.signed(c.body, { timestamp: c.nowSeconds() - 1 });
      return { requests: [first, await c.signed(c.body, { id: first.id, timestamp: first.timestamp + 1 })] };
    },
    judge: twice('retry'),
  },

  concurrent: {
    build: async (c) => {
      const request = await c.signed(c.body);
      return { requests: Array.from({ length: c.concurrency }, () => request) };
    },
    judge: concurrentJudge,
  },

  timing: { build: async () => ({ requests: [] }), judge: timingJudge },
};

/** The battery: each case's description and expectation, with how it is built and judged. */
const CASES = CHECK_CASES.map((c) => ({ ...c, ...RUNNERS[c.id] }));

/** The groups with at least one case that decides conformance. */
const JUDGED_GROUPS: ReadonlySet<CheckGroup> = new Set(CHECK_CASES.filter((c) => c.security).map((c) => c.group));

/**
 * Runs the conformance battery against a live endpoint (a URL) or a Fetch handler, and resolves
 * with one row per case. It never throws for what the endpoint does: failures are rows. It throws
 * `TypeError`/`RangeError` at once for bad options (a bad secret, an unknown case id, a URL with
 * credentials), never repeating the value.
 *
 * Each case is signed just before it is sent, so a slow endpoint never receives a timestamp that
 * aged while earlier cases ran. Every delivery carries a `webhook-id` starting `msg_check_`, and
 * the valid ones run the endpoint's real handler. The run is bounded: a fixed number of requests
 * (about 30, plus `concurrency`), each within `timeoutMs`. Nothing it returns contains a secret.
 *
 * @example
 * ```ts
 * import { checkEndpoint, assertEndpointConforms } from 'webhook-receiver/testing';
 * import { webhookHandler } from 'webhook-receiver/fetch';
 *
 * const handler = webhookHandler({ secrets: [current, previous] }, async () => new Response(null, { status: 204 }));
 * const report = await checkEndpoint(handler, { secrets: [current, previous] });
 * assertEndpointConforms(report);
 * // or against a running server:
 * await checkEndpoint('http://127.0.0.1:3000/webhooks', { secrets: current });
 * ```
 */
export async function checkEndpoint(target: string | URL | FetchHandler, options: CheckEndpointOptions): Promise<CheckReport> {
  if (typeof options !== 'object' || options === null) throw new TypeError('checkEndpoint needs options: { secrets }');
  // Decoded as signing does (errors included), then one input per key: 'whsec_a,whsec_b' is two
  // secrets, to sign with, count and redact each on its own.
  const keys = decodeSecretList(options.secrets, 'sign');
  const secrets = secretList(options.secrets, 'secrets').flatMap(eachSecret);
  const toleranceSeconds = positiveInteger(options.toleranceSeconds, 'toleranceSeconds', 300, 1, 31_536_000);
  const unsignedPolicy = options.unsigned ?? 'reject';
  if (unsignedPolicy !== 'reject' && unsignedPolicy !== 'accept') throw new TypeError(`unsigned must be 'reject' or 'accept'`);
  const timeoutMs = positiveInteger(options.timeoutMs, 'timeoutMs', DEFAULT_TIMEOUT_MS, 1, 120_000);
  const concurrency = positiveInteger(options.concurrency, 'concurrency', DEFAULT_CONCURRENCY, 2, 50);
  const oversizedBytes = positiveInteger(options.oversizedBytes, 'oversizedBytes', DEFAULT_OVERSIZED_BYTES, 64 * 1024, 64 * 1024 * 1024);
  const now = options.now ?? Date.now;
  if (typeof now !== 'function') throw new TypeError('now must be a function returning epoch milliseconds');
  const only = caseList(options.only, 'only');
  const skip = caseList(options.skip, 'skip');
  if (skip?.has('valid')) throw new RangeError('skip: the valid case cannot be left out; it is the baseline that gives every refusal its meaning');
  const onRow = options.onRow;
  if (onRow !== undefined && typeof onRow !== 'function') throw new TypeError('onRow must be a function');

  let userBody: string | undefined;
  if (options.body !== undefined) {
    if (typeof options.body === 'string') userBody = options.body;
    else if (options.body instanceof Uint8Array) {
      userBody = bodyText(options.body);
      if (userBody === undefined) throw new TypeError('body must be UTF-8 text (the battery tampers with it as text)');
    } else throw new TypeError('body must be a string or a Uint8Array');
  }

  let url: string;
  let send: Send;
  let targetLabel: string;
  if (typeof target === 'function') {
    url = httpUrl(options.url ?? 'http://localhost/webhooks', 'url').href;
    send = handlerSender(target, url, timeoutMs);
    targetLabel = `fetch handler (${url})`;
  } else {
    const parsed = httpUrl(target, 'the target');
    url = parsed.href;
    send = urlSender(url, timeoutMs);
    targetLabel = `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  }

  const unknownKey = keys[0]!.kind === 'ed25519-secret' ? (await generateKeyPair()).secretKey : generateSecret();
  const current = createSigner(secrets[0]!);
  const body = userBody ?? DEFAULT_BODY;
  const bodyIsJson = isJsonText(body);
  const contentType = userBody === undefined || bodyIsJson ? 'application/json' : 'application/octet-stream';
  const nowSeconds = () => Math.floor(now() / 1000);
  const newId = () => `msg_check_${generateMessageId().slice(4, 26)}`;
  const rows: CheckRow[] = [];
  const context: CaseContext = {
    body,
    userBody,
    bodyIsJson,
    unsignedPolicy,
    toleranceSeconds,
    concurrency,
    oversizedBytes,
    redactor: new Redactor(secrets),
    signers: { current, all: createSigner(secrets), second: secrets.length >= 2 ? createSigner(secrets[1]!) : undefined, unknown: createSigner(unknownKey) },
    now,
    nowSeconds,
    newId,
    async signed(text, { signer = current, id = newId(), timestamp = nowSeconds(), type = contentType } = {}) {
      const message = await signer.sign({ body: text, id, timestamp });
      return { id, timestamp, signature: message.signature, headers: { 'content-type': type, ...message.headers }, body: text };
    },
    rows,
    warnings: [],
  };
  const { redactor } = context;

  // Run, one case at a time (the concurrent copies excepted), valid first; each is built (signed)
  // just before it is sent.
  const started = performance.now();
  const startedAt = new Date(now()).toISOString();
  let requests = 0;
  let reachable = true;
  let unreachableReason: string | undefined;
  let baselineAccepted = true;
  const counted: Send = async (request) => {
    requests++;
    return send(request);
  };

  for (const c of CASES) {
    if (c.id !== 'valid' && ((only !== undefined && !only.has(c.id)) || skip?.has(c.id))) continue;
    const built = await c.build(context);
    const security = built.security ?? c.security;
    const first = built.requests[0];
    let judgement: Judgement;
    if (!reachable) {
      judgement = { answers: [], verdict: 'not_observable', reason: 'the endpoint could not be reached' };
    } else if (!baselineAccepted && c.group === 'refused' && security && !(c.id === 'unsigned' && unsignedPolicy === 'accept')) {
      judgement = { answers: [], verdict: 'not_observable', reason: 'the valid delivery was not accepted, so a refusal here would prove nothing' };
    } else {
      judgement = await (built.judge ?? c.judge)(counted, built.requests, context);
    }
    if (c.id === 'valid') {
      const answer = judgement.answers[0];
      if (answer?.unreachable) {
        reachable = false;
        unreachableReason = redactor.clean(answer.error ?? 'no answer');
      }
      baselineAccepted = judgement.verdict === 'pass';
    }
    const statuses = judgement.answers.map((a) => a.status);
    const times = judgement.answers.map((a) => a.ms);
    const row: CheckRow = {
      id: c.id,
      group: c.group,
      title: c.title,
      security,
      sent: {
        headers: first ? { ...first.headers } : {},
        bodyBytes: first ? utf8Encoder.encode(first.body).byteLength : 0,
        bodyPreview: first ? preview(first.body) : '',
        requests: built.requests.length,
      },
      expected: built.expected ?? c.expected,
      status: statuses.length > 0 ? statuses[statuses.length - 1]! : null,
      statuses,
      observed: judgement.observed ?? (judgement.answers.length > 0 ? judgement.answers.map((a) => describeAnswer(a, redactor)).join(', ') : '-'),
      verdict: judgement.verdict,
      reason: redactor.clean(judgement.reason),
      ms: times.length > 0 ? Math.round(Math.max(...times) * 10) / 10 : null,
      curl: first ? curlOf(url, first) : '',
    };
    rows.push(row);
    if (onRow) {
      try {
        onRow(row);
      } catch {
        // A failing progress callback must not change the report.
      }
    }
  }

  const failures = rows.filter((r) => r.security && r.verdict === 'fail');
  return {
    target: targetLabel,
    startedAt,
    durationMs: Math.round(performance.now() - started),
    requests,
    toleranceSeconds,
    unsigned: unsignedPolicy,
    keys: secrets.length,
    reachable,
    ...(unreachableReason === undefined ? {} : { unreachableReason }),
    rows,
    failures,
    conforms: reachable && failures.length === 0,
    warnings: context.warnings,
  };
}

// ---------------------------------------------------------------------------------------------
// Reading a report

const VERDICT_LABEL: Record<CheckVerdict, string> = { pass: 'pass', fail: 'FAIL', not_observable: 'not observable', reported: 'reported' };

function pad(text: string, width: number): string {
  return text.length >= width ? `${text.slice(0, width - 2)}… ` : text.padEnd(width);
}

/**
 * The report as a readable table: one line per case (verdict, case, expected, observed, time),
 * the reason under every row that is not a plain pass, then a summary.
 *
 * @example
 * ```ts
 * const report = await checkEndpoint(url, { secrets });
 * console.log(formatCheckReport(report));
 * ```
 */
export function formatCheckReport(report: CheckReport, { curl = false }: { curl?: boolean } = {}): string {
  const lines: string[] = [];
  lines.push(`webhook-receiver check ${report.target}`);
  lines.push(
    `${report.keys} ${report.keys === 1 ? 'key' : 'keys'}, tolerance ${report.toleranceSeconds} s, unsigned ${report.unsigned === 'accept' ? 'accepted' : 'refused'}; ` +
      `${report.requests} requests in ${(report.durationMs / 1000).toFixed(1)} s`,
  );
  lines.push('');
  lines.push(`  ${pad('verdict', 15)}${pad('case', 24)}${pad('expected', 22)}${pad('observed', 30)}time`);
  let group: CheckGroup | undefined;
  for (const row of report.rows) {
    if (row.group !== group) {
      group = row.group;
      lines.push(`${group}${JUDGED_GROUPS.has(group) ? '' : ' (not judged for conformance)'}`);
    }
    const time = row.ms === null ? '' : `${row.ms < 10 ? row.ms.toFixed(1) : Math.round(row.ms)} ms`;
    lines.push(`  ${pad(VERDICT_LABEL[row.verdict], 15)}${pad(row.id, 24)}${pad(row.expected, 22)}${pad(row.observed, 30)}${time}`.trimEnd());
    lines.push(`      ${row.title}${row.reason !== 'accepted' && row.reason !== 'refused' ? `: ${row.reason}` : ''}`);
    if (curl && row.curl !== '') lines.push(row.curl.split('\n').map((line) => `      ${line}`).join('\n'));
  }
  lines.push('');
  if (!report.reachable) {
    lines.push(`NOT REACHABLE: ${report.unreachableReason ?? 'no answer'}`);
  } else if (report.conforms) {
    const judged = report.rows.filter((r) => r.security && r.verdict === 'pass').length;
    const unobserved = report.rows.filter((r) => r.security && r.verdict === 'not_observable').length;
    lines.push(`CONFORMS: ${judged} security ${judged === 1 ? 'case' : 'cases'} passed${unobserved > 0 ? `, ${unobserved} not observable` : ''}`);
  } else {
    lines.push(`DOES NOT CONFORM: ${report.failures.length} security ${report.failures.length === 1 ? 'case' : 'cases'} failed: ${report.failures.map((r) => r.id).join(', ')}`);
  }
  for (const warning of report.warnings) lines.push(`warning: ${warning}`);
  if (report.reachable) lines.push('Deliveries carried webhook-ids starting msg_check_; the accepted ones ran the endpoint\'s handler.');
  return lines.join('\n');
}

/**
 * Thrown by {@link assertEndpointConforms}: the endpoint was unreachable or failed security cases.
 * `name` is `'AssertionError'`, so test runners show it as a failed assertion.
 *
 * @example
 * ```ts
 * try {
 *   assertEndpointConforms(report);
 * } catch (error) {
 *   if (error instanceof EndpointCheckError) console.log(error.failures.map((row) => row.id));
 * }
 * ```
 */
export class EndpointCheckError extends Error {
  /** The security rows that failed (empty when the endpoint was unreachable). */
  readonly failures: readonly CheckRow[];
  readonly report: CheckReport;

  constructor(report: CheckReport) {
    const failures = report.failures;
    const message = !report.reachable
      ? `expected ${report.target} to conform to Standard Webhooks, but it could not be reached: ${report.unreachableReason ?? 'no answer'}`
      : [
          `expected ${report.target} to conform to Standard Webhooks, but ${failures.length} security ${failures.length === 1 ? 'case' : 'cases'} failed:`,
          ...failures.map((row) => `  - ${row.id} (${row.title}): expected ${row.expected}, observed ${row.observed}: ${row.reason}`),
        ].join('\n');
    super(message);
    this.name = 'AssertionError';
    this.failures = failures;
    this.report = report;
  }
}

/**
 * Throws an {@link EndpointCheckError} listing every failed security case (or saying the endpoint
 * was unreachable); returns the report otherwise.
 *
 * @example
 * ```ts
 * import { checkEndpoint, assertEndpointConforms } from 'webhook-receiver/testing';
 * assertEndpointConforms(await checkEndpoint(app.fetch, { secrets, url: 'http://localhost/webhooks' }));
 * ```
 */
export function assertEndpointConforms(report: CheckReport): CheckReport {
  if (typeof report !== 'object' || report === null || !Array.isArray((report as Partial<CheckReport>).rows)) {
    throw new TypeError('assertEndpointConforms needs the report checkEndpoint resolved with');
  }
  if (!report.conforms) throw new EndpointCheckError(report);
  return report;
}

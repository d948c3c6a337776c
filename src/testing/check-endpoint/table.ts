/**
 * The battery as its users see it: the cases, in the order they run, and the shapes of the options
 * and of the report. Below every other part of the check, so they all import from here.
 */

import type { SecretInput } from '../../secrets.ts';

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
 * sends a made-up payload and is not judged). `unknown-tenant` runs only with `unknownTenantUrl`,
 * `cross-tenant` only with `tenants` (or when named in `only`, to say what is missing).
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
  { id: 'unknown-tenant', group: 'refused', title: 'a valid delivery sent to the URL of a tenant the endpoint does not know', security: true, expected: '404 UNKNOWN_TENANT' },
  { id: 'cross-tenant', group: 'refused', title: "signed with this tenant's secret, sent to another tenant's URL", security: true, expected: '4xx' },
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

export const CASE_IDS: readonly string[] = CHECK_CASES.map((c) => c.id);

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
  /**
   * For an endpoint with tenant keys (one route, one tenant per URL): a URL of the same endpoint
   * naming a tenant it does not know. The `unknown-tenant` case sends it a correctly signed
   * delivery, which must be answered `404` (`UNKNOWN_TENANT` in this package): no key was tried.
   */
  unknownTenantUrl?: string | URL;
  /**
   * Other tenants of the same endpoint, each with its URL and its own secrets. The `cross-tenant`
   * case sends a delivery signed with `secrets` to the first one's URL, which must refuse it; and
   * the report warns when one secret is given for several tenants: the URL is not signed, so a
   * delivery for one of them would verify at the other's URL too.
   */
  tenants?: readonly CheckTenant[];
  /** The clock, in epoch milliseconds, for the timestamps sent. Default `Date.now`. */
  now?: () => number;
  /** Called with each row as soon as it is judged (for progress output). */
  onRow?: (row: CheckRow) => void;
}

/**
 * Another tenant of the endpoint under check: its URL and its own signing secrets.
 *
 * @example
 * ```ts
 * const tenants: CheckTenant[] = [{ url: 'http://127.0.0.1:3000/webhooks/globex', secrets: process.env.GLOBEX_SECRET! }];
 * ```
 */
export interface CheckTenant {
  url: string | URL;
  secrets: SecretInput | readonly SecretInput[];
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
  /** Things worth a look that are not failures (slow refusals, one secret given for several tenants). */
  warnings: string[];
}

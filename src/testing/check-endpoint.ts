/**
 * A conformance battery for a live webhook endpoint, whatever it is written in: it
 * sends signed, forged, stale and replayed deliveries, and says for each what a conforming
 * receiver answers and what came back. The sending side is the package's own signer; the
 * endpoint is only ever seen from outside, through its HTTP answers.
 *
 * Web types only (`fetch`, `Request`, `Response`, `AbortSignal`), so it runs wherever the core
 * runs, against a URL or directly against a Fetch handler.
 *
 * This file validates the options and runs the battery; in `check-endpoint/`, `table.ts` holds the
 * cases and the report's shapes, `cases.ts` how each case is built, `send.ts` the sending,
 * `judge.ts` the verdicts, `report.ts` the printed report and the assertion.
 */

import { base64Encode, utf8Encoder } from '../lib/encoding.ts';
import { checkFunction, checkObject, wholeNumber } from '../lib/checks.ts';
import { decodeSecretList, eachSecret, secretList, type KeyMaterial } from '../secrets.ts';
import { createSigner, generateKeyPair, generateMessageId, generateSecret } from '../sign.ts';
import { CASES, DEFAULT_BODY, isJsonText, preview } from './check-endpoint/cases.ts';
import { Redactor, describeAnswer, type CaseContext, type Judgement } from './check-endpoint/judge.ts';
import { curlOf, handlerSender, urlSender, type Send } from './check-endpoint/send.ts';
import { CASE_IDS, type CheckCaseId, type CheckEndpointOptions, type CheckReport, type CheckRow, type CheckTenant, type FetchHandler } from './check-endpoint/table.ts';
import { bodyText } from './recorded.ts';

export {
  CHECK_CASES,
  type CheckCaseId,
  type CheckEndpointOptions,
  type CheckGroup,
  type CheckReport,
  type CheckRow,
  type CheckSent,
  type CheckTenant,
  type CheckVerdict,
  type FetchHandler,
} from './check-endpoint/table.ts';
export { EndpointCheckError, assertEndpointConforms, formatCheckReport } from './check-endpoint/report.ts';

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_CONCURRENCY = 5;
const DEFAULT_OVERSIZED_BYTES = 4 * 1024 * 1024;

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

/** The URL as the report names it: without its query, which may carry a token. */
function urlLabel(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** A key's identity, to compare keys given for different tenants; kept in memory, never printed. */
function fingerprint(key: KeyMaterial): string {
  return key.kind === 'ed25519-secret' ? `v1a:${base64Encode(key.seed)}` : `${key.kind}:${base64Encode(key.raw)}`;
}

/**
 * The other tenants, checked (URLs as the target's, secrets decoded as signing does, messages
 * naming the position, never the value), and a warning for every secret given to several of them.
 */
function tenantsOf(list: readonly CheckTenant[] | undefined, own: readonly KeyMaterial[], ownLabel: string, warnings: string[]): { url: string; shared: boolean }[] {
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw new TypeError('tenants must be an array of { url, secrets }');
  const holders = new Map<string, Set<string>>();
  const hold = (keys: readonly KeyMaterial[], label: string) => {
    for (const key of keys) {
      const id = fingerprint(key);
      const set = holders.get(id) ?? new Set<string>();
      set.add(label);
      holders.set(id, set);
    }
  };
  hold(own, ownLabel);
  const ownIds = new Set(own.map(fingerprint));
  const tenants = list.map((tenant: CheckTenant, index) => {
    if (typeof tenant !== 'object' || tenant === null) throw new TypeError(`tenants[${index}] must be { url, secrets }`);
    const url = httpUrl(tenant.url, `tenants[${index}].url`);
    const keys = decodeSecretList(tenant.secrets, 'sign', `tenants[${index}].secrets`);
    hold(keys, urlLabel(url));
    return { url: url.href, shared: keys.some((key) => ownIds.has(fingerprint(key))) };
  });
  for (const labels of holders.values()) {
    if (labels.size < 2) continue;
    warnings.push(
      `one secret is given for several tenants (${[...labels].join(', ')}): the URL is not signed, so a delivery for one verifies at the others' URLs too; give every tenant its own secret`,
    );
  }
  return tenants;
}

/**
 * Runs the conformance battery against a live endpoint (a URL) or a Fetch handler, and resolves
 * with one row per case. It never throws for what the endpoint does: failures are rows. It throws
 * `TypeError`/`RangeError` at once for bad options (a bad secret, an unknown case id, a URL with
 * credentials), never repeating the value.
 *
 * Each case is signed just before it is sent, so a slow endpoint never receives a timestamp that
 * aged while earlier cases ran. Every delivery carries a `webhook-id` starting `msg_check_`, and
 * the valid ones run the endpoint's real handler. For an endpoint with tenant keys,
 * `unknownTenantUrl` adds a case that expects `404` for a tenant it does not know, and `tenants`
 * one that sends a delivery to another tenant's URL (and a warning when a secret is given for
 * several tenants). The run is bounded: a fixed number of requests
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
  checkObject(options, 'checkEndpoint needs options: { secrets }');
  // Decoded as signing does (errors included), then one input per key: 'whsec_a,whsec_b' is two
  // secrets, to sign with, count and redact each on its own.
  const keys = decodeSecretList(options.secrets, 'sign');
  const secrets = secretList(options.secrets, 'secrets').flatMap(eachSecret);
  const toleranceSeconds = wholeNumber(options.toleranceSeconds, 'toleranceSeconds', 1, 31_536_000, 300);
  const unsignedPolicy = options.unsigned ?? 'reject';
  if (unsignedPolicy !== 'reject' && unsignedPolicy !== 'accept') throw new TypeError(`unsigned must be 'reject' or 'accept'`);
  const timeoutMs = wholeNumber(options.timeoutMs, 'timeoutMs', 1, 120_000, DEFAULT_TIMEOUT_MS);
  const concurrency = wholeNumber(options.concurrency, 'concurrency', 2, 50, DEFAULT_CONCURRENCY);
  const oversizedBytes = wholeNumber(options.oversizedBytes, 'oversizedBytes', 64 * 1024, 64 * 1024 * 1024, DEFAULT_OVERSIZED_BYTES);
  const now = options.now ?? Date.now;
  checkFunction(now, 'now must be a function returning epoch milliseconds');
  const only = caseList(options.only, 'only');
  const skip = caseList(options.skip, 'skip');
  if (skip?.has('valid')) throw new RangeError('skip: the valid case cannot be left out; it is the baseline that gives every refusal its meaning');
  const onRow = options.onRow;
  if (onRow !== undefined) checkFunction(onRow, 'onRow must be a function');

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
  let ownLabel: string;
  if (typeof target === 'function') {
    const parsed = httpUrl(options.url ?? 'http://localhost/webhooks', 'url');
    url = parsed.href;
    send = handlerSender(target, url, timeoutMs);
    targetLabel = `fetch handler (${url})`;
    ownLabel = urlLabel(parsed);
  } else {
    const parsed = httpUrl(target, 'the target');
    url = parsed.href;
    send = urlSender(url, timeoutMs);
    targetLabel = urlLabel(parsed);
    ownLabel = targetLabel;
  }
  const unknownTenantUrl = options.unknownTenantUrl === undefined ? undefined : httpUrl(options.unknownTenantUrl, 'unknownTenantUrl').href;
  const warnings: string[] = [];
  const tenants = tenantsOf(options.tenants, keys, ownLabel, warnings);
  // The tenant cases run when they have their URLs, or when asked for by name (to say what is missing).
  const configured: Partial<Record<CheckCaseId, boolean>> = { 'unknown-tenant': unknownTenantUrl !== undefined, 'cross-tenant': tenants.length > 0 };

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
    unknownTenantUrl,
    tenants,
    rows,
    warnings,
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
    if (configured[c.id] === false && !only?.has(c.id)) continue;
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

/**
 * Judging the answers: what an answer means (this package's duplicate convention included), the
 * verdict of each kind of case, and the context the cases share while they run.
 */

import { base64Encode } from '../../lib/encoding.ts';
import type { SecretInput } from '../../secrets.ts';
import type { Signer } from '../../sign.ts';
import type { Answer, Outgoing, Send } from './send.ts';
import type { CheckRow, CheckVerdict } from './table.ts';

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

export interface Judgement {
  answers: Answer[];
  observed?: string;
  verdict: CheckVerdict;
  reason: string;
}

/** Sends a case's requests (built a moment before) and judges the answers. */
export type Judge = (send: Send, requests: Outgoing[], context: CaseContext) => Promise<Judgement>;

/** A case's requests, signed when it is its turn to run, so no timestamp ages in a queue. */
export interface Built {
  requests: Outgoing[];
  /** For a case the options change: its judge, and what it expects, in place of the table's. */
  judge?: Judge;
  expected?: string;
  security?: boolean;
}

export interface SignedOutgoing extends Outgoing {
  id: string;
  timestamp: number;
  signature: string;
}

/** What the cases share: the run's options, its signers, and the rows judged so far. */
export interface CaseContext {
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
  /** The `unknown-tenant` case's URL, when one was given. */
  unknownTenantUrl: string | undefined;
  /** The other tenants' URLs; `shared` when one of their secrets is also one of `secrets`. */
  tenants: readonly { url: string; shared: boolean }[];
  rows: readonly CheckRow[];
  warnings: string[];
}

export class Redactor {
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

export function describeAnswer(answer: Answer, redactor: Redactor): string {
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

export const single = (expect: 'accept' | 'refuse'): Judge => async (send, [request]) => {
  const answer = await send(request!);
  return { answers: [answer], ...judge(answer, expect) };
};

/** An unknown tenant: 404, before any key is tried (a 401 would mean some key was). */
export const unknownTenantJudge: Judge = async (send, [request]) => {
  const answer = await send(request!);
  const kind = kindOf(answer);
  if (answer.status === 404) return { answers: [answer], verdict: 'pass', reason: 'refused as an unknown tenant' };
  if (kind === 'refused' || kind === 'in_progress') {
    return {
      answers: [answer],
      verdict: 'fail',
      reason: `refused, but with ${answer.status}, not 404: a tenant the endpoint does not know has no keys to try, so a signature answer suggests it verified with keys that are not this tenant's`,
    };
  }
  return { answers: [answer], ...judge(answer, 'refuse') };
};

export const reported = (accepted: string, refused: string): Judge => async (send, [request]) => {
  const answer = await send(request!);
  const kind = kindOf(answer);
  const reason = kind === 'processed' ? accepted : kind === 'refused' ? refused : answer.status === null ? (answer.error ?? 'no answer') : `answered ${answer.status}`;
  return { answers: [answer], verdict: 'reported', reason };
};

export const notObservable = (reason: string): Built => ({ requests: [], judge: async () => ({ answers: [], verdict: 'not_observable', reason }) });

const DUPLICATE_NOTE = 'handler runs are not visible from outside: whether it ran twice cannot be told (this package answers a duplicate with 200 {"duplicate":true})';

export const twice = (label: string): Judge => async (send, [first, second], { redactor }) => {
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

export const concurrentJudge: Judge = async (send, requests) => {
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

export const oversizedJudge: Judge = async (send, [request], { oversizedBytes }) => {
  const answer = await send(request!);
  const kind = kindOf(answer);
  const size = `${oversizedBytes} bytes`;
  if (answer.cut) {
    // A server with a body limit answers 413 and closes the connection while the upload is still
    // going; a client still writing then fails (EPIPE, ECONNRESET) and may lose that answer. The
    // row says what happened rather than calling it a failed request.
    const code = (answer.error ?? '').replace(/^request failed: /, '');
    return {
      answers: [answer],
      observed: `upload cut (${code})`,
      verdict: 'reported',
      reason: `the endpoint closed the connection while the ${size} body was being sent: it refused the upload part-way, as a body limit does (an answer sent before the cut, usually 413, was lost with the connection)`,
    };
  }
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
export const timingJudge: Judge = async (_send, _requests, { rows, warnings }) => {
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

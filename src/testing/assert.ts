/**
 * Assertions for the relay side of a test: was what it forwarded signed (and signed right), or
 * deliberately unsigned? The check itself is the core verifier's; this file only explains a
 * failure in the words a person debugging a sender needs.
 */

import { defaultBackend } from '../crypto.ts';
import { WebhookError, isWebhookError, type WebhookErrorCode } from '../errors.ts';
import { headerValues, webhookHeader, type HeadersInput } from '../headers.ts';
import type { SecretInput } from '../secrets.ts';
import { createVerifier, parseSignatureHeader, type VerifiedWebhook } from '../verify.ts';
import { diagnoseSignatures, diagnosisKeys, type Diagnosis } from './diagnose.ts';
import { describeBody, describeSignatureHeader, quoted, readRecorded, recordedHeaders, type RecordedRequest } from './recorded.ts';

/**
 * Why an assertion about a webhook failed. `name` is `'AssertionError'`, so test runners print it
 * as a failed assertion rather than a crash. The message names the check that failed, shows the
 * headers and the body as received, names the keys tried (by index and keyId, never by value) and
 * says which usual sender bug reproduces the signature, when one does.
 *
 * @example
 * ```ts
 * import { assertSignedWebhook, WebhookAssertionError } from 'webhook-receiver/testing';
 * try {
 *   await assertSignedWebhook(recorded, { secrets: secret });
 * } catch (error) {
 *   if (error instanceof WebhookAssertionError) console.log(error.code, error.findings);
 * }
 * ```
 */
export class WebhookAssertionError extends Error {
  /**
   * The verifier's error code, or `'UNEXPECTED_SIGNATURE'` when a request expected to be unsigned
   * carries a signature header.
   */
  readonly code: WebhookErrorCode | 'UNEXPECTED_SIGNATURE';
  /** The verifier's error, when verification failed. */
  readonly webhookError: WebhookError | undefined;
  /** One sentence per sender bug that reproduces the signature (usually none or one). */
  readonly findings: readonly string[];

  constructor(message: string, details: { code: WebhookErrorCode | 'UNEXPECTED_SIGNATURE'; webhookError?: WebhookError; findings?: readonly string[] }) {
    super(message);
    this.name = 'AssertionError';
    this.code = details.code;
    this.webhookError = details.webhookError;
    this.findings = details.findings ?? [];
  }
}

/**
 * Options of {@link assertSignedWebhook}: the verifier's own.
 *
 * @example
 * ```ts
 * import type { SignedWebhookAssertionOptions } from 'webhook-receiver/testing';
 * const options: SignedWebhookAssertionOptions = { secrets: [current, previous], toleranceSeconds: 60 };
 * ```
 */
export interface SignedWebhookAssertionOptions {
  /** The keys the request must verify with (any one of them). */
  secrets: SecretInput | readonly SecretInput[];
  /** How far `webhook-timestamp` may be from the clock. Default 300. */
  toleranceSeconds?: number;
  /** The clock, in epoch milliseconds. Default `Date.now`; set it to check an old capture. */
  now?: () => number;
}

function firstValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The name the request used: `webhook-*`, or its `svix-*` alias when only that is present. */
function headerName(headers: HeadersInput, suffix: 'id' | 'timestamp' | 'signature'): string {
  return headerValues(headers, `webhook-${suffix}`) === undefined && headerValues(headers, `svix-${suffix}`) !== undefined
    ? `svix-${suffix}`
    : `webhook-${suffix}`;
}

function joined(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(' ') : value;
}

function timestampLine(text: string, nowMs: number, toleranceSeconds: number): string {
  if (!/^[0-9]{1,12}$/.test(text)) {
    return /^[0-9]{13,}$/.test(text) ? `${quoted(text)} (${text.length} digits: milliseconds, not Unix seconds)` : `${quoted(text)} (not Unix seconds)`;
  }
  const seconds = Number(text);
  const offset = Math.floor(nowMs / 1000) - seconds;
  const when = offset === 0 ? 'now' : offset > 0 ? `${offset} s in the past` : `${-offset} s in the future`;
  return `${quoted(text)} (${new Date(seconds * 1000).toISOString()}; ${when}, tolerance ${toleranceSeconds} s)`;
}

interface FailureContext {
  headers: HeadersInput;
  body: Uint8Array;
  secrets: SecretInput | readonly SecretInput[];
  toleranceSeconds: number;
  nowMs: number;
  /** Epoch milliseconds after which the diagnosis stops trying candidates. Default: none. */
  deadlineMs?: number;
}

/**
 * The assertion error for a webhook the verifier refused: the verifier's reason, the request as
 * received, the keys tried, and the diagnosis. Shared by the assertion, the test receiver and
 * the command-line tool.
 */
export async function explainVerificationFailure(error: WebhookError, context: FailureContext): Promise<WebhookAssertionError> {
  const { headers, body } = context;
  const id = firstValue(webhookHeader(headers, 'id'));
  const timestamp = firstValue(webhookHeader(headers, 'timestamp'));
  const signature = joined(webhookHeader(headers, 'signature'));
  const keys = diagnosisKeys(context.secrets);

  const lines = [`expected a signed webhook, but verification failed with ${error.code}: ${error.message}`, 'Request:'];
  lines.push(`  ${headerName(headers, 'id')}: ${id === undefined ? '(missing)' : quoted(id)}`);
  lines.push(`  ${headerName(headers, 'timestamp')}: ${timestamp === undefined ? '(missing)' : timestampLine(timestamp, context.nowMs, context.toleranceSeconds)}`);
  lines.push(`  ${headerName(headers, 'signature')}: ${signature === undefined ? '(missing)' : signature === '' ? '(empty)' : describeSignatureHeader(signature)}`);
  lines.push(`  body: ${await describeBody(body)}`);
  lines.push(`Keys tried: ${keys.described.length === 0 ? 'none' : keys.described.join('; ')}`);

  let diagnosis: Diagnosis | undefined;
  const diagnosable: readonly WebhookErrorCode[] = ['SIGNATURE_MISMATCH', 'TIMESTAMP_TOO_OLD', 'TIMESTAMP_TOO_NEW', 'INVALID_TIMESTAMP'];
  if (diagnosable.includes(error.code) && id !== undefined && id !== '' && timestamp !== undefined && signature !== undefined) {
    let signatures;
    try {
      signatures = parseSignatureHeader(signature);
    } catch {
      signatures = undefined;
    }
    if (signatures !== undefined) {
      const headerIds: { name: string; value: string }[] = [];
      for (const name of ['webhook-id', 'svix-id']) {
        const value = firstValue(headerValues(headers, name));
        if (value !== undefined) headerIds.push({ name, value });
      }
      diagnosis = await diagnoseSignatures(keys, { id, timestampText: timestamp, body, signatures, headerIds }, defaultBackend, context.deadlineMs);
    }
  }

  if (diagnosis?.validAsSent !== undefined) {
    const why =
      error.code === 'INVALID_TIMESTAMP'
        ? 'the sender signed its millisecond timestamp consistently; it must use Unix seconds (Math.floor(Date.now() / 1000)) in both the header and the signature'
        : error.code === 'TIMESTAMP_TOO_OLD'
          ? 'only the time check failed: a replay, a late retry that kept its old timestamp, a capture checked later (set the clock to its time: the now option, or --now on the command line), or a slow clock'
          : 'only the time check failed: the sender\'s clock runs ahead of this one';
    lines.push(`Diagnosis: the signature is valid for this id, timestamp and body with ${diagnosis.validAsSent}; ${why}.`);
  } else if (diagnosis !== undefined && diagnosis.findings.length > 0) {
    lines.push(`Diagnosis: ${diagnosis.findings.join('\nDiagnosis: ')}.`);
  } else if (diagnosis !== undefined && diagnosis.tried.length > 0 && diagnosis.stopped !== true) {
    // For a time failure the signature was checked here only: say that it fails too.
    const also = error.code === 'SIGNATURE_MISMATCH' ? '' : 'besides the timestamp, the signature does not match either, and ';
    lines.push(
      `Diagnosis: ${also}none of the usual sender bugs reproduces these signatures (tried: ${diagnosis.tried.join('; ')}). ` +
        'Most likely the sender signs with another secret (a different destination\'s, or one rotated since), or the body changed in transit.',
    );
  }
  for (const { version, tried, distinct } of diagnosis?.capped ?? []) {
    lines.push(
      `Diagnosis limit: only the first ${tried} of the ${distinct} distinct ${version} entries were diagnosed (a sender sends one entry per key it signs with); ` +
        'the others were not tried.',
    );
  }
  if (diagnosis?.stopped === true) lines.push('Diagnosis limit: the time allowed for the diagnosis ran out; the candidates after that were not tried.');
  return new WebhookAssertionError(lines.join('\n'), { code: error.code, webhookError: error, findings: diagnosis?.findings ?? [] });
}

/**
 * Asserts that a recorded request is a webhook signed by one of `secrets`, within the timestamp
 * window, and returns it verified. On failure it throws a {@link WebhookAssertionError} that says
 * what is wrong and which usual sender bug explains it: the secret used as text, the `whsec_`
 * prefix left in, a millisecond timestamp, re-serialised JSON, a trailing newline, another id.
 *
 * @example
 * ```ts
 * import { assertSignedWebhook } from 'webhook-receiver/testing';
 * const forwarded = await captureNextRequest(); // a Request, or { headers, body }
 * const webhook = await assertSignedWebhook(forwarded, { secrets: destinationSecret });
 * expect(webhook.json()).toEqual({ type: 'invoice.paid' });
 * ```
 */
export async function assertSignedWebhook(request: RecordedRequest, options: SignedWebhookAssertionOptions): Promise<VerifiedWebhook> {
  if (typeof options !== 'object' || options === null) throw new TypeError('assertSignedWebhook needs options with secrets');
  const { headers, body } = await readRecorded(request);
  const verifier = createVerifier({
    secrets: options.secrets,
    toleranceSeconds: options.toleranceSeconds,
    now: options.now,
    // The assertion is about the signature, not the size: a large forwarded body is not a failure.
    maxBodyBytes: Math.max(1, body.byteLength),
  });
  try {
    return await verifier.verify({ headers, body });
  } catch (error) {
    if (!isWebhookError(error)) throw error;
    throw await explainVerificationFailure(error, {
      headers,
      body,
      secrets: options.secrets,
      toleranceSeconds: options.toleranceSeconds ?? 300,
      nowMs: (options.now ?? Date.now)(),
    });
  }
}

/**
 * Asserts that a recorded request is a deliberately unsigned webhook, the way the relay service
 * forwards events whose inbound signature was never checked: a `webhook-id`, and no signature
 * header at all. Its body is not read.
 *
 * @example
 * ```ts
 * import { assertUnsignedWebhook } from 'webhook-receiver/testing';
 * await assertUnsignedWebhook(forwardedUnattemptedEvent);
 * ```
 */
export async function assertUnsignedWebhook(request: RecordedRequest): Promise<void> {
  const headers = recordedHeaders(request);
  const idValue = webhookHeader(headers, 'id');
  const id = firstValue(idValue);
  const signature = joined(webhookHeader(headers, 'signature'));
  if (signature !== undefined) {
    throw new WebhookAssertionError(
      `expected an unsigned webhook, but it carries ${headerName(headers, 'signature')}: ${signature === '' ? '(empty)' : describeSignatureHeader(signature)}` +
        `\nRequest:\n  ${headerName(headers, 'id')}: ${id === undefined ? '(missing)' : quoted(id)}`,
      { code: 'UNEXPECTED_SIGNATURE' },
    );
  }
  if (id === undefined || id === '') {
    throw new WebhookAssertionError(
      'expected an unsigned webhook, but webhook-id is missing or empty: an unsigned event still carries its id (svix-id is accepted too), the receiver\'s idempotency key',
      { code: 'MISSING_ID' },
    );
  }
  if (Array.isArray(idValue) && new Set(idValue).size > 1) {
    throw new WebhookAssertionError(`expected an unsigned webhook, but webhook-id appears ${idValue.length} times with different values`, {
      code: 'MISSING_ID',
    });
  }
}

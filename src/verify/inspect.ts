/**
 * The headers checked before any key is tried: the id (present, bounded, no lone surrogate), the
 * timestamp within the window of the (checked) clock, and the signature header present unless
 * unsigned requests are accepted.
 */

import { rejection } from '../errors.ts';
import { webhookHeaders, type HeadersInput } from '../headers.ts';
import { MAX_ID_LENGTH } from './limits.ts';
import type { VerifierSettings } from './settings.ts';
import { joined, parseSignatureHeader, parseTimestamp, single, type ParsedSignatures } from './wire.ts';

/** A UTF-16 surrogate without its pair (in `u` mode a paired one is a single code point). */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** What the headers say, checked. */
export interface Inspected {
  id: string;
  timestampText: string | undefined;
  timestampSeconds: number | undefined;
  signatures: ParsedSignatures | undefined;
}

/** Checks the headers of a request (a `WebhookError` naming the check that failed). */
export function inspect(headers: HeadersInput, settings: VerifierSettings): Inspected {
  const values = webhookHeaders(headers);
  const id = single(values.id, 'webhook-id', 'MISSING_ID');
  if (id === undefined || id === '') {
    throw rejection('MISSING_ID', 'webhook-id header is missing or empty (svix-id is accepted too)');
  }
  if (id.length > MAX_ID_LENGTH) {
    // Ids become idempotency keys: a cap keeps unsigned traffic (with unsigned: 'accept') from
    // filling a store with kilobyte-long keys.
    throw rejection('MISSING_ID', `webhook-id is ${id.length} characters long; the limit is ${MAX_ID_LENGTH}`);
  }
  if (LONE_SURROGATE.test(id)) {
    // The id is signed as UTF-8, where every lone surrogate becomes U+FFFD: 'a\uFFFD', 'a\uD800'
    // and 'a\uDFFD' would share one signature yet be three idempotency keys, so a captured
    // message could be replayed under a new key. No HTTP header carries one (header values are
    // bytes); only a hand-built headers object can.
    throw rejection('MISSING_ID', 'webhook-id contains a lone UTF-16 surrogate, which no HTTP header can carry');
  }
  const signatureHeader = joined(values.signature);
  const timestampText = single(values.timestamp, 'webhook-timestamp', 'INVALID_TIMESTAMP');
  let timestampSeconds: number | undefined;
  if (timestampText === undefined || timestampText === '') {
    if (signatureHeader !== undefined || !settings.acceptUnsigned) {
      throw rejection('MISSING_TIMESTAMP', 'webhook-timestamp header is missing or empty (svix-timestamp is accepted too)');
    }
  } else {
    timestampSeconds = parseTimestamp(timestampText);
    checkWindow(timestampSeconds, settings);
  }
  if (signatureHeader === undefined) {
    if (!settings.acceptUnsigned) {
      throw rejection(
        'MISSING_SIGNATURE',
        `webhook-signature header is missing: the request is unsigned. Unsigned events are refused unless the receiver opts in with unsigned: 'accept'`,
      );
    }
    return { id, timestampText, timestampSeconds, signatures: undefined };
  }
  return { id, timestampText, timestampSeconds, signatures: parseSignatureHeader(signatureHeader) };
}

/** The injected clock, checked: one returning NaN would make every window comparison false and let any timestamp through. */
export function clock(settings: VerifierSettings): number {
  const ms = settings.now();
  if (typeof ms !== 'number' || !Number.isFinite(ms)) {
    throw new TypeError(`now() returned ${typeof ms === 'number' ? String(ms) : `a ${typeof ms}`}; it must return epoch milliseconds (like Date.now())`);
  }
  return ms;
}

function checkWindow(timestamp: number, settings: VerifierSettings): void {
  const now = Math.floor(clock(settings) / 1000);
  if (now - timestamp > settings.tolerance) {
    throw rejection(
      'TIMESTAMP_TOO_OLD',
      `webhook-timestamp is ${now - timestamp} s in the past; the tolerance is ${settings.tolerance} s (a replay, a late retry with an old signature, or a slow clock)`,
    );
  }
  if (timestamp - now > settings.tolerance) {
    throw rejection(
      'TIMESTAMP_TOO_NEW',
      `webhook-timestamp is ${timestamp - now} s in the future; the tolerance is ${settings.tolerance} s (check the sender's and this machine's clocks)`,
    );
  }
}

/**
 * A verifier's options other than its keys, checked once and with their defaults filled in.
 */

import { DEFAULT_MAX_BODY_BYTES } from '../body.ts';
import { DEFAULT_TOLERANCE_SECONDS } from './limits.ts';
import type { VerifierOptions } from './types.ts';

/** A verifier's options other than its keys, checked. */
export interface VerifierSettings {
  readonly tolerance: number;
  readonly now: () => number;
  readonly acceptUnsigned: boolean;
  readonly maxBodyBytes: number;
}

/**
 * Checks a verifier's options other than `secrets` (a `TypeError` or `RangeError` saying how to
 * fix one). Internal: tenant keys check them once and build each tenant's verifier from them.
 */
export function verifierSettings(options: Omit<VerifierOptions, 'secrets'>): VerifierSettings {
  const { toleranceSeconds, now, unsigned, maxBodyBytes } = options;
  if (toleranceSeconds !== undefined && !(typeof toleranceSeconds === 'number' && Number.isFinite(toleranceSeconds) && toleranceSeconds > 0)) {
    throw new RangeError('toleranceSeconds must be a positive, finite number of seconds (default 300)');
  }
  if (now !== undefined && typeof now !== 'function') throw new TypeError('now must be a function returning epoch milliseconds');
  if (unsigned !== undefined && unsigned !== 'reject' && unsigned !== 'accept') {
    throw new TypeError(`unsigned must be 'reject' or 'accept'`);
  }
  if (maxBodyBytes !== undefined && !(Number.isSafeInteger(maxBodyBytes) && maxBodyBytes > 0)) {
    throw new RangeError('maxBodyBytes must be a positive whole number of bytes (default 1048576)');
  }
  return {
    tolerance: toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS,
    now: now ?? Date.now,
    acceptUnsigned: unsigned === 'accept',
    maxBodyBytes: maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
  };
}

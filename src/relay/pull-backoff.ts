/**
 * The waits of a trigger source's loop: exponential from a floor to a cap, reset when things go
 * well again. Idle polling (the trigger caught up) waits exactly; failures wait with jitter, so
 * pullers that failed together do not come back together.
 */

import { isWholeNumber } from '../lib/checks.ts';

/**
 * A floor and a cap, in milliseconds, for {@link TriggerSourceOptions.idle} and
 * {@link TriggerSourceOptions.errors}.
 *
 * @example
 * ```ts
 * import type { PullBackoffOptions } from 'webhook-receiver/relay';
 * const idle: PullBackoffOptions = { minMs: 500, maxMs: 10_000 };
 * ```
 */
export interface PullBackoffOptions {
  minMs?: number;
  maxMs?: number;
}

/** Internal: the state of one backoff. */
export interface PullBackoff {
  /** The next wait: `min(maxMs, minMs * 2^n)` for the n-th in a row, scaled by `jitter` (1: none). */
  next(jitter: number): number;
  /** Back to the floor. */
  reset(): void;
}

function ms(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!isWholeNumber(value, 0, 86_400_000)) {
    throw new RangeError(`triggerSource: ${name} must be a whole number of milliseconds from 0 to 86400000; got ${String(value)}`);
  }
  return value;
}

/** A backoff from checked options; `name` names them in errors. */
export function pullBackoff(options: PullBackoffOptions | undefined, name: string, minDefault: number, maxDefault: number): PullBackoff {
  if (options !== undefined && (typeof options !== 'object' || options === null)) throw new TypeError(`triggerSource: ${name} must be { minMs, maxMs }`);
  const min = ms(options?.minMs, `${name}.minMs`, minDefault);
  const max = ms(options?.maxMs, `${name}.maxMs`, Math.max(min, maxDefault));
  if (max < min) throw new RangeError(`triggerSource: ${name}.maxMs (${max}) is below ${name}.minMs (${min})`);
  let streak = 0;
  return {
    next(jitter) {
      const base = Math.min(max, min * 2 ** Math.min(streak, 30));
      streak++;
      // Half of the wait is fixed, half random: never zero, never more than the cap.
      return jitter >= 1 ? base : Math.round(base / 2 + (base / 2) * Math.max(0, jitter));
    },
    reset() {
      streak = 0;
    },
  };
}

/**
 * What every property test in this folder shares: how many cases to run, the per-case time bound,
 * the checks that a rejection is a documented `WebhookError`, and independent signing with
 * `node:crypto` (so a bug in src/ cannot make a test agree with itself).
 *
 * Size: `FUZZ_RUNS` is the total number of cases for the whole folder (`npm run fuzz` sets a
 * million). Each property takes its `weight` share of it. Without `FUZZ_RUNS` every property runs
 * its small CI count, so the normal test command stays at a few seconds.
 */

import { createHmac, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { expect } from 'vitest';
import { WEBHOOK_ERROR_STATUS, WebhookError, type WebhookErrorCode } from '../../src/errors.ts';

const total = process.env.FUZZ_RUNS === undefined ? undefined : Number(process.env.FUZZ_RUNS);
if (total !== undefined && !(Number.isSafeInteger(total) && total > 0)) {
  throw new RangeError(`FUZZ_RUNS must be a positive whole number, got ${JSON.stringify(process.env.FUZZ_RUNS)}`);
}
const seed = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

/** True in a nightly-sized run. */
export const NIGHTLY = total !== undefined;

/** A property that takes too long for one case fails: a hang is a bug, not a slow test. */
const CASE_TIMEOUT_MS = 5_000;

/**
 * Cases for one property: `weight` of `FUZZ_RUNS`, or `ci` cases in the normal test run. The
 * weights of all properties in test/fuzz add up to 1, so `FUZZ_RUNS` is the folder's total.
 */
export function cases(weight: number, ci: number): number {
  return total === undefined ? ci : Math.max(1, Math.round(total * weight));
}

/** The vitest timeout for a property of `runs` cases at about `msPerCase` each, with headroom. */
export function timeoutFor(runs: number, msPerCase: number): number {
  return 30_000 + Math.ceil(runs * msPerCase * 4);
}

/** fast-check parameters: the case count, the per-case time bound, and `FUZZ_SEED` to replay. */
function parameters<T>(numRuns: number, examples?: T[]): fc.Parameters<T> {
  return {
    numRuns,
    ...(examples === undefined ? {} : { examples }),
    ...(seed === undefined ? {} : { seed }),
    plugins: [fc.timeout(CASE_TIMEOUT_MS) as fc.Plugin<T>],
  };
}

/**
 * Runs an async property and prints its rate in a nightly run ("how long per 10k cases"), so the
 * nightly log says where the time goes.
 */
export async function check<Ts extends [unknown, ...unknown[]]>(
  name: string,
  property: fc.IAsyncPropertyWithHooks<Ts>,
  numRuns: number,
  /** Cases run before the random ones (fast-check `examples`), for outcomes the generator reaches only rarely. */
  examples?: Ts[],
): Promise<void> {
  const started = performance.now();
  await fc.assert(property, parameters<Ts>(numRuns, examples));
  const ms = performance.now() - started;
  if (NIGHTLY || process.env.FUZZ_REPORT) {
    console.log(`[fuzz] ${name}: ${numRuns} cases in ${(ms / 1000).toFixed(1)} s (${((ms / numRuns) * 10_000 / 1000).toFixed(2)} s per 10k)`);
  }
}

// ---------------------------------------------------------------------------------------------
// Outcomes.

const ERROR_CODES = Object.keys(WEBHOOK_ERROR_STATUS) as WebhookErrorCode[];

/** How a verification ended: the value, or the error it rejected with. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

export async function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The error is a `WebhookError` with a documented code and that code's status, nothing else. */
export function expectDocumentedError(error: unknown): asserts error is WebhookError {
  if (!(error instanceof WebhookError)) {
    expect.fail(`expected a WebhookError, got ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
  }
  expect(ERROR_CODES).toContain(error.code);
  expect(error.status).toBe(WEBHOOK_ERROR_STATUS[error.code]);
  expect(error.name).toBe('WebhookError');
}

/** The promise rejects with exactly `code`; returns the error for further checks. */
export async function expectCode(promise: Promise<unknown>, code: WebhookErrorCode, context: () => string): Promise<WebhookError> {
  const result = await settle(promise);
  if (result.ok) expect.fail(`expected ${code}, but it was accepted: ${context()}`);
  expectDocumentedError(result.error);
  if (result.error.code !== code) expect.fail(`expected ${code}, got ${result.error.code} (${result.error.message}): ${context()}`);
  return result.error;
}

// ---------------------------------------------------------------------------------------------
// Independent signing: node:crypto directly, never src/.

/** A fresh `whsec_` secret of `bytes` random bytes, with its key bytes. */
export function freshSecret(bytes = 32): { secret: string; key: Buffer } {
  const key = randomBytes(bytes);
  return { secret: `whsec_${key.toString('base64')}`, key };
}

/** base64(HMAC-SHA256(key, `${id}.${timestamp}.` ‖ body)), as a Standard Webhooks sender computes it. */
export function hmacSignature(key: Uint8Array, id: string, timestamp: string, body: string | Uint8Array): string {
  return createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64');
}

// ---------------------------------------------------------------------------------------------
// Leak checks.

/** Every 16-character run of each text: a truncated secret in a message is still a leak. */
export function secretWindows(texts: Iterable<string>, width = 16): Set<string> {
  const windows = new Set<string>();
  for (const text of texts) {
    if (text.length <= width) windows.add(text);
    for (let i = 0; i + width <= text.length; i++) windows.add(text.slice(i, i + width));
  }
  return windows;
}

/** The first window of `windows` found in `text`, or `undefined`. */
export function findWindow(text: string, windows: Set<string>): string | undefined {
  for (const window of windows) if (text.includes(window)) return window;
  return undefined;
}

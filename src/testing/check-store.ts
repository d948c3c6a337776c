/**
 * The store conformance kit: every rule of the store contract (src/stores/types.ts), run against
 * any implementation. The project runs it on its own stores; users run it on theirs
 * (DynamoDB, MongoDB, D1…). Plain async code with Web-standard globals only, so it works under
 * any test runner (vitest, Jest, node:test, Bun) and in any runtime the stores run in (workerd).
 *
 * This file runs the rules and reports; `check-store/types.ts` holds the public shapes,
 * `check-store/harness.ts` what a rule runs on, `check-store/rules.ts` the rules themselves.
 */

import { randomBytes } from '../crypto.ts';
import { toHex } from '../lib/encoding.ts';
import type { IdempotencyStore } from '../stores/types.ts';
import { Run, RuleFailure, contextOf, describeError, type Settings } from './check-store/harness.ts';
import { orderingProblem } from '../stores/internal.ts';
import { ORDERING_RULES } from './check-store/ordering-rules.ts';
import { RULES } from './check-store/rules.ts';
import type { CheckStoreOptions, StoreConformanceReport, StoreFactory, StoreRule, StoreRuleOutcome } from './check-store/types.ts';

export type { CheckStoreContext, CheckStoreOptions, StoreConformanceReport, StoreFactory, StoreRule, StoreRuleOutcome } from './check-store/types.ts';

/**
 * The store broke one or more rules of the contract. The message lists each failed rule in
 * words; `failures` has them one by one and `report` every rule's outcome. `name` is
 * `'AssertionError'`, so test runners show it as a failed assertion rather than a crash.
 *
 * @example
 * ```ts
 * import { checkStore, StoreConformanceError } from 'webhook-receiver/testing';
 * try {
 *   await checkStore(() => myStore());
 * } catch (error) {
 *   if (error instanceof StoreConformanceError) for (const failure of error.failures) console.log(failure.rule, failure.message);
 * }
 * ```
 */
export class StoreConformanceError extends Error {
  readonly failures: readonly { rule: StoreRule; message: string }[];
  readonly report: StoreConformanceReport;

  constructor(report: StoreConformanceReport) {
    const failures = report.rules.filter((r) => r.outcome === 'failed').map((r) => ({ rule: r.rule, message: r.message ?? r.title }));
    const of = report.passed + report.failed;
    super(
      `the store broke ${failures.length} of ${of} rules of the store contract:\n${failures.map((f) => `- ${f.message} [${f.rule}]`).join('\n')}`,
    );
    this.name = 'AssertionError';
    this.failures = failures;
    this.report = report;
  }
}

/**
 * Runs the whole store contract against a store: claims (acquired, processing, completed),
 * release, completion idempotent for its own token, token fencing on complete, release and extend,
 * unknown keys, independent keys and key classes, argument checks, atomic concurrent claims and
 * takeovers, lock expiry, completed-id expiry, lease renewal, and (when asked) a shared backend and
 * an unreachable one; on a store with the ordering operations, the ordering rules too (stale
 * versions, exact comparison, the entity's lock, versions that never go down, fencing, forgetting, one id with or without ordering). Resolves with a report, or rejects with a {@link StoreConformanceError}
 * listing each rule the store broke, in words.
 *
 * No test runner is needed: await it in a test of any runner. With the default real clock it
 * waits on the store's own expiry: expect a few seconds.
 *
 * @example
 * ```ts
 * // vitest or Jest
 * import { checkStore } from 'webhook-receiver/testing';
 * test('my DynamoDB store keeps the store contract', async () => {
 *   await checkStore(() => dynamoStore({ client, table: 'claims' }), { shared: true });
 * }, 60_000);
 * ```
 *
 * @example
 * ```ts
 * // node:test, with a store that takes a clock
 * import { test } from 'node:test';
 * test('memory store', () => checkStore(({ now }) => memoryStore({ now }), { clock: 'manual' }));
 * ```
 */
export async function checkStore(makeStore: StoreFactory, options: CheckStoreOptions = {}): Promise<StoreConformanceReport> {
  if (typeof makeStore !== 'function') throw new TypeError('checkStore needs a function that makes the store: checkStore(() => myStore())');
  if (typeof options !== 'object' || options === null) throw new TypeError('checkStore options must be an object');
  const started = Date.now();
  const settings = settle(options);
  // One store, made once, tells which optional operations the stores have.
  const probe: Partial<IdempotencyStore> | null | undefined = await makeStore(contextOf(settings));
  settings.extend = options.extend ?? typeof probe?.extend === 'function';
  settings.ping = typeof probe?.ping === 'function';
  const outcomes: StoreRuleOutcome[] = [];
  // Ordering: an `ordering` with all five operations, or none; one that lacks some is a broken
  // contract (the receiver refuses such a store), reported as the first ordering rule's failure.
  const orderingBroken = orderingProblem(probe?.ordering);
  const ordering = probe?.ordering === undefined ? 'none' : orderingBroken === undefined ? 'all' : 'broken';
  for (const [rule, title, check] of [...RULES, ...ORDERING_RULES]) {
    const ruleStarted = Date.now();
    if (rule.startsWith('ordering-') && orderingBroken !== undefined && rule === ORDERING_RULES[0]![0]) {
      outcomes.push({ rule, title, outcome: 'failed', message: `the store's ${orderingBroken}`, ms: 0 });
      continue;
    }
    const skipped = rule.startsWith('ordering-') && ordering !== 'all' ? 'the store has no ordering operations' : skipReason(rule, settings, options.extend);
    if (skipped !== undefined) {
      outcomes.push({ rule, title, outcome: 'skipped', message: skipped, ms: 0 });
      continue;
    }
    try {
      const run = new Run(rule, settings, makeStore);
      await check(run);
      const recommendation = run.recommendations.length > 0 ? run.recommendations.join('; ') : undefined;
      outcomes.push({ rule, title, outcome: 'passed', ms: Date.now() - ruleStarted, ...(recommendation === undefined ? {} : { recommendation }) });
    } catch (error) {
      const message = error instanceof RuleFailure ? error.message : `${title}: the check itself failed: ${describeError(error)}`;
      outcomes.push({ rule, title, outcome: 'failed', message, ms: Date.now() - ruleStarted });
    }
  }
  const count = (outcome: StoreRuleOutcome['outcome']) => outcomes.filter((o) => o.outcome === outcome).length;
  const report: StoreConformanceReport = { rules: outcomes, passed: count('passed'), failed: count('failed'), skipped: count('skipped'), ms: Date.now() - started };
  if (report.failed > 0) throw new StoreConformanceError(report);
  return report;
}

function settle(options: CheckStoreOptions): Settings {
  const manual = options.clock === 'manual';
  if (options.clock !== undefined && options.clock !== 'real' && !manual) throw new TypeError(`checkStore clock must be 'real' or 'manual'`);
  const positive = (value: number | undefined, name: string, fallback: number): number => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new RangeError(`checkStore ${name} must be a positive, finite number`);
    return value;
  };
  const concurrency = positive(options.concurrency, 'concurrency', 50);
  if (!Number.isSafeInteger(concurrency) || concurrency < 2) throw new RangeError('checkStore concurrency must be a whole number of at least 2');
  if (options.unreachable !== undefined && typeof options.unreachable !== 'function') {
    throw new TypeError('checkStore unreachable must be a function that makes the store against a backend that cannot be reached');
  }
  if (options.tokenPattern !== undefined && !(options.tokenPattern instanceof RegExp)) throw new TypeError('checkStore tokenPattern must be a RegExp');
  const namespace = options.namespace ?? `check${toHex(randomBytes(6))}`;
  if (typeof namespace !== 'string' || namespace === '' || namespace.includes(':')) throw new TypeError(`checkStore namespace must be a non-empty string without ':'`);
  const skip = new Set(options.skip ?? []);
  for (const rule of skip) if (![...RULES, ...ORDERING_RULES].some(([id]) => id === rule)) throw new TypeError(`checkStore skip: no rule named ${JSON.stringify(rule)}`);
  return {
    manual,
    shared: options.shared === true,
    extend: false,
    ping: false,
    unreachable: options.unreachable,
    concurrency,
    lockMs: positive(options.lockMs, 'lockMs', manual ? 1000 : 200),
    graceMs: positive(options.expiryGraceMs, 'expiryGraceMs', 2000),
    timeoutMs: positive(options.operationTimeoutMs, 'operationTimeoutMs', 10_000),
    unreachableTimeoutMs: positive(options.unreachableTimeoutMs, 'unreachableTimeoutMs', 10_000),
    tokenPattern: options.tokenPattern,
    skip,
    namespace,
    clock: { time: Date.now() },
  };
}

function skipReason(rule: StoreRule, settings: Settings, extendOption: boolean | undefined): string | undefined {
  if (settings.skip.has(rule)) return 'skipped by the caller';
  if (rule === 'shared' && !settings.shared) return 'the stores do not share a backend (shared: false)';
  if (rule === 'unreachable' && settings.unreachable === undefined) return 'no unreachable backend was given';
  if (rule === 'extend' && !settings.extend) return extendOption === false ? 'the store has no extend (extend: false)' : 'the store has no extend';
  if (rule === 'ping' && !settings.ping) return 'the store has no ping';
  return undefined;
}

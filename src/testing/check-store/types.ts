/**
 * The store conformance kit as its users see it: the rules by id, the options, the factory and the
 * report. Below every other part of the kit, so they all import from here.
 */

import type { IdempotencyStore } from '../../stores/types.ts';

/**
 * The rules {@link checkStore} checks, by id (for {@link CheckStoreOptions.skip} and in reports).
 *
 * @example
 * ```ts
 * const skip: StoreRule[] = ['ttl'];
 * ```
 */
export type StoreRule =
  | 'arguments'
  | 'claim'
  | 'release'
  | 'complete-idempotent'
  | 'fencing'
  | 'unknown-keys'
  | 'independent-keys'
  | 'fractional-durations'
  | 'concurrent-claims'
  | 'expiry-takeover'
  | 'expiry-stale-owner'
  | 'concurrent-takeover'
  | 'ttl'
  | 'extend'
  | 'shared'
  | 'ping'
  | 'unreachable'
  | 'ordering-stale'
  | 'ordering-compare'
  | 'ordering-exclusive'
  | 'ordering-failed-newer'
  | 'ordering-never-down'
  | 'ordering-fencing'
  | 'ordering-concurrent'
  | 'ordering-lock-expiry'
  | 'ordering-forget'
  | 'ordering-one-id';

/**
 * What {@link checkStore} hands the store factory.
 *
 * @example
 * ```ts
 * // A store that takes a clock runs on the kit's, and the kit moves it instead of waiting.
 * await checkStore(({ now }) => memoryStore({ now }), { clock: 'manual' });
 * ```
 */
export interface CheckStoreContext {
  /**
   * The kit's clock, in epoch milliseconds. With `clock: 'manual'` it only moves when the kit
   * moves it: give it to a store that accepts a clock. With the default `'real'`, `Date.now`.
   */
  now(): number;
}

/**
 * Makes a store for {@link checkStore}. It is called once up front (to see whether the store has
 * `extend` and `ping`), then once per rule (several times for `shared`): the stores may share one
 * backend, the kit's keys never collide.
 *
 * @example
 * ```ts
 * const makeStore: StoreFactory = () => redisStore({ client: redis, prefix: 'conformance:' });
 * ```
 */
export type StoreFactory = (context: CheckStoreContext) => IdempotencyStore | Promise<IdempotencyStore>;

/**
 * Options of {@link checkStore}.
 *
 * @example
 * ```ts
 * const options: CheckStoreOptions = { shared: true, unreachable: () => myStore({ url: 'http://127.0.0.1:9' }) };
 * ```
 */
export interface CheckStoreOptions {
  /**
   * `'manual'`: the store reads `context.now` (see {@link CheckStoreContext}), and the kit moves
   * that clock past a lock instead of waiting for it. `'real'` (default): the kit waits, for a few
   * hundred milliseconds per expiry rule, on the store's own expiry.
   */
  clock?: 'real' | 'manual';
  /**
   * The stores `makeStore` returns share one backend (two app instances, one database): a claim
   * taken through one is seen through another, and concurrent claims are spread across several.
   * Default `false` (each store stands alone, like the memory store).
   */
  shared?: boolean;
  /** `false`: the store has no `extend` (lease renewal), so its rules are skipped. Default: whether the store has one. */
  extend?: boolean;
  /**
   * Makes the same store against a backend that cannot be reached (a closed port, a stopped
   * server): every operation must reject within `unreachableTimeoutMs`, never resolve, never hang.
   */
  unreachable?: () => IdempotencyStore | Promise<IdempotencyStore>;
  /** How many claims run at once in the concurrency rules. Default 50. */
  concurrency?: number;
  /** The short lock of the expiry rules, in milliseconds. Default 200 (or 1000 with a manual clock, which costs nothing). */
  lockMs?: number;
  /** How long past a lock's end the store may take to expire it before the rule fails. Default 2000. */
  expiryGraceMs?: number;
  /** An operation that has not settled after this long fails its rule (a store must not hang). Default 10 000. */
  operationTimeoutMs?: number;
  /** How long an operation on the unreachable backend may take to reject. Default 10 000. */
  unreachableTimeoutMs?: number;
  /** What every ownership token must look like, when the store promises a format. */
  tokenPattern?: RegExp;
  /** Rules not to run (reported as skipped): for a limitation the store documents. */
  skip?: readonly StoreRule[];
  /**
   * The namespace of the kit's keys (`${namespace}:s:${id}`, without `:`). Default a fresh random
   * one per run, so runs on a persistent backend never see each other's keys.
   */
  namespace?: string;
}

/**
 * One rule's outcome in a {@link StoreConformanceReport}.
 *
 * @example
 * ```ts
 * const failed: StoreRuleOutcome[] = report.rules.filter((rule) => rule.outcome === 'failed');
 * ```
 */
export interface StoreRuleOutcome {
  rule: StoreRule;
  /** The rule, in words. */
  title: string;
  outcome: 'passed' | 'failed' | 'skipped';
  /** Why it failed, or why it was skipped. */
  message?: string;
  /**
   * Advice on a rule that passed: something the store does safely but not as most stores do
   * (a bad duration refused with a `TypeError` rather than a `RangeError`). Never a failure.
   */
  recommendation?: string;
  /** How long the rule took, in milliseconds. */
  ms: number;
}

/**
 * What {@link checkStore} found: every rule with its outcome.
 *
 * @example
 * ```ts
 * const report = await checkStore(() => myStore());
 * console.log(`${report.passed} rules passed, ${report.skipped} skipped`);
 * ```
 */
export interface StoreConformanceReport {
  rules: StoreRuleOutcome[];
  passed: number;
  failed: number;
  skipped: number;
  /** The whole run, in milliseconds. */
  ms: number;
}

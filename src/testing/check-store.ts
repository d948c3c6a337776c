/**
 * The store conformance kit: every rule of the store contract (src/stores/types.ts), run against
 * any implementation (issue 13). The project runs it on its own stores; users run it on theirs
 * (DynamoDB, MongoDB, D1…). Plain async code with Web-standard globals only, so it works under
 * any test runner (vitest, Jest, node:test, Bun) and in any runtime the stores run in (workerd).
 */

import { randomBytes } from '../crypto.ts';
import { toHex } from '../stores/internal.ts';
import type { ClaimResult, IdempotencyStore } from '../stores/types.ts';

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
  | 'unreachable';

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
 * an unreachable one. Resolves with a report, or rejects with a {@link StoreConformanceError}
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
  for (const [rule, title, check] of RULES) {
    const ruleStarted = Date.now();
    const skipped = skipReason(rule, settings, options.extend);
    if (skipped !== undefined) {
      outcomes.push({ rule, title, outcome: 'skipped', message: skipped, ms: 0 });
      continue;
    }
    try {
      await check(new Run(rule, settings, makeStore));
      outcomes.push({ rule, title, outcome: 'passed', ms: Date.now() - ruleStarted });
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

interface Settings {
  manual: boolean;
  shared: boolean;
  /** Whether the extend rules run: `options.extend`, else whether the store has `extend`. */
  extend: boolean;
  /** Whether the store has `ping`. */
  ping: boolean;
  unreachable: (() => IdempotencyStore | Promise<IdempotencyStore>) | undefined;
  concurrency: number;
  lockMs: number;
  graceMs: number;
  timeoutMs: number;
  unreachableTimeoutMs: number;
  tokenPattern: RegExp | undefined;
  skip: ReadonlySet<StoreRule>;
  namespace: string;
  /** The kit's clock (manual mode): moved by `Run.pass`. */
  clock: { time: number };
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
  for (const rule of skip) if (!RULES.some(([id]) => id === rule)) throw new TypeError(`checkStore skip: no rule named ${JSON.stringify(rule)}`);
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

function contextOf(settings: Settings): CheckStoreContext {
  return { now: settings.manual ? () => settings.clock.time : () => Date.now() };
}

/** A broken rule: its message is the report's line. */
class RuleFailure extends Error {}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One rule's run: fresh keys, bounded operations, and the clock. */
class Run {
  #ids = 0;
  readonly settings: Settings;
  readonly rule: StoreRule;
  readonly #makeStore: StoreFactory;

  constructor(rule: StoreRule, settings: Settings, makeStore: StoreFactory) {
    this.rule = rule;
    this.settings = settings;
    this.#makeStore = makeStore;
  }

  /** A signed-class key no other rule or run uses; `kind` 'u' for the unsigned class. */
  key(kind: 's' | 'u' = 's', id = `${this.rule}-${++this.#ids}`): string {
    return `${this.settings.namespace}:${kind}:${id}`;
  }

  async store(): Promise<Store> {
    const made = await this.#makeStore(contextOf(this.settings));
    if (typeof made !== 'object' || made === null || typeof made.claim !== 'function') throw new RuleFailure('makeStore did not return a store (an object with claim, complete and release)');
    return new Store(made, this);
  }

  fail(message: string): never {
    throw new RuleFailure(message);
  }

  /** Throws the rule's failure unless `condition` holds. */
  check(condition: boolean, message: string): void {
    if (!condition) this.fail(message);
  }

  /** The clock right now (the store's, in manual mode). */
  now(): number {
    return this.settings.manual ? this.settings.clock.time : Date.now();
  }

  /** Lets `ms` pass: moves the manual clock, or waits. */
  async pass(ms: number): Promise<void> {
    if (ms <= 0) return;
    if (this.settings.manual) this.settings.clock.time += ms;
    else await sleep(ms);
  }

  /**
   * Claims `key` until it is acquired, while `until(result)` allows: waits on the store's own
   * expiry (bounded by the grace period) rather than guessing how late it may be.
   */
  async claimOnceExpired(store: Store, key: string, lockMs: number, expiresAt: number, what: string): Promise<string> {
    await this.pass(expiresAt - this.now() + 1);
    const deadline = Date.now() + this.settings.graceMs;
    for (;;) {
      const result = await store.claim(key, lockMs);
      if (result.status === 'acquired') return result.token;
      if (this.settings.manual || Date.now() > deadline) {
        this.fail(`${what}: still ${result.status} ${this.settings.manual ? 'once the clock passed its end' : `${this.settings.graceMs} ms after it should have expired`}`);
      }
      await sleep(20);
    }
  }
}

/** The store under test, each operation bounded in time and described in failures. */
class Store {
  readonly #store: IdempotencyStore;
  readonly #run: Run;
  constructor(store: IdempotencyStore, run: Run) {
    this.#store = store;
    this.#run = run;
  }

  async claim(key: string, lockMs: number): Promise<ClaimResult> {
    const result = await this.#call('claim', [key, lockMs], () => this.#store.claim(key, lockMs));
    const run = this.#run;
    run.check(isClaimResult(result), `claim answered ${describe(result)}, which is not a claim result ({ status: 'acquired', token } | { status: 'processing' } | { status: 'completed' })`);
    if (result.status === 'acquired') {
      run.check(typeof result.token === 'string' && result.token.length > 0, `claim acquired with token ${describe(result.token)}: a token must be a non-empty string`);
      const pattern = run.settings.tokenPattern;
      if (pattern !== undefined) run.check(pattern.test(result.token), `claim acquired with token ${describe(result.token)}, which does not match ${pattern}`);
    }
    return result;
  }

  complete(key: string, token: string, ttlMs: number): Promise<boolean> {
    return this.#boolean('complete', [key, token, ttlMs], () => this.#store.complete(key, token, ttlMs));
  }

  release(key: string, token: string): Promise<boolean> {
    return this.#boolean('release', [key, token], () => this.#store.release(key, token));
  }

  extend(key: string, token: string, lockMs: number): Promise<boolean> {
    const extend = this.#store.extend;
    if (typeof extend !== 'function') this.#run.fail('the store has no extend, yet this rule needs it (pass extend: false)');
    return this.#boolean('extend', [key, token, lockMs], () => extend.call(this.#store, key, token, lockMs));
  }

  async ping(): Promise<void> {
    const ping = this.#store.ping;
    if (typeof ping === 'function') await this.#call('ping', [], () => ping.call(this.#store));
  }

  /** The raw store, for rules that check rejections themselves. */
  get raw(): IdempotencyStore {
    return this.#store;
  }

  async #boolean(operation: string, args: unknown[], call: () => Promise<boolean>): Promise<boolean> {
    const result = await this.#call(operation, args, call);
    this.#run.check(typeof result === 'boolean', `${operation} answered ${describe(result)}: it must answer true or false`);
    return result;
  }

  async #call<T>(operation: string, args: unknown[], call: () => Promise<T>): Promise<T> {
    const outcome = await bounded(call, this.#run.settings.timeoutMs);
    const shown = `${operation}(${args.map(describe).join(', ')})`;
    if (outcome.kind === 'timeout') this.#run.fail(`${shown} did not settle within ${this.#run.settings.timeoutMs} ms: a store must answer or reject, never hang`);
    if (outcome.kind === 'rejected') this.#run.fail(`${shown} rejected: ${describeError(outcome.error)}`);
    return outcome.value;
  }
}

type Outcome<T> = { kind: 'resolved'; value: T } | { kind: 'rejected'; error: unknown } | { kind: 'timeout' };

/** `call()`'s outcome, or `timeout` after `ms`. A synchronous throw counts as a rejection. */
function bounded<T>(call: () => Promise<T>, ms: number): Promise<Outcome<T>> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ kind: 'timeout' }), ms);
    const done = (outcome: Outcome<T>) => {
      clearTimeout(timer);
      resolve(outcome);
    };
    let promise: Promise<T>;
    try {
      promise = Promise.resolve(call());
    } catch (error) {
      done({ kind: 'rejected', error });
      return;
    }
    promise.then(
      (value) => done({ kind: 'resolved', value }),
      (error: unknown) => done({ kind: 'rejected', error }),
    );
  });
}

function isClaimResult(value: unknown): value is ClaimResult {
  if (typeof value !== 'object' || value === null) return false;
  const status = (value as { status?: unknown }).status;
  return status === 'acquired' || status === 'processing' || status === 'completed';
}

function token(run: Run, result: ClaimResult, what: string): string {
  if (result.status !== 'acquired') run.fail(`${what}: expected acquired, got ${result.status}`);
  return result.token;
}

/** A value as a failure message shows it: strings quoted, numbers as written, objects as JSON. */
function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint' || value === undefined || value === null) return String(value);
  try {
    const json = JSON.stringify(value);
    return json.length > 120 ? `${json.slice(0, 117)}...` : json;
  } catch {
    return Object.prototype.toString.call(value);
  }
}

function describeError(error: unknown): string {
  if (error instanceof Error || (typeof error === 'object' && error !== null && 'message' in error)) {
    const { name, message } = error as { name?: unknown; message?: unknown };
    const text = `${typeof name === 'string' ? name : 'Error'}: ${String(message)}`;
    return text.length > 200 ? `${text.slice(0, 197)}...` : text;
  }
  return describe(error);
}

function errorName(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && typeof (error as { name?: unknown }).name === 'string' ? (error as { name: string }).name : undefined;
}

const LONG = 60_000;
const TTL = 600_000;

type Rule = readonly [StoreRule, string, (run: Run) => Promise<void>];

/** The contract, one rule at a time, in the order they run. */
const RULES: readonly Rule[] = [
  [
    'arguments',
    'bad keys, tokens and durations reject with TypeError or RangeError, and write nothing',
    async (run) => {
      const store = (await run.store()).raw;
      const key = run.key();
      const badKeys: unknown[] = ['', 42, undefined, null];
      const badTokens: unknown[] = ['', undefined, 42];
      const badDurations: unknown[] = [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '1000'];
      const calls: [string, unknown[], 'TypeError' | 'RangeError', () => Promise<unknown>][] = [];
      const as = <T>(value: unknown) => value as T;
      for (const bad of badKeys) {
        calls.push(['claim', [bad, 1000], 'TypeError', () => store.claim(as(bad), 1000)]);
        calls.push(['complete', [bad, 'token', 1000], 'TypeError', () => store.complete(as(bad), 'token', 1000)]);
        calls.push(['release', [bad, 'token'], 'TypeError', () => store.release(as(bad), 'token')]);
      }
      for (const bad of badTokens) {
        calls.push(['complete', [key, bad, 1000], 'TypeError', () => store.complete(key, as(bad), 1000)]);
        calls.push(['release', [key, bad], 'TypeError', () => store.release(key, as(bad))]);
      }
      for (const bad of badDurations) {
        calls.push(['claim', [key, bad], 'RangeError', () => store.claim(key, as(bad))]);
        calls.push(['complete', [key, 'token', bad], 'RangeError', () => store.complete(key, 'token', as(bad))]);
      }
      if (typeof store.extend === 'function' && run.settings.extend) {
        const extend = store.extend.bind(store);
        for (const bad of badKeys) calls.push(['extend', [bad, 'token', 1000], 'TypeError', () => extend(as(bad), 'token', 1000)]);
        for (const bad of badTokens) calls.push(['extend', [key, bad, 1000], 'TypeError', () => extend(key, as(bad), 1000)]);
        for (const bad of badDurations) calls.push(['extend', [key, 'token', bad], 'RangeError', () => extend(key, 'token', as(bad))]);
      }
      const wrong: string[] = [];
      for (const [operation, args, expected, call] of calls) {
        const outcome = await bounded(call, run.settings.timeoutMs);
        const shown = `${operation}(${args.map(describe).join(', ')})`;
        if (outcome.kind === 'resolved') wrong.push(`${shown} resolved with ${describe(outcome.value)} instead of rejecting with a ${expected}`);
        else if (outcome.kind === 'timeout') wrong.push(`${shown} did not settle within ${run.settings.timeoutMs} ms instead of rejecting with a ${expected}`);
        else if (errorName(outcome.error) !== expected) wrong.push(`${shown} rejected with ${describeError(outcome.error)}, not a ${expected}`);
      }
      if (wrong.length > 0) run.fail(`bad arguments are not refused: ${wrong.slice(0, 3).join('; ')}${wrong.length > 3 ? `; and ${wrong.length - 3} more` : ''}`);
      const after = await new Store(store, run).claim(key, LONG);
      run.check(after.status === 'acquired', `a rejected call with bad arguments wrote something: the key then answered ${after.status} instead of acquired`);
    },
  ],
  [
    'claim',
    'a claim acquires a free key with a token; the key is then processing (with the time left), and completed once completed',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const first = token(run, await store.claim(key, LONG), 'the first claim of a free key');
      const second = await store.claim(key, LONG);
      run.check(second.status === 'processing', `a claimed key answered ${second.status} to a second claim instead of processing`);
      const left = second.status === 'processing' ? second.retryAfterMs : undefined;
      if (left !== undefined) {
        run.check(
          typeof left === 'number' && left > 0 && left <= LONG && left > LONG / 2,
          `processing says the claim holds for ${describe(left)} ms more, but it was taken for ${LONG} ms just before`,
        );
      }
      run.check((await store.complete(key, first, TTL)) === true, 'complete by the owner of a live claim answered false');
      const third = await store.claim(key, LONG);
      run.check(third.status === 'completed', `a completed key answered ${third.status} to a claim instead of completed`);
      const again = await store.claim(key, LONG);
      run.check(again.status === 'completed', `a completed key answered completed once, then ${again.status}`);
    },
  ],
  [
    'release',
    'release frees the key for the next claim, which gets a new token; the old token then owns nothing',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const first = token(run, await store.claim(key, LONG), 'the first claim');
      run.check((await store.release(key, first)) === true, 'release by the owner of a live claim answered false');
      run.check((await store.release(key, first)) === false, 'a second release with the same token answered true: the key was already free');
      const second = token(run, await store.claim(key, LONG), 'a claim after release');
      run.check(second !== first, 'the claim after a release got the same token as the released claim: tokens must be fresh, or an old owner could act on the new claim');
      run.check((await store.release(key, first)) === false, "release with the released claim's token freed the next owner's claim: no token fencing on release");
      run.check((await store.complete(key, first, TTL)) === false, "complete with the released claim's token completed the next owner's claim: no token fencing on complete");
      const third = await store.claim(key, LONG);
      run.check(third.status === 'processing', `after an old token's release and complete, the new owner's key answered ${third.status} instead of processing`);
    },
  ],
  [
    'complete-idempotent',
    'completion is idempotent for its own token: completing again answers true; a completed key cannot be released or extended',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const owner = token(run, await store.claim(key, LONG), 'the claim');
      run.check((await store.complete(key, owner, TTL)) === true, 'complete by the owner of a live claim answered false');
      run.check(
        (await store.complete(key, owner, TTL)) === true,
        'completion is not idempotent: completing again with the same token answered false (a completion retried after a timeout would be reported as a takeover)',
      );
      const n = Math.min(run.settings.concurrency, 20);
      const together = await Promise.all(Array.from({ length: n }, () => store.complete(key, owner, TTL)));
      const refused = together.filter((ok) => !ok).length;
      run.check(refused === 0, `completion is not idempotent under concurrency: ${refused} of ${n} concurrent completions by the owner answered false`);
      run.check((await store.release(key, owner)) === false, 'release after completion answered true: a completed key must stay completed');
      if (run.settings.extend) run.check((await store.extend(key, owner, LONG)) === false, 'extend after completion answered true: a completed key holds no lock');
      const after = await store.claim(key, LONG);
      run.check(after.status === 'completed', `after the owner completed (and then tried release and extend), the key answered ${after.status} instead of completed`);
    },
  ],
  [
    'fencing',
    'token fencing: a token that does not own the claim can neither complete, release nor extend it',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const owner = token(run, await store.claim(key, LONG), 'the claim');
      const otherKey = run.key();
      const otherToken = token(run, await store.claim(otherKey, LONG), 'a claim of another key');
      const impostors = ['not-the-token', otherToken, 'lock', 'done', `lock:${owner}`, `done:${owner}`, `${owner} `, ` ${owner}`, owner.slice(0, -1)];
      if (owner.toUpperCase() !== owner) impostors.push(owner.toUpperCase());
      for (const impostor of impostors) {
        run.check((await store.complete(key, impostor, TTL)) === false, `no token fencing on complete: token ${describe(impostor)} completed a claim owned by ${describe(owner)}`);
        run.check((await store.release(key, impostor)) === false, `no token fencing on release: token ${describe(impostor)} released a claim owned by ${describe(owner)}`);
        if (run.settings.extend) {
          run.check((await store.extend(key, impostor, LONG)) === false, `no token fencing on extend: token ${describe(impostor)} extended a claim owned by ${describe(owner)}`);
        }
      }
      const held = await store.claim(key, LONG);
      run.check(held.status === 'processing', `after refused attempts by other tokens, the owner's key answered ${held.status} instead of processing`);
      run.check((await store.complete(key, owner, TTL)) === true, 'after refused attempts by other tokens, the owner could not complete its claim');
      run.check((await store.complete(otherKey, owner, TTL)) === false, "no token fencing on complete: one key's token completed another key's claim");
    },
  ],
  [
    'unknown-keys',
    'complete, release and extend of a key nobody claimed answer false and create nothing',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const stray = 'a-token-nobody-issued';
      run.check((await store.complete(key, stray, TTL)) === false, 'complete of a key nobody claimed answered true');
      run.check((await store.release(key, stray)) === false, 'release of a key nobody claimed answered true');
      if (run.settings.extend) run.check((await store.extend(key, stray, LONG)) === false, 'extend of a key nobody claimed answered true');
      const after = await store.claim(key, LONG);
      run.check(after.status === 'acquired', `complete, release or extend of an unknown key left something behind: the key then answered ${after.status} instead of acquired`);
    },
  ],
  [
    'independent-keys',
    'ids, key classes (signed and unsigned) and namespaces are independent',
    async (run) => {
      const store = await run.store();
      const id = `${run.rule}-shared-id`;
      const signed = run.key('s', id);
      const owner = token(run, await store.claim(signed, LONG), 'the signed claim');
      const unsigned = await store.claim(run.key('u', id), LONG);
      run.check(unsigned.status === 'acquired', `the unsigned key of an id answered ${unsigned.status} while only the signed key was claimed: the key classes are not independent`);
      const otherId = await store.claim(run.key('s', `${id}-other`), LONG);
      run.check(otherId.status === 'acquired', `another id answered ${otherId.status} while only one id was claimed: ids are not independent`);
      const otherNamespace = await store.claim(`${run.settings.namespace}x:s:${id}`, LONG);
      run.check(otherNamespace.status === 'acquired', `the same id in another namespace answered ${otherNamespace.status}: namespaces are not independent`);
      run.check((await store.complete(signed, owner, TTL)) === true, 'complete by the owner of the signed claim answered false');
      const unsignedAfter = await store.claim(run.key('u', id), LONG);
      run.check(unsignedAfter.status === 'processing', `completing the signed key changed the unsigned key of the same id: it answered ${unsignedAfter.status} instead of processing`);
      const signedAfter = await store.claim(signed, LONG);
      run.check(signedAfter.status === 'completed', `the completed signed key answered ${signedAfter.status}`);
    },
  ],
  [
    'fractional-durations',
    'fractional milliseconds are accepted',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const owner = token(run, await store.claim(key, 5000.5), 'a claim for 5000.5 ms');
      if (run.settings.extend) run.check((await store.extend(key, owner, 30_000.75)) === true, 'extend for 30000.75 ms answered false');
      run.check((await store.complete(key, owner, 60_000.25)) === true, 'complete for 60000.25 ms answered false');
      const after = await store.claim(key, LONG);
      run.check(after.status === 'completed', `after a completion for 60000.25 ms the key answered ${after.status} instead of completed`);
    },
  ],
  [
    'concurrent-claims',
    'concurrent claims of one free key: exactly one acquires, the others answer processing',
    async (run) => {
      const stores = await storesFor(run);
      const key = run.key();
      const n = run.settings.concurrency;
      const results = await Promise.all(Array.from({ length: n }, (_, i) => stores[i % stores.length]!.claim(key, LONG)));
      const acquired = results.filter((r) => r.status === 'acquired').length;
      const spread = stores.length > 1 ? ` (through ${stores.length} store instances)` : '';
      run.check(acquired <= 1, `claim is not atomic: ${acquired} of ${n} concurrent claims${spread} acquired one key`);
      run.check(acquired === 1, `none of ${n} concurrent claims${spread} of a free key acquired it`);
      const completed = results.filter((r) => r.status === 'completed').length;
      run.check(completed === 0, `${completed} of ${n} concurrent claims of a key nobody completed answered completed`);
    },
  ],
  [
    'expiry-takeover',
    'a lock expires after lockMs and the next claim takes it over; the stale owner can then neither complete, release nor extend',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const lockMs = run.settings.lockMs;
      const start = run.now();
      const stale = token(run, await store.claim(key, lockMs), 'the first claim');
      const owner = await run.claimOnceExpired(store, key, LONG, start + lockMs, `a lock of ${lockMs} ms was never taken over`);
      run.check(owner !== stale, "the claim that took over an expired lock got the stale owner's token");
      run.check((await store.complete(key, stale, TTL)) === false, "no token fencing after a takeover: the stale owner completed the new owner's claim");
      run.check((await store.release(key, stale)) === false, "no token fencing after a takeover: the stale owner released the new owner's claim");
      if (run.settings.extend) run.check((await store.extend(key, stale, LONG)) === false, "no token fencing after a takeover: the stale owner extended the new owner's claim");
      const held = await store.claim(key, LONG);
      run.check(held.status === 'processing', `after the stale owner's attempts the new owner's key answered ${held.status} instead of processing`);
      run.check((await store.complete(key, owner, TTL)) === true, 'the new owner could not complete the claim it took over');
      const done = await store.claim(key, LONG);
      run.check(done.status === 'completed', `the key the new owner completed answered ${done.status}`);
    },
  ],
  [
    'expiry-stale-owner',
    'once its lock expired, an owner can neither complete, release nor extend, even when nobody took over',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const lockMs = run.settings.lockMs;
      const start = run.now();
      const stale = token(run, await store.claim(key, lockMs), 'the claim');
      // No claim may be used to wait here (it would take over): wait twice the lock instead.
      await run.pass(start + 2 * lockMs + 50 - run.now());
      run.check((await store.complete(key, stale, TTL)) === false, `complete after the lock of ${lockMs} ms expired answered true: an expired claim is no longer the owner's`);
      run.check((await store.release(key, stale)) === false, `release after the lock of ${lockMs} ms expired answered true`);
      if (run.settings.extend) run.check((await store.extend(key, stale, LONG)) === false, `extend after the lock of ${lockMs} ms expired answered true: an expired lock must not come back to life`);
      const after = await store.claim(key, LONG);
      run.check(after.status === 'acquired', `a key whose lock expired answered ${after.status} instead of acquired`);
    },
  ],
  [
    'concurrent-takeover',
    'concurrent claims of one expired key: exactly one takes it over',
    async (run) => {
      const stores = await storesFor(run);
      const key = run.key();
      const lockMs = run.settings.lockMs;
      const start = run.now();
      token(run, await stores[0]!.claim(key, lockMs), 'the first claim');
      await run.pass(start + lockMs + 1 - run.now());
      const n = run.settings.concurrency;
      const deadline = Date.now() + run.settings.graceMs;
      for (;;) {
        const results = await Promise.all(Array.from({ length: n }, (_, i) => stores[i % stores.length]!.claim(key, LONG)));
        const acquired = results.filter((r) => r.status === 'acquired').length;
        run.check(acquired <= 1, `takeover is not atomic: ${acquired} of ${n} concurrent claims took over one expired key`);
        if (acquired === 1) return;
        run.check(!run.settings.manual && Date.now() < deadline, `none of ${n} concurrent claims took over a key whose lock of ${lockMs} ms had expired`);
        await sleep(20);
      }
    },
  ],
  [
    'ttl',
    'a completed id is forgotten after ttlMs',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      const ttlMs = run.settings.lockMs;
      const owner = token(run, await store.claim(key, LONG), 'the claim');
      const start = run.now();
      run.check((await store.complete(key, owner, ttlMs)) === true, 'complete by the owner answered false');
      const done = await store.claim(key, LONG);
      if (run.settings.manual || run.now() - start < ttlMs) run.check(done.status === 'completed', `a key completed for ${ttlMs} ms answered ${done.status} at once`);
      // No claim may be used to wait here (it would take the key): wait twice the TTL instead.
      // The owner's token then owns nothing, completed or not, even while the backend still
      // holds the expired record (a row not yet cleaned up).
      await run.pass(start + 2 * ttlMs + 50 - run.now());
      const late = await store.complete(key, owner, ttlMs);
      await run.claimOnceExpired(store, key, LONG, start + ttlMs, `a completion of ${ttlMs} ms was never forgotten`);
      run.check(late === false, `complete by the owner answered true after its completion of ${ttlMs} ms was forgotten: a forgotten id is no longer the owner's`);
    },
  ],
  [
    'extend',
    'extend keeps a claim alive past its first lock, and answers false once the lock is gone',
    async (run) => {
      const store = await run.store();
      const key = run.key();
      // Long enough that the extend surely lands inside it on a loaded machine.
      const firstLock = run.settings.lockMs * 5;
      const start = run.now();
      const owner = token(run, await store.claim(key, firstLock), 'the claim');
      run.check((await store.extend(key, owner, LONG)) === true, `extend by the owner of a live claim (lock ${firstLock} ms) answered false`);
      await run.pass(start + firstLock + run.settings.lockMs - run.now());
      const held = await store.claim(key, LONG);
      run.check(held.status === 'processing', `extend does not keep the claim alive: past its first lock of ${firstLock} ms the key answered ${held.status} instead of processing`);
      if (held.status === 'processing' && held.retryAfterMs !== undefined) {
        run.check(held.retryAfterMs > firstLock, `after extend for ${LONG} ms, processing says the claim holds for only ${held.retryAfterMs} ms more`);
      }
      run.check((await store.complete(key, owner, TTL)) === true, 'the owner could not complete its extended claim');

      const expiring = run.key();
      const lockMs = run.settings.lockMs;
      const second = run.now();
      const stale = token(run, await store.claim(expiring, lockMs), 'a second claim');
      await run.pass(second + 2 * lockMs + 50 - run.now());
      run.check((await store.extend(expiring, stale, LONG)) === false, 'extend of an expired lock answered true: a lost lease must not be renewed');
      const after = await store.claim(expiring, LONG);
      run.check(after.status === 'acquired', `after a refused extend of an expired lock the key answered ${after.status} instead of acquired`);
    },
  ],
  [
    'shared',
    'stores on one backend share claims: a claim through one is seen, and can be completed, through another',
    async (run) => {
      const a = await run.store();
      const b = await run.store();
      const key = run.key();
      const owner = token(run, await a.claim(key, LONG), 'a claim through the first store');
      const seen = await b.claim(key, LONG);
      run.check(seen.status === 'processing', `a claim through one store was not seen through another on the same backend (it answered ${seen.status})`);
      run.check((await b.complete(key, owner, TTL)) === true, "the second store could not complete the first store's claim with its token");
      const done = await a.claim(key, LONG);
      run.check(done.status === 'completed', `a completion through the second store was not seen through the first (it answered ${done.status})`);
    },
  ],
  [
    'ping',
    'ping resolves while the backend answers',
    async (run) => {
      await (await run.store()).ping();
    },
  ],
  [
    'unreachable',
    'every operation on an unreachable backend rejects, within a bound: never resolves, never hangs',
    async (run) => {
      const make = run.settings.unreachable!;
      const store = await make();
      const key = run.key();
      const calls: [string, () => Promise<unknown>][] = [
        ['claim', () => store.claim(key, LONG)],
        ['complete', () => store.complete(key, 'a-token', TTL)],
        ['release', () => store.release(key, 'a-token')],
      ];
      const { extend, ping } = store;
      if (typeof extend === 'function' && run.settings.extend) calls.push(['extend', () => extend.call(store, key, 'a-token', LONG)]);
      if (typeof ping === 'function') calls.push(['ping', () => ping.call(store)]);
      const limit = run.settings.unreachableTimeoutMs;
      const outcomes = await Promise.all(calls.map(async ([name, call]) => [name, await bounded(call, limit)] as const));
      const wrong: string[] = [];
      for (const [name, outcome] of outcomes) {
        if (outcome.kind === 'timeout') wrong.push(`${name} on an unreachable backend did not settle within ${limit} ms: it hangs instead of rejecting`);
        else if (outcome.kind === 'resolved') wrong.push(`${name} on an unreachable backend resolved with ${describe(outcome.value)} instead of rejecting (a store must fail closed)`);
      }
      if (wrong.length > 0) run.fail(wrong.join('; '));
    },
  ],
];

/** The stores a concurrency rule spreads its claims over: several when they share a backend. */
async function storesFor(run: Run): Promise<Store[]> {
  const count = run.settings.shared ? Math.min(5, run.settings.concurrency) : 1;
  const stores: Store[] = [];
  for (let i = 0; i < count; i++) stores.push(await run.store());
  return stores;
}

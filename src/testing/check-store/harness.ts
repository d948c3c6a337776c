/**
 * What every rule runs on: the settled options, one rule's run (fresh keys, the clock), and the
 * store under test with each operation bounded in time and described in words when it fails.
 */

import type { ClaimResult, IdempotencyStore } from '../../stores/types.ts';
import type { CheckStoreContext, StoreFactory, StoreRule } from './types.ts';

export interface Settings {
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

export function contextOf(settings: Settings): CheckStoreContext {
  return { now: settings.manual ? () => settings.clock.time : () => Date.now() };
}

/** A broken rule: its message is the report's line. */
export class RuleFailure extends Error {}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One rule's run: fresh keys, bounded operations, and the clock. */
export class Run {
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

  /** What the rule advises without failing: the report shows it on the passed rule. */
  readonly recommendations: string[] = [];

  recommend(message: string): void {
    this.recommendations.push(message);
  }

  fail(message: string): never {
    throw new RuleFailure(message);
  }

  /** Runs one store operation within the timeout; a hang or a rejection fails the rule, described. */
  async call<T>(operation: string, args: unknown[], call: () => Promise<T>): Promise<T> {
    const outcome = await bounded(call, this.settings.timeoutMs);
    const shown = `${operation}(${args.map(describe).join(', ')})`;
    if (outcome.kind === 'timeout') this.fail(`${shown} did not settle within ${this.settings.timeoutMs} ms: a store must answer or reject, never hang`);
    if (outcome.kind === 'rejected') this.fail(`${shown} rejected: ${describeError(outcome.error)}`);
    return outcome.value;
  }

  /** {@link Run.call} for an operation that must answer `true` or `false`. */
  async boolean(operation: string, args: unknown[], call: () => Promise<boolean>): Promise<boolean> {
    const result = await this.call(operation, args, call);
    this.check(typeof result === 'boolean', `${operation} answered ${describe(result)}: it must answer true or false`);
    return result;
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
export class Store {
  readonly #store: IdempotencyStore;
  readonly #run: Run;
  constructor(store: IdempotencyStore, run: Run) {
    this.#store = store;
    this.#run = run;
  }

  async claim(key: string, lockMs: number): Promise<ClaimResult> {
    const result = await this.#run.call('claim', [key, lockMs], () => this.#store.claim(key, lockMs));
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
    return this.#run.boolean('complete', [key, token, ttlMs], () => this.#store.complete(key, token, ttlMs));
  }

  release(key: string, token: string): Promise<boolean> {
    return this.#run.boolean('release', [key, token], () => this.#store.release(key, token));
  }

  extend(key: string, token: string, lockMs: number): Promise<boolean> {
    const extend = this.#store.extend;
    if (typeof extend !== 'function') this.#run.fail('the store has no extend, yet this rule needs it (pass extend: false)');
    return this.#run.boolean('extend', [key, token, lockMs], () => extend.call(this.#store, key, token, lockMs));
  }

  async ping(): Promise<void> {
    const ping = this.#store.ping;
    if (typeof ping === 'function') await this.#run.call('ping', [], () => ping.call(this.#store));
  }

  /** The raw store, for rules that check rejections themselves. */
  get raw(): IdempotencyStore {
    return this.#store;
  }
}

export type Outcome<T> = { kind: 'resolved'; value: T } | { kind: 'rejected'; error: unknown } | { kind: 'timeout' };

/** `call()`'s outcome, or `timeout` after `ms`. A synchronous throw counts as a rejection. */
export function bounded<T>(call: () => Promise<T>, ms: number): Promise<Outcome<T>> {
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

export function token(run: Run, result: ClaimResult, what: string): string {
  if (result.status !== 'acquired') run.fail(`${what}: expected acquired, got ${result.status}`);
  return result.token;
}

/** A value as a failure message shows it: strings quoted, numbers as written, objects as JSON. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint' || value === undefined || value === null) return String(value);
  try {
    const json = JSON.stringify(value);
    return json.length > 120 ? `${json.slice(0, 117)}...` : json;
  } catch {
    return Object.prototype.toString.call(value);
  }
}

export function describeError(error: unknown): string {
  if (error instanceof Error || (typeof error === 'object' && error !== null && 'message' in error)) {
    const { name, message } = error as { name?: unknown; message?: unknown };
    const text = `${typeof name === 'string' ? name : 'Error'}: ${String(message)}`;
    return text.length > 200 ? `${text.slice(0, 197)}...` : text;
  }
  return describe(error);
}

/** An `Error`, or an object shaped like one (another realm's, a store's own error class). */
export function isError(value: unknown): boolean {
  if (value instanceof Error) return true;
  if (typeof value !== 'object' || value === null) return false;
  const { name, message } = value as { name?: unknown; message?: unknown };
  return typeof name === 'string' && typeof message === 'string';
}

export function errorName(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && typeof (error as { name?: unknown }).name === 'string' ? (error as { name: string }).name : undefined;
}

export const LONG = 60_000;
export const TTL = 600_000;

/** The stores a concurrency rule spreads its claims over: several when they share a backend. */
export async function storesFor(run: Run): Promise<Store[]> {
  const count = run.settings.shared ? Math.min(5, run.settings.concurrency) : 1;
  const stores: Store[] = [];
  for (let i = 0; i < count; i++) stores.push(await run.store());
  return stores;
}

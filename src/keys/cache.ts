/**
 * The cache and load machinery of tenant keys (issue 25): known tenants and unknown names in LRU
 * caches of their own, one load in flight per tenant (single flight) under a concurrency limit,
 * each load bounded by a timeout, and what a load answered decoded once. Which verifier serves a
 * request is the business of `keys.ts`, above.
 */

import { LRUCache } from 'lru-cache';
import { rejection, WebhookError } from '../errors.ts';
import { decodeSecretList, type KeyMaterial } from '../secrets.ts';
import type { Verifier } from '../verify.ts';
import { TENANT_KEYS_DEFAULTS, type TenantKeysLoaded, type TenantKeysOptions, type TenantKeysUsage } from './types.ts';

/** A tenant's keys, decoded once per load, and the verifiers built from them. */
export interface Entry {
  readonly keys: readonly KeyMaterial[];
  readonly loadedAt: number;
  /** Before this time a failed reload is not tried again: the entry serves (within the grace). */
  retryAt: number;
  /** The verifier for the first verifier settings that asked (nearly always the only ones). */
  profile: Verifier | undefined;
  verifier: Verifier | undefined;
  others: Map<Verifier, Verifier> | undefined;
}

/** A tenant name as it may appear in a message: quoted and escaped, cut at 40 characters. */
export function shown(name: string): string {
  return JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}…` : name);
}

function checkCount(value: number | undefined, name: string, fallback: number, { zero = false, whole = false } = {}): number {
  if (value === undefined) return fallback;
  const ok = typeof value === 'number' && Number.isFinite(value) && (zero ? value >= 0 : value > 0) && (!whole || Number.isSafeInteger(value));
  if (!ok) {
    const what = whole ? 'whole number' : 'finite number';
    throw new RangeError(`tenantKeys ${name} must be a ${zero ? 'non-negative' : 'positive'} ${what} (default ${fallback})`);
  }
  return value;
}

/** What the caller is answered for keys that do not decode: no tenant, no key, no decoder detail. */
const INVALID_TENANT_KEYS_MESSAGE = "the receiving server's keys for this endpoint are misconfigured; the delivery itself was not judged";

/**
 * The `KEYS_UNAVAILABLE` refusal (503), carrying its own `Retry-After`: the pause before a failed
 * tenant's keys are loaded again. Internal.
 */
export function keysUnavailable(message: string, cause?: unknown): WebhookError {
  return rejection('KEYS_UNAVAILABLE', message, { cause, retryAfterSeconds: TENANT_KEYS_DEFAULTS.retryAfterSeconds });
}

/**
 * The caches and loads of one `TenantKeys`. Its options' functions are checked by the caller
 * (`load` a function, `now` a function or undefined); the numbers are checked here.
 */
export class TenantKeyCache {
  readonly #load: TenantKeysOptions['load'];
  readonly now: () => number;
  readonly #ttlMs: number;
  readonly #graceMs: number;
  readonly #timeoutMs: number;
  readonly maxLoads: number;
  /** Known tenants. An entry past its TTL stays (get() misses it, peek() finds it) for the grace. */
  readonly known: LRUCache<string, Entry>;
  readonly unknown: LRUCache<string, true>;
  /**
   * Loads in flight, one per tenant: every request for a tenant being loaded waits on the same
   * promise (single flight), and the map's size is what the concurrency limit counts. Not
   * lru-cache's `fetch`: it keeps an in-flight load in the cache itself, so the first load of
   * each unknown name would evict a known tenant, which is what the separate bounds prevent.
   */
  readonly loads = new Map<string, Promise<Entry | undefined>>();

  constructor(options: TenantKeysOptions) {
    const { load, now } = options;
    const d = TENANT_KEYS_DEFAULTS;
    this.#ttlMs = checkCount(options.ttlSeconds, 'ttlSeconds', d.ttlSeconds) * 1000;
    const unknownTtlMs = checkCount(options.unknownTtlSeconds, 'unknownTtlSeconds', d.unknownTtlSeconds) * 1000;
    this.#graceMs = checkCount(options.graceSeconds, 'graceSeconds', d.graceSeconds, { zero: true }) * 1000;
    this.#timeoutMs = checkCount(options.loadTimeoutMs, 'loadTimeoutMs', d.loadTimeoutMs);
    this.maxLoads = checkCount(options.maxConcurrentLoads, 'maxConcurrentLoads', d.maxConcurrentLoads, { whole: true });
    const maxTenants = checkCount(options.maxTenants, 'maxTenants', d.maxTenants, { whole: true });
    const maxUnknown = checkCount(options.maxUnknownTenants, 'maxUnknownTenants', d.maxUnknownTenants, { whole: true });
    this.#load = load;
    this.now = now ?? Date.now;
    // An injected clock is read on every check (lru-cache otherwise reuses a reading for 1 ms).
    const clock = now === undefined ? {} : { perf: { now }, ttlResolution: 0 };
    this.known = new LRUCache<string, Entry>({ max: maxTenants, ttl: this.#ttlMs, noDeleteOnStaleGet: true, ...clock });
    this.unknown = new LRUCache<string, true>({ max: maxUnknown, ttl: unknownTtlMs, ...clock });
  }

  forget(tenant: string): void {
    this.known.delete(tenant);
    this.unknown.delete(tenant);
    // A load in flight may return the keys from before the change: its result is not cached.
    this.loads.delete(tenant);
  }

  usage(): TenantKeysUsage {
    return { tenants: this.known.size, unknownTenants: this.unknown.size, loading: this.loads.size };
  }

  /** The tenant's earlier keys while they may still serve (past their TTL, within the grace). */
  inGrace(name: string): Entry | undefined {
    const entry = this.known.peek(name, { allowStale: true });
    if (entry === undefined) return undefined;
    if (entry.loadedAt + this.#ttlMs + this.#graceMs >= this.now()) return entry;
    this.known.delete(name);
    return undefined;
  }

  startLoad(name: string): Promise<Entry | undefined> {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answered = new Promise<TenantKeysLoaded>((resolve, reject) => {
      timer = setTimeout(() => {
        const error = keysUnavailable(`the key loader did not answer for tenant ${shown(name)} within ${this.#timeoutMs} ms (loadTimeoutMs)`);
        controller.abort(error);
        reject(error);
      }, this.#timeoutMs);
      // Never keep a process alive just for a load's timeout (Node and Bun timers have unref).
      (timer as { unref?: () => void }).unref?.();
      try {
        Promise.resolve(this.#load(name, { signal: controller.signal })).then(resolve, reject);
      } catch (error) {
        reject(error);
      }
    });
    const loading: Promise<Entry | undefined> = answered.then(
      (loaded) => {
        clearTimeout(timer);
        return this.#loaded(name, loaded, this.#finish(name, loading));
      },
      (error: unknown) => {
        clearTimeout(timer);
        const current = this.#finish(name, loading);
        const failed =
          error instanceof WebhookError && error.code === 'KEYS_UNAVAILABLE'
            ? error
            : keysUnavailable(`the key loader failed for tenant ${shown(name)}; retry later`, error);
        if (current) {
          const stale = this.known.peek(name, { allowStale: true });
          if (stale !== undefined) stale.retryAt = this.now() + TENANT_KEYS_DEFAULTS.retryAfterSeconds * 1000;
        }
        throw failed;
      },
    );
    this.loads.set(name, loading);
    return loading;
  }

  /** Ends a load's slot; whether it is still the tenant's load (not forgotten meanwhile). */
  #finish(name: string, loading: Promise<Entry | undefined>): boolean {
    if (this.loads.get(name) !== loading) return false;
    this.loads.delete(name);
    return true;
  }

  /** What a load answered, decoded; cached when `current`. A definite answer replaces earlier keys. */
  #loaded(name: string, loaded: TenantKeysLoaded, current: boolean): Entry | undefined {
    if (loaded === undefined || loaded === null) {
      if (current) {
        this.known.delete(name);
        this.unknown.set(name, true);
      }
      return undefined;
    }
    const secrets = typeof loaded === 'object' && !Array.isArray(loaded) && !(loaded instanceof Uint8Array) && 'secrets' in loaded ? loaded.secrets : loaded;
    let keys: KeyMaterial[];
    try {
      keys = decodeSecretList(secrets, 'verify', 'keys');
    } catch (error) {
      if (current) this.known.delete(name);
      // The decoder's message names the key by its position and keyId, never its value, but it may
      // still describe the key (its length, its prefix): for the operator's log (the hint), never
      // for the answer, whose message says only that the fault is the server's.
      throw new WebhookError('INVALID_TENANT_KEYS', INVALID_TENANT_KEYS_MESSAGE, {
        cause: error,
        hint: `the keys loaded for tenant ${shown(name)} do not decode: ${(error as Error).message}`,
      });
    }
    const entry: Entry = { keys, loadedAt: this.now(), retryAt: 0, profile: undefined, verifier: undefined, others: undefined };
    if (current) {
      this.known.set(name, entry);
      this.unknown.delete(name);
    }
    return entry;
  }
}

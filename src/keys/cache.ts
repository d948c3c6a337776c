/**
 * The cache and load machinery of tenant keys: known tenants and unknown names in LRU caches of
 * their own, one load in flight per tenant (single flight) under a concurrency limit of which a
 * share is kept for known tenants, each load bounded by a timeout, loader calls that outlive their
 * timeout counted apart, and what a load answered decoded once. Which verifier serves a request is
 * the business of `keys.ts`, above.
 */

import { LRUCache } from 'lru-cache';
import { rejection, WebhookError } from '../errors.ts';
import { decodeSecretList, type KeyMaterial } from '../secrets.ts';
import type { Verifier } from '../verify.ts';
import { TENANT_KEYS_DEFAULTS, type TenantKeysLoaded, type TenantKeysOptions, type TenantKeysUsage } from './types.ts';

/**
 * A tenant's keys, decoded once per load, and the verifiers built from them. A known tenant whose
 * keys may no longer serve (forgotten, past the grace, or reloaded into keys that do not decode)
 * keeps an entry without keys: it stays known, so its reloads keep the share of loads kept for
 * known tenants.
 */
export interface Entry {
  readonly keys: readonly KeyMaterial[];
  /** When the keys were loaded; `-Infinity` for an entry without keys (never fresh, never in grace). */
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

/** An entry that keeps a tenant known without keys to serve. */
function keyless(): Entry {
  return { keys: [], loadedAt: -Infinity, retryAt: 0, profile: undefined, verifier: undefined, others: undefined };
}

/**
 * How many of `maxConcurrentLoads` slots a tenant that was never loaded may not take: a quarter,
 * at least one from two slots up (with one slot nothing can be kept, or no new tenant could load).
 */
function keptForKnown(maxLoads: number): number {
  return maxLoads < 2 ? 0 : Math.max(1, Math.floor(maxLoads / 4));
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
function keysUnavailable(message: string, cause?: unknown, hint?: string): WebhookError {
  return rejection('KEYS_UNAVAILABLE', message, { cause, hint, retryAfterSeconds: TENANT_KEYS_DEFAULTS.retryAfterSeconds });
}

/** Where one load stands: holding a slot, or timed out with its loader call still running. */
interface LoadState {
  /** `slot`: counted by maxConcurrentLoads; `set-aside`: timed out, counted by maxAbandonedLoads. */
  place: 'slot' | 'set-aside';
  /** Its timeout passed and its requests were answered; only its loader call may still run. */
  timedOut: boolean;
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
  readonly #maxLoads: number;
  readonly #maxAbandoned: number;
  /** Slots a tenant never loaded may not take (`keptForKnown`). */
  readonly #kept: number;
  /**
   * Known tenants: every tenant a load found, with its last good keys, least recently used evicted
   * past `maxTenants`. Not lru-cache's TTL: a tenant stays known when its keys expire, and whether
   * they are fresh, in grace or past it is read from `loadedAt` (`fresh`, `inGrace`).
   */
  readonly known: LRUCache<string, Entry>;
  readonly unknown: LRUCache<string, true>;
  /**
   * Loads in flight, one per tenant: every request for a tenant being loaded waits on the same
   * promise (single flight). Not lru-cache's `fetch`: it keeps an in-flight load in the cache
   * itself, so the first load of each unknown name would evict a known tenant, which is what the
   * separate bounds prevent. The limits count `#slots` and `#setAside`, not this map: a forgotten
   * tenant's load leaves the map but its loader call still runs.
   */
  readonly loads = new Map<string, Promise<Entry | undefined>>();
  /** Loads holding a slot (maxConcurrentLoads): waiting for the loader, or timed out with no room set aside. */
  #slots = 0;
  /** Loads that timed out whose loader call still runs, without a slot (maxAbandonedLoads). */
  #setAside = 0;
  /** Timed-out loads still holding a slot, first timed out first: each moves aside when there is room. */
  readonly #waitingAside: LoadState[] = [];

  constructor(options: TenantKeysOptions) {
    const { load, now } = options;
    const d = TENANT_KEYS_DEFAULTS;
    this.#ttlMs = checkCount(options.ttlSeconds, 'ttlSeconds', d.ttlSeconds) * 1000;
    const unknownTtlMs = checkCount(options.unknownTtlSeconds, 'unknownTtlSeconds', d.unknownTtlSeconds) * 1000;
    this.#graceMs = checkCount(options.graceSeconds, 'graceSeconds', d.graceSeconds, { zero: true }) * 1000;
    this.#timeoutMs = checkCount(options.loadTimeoutMs, 'loadTimeoutMs', d.loadTimeoutMs);
    this.#maxLoads = checkCount(options.maxConcurrentLoads, 'maxConcurrentLoads', d.maxConcurrentLoads, { whole: true });
    this.#maxAbandoned = checkCount(options.maxAbandonedLoads, 'maxAbandonedLoads', d.maxAbandonedLoads, { zero: true, whole: true });
    this.#kept = keptForKnown(this.#maxLoads);
    const maxTenants = checkCount(options.maxTenants, 'maxTenants', d.maxTenants, { whole: true });
    const maxUnknown = checkCount(options.maxUnknownTenants, 'maxUnknownTenants', d.maxUnknownTenants, { whole: true });
    this.#load = load;
    this.now = now ?? Date.now;
    this.known = new LRUCache<string, Entry>({ max: maxTenants });
    // An injected clock is read on every check (lru-cache otherwise reuses a reading for 1 ms).
    const clock = now === undefined ? {} : { perf: { now }, ttlResolution: 0 };
    this.unknown = new LRUCache<string, true>({ max: maxUnknown, ttl: unknownTtlMs, ...clock });
  }

  forget(tenant: string): void {
    // Still a tenant, so still known; but its keys no longer serve, not even while a reload fails.
    if (this.known.has(tenant)) this.known.set(tenant, keyless());
    this.unknown.delete(tenant);
    // A load in flight may return the keys from before the change: its result is not cached.
    this.loads.delete(tenant);
  }

  usage(): TenantKeysUsage {
    return { tenants: this.known.size, unknownTenants: this.unknown.size, loading: this.#slots, abandoned: this.#setAside };
  }

  /** The tenant's keys while they are fresh (loaded at most `ttlSeconds` ago); marks it recently used. */
  fresh(name: string): Entry | undefined {
    const entry = this.known.get(name);
    return entry !== undefined && this.now() - entry.loadedAt <= this.#ttlMs ? entry : undefined;
  }

  /** The tenant's last good keys while they may still serve (past their TTL, within the grace). */
  inGrace(name: string): Entry | undefined {
    const entry = this.known.peek(name);
    if (entry === undefined) return undefined;
    if (entry.loadedAt + this.#ttlMs + this.#graceMs >= this.now()) return entry;
    // Past the grace: the keys are dropped (they will not serve again), the tenant stays known.
    if (entry.keys.length > 0) this.known.set(name, keyless());
    return undefined;
  }

  /**
   * Why no load for `name` may start now (a `KEYS_UNAVAILABLE` to answer), or undefined when one
   * may. A tenant never loaded may not take the slots kept for known tenants: a flood of made-up
   * names cannot stop a known tenant's keys from being refreshed.
   */
  refuse(name: string): WebhookError | undefined {
    const kept = this.known.has(name) ? 0 : this.#kept;
    if (this.#slots < this.#maxLoads - kept) return undefined;
    const keptNote = this.#kept > 0 ? `, the last ${this.#kept} kept for tenants loaded before` : '';
    const stuck = this.#waitingAside.length;
    const hint =
      stuck === 0
        ? undefined
        : `${stuck} of the loads holding a slot timed out but their loader call still runs, and ${this.#setAside} more are set aside (maxAbandonedLoads ${this.#maxAbandoned}): ` +
          'the loader does not stop when its signal aborts; pass the signal on to the database or HTTP client, or give that client a timeout shorter than loadTimeoutMs';
    return keysUnavailable(
      `tenant ${shown(name)} was not loaded: ${this.#slots} of ${this.#maxLoads} key load slots are taken (maxConcurrentLoads${keptNote}); retry later`,
      undefined,
      hint,
    );
  }

  startLoad(name: string): Promise<Entry | undefined> {
    const controller = new AbortController();
    const state: LoadState = { place: 'slot', timedOut: false };
    this.#slots++;
    let call: Promise<TenantKeysLoaded>;
    try {
      call = Promise.resolve(this.#load(name, { signal: controller.signal }));
    } catch (error) {
      call = Promise.reject(error);
    }
    const answered = new Promise<TenantKeysLoaded>((resolve, reject) => {
      const timer = setTimeout(() => {
        state.timedOut = true;
        // Its requests are answered now, but its loader call may run on (a loader deaf to the
        // signal): set aside while there is room, else it keeps its slot until the call settles,
        // so the loader never runs more than maxConcurrentLoads + maxAbandonedLoads calls.
        if (this.#setAside < this.#maxAbandoned) this.#moveAside(state);
        else this.#waitingAside.push(state);
        const error = keysUnavailable(`the key loader did not answer for tenant ${shown(name)} within ${this.#timeoutMs} ms (loadTimeoutMs)`);
        controller.abort(error);
        reject(error);
      }, this.#timeoutMs);
      // Never keep a process alive just for a load's timeout (Node and Bun timers have unref).
      (timer as { unref?: () => void }).unref?.();
      const settled = (): boolean => {
        if (!state.timedOut) clearTimeout(timer);
        this.#release(state);
        return !state.timedOut;
      };
      call.then(
        (loaded) => {
          if (settled()) resolve(loaded);
        },
        (error: unknown) => {
          if (settled()) reject(error);
        },
      );
    });
    const loading: Promise<Entry | undefined> = answered.then(
      (loaded) => this.#loaded(name, loaded, this.#finish(name, loading)),
      (error: unknown) => {
        const current = this.#finish(name, loading);
        const failed =
          error instanceof WebhookError && error.code === 'KEYS_UNAVAILABLE'
            ? error
            : keysUnavailable(`the key loader failed for tenant ${shown(name)}; retry later`, error);
        if (current) {
          const stale = this.known.peek(name);
          if (stale !== undefined) stale.retryAt = this.now() + TENANT_KEYS_DEFAULTS.retryAfterSeconds * 1000;
        }
        throw failed;
      },
    );
    this.loads.set(name, loading);
    return loading;
  }

  #moveAside(state: LoadState): void {
    state.place = 'set-aside';
    this.#slots--;
    this.#setAside++;
  }

  /** A loader call settled: its slot or its place aside is free (a place aside goes to the next in line). */
  #release(state: LoadState): void {
    if (state.place === 'slot') {
      this.#slots--;
      if (state.timedOut) this.#waitingAside.splice(this.#waitingAside.indexOf(state), 1);
      return;
    }
    this.#setAside--;
    const next = this.#waitingAside.shift();
    if (next !== undefined) this.#moveAside(next);
  }

  /** Ends a load's place in the map; whether it is still the tenant's load (not forgotten meanwhile). */
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
      // The earlier keys no longer serve; the tenant, which the loader knows, stays known.
      if (current && this.known.has(name)) this.known.set(name, keyless());
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

/**
 * Keys per tenant, looked up at request time (issue 25): one endpoint for many senders, each with
 * its own secrets, rotated on its own schedule. The tenant is named by the request (a route
 * parameter, the path, the host, a header; never the unverified body), its keys come from the
 * app's loader (a database, a secrets manager) and are decoded once and cached with `lru-cache`.
 *
 * Three bounds keep a flood of made-up tenant names cheap: known tenants and unknown ones live in
 * caches of their own (so unknown names cannot push known tenants out), a name longer than
 * {@link TENANT_KEYS_DEFAULTS.maxTenantLength} is never loaded, and loads run under a concurrency
 * limit past which a request is refused at once (503 `KEYS_UNAVAILABLE`) rather than queued.
 */

import { LRUCache } from 'lru-cache';
import { defaultBackend, type CryptoBackend } from './crypto.ts';
import { rejection, WebhookError } from './errors.ts';
import { headerValues } from './headers.ts';
import { pathAsSent, withTenant } from './rejection.ts';
import { decodeSecretList, type KeyMaterial, type SecretInput } from './secrets.ts';
import {
  createTenantVerifier,
  rejectLater,
  verifierSettings,
  type VerifiedWebhook,
  type Verifier,
  type VerifierOptions,
  type VerifierSettings,
  type WebhookInput,
} from './verify.ts';

/**
 * The defaults of {@link tenantKeys}, each overridable by the option of the same name (except
 * `maxTenantLength` and `retryAfterSeconds`, which are fixed).
 *
 * - `ttlSeconds` 60: how long loaded keys are used before they are loaded again, so how long a
 *   rotation or a revoked key takes to reach a process that was not told with `forget`.
 * - `unknownTtlSeconds` 10: how long "no such tenant" is remembered, so how long a newly added
 *   tenant stays unknown to a process that looked it up just before.
 * - `graceSeconds` 300: how long past their TTL earlier keys keep serving while loads fail
 *   (throw or time out).
 * - `loadTimeoutMs` 3 000: how long one load may take before it counts as failed (its `signal`
 *   aborts then).
 * - `maxConcurrentLoads` 16: loads in flight at once, all tenants together; a request that would
 *   start one more is refused with 503 `KEYS_UNAVAILABLE` without loading.
 * - `maxTenants` 10 000: known tenants cached (least recently used evicted first).
 * - `maxUnknownTenants` 1 000: unknown tenant names cached, in a bound of their own.
 * - `maxTenantLength` 256: a longer tenant name is `UNKNOWN_TENANT` without a load.
 * - `retryAfterSeconds` 5: the `Retry-After` of a `KEYS_UNAVAILABLE` answer, and how long a
 *   tenant whose reload failed is served its earlier keys before the next load is tried.
 *
 * @example
 * ```ts
 * import { tenantKeys, TENANT_KEYS_DEFAULTS } from 'webhook-receiver';
 * const keys = tenantKeys({
 *   tenant: (request) => request.params.tenant,
 *   load: async (tenant) => db.keysOf(tenant),
 *   ttlSeconds: 5 * TENANT_KEYS_DEFAULTS.ttlSeconds,
 * });
 * ```
 */
export const TENANT_KEYS_DEFAULTS = Object.freeze({
  ttlSeconds: 60,
  unknownTtlSeconds: 10,
  graceSeconds: 300,
  loadTimeoutMs: 3_000,
  maxConcurrentLoads: 16,
  maxTenants: 10_000,
  maxUnknownTenants: 1_000,
  maxTenantLength: 256,
  retryAfterSeconds: 5,
});

/**
 * What a `tenant` function sees of a request, the same in every adapter. Nothing here is verified:
 * name the tenant from where the request was sent (route, path, host), never from its body.
 *
 * @example
 * ```ts
 * import type { TenantRequest } from 'webhook-receiver';
 * const byRoute = (request: TenantRequest) => request.params.tenant;
 * const bySubdomain = (request: TenantRequest) => request.host.split('.')[0];
 * const byHeader = (request: TenantRequest) => request.header('x-tenant');
 * ```
 */
export interface TenantRequest {
  /** The HTTP method (`'POST'` when the input does not say). */
  readonly method: string;
  /** The path as sent, percent-encoding intact, without the query; `''` when the input has none. */
  readonly path: string;
  /** The `Host` the request was sent to; `''` when the input has none. */
  readonly host: string;
  /**
   * The route's parameters where the framework has them (Express `req.params`, Fastify
   * `request.params`, Hono `c.req.param()`, Koa `ctx.params`, NestJS, Lambda `pathParameters`);
   * `{}` elsewhere.
   */
  readonly params: Readonly<Record<string, string | undefined>>;
  /** One request header (any case), read when asked for; repeated values joined with `', '`. */
  header(name: string): string | undefined;
}

/**
 * What a loader returns for a tenant: its keys (any {@link SecretInput}s: several during a
 * rotation, with `keyId`s, `whsec_` and `whpk_` alike), or `{ secrets }` (room for per-tenant
 * options later), or `undefined` / `null` for a tenant it does not know.
 *
 * @example
 * ```ts
 * import type { TenantKeysLoaded } from 'webhook-receiver';
 * const loaded: TenantKeysLoaded = [{ key: 'whsec_…new', keyId: 'k2' }, { key: 'whsec_…old', keyId: 'k1' }];
 * ```
 */
export type TenantKeysLoaded = SecretInput | readonly SecretInput[] | { secrets: SecretInput | readonly SecretInput[] } | undefined | null;

/**
 * Options of {@link tenantKeys}. Defaults: {@link TENANT_KEYS_DEFAULTS}.
 *
 * @example
 * ```ts
 * import type { TenantKeysOptions } from 'webhook-receiver';
 * const options: TenantKeysOptions = {
 *   tenant: (request) => request.params.tenant,
 *   load: async (tenant, { signal }) => (await db.query('select key, key_id as "keyId" from webhook_keys where tenant = $1', [tenant], { signal })).rows,
 * };
 * ```
 */
export interface TenantKeysOptions {
  /**
   * Names the tenant of a request, synchronously and cheaply; `undefined` (or `''`) when the
   * request names none (`404 UNKNOWN_TENANT`).
   */
  tenant: (request: TenantRequest) => string | undefined;
  /**
   * Loads a tenant's keys. `signal` aborts when the load timed out (`loadTimeoutMs`): pass it to
   * the database or HTTP client so a hung query is cancelled. A throw or a timeout is
   * `503 KEYS_UNAVAILABLE` (earlier keys keep serving for `graceSeconds`); a key that does not
   * decode is `500 INVALID_TENANT_KEYS`, and is not cached (which key and why is in the error's
   * `hint`, logged, never answered).
   */
  load: (tenant: string, context: { signal: AbortSignal }) => TenantKeysLoaded | Promise<TenantKeysLoaded>;
  /** How long loaded keys are used before they are loaded again. Default 60. */
  ttlSeconds?: number;
  /** How long an unknown tenant is remembered as unknown. Default 10. */
  unknownTtlSeconds?: number;
  /** How long past their TTL earlier keys serve while loads fail; 0 for not at all. Default 300. */
  graceSeconds?: number;
  /** How long one load may take. Default 3 000. */
  loadTimeoutMs?: number;
  /** Loads in flight at once, all tenants together. Default 16. */
  maxConcurrentLoads?: number;
  /** Known tenants cached. Default 10 000. */
  maxTenants?: number;
  /** Unknown tenant names cached. Default 1 000. */
  maxUnknownTenants?: number;
  /** The clock of the caches, in epoch milliseconds (tests). Default `Date.now`. */
  now?: () => number;
}

/**
 * How full a {@link TenantKeys}' caches are.
 *
 * @example
 * ```ts
 * const { tenants, unknownTenants, loading } = keys.usage();
 * ```
 */
export interface TenantKeysUsage {
  /** Known tenants cached (also those past their TTL, kept for the grace period). */
  tenants: number;
  /** Unknown tenant names cached. */
  unknownTenants: number;
  /** Loads in flight. */
  loading: number;
}

/**
 * Keys per tenant: what a receiver or adapter takes as `keys` (instead of `secrets`), and what the
 * app keeps to `forget` a tenant after a rotation.
 *
 * @example
 * ```ts
 * await db.rotateKey('acme');
 * keys.forget('acme'); // this process loads acme's keys again on its next request
 * ```
 */
export interface TenantKeys {
  /**
   * Drops what this process cached about `tenant` (keys, or "unknown"), so its next request loads
   * it again. Other processes keep their copy until its TTL.
   */
  forget(tenant: string): void;
  /**
   * A verifier that verifies each input with the keys of the tenant it names (the input's
   * `method`, `path`, `host`, `params` and headers, or a Fetch `Request`'s); its webhooks carry
   * `tenant`. Options are a verifier's, without `secrets`. A receiver built with `keys` has one as
   * its `verifier`.
   */
  verifier(options?: Omit<VerifierOptions, 'secrets'>): Verifier;
  /** How full the caches are. */
  usage(): TenantKeysUsage;
}

/** A tenant's keys, decoded once per load, and the verifiers built from them. */
interface Entry {
  readonly keys: readonly KeyMaterial[];
  readonly loadedAt: number;
  /** Before this time a failed reload is not tried again: the entry serves (within the grace). */
  retryAt: number;
  /** The verifier for the first verifier settings that asked (nearly always the only ones). */
  profile: TenantVerifier | undefined;
  verifier: Verifier | undefined;
  others: Map<TenantVerifier, Verifier> | undefined;
}

const NO_PARAMS: Readonly<Record<string, string | undefined>> = Object.freeze({});

/** A tenant name as it may appear in a message: quoted and escaped, cut at 40 characters. */
function shown(name: string): string {
  return JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}…` : name);
}

function headerText(headers: WebhookInput['headers'], name: string): string | undefined {
  const value = headerValues(headers, name.toLowerCase());
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The tenant request of a `{ headers, body, … }` input: each field read when the tenant function asks. */
class InputRequest implements TenantRequest {
  readonly #input: WebhookInput;
  constructor(input: WebhookInput) {
    this.#input = input;
  }
  get method(): string {
    return this.#input.method ?? 'POST';
  }
  get path(): string {
    const path = this.#input.path;
    return path === undefined ? '' : pathAsSent(path);
  }
  get host(): string {
    return this.#input.host ?? '';
  }
  get params(): Readonly<Record<string, string | undefined>> {
    return this.#input.params ?? NO_PARAMS;
  }
  header(name: string): string | undefined {
    return headerText(this.#input.headers, name);
  }
}

/** The tenant request of a Fetch `Request`: its URL parsed only when the path or host is asked for. */
class FetchTenantRequest implements TenantRequest {
  readonly #request: Request;
  #url: URL | undefined;
  constructor(request: Request) {
    this.#request = request;
  }
  get method(): string {
    return this.#request.method;
  }
  get path(): string {
    return (this.#url ??= new URL(this.#request.url)).pathname;
  }
  get host(): string {
    return (this.#url ??= new URL(this.#request.url)).host;
  }
  get params(): Readonly<Record<string, string | undefined>> {
    return NO_PARAMS;
  }
  header(name: string): string | undefined {
    return this.#request.headers.get(name) ?? undefined;
  }
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

const unknownTenant = (message: string): WebhookError => rejection('UNKNOWN_TENANT', message);

/** What the caller is answered for keys that do not decode: no tenant, no key, no decoder detail. */
const INVALID_TENANT_KEYS_MESSAGE = "the receiving server's keys for this endpoint are misconfigured; the delivery itself was not judged";

/** A verifier over tenant keys with one set of verifier settings. */
class TenantVerifier implements Verifier {
  readonly #keys: TenantKeysImpl;
  readonly settings: VerifierSettings;
  constructor(keys: TenantKeysImpl, settings: VerifierSettings) {
    this.#keys = keys;
    this.settings = settings;
  }

  verify(input: WebhookInput): Promise<VerifiedWebhook> {
    if (typeof input !== 'object' || input === null || input.headers === undefined || input.headers === null) {
      return Promise.reject(new TypeError('verify needs { headers, body }'));
    }
    let verifier: Verifier | Promise<Verifier>;
    try {
      verifier = this.#keys.resolve(new InputRequest(input), this);
    } catch (error) {
      return rejectLater(error);
    }
    // A cached tenant costs no promise turn beyond the verifier's own.
    return verifier instanceof Promise ? verifier.then((found) => found.verify(input)) : verifier.verify(input);
  }

  async verifyRequest(request: Request): Promise<VerifiedWebhook> {
    const verifier = await this.#keys.resolve(new FetchTenantRequest(request), this);
    return verifier.verifyRequest(request);
  }
}

class TenantKeysImpl implements TenantKeys {
  readonly #tenantOf: (request: TenantRequest) => unknown;
  readonly #load: TenantKeysOptions['load'];
  readonly #backend: CryptoBackend;
  readonly #now: () => number;
  readonly #ttlMs: number;
  readonly #graceMs: number;
  readonly #timeoutMs: number;
  readonly #maxLoads: number;
  /** Known tenants. An entry past its TTL stays (get() misses it, peek() finds it) for the grace. */
  readonly #known: LRUCache<string, Entry>;
  readonly #unknown: LRUCache<string, true>;
  /**
   * Loads in flight, one per tenant: every request for a tenant being loaded waits on the same
   * promise (single flight), and the map's size is what the concurrency limit counts. Not
   * lru-cache's `fetch`: it keeps an in-flight load in the cache itself, so the first load of
   * each unknown name would evict a known tenant, which is what the separate bounds prevent.
   */
  readonly #loads = new Map<string, Promise<Entry | undefined>>();

  constructor(options: TenantKeysOptions, backend: CryptoBackend) {
    if (typeof options !== 'object' || options === null) throw new TypeError('tenantKeys needs an options object with tenant and load functions');
    const { tenant, load, now } = options;
    if (typeof tenant !== 'function') throw new TypeError('tenantKeys needs tenant(request): a function naming the tenant of a request (a route parameter, the host, a header)');
    if (typeof load !== 'function') throw new TypeError("tenantKeys needs load(tenant): an async function returning the tenant's keys, or undefined for an unknown tenant");
    if (now !== undefined && typeof now !== 'function') throw new TypeError('tenantKeys now must be a function returning epoch milliseconds');
    const d = TENANT_KEYS_DEFAULTS;
    this.#ttlMs = checkCount(options.ttlSeconds, 'ttlSeconds', d.ttlSeconds) * 1000;
    const unknownTtlMs = checkCount(options.unknownTtlSeconds, 'unknownTtlSeconds', d.unknownTtlSeconds) * 1000;
    this.#graceMs = checkCount(options.graceSeconds, 'graceSeconds', d.graceSeconds, { zero: true }) * 1000;
    this.#timeoutMs = checkCount(options.loadTimeoutMs, 'loadTimeoutMs', d.loadTimeoutMs);
    this.#maxLoads = checkCount(options.maxConcurrentLoads, 'maxConcurrentLoads', d.maxConcurrentLoads, { whole: true });
    const maxTenants = checkCount(options.maxTenants, 'maxTenants', d.maxTenants, { whole: true });
    const maxUnknown = checkCount(options.maxUnknownTenants, 'maxUnknownTenants', d.maxUnknownTenants, { whole: true });
    this.#tenantOf = tenant;
    this.#load = load;
    this.#backend = backend;
    this.#now = now ?? Date.now;
    // An injected clock is read on every check (lru-cache otherwise reuses a reading for 1 ms).
    const clock = now === undefined ? {} : { perf: { now }, ttlResolution: 0 };
    this.#known = new LRUCache<string, Entry>({ max: maxTenants, ttl: this.#ttlMs, noDeleteOnStaleGet: true, ...clock });
    this.#unknown = new LRUCache<string, true>({ max: maxUnknown, ttl: unknownTtlMs, ...clock });
  }

  forget(tenant: string): void {
    if (typeof tenant !== 'string') throw new TypeError('forget needs the tenant name (a string)');
    this.#known.delete(tenant);
    this.#unknown.delete(tenant);
    // A load in flight may return the keys from before the change: its result is not cached.
    this.#loads.delete(tenant);
  }

  verifier(options: Omit<VerifierOptions, 'secrets'> = {}): Verifier {
    if (typeof options !== 'object' || options === null) throw new TypeError('verifier options must be an object');
    if ((options as { secrets?: unknown }).secrets !== undefined) {
      throw new TypeError('a tenant keys verifier takes its keys from the loader: pass no secrets');
    }
    return new TenantVerifier(this, verifierSettings(options));
  }

  usage(): TenantKeysUsage {
    return { tenants: this.#known.size, unknownTenants: this.#unknown.size, loading: this.#loads.size };
  }

  /**
   * The verifier of the tenant `request` names, for `profile`'s settings: at once when its keys
   * are cached and fresh, after a load (or a wait on one in flight) otherwise. Throws (or rejects
   * with) `UNKNOWN_TENANT`, `KEYS_UNAVAILABLE` or `INVALID_TENANT_KEYS`.
   */
  resolve(request: TenantRequest, profile: TenantVerifier): Verifier | Promise<Verifier> {
    const name = this.#name(request);
    const entry = this.#known.get(name);
    if (entry !== undefined) return entry.profile === profile ? entry.verifier! : this.#verifierOf(entry, profile, name);
    // Off the cached path: every refusal from here on concerns this tenant (for the log).
    let found: Verifier | Promise<Verifier>;
    try {
      found = this.#uncached(name, profile);
    } catch (error) {
      throw withTenant(error, name);
    }
    return found instanceof Promise ? found.catch((error: unknown) => Promise.reject(withTenant(error, name))) : found;
  }

  #name(request: TenantRequest): string {
    const name = this.#tenantOf(request);
    if (typeof name === 'string' && name.length > 0 && name.length <= TENANT_KEYS_DEFAULTS.maxTenantLength) return name;
    if (name === undefined || name === null || name === '') {
      throw unknownTenant('the request names no tenant (the tenant function found none in its route, host or headers)');
    }
    if (typeof name !== 'string') {
      throw new TypeError(`the tenant function returned a ${typeof name}; it must return the tenant's name (a string) or undefined`);
    }
    throw unknownTenant(`the tenant named is ${name.length} characters long; the limit is ${TENANT_KEYS_DEFAULTS.maxTenantLength}`);
  }

  #verifierOf(entry: Entry, profile: TenantVerifier, name: string): Verifier {
    if (entry.profile === undefined) {
      entry.profile = profile;
      return (entry.verifier = createTenantVerifier(profile.settings, entry.keys, this.#backend, name));
    }
    if (entry.profile === profile) return entry.verifier!;
    let verifier = entry.others?.get(profile);
    if (verifier === undefined) {
      verifier = createTenantVerifier(profile.settings, entry.keys, this.#backend, name);
      (entry.others ??= new Map()).set(profile, verifier);
    }
    return verifier;
  }

  /** A tenant without fresh keys: unknown, served from earlier keys, loaded, or refused. */
  #uncached(name: string, profile: TenantVerifier): Verifier | Promise<Verifier> {
    if (this.#unknown.has(name)) throw unknownTenant(`tenant ${shown(name)} is unknown`);
    const stale = this.#inGrace(name);
    let loading = this.#loads.get(name);
    if (loading === undefined) {
      // Its reload failed a moment ago: the earlier keys serve until the next try is due.
      if (stale !== undefined && stale.retryAt > this.#now()) return this.#verifierOf(stale, profile, name);
      if (this.#loads.size >= this.#maxLoads) {
        if (stale !== undefined) return this.#verifierOf(stale, profile, name);
        throw rejection(
          'KEYS_UNAVAILABLE',
          `${this.#maxLoads} key loads are in flight already (maxConcurrentLoads), so tenant ${shown(name)} was not loaded; retry later`,
        );
      }
      loading = this.#startLoad(name);
    }
    return loading.then(
      (entry) => {
        if (entry === undefined) throw unknownTenant(`tenant ${shown(name)} is unknown`);
        return this.#verifierOf(entry, profile, name);
      },
      (error: unknown) => {
        if (stale !== undefined && (error as WebhookError).code === 'KEYS_UNAVAILABLE') return this.#verifierOf(stale, profile, name);
        throw error;
      },
    );
  }

  /** The tenant's earlier keys while they may still serve (past their TTL, within the grace). */
  #inGrace(name: string): Entry | undefined {
    const entry = this.#known.peek(name, { allowStale: true });
    if (entry === undefined) return undefined;
    if (entry.loadedAt + this.#ttlMs + this.#graceMs >= this.#now()) return entry;
    this.#known.delete(name);
    return undefined;
  }

  #startLoad(name: string): Promise<Entry | undefined> {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answered = new Promise<TenantKeysLoaded>((resolve, reject) => {
      timer = setTimeout(() => {
        const error = rejection('KEYS_UNAVAILABLE', `the key loader did not answer for tenant ${shown(name)} within ${this.#timeoutMs} ms (loadTimeoutMs)`);
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
            : rejection('KEYS_UNAVAILABLE', `the key loader failed for tenant ${shown(name)}; retry later`, { cause: error });
        if (current) {
          const stale = this.#known.peek(name, { allowStale: true });
          if (stale !== undefined) stale.retryAt = this.#now() + TENANT_KEYS_DEFAULTS.retryAfterSeconds * 1000;
        }
        throw failed;
      },
    );
    this.#loads.set(name, loading);
    return loading;
  }

  /** Ends a load's slot; whether it is still the tenant's load (not forgotten meanwhile). */
  #finish(name: string, loading: Promise<Entry | undefined>): boolean {
    if (this.#loads.get(name) !== loading) return false;
    this.#loads.delete(name);
    return true;
  }

  /** What a load answered, decoded; cached when `current`. A definite answer replaces earlier keys. */
  #loaded(name: string, loaded: TenantKeysLoaded, current: boolean): Entry | undefined {
    if (loaded === undefined || loaded === null) {
      if (current) {
        this.#known.delete(name);
        this.#unknown.set(name, true);
      }
      return undefined;
    }
    const secrets = typeof loaded === 'object' && !Array.isArray(loaded) && !(loaded instanceof Uint8Array) && 'secrets' in loaded ? loaded.secrets : loaded;
    let keys: KeyMaterial[];
    try {
      keys = decodeSecretList(secrets, 'verify', 'keys');
    } catch (error) {
      if (current) this.#known.delete(name);
      // The decoder's message names the key by its position and keyId, never its value, but it may
      // still describe the key (its length, its prefix): for the operator's log (the hint), never
      // for the answer, whose message says only that the fault is the server's.
      throw new WebhookError('INVALID_TENANT_KEYS', INVALID_TENANT_KEYS_MESSAGE, {
        cause: error,
        hint: `the keys loaded for tenant ${shown(name)} do not decode: ${(error as Error).message}`,
      });
    }
    const entry: Entry = { keys, loadedAt: this.#now(), retryAt: 0, profile: undefined, verifier: undefined, others: undefined };
    if (current) {
      this.#known.set(name, entry);
      this.#unknown.delete(name);
    }
    return entry;
  }
}

/** Tenant keys on a chosen crypto backend. Internal: tests use it to force WebCrypto. */
export function tenantKeysWith(options: TenantKeysOptions, backend: CryptoBackend): TenantKeys {
  return new TenantKeysImpl(options, backend);
}

/**
 * Keys per tenant, looked up at request time and cached: pass the result as `keys` to a receiver
 * or any adapter (instead of `secrets`), and keep it to call `forget(tenant)` after a rotation.
 * Options are checked at once (`TypeError` / `RangeError`); defaults in {@link TENANT_KEYS_DEFAULTS}.
 *
 * Answers: no tenant named, or one the loader does not know, `404 UNKNOWN_TENANT` (no key was
 * tried); the loader throws or times out, or too many loads are in flight, `503 KEYS_UNAVAILABLE`
 * (earlier keys of the tenant serve instead, within the grace period); a key that does not decode,
 * `500 INVALID_TENANT_KEYS` (its `hint`, logged and never answered, names the tenant and the key's
 * position, never the key).
 *
 * @example
 * ```ts
 * import { createReceiver, tenantKeys } from 'webhook-receiver';
 *
 * const keys = tenantKeys({
 *   tenant: (request) => request.params.tenant,
 *   load: async (tenant) => db.keysOf(tenant), // SecretInput[] | { secrets } | undefined
 *   ttlSeconds: 60,
 * });
 * const receiver = createReceiver({ keys });
 * await receiver.handle({ headers, body, params: { tenant: 'acme' } }, (webhook) => save(webhook.tenant, webhook.json()));
 * keys.forget('acme'); // after rotating acme's secret
 * ```
 */
export function tenantKeys(options: TenantKeysOptions): TenantKeys {
  return new TenantKeysImpl(options, defaultBackend);
}

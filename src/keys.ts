/**
 * Keys per tenant, looked up at request time: one endpoint for many senders, each with its own
 * secrets, rotated on its own schedule. The tenant is named by the request (a route parameter, the
 * path, the host, a header; never the unverified body), its keys come from the app's loader (a
 * database, a secrets manager) and are decoded once and cached with `lru-cache`.
 *
 * Four bounds keep a flood of made-up tenant names cheap and harmless to known tenants: known
 * tenants and unknown ones live in caches of their own (so unknown names cannot push known tenants
 * out), a name longer than {@link TENANT_KEYS_DEFAULTS.maxTenantLength} is never loaded, loads run
 * under a concurrency limit past which a request is refused at once (503 `KEYS_UNAVAILABLE`)
 * rather than queued, and a quarter of that limit is kept for tenants loaded before, so their keys
 * are refreshed however many made-up names are being loaded. Loader calls that outlive their
 * timeout are capped too (`maxAbandonedLoads`).
 *
 * This file is the public face: it names the tenant of a request and picks its verifier. Its parts
 * live in `keys/`: the public types and defaults (`types.ts`, below the others) and the caches and
 * loads (`cache.ts`).
 */

import { defaultBackend, type CryptoBackend } from './crypto.ts';
import { rejection, type WebhookError } from './errors.ts';
import { headerValues } from './headers.ts';
import { pathAsSent, withTenant } from './rejection.ts';
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
import { shown, TenantKeyCache, type Entry } from './keys/cache.ts';
import { TENANT_KEYS_DEFAULTS, type TenantKeys, type TenantKeysOptions, type TenantKeysUsage, type TenantRequest } from './keys/types.ts';

// The public types and defaults, from the module the keys' parts import them from.
export * from './keys/types.ts';

const NO_PARAMS: Readonly<Record<string, string | undefined>> = Object.freeze({});

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

const unknownTenant = (message: string): WebhookError => rejection('UNKNOWN_TENANT', message);

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
  readonly #backend: CryptoBackend;
  readonly #cache: TenantKeyCache;

  constructor(options: TenantKeysOptions, backend: CryptoBackend) {
    if (typeof options !== 'object' || options === null) throw new TypeError('tenantKeys needs an options object with tenant and load functions');
    const { tenant, load, now } = options;
    if (typeof tenant !== 'function') throw new TypeError('tenantKeys needs tenant(request): a function naming the tenant of a request (a route parameter, the host, a header)');
    if (typeof load !== 'function') throw new TypeError("tenantKeys needs load(tenant): an async function returning the tenant's keys, or undefined for an unknown tenant");
    if (now !== undefined && typeof now !== 'function') throw new TypeError('tenantKeys now must be a function returning epoch milliseconds');
    this.#cache = new TenantKeyCache(options);
    this.#tenantOf = tenant;
    this.#backend = backend;
  }

  forget(tenant: string): void {
    if (typeof tenant !== 'string') throw new TypeError('forget needs the tenant name (a string)');
    this.#cache.forget(tenant);
  }

  verifier(options: Omit<VerifierOptions, 'secrets'> = {}): Verifier {
    if (typeof options !== 'object' || options === null) throw new TypeError('verifier options must be an object');
    if ((options as { secrets?: unknown }).secrets !== undefined) {
      throw new TypeError('a tenant keys verifier takes its keys from the loader: pass no secrets');
    }
    return new TenantVerifier(this, verifierSettings(options));
  }

  usage(): TenantKeysUsage {
    return this.#cache.usage();
  }

  /**
   * The verifier of the tenant `request` names, for `profile`'s settings: at once when its keys
   * are cached and fresh, after a load (or a wait on one in flight) otherwise. Throws (or rejects
   * with) `UNKNOWN_TENANT`, `KEYS_UNAVAILABLE` or `INVALID_TENANT_KEYS`.
   */
  resolve(request: TenantRequest, profile: TenantVerifier): Verifier | Promise<Verifier> {
    const name = this.#name(request);
    const entry = this.#cache.fresh(name);
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

  /**
   * A tenant without fresh keys: unknown, loaded, or refused. Its last good keys serve, within the
   * grace period, while a reload is refused (no slot) or fails (throws, times out).
   */
  #uncached(name: string, profile: TenantVerifier): Verifier | Promise<Verifier> {
    if (this.#cache.unknown.has(name)) throw unknownTenant(`tenant ${shown(name)} is unknown`);
    let loading = this.#cache.loads.get(name);
    if (loading === undefined) {
      const stale = this.#cache.inGrace(name);
      // Its reload failed a moment ago: the earlier keys serve until the next try is due.
      if (stale !== undefined && stale.retryAt > this.#cache.now()) return this.#verifierOf(stale, profile, name);
      const refused = this.#cache.refuse(name);
      if (refused !== undefined) {
        if (stale !== undefined) return this.#verifierOf(stale, profile, name);
        throw refused;
      }
      loading = this.#cache.startLoad(name);
    }
    return loading.then(
      (entry) => {
        if (entry === undefined) throw unknownTenant(`tenant ${shown(name)} is unknown`);
        return this.#verifierOf(entry, profile, name);
      },
      (error: unknown) => {
        // Looked up when the load fails, not before it: keys forgotten meanwhile do not serve.
        const stale = (error as WebhookError).code === 'KEYS_UNAVAILABLE' ? this.#cache.inGrace(name) : undefined;
        if (stale !== undefined) return this.#verifierOf(stale, profile, name);
        throw error;
      },
    );
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
 * (the tenant's last good keys serve instead, within the grace period); a key that does not decode,
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

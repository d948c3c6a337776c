/**
 * The public types and defaults of tenant keys: what the app passes to `tenantKeys`,
 * what it gets back, and the defaults. Below the rest of `keys/`, so every part may import it.
 */

import type { SecretInput } from '../secrets.ts';
import type { Verifier, VerifierOptions } from '../verify.ts';

/**
 * The defaults of {@link tenantKeys}, each overridable by the option of the same name (except
 * `maxTenantLength` and `retryAfterSeconds`, which are fixed).
 *
 * - `ttlSeconds` 60: how long loaded keys are used before they are loaded again, so how long a
 *   rotation or a revoked key takes to reach a process that was not told with `forget`.
 * - `unknownTtlSeconds` 10: how long "no such tenant" is remembered, so how long a newly added
 *   tenant stays unknown to a process that looked it up just before.
 * - `graceSeconds` 300: how long past their TTL a tenant's last good keys keep serving while no
 *   reload succeeds (refused for want of a slot, thrown or timed out). Past it they no longer
 *   serve, so a key is never trusted longer than `ttlSeconds + graceSeconds` after the loader last
 *   returned it; the tenant stays known.
 * - `loadTimeoutMs` 3 000: how long one load may take before it counts as failed (its `signal`
 *   aborts then).
 * - `maxConcurrentLoads` 16: loads in flight at once, all tenants together; a request that would
 *   start one more is refused with 503 `KEYS_UNAVAILABLE` without loading. A quarter of them (4 of
 *   16; none when the limit is 1) is kept for tenants loaded before: a name never loaded is
 *   refused from three quarters on, so made-up names cannot stop known tenants' refreshes.
 * - `maxAbandonedLoads` 16: loads that timed out whose loader call still runs (a loader that does
 *   not stop when its `signal` aborts), set aside without a slot. When that many are set aside, a
 *   load that times out keeps its slot until its call settles: the loader never runs more than
 *   `maxConcurrentLoads + maxAbandonedLoads` calls at once.
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
  maxAbandonedLoads: 16,
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
   * the database or HTTP client so a hung query is cancelled (a call that runs on counts against
   * `maxAbandonedLoads`). A throw or a timeout is `503 KEYS_UNAVAILABLE` (the last good keys keep
   * serving for `graceSeconds` past their TTL); a key that does not decode is
   * `500 INVALID_TENANT_KEYS`, and is not cached (which key and why is in the error's `hint`,
   * logged, never answered).
   */
  load: (tenant: string, context: { signal: AbortSignal }) => TenantKeysLoaded | Promise<TenantKeysLoaded>;
  /** How long loaded keys are used before they are loaded again. Default 60. */
  ttlSeconds?: number;
  /** How long an unknown tenant is remembered as unknown. Default 10. */
  unknownTtlSeconds?: number;
  /**
   * How long past their TTL a tenant's last good keys serve while no reload succeeds (refused,
   * thrown or timed out); 0 for not at all. Default 300.
   */
  graceSeconds?: number;
  /** How long one load may take. Default 3 000. */
  loadTimeoutMs?: number;
  /**
   * Loads in flight at once, all tenants together; a quarter of them is kept for tenants loaded
   * before (none when this is 1). Default 16.
   */
  maxConcurrentLoads?: number;
  /**
   * Loads that timed out while their loader call still runs, set aside without taking a slot;
   * past that, a load that times out keeps its slot until its call settles. 0 for none. Default 16.
   */
  maxAbandonedLoads?: number;
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
 * const { tenants, unknownTenants, loading, abandoned } = keys.usage();
 * ```
 */
export interface TenantKeysUsage {
  /**
   * Known tenants cached: every tenant a load found, also past its TTL and its grace (keys that
   * no longer serve are dropped, the tenant stays known), up to `maxTenants`.
   */
  tenants: number;
  /** Unknown tenant names cached. */
  unknownTenants: number;
  /** Loads holding a slot (`maxConcurrentLoads`). */
  loading: number;
  /**
   * Loads that timed out whose loader call still runs, set aside (`maxAbandonedLoads`). A count
   * that stays up means the loader does not stop when its `signal` aborts.
   */
  abandoned: number;
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
   * it again; the forgotten keys do not serve even while that load fails. A tenant loaded before
   * stays known (its reloads keep the share of loads kept for known tenants). Other processes keep
   * their copy until its TTL.
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

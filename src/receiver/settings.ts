/**
 * The receiver's options, checked once when it is built: durations, the replay window against the
 * ids' lifetime, the namespace, the default error report, and the warning about receivers built
 * per request. The store's operations are checked by `checkStore` (stores/internal.ts), which an
 * inbox's worker shares.
 */

import { logFailure, type WebhookLogger } from '../logger.ts';
import { createVerifier, verifierSettings, type VerifiedWebhook, type Verifier, type VerifierOptions } from '../verify.ts';
import { positiveSeconds } from '../lib/checks.ts';
import type { TenantKeys } from '../keys/types.ts';
import {
  DEFAULT_LOCK_SECONDS,
  DEFAULT_RENEWED_LOCK_SECONDS,
  DEFAULT_TTL_SECONDS,
  DEFAULT_UNSIGNED_TTL_SECONDS,
  type IdempotencyOptions,
  type ReceiverErrorContext,
  type ReceiverOptions,
} from './types.ts';

/** How many receivers with a default memory store one process builds before it is told. */
const MANY_RECEIVERS = 100;

let receiversWithOwnMemoryStore = 0;
let warnedAboutManyReceivers = false;

/**
 * A signed id must be remembered for as long as a request carrying it can still be accepted. The
 * timestamp window is two-sided (a timestamp T passes from T - tolerance until T + tolerance), so
 * a captured request stays replayable for twice the tolerance: a shorter `ttlSeconds` forgets the
 * id while the replay would still verify, and the handler runs again.
 */
function checkReplayWindow(ttlSeconds: number, isDefault: boolean, toleranceSeconds: number): void {
  if (ttlSeconds >= 2 * toleranceSeconds) return;
  throw new RangeError(
    `idempotency.ttlSeconds (${ttlSeconds}${isDefault ? ', the default' : ''}) must be at least twice toleranceSeconds (${toleranceSeconds}), ` +
      `${2 * toleranceSeconds} s: a timestamp is accepted from ${toleranceSeconds} s before until ${toleranceSeconds} s after it, and an id ` +
      'forgotten sooner lets a captured request be replayed and run again',
  );
}

/** Why a namespace cannot be used, or `undefined` when it can. */
export function namespaceProblem(namespace: unknown): string | undefined {
  if (typeof namespace !== 'string' || namespace.length === 0) return 'must be a non-empty string';
  // Keys are `${namespace}:${class}:${webhook-id}`. Ids may contain ':', so a namespace must
  // not, or namespace 'a:s' with id 'x' and namespace 'a' with id 's:x' would share one key.
  if (namespace.includes(':')) return `must not contain ':' (use '-' or '.' to separate words)`;
  return undefined;
}

/**
 * A tenant as it appears in a namespace: `%` and `:` percent-encoded, so it can never contain `:`
 * and two tenants never share one.
 */
function encodedTenant(tenant: string | undefined): string {
  return (tenant ?? '').replace(/%/g, '%25').replace(/:/g, '%3A');
}

/**
 * The namespace function of a receiver with tenant keys: `t.<tenant>` by default, `<namespace>.t.<tenant>`
 * after a fixed namespace (checked here), or the user's own function, which gets `webhook.tenant`.
 */
function tenantNamespace(namespace: string | ((webhook: VerifiedWebhook) => string) | undefined): (webhook: VerifiedWebhook) => string {
  if (typeof namespace === 'function') return namespace;
  if (namespace === undefined) return (webhook) => `t.${encodedTenant(webhook.tenant)}`;
  const problem = namespaceProblem(namespace);
  if (problem !== undefined) throw new TypeError(`idempotency.namespace ${problem}`);
  const prefix = `${namespace}.t.`;
  return (webhook) => prefix + encodedTenant(webhook.tenant);
}

export function defaultOnError(logger: WebhookLogger | undefined, error: unknown, context: ReceiverErrorContext): void {
  const what =
    context.stage === 'claim'
      ? 'idempotency store failed while claiming'
      : context.stage === 'namespace'
        ? 'the idempotency namespace function failed'
        : context.stage === 'renew'
          ? `could not renew the claim of a running handler${context.willRetry ? ' (retrying)' : ''}`
          : `could not ${context.stage} the idempotency claim${context.willRetry ? ' (retrying)' : ''}`;
  const fields = { stage: context.stage, webhookId: context.webhookId, willRetry: context.willRetry };
  logFailure(logger, context.tenant === undefined ? fields : { ...fields, tenant: context.tenant }, what, error);
}

/**
 * A receiver made its own memory store: built once per process that is right, built per request
 * it silently deduplicates nothing. Warn once, naming the fix.
 */
export function noteOwnMemoryStore(): void {
  receiversWithOwnMemoryStore++;
  if (receiversWithOwnMemoryStore < MANY_RECEIVERS || warnedAboutManyReceivers) return;
  warnedAboutManyReceivers = true;
  console.warn(
    `[webhook-receiver] ${MANY_RECEIVERS} receivers were built in this process, each with a memory store of its own, so ` +
      'none of them sees the ids the others claimed and deduplication does not work. Build the receiver (or the ' +
      "adapter's handler) once, at module scope or lazily on first use, not per request; or pass one shared " +
      'idempotency.store (memoryStore() or a shared store such as redisStore).',
  );
}

/** The verifier of a receiver built with `pullOnly: true`: every pushed request is a wiring mistake. */
const refusePush = (): Promise<never> =>
  Promise.reject(
    new TypeError('this receiver was built with pullOnly: true for events pulled from the relay; a pushed request needs a receiver built with secrets or keys'),
  );
const pushRefused: Verifier = { verify: refusePush, verifyRequest: refusePush };

/** The receiver's verifier: its `secrets`, its tenants' `keys`, or none with `pullOnly`. */
export function verifierOf(options: ReceiverOptions): Verifier {
  const { keys, pullOnly } = options;
  if (pullOnly !== undefined && typeof pullOnly !== 'boolean') throw new TypeError('pullOnly must be a boolean');
  if (pullOnly === true) {
    if (options.secrets !== undefined || keys !== undefined) {
      throw new TypeError('a receiver with pullOnly: true takes events pulled from the relay only and has no secrets or keys: leave them out, or leave pullOnly out to receive pushed requests');
    }
    // Checked as a verifier checks them: `unsigned` decides whether an unattempted pulled event
    // runs, so a misspelt value must be refused here rather than read as 'reject'.
    verifierSettings(options);
    return pushRefused;
  }
  if (keys === undefined) return createVerifier(options as VerifierOptions);
  if (options.secrets !== undefined) throw new TypeError('pass either secrets (one set of keys) or keys (keys per tenant, from tenantKeys()), not both');
  if (typeof keys !== 'object' || keys === null || typeof keys.verifier !== 'function' || typeof keys.forget !== 'function') {
    throw new TypeError('keys must be the object tenantKeys() returns');
  }
  return keys.verifier(options);
}

/** The claims' durations in milliseconds, checked: ids' lifetime (against the replay window), unsigned ids', and the lock. */
export function durationsOf(settings: IdempotencyOptions | undefined, renews: boolean, toleranceSeconds: number): { ttlMs: number; unsignedTtlMs: number; lockMs: number } {
  const ttlSeconds = positiveSeconds(settings?.ttlSeconds, 'idempotency.ttlSeconds', DEFAULT_TTL_SECONDS);
  if (settings !== undefined) checkReplayWindow(ttlSeconds, settings.ttlSeconds === undefined, toleranceSeconds);
  const unsignedTtlSeconds = positiveSeconds(settings?.unsignedTtlSeconds, 'idempotency.unsignedTtlSeconds', Math.min(ttlSeconds, DEFAULT_UNSIGNED_TTL_SECONDS));
  const lockSeconds = positiveSeconds(settings?.lockSeconds, 'idempotency.lockSeconds', renews ? DEFAULT_RENEWED_LOCK_SECONDS : DEFAULT_LOCK_SECONDS);
  return { ttlMs: ttlSeconds * 1000, unsignedTtlMs: unsignedTtlSeconds * 1000, lockMs: lockSeconds * 1000 };
}

/** The idempotency namespace, checked: a fixed string, or a function of the webhook (always one with tenant keys). */
export function namespaceSetting(keys: TenantKeys | undefined, settings: IdempotencyOptions | undefined): string | ((webhook: VerifiedWebhook) => string) {
  const namespace = keys === undefined ? (settings?.namespace ?? 'default') : tenantNamespace(settings?.namespace);
  if (typeof namespace === 'function') return namespace;
  const problem = namespaceProblem(namespace);
  if (problem !== undefined) throw new TypeError(`idempotency.namespace ${problem}`);
  return namespace;
}

/** Whether a store outage runs the handler unprotected (`onStoreError: 'process'`) instead of answering 503. */
export function processesOnStoreError(settings: IdempotencyOptions | undefined): boolean {
  const onStoreError = settings?.onStoreError ?? 'reject';
  if (onStoreError !== 'reject' && onStoreError !== 'process') throw new TypeError(`idempotency.onStoreError must be 'reject' or 'process'`);
  return onStoreError === 'process';
}

/**
 * The receiver's options, checked once when it is built: the store's operations, durations, the
 * replay window against the ids' lifetime, the namespace, the default error report, and the
 * warning about receivers built per request.
 */

import { logFailure, type WebhookLogger } from '../logger.ts';
import { orderingProblem } from '../stores/internal.ts';
import type { IdempotencyStore } from '../stores/types.ts';
import type { VerifiedWebhook } from '../verify.ts';
import type { ReceiverErrorContext } from './types.ts';

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
export function checkReplayWindow(ttlSeconds: number, isDefault: boolean, toleranceSeconds: number): void {
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
export function tenantNamespace(namespace: string | ((webhook: VerifiedWebhook) => string) | undefined): (webhook: VerifiedWebhook) => string {
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

/** A store passed as `idempotency.store` has the operations a receiver calls. */
export function checkStore(store: IdempotencyStore): void {
  if (typeof store !== 'object' || store === null) throw new TypeError('idempotency.store must be a store object');
  for (const method of ['claim', 'complete', 'release'] as const) {
    if (typeof store[method] !== 'function') throw new TypeError(`idempotency.store must implement ${method}()`);
  }
  if (store.extend !== undefined && typeof store.extend !== 'function') throw new TypeError('idempotency.store extend must be a function when present');
  const problem = orderingProblem(store.ordering);
  if (problem !== undefined) throw new TypeError(`idempotency.store ${problem}`);
}

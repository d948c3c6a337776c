/**
 * The receiver's side of ordering outside the claim itself: the check that a store has
 * the ordering operations, and `forgetVersion`'s work once the receiver has passed on its store.
 */

import { WebhookError } from '../errors.ts';
import { entityKey, type Ordering } from '../ordering.ts';
import { checkEntity, ORDERING_OPERATIONS } from '../stores/internal.ts';
import type { IdempotencyStore } from '../stores/types.ts';
import { namespaceProblem } from './settings.ts';

/**
 * With `ordering`, the store must have the ordering operations: one without them cannot refuse a
 * stale event in the same step as its claim (the DynamoDB store, or a custom one). Whether an
 * `ordering` present is whole, `checkStore` has checked already.
 */
export function checkOrderingStore(store: IdempotencyStore | undefined): void {
  if (store === undefined) throw new TypeError('ordering needs idempotency (a store that records versions): it cannot be used with idempotency: false');
  if (store.ordering !== undefined) return;
  const name = typeof store.name === 'string' ? `the ${store.name} store` : 'idempotency.store';
  throw new TypeError(
    `${name} has no ordering operations (ordering: { ${ORDERING_OPERATIONS.join(', ')} }), so it cannot refuse a stale event in the same step as its claim: use the memory, Redis, Postgres or Durable Object store with ordering`,
  );
}

/**
 * Forgets an entity's recorded version (`receiver.forgetVersion`), given the receiver's store, its
 * ordering and its fixed namespace (undefined with a namespace function).
 */
export async function forgetOrderedVersion(
  store: IdempotencyStore | undefined,
  ordering: Ordering | undefined,
  fixedNamespace: string | undefined,
  entity: string | number | bigint,
  options: { namespace?: string },
): Promise<void> {
  const operations = store?.ordering;
  if (ordering === undefined || operations === undefined) throw new TypeError('forgetVersion needs a receiver built with ordering');
  const name = typeof entity === 'string' ? entity : typeof entity === 'bigint' || (typeof entity === 'number' && Number.isFinite(entity)) ? String(entity) : undefined;
  if (name === undefined || name.length === 0) throw new TypeError('forgetVersion needs the entity, as ordering.key returned it (a non-empty string, a number or a bigint)');
  const namespace = options.namespace ?? fixedNamespace;
  if (namespace === undefined) throw new TypeError('forgetVersion needs options.namespace: this receiver computes its namespace per webhook');
  const problem = namespaceProblem(namespace);
  if (problem !== undefined) throw new TypeError(`forgetVersion namespace ${problem}`);
  const key = entityKey(namespace, name);
  checkEntity(key);
  try {
    await operations.forgetVersion(key);
  } catch (error) {
    throw new WebhookError('STORE_UNAVAILABLE', 'the idempotency store did not forget the version; retry later', { cause: error });
  }
}

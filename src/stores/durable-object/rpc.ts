/** How the store and the Cloudflare inbox reach a `WebhookClaims` object: one JSON operation, one request to its stub. */

import { withTimeout } from '../internal.ts';
import { StoreError } from '../types.ts';
import type { DurableObjectNamespaceLike } from './bindings.ts';

// A Durable Object is reached through its stub, never over the network: the host is only a label.
const OBJECT_ENDPOINT = 'https://webhook-claims.invalid/';

/**
 * Sends one operation (`{ op, … }`, as JSON) to the `WebhookClaims` object named `name` and
 * answers its JSON reply; a reply other than 2xx, or none within `timeoutMs`, is a `StoreError`.
 * The Durable Object store and the Cloudflare inbox's dead letters speak to their objects through it.
 */
export function askObject<Id, Operation extends { op: string }>(namespace: DurableObjectNamespaceLike<Id>, name: string, operation: Operation, timeoutMs: number, store: string): Promise<unknown> {
  return withTimeout(
    (async () => {
      const stub = namespace.get(namespace.idFromName(name));
      const response = await stub.fetch(OBJECT_ENDPOINT + operation.op, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(operation),
      });
      if (!response.ok) {
        const detail = (await response.text()).slice(0, 200);
        throw new StoreError(store, 'bad_reply', `${store} store: ${operation.op} answered HTTP ${response.status}: ${detail}`);
      }
      return (await response.json()) as unknown;
    })(),
    timeoutMs,
    store,
    operation.op,
  );
}

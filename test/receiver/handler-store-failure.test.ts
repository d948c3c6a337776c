/**
 * A store that fails under a running handler (a `StoreError` the handler lets through: the
 * Postgres store's `transaction` whose connection was lost, or that timed out) is the store's
 * outage, answered as one: 503 `STORE_UNAVAILABLE` with `Retry-After`, the claim released, so the
 * sender's retry runs the handler again. Any other error of the handler is its own, unchanged.
 */

import { describe, expect, it } from 'vitest';
import { webhookHandler } from '../../adapters/fetch.ts';
import { WebhookError } from '../../src/errors.ts';
import { createReceiver } from '../../src/receiver.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { StoreError } from '../../src/stores/types.ts';
import { SECRET, delivery, deliveryRequest } from './support.ts';

const lost = () => new StoreError('postgres', 'not_ready', 'postgres store: the connection to PostgreSQL was lost');

describe('a StoreError thrown by the handler', () => {
  it('receiver.handle: STORE_UNAVAILABLE (503) with the store error as cause, claim released', async () => {
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store: memoryStore() } });
    const failure = await receiver
      .handle(await delivery('msg_store_lost'), () => {
        throw lost();
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(WebhookError);
    expect(failure).toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503, cause: { name: 'StoreError', store: 'postgres', reason: 'not_ready' } });
    // Released: the sender's retry runs the handler.
    await expect(receiver.handle(await delivery('msg_store_lost'), () => 'ran')).resolves.toMatchObject({ outcome: 'processed', value: 'ran' });
  });

  it('receiver.handle: any other error is the handler’s own, rethrown as it was', async () => {
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store: memoryStore() } });
    const own = new Error('the payment service said no');
    await expect(
      receiver.handle(await delivery('msg_own_error'), () => {
        throw own;
      }),
    ).rejects.toBe(own);
  });

  it('an adapter (Fetch): 503 STORE_UNAVAILABLE in the envelope with Retry-After, then the retry runs', async () => {
    let calls = 0;
    const handle = webhookHandler({ secrets: SECRET, onRejected: () => {} }, () => {
      calls++;
      if (calls === 1) throw lost();
      return new Response(null, { status: 204 });
    });
    const first = await handle(await deliveryRequest('msg_store_lost_fetch'));
    expect(first.status).toBe(503);
    expect(first.headers.get('retry-after')).toBe('5');
    expect(await first.json()).toEqual({ error: 'STORE_UNAVAILABLE', message: 'the idempotency store became unreachable while the handler ran; retry later' });
    const retry = await handle(await deliveryRequest('msg_store_lost_fetch'));
    expect(retry.status).toBe(204);
    expect(calls).toBe(2);
  });
});

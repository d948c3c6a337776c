/**
 * Ordering through the receiver, on the memory store: stale deliveries (handler not
 * run, id recorded as done, 200 `{"stale":true}` from an adapter), equal versions both run, one
 * delivery of an entity at a time (409 `ENTITY_BUSY` with `Retry-After`), a failed newer delivery
 * records nothing, unsigned deliveries bypass ordering (a huge unsigned version changes nothing),
 * `INVALID_VERSION`, `forgetVersion`, the outcome hook, and stores without the ordering operations
 * refused at construction.
 */

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { webhookHandler } from '../../adapters/fetch.ts';
import { isWebhookError, type WebhookError } from '../../src/errors.ts';
import type { OrderingOptions } from '../../src/ordering.ts';
import { createReceiver, type ReceiverOptions } from '../../src/receiver.ts';
import { signWebhook } from '../../src/sign.ts';
import { dynamoStore } from '../../src/stores/dynamodb.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import type { OutcomeEvent } from '../../src/telemetry.ts';
import type { WebhookInput } from '../../src/verify.ts';
import { SECRET } from './support.ts';

const ordering: OrderingOptions = { key: (event) => event.data.id, version: (event) => event.timestamp };

/** One delivery of `subscription.updated` for `entity` at `time`, freshly signed. */
async function event(id: string, entity: string | undefined, time: string): Promise<WebhookInput> {
  const body = JSON.stringify({ type: 'subscription.updated', timestamp: time, data: entity === undefined ? {} : { id: entity } });
  const signed = await signWebhook({ secret: SECRET, body, id });
  return { headers: signed.headers, body };
}

const unsigned = (id: string, body: string): WebhookInput => ({
  headers: { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) },
  body,
});

function build(options: Partial<ReceiverOptions> = {}) {
  const store = memoryStore();
  const applied: string[] = [];
  const receiver = createReceiver({ secrets: SECRET, idempotency: { store }, ordering, ...options });
  const apply = (webhook: { json<T>(): T }) => {
    const payload = webhook.json<{ timestamp: string; data: { id?: string } }>();
    applied.push(`${payload.data.id}@${payload.timestamp}`);
  };
  return { receiver, store, applied, apply };
}

async function refused(promise: Promise<unknown>): Promise<WebhookError> {
  try {
    await promise;
  } catch (error) {
    if (isWebhookError(error)) return error;
    throw error;
  }
  throw new Error('expected a WebhookError');
}

describe('ordering in the receiver', () => {
  it('a stale delivery does not run its handler; its retry is a duplicate; an equal version runs', async () => {
    const { receiver, applied, apply } = build();
    expect((await receiver.handle(await event('evt_new', 'sub_1', '2026-03-01T10:05:00.000002Z'), apply)).outcome).toBe('processed');
    expect((await receiver.handle(await event('evt_old', 'sub_1', '2026-03-01T10:05:00.000001Z'), apply)).outcome).toBe('stale');
    expect((await receiver.handle(await event('evt_old', 'sub_1', '2026-03-01T10:05:00.000001Z'), apply)).outcome).toBe('duplicate');
    expect((await receiver.handle(await event('evt_same', 'sub_1', '2026-03-01T12:05:00.000002+02:00'), apply)).outcome).toBe('processed');
    // Another entity is not affected.
    expect((await receiver.handle(await event('evt_other', 'sub_2', '2026-03-01T09:00:00Z'), apply)).outcome).toBe('processed');
    expect(applied).toEqual(['sub_1@2026-03-01T10:05:00.000002Z', 'sub_1@2026-03-01T12:05:00.000002+02:00', 'sub_2@2026-03-01T09:00:00Z']);
  });

  it('one delivery of an entity at a time: another is ENTITY_BUSY (409, Retry-After), and runs once the first is done', async () => {
    const { receiver, applied, apply } = build({ idempotency: { store: memoryStore(), lockSeconds: 30 } });
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const first = receiver.handle(await event('evt_1', 'sub_1', '2026-03-01T10:00:00Z'), async (webhook) => {
      started();
      await held;
      apply(webhook);
    });
    await running;
    const busy = await refused(receiver.handle(await event('evt_2', 'sub_1', '2026-03-01T10:01:00Z'), apply));
    expect([busy.code, busy.status, busy.retryAfterSeconds]).toEqual(['ENTITY_BUSY', 409, 30]);
    // Another entity runs meanwhile.
    expect((await receiver.handle(await event('evt_3', 'sub_2', '2026-03-01T10:00:00Z'), apply)).outcome).toBe('processed');
    finish();
    expect((await first).outcome).toBe('processed');
    expect((await receiver.handle(await event('evt_2', 'sub_1', '2026-03-01T10:01:00Z'), apply)).outcome).toBe('processed');
    expect(applied).toEqual(['sub_2@2026-03-01T10:00:00Z', 'sub_1@2026-03-01T10:00:00Z', 'sub_1@2026-03-01T10:01:00Z']);
  });

  it('exclusive: false lets deliveries of one entity run side by side, and the version never goes down', async () => {
    const { receiver, applied, apply } = build({ ordering: { ...ordering, exclusive: false } });
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    const older = receiver.handle(await event('evt_old', 'sub_1', '2026-03-01T10:00:00Z'), async (webhook) => {
      await held;
      apply(webhook);
    });
    expect((await receiver.handle(await event('evt_new', 'sub_1', '2026-03-01T10:05:00Z'), apply)).outcome).toBe('processed');
    finish();
    // The slow older one was let in before the newer one completed, so it finishes after it (documented).
    expect((await older).outcome).toBe('processed');
    expect((await receiver.handle(await event('evt_mid', 'sub_1', '2026-03-01T10:03:00Z'), apply)).outcome).toBe('stale');
    expect(applied).toEqual(['sub_1@2026-03-01T10:05:00Z', 'sub_1@2026-03-01T10:00:00Z']);
  });

  it('a newer delivery whose handler fails records nothing: an older one then runs', async () => {
    const { receiver, applied, apply } = build();
    const failure = new Error('database down');
    await expect(receiver.handle(await event('evt_new', 'sub_1', '2026-03-01T10:05:00Z'), () => Promise.reject(failure))).rejects.toBe(failure);
    expect((await receiver.handle(await event('evt_old', 'sub_1', '2026-03-01T10:00:00Z'), apply)).outcome).toBe('processed');
    expect((await receiver.handle(await event('evt_new', 'sub_1', '2026-03-01T10:05:00Z'), apply)).outcome).toBe('processed');
    expect(applied).toEqual(['sub_1@2026-03-01T10:00:00Z', 'sub_1@2026-03-01T10:05:00Z']);
  });

  it('an unsigned delivery with a huge version changes nothing: it bypasses ordering', async () => {
    const { receiver, applied, apply } = build({ unsigned: 'accept' });
    const huge = JSON.stringify({ type: 'subscription.updated', timestamp: '9999-12-31T23:59:59.999999999Z', data: { id: 'sub_1' } });
    expect((await receiver.handle(unsigned('evt_forged', huge), apply)).outcome).toBe('processed');
    // No version was recorded: an ordinary signed event of that entity is not stale.
    expect((await receiver.handle(await event('evt_real', 'sub_1', '2026-03-01T10:00:00Z'), apply)).outcome).toBe('processed');
    expect(applied).toEqual(['sub_1@9999-12-31T23:59:59.999999999Z', 'sub_1@2026-03-01T10:00:00Z']);
    // And an unsigned older one is never judged stale either.
    const old = JSON.stringify({ type: 'subscription.updated', timestamp: '2000-01-01T00:00:00Z', data: { id: 'sub_1' } });
    expect((await receiver.handle(unsigned('evt_old_unsigned', old), apply)).outcome).toBe('processed');
  });

  it('INVALID_VERSION for a key or version that cannot be read; an event whose key is undefined is not ordered', async () => {
    const { receiver, applied, apply } = build();
    const bad = await refused(receiver.handle(await event('evt_bad', 'sub_1', 'yesterday'), apply));
    expect([bad.code, bad.status]).toEqual(['INVALID_VERSION', 400]);
    expect((await receiver.handle(await event('evt_none', undefined, 'not a time'), apply)).outcome).toBe('processed');
    const notJson = await signWebhook({ secret: SECRET, body: 'plain text', id: 'evt_text' });
    expect((await refused(receiver.handle({ headers: notJson.headers, body: 'plain text' }, apply))).code).toBe('INVALID_PAYLOAD');
    expect(applied).toEqual(['undefined@not a time']);
  });

  it('forgetVersion resets an entity in the namespace, and needs the namespace when it is a function', async () => {
    const { receiver, apply } = build();
    await receiver.handle(await event('evt_new', 'sub_1', '2026-03-01T10:05:00Z'), apply);
    expect((await receiver.handle(await event('evt_old', 'sub_1', '2026-03-01T10:00:00Z'), apply)).outcome).toBe('stale');
    await receiver.forgetVersion('sub_1', { namespace: 'other' });
    expect((await receiver.handle(await event('evt_old2', 'sub_1', '2026-03-01T10:00:00Z'), apply)).outcome).toBe('stale');
    await receiver.forgetVersion('sub_1');
    expect((await receiver.handle(await event('evt_old3', 'sub_1', '2026-03-01T10:00:00Z'), apply)).outcome).toBe('processed');

    const tenants = createReceiver({ secrets: SECRET, ordering, idempotency: { store: memoryStore(), namespace: () => 't.acme' } });
    await expect(tenants.forgetVersion('sub_1')).rejects.toThrow(/options\.namespace/);
    await tenants.forgetVersion('sub_1', { namespace: 't.acme' });
    await expect(createReceiver({ secrets: SECRET }).forgetVersion('sub_1')).rejects.toThrow(TypeError);
  });

  it('tells onOutcome (stale, 200) and answers through an adapter: 200 {"stale":true}, 409 ENTITY_BUSY with Retry-After', async () => {
    const outcomes: OutcomeEvent[] = [];
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    const handler = webhookHandler({ secrets: SECRET, ordering, idempotency: { store: memoryStore() }, onOutcome: (outcome) => outcomes.push(outcome) }, async (webhook) => {
      if (webhook.id === 'evt_slow') await held;
      return new Response(null, { status: 204 });
    });
    const request = async (id: string, time: string) => {
      const input = await event(id, 'sub_1', time);
      return new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: input.headers as Record<string, string>, body: input.body as string });
    };
    expect((await handler(await request('evt_new', '2026-03-01T10:05:00Z'))).status).toBe(204);
    const stale = await handler(await request('evt_old', '2026-03-01T10:00:00Z'));
    expect([stale.status, await stale.text()]).toEqual([200, '{"stale":true}']);
    const slow = handler(await request('evt_slow', '2026-03-01T10:06:00Z'));
    let busy = await handler(await request('evt_next', '2026-03-01T10:07:00Z'));
    // The slow one may not have claimed yet on a loaded machine: wait for its claim, bounded.
    for (let i = 0; i < 100 && busy.status !== 409; i++) busy = await handler(await request(`evt_next_${i}`, '2026-03-01T10:07:00Z'));
    expect(busy.status).toBe(409);
    expect(busy.headers.get('retry-after')).toBe('30');
    expect(await busy.json()).toMatchObject({ error: 'ENTITY_BUSY' });
    finish();
    expect((await slow).status).toBe(204);
    expect(outcomes.map((o) => [o.outcome, o.status, o.code])).toContainEqual(['stale', 200, undefined]);
    expect(outcomes.map((o) => [o.outcome, o.status, o.code])).toContainEqual(['rejected', 409, 'ENTITY_BUSY']);
  });

  it('refuses a store without the ordering operations (DynamoDB), or with some of them, naming what is missing', () => {
    const client = new DynamoDBClient({ endpoint: 'http://127.0.0.1:9', region: 'local', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
    try {
      expect(() => createReceiver({ secrets: SECRET, ordering, idempotency: { store: dynamoStore({ client, table: 'claims' }) } })).toThrow(
        /the dynamodb store has no ordering operations \(ordering: \{ claimOrdered, completeOrdered, releaseOrdered, extendOrdered, forgetVersion \}\)/,
      );
    } finally {
      client.destroy();
    }
    // An `ordering` without all five (a store written in JavaScript, which no type stops) is
    // refused with or without the receiver's ordering, naming what is missing.
    const memory = memoryStore();
    const { forgetVersion: _dropped, extendOrdered: _alsoDropped, ...some } = memory.ordering;
    const partial = { ...memory, ordering: some } as unknown as IdempotencyStore;
    const missing = new TypeError(
      'idempotency.store ordering has no extendOrdered, forgetVersion: the ordering operations (claimOrdered, completeOrdered, releaseOrdered, extendOrdered, forgetVersion) come all together',
    );
    expect(() => createReceiver({ secrets: SECRET, ordering, idempotency: { store: partial } })).toThrow(missing);
    expect(() => createReceiver({ secrets: SECRET, idempotency: { store: partial } })).toThrow(missing);
    const notAnObject = { ...memory, ordering: true } as unknown as IdempotencyStore;
    expect(() => createReceiver({ secrets: SECRET, idempotency: { store: notAnObject } })).toThrow(
      new TypeError('idempotency.store ordering must be an object with claimOrdered, completeOrdered, releaseOrdered, extendOrdered, forgetVersion'),
    );
    expect(() => createReceiver({ secrets: SECRET, ordering, idempotency: false })).toThrow(/idempotency: false/);
    expect(() => createReceiver({ secrets: SECRET, ordering: { key: 'data.id' } as never })).toThrow(/ordering\.key must be a function/);
    // Without ordering, the DynamoDB store is as welcome as ever.
    expect(() => createReceiver({ secrets: SECRET, idempotency: { store: dynamoStore({ client, table: 'claims' }) } })).not.toThrow();
  });
});

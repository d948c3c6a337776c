/**
 * OpenTelemetry through the real SDK: an in-memory metric exporter read on demand and an
 * in-memory span exporter, registered globally as an app would, after the receiver was built
 * (instruments are taken lazily, so that order must work).
 */

import * as api from '@opentelemetry/api';
import type { ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { AlwaysOffSampler, BasicTracerProvider, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { webhookHandler } from '../../adapters/fetch.ts';
import { tenantKeys } from '../../src/keys.ts';
import { createReceiver, type ReceiverOptions } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { StoreError } from '../../src/stores/types.ts';
import type { OutcomeEvent } from '../../src/telemetry.ts';
import { points, total as sum, useOtelSdk } from '../support/otel.ts';

const SECRET = generateSecret();
const OLD_SECRET = generateSecret();
const secrets = [
  { key: SECRET, keyId: 'key-new' },
  { key: OLD_SECRET, keyId: 'key-old' },
];

// Built before any provider is registered, as a module-scope receiver would be.
const early = createReceiver({ secrets, telemetry: { api } });

// The SDK is registered before the tests, after `early` was built.
const { collect, spansNamed, spanExporter } = useOtelSdk();

async function request(id: string, { secret = SECRET, body = '{"type":"invoice.paid"}', timestamp }: { secret?: string; body?: string; timestamp?: number } = {}): Promise<Request> {
  const signed = await signWebhook({ secret, body, id, ...(timestamp === undefined ? {} : { timestamp }) });
  return new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: signed.headers, body });
}

describe('OpenTelemetry through the real SDK', () => {
  it('counts outcomes, verified keys and versions, and times the store and the handler', async () => {
    const events: OutcomeEvent[] = [];
    const options: ReceiverOptions = { secrets, telemetry: { api }, onOutcome: (event) => events.push(event) };
    const receiver = createReceiver(options);
    const before = await collect();
    await receiver.handle(await request('msg_t1'), () => undefined);
    await receiver.handle(await request('msg_t1'), () => undefined); // duplicate
    await receiver.handle(await request('msg_t2', { secret: OLD_SECRET }), () => undefined);
    await expect(receiver.handle(await request('msg_t3'), () => Promise.reject(new Error('down')))).rejects.toThrow('down');
    const forged = await request('msg_t4');
    forged.headers.set('webhook-signature', 'v1,' + btoa('x'.repeat(32)));
    await expect(receiver.handle(forged, () => undefined)).rejects.toMatchObject({ code: 'SIGNATURE_MISMATCH' });

    const metrics = await collect();
    // Counters are cumulative over the file: exactly what these five deliveries added.
    const added = (name: string, attributes: Record<string, unknown>) => sum(metrics, name, attributes) - sum(before, name, attributes);
    expect(added('webhook.deliveries', { 'webhook.outcome': 'processed' })).toBe(2);
    expect(added('webhook.deliveries', { 'webhook.outcome': 'duplicate' })).toBe(1);
    expect(added('webhook.deliveries', { 'webhook.outcome': 'failed' })).toBe(1);
    expect(added('webhook.deliveries', { 'webhook.outcome': 'rejected', 'webhook.error.code': 'SIGNATURE_MISMATCH' })).toBe(1);
    // The old key still signs traffic: not ready to retire.
    expect(added('webhook.verified', { 'webhook.key.id': 'key-old', 'webhook.signature.version': 'v1' })).toBe(1);
    expect(added('webhook.verified', { 'webhook.key.id': 'key-new', 'webhook.signature.version': 'v1' })).toBe(3);
    const storeOps = points(metrics, 'webhook.store.duration');
    expect(storeOps.map((point) => `${point.attributes['webhook.store']} ${point.attributes['webhook.store.operation']}`)).toEqual(
      expect.arrayContaining(['memory claim', 'memory complete', 'memory release']),
    );
    const handlerRuns = (m: ResourceMetrics | undefined, outcome: string) =>
      points(m, 'webhook.handler.duration')
        .filter((point) => point.attributes['webhook.outcome'] === outcome)
        .reduce((total, point) => total + (point.value as { count: number }).count, 0);
    expect(handlerRuns(metrics, 'processed') - handlerRuns(before, 'processed')).toBe(2);
    expect(handlerRuns(metrics, 'failed') - handlerRuns(before, 'failed')).toBe(1);
    // No metric attribute carries an id.
    for (const metric of (metrics?.scopeMetrics ?? []).flatMap((scope) => scope.metrics)) {
      for (const point of metric.dataPoints) expect(JSON.stringify(point.attributes)).not.toMatch(/msg_/);
    }

    expect(events.map((event) => event.outcome)).toEqual(['processed', 'duplicate', 'processed', 'failed', 'rejected']);
    expect(events[0]).toMatchObject({ outcome: 'processed', status: 200, webhookId: 'msg_t1', keyId: 'key-new', signed: true });
    expect(events[2]).toMatchObject({ keyId: 'key-old' });
    expect(events[4]).toMatchObject({ outcome: 'rejected', code: 'SIGNATURE_MISMATCH', status: 401, webhookId: 'msg_t4', signed: false });
    for (const event of events) expect(event.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('records the clock skew in seconds, signed', async () => {
    const receiver = createReceiver({ secrets, telemetry: { api } });
    const before = await collect();
    const countBefore = points(before, 'webhook.clock_skew').reduce((total, point) => total + (point.value as { count: number }).count, 0);
    await receiver.handle(await request('msg_skew', { timestamp: Math.floor(Date.now() / 1000) - 120 }), () => undefined);
    const after = await collect();
    const all = points(after, 'webhook.clock_skew');
    expect(all.reduce((total, point) => total + (point.value as { count: number }).count, 0)).toBe(countBefore + 1);
    const past = all.find((point) => point.attributes['webhook.clock_skew.direction'] === 'past')!.value as { max: number };
    expect(past.max).toBeGreaterThanOrEqual(119);
    expect(past.max).toBeLessThan(125);
    await receiver.handle(await request('msg_ahead', { timestamp: Math.floor(Date.now() / 1000) + 60 }), () => undefined);
    const ahead = points(await collect(), 'webhook.clock_skew').find((point) => point.attributes['webhook.clock_skew.direction'] === 'future')!.value as { max: number };
    expect(ahead.max).toBeGreaterThan(55);
  });

  it('nests store spans and the handler work under one webhook.receive span, with no secret or body', async () => {
    const receiver = createReceiver({ secrets, telemetry: { api } });
    const tracer = api.trace.getTracer('app');
    await receiver.handle(await request('msg_span', { body: '{"card":"4242-secret-body"}' }), async () => {
      await new Promise((resolve) => setImmediate(resolve));
      tracer.startActiveSpan('app.work', (span) => span.end());
    });
    const [receive] = spansNamed('webhook.receive');
    expect(receive).toBeDefined();
    expect(receive!.attributes).toMatchObject({
      'webhook.id': 'msg_span',
      'webhook.outcome': 'processed',
      'webhook.key.id': 'key-new',
      'webhook.signature.version': 'v1',
      'webhook.signed': true,
      'webhook.response.status': 200,
    });
    expect(receive!.kind).toBe(api.SpanKind.SERVER);
    const receiveId = receive!.spanContext().spanId;
    const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
    expect(spansNamed('webhook.store.claim').map(parentOf)).toEqual([receiveId]);
    expect(spansNamed('webhook.store.complete').map(parentOf)).toEqual([receiveId]);
    expect(spansNamed('app.work').map(parentOf)).toEqual([receiveId]);
    const everything = JSON.stringify(spanExporter.getFinishedSpans().map((span) => [span.name, span.attributes]));
    expect(everything).not.toContain(SECRET.slice(6));
    expect(everything).not.toContain('4242-secret-body');
    expect(everything).not.toMatch(/v1,/);
  });

  it('marks a rejected delivery as an error span with its code, under the request span of the app', async () => {
    const receiver = createReceiver({ secrets, telemetry: { api } });
    const tracer = api.trace.getTracer('http');
    const stale = await request('msg_old', { timestamp: Math.floor(Date.now() / 1000) - 3600 });
    await tracer.startActiveSpan('POST /webhooks', async (server) => {
      await expect(receiver.handle(stale, () => undefined)).rejects.toMatchObject({ code: 'TIMESTAMP_TOO_OLD' });
      server.end();
    });
    const [receive] = spansNamed('webhook.receive');
    expect(receive!.attributes).toMatchObject({ 'webhook.outcome': 'rejected', 'webhook.error.code': 'TIMESTAMP_TOO_OLD' });
    expect(receive!.attributes['webhook.id']).toBeUndefined(); // never verified: not on the span
    expect(receive!.status.code).toBe(api.SpanStatusCode.ERROR);
    expect(receive!.kind).toBe(api.SpanKind.INTERNAL);
    expect(receive!.parentSpanContext?.spanId).toBe(spansNamed('POST /webhooks')[0]!.spanContext().spanId);
  });

  it('reports how full the memory store is', async () => {
    const store = memoryStore({ max: 10 });
    const receiver = createReceiver({ secrets, telemetry: { api }, idempotency: { store } });
    for (const id of ['msg_g1', 'msg_g2', 'msg_g3']) await receiver.handle(await request(id), () => undefined);
    const metrics = await collect();
    const signed = points(metrics, 'webhook.memory_store.utilization').filter((point) => point.attributes['webhook.store.key_space'] === 'signed');
    expect(signed.map((point) => point.value)).toContain(0.3);
  });

  it('keeps two memory stores of one process apart in the fullness gauge', async () => {
    const first = createReceiver({ secrets, telemetry: { api }, idempotency: { store: memoryStore({ max: 4 }) } });
    const second = createReceiver({ secrets, telemetry: { api }, idempotency: { store: memoryStore({ max: 8 }) } });
    await first.handle(await request('msg_gauge_1'), () => undefined);
    await second.handle(await request('msg_gauge_2'), () => undefined);
    const signed = points(await collect(), 'webhook.memory_store.utilization').filter((point) => point.attributes['webhook.store.key_space'] === 'signed');
    const instances = new Map(signed.map((point) => [point.attributes['webhook.store.instance'], point.value]));
    expect([...instances.values()]).toEqual(expect.arrayContaining([0.25, 0.125]));
  });

  it('takes its instruments on first use: a receiver built before the provider still reports', async () => {
    await early.handle(await request('msg_early'), () => undefined);
    const metrics = await collect();
    expect(sum(metrics, 'webhook.verified', { 'webhook.key.id': 'key-new' })).toBeGreaterThan(0);
    expect(spansNamed('webhook.receive').some((span) => span.attributes['webhook.id'] === 'msg_early')).toBe(true);
  });

  it('through an adapter: the handler runs inside the span, and INVALID_PAYLOAD is a rejection with its code', async () => {
    const events: OutcomeEvent[] = [];
    const { z } = await import('zod');
    const handler = webhookHandler({ secrets, telemetry: { api }, onOutcome: (event) => events.push(event), onRejected: () => {} }, (webhook) => {
      webhook.json(z.object({ amount: z.number() }));
      api.trace.getTracer('app').startActiveSpan('app.inside', (span) => span.end());
    });
    expect((await handler(await request('msg_a1', { body: '{"amount":5}' }))).status).toBe(204);
    const bad = await handler(await request('msg_a2', { body: '{"amount":"five"}' }));
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: 'INVALID_PAYLOAD' });
    expect(events.map((event) => [event.outcome, event.status, event.code])).toEqual([
      ['processed', 204, undefined],
      ['rejected', 400, 'INVALID_PAYLOAD'],
    ]);
    const receive = spansNamed('webhook.receive').find((span) => span.attributes['webhook.id'] === 'msg_a1')!;
    expect(spansNamed('app.inside')[0]!.parentSpanContext?.spanId).toBe(receive.spanContext().spanId);
  });

  it('a StoreError from the handler is recorded as answered, 503 STORE_UNAVAILABLE, not as a 500', async () => {
    const events: OutcomeEvent[] = [];
    const handler = webhookHandler({ secrets, telemetry: { api }, onOutcome: (event) => events.push(event) }, () => {
      throw new StoreError('postgres', 'not_ready', 'postgres store: the connection to PostgreSQL was lost');
    });
    const before = await collect();
    const response = await handler(await request('msg_store_gone'));
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ error: 'STORE_UNAVAILABLE' });
    expect(events.map((event) => [event.outcome, event.status, event.code])).toEqual([['failed', 503, 'STORE_UNAVAILABLE']]);
    const receive = spansNamed('webhook.receive').find((span) => span.attributes['webhook.id'] === 'msg_store_gone')!;
    expect(receive.attributes['webhook.response.status']).toBe(503);
    expect(receive.attributes['webhook.error.code']).toBe('STORE_UNAVAILABLE');
    const metrics = await collect();
    const added = sum(metrics, 'webhook.deliveries', { 'webhook.outcome': 'failed', 'webhook.error.code': 'STORE_UNAVAILABLE' }) - sum(before, 'webhook.deliveries', { 'webhook.outcome': 'failed', 'webhook.error.code': 'STORE_UNAVAILABLE' });
    expect(added).toBe(1);
  });

  it('counts a refusal once, whether the receiver or only the adapter saw it', async () => {
    const events: OutcomeEvent[] = [];
    const handler = webhookHandler({ secrets, telemetry: { api }, onOutcome: (event) => events.push(event), onRejected: () => {} }, () => undefined);
    const forged = await request('msg_forged_once');
    forged.headers.set('webhook-signature', 'v1,' + btoa('y'.repeat(32)));
    expect((await handler(forged)).status).toBe(401);
    const consumed = await request('msg_read_before');
    await consumed.text(); // the body is gone: refused by the adapter's read, before the receiver
    expect((await handler(consumed)).status).toBe(500);
    expect(events.map((event) => [event.outcome, event.code])).toEqual([
      ['rejected', 'SIGNATURE_MISMATCH'],
      ['rejected', 'BODY_UNAVAILABLE'],
    ]);
  });

  it('times lease renewals as store operations (extend)', async () => {
    const inner = memoryStore();
    let extended!: () => void;
    const renewal = new Promise<void>((resolve) => (extended = resolve));
    const store = { ...inner, name: 'memory', extend: (key: string, token: string, lockMs: number) => (extended(), inner.extend(key, token, lockMs)) };
    const receiver = createReceiver({ secrets, telemetry: { api }, idempotency: { store, lockSeconds: 0.3 } });
    const before = await collect();
    // The handler runs until the receiver has renewed its claim once.
    await receiver.handle(await request('msg_renewed'), () => renewal);
    const extendCount = (m: ResourceMetrics | undefined) =>
      points(m, 'webhook.store.duration')
        .filter((point) => point.attributes['webhook.store.operation'] === 'extend')
        .reduce((total, point) => total + (point.value as { count: number }).count, 0);
    expect(extendCount(await collect()) - extendCount(before)).toBeGreaterThanOrEqual(1);
    await receiver.close({ timeoutMs: 0 });
  });

  it('tenant keys: spans carry webhook.tenant; no metric attribute carries a tenant, whatever the outcome', async () => {
    // Names no other test uses, so any attribute holding them can only come from here.
    const table: Record<string, string> = { 'tenant-acme-7q': generateSecret(), 'tenant-globex-7q': generateSecret() };
    const keys = tenantKeys({ tenant: (request) => request.path.split('/')[2], load: async (tenant) => table[tenant] });
    const handler = webhookHandler({ keys, telemetry: { api }, onRejected: () => {} }, () => new Response(null, { status: 204 }));
    const to = async (tenant: string, secret: string, id: string) => {
      const body = '{"type":"invoice.paid"}';
      const signed = await signWebhook({ secret, body, id });
      return (await handler(new Request(`http://127.0.0.1/webhooks/${tenant}`, { method: 'POST', headers: signed.headers, body }))).status;
    };
    const before = await collect();
    expect(await to('tenant-acme-7q', table['tenant-acme-7q']!, 'msg_tn_1')).toBe(204);
    expect(await to('tenant-acme-7q', table['tenant-acme-7q']!, 'msg_tn_1')).toBe(200);
    expect(await to('tenant-globex-7q', table['tenant-globex-7q']!, 'msg_tn_1')).toBe(204);
    expect(await to('tenant-globex-7q', table['tenant-acme-7q']!, 'msg_tn_2')).toBe(401);
    expect(await to('tenant-initech-7q', table['tenant-acme-7q']!, 'msg_tn_3')).toBe(404);

    // The spans name the tenant: the telemetry did see it.
    expect(spansNamed('webhook.receive').map((span) => span.attributes['webhook.tenant'])).toEqual(['tenant-acme-7q', 'tenant-acme-7q', 'tenant-globex-7q', undefined, undefined]);
    const metrics = await collect();
    const all = (metrics?.scopeMetrics ?? []).flatMap((scope) => scope.metrics).flatMap((metric) => metric.dataPoints.map((point) => point.attributes as Record<string, unknown>));
    // What these five deliveries added, per outcome: they were counted, only without a tenant.
    const added = (attributes: Record<string, unknown>) => sum(metrics, 'webhook.deliveries', attributes) - sum(before, 'webhook.deliveries', attributes);
    expect([added({ 'webhook.outcome': 'processed' }), added({ 'webhook.outcome': 'duplicate' }), added({ 'webhook.outcome': 'rejected' })]).toEqual([2, 1, 2]);
    expect(added({ 'webhook.outcome': 'rejected', 'webhook.error.code': 'UNKNOWN_TENANT' })).toBe(1);
    for (const attributes of all) {
      expect(Object.keys(attributes).filter((key) => key.includes('tenant'))).toEqual([]);
      expect(Object.values(attributes).filter((value) => typeof value === 'string' && value.includes('-7q'))).toEqual([]);
    }
  });

  it('with a sampler that drops the delivery: no spans, no child spans, the store still timed', async () => {
    const dropping = new BasicTracerProvider({ sampler: new AlwaysOffSampler(), spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
    const offApi = { ...api, trace: { ...api.trace, getTracer: (name: string) => dropping.getTracer(name) } } as typeof api;
    const receiver = createReceiver({ secrets, telemetry: { api: offApi } });
    const claims = (m: ResourceMetrics | undefined) =>
      points(m, 'webhook.store.duration')
        .filter((point) => point.attributes['webhook.store.operation'] === 'claim')
        .reduce((total, point) => total + (point.value as { count: number }).count, 0);
    const before = await collect();
    await receiver.handle(await request('msg_dropped'), () => undefined);
    expect(spanExporter.getFinishedSpans()).toEqual([]);
    expect(claims(await collect()) - claims(before)).toBe(1);
    await dropping.shutdown();
  });

  it('refuses a telemetry option that is not the API', () => {
    expect(() => createReceiver({ secrets, telemetry: { api: { ...api, context: { with: api.context.with } } as never } })).toThrow(TypeError);
    expect(() => createReceiver({ secrets, telemetry: { api: {} as never } })).toThrow(TypeError);
    expect(() => createReceiver({ secrets, onOutcome: 'yes' as never })).toThrow(TypeError);
  });
});

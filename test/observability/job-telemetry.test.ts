/**
 * What an inbox worker reports about its jobs, through the real OpenTelemetry SDK (an in-memory
 * metric exporter read on demand, an in-memory span exporter) and a real worker on BullMQ against
 * the test's redis-server: the `webhook.jobs` counter and `webhook.job.duration` histogram by
 * outcome and engine, one `webhook.job` span per delivery with the handler's spans under it, the
 * log lines of failed jobs, and a telemetry API or hooks that throw without changing any job.
 */

import { randomBytes } from 'node:crypto';
import * as api from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { INBOX_JOB_FORMAT, type Inbox, type InboxHandler, type InboxJob, type WorkOptions } from '../../src/inbox/types.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { acceptedJob, Outcomes } from '../inbox/conformance.ts';
import { total, useOtelSdk } from '../support/otel.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';

const { collect, spansNamed } = useOtelSdk();
const connections: { disconnect(): void }[] = [];

afterAll(() => {
  for (const connection of connections) connection.disconnect();
});

const jobSpansOf = (id: string): ReadableSpan[] => spansNamed('webhook.job').filter((span) => span.attributes['webhook.id'] === id);

let ids = 0;
const freshId = (label: string) => `msg_jt_${label}_${process.pid}_${ids++}`;

/** What a logger was told. */
class Recorded {
  readonly warnings: [Record<string, unknown>, string][] = [];
  readonly errors: [Record<string, unknown>, string][] = [];
  readonly logger = {
    warn: (fields: object, message: string) => void this.warnings.push([fields as Record<string, unknown>, message]),
    error: (fields: object, message: string) => void this.errors.push([fields as Record<string, unknown>, message]),
  };
}

/** Runs `body` with an inbox on a fresh BullMQ queue and one worker, closing both whatever happens. */
async function withWorker(
  handler: InboxHandler,
  work: WorkOptions,
  body: (inbox: Inbox) => Promise<void>,
  { maxAttempts = 3 }: { maxAttempts?: number } = {},
): Promise<void> {
  const connection = await connectIORedis(sharedRedisUrl!);
  connections.push(connection);
  const queue = new Queue(`jobtel-${randomBytes(6).toString('hex')}`, { connection, prefix: 'test-jobtel' });
  const inbox = bullmqInbox({ queue, maxAttempts, backoff: { delayMs: 0 }, logger: { warn: () => {}, error: () => {} } });
  const worker = await inbox.work(handler, work);
  try {
    await body(inbox);
  } finally {
    await worker.close({ timeoutMs: 2000 });
    await queue.obliterate({ force: true });
    await queue.close();
  }
}

describe.skipIf(sharedRedisUrl === null)('an inbox worker through the real OpenTelemetry SDK (BullMQ)', () => {
  it('counts each delivery of a job once, by outcome and engine; times the handler; one span per delivery with the handler inside; no id on metrics', async () => {
    const store = memoryStore();
    const outcomes = new Outcomes();
    const logs = new Recorded();
    const processed = await acceptedJob('{"type":"a"}', { id: freshId('processed') });
    const flaky = await acceptedJob('{"type":"b"}', { id: freshId('flaky') });
    const poison = await acceptedJob('{"type":"c"}', { id: freshId('poison') });
    const busy = await acceptedJob('{"type":"d"}', { id: freshId('busy') });
    const done = await acceptedJob('{"type":"e"}', { id: freshId('done') });
    // A dead worker's lease on `busy`, not expired yet; `done` ran to success before.
    expect((await store.claim(`default:w:s:${busy.id}`, 1500)).status).toBe('acquired');
    const claim = await store.claim(`default:w:s:${done.id}`, 10_000);
    if (claim.status !== 'acquired') throw new Error('not acquired');
    await store.complete(`default:w:s:${done.id}`, claim.token, 60_000);
    const tracer = api.trace.getTracer('app');
    const attempts = new Map<string, number[]>();

    const before = await collect();
    await withWorker(
      async (webhook, context) => {
        attempts.set(webhook.id, [...(attempts.get(webhook.id) ?? []), context.attempt]);
        await new Promise((resolve) => setImmediate(resolve));
        tracer.startActiveSpan('app.work', (span) => span.end());
        if (webhook.id === flaky.id && context.attempt === 1) throw new Error('downstream unavailable');
        if (webhook.id === poison.id) throw new PermanentError('account 7 was deleted');
      },
      { idempotency: { store }, telemetry: { api }, onOutcome: outcomes.record, logger: logs.logger },
      async (inbox) => {
        for (const job of [processed, flaky, poison, busy, done]) await inbox.enqueue(job);
        await outcomes.until(
          () =>
            outcomes.of(processed.id).includes('processed') &&
            outcomes.of(flaky.id).includes('processed') &&
            outcomes.of(poison.id).includes('dead_lettered') &&
            outcomes.of(busy.id).includes('processed') &&
            outcomes.of(done.id).includes('duplicate'),
          20_000,
        );
      },
    );
    expect(outcomes.of(processed.id)).toEqual(['processed']);
    expect(outcomes.of(flaky.id)).toEqual(['retried', 'processed']);
    expect(outcomes.of(poison.id)).toEqual(['dead_lettered']);
    expect(outcomes.of(busy.id)).toEqual(['deferred', 'processed']);
    expect(outcomes.of(done.id)).toEqual(['duplicate']);
    // The deferral spent no attempt.
    expect(attempts.get(busy.id)).toEqual([1]);
    expect(attempts.get(flaky.id)).toEqual([1, 2]);

    const metrics = await collect();
    const added = (name: string, attributes: Record<string, unknown>) => total(metrics, name, attributes) - total(before, name, attributes);
    const jobs = (outcome: string) => added('webhook.jobs', { 'webhook.job.outcome': outcome, 'webhook.job.engine': 'bullmq' });
    expect(['processed', 'retried', 'dead_lettered', 'deferred', 'duplicate', 'stale'].map(jobs)).toEqual([3, 1, 1, 1, 1, 0]);
    // Handler runs only: a deferred or duplicate delivery ran none.
    const runs = (outcome: string) => added('webhook.job.duration', { 'webhook.job.outcome': outcome, 'webhook.job.engine': 'bullmq' });
    expect(['processed', 'retried', 'dead_lettered', 'deferred', 'duplicate'].map(runs)).toEqual([3, 1, 1, 0, 0]);
    // Jobs are not deliveries: the receiver's counter did not move.
    expect(added('webhook.deliveries', {})).toBe(0);
    for (const metric of (metrics?.scopeMetrics ?? []).flatMap((scope) => scope.metrics)) {
      for (const point of metric.dataPoints) expect(JSON.stringify(point.attributes)).not.toMatch(/msg_|tenant|webhook\.id/);
    }

    // One span per delivery, 7 in all, each with its id, attempt, outcome and engine.
    const jobSpans = spansNamed('webhook.job');
    expect(jobSpans).toHaveLength(7);
    const [first] = jobSpansOf(processed.id);
    expect(first!.kind).toBe(api.SpanKind.CONSUMER);
    expect(first!.attributes).toEqual({
      'webhook.job.engine': 'bullmq',
      'webhook.id': processed.id,
      'webhook.job.attempt': 1,
      'webhook.signed': true,
      'webhook.key.id': 'key-2026',
      'webhook.job.outcome': 'processed',
    });
    expect(first!.status.code).toBe(api.SpanStatusCode.UNSET);
    const summary = (id: string) => jobSpansOf(id).map((span) => [span.attributes['webhook.job.attempt'], span.attributes['webhook.job.outcome'], span.status.code, span.status.message]);
    expect(summary(flaky.id)).toEqual([
      [1, 'retried', api.SpanStatusCode.ERROR, 'Error'],
      [2, 'processed', api.SpanStatusCode.UNSET, undefined],
    ]);
    expect(summary(poison.id)).toEqual([[1, 'dead_lettered', api.SpanStatusCode.ERROR, 'PermanentError']]);
    expect(summary(busy.id)).toEqual([
      [1, 'deferred', api.SpanStatusCode.UNSET, undefined],
      [1, 'processed', api.SpanStatusCode.UNSET, undefined],
    ]);
    expect(summary(done.id)).toEqual([[1, 'duplicate', api.SpanStatusCode.UNSET, undefined]]);
    // The handler's own spans nest under the delivery it ran in: one per handler run.
    const handlerRuns = jobSpans.filter((span) => ['processed', 'retried', 'dead_lettered'].includes(span.attributes['webhook.job.outcome'] as string));
    expect(
      spansNamed('app.work')
        .map((span) => span.parentSpanContext?.spanId)
        .sort(),
    ).toEqual(handlerRuns.map((span) => span.spanContext().spanId).sort());

    // Logged: the two failures, as warnings with the error; nothing for the rest.
    expect(logs.errors).toEqual([]);
    expect(logs.warnings.map(([fields, message]) => [fields.outcome, fields.webhookId, fields.attempt, fields.engine, (fields.err as Error).message, message])).toEqual([
      ['retried', flaky.id, 1, 'bullmq', 'downstream unavailable', 'inbox worker: a job failed and will be retried'],
      ['dead_lettered', poison.id, 1, 'bullmq', 'account 7 was deleted', 'inbox worker: a job failed and was dead-lettered'],
    ]);
    expect(logs.warnings[0]![0]).toMatchObject({ namespace: 'default', maxAttempts: 3 });
  });

  it('logs a job it cannot read once: to onError when given, else as an error, never also as a failed job', async () => {
    const unreadable = { ...(await acceptedJob('{}', { id: freshId('format') })), v: INBOX_JOB_FORMAT + 1 } as unknown as InboxJob;
    for (const withOnError of [true, false]) {
      const outcomes = new Outcomes();
      const logs = new Recorded();
      const reported: unknown[] = [];
      const work: WorkOptions = { telemetry: { api }, onOutcome: outcomes.record, logger: logs.logger };
      if (withOnError) work.onError = (error) => reported.push(error);
      await withWorker(() => undefined, work, async (inbox) => {
        await inbox.enqueue(unreadable);
        await outcomes.until(() => outcomes.events.length > 0);
      });
      expect(outcomes.events.map((event) => event.outcome)).toEqual(['dead_lettered']);
      expect(logs.warnings).toEqual([]);
      expect(reported.length + logs.errors.length).toBe(1);
      expect(logs.errors.length).toBe(withOnError ? 0 : 1);
      if (!withOnError) expect(logs.errors[0]![0]).toMatchObject({ stage: 'job', webhookId: '(unreadable job)' });
    }
    // Counted as dead-lettered, with a span that names no id (the job could not be read).
    const spans = spansNamed('webhook.job');
    expect(spans.map((span) => [span.attributes['webhook.job.outcome'], span.attributes['webhook.id']])).toEqual([
      ['dead_lettered', undefined],
      ['dead_lettered', undefined],
    ]);
  });

  it('a telemetry API, a hook and a logger that all throw change nothing about the jobs', async () => {
    const boom = () => {
      throw new Error('telemetry is broken');
    };
    // One API whose meter cannot even be taken; one whose every instrument, span and context throws
    // (the context after running the handler, so a second run would show).
    const noMeter = { ...api, metrics: { getMeter: boom } } as unknown as typeof api;
    const brokenSpan = { setAttribute: boom, setStatus: boom, isRecording: () => true, end: boom };
    const everythingThrows = {
      ...api,
      metrics: { getMeter: () => ({ createCounter: () => ({ add: boom }), createHistogram: () => ({ record: boom }), createObservableGauge: boom }) },
      trace: { ...api.trace, getTracer: () => ({ startSpan: () => brokenSpan }) },
      context: {
        active: () => api.context.active(),
        with: (_context: unknown, fn: () => unknown) => {
          fn();
          throw new Error('context is broken');
        },
      },
    } as unknown as typeof api;
    // And one whose context returns without running the function at all.
    const neverRuns = { ...api, context: { active: () => api.context.active(), with: () => undefined } } as unknown as typeof api;
    for (const broken of [noMeter, everythingThrows, neverRuns]) {
      const outcomes = new Outcomes();
      const attempts: number[] = [];
      const job = await acceptedJob('{}', { id: freshId('broken') });
      await withWorker(
        (_webhook, context) => {
          attempts.push(context.attempt);
          if (context.attempt === 1) throw new Error('first attempt fails');
        },
        {
          telemetry: { api: broken },
          onOutcome: (event) => {
            outcomes.record(event);
            boom();
          },
          logger: { warn: boom, error: boom },
        },
        async (inbox) => {
          await inbox.enqueue(job);
          await outcomes.until(() => outcomes.of(job.id).includes('processed'));
          expect(await inbox.deadLetters()).toEqual([]);
        },
      );
      expect(outcomes.of(job.id)).toEqual(['retried', 'processed']);
      expect(attempts).toEqual([1, 2]);
    }
  });

  it('refuses a telemetry option that is not the API, as the receiver does', async () => {
    const connection = await connectIORedis(sharedRedisUrl!);
    connections.push(connection);
    const queue = new Queue(`jobtel-${randomBytes(6).toString('hex')}`, { connection, prefix: 'test-jobtel' });
    try {
      const inbox = bullmqInbox({ queue, logger: { warn: () => {}, error: () => {} } });
      const message = "telemetry must be { api } with the app's @opentelemetry/api module (import * as api from '@opentelemetry/api')";
      await expect(inbox.work(() => undefined, { telemetry: { api: {} as never } })).rejects.toThrow(new TypeError(message));
      await expect(inbox.work(() => undefined, { telemetry: 'yes' as never })).rejects.toThrow(TypeError);
    } finally {
      await queue.close();
    }
  });
});

/**
 * The real OpenTelemetry SDK for tests, with no collector: an in-memory metric exporter read on
 * demand, an in-memory span exporter behind a simple processor, and an async-hooks context
 * manager, registered globally the way an app registers them. A file calls {@link useOtelSdk} once
 * at module scope; the hooks register before its tests and shut down after them.
 */

import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach } from 'vitest';

export interface OtelSdk {
  /** Where finished spans go (emptied before each test). */
  readonly spanExporter: InMemorySpanExporter;
  /** The metrics so far; `undefined` before anything was recorded (the exporter then has nothing). */
  collect(): Promise<ResourceMetrics | undefined>;
  /** The finished spans of that name. */
  spansNamed(name: string): ReadableSpan[];
}

/** Registers the SDK for this file's tests (globally, after anything the module built before). */
export function useOtelSdk(): OtelSdk {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
  const contextManager = new AsyncLocalStorageContextManager();
  beforeAll(() => {
    api.context.setGlobalContextManager(contextManager.enable());
    api.metrics.setGlobalMeterProvider(meterProvider);
    api.trace.setGlobalTracerProvider(tracerProvider);
  });
  afterAll(async () => {
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
    api.metrics.disable();
    api.trace.disable();
    api.context.disable();
  });
  beforeEach(() => spanExporter.reset());
  return {
    spanExporter,
    async collect() {
      metricExporter.reset();
      await reader.forceFlush();
      const all = metricExporter.getMetrics();
      return all[all.length - 1];
    },
    spansNamed: (name) => spanExporter.getFinishedSpans().filter((span) => span.name === name),
  };
}

/** The data points of one metric, with their attributes. */
export function points(metrics: ResourceMetrics | undefined, name: string): { attributes: Record<string, unknown>; value: unknown }[] {
  const found = (metrics?.scopeMetrics ?? []).flatMap((scope) => scope.metrics).filter((metric) => metric.descriptor.name === name);
  return found.flatMap((metric) => metric.dataPoints.map((point) => ({ attributes: point.attributes as Record<string, unknown>, value: point.value })));
}

/** A counter's sum, or a histogram's count, over the points whose attributes include `attributes`. */
export function total(metrics: ResourceMetrics | undefined, name: string, attributes: Record<string, unknown>): number {
  return points(metrics, name)
    .filter((point) => Object.entries(attributes).every(([key, value]) => point.attributes[key] === value))
    .reduce((sum, point) => sum + (typeof point.value === 'number' ? point.value : (point.value as { count: number }).count), 0);
}

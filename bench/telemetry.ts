/**
 * Telemetry overhead per delivery: `receiver.handle` on a 1 KiB message with a memory store, a
 * fresh id each time (verify, claim, handler, complete), compared in one process with the same
 * receiver built without `telemetry`:
 *
 * 1. `telemetry: { api }` with no provider registered (every instrument a no-op);
 * 2. the same after the OpenTelemetry SDK is registered (a MeterProvider with a reader, a
 *    BasicTracerProvider with a span processor that drops finished spans, an AsyncLocalStorage
 *    context manager): what an instrumented app pays.
 *
 * Run: `npx tsx bench/telemetry.ts` (about 30 s).
 */

import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, NoopSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createReceiver, memoryStore, type Receiver, type ReceiverOptions, type WebhookInput } from '../src/index.ts';
import { jsonBody, KiB, newSecret, signedMessage } from './fixtures.ts';
import { ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const { secret, key } = newSecret();
const body = jsonBody(KiB);
let sink: unknown;

function candidate(name: string, options: Partial<ReceiverOptions>): Candidate {
  let receiver: Receiver;
  let inputs: WebhookInput[] = [];
  return {
    name,
    prepare(n) {
      receiver = createReceiver({ secrets: secret, idempotency: { store: memoryStore({ max: n + 10 }) }, ...options });
      inputs = Array.from({ length: n }, () => {
        const message = signedMessage(key, body);
        return { headers: message.headers, body: message.body };
      });
    },
    async run(n) {
      for (let i = 0; i < n; i++) sink = await receiver.handle(inputs[i]!, () => 1);
    },
  };
}

async function compare(label: string, other: Candidate): Promise<void> {
  const baseline = candidate('no telemetry', {});
  const timings = await timeInterleaved([baseline, other], { reps: 9, rounds: 11, batchMs: 40, warmupMs: 800, minIterations: 50 });
  const base = summarize(series(timings, baseline.name));
  const with_ = summarize(series(timings, other.name));
  const ratio = summarize(ratios(series(timings, other.name), series(timings, baseline.name)));
  console.log(
    `${label}: baseline ${(base.median * 1e6).toFixed(2)} µs, with ${(with_.median * 1e6).toFixed(2)} µs per delivery; ` +
      `ratio ${ratio.median.toFixed(3)} (min ${ratio.min.toFixed(3)}, max ${ratio.max.toFixed(3)}); ` +
      `cost ${((with_.median - base.median) * 1e6).toFixed(2)} µs per delivery`,
  );
}

await compare('telemetry: { api }, no provider registered', candidate('api, no provider', { telemetry: { api } }));

const reader = new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 3_600_000 });
api.metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new NoopSpanProcessor()] }));
api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
await compare('telemetry: { api }, OpenTelemetry SDK registered', candidate('api, SDK', { telemetry: { api } }));
void sink;

/**
 * What a receiver reports, by name and shape: the table of metric, span and attribute names, the
 * parts of `@opentelemetry/api` it uses, what `onOutcome` receives, and the record of one
 * delivery. Below the observer, so it and the receiver's parts import their types from here.
 */

import type { WebhookErrorCode } from '../errors.ts';
import type { VerifiedWebhook } from '../verify/types.ts';

/**
 * Every metric, span and attribute name the receiver uses, in one table (listed in the guide
 * docs/operating.md), for dashboards and alerts that refer to them.
 *
 * @example
 * ```ts
 * import { TELEMETRY_NAMES } from 'webhook-receiver';
 * const query = `sum(rate(${TELEMETRY_NAMES.metrics.deliveries}[5m])) by (${TELEMETRY_NAMES.attributes.outcome})`;
 * ```
 */
export const TELEMETRY_NAMES = {
  /** Instrumentation scope of the meter and the tracer. */
  scope: 'webhook-receiver',
  metrics: {
    deliveries: 'webhook.deliveries',
    verified: 'webhook.verified',
    clockSkew: 'webhook.clock_skew',
    handlerDuration: 'webhook.handler.duration',
    storeDuration: 'webhook.store.duration',
    memoryStoreUtilization: 'webhook.memory_store.utilization',
    /** What inbox workers did with each delivery of a job (apart from `deliveries`, so a webhook is never counted twice). */
    jobs: 'webhook.jobs',
    /** An inbox job's handler run, from the worker's claim to its settlement. */
    jobDuration: 'webhook.job.duration',
  },
  spans: {
    receive: 'webhook.receive',
    /** Followed by the operation: `webhook.store.claim`, `webhook.store.complete`, … */
    storePrefix: 'webhook.store.',
    /** One delivery of an inbox job to a worker (kind consumer); the handler runs inside it. */
    job: 'webhook.job',
  },
  attributes: {
    outcome: 'webhook.outcome',
    errorCode: 'webhook.error.code',
    keyId: 'webhook.key.id',
    version: 'webhook.signature.version',
    signed: 'webhook.signed',
    id: 'webhook.id',
    status: 'webhook.response.status',
    store: 'webhook.store',
    operation: 'webhook.store.operation',
    keySpace: 'webhook.store.key_space',
    /** Tells apart the memory stores of one process (1, 2, …), so two receivers' gauges do not mix. */
    storeInstance: 'webhook.store.instance',
    skewDirection: 'webhook.clock_skew.direction',
    /** On spans only, never on metrics: tenant names can be chosen by whoever sends requests. */
    tenant: 'webhook.tenant',
    /** What a worker did with a job: `processed`, `duplicate`, `stale`, `deferred`, `retried`, `dead_lettered`. */
    jobOutcome: 'webhook.job.outcome',
    /** The inbox's engine: `bullmq`, `pg-boss`, `cloudflare-queues`. */
    jobEngine: 'webhook.job.engine',
    /** The job's handler attempt, 1-based (on spans only). */
    jobAttempt: 'webhook.job.attempt',
  },
} as const;

type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue>;

/** The parts of `@opentelemetry/api` the receiver uses, by shape. */
export interface OtelSpan {
  setAttribute(key: string, value: AttributeValue): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  isRecording(): boolean;
  end(): void;
}
interface OtelContextApi {
  active(): unknown;
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(context: never, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F>;
}
export interface OtelMeter {
  createCounter(name: string, options?: { description?: string; unit?: string }): { add(value: number, attributes?: Attributes): void };
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } },
  ): { record(value: number, attributes?: Attributes): void };
  createObservableGauge(
    name: string,
    options?: { description?: string; unit?: string },
  ): { addCallback(callback: (result: { observe(value: number, attributes?: Attributes): void }) => void): void };
}

/**
 * The `@opentelemetry/api` module, as the app imports it (`import * as api from
 * '@opentelemetry/api'`): the receiver only reads `metrics`, `trace` and `context` from it.
 *
 * @example
 * ```ts
 * import * as api from '@opentelemetry/api';
 * const otel: OpenTelemetryApi = api;
 * ```
 */
export interface OpenTelemetryApi {
  metrics: {
    /** The meter the instruments are taken from, on the first delivery. */
    getMeter(name: string, version?: string): OtelMeter;
  };
  trace: {
    /** The tracer of the `webhook.receive` spans (and of an inbox worker's `webhook.job` spans). */
    getTracer(
      name: string,
      version?: string,
    ): {
      /** Starts a span. */
      startSpan(name: string, options?: { kind?: number; attributes?: Attributes }, context?: never): OtelSpan;
    };
    /** A context with the span set: the handler runs inside it. */
    setSpan(context: never, span: never): unknown;
    /** The active span (the app's HTTP server span, when there is one). */
    getSpan(context: never): unknown;
  };
  context: OtelContextApi;
}

/**
 * The `telemetry` option: the app's `@opentelemetry/api`. Without a registered provider every
 * call is a no-op.
 *
 * @example
 * ```ts
 * import * as api from '@opentelemetry/api';
 * createReceiver({ secrets, telemetry: { api } });
 * ```
 */
export interface TelemetryOptions {
  api: OpenTelemetryApi;
}

/**
 * How a delivery ended: `enqueued` when `receiver.accept` put it into an inbox (what a worker does
 * with the job is reported by the worker's own `onOutcome` and `webhook.jobs`, so one delivery is never
 * counted twice).
 *
 * @example
 * ```ts
 * const failedOutcomes: DeliveryOutcome[] = ['rejected', 'failed'];
 * ```
 */
export type DeliveryOutcome = 'processed' | 'enqueued' | 'duplicate' | 'in_progress' | 'stale' | 'rejected' | 'failed';

/**
 * What `onOutcome` receives, once per delivery. `status` is the HTTP status answered (behind
 * `receiver.handle`, the one an adapter would have answered: 200 processed, duplicate and stale
 * (ordering: an older version than one already processed, its handler not run), 409 in progress, the error's status when rejected, 500 failed).
 *
 * @example
 * ```ts
 * const onOutcome = (event: OutcomeEvent) => stats.increment(`webhooks.${event.outcome}`, { key: event.keyId ?? 'none' });
 * ```
 */
export interface OutcomeEvent {
  outcome: DeliveryOutcome;
  /** The error code of a rejected delivery (or of a failed one, when it had one). */
  code?: WebhookErrorCode;
  status: number;
  /** The webhook id; for a rejection, the one the request claimed (unverified), if any. */
  webhookId: string | undefined;
  /** The `keyId` of the key that verified it, when it has one. */
  keyId?: string;
  /** The tenant whose keys verified it (tenant keys). */
  tenant?: string;
  signed: boolean;
  /** From the start of verification to the outcome (the handler's work included). */
  durationMs: number;
}

/** One delivery, as observed. Internal. */
export interface Trace {
  readonly start: number;
  span: OtelSpan | undefined;
  /** The context with the delivery's span active, for the handler and the store's spans. */
  context: unknown;
  webhook: VerifiedWebhook | undefined;
  handlerStart: number;
  /** The HTTP status the adapter answered with, when it knows it. */
  status: number | undefined;
  /** What the handler threw, when the adapter saw it. */
  error: unknown;
  ended: boolean;
  /** Accepted into an inbox (`receiver.accept`) rather than handled here. */
  enqueued?: boolean;
}

/**
 * The observer: one record per delivery, from which the `onOutcome` hook, the metrics and the
 * spans are fed, and the links from a claim object to its delivery's record that the adapters
 * use to nest their work and tell the status.
 */

import { isWebhookError, type WebhookErrorCode } from '../errors.ts';
import { claimedWebhookId } from '../headers.ts';
import { payloadErrorOf } from '../schema.ts';
import type { MemoryStore } from '../stores/memory/index.ts';
import type { IdempotencyStore } from '../stores/types.ts';
import type { VerifiedWebhook, WebhookInput } from '../verify/types.ts';
import {
  TELEMETRY_NAMES,
  type Attributes,
  type DeliveryOutcome,
  type OpenTelemetryApi,
  type OtelMeter,
  type OutcomeEvent,
  type TelemetryOptions,
  type Trace,
} from './types.ts';

const NAMES = TELEMETRY_NAMES;
const A = NAMES.attributes;

// Span kinds and status codes are fixed by the OpenTelemetry specification; the API's enums
// are not imported (the package never imports the API).
const SPAN_KIND_INTERNAL = 0;
const SPAN_KIND_SERVER = 1;
export const SPAN_KIND_CONSUMER = 4;
export const STATUS_ERROR = 2;

interface Instruments {
  deliveries: ReturnType<OtelMeter['createCounter']>;
  verified: ReturnType<OtelMeter['createCounter']>;
  clockSkew: ReturnType<OtelMeter['createHistogram']>;
  handlerDuration: ReturnType<OtelMeter['createHistogram']>;
  storeDuration: ReturnType<OtelMeter['createHistogram']>;
  tracer: ReturnType<OpenTelemetryApi['trace']['getTracer']>;
}

/** Handler and store durations: 0.5 ms to 60 s (the SDK's default buckets are for milliseconds). */
export const SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Clock skew's size: the usual few seconds up to the window's edge (300 s by default). */
const SKEW_BUCKETS = [0.5, 1, 2, 5, 10, 30, 60, 120, 300];

/** The trace of each claim object, so adapters can nest their handler's work and tell the status. */
const traces = new WeakMap<object, Trace>();
/**
 * How many observers (telemetry or `onOutcome`) this process has: with none, the per-request
 * hooks below return before any look-up, so an unobserved delivery pays one comparison.
 */
let observing = 0;
/** A small number per memory store whose fullness is reported (see `storeInstance`). */
const storeInstances = new WeakMap<object, number>();
let storeInstanceCount = 0;

/** Monotonic where there is one (every runtime this package supports has `performance`). */
export const clock: () => number = typeof performance === 'object' && typeof performance.now === 'function' ? () => performance.now() : Date.now;

/** A store's name for attributes: its own `name`, else `custom`. */
function storeName(store: IdempotencyStore | undefined): string {
  const name = (store as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' ? name : 'custom';
}

/** The `telemetry` option, checked by shape (the receiver's and a worker's): its API, or `undefined` without one. */
export function checkTelemetry(telemetry: unknown): OpenTelemetryApi | undefined {
  if (telemetry === undefined) return undefined;
  const api = (telemetry as { api?: Partial<OpenTelemetryApi> } | null)?.api;
  if (
    typeof api !== 'object' ||
    api === null ||
    typeof api.metrics?.getMeter !== 'function' ||
    typeof api.trace?.getTracer !== 'function' ||
    typeof api.trace.getSpan !== 'function' ||
    typeof api.trace.setSpan !== 'function' ||
    typeof api.context?.with !== 'function' ||
    typeof api.context.active !== 'function'
  ) {
    throw new TypeError(`telemetry must be { api } with the app's @opentelemetry/api module (import * as api from '@opentelemetry/api')`);
  }
  return api as OpenTelemetryApi;
}

/**
 * Feeds `onOutcome`, metrics and spans from one record per delivery. With neither telemetry nor
 * `onOutcome`, `start` answers `undefined` and a delivery costs nothing more than before.
 */
export class Observer {
  readonly #api: OpenTelemetryApi | undefined;
  readonly #onOutcome: ((event: OutcomeEvent) => void) | undefined;
  readonly #store: IdempotencyStore | undefined;
  readonly #storeName: string;
  #instruments: Instruments | undefined;
  /** Errors already counted by the receiver, so an adapter's `refuse` does not count them twice. */
  readonly #counted = new WeakSet<object>();
  /** One attributes object per store operation, made once. */
  readonly #operationAttributes = new Map<string, Attributes>();

  constructor(options: { telemetry?: TelemetryOptions; onOutcome?: (event: OutcomeEvent) => void }, store: IdempotencyStore | undefined) {
    this.#api = checkTelemetry(options.telemetry);
    if (options.onOutcome !== undefined && typeof options.onOutcome !== 'function') throw new TypeError('onOutcome must be a function');
    this.#onOutcome = options.onOutcome;
    this.#store = store;
    this.#storeName = storeName(store);
    if (this.active) observing++;
  }

  /** Telemetry or `onOutcome` is on: deliveries are recorded. */
  get active(): boolean {
    return this.#api !== undefined || this.#onOutcome !== undefined;
  }

  /** Taken on first use (see the module's comment). */
  #take(api: OpenTelemetryApi): Instruments {
    const meter = api.metrics.getMeter(NAMES.scope);
    const m = NAMES.metrics;
    const instruments: Instruments = {
      deliveries: meter.createCounter(m.deliveries, { description: 'Webhook deliveries by outcome and, when refused, error code', unit: '{delivery}' }),
      verified: meter.createCounter(m.verified, {
        description: 'Verified deliveries by the key that matched and the signature version: a key no longer counted can be retired',
        unit: '{delivery}',
      }),
      clockSkew: meter.createHistogram(m.clockSkew, {
        description: "How far webhook-timestamp is from the receiver's clock; webhook.clock_skew.direction says which way",
        unit: 's',
        advice: { explicitBucketBoundaries: SKEW_BUCKETS },
      }),
      handlerDuration: meter.createHistogram(m.handlerDuration, {
        description: "The handler's run, from the claim to its settlement",
        unit: 's',
        advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
      }),
      storeDuration: meter.createHistogram(m.storeDuration, {
        description: 'Idempotency store operations',
        unit: 's',
        advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
      }),
      tracer: api.trace.getTracer(NAMES.scope),
    };
    const store = this.#store as Partial<Pick<MemoryStore, 'usage'>> | undefined;
    if (store !== undefined && typeof store.usage === 'function') {
      const usage = store.usage.bind(store);
      let instance = storeInstances.get(store);
      if (instance === undefined) storeInstances.set(store, (instance = ++storeInstanceCount));
      meter
        .createObservableGauge(m.memoryStoreUtilization, {
          description: 'How full the memory store is (entries over its bound); at 1 with only live claims it answers 503',
          unit: '1',
        })
        .addCallback((result) => {
          const now = usage();
          result.observe((now.signed.claims + now.signed.completed) / now.signed.max, { [A.keySpace]: 'signed', [A.storeInstance]: instance });
          result.observe((now.unsigned.claims + now.unsigned.completed) / now.unsigned.max, { [A.keySpace]: 'unsigned', [A.storeInstance]: instance });
        });
    }
    return instruments;
  }

  /** A new delivery's record, or `undefined` when nobody observes. */
  start(): Trace | undefined {
    const api = this.#api;
    if (api === undefined && this.#onOutcome === undefined) return undefined;
    const trace: Trace = {
      start: clock(),
      span: undefined,
      context: undefined,
      webhook: undefined,
      handlerStart: 0,
      status: undefined,
      error: undefined,
      ended: false,
    };
    if (api !== undefined) {
      const instruments = (this.#instruments ??= this.#take(api));
      const parent = api.context.active();
      // Under an HTTP server span (the app's instrumentation), the delivery is internal work of
      // that request; alone, it is the server side of the call.
      const kind = api.trace.getSpan(parent as never) === undefined ? SPAN_KIND_SERVER : SPAN_KIND_INTERNAL;
      const span = instruments.tracer.startSpan(NAMES.spans.receive, { kind }, parent as never);
      trace.span = span;
      trace.context = api.trace.setSpan(parent as never, span as never);
    }
    return trace;
  }

  /** The request verified: count the key and version, and the sender's clock skew. */
  verified(trace: Trace, webhook: VerifiedWebhook, nowMs: number): void {
    trace.webhook = webhook;
    const span = trace.span;
    if (span === undefined) return;
    const version = webhook.scheme ?? 'unsigned';
    const key = webhook.keyId ?? (webhook.keyIndex === undefined ? 'none' : String(webhook.keyIndex));
    const instruments = this.#instruments!;
    instruments.verified.add(1, { [A.keyId]: key, [A.version]: version });
    // An unsigned request without a timestamp was given the time it arrived: no skew to tell.
    // Signed, as a size and a direction: the SDK drops negative histogram values (histograms
    // measure non-negative amounts), and a sender whose clock runs ahead must still show.
    // A pulled event's timestamp is when the relay captured it: its age, not a clock's skew.
    if (webhook.signed && webhook.scheme !== 'relay') {
      const skew = (webhook.timestamp.getTime() - nowMs) / 1000;
      instruments.clockSkew.record(Math.abs(skew), { [A.skewDirection]: skew > 0 ? 'future' : 'past' });
    }
    span.setAttribute(A.id, webhook.id);
    span.setAttribute(A.keyId, key);
    span.setAttribute(A.version, version);
    span.setAttribute(A.signed, webhook.signed);
    if (webhook.tenant !== undefined) span.setAttribute(A.tenant, webhook.tenant);
  }

  /** The handler is about to run (its duration starts here). */
  acquired(trace: Trace): void {
    trace.handlerStart = clock();
  }

  /** Times one store operation (and makes it a child span), sync or async. */
  store<T>(trace: Trace | undefined, operation: string, call: () => T): T {
    if (trace === undefined || trace.span === undefined) return call();
    let attributes = this.#operationAttributes.get(operation);
    if (attributes === undefined) this.#operationAttributes.set(operation, (attributes = { [A.store]: this.#storeName, [A.operation]: operation }));
    // No tracer provider (or a sampler that dropped the delivery): no child span, no context
    // switch, only the latency histogram.
    const span = trace.span.isRecording()
      ? this.#instruments!.tracer.startSpan(NAMES.spans.storePrefix + operation, { kind: SPAN_KIND_INTERNAL, attributes }, trace.context as never)
      : undefined;
    const started = clock();
    const done = (failed: unknown): void => {
      this.#instruments!.storeDuration.record((clock() - started) / 1000, attributes);
      if (span === undefined) return;
      if (failed !== undefined) span.setStatus({ code: STATUS_ERROR, message: failed instanceof Error ? failed.name : 'error' });
      span.end();
    };
    let result: T;
    try {
      result = span === undefined ? call() : (this.#api!.context.with(trace.context as never, call) as T);
    } catch (error) {
      done(error ?? 'error');
      throw error;
    }
    if (typeof (result as { then?: unknown } | null)?.then === 'function') {
      (result as Promise<unknown>).then(
        () => done(undefined),
        (error: unknown) => done(error ?? 'error'),
      );
    } else {
      done(undefined);
    }
    return result;
  }

  /** Runs `fn` with the delivery's span active, so the handler's own spans nest under it. */
  within<R>(trace: Trace | undefined, fn: () => R): R {
    if (trace === undefined || trace.span === undefined || !trace.span.isRecording()) return fn();
    return this.#api!.context.with(trace.context as never, fn) as R;
  }

  /** The delivery ended before a handler (duplicate, in progress, stale). */
  early(trace: Trace, outcome: 'duplicate' | 'in_progress' | 'stale'): void {
    this.#end(trace, outcome, outcome === 'in_progress' ? 409 : 200, undefined);
  }

  /** The receiver refused the request (verification, store): counted here, once. */
  rejected(trace: Trace, error: unknown, input: WebhookInput | Request | undefined): void {
    if (isWebhookError(error)) {
      this.#counted.add(error);
      this.#end(trace, 'rejected', error.status, error.code, input === undefined || trace.webhook !== undefined ? undefined : claimedWebhookId(input.headers));
    } else {
      this.#end(trace, 'failed', 500, undefined, input === undefined || trace.webhook !== undefined ? undefined : claimedWebhookId(input.headers));
    }
  }

  /**
   * An adapter refused a request the receiver never saw (its body could not be read): counted
   * unless the receiver already did.
   */
  refused(error: { code: WebhookErrorCode; status: number }, webhookId: string | undefined): void {
    if (this.#counted.has(error)) return;
    const trace = this.start();
    if (trace !== undefined) this.#end(trace, 'rejected', error.status, error.code, webhookId);
  }

  /**
   * The claim was settled: completed (processed) or released (failed; or rejected when the
   * handler refused the payload with `INVALID_PAYLOAD`).
   */
  settled(trace: Trace, completed: boolean): void {
    if (trace.ended) return;
    const payloadError = trace.webhook === undefined ? undefined : payloadErrorOf(trace.webhook);
    const handlerSeconds = trace.handlerStart === 0 ? undefined : (clock() - trace.handlerStart) / 1000;
    const thrown = trace.error;
    let outcome: DeliveryOutcome;
    let code: WebhookErrorCode | undefined;
    let status: number;
    if (completed && trace.enqueued === true) {
      outcome = 'enqueued';
      status = 202;
    } else if (completed) {
      outcome = 'processed';
      status = trace.status ?? 200;
    } else if (isWebhookError(thrown) && thrown.status < 500) {
      outcome = 'rejected';
      code = thrown.code;
      status = thrown.status;
    } else if (payloadError !== undefined && (trace.status === undefined || trace.status === payloadError.status)) {
      outcome = 'rejected';
      code = payloadError.code;
      status = payloadError.status;
    } else {
      outcome = 'failed';
      code = isWebhookError(thrown) ? thrown.code : undefined;
      // A thrown WebhookError answers its own status (STORE_UNAVAILABLE: 503).
      status = trace.status ?? (isWebhookError(thrown) ? thrown.status : 500);
    }
    if (handlerSeconds !== undefined && this.#instruments !== undefined) {
      this.#instruments.handlerDuration.record(handlerSeconds, { [A.outcome]: outcome });
    }
    this.#end(trace, outcome, status, code);
  }

  #end(trace: Trace, outcome: DeliveryOutcome, status: number, code: WebhookErrorCode | undefined, claimed?: string): void {
    if (trace.ended) return;
    trace.ended = true;
    const webhook = trace.webhook;
    const span = trace.span;
    if (span !== undefined) {
      const attributes: Attributes = { [A.outcome]: outcome };
      if (code !== undefined) attributes[A.errorCode] = code;
      this.#instruments!.deliveries.add(1, attributes);
      span.setAttribute(A.outcome, outcome);
      span.setAttribute(A.status, status);
      if (code !== undefined) span.setAttribute(A.errorCode, code);
      if (outcome === 'rejected' || outcome === 'failed') span.setStatus({ code: STATUS_ERROR, message: code ?? outcome });
      span.end();
    }
    const hook = this.#onOutcome;
    if (hook === undefined) return;
    const event: OutcomeEvent = {
      outcome,
      status,
      webhookId: webhook?.id ?? claimed,
      signed: webhook?.signed ?? false,
      durationMs: clock() - trace.start,
    };
    if (code !== undefined) event.code = code;
    if (webhook?.keyId !== undefined) event.keyId = webhook.keyId;
    if (webhook?.tenant !== undefined) event.tenant = webhook.tenant;
    try {
      hook(event);
    } catch {
      // A failing hook must not change the delivery's outcome.
    }
  }
}

/** Links a claim object to its delivery's record (internal). */
export function attachTrace(claim: object, trace: Trace | undefined): void {
  if (trace !== undefined) traces.set(claim, trace);
}

/** The delivery's record of a claim, when it is observed (internal). */
export function traceOf(claim: object): Trace | undefined {
  return observing === 0 ? undefined : traces.get(claim);
}

/**
 * Tells the claim's delivery what the adapter answered, or what the handler threw, before the
 * claim is settled (internal: the adapters' shared flow calls it).
 */
export function noteAnswer(claim: object, status: number | undefined, error?: unknown): void {
  if (observing === 0) return;
  const trace = traces.get(claim);
  if (trace === undefined) return;
  if (status !== undefined) trace.status = status;
  if (error !== undefined) trace.error = error;
}

/** Tells the claim's delivery that it was accepted into an inbox: its completion counts as `enqueued` (internal). */
export function noteEnqueued(claim: object): void {
  if (observing === 0) return;
  const trace = traces.get(claim);
  if (trace !== undefined) trace.enqueued = true;
}

/**
 * What a receiver tells the outside world about each delivery: one internal record per delivery,
 * from which the `onOutcome` hook, OpenTelemetry metrics and spans are all fed, so they cannot
 * disagree.
 *
 * OpenTelemetry comes in through `@opentelemetry/api` handed over by the app (`telemetry: { api }`):
 * never imported here, so an app without it pays nothing and edge bundlers see no optional import.
 * Meters and instruments are taken on the first delivery, not when the receiver is built: a meter
 * taken before the app registers its MeterProvider stays a no-op for good (the metrics API has no
 * proxy, unlike the tracer's).
 *
 * Metric attributes are low-cardinality only (outcome, error code, key id, version, store,
 * operation); the webhook id goes on spans only. Nothing here ever sees a secret, a signature or
 * the body.
 *
 * The names and shapes live in `telemetry/types.ts`, the observer and its links from a claim to
 * its delivery's record in `telemetry/observer.ts`; this file gathers both.
 */

export { TELEMETRY_NAMES, type DeliveryOutcome, type OpenTelemetryApi, type OutcomeEvent, type TelemetryOptions, type Trace } from './telemetry/types.ts';
export { attachTrace, noteAnswer, noteEnqueued, Observer, traceOf } from './telemetry/observer.ts';

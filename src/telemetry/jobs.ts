/**
 * What an inbox worker tells OpenTelemetry about each delivery of a job: the `webhook.jobs`
 * counter (by outcome and engine), the `webhook.job.duration` histogram of the handler's runs,
 * and one `webhook.job` span per delivery, inside which the handler runs. Apart from the
 * receiver's `webhook.deliveries`, so a webhook accepted into an inbox is counted once there
 * (`enqueued`) and its jobs here, so no delivery is counted twice.
 *
 * Same rules as the receiver's observer: the API comes from the app by shape, instruments are
 * taken on the first job (a meter taken before the app registers its provider stays a no-op),
 * ids and tenants go on spans only. One rule more: a worker's telemetry never changes what
 * happens to a job, so every call into the API is guarded, and a failing one is dropped.
 */

import type { InboxJob, JobOutcomeEvent } from '../inbox/types.ts';
import { checkTelemetry, clock, SECONDS_BUCKETS, SPAN_KIND_CONSUMER, STATUS_ERROR } from './observer.ts';
import { TELEMETRY_NAMES, type Attributes, type OpenTelemetryApi, type OtelMeter, type OtelSpan } from './types.ts';

const NAMES = TELEMETRY_NAMES;
const A = NAMES.attributes;

type JobOutcome = JobOutcomeEvent['outcome'];

interface JobInstruments {
  jobs: ReturnType<OtelMeter['createCounter']>;
  duration: ReturnType<OtelMeter['createHistogram']>;
  tracer: ReturnType<OpenTelemetryApi['trace']['getTracer']>;
}

/** One delivery of a job, as observed. Internal. */
export interface JobTrace {
  readonly span: OtelSpan;
  /** The context with the job's span active: the handler runs inside it. */
  readonly context: unknown;
}

/** The worker's side of OpenTelemetry; with no `telemetry` option every method returns at once. */
export class JobTelemetry {
  readonly #api: OpenTelemetryApi | undefined;
  readonly #engine: string;
  #instruments: JobInstruments | undefined;
  /** The metric attributes of each outcome, made once. */
  readonly #attributes = new Map<JobOutcome, Attributes>();

  constructor(telemetry: unknown, engine: string) {
    this.#api = checkTelemetry(telemetry);
    this.#engine = engine;
  }

  #take(api: OpenTelemetryApi): JobInstruments {
    const meter = api.metrics.getMeter(NAMES.scope);
    return {
      jobs: meter.createCounter(NAMES.metrics.jobs, {
        description: 'Deliveries of inbox jobs to workers, by what the worker did: a deferred job spent no attempt',
        unit: '{job}',
      }),
      duration: meter.createHistogram(NAMES.metrics.jobDuration, {
        description: "An inbox job's handler run, from the worker's claim to its settlement",
        unit: 's',
        advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
      }),
      tracer: api.trace.getTracer(NAMES.scope),
    };
  }

  /** A job delivery's span, started (under whatever context is active), or `undefined`. */
  start(): JobTrace | undefined {
    const api = this.#api;
    if (api === undefined) return undefined;
    try {
      const instruments = (this.#instruments ??= this.#take(api));
      const parent = api.context.active();
      const span = instruments.tracer.startSpan(NAMES.spans.job, { kind: SPAN_KIND_CONSUMER, attributes: { [A.jobEngine]: this.#engine } }, parent as never);
      return { span, context: api.trace.setSpan(parent as never, span as never) };
    } catch {
      return undefined;
    }
  }

  /** The job was read: its id, attempt and the rest go on the span (never on metrics). */
  job(trace: JobTrace | undefined, job: InboxJob, attempt: number): void {
    if (trace === undefined) return;
    try {
      const span = trace.span;
      span.setAttribute(A.id, job.id);
      span.setAttribute(A.jobAttempt, attempt);
      span.setAttribute(A.signed, job.signed);
      if (job.keyId !== null) span.setAttribute(A.keyId, job.keyId);
      if (job.tenant !== null) span.setAttribute(A.tenant, job.tenant);
    } catch {
      // Telemetry never changes what happens to a job.
    }
  }

  /**
   * Runs the handler with the job's span active, so its own spans nest under it. An API that
   * fails around the handler is ignored: the handler runs once, and its result or error stands.
   */
  within<R>(trace: JobTrace | undefined, fn: () => R): R {
    if (trace === undefined) return fn();
    let ran: 'no' | 'returned' | 'threw' = 'no';
    let value: R | undefined;
    let thrown: unknown;
    const run = (): R => {
      try {
        value = fn();
        ran = 'returned';
        return value;
      } catch (error) {
        ran = 'threw';
        thrown = error;
        throw error;
      }
    };
    try {
      const result = this.#api!.context.with(trace.context as never, run) as R;
      // An API that returned without calling it: the handler still runs, once.
      return ran === 'no' ? run() : result;
    } catch (error) {
      if (ran === 'no') return run();
      if (ran === 'threw') throw thrown;
      void error;
      return value as R;
    }
  }

  /**
   * The delivery's outcome: counted, its handler's run timed (when it ran, `handlerStart` from
   * {@link clock}), the span ended, with an error status when the handler failed.
   */
  end(trace: JobTrace | undefined, outcome: JobOutcome, handlerStart: number | undefined, error: unknown): void {
    const instruments = this.#instruments;
    if (instruments === undefined) return;
    try {
      let attributes = this.#attributes.get(outcome);
      if (attributes === undefined) this.#attributes.set(outcome, (attributes = { [A.jobOutcome]: outcome, [A.jobEngine]: this.#engine }));
      instruments.jobs.add(1, attributes);
      if (handlerStart !== undefined) instruments.duration.record((clock() - handlerStart) / 1000, attributes);
    } catch {
      // Telemetry never changes what happens to a job.
    }
    if (trace === undefined) return;
    try {
      const span = trace.span;
      span.setAttribute(A.jobOutcome, outcome);
      // The error's name only: its message may quote the payload.
      if (outcome === 'retried' || outcome === 'dead_lettered') span.setStatus({ code: STATUS_ERROR, message: error instanceof Error ? error.name : outcome });
      span.end();
    } catch {
      // As above.
    }
  }
}

/**
 * Validation through Standard Schema (https://standardschema.dev), the interface zod, valibot,
 * arktype and others implement, so a webhook's payload is checked by whichever validator the app
 * already uses and nothing is imported here.
 *
 * The interface is declared here rather than imported: the specification asks libraries to copy
 * its types, so the package has no dependency for it.
 */

import { WebhookError } from './errors.ts';

/**
 * The Standard Schema interface (version 1), as zod 3.24+, valibot 1, arktype 2 and others
 * implement it. Any such schema can be passed to `webhook.json(schema)`, `webhook.parse(schema)`
 * and the router's `on(type, schema, handler)`.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import type { StandardSchemaV1 } from 'webhook-receiver';
 * const schema: StandardSchemaV1<unknown, { id: string }> = z.object({ id: z.string() });
 * ```
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': StandardSchemaV1.Props<Input, Output>;
}

/** The types of the Standard Schema interface (version 1), as the specification declares them. */
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace StandardSchemaV1 {
  /** The schema's properties under `~standard`. */
  interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    /** Validates a value: the result, or a promise of it for an asynchronous schema. */
    readonly validate: (value: unknown, options?: Options | undefined) => Result<Output> | Promise<Result<Output>>;
    readonly types?: Types<Input, Output> | undefined;
  }
  /** Vendor options for `validate`. */
  interface Options {
    readonly libraryOptions?: Record<string, unknown> | undefined;
  }
  /** What `validate` answers. */
  type Result<Output> = SuccessResult<Output> | FailureResult;
  /** A valid value, possibly transformed. */
  interface SuccessResult<Output> {
    readonly value: Output;
    readonly issues?: undefined;
  }
  /** Why the value is not valid. */
  interface FailureResult {
    readonly issues: ReadonlyArray<Issue>;
  }
  /** One problem, with where it is. */
  interface Issue {
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined;
  }
  /** A path segment as an object. */
  interface PathSegment {
    readonly key: PropertyKey;
  }
  /** The types a schema carries. */
  interface Types<Input = unknown, Output = Input> {
    readonly input: Input;
    readonly output: Output;
  }
  /** The type a schema produces. */
  type InferOutput<Schema extends StandardSchemaV1> = NonNullable<Schema['~standard']['types']>['output'];
  /** The type a schema takes. */
  type InferInput<Schema extends StandardSchemaV1> = NonNullable<Schema['~standard']['types']>['input'];
}

/**
 * What an `INVALID_PAYLOAD` error carries as its `cause`: the validator's own issues. Its
 * messages may quote the payload (valibot's "received 123"), which is why the error's message
 * lists only where the issues are; log these only where the payload itself may go.
 *
 * @example
 * ```ts
 * if (isWebhookError(error) && error.code === 'INVALID_PAYLOAD') {
 *   const { issues } = error.cause as PayloadIssues;
 *   console.debug(issues.map((issue) => issue.message));
 * }
 * ```
 */
export interface PayloadIssues {
  readonly issues: ReadonlyArray<StandardSchemaV1.Issue>;
}

/**
 * The `INVALID_PAYLOAD` error a webhook's payload last raised, so the receiver can report a
 * delivery the handler refused that way as `rejected` with its code, whichever adapter ran it
 * (Express and Fastify only see the status the framework answered).
 */
const payloadErrors = new WeakMap<object, WebhookError>();

/** Remembers an `INVALID_PAYLOAD` error raised for `webhook` (anything else is ignored). */
function notePayloadError(webhook: object, error: unknown): void {
  if (error instanceof WebhookError && error.code === 'INVALID_PAYLOAD') payloadErrors.set(webhook, error);
}

/** The `INVALID_PAYLOAD` error `webhook`'s payload raised, if any. */
export function payloadErrorOf(webhook: object): WebhookError | undefined {
  return payloadErrors.get(webhook);
}

/** At most this many paths are listed in the message. */
const LISTED_ISSUES = 5;

function isSchema(value: unknown): value is StandardSchemaV1 {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const props = (value as { '~standard'?: { validate?: unknown; version?: unknown } })['~standard'];
  return typeof props === 'object' && props !== null && props.version === 1 && typeof props.validate === 'function';
}

/** Throws a TypeError for anything that is not a Standard Schema. */
export function checkSchema(schema: unknown, where: string): asserts schema is StandardSchemaV1 {
  if (!isSchema(schema)) {
    throw new TypeError(`${where} needs a Standard Schema (zod 3.24+, valibot 1, arktype 2, …): an object with '~standard' version 1 and validate()`);
  }
}

/** A path as `data.items[2].amount`: property names and indexes only, never a value. */
function pathText(path: StandardSchemaV1.Issue['path']): string {
  if (path === undefined || path.length === 0) return '(root)';
  let text = '';
  for (const segment of path) {
    const key = typeof segment === 'object' && segment !== null ? (segment as StandardSchemaV1.PathSegment).key : segment;
    if (typeof key === 'number') text += `[${key}]`;
    else if (typeof key === 'symbol') text += `[${String(key.description ?? 'symbol')}]`;
    else text += text === '' ? key : `.${key}`;
  }
  return text;
}

/** The `INVALID_PAYLOAD` error for a failed validation: where, not what (the messages may quote the payload). */
function invalidPayload(issues: ReadonlyArray<StandardSchemaV1.Issue>): WebhookError {
  const paths = [...new Set(issues.map((issue) => pathText(issue.path)))];
  const listed = paths.slice(0, LISTED_ISSUES).join(', ') + (paths.length > LISTED_ISSUES ? `, and ${paths.length - LISTED_ISSUES} more` : '');
  const count = issues.length === 1 ? '1 issue' : `${issues.length} issues`;
  const cause: PayloadIssues = { issues };
  return new WebhookError('INVALID_PAYLOAD', `the payload does not match the expected schema (${count}, at ${listed})`, { cause });
}

/** The body parsed as JSON: a body that is not JSON is an invalid payload (`INVALID_PAYLOAD`, the `SyntaxError` as its cause). */
function parseJsonPayload(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw notJson(error);
  }
}

/**
 * `INVALID_PAYLOAD` for a body a JSON parser refused, `cause` the parser's error. Internal: the
 * core's `json()` and the adapters whose framework parses the body raise the same refusal.
 */
export function notJson(cause: unknown): WebhookError {
  // The parser's message quotes the body near the error: kept as the cause (for the log),
  // not repeated in the message the sender is answered with.
  return new WebhookError('INVALID_PAYLOAD', 'the payload is not valid JSON', { cause });
}

function unwrap<T>(result: StandardSchemaV1.Result<T>): T {
  if (result.issues) throw invalidPayload(result.issues);
  return result.value;
}

/**
 * `schema`'s answer for `value`: the output, an `INVALID_PAYLOAD` thrown, or (for a schema that
 * answers with a promise) a promise of either. The schema is not checked here: its callers check
 * it once (`on()` when the route is registered, {@link validatedPayload} before it reads the body).
 */
export function validateUnchecked<S extends StandardSchemaV1>(schema: S, value: unknown): StandardSchemaV1.InferOutput<S> | Promise<StandardSchemaV1.InferOutput<S>> {
  const result = schema['~standard'].validate(value) as StandardSchemaV1.Result<StandardSchemaV1.InferOutput<S>> | PromiseLike<StandardSchemaV1.Result<StandardSchemaV1.InferOutput<S>>>;
  // Any thenable, not only this realm's Promise: read as a result, it would pass with `value` undefined.
  if (typeof (result as PromiseLike<unknown>).then === 'function') return Promise.resolve(result).then(unwrap);
  return unwrap(result as StandardSchemaV1.Result<StandardSchemaV1.InferOutput<S>>);
}

/** What payload validation reads of a webhook: its body as text. */
export interface PayloadSource {
  text(): string;
}

function noted(webhook: object, error: unknown): never {
  notePayloadError(webhook, error);
  throw error;
}

/**
 * `use` applied to `webhook`'s body parsed as JSON. An `INVALID_PAYLOAD` from either step, thrown
 * or (when `use` returns a promise) rejected with, is remembered for `webhook` (see
 * {@link payloadErrorOf}): the one place a payload's failure is noted, for `json(schema)`,
 * `parse(schema)` and the router.
 */
export function usePayload<T>(webhook: PayloadSource, use: (payload: unknown) => T): T {
  let result: T;
  try {
    result = use(parseJsonPayload(webhook.text()));
  } catch (error) {
    return noted(webhook, error);
  }
  if (result instanceof Promise) return result.catch((error: unknown) => noted(webhook, error)) as T;
  return result;
}

/**
 * `webhook`'s payload parsed as JSON and validated by `schema`, the checks in one order for
 * `json(schema)` (`sync: true`) and `parse(schema)` (`sync: false`): the schema first (a
 * `TypeError` naming `where`, whatever the body), then the JSON, then the schema's verdict
 * (`INVALID_PAYLOAD` for either, remembered for `webhook`). With `sync`, a schema that answers with
 * a promise (an async refinement) is refused with a `TypeError` that names `parse`, which takes
 * both kinds; without it, every failure is a rejection.
 */
export function validatedPayload<S extends StandardSchemaV1>(webhook: PayloadSource, schema: S, where: string, options: { sync: true }): StandardSchemaV1.InferOutput<S>;
export function validatedPayload<S extends StandardSchemaV1>(webhook: PayloadSource, schema: S, where: string, options: { sync: false }): Promise<StandardSchemaV1.InferOutput<S>>;
export function validatedPayload(webhook: PayloadSource, schema: unknown, where: string, { sync }: { sync: boolean }): unknown {
  if (!sync) return validatedLater(webhook, schema, where);
  checkSchema(schema, where);
  return usePayload(webhook, (payload) => {
    const output = validateUnchecked(schema, payload);
    if (output instanceof Promise) {
      // Nobody will await it: keep its rejection from being reported as unhandled.
      output.catch(() => undefined);
      throw new TypeError(`this schema validates asynchronously, so ${where} cannot return its result: use \`await webhook.parse(schema)\`, which takes both kinds`);
    }
    return output;
  });
}

async function validatedLater(webhook: PayloadSource, schema: unknown, where: string): Promise<unknown> {
  checkSchema(schema, where);
  return usePayload(webhook, (payload) => validateUnchecked(schema, payload));
}

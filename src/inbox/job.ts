/**
 * What every engine shares that is not the contract: the job format written and read, job ids
 * derived from the store key, the engine options every inbox takes, and the way a failure is kept
 * in a dead letter. Internal: not exported from the package.
 */

import { base64Decode, base64Encode, utf8Encoder } from '../encoding.ts';
import { sha256 } from '../crypto.ts';
import { errorText, isWebhookError, PermanentError } from '../errors.ts';
import { toHex } from '../stores/internal.ts';
import { entityKey } from '../ordering.ts';
import type { EntityOrder } from '../stores/types.ts';
import { rebuiltWebhook, type VerifiedWebhook } from '../verify.ts';
import { INBOX_JOB_FORMAT, type DeadLetter, type InboxJob, type JobSelector } from './types.ts';

/** Handler attempts before a job is dead-lettered, by default. */
const DEFAULT_MAX_ATTEMPTS = 12;
/** The first retry's delay by default; each later one doubles it (with jitter). */
const DEFAULT_BACKOFF_DELAY_MS = 2000;
/** Jobs waiting past which new deliveries are refused, by default. */
const DEFAULT_MAX_BACKLOG = 100_000;
/** How long the receiver waits for an engine's acknowledgement by default. */
const DEFAULT_ENQUEUE_TIMEOUT_MS = 2000;

/** The options every engine's factory takes besides its engine. */
export interface CommonInboxOptions {
  maxAttempts?: number;
  backoff?: { delayMs?: number };
  maxBacklog?: number;
  timeoutMs?: number;
}

/** The common options, checked, with their defaults. */
export interface CommonInboxSettings {
  maxAttempts: number;
  backoffDelayMs: number;
  maxBacklog: number;
  timeoutMs: number;
}

function wholeNumber(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be a whole number from ${min} to ${max} (default ${fallback})`);
  }
  return value;
}

/** Checks the options every engine takes; `factory` names the engine's factory in errors. */
export function commonSettings(factory: string, options: CommonInboxOptions): CommonInboxSettings {
  const backoff = options.backoff;
  if (backoff !== undefined && (typeof backoff !== 'object' || backoff === null)) throw new TypeError(`${factory} backoff must be an object: { delayMs }`);
  return {
    maxAttempts: wholeNumber(options.maxAttempts, `${factory} maxAttempts`, 1, 1000, DEFAULT_MAX_ATTEMPTS),
    backoffDelayMs: wholeNumber(backoff?.delayMs, `${factory} backoff.delayMs`, 0, 86_400_000, DEFAULT_BACKOFF_DELAY_MS),
    maxBacklog: wholeNumber(options.maxBacklog, `${factory} maxBacklog`, 1, Number.MAX_SAFE_INTEGER, DEFAULT_MAX_BACKLOG),
    timeoutMs: wholeNumber(options.timeoutMs, `${factory} timeoutMs`, 1, 600_000, DEFAULT_ENQUEUE_TIMEOUT_MS),
  };
}

/** The job of a verified webhook accepted now. */
export function jobOf(
  webhook: VerifiedWebhook,
  fields: { namespace: string; contentType: string | null; tenant?: string | null; order?: EntityOrder | undefined; acceptedAt: number },
): InboxJob {
  const order = fields.order;
  const job: Mutable<InboxJob> = {
    v: INBOX_JOB_FORMAT,
    id: webhook.id,
    timestamp: Math.floor(webhook.timestamp.getTime() / 1000),
    body: base64Encode(webhook.body),
    contentType: fields.contentType,
    signed: webhook.signed,
    scheme: webhook.scheme ?? null,
    keyIndex: webhook.keyIndex ?? null,
    keyId: webhook.keyId ?? null,
    namespace: fields.namespace,
    tenant: fields.tenant ?? webhook.tenant ?? null,
    // The entity as `ordering.key` named it: its store key is rebuilt from the namespace.
    entity: order === undefined ? null : order.entity.slice(entityKey(fields.namespace, '').length),
    acceptedAt: fields.acceptedAt,
  };
  // Only on an ordered job: an unordered one stays as jobs were before ordering.
  if (order !== undefined) {
    job.version = order.version;
    job.exclusive = order.exclusive;
  }
  return job;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** An encoded version (`encodeVersion`): `i` and 40 digits, or `t` and 22. */
const ENCODED_VERSION = /^(?:i\d{40}|t\d{22})$/;

/**
 * The entity and version a job is ordered by, or `undefined` for a job that is not ordered.
 * The job must have been read by {@link readJob}.
 */
export function orderOf(job: InboxJob): EntityOrder | undefined {
  if (job.entity === null) return undefined;
  return { entity: entityKey(job.namespace, job.entity), version: job.version!, exclusive: job.exclusive! };
}

const nullableString = (value: unknown): value is string | null => value === null || typeof value === 'string';

/**
 * The job in `data`, checked field by field, or a `PermanentError` saying what is wrong: a job
 * this worker cannot read can never succeed here, so it is dead-lettered rather than retried.
 */
export function readJob(data: unknown): InboxJob {
  if (typeof data !== 'object' || data === null) throw new PermanentError('the job has no data object: it was not written by webhook-receiver');
  const job = data as Partial<Record<keyof InboxJob, unknown>>;
  if (job.v !== INBOX_JOB_FORMAT) {
    throw new PermanentError(
      typeof job.v === 'number' && job.v > INBOX_JOB_FORMAT
        ? `the job is in format ${job.v}, newer than this worker reads (${INBOX_JOB_FORMAT}): upgrade webhook-receiver in the worker, then retry the dead letter`
        : `the job has no known format version (v: ${JSON.stringify(job.v) ?? 'undefined'}): it was not written by webhook-receiver`,
    );
  }
  const valid =
    typeof job.id === 'string' &&
    job.id.length > 0 &&
    typeof job.timestamp === 'number' &&
    Number.isFinite(job.timestamp) &&
    typeof job.body === 'string' &&
    nullableString(job.contentType) &&
    typeof job.signed === 'boolean' &&
    (job.scheme === null || job.scheme === 'v1' || job.scheme === 'v1a') &&
    (job.keyIndex === null || (typeof job.keyIndex === 'number' && Number.isInteger(job.keyIndex))) &&
    nullableString(job.keyId) &&
    typeof job.namespace === 'string' &&
    job.namespace.length > 0 &&
    !job.namespace.includes(':') &&
    nullableString(job.tenant) &&
    nullableString(job.entity) &&
    typeof job.acceptedAt === 'number' &&
    Number.isFinite(job.acceptedAt) &&
    // An ordered job (an entity) carries its encoded version and whether it is exclusive.
    (job.entity === null
      ? (job.version === undefined || job.version === null) && (job.exclusive === undefined || job.exclusive === null)
      : typeof job.version === 'string' && ENCODED_VERSION.test(job.version) && typeof job.exclusive === 'boolean');
  if (!valid) throw new PermanentError('the job data does not have the fields of format 1: it was not written by webhook-receiver, or was changed');
  if (base64Decode(job.body as string) === undefined) throw new PermanentError('the job body is not base64');
  return data as InboxJob;
}

/** The verified webhook a job was accepted as, rebuilt for the handler. */
export function webhookOf(job: InboxJob): VerifiedWebhook {
  return rebuiltWebhook({
    id: job.id,
    timestamp: new Date(job.timestamp * 1000),
    body: base64Decode(job.body)!,
    signed: job.signed,
    scheme: job.scheme ?? undefined,
    keyIndex: job.keyIndex ?? undefined,
    keyId: job.keyId ?? undefined,
    tenant: job.tenant ?? undefined,
  });
}

/** The accepting claim's key of a job: `${namespace}:s:${id}` or `${namespace}:u:${id}`. */
export function acceptKey(namespace: string, signed: boolean, id: string): string {
  return `${namespace}:${signed ? 's' : 'u'}:${id}`;
}

/** The store key of a selector (see {@link JobSelector}). */
export function selectedKey(webhookId: string, selector: JobSelector | undefined, method: string): string {
  if (typeof webhookId !== 'string' || webhookId.length === 0) throw new TypeError(`${method} needs a webhook id`);
  const namespace = selector?.namespace ?? 'default';
  if (typeof namespace !== 'string' || namespace.length === 0 || namespace.includes(':')) {
    throw new TypeError(`${method} namespace must be a non-empty string without ':'`);
  }
  return acceptKey(namespace, selector?.signed !== false, webhookId);
}

/**
 * The hex SHA-256 of a job's accepting key: its BullMQ job id (BullMQ ids may not contain `:` nor
 * be integers, and a hash keeps them one length whatever the webhook id is).
 */
async function jobHash(key: string): Promise<Uint8Array> {
  return sha256(utf8Encoder.encode(key));
}

export async function hexJobId(key: string): Promise<string> {
  return toHex(await jobHash(key));
}

/**
 * A UUID from the same hash (pg-boss ids must be UUIDs): the first 16 bytes, marked as an RFC 9562
 * version 8 (custom) UUID.
 */
export async function uuidJobId(key: string): Promise<string> {
  const bytes = (await jobHash(key)).subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = toHex(bytes);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** True for a failure retrying cannot mend: `PermanentError`, or a `WebhookError` below 500. */
export function isPermanent(error: unknown): boolean {
  return error instanceof PermanentError || (isWebhookError(error) && error.status < 500);
}

/** A failure as the engines keep it: one line, `Name: message`. */
export const failureText = errorText;

/** A failure's name and message back from {@link failureText}. */
export function failureOf(text: string | null | undefined): { name: string; message: string } {
  if (typeof text !== 'string' || text === '') return { name: 'Error', message: '' };
  const match = /^([A-Za-z_$][\w$]*): /.exec(text);
  return match === null ? { name: 'Error', message: text } : { name: match[1]!, message: text.slice(match[0].length) };
}

/** A `deadLetters` limit, checked (default 1 000). */
export function deadLetterLimit(options: { limit?: number } | undefined): number {
  const limit = options?.limit ?? 1000;
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError('deadLetters limit must be a positive whole number');
  return limit;
}

/** The dead letter of an engine's failed job, or `undefined` for data that is not one of ours. */
export function deadLetterOf(data: unknown, failure: Pick<DeadLetter, 'attempts' | 'error' | 'firstAttemptAt' | 'failedAt'>): DeadLetter | undefined {
  let job: InboxJob;
  try {
    job = readJob(data);
  } catch {
    return undefined;
  }
  return { webhookId: job.id, namespace: job.namespace, signed: job.signed, ...failure, acceptedAt: new Date(job.acceptedAt), job };
}

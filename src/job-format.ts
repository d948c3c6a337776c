/**
 * The job format: what the receiver writes when it accepts a delivery into an inbox, and what a
 * worker reads back, checked field by field, to run the handler. Below both the receiver and the
 * inbox: the format is their contract, so each imports it here and neither imports the other.
 */

import { base64Decode, base64Encode } from './lib/encoding.ts';
import { PermanentError } from './errors.ts';
import { entityKey } from './ordering.ts';
import type { EntityOrder } from './stores/types.ts';
import { rebuiltWebhook, type VerifiedWebhook } from './verify.ts';

/**
 * The newest version of the job format this release writes (`job.v`). Format 2 adds what a job of
 * an event pulled from the relay carries (`scheme: 'relay'`, `verificationState`, `relayEventId`);
 * a delivery received over HTTP is still written in format 1, so the workers of a release that
 * reads only format 1 keep running its jobs during a rolling upgrade. A worker reads every format
 * up to its own, and refuses a newer one (it dead-letters it, saying so) rather than guessing at
 * its fields.
 *
 * @example
 * ```ts
 * import { INBOX_JOB_FORMAT } from 'webhook-receiver';
 * console.log(`jobs are written in formats up to ${INBOX_JOB_FORMAT}`);
 * ```
 */
export const INBOX_JOB_FORMAT = 2;

/**
 * A job's data: what a worker needs to rebuild the verified webhook, and never a secret (the
 * signature header is not kept: the job was verified when it was accepted). JSON-safe, so every
 * engine serialises it as it is; absent values are `null`.
 *
 * @example
 * ```ts
 * const job: InboxJob = {
 *   v: 1, id: 'msg_1', timestamp: 1_700_000_000, body: 'eyJ0eXBlIjoicGluZyJ9', contentType: 'application/json',
 *   signed: true, scheme: 'v1', keyIndex: 0, keyId: null, namespace: 'default', tenant: null, entity: null,
 *   acceptedAt: 1_700_000_000_250,
 * };
 * ```
 */
export interface InboxJob {
  /** The format version: 1, or 2 for a pulled event ({@link INBOX_JOB_FORMAT}). */
  readonly v: 1 | 2;
  /** `webhook-id`. */
  readonly id: string;
  /** `webhook-timestamp`, in Unix seconds (for an unsigned request without one, when it was received). */
  readonly timestamp: number;
  /** The verified body bytes, in standard base64. */
  readonly body: string;
  /** The request's `content-type`, or `null`. */
  readonly contentType: string | null;
  /** `false` only for an unsigned delivery let in by `unsigned: 'accept'`. */
  readonly signed: boolean;
  /** `'relay'` (format 2 only) for an event pulled from the relay's API. */
  readonly scheme: 'v1' | 'v1a' | 'relay' | null;
  readonly keyIndex: number | null;
  readonly keyId: string | null;
  /** The idempotency namespace the delivery was accepted in. */
  readonly namespace: string;
  /** The tenant it was verified for, with tenant keys; otherwise `null`. */
  readonly tenant: string | null;
  /**
   * Its ordering entity as `ordering.key` named it, for a signed delivery to a receiver with
   * `ordering` whose key named one; otherwise `null`.
   */
  readonly entity: string | null;
  /**
   * With an entity: the event's version, encoded as `encodeVersion` does (fixed width, ordered as
   * strings). Absent (or `null`) on a job that is not ordered. Added within format 1: optional.
   */
  readonly version?: string | null;
  /** With an entity: `ordering.exclusive` (one job of the entity at a time). Absent (or `null`) otherwise. */
  readonly exclusive?: boolean | null;
  /** When the receiver accepted it, in epoch milliseconds. */
  readonly acceptedAt: number;
  /** Format 2, a pulled event: how the relay judged its signature at capture. Absent otherwise. */
  readonly verificationState?: 'verified' | 'authenticated' | 'unattempted' | null;
  /** Format 2, a pulled event: the relay's event id. Absent otherwise. */
  readonly relayEventId?: string | null;
}

/** The job of a verified webhook accepted now. */
export function jobOf(
  webhook: VerifiedWebhook,
  fields: { namespace: string; contentType: string | null; tenant?: string | null; order?: EntityOrder | undefined; acceptedAt: number },
): InboxJob {
  const order = fields.order;
  // A pulled event needs format 2's fields; every other job stays in format 1, which the workers
  // of earlier releases read.
  const pulled = webhook.scheme === 'relay';
  const job: Mutable<InboxJob> = {
    v: pulled ? 2 : 1,
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
  if (pulled) {
    job.verificationState = webhook.verificationState ?? null;
    job.relayEventId = webhook.relayEventId ?? null;
  }
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
  if (job.v !== 1 && job.v !== INBOX_JOB_FORMAT) {
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
    (job.scheme === null || job.scheme === 'v1' || job.scheme === 'v1a' || (job.v === 2 && job.scheme === 'relay')) &&
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
      : typeof job.version === 'string' && ENCODED_VERSION.test(job.version) && typeof job.exclusive === 'boolean') &&
    // Format 2's fields: a pulled event's, on a pulled event's job only.
    (job.scheme === 'relay'
      ? (job.verificationState === 'verified' || job.verificationState === 'authenticated' || job.verificationState === 'unattempted') &&
        typeof job.relayEventId === 'string' &&
        job.signed === (job.verificationState !== 'unattempted')
      : (job.verificationState === undefined || job.verificationState === null) && (job.relayEventId === undefined || job.relayEventId === null));
  if (!valid) throw new PermanentError(`the job data does not have the fields of format ${String(job.v)}: it was not written by webhook-receiver, or was changed`);
  if (base64Decode(job.body as string) === undefined) throw new PermanentError('the job body is not base64');
  return data as InboxJob;
}

/** The verified webhook a job was accepted as, rebuilt for the handler. */
export function jobWebhook(job: InboxJob): VerifiedWebhook {
  return rebuiltWebhook({
    id: job.id,
    timestamp: new Date(job.timestamp * 1000),
    body: base64Decode(job.body)!,
    signed: job.signed,
    scheme: job.scheme ?? undefined,
    keyIndex: job.keyIndex ?? undefined,
    keyId: job.keyId ?? undefined,
    tenant: job.tenant ?? undefined,
    verificationState: job.verificationState ?? undefined,
    relayEventId: job.relayEventId ?? undefined,
  });
}

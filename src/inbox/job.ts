/**
 * What every engine shares that is not the contract: job ids derived from the store key, the
 * engine options every inbox takes, and the way a failure is kept in a dead letter (the job format
 * itself, written by the receiver and read by the workers, is `job-format.ts`, below both).
 * Internal: not exported from the package.
 */

import { sha256 } from '../crypto.ts';
import { errorText, isWebhookError, PermanentError } from '../errors.ts';
import { readJob, type InboxJob } from '../job-format.ts';
import { wholeNumber } from '../lib/checks.ts';
import { toHex, utf8Encoder } from '../lib/encoding.ts';
import type { DeadLetter, JobSelector } from './types.ts';

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

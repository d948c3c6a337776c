/**
 * What travels in an SQS message: the job every engine writes, wrapped in an envelope that carries
 * what SQS cannot keep for us across a re-send (the attempts spent in earlier messages, a
 * generation that keeps FIFO deduplication from dropping the re-send, when the first attempt
 * began) and, on the dead-letter queue, the failure that put it there. Also the FIFO ids, and the
 * size check made at accept.
 */

import { WebhookError } from '../../errors.ts';
import { isObject } from '../../lib/checks.ts';
import { utf8Encoder } from '../../lib/encoding.ts';
import { acceptKey, hexJobId } from '../job.ts';
import type { InboxJob } from '../types.ts';

/** A message body as the inbox sends it. */
export interface Envelope {
  job: unknown;
  /** Handler attempts the job spent in earlier messages (a deferral or a retry re-sends it). */
  attemptsBefore: number;
  /** Incremented by every re-send: part of a FIFO queue's `MessageDeduplicationId`. */
  generation: number;
  /** When the job's first attempt began (epoch ms), once an attempt has failed. */
  firstAttemptAt?: number;
  /** On the dead-letter queue, when the worker put it there: its last failure. */
  failure?: Failure;
}

/** What the worker writes beside a job it dead-letters. */
export interface Failure {
  attempts: number;
  error: { name: string; message: string };
  failedAt: number;
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 0;

/**
 * The envelope in a message body; a body that is not one (a job sent by hand, or not JSON) is a
 * job with nothing spent, which the worker's job check then judges.
 */
export function envelopeOf(body: string | undefined): Envelope {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body ?? '');
  } catch {
    return { job: body, attemptsBefore: 0, generation: 0 };
  }
  if (!isObject(parsed) || !('job' in parsed) || !isCount(parsed.attemptsBefore)) return { job: parsed, attemptsBefore: 0, generation: 0 };
  const envelope: Envelope = { job: parsed.job, attemptsBefore: parsed.attemptsBefore, generation: isCount(parsed.generation) ? parsed.generation : 0 };
  if (typeof parsed.firstAttemptAt === 'number' && Number.isFinite(parsed.firstAttemptAt)) envelope.firstAttemptAt = parsed.firstAttemptAt;
  const failure = parsed.failure;
  if (isObject(failure) && isCount(failure.attempts) && isObject(failure.error) && typeof failure.failedAt === 'number') {
    const { name, message } = failure.error;
    envelope.failure = {
      attempts: failure.attempts,
      error: { name: typeof name === 'string' ? name : 'Error', message: typeof message === 'string' ? message : '' },
      failedAt: failure.failedAt,
    };
  }
  return envelope;
}

/** The accepting key and id of a job read loosely (a job the worker cannot read may still be keyed). */
export function keyOf(job: unknown): { key: string; id: string } | undefined {
  if (!isObject(job)) return undefined;
  const { id, namespace, signed } = job;
  if (typeof id !== 'string' || id === '' || typeof namespace !== 'string' || namespace === '' || namespace.includes(':') || typeof signed !== 'boolean') return undefined;
  return { key: acceptKey(namespace, signed, id), id };
}

/** The bytes SQS counts for a body (message attributes are not used). */
const bytesOf = (body: string): number => utf8Encoder.encode(body).byteLength;

/**
 * What a re-send may add to the accepted message (`firstAttemptAt`, larger counts): kept free at
 * accept, so that a job SQS took once can always be sent again.
 */
const RESEND_HEADROOM_BYTES = 96;

/** The message of an accepted job, or 413 `PAYLOAD_TOO_LARGE` naming the queue's limit. */
export function acceptedBody(job: InboxJob, maxMessageBytes: number): string {
  const body = JSON.stringify({ job, attemptsBefore: 0, generation: 0 } satisfies Envelope);
  const size = bytesOf(body) + RESEND_HEADROOM_BYTES;
  if (size > maxMessageBytes) {
    const bodyBytes = Math.floor((job.body.length * 3) / 4) - (job.body.endsWith('==') ? 2 : job.body.endsWith('=') ? 1 : 0);
    throw new WebhookError(
      'PAYLOAD_TOO_LARGE',
      `request body of ${bodyBytes} bytes is too large for the inbox: as an SQS message it takes ${size} bytes, past the queue's limit of ${maxMessageBytes}`,
      { hint: "a job holds the body in base64 (4 bytes for every 3) inside JSON: raise the queue's MaximumMessageSize (up to 1 MiB), or refuse such bodies before the receiver" },
    );
  }
  return body;
}

/**
 * A dead letter's message: the envelope with its failure, the error's message cut so that the
 * whole fits the queue's limit (the job itself fitted when it was accepted).
 */
export function deadLetterBody(envelope: Envelope, failure: Failure, maxMessageBytes: number): string {
  const base: Envelope = { job: envelope.job, attemptsBefore: envelope.attemptsBefore, generation: envelope.generation };
  if (envelope.firstAttemptAt !== undefined) base.firstAttemptAt = envelope.firstAttemptAt;
  const whole = JSON.stringify({ ...base, failure });
  const over = bytesOf(whole) - maxMessageBytes;
  if (over <= 0) return whole;
  // JSON escapes can make a character cost up to six bytes: cut with room to spare.
  const keep = Math.max(0, failure.error.message.length - over - 16);
  return JSON.stringify({ ...base, failure: { ...failure, error: { name: failure.error.name, message: `${failure.error.message.slice(0, keep)}…` } } });
}

/**
 * The FIFO fields of a send of `job` at `generation` (none on a standard queue). The job's hash
 * (64 hex digits, within SQS's 128 characters) is computed once and serves both: with the
 * generation as its `MessageDeduplicationId`, so that a re-send (a deferral, a retry from the dead
 * letters) is not dropped as a duplicate within SQS's five-minute window while a second send of
 * one generation is; and as its `MessageGroupId`, unless the job has an ordering entity, whose
 * hash is then the group (SQS keeps one entity's jobs in order, and unrelated deliveries never
 * wait behind each other).
 */
export async function fifoFields(fifo: boolean, job: unknown, generation: number): Promise<Record<string, string>> {
  if (!fifo) return {};
  const keyed = keyOf(job);
  // A job that cannot be keyed is grouped and deduplicated by a random id (it is dead-lettered on arrival).
  if (keyed === undefined) {
    const random = crypto.randomUUID();
    return { MessageGroupId: random, MessageDeduplicationId: random };
  }
  const jobHash = await hexJobId(`job:${keyed.key}`);
  const { namespace, entity } = job as { namespace: string; entity?: unknown };
  const group = typeof entity === 'string' ? await hexJobId(`entity:${namespace}:${entity}`) : jobHash;
  return { MessageGroupId: group, MessageDeduplicationId: `${jobHash}-${generation}` };
}

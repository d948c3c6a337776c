/**
 * The accepting side's guard around an engine: the backlog bound and the acknowledgement timeout,
 * the same for every engine. An engine that refuses, does not answer within `timeoutMs` (BullMQ's
 * `add` never settles while Redis is down; one budget covers the backlog read and the add
 * together), or whose backlog is past `maxBacklog`, is a 503
 * `INBOX_UNAVAILABLE`: the receiver releases its claim, so the sender's retry enqueues the
 * delivery. An engine that refuses a job it can never take with a `WebhookError` below 500
 * (`PAYLOAD_TOO_LARGE`) is answered with that error, the claim released the same way. An add that timed out may still land later; the worker's claim makes that harmless.
 * The engine is seen only through {@link InboxIntake}, the side of an inbox the receiver defines.
 * Internal: the receiver uses it.
 */

import { isWebhookError, WebhookError } from '../errors.ts';
import { jobOf, type InboxJob } from '../job-format.ts';
import { withTimeout } from '../stores/internal.ts';
import { StoreError, type ClaimHandle, type EntityOrder } from '../stores/types.ts';
import { noteEnqueued } from '../telemetry.ts';
import type { VerifiedWebhook } from '../verify.ts';
import type { AcceptResult, InboxIntake } from './types.ts';

/** The backlog is read again at most this often; between reads the last count stands. */
const BACKLOG_REFRESH_MS = 1000;

/** One inbox as a receiver uses it. */
export class InboxGate {
  readonly inbox: InboxIntake;
  #backlog: number | undefined;
  #readAt = -Infinity;
  #reading: Promise<void> | undefined;

  constructor(inbox: InboxIntake) {
    const candidate = inbox as Partial<InboxIntake> | null;
    if (typeof candidate !== 'object' || candidate === null || typeof candidate.enqueue !== 'function' || typeof candidate.backlog !== 'function') {
      throw new TypeError('inbox must be an inbox: bullmqInbox({ queue }) from webhook-receiver/bullmq, pgBossInbox({ boss }) from webhook-receiver/pg-boss, or cloudflareQueueInbox({ queue, claims }) from webhook-receiver/cloudflare');
    }
    this.inbox = inbox;
  }

  /**
   * Enqueues `job` within the inbox's `timeoutMs`, or throws `INBOX_UNAVAILABLE`. The backlog read
   * and the add share that one budget: an engine that is down answers neither, and the sender
   * should hear so after `timeoutMs`, not after one wait for each step.
   */
  async enqueue(job: InboxJob, claim: ClaimHandle | undefined): Promise<'enqueued' | 'duplicate'> {
    const inbox = this.inbox;
    const deadline = Date.now() + inbox.timeoutMs;
    await this.#checkBacklog(deadline);
    const left = deadline - Date.now();
    // Spent on the backlog read: the add is not even started, so it cannot land after the 503.
    if (left <= 0) throw this.#late('count its waiting jobs');
    let outcome: unknown;
    try {
      outcome = await withTimeout(inbox.enqueue(job, { claim }), left, inbox.engine, 'enqueue');
    } catch (error) {
      // A job the engine can never take (a body past Cloudflare Queues' message limit) is refused
      // as the engine said (413), not as a 503 the sender would retry into the same refusal.
      if (isWebhookError(error) && error.status < 500) throw error;
      if (error instanceof StoreError && error.reason === 'timeout') throw this.#late('acknowledge the job');
      throw new WebhookError('INBOX_UNAVAILABLE', 'the inbox could not take the webhook; retry later', { cause: error, hint: `${inbox.engine} refused the job` });
    }
    if (outcome !== 'enqueued' && outcome !== 'duplicate') {
      throw new WebhookError('INBOX_UNAVAILABLE', 'the inbox could not take the webhook; retry later', {
        hint: `${inbox.engine} answered enqueue with ${JSON.stringify(outcome) ?? 'undefined'}, not 'enqueued' or 'duplicate'`,
      });
    }
    return outcome;
  }

  /** The budget ran out while the engine was to `step`. */
  #late(step: string): WebhookError {
    const { engine, timeoutMs } = this.inbox;
    return new WebhookError('INBOX_UNAVAILABLE', 'the inbox did not acknowledge the webhook in time; retry later', {
      hint: `${engine} did not ${step} within timeoutMs, ${timeoutMs} ms, the one budget for the backlog read and the add (is its server reachable?)`,
    });
  }

  /**
   * Refuses while the last count read is past `maxBacklog`; reads it again at most once a second.
   * Waits for a count only until `deadline` (epoch ms), the delivery's budget.
   */
  async #checkBacklog(deadline: number): Promise<void> {
    const now = Date.now();
    if (now - this.#readAt >= BACKLOG_REFRESH_MS && this.#reading === undefined) {
      this.#readAt = now;
      this.#reading = withTimeout(this.inbox.backlog(), this.inbox.timeoutMs, this.inbox.engine, 'backlog').then(
        (count) => {
          this.#backlog = typeof count === 'number' && Number.isFinite(count) ? count : undefined;
          this.#reading = undefined;
        },
        () => {
          // Unknown: the enqueue itself will say whether the engine answers.
          this.#reading = undefined;
        },
      );
    }
    // The first delivery waits for a count (a read another delivery started, too, for no longer
    // than its own budget); later ones use the last one while it is refreshed.
    const reading = this.#reading;
    if (this.#backlog === undefined && reading !== undefined) {
      try {
        await withTimeout(reading, Math.max(0, deadline - Date.now()), this.inbox.engine, 'backlog');
      } catch {
        // The read itself never rejects (a failure leaves the count unknown): this is the budget.
        throw this.#late('count its waiting jobs');
      }
    }
    const backlog = this.#backlog;
    if (backlog !== undefined && backlog >= this.inbox.maxBacklog) {
      throw new WebhookError('INBOX_UNAVAILABLE', 'the inbox is full; retry later', {
        hint: `${this.inbox.engine} holds ${backlog} jobs waiting, maxBacklog is ${this.inbox.maxBacklog}: are the workers running?`,
      });
    }
  }
}

/** What {@link acceptClaimed} reads from the receiver's claim. */
export interface ClaimedDelivery {
  outcome: 'acquired' | 'duplicate' | 'in_progress';
  webhook: VerifiedWebhook;
  retryAfterSeconds?: number;
  context: { readonly claim: ClaimHandle | undefined };
  complete(): Promise<void>;
  release(): Promise<void>;
}

/**
 * Turns the receiver's claim on a verified delivery into an accepted job: enqueue, then complete
 * the claim (the engine acknowledged), or release it and rethrow (`INBOX_UNAVAILABLE`), so the
 * sender's retry enqueues it. A duplicate or an id in progress is answered without enqueueing.
 * `namespace`: the idempotency namespace the claim is (or, run unclaimed through a store outage,
 * would have been) in; the job and its id carry it. `order`, for an ordered delivery: its entity
 * and version, which the job carries to the worker.
 */
export async function acceptClaimed(gate: InboxGate, claim: ClaimedDelivery, contentType: string | null, namespace: string, order?: EntityOrder): Promise<AcceptResult> {
  const { webhook } = claim;
  if (claim.outcome === 'duplicate') return { outcome: 'duplicate', webhook };
  if (claim.outcome === 'in_progress') return { outcome: 'in_progress', webhook, retryAfterSeconds: claim.retryAfterSeconds ?? 1 };
  const handle = claim.context.claim;
  let outcome: 'enqueued' | 'duplicate';
  try {
    outcome = await gate.enqueue(jobOf(webhook, { namespace, contentType, order, acceptedAt: Date.now() }), handle);
  } catch (error) {
    await claim.release();
    throw error;
  }
  noteEnqueued(claim);
  await claim.complete();
  return { outcome, webhook };
}

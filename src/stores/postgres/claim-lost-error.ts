/**
 * The transaction could not complete the claim, so it rolled back: the claim's lock expired (the
 * handler ran past `lockSeconds`) and another delivery took it over, or its row was deleted, or it
 * was completed already. The side effect did not happen; the delivery that holds the claim now
 * runs it.
 *
 * @example
 * ```ts
 * import { ClaimLostError } from 'webhook-receiver/postgres';
 * try { await store.transaction(context, work); }
 * catch (error) { if (error instanceof ClaimLostError) log.warn(`rolled back: ${error.key}`); throw error; }
 * ```
 */
export class ClaimLostError extends Error {
  /** The claim's key. */
  readonly key: string;

  constructor(key: string) {
    super(
      `postgres store: the claim on ${JSON.stringify(key)} was lost before commit (its lock expired and another delivery may have taken it over), so the transaction rolled back and its side effects are undone`,
    );
    this.name = 'ClaimLostError';
    this.key = key;
  }
}

/**
 * Names the sections print and the generated blocks of the guides read back (doc-blocks.ts), in a
 * module of their own so that reading bench/RESULTS.md loads no peer library or server client.
 */

export const OURS = 'ours, node:crypto';
export const FLOOR = 'bare HMAC (floor)';
export const HAND = 'hand-written check';
/** The hand-written check keyed with the secret's bytes, as many apps key it: slow on Node 24 alone. */
export const HAND_BUFFER = 'hand-written check, Buffer key';
/** The hand-written check of GitHub's scheme: what `@octokit/webhooks-methods` is measured against. */
export const HAND_GITHUB = 'hand-written check, GitHub scheme';

export const CAPACITY_TITLE = '16. Capacity: CPU per delivery, and two receivers';
/** The heading of the per-part table, which docs/operating.md's generated block copies. */
export const PARTS_HEADING = '### CPU time per delivery, by process';
/** The heading of the DynamoDB write units and SQS requests per delivery, copied the same way. */
export const USAGE_HEADING = '### DynamoDB write units and SQS requests per delivery';
/** The heading of the two-receiver check's table, copied the same way. */
export const TWO_HEADING = '### Two receivers sharing one store';
/** The heading of the extrapolation's table. */
export const SCALE_HEADING = '### Past this machine (extrapolation)';

export const RECEIVER_TITLE = '11. Receiver: claim and complete';
/** Section 11's rows that docs/benchmarks.md's generated block reads back. */
export const CLAIM = 'claim + complete';
export const BARE_MAP = 'verify + a bare Map: look up, forget the oldest, insert, mark done';
export const RECEIVER_ONLY = 'the receiver without a store (`idempotency: false`) + the bare Map';
export const STORE_ONLY = 'verify + the memory store called directly (claim, complete)';

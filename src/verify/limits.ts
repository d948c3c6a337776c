/**
 * The limits a webhook is held to before any signature work, and the default timestamp window.
 * Public (exported from the package root), so a sender can check against them.
 */

/**
 * Five minutes, past and future: what every Standard Webhooks reference library uses.
 *
 * @example
 * ```ts
 * import { createVerifier, DEFAULT_TOLERANCE_SECONDS } from 'webhook-receiver';
 * // A sender whose retries queue for a while: twice the default window.
 * const verifier = createVerifier({ secrets: process.env.WEBHOOK_SECRET!, toleranceSeconds: 2 * DEFAULT_TOLERANCE_SECONDS });
 * ```
 */
export const DEFAULT_TOLERANCE_SECONDS = 300;
/**
 * A `webhook-signature` header longer than this is refused (`INVALID_SIGNATURE_HEADER`) before any
 * signature work.
 *
 * @example
 * ```ts
 * import { MAX_SIGNATURE_HEADER_LENGTH } from 'webhook-receiver';
 * if (signatureHeader.length > MAX_SIGNATURE_HEADER_LENGTH) console.warn('this sender will be refused: INVALID_SIGNATURE_HEADER');
 * ```
 */
export const MAX_SIGNATURE_HEADER_LENGTH = 16 * 1024;
/**
 * The longest `webhook-id` accepted (senders use ids of about 30 characters).
 *
 * @example
 * ```ts
 * import { MAX_ID_LENGTH } from 'webhook-receiver';
 * if (id.length > MAX_ID_LENGTH) console.warn('this sender will be refused: MISSING_ID');
 * ```
 */
export const MAX_ID_LENGTH = 256;
/**
 * How many `v1a` entries are checked against each `whpk_` key, at the least: with more keys, one
 * entry per key. So one request costs at most keys × max(2, keys) Ed25519 verifications, whatever
 * its header holds (two with one key, enough for a sender signing with its old and new key during
 * a rotation). Entries past the bound are left unchecked, not refused: one of the first ones
 * matches for an honest sender, and a forger gains nothing from sending more.
 *
 * @example
 * ```ts
 * import { MAX_V1A_ENTRIES } from 'webhook-receiver';
 * const keys = 3;
 * console.log(`at most ${keys * Math.max(MAX_V1A_ENTRIES, keys)} Ed25519 verifications per request`);
 * ```
 */
export const MAX_V1A_ENTRIES = 2;
/**
 * A `webhook-signature` header with more entries than this is refused (`INVALID_SIGNATURE_HEADER`)
 * before any signature work.
 *
 * @example
 * ```ts
 * import { MAX_SIGNATURE_ENTRIES } from 'webhook-receiver';
 * if (signatureHeader.split(' ').length > MAX_SIGNATURE_ENTRIES) console.warn('this sender will be refused: INVALID_SIGNATURE_HEADER');
 * ```
 */
export const MAX_SIGNATURE_ENTRIES = 64;

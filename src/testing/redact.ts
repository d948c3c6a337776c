/**
 * Credential headers in captured requests: what `webhook-receiver listen --record` writes in their
 * place, and what a replay never sends. One rule for every capture, whoever made it: a recording,
 * or the relay's event view, whose headers come unscrubbed.
 *
 * A captured signature is a credential too: Standard Webhooks and Stripe signatures stay valid
 * for their tolerance window, and GitHub's `x-hub-signature-256` carries no timestamp at all, so
 * it verifies its body at the real endpoint for as long as the secret lives.
 */

/**
 * What a credential header's value becomes in a recording. The header itself stays, so the file
 * still shows that the request carried it; a replay never sends a header with this value.
 *
 * @example
 * ```ts
 * import { REDACTED } from 'webhook-receiver/testing';
 * const kept = line.headers.filter(([, value]) => value !== REDACTED);
 * ```
 */
export const REDACTED = '[redacted]';

/** Named whole: the credentials of HTTP itself, and the signatures of Standard Webhooks. */
const CREDENTIAL_NAMES = new Set(['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key', 'webhook-signature', 'svix-signature']);

/**
 * Words that make any header a credential when they stand between its dashes (or underscores or
 * dots): `x-hub-signature-256`, `stripe-signature`, `x-slack-signature`, `x-gitlab-token`,
 * `x-webhook-secret`, `x-auth-token`, `x-amz-security-token`. A word beginning with `hmac`
 * (`x-shopify-hmac-sha256`) or ending in `signature` (`x-square-hmacsha256-signature`) counts,
 * and so does `api` followed by `key` (`x-goog-api-key`). `key` alone does not: `idempotency-key`
 * is no credential, and a replay needs it.
 */
const CREDENTIAL_WORDS = new Set(['authorization', 'auth', 'cookie', 'signature', 'token', 'secret', 'password', 'passwd', 'apikey', 'credential', 'credentials']);

/**
 * Whether a header carries a credential, by its name (any case): `authorization`,
 * `proxy-authorization`, `cookie`, `set-cookie`, `x-api-key`, `webhook-signature` and
 * `svix-signature`, and any name with a word such as `signature`, `token`, `secret`, `auth`,
 * `password` or `api-key` in it, which covers other senders' signatures (`stripe-signature`,
 * `x-hub-signature-256`, `x-slack-signature`, `x-shopify-hmac-sha256`…).
 *
 * @example
 * ```ts
 * import { isCredentialHeader } from 'webhook-receiver/testing';
 * isCredentialHeader('Stripe-Signature'); // true
 * isCredentialHeader('idempotency-key'); // false
 * ```
 */
export function isCredentialHeader(name: string): boolean {
  const lower = name.toLowerCase();
  if (CREDENTIAL_NAMES.has(lower)) return true;
  const words = lower.split(/[-_.]/);
  return words.some((word, index) => CREDENTIAL_WORDS.has(word) || word.startsWith('hmac') || word.endsWith('signature') || (word === 'api' && words[index + 1] === 'key'));
}

/**
 * Headers with every credential's value replaced by {@link REDACTED}: the same names, in the same
 * order, repeats kept. What `webhook-receiver listen --record` writes; use it on the relay's event
 * view (whose headers are unscrubbed) before you keep one as a fixture.
 *
 * @example
 * ```ts
 * import { redactCredentialHeaders } from 'webhook-receiver/testing';
 * redactCredentialHeaders([['Authorization', 'Bearer abc'], ['content-type', 'application/json']]);
 * // [['Authorization', '[redacted]'], ['content-type', 'application/json']]
 * ```
 */
export function redactCredentialHeaders(headers: readonly (readonly [string, string])[]): [string, string][] {
  return headers.map(([name, value]): [string, string] => [name, isCredentialHeader(name) ? REDACTED : value]);
}

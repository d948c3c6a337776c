/**
 * What a refused request is, as `onRejected` and the log see it: the method, the path as sent and
 * the webhook id it claimed. Below both the adapters' shared flow (http.ts) and the logger, which
 * each need it.
 */

import { claimedWebhookId, type HeadersInput } from './headers.ts';

/**
 * What an adapter tells `onRejected` about a refused request: never a secret, never a header
 * value other than the webhook id. Values are as the request sent them, never decoded: the path
 * keeps its percent-encoding (`/hook%0A` stays six characters, not a line break). Unverified:
 * escape them before writing them into a text log (the default log line does).
 *
 * @example
 * ```ts
 * webhooks({ secrets, onRejected: (error, ctx) => metrics.increment(`webhook.rejected.${error.code}`, { path: ctx.path }) });
 * ```
 */
export interface RejectionContext {
  method: string;
  /** The request path as sent, percent-encoding intact, without the query string. */
  path: string;
  /** The `webhook-id` the request claimed, as sent, when it had one. Unverified: do not trust it. */
  webhookId: string | undefined;
  /**
   * With tenant keys, the tenant the request named (by its route, host or header), when it named
   * one the refusal concerns; absent otherwise. Unverified, like the path: escape it before
   * writing it into a text log (the default log line does), and keep it off metric attributes
   * (anyone can make up tenant names).
   */
  tenant?: string;
}

/**
 * The {@link RejectionContext} of a request, built the same way by every adapter: the path as
 * sent (from a path or a full URL, never percent-decoded) without its query string (which may
 * carry tokens), and the first `webhook-id` (or `svix-id`) the request claimed.
 *
 * @example
 * ```ts
 * rejectionContext('POST', '/webhooks?token=abc', { 'webhook-id': 'msg_1' });
 * // { method: 'POST', path: '/webhooks', webhookId: 'msg_1' }
 * rejectionContext('POST', 'https://example.com/a%0Ab', {});
 * // { method: 'POST', path: '/a%0Ab', webhookId: undefined }
 * ```
 */
export function rejectionContext(method: string, url: string, headers: HeadersInput): RejectionContext {
  return { method, path: pathAsSent(url), webhookId: claimedWebhookId(headers) };
}

/** The tenant each refusal concerned, kept beside the error rather than on it. */
const TENANT_OF_ERROR = new WeakMap<object, string>();

/**
 * Notes the tenant a refusal concerns (tenant keys), for the rejection context; returns `error`.
 * Internal: tenant keys and their verifiers call it where they refuse.
 */
export function withTenant<E>(error: E, tenant: string | undefined): E {
  if (tenant !== undefined && typeof error === 'object' && error !== null) TENANT_OF_ERROR.set(error, tenant);
  return error;
}

/** The tenant noted with {@link withTenant}, if any. Internal. */
export function tenantOfError(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null ? TENANT_OF_ERROR.get(error) : undefined;
}

/**
 * The path of a request URL as sent (from a path or a full URL, never percent-decoded), without
 * its query string or fragment; `'/'` when there is none. Internal: rejection contexts and tenant
 * keys' requests read the path this way.
 */
export function pathAsSent(url: string): string {
  // A full URL (Fetch's request.url) keeps its path as sent: cut off the origin, decode nothing.
  let start = 0;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url);
  if (scheme !== null) {
    const slash = url.indexOf('/', scheme[0].length);
    start = slash === -1 ? url.length : slash;
  }
  let end = url.indexOf('?', start);
  if (end === -1) end = url.indexOf('#', start);
  return url.slice(start, end === -1 ? url.length : end) || '/';
}

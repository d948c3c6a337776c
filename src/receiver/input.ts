/**
 * What the receiver reads of a request before verifying it: whether it is a Fetch `Request`, and
 * its `content-type` (kept with an inbox's job).
 */

import { headerValues } from '../headers.ts';
import type { WebhookInput } from '../verify.ts';

export function isRequest(input: WebhookInput | Request): input is Request {
  return typeof (input as Request).arrayBuffer === 'function' && typeof (input as Request).method === 'string';
}

/** The request's `content-type`, kept with an inbox's job. */
export function contentTypeOf(input: WebhookInput | Request): string | null {
  if (isRequest(input)) return input.headers.get('content-type');
  const value = headerValues(input.headers, 'content-type');
  return value === undefined ? null : Array.isArray(value) ? (value[0] ?? null) : value;
}

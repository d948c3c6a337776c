/**
 * The assertions as `expect.extend` matchers, free of any test runner import: vitest registers
 * them from `webhook-receiver/vitest`, Jest users pass them to their own `expect.extend`.
 */

import { WebhookAssertionError, assertSignedWebhook, assertUnsignedWebhook, type SignedWebhookAssertionOptions } from './assert.ts';
import type { VerifiedWebhook } from '../verify.ts';
import { EndpointCheckError, assertEndpointConforms, type CheckReport } from './check-endpoint.ts';
import { keyLabel } from './diagnose.ts';
import type { RecordedRequest } from './recorded.ts';

/**
 * What a matcher returns to `expect.extend` (vitest's and Jest's shape).
 *
 * @example
 * ```ts
 * const result: WebhookMatcherResult = await webhookMatchers.toBeUnsignedWebhook.call({ isNot: false }, request);
 * ```
 */
export interface WebhookMatcherResult {
  pass: boolean;
  /** Why it passed or failed: vitest shows it when the assertion fails. */
  message: () => string;
}

/**
 * The part of the runner's matcher context the matchers read.
 *
 * @example
 * ```ts
 * const context: WebhookMatcherContext = { isNot: false };
 * ```
 */
export interface WebhookMatcherContext {
  isNot?: boolean;
}

function describeVerified(webhook: VerifiedWebhook): string {
  return `webhook-id ${JSON.stringify(webhook.id)} verified with ${keyLabel(webhook.keyIndex ?? 0, webhook.keyId)} (${webhook.scheme})`;
}

/**
 * `toBeSignedWebhook(options)` and `toBeUnsignedWebhook()`, asynchronous, with the messages of
 * {@link assertSignedWebhook} and {@link assertUnsignedWebhook}; and `toConformToStandardWebhooks()`,
 * synchronous, on a report of `checkEndpoint`, with the message of `assertEndpointConforms`.
 * `webhook-receiver/vitest` registers them; with Jest, register them yourself.
 *
 * @example
 * ```ts
 * // jest.setup.ts
 * import { webhookMatchers } from 'webhook-receiver/testing';
 * expect.extend(webhookMatchers);
 * // in a test
 * await expect(forwarded).toBeSignedWebhook({ secrets: secret });
 * ```
 */
export const webhookMatchers = {
  /** The request verifies with one of `options.secrets` within the timestamp window. */
  async toBeSignedWebhook(this: WebhookMatcherContext, received: unknown, options: SignedWebhookAssertionOptions): Promise<WebhookMatcherResult> {
    try {
      const webhook = await assertSignedWebhook(received as RecordedRequest, options);
      return { pass: true, message: () => `expected a request that is not a validly signed webhook, but ${describeVerified(webhook)}` };
    } catch (error) {
      if (error instanceof WebhookAssertionError) return { pass: false, message: () => error.message };
      throw error;
    }
  },

  /** The request has a `webhook-id` and no signature header at all. */
  async toBeUnsignedWebhook(this: WebhookMatcherContext, received: unknown): Promise<WebhookMatcherResult> {
    try {
      await assertUnsignedWebhook(received as RecordedRequest);
      return { pass: true, message: () => 'expected a request that is not an unsigned webhook, but it has a webhook-id and no signature header' };
    } catch (error) {
      if (error instanceof WebhookAssertionError) return { pass: false, message: () => error.message };
      throw error;
    }
  },

  /** The `checkEndpoint` report has no failed security case and the endpoint was reachable. */
  toConformToStandardWebhooks(this: WebhookMatcherContext, received: unknown): WebhookMatcherResult {
    try {
      const report = assertEndpointConforms(received as CheckReport);
      const judged = report.rows.filter((row) => row.security && row.verdict === 'pass').length;
      return { pass: true, message: () => `expected ${report.target} not to conform, but all ${judged} judged security cases passed` };
    } catch (error) {
      if (error instanceof EndpointCheckError) return { pass: false, message: () => error.message };
      throw error;
    }
  },
};

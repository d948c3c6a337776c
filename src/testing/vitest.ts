/**
 * `webhook-receiver/vitest`: importing it (from a test file or `setupFiles`) registers
 * `toBeSignedWebhook(options)`, `toBeUnsignedWebhook()` and `toConformToStandardWebhooks()` on
 * vitest's `expect`. Through `setupFiles` alone the matchers are registered but untyped: the
 * project adds `"types": ["webhook-receiver/vitest"]` to its tsconfig.json for the declarations below
 * to reach test files that do not import this module (the recipe in docs/testing.md, tested as written).
 *
 * @module webhook-receiver/vitest
 */

// The `declare module 'vitest'` below only reaches a consumer if the built .d.mts itself refers to
// vitest. The `expect` import is a value, which the declaration build drops, and TypeScript 5.5+
// keeps a reference directive in its output only with preserve="true". Without it, a project
// that sees vitest through `vitest/globals` alone gets TS2339 for the matchers.
/// <reference types="vitest" preserve="true" />

import { expect } from 'vitest';
import type { SignedWebhookAssertionOptions } from './assert.ts';
import { webhookMatchers } from './matchers.ts';

expect.extend(webhookMatchers);

/**
 * The matchers this module registers, typed on vitest's `Assertion`.
 *
 * @example
 * ```ts
 * import 'webhook-receiver/vitest';
 * await expect(forwarded).toBeSignedWebhook({ secrets: destinationSecret });
 * await expect(unattempted).toBeUnsignedWebhook();
 * await expect(tampered).not.toBeSignedWebhook({ secrets: destinationSecret });
 * expect(await checkEndpoint(app.fetch, { secrets: destinationSecret })).toConformToStandardWebhooks();
 * ```
 */
export interface WebhookMatchers<R = unknown> {
  /** The request verifies with one of `options.secrets` within the timestamp window. Await it. */
  toBeSignedWebhook(options: SignedWebhookAssertionOptions): Promise<R>;
  /** The request has a `webhook-id` and no signature header at all. Await it. */
  toBeUnsignedWebhook(): Promise<R>;
  /** The `checkEndpoint` report has no failed security case and the endpoint was reachable. */
  toConformToStandardWebhooks(): R;
}

// Only `Assertion`, not vitest's `Matchers` (which 3.2+ also spreads onto `expect.*` as
// asymmetric matchers): these matchers are asynchronous, and asymmetric matchers cannot be.
// Declared without type parameters: every declaration of an interface must repeat its type
// parameters by name, and vitest 4 declares `Assertion<T>` where vitest 5 declares
// `Assertion<R, T>` (TS2428 on the other major). A declaration with none merges with either, as
// both give every parameter a default; the matchers do not depend on them.
declare module 'vitest' {
  interface Assertion extends WebhookMatchers<void> {}
}

export { webhookMatchers };
export type { SignedWebhookAssertionOptions };
export type { WebhookMatcherContext, WebhookMatcherResult } from './matchers.ts';

/**
 * What `require('webhook-receiver/vitest')` loads: vitest is ESM-only (its own CommonJS entry
 * throws), so there is nothing to register from CommonJS. The error says what to do instead.
 */

// The types stay those of the ES module: a project type-checked as CommonJS still runs its test
// and setup files as ES modules under vitest, and needs the matcher augmentation.
/// <reference types="vitest" preserve="true" />
export type { SignedWebhookAssertionOptions, WebhookMatcherContext, WebhookMatcherResult, WebhookMatchers } from './vitest.ts';

throw new Error(
  "webhook-receiver/vitest cannot be loaded with require(): vitest is ESM-only. Import it from an ES module (vitest runs test and setup files as ES modules, " +
    "whatever the project's module setting), or with Jest and other runners register the matchers yourself: " +
    "const { webhookMatchers } = require('webhook-receiver/testing'); expect.extend(webhookMatchers);",
);

/**
 * `webhook-receiver/nestjs`: a NestJS module, an interceptor and parameter decorators that verify
 * and claim a webhook on `@nestjs/platform-express` and `@nestjs/platform-fastify` alike, or, with
 * an inbox in the module's options, verify, deduplicate, enqueue and answer 202 themselves.
 *
 * Translation only: the interceptor takes the raw bytes Nest keeps with `rawBody: true`, calls
 * the receiver, answers from the core's table, and settles the claim by the route handler's
 * outcome. A guard would not do: it runs before the handler and never learns how it ended, and it
 * cannot answer a request itself (it lets it through or throws), which accepting needs.
 *
 * No decorator syntax here: the decorators are applied as functions, and every dependency is
 * injected by an explicit token, so the integration works whatever compiles the app (tsc, SWC,
 * or esbuild and tsx, which emit no decorator metadata).
 *
 * @module webhook-receiver/nestjs
 */

export type { AdapterOptions, RejectionContext } from '../src/http.ts';
export type { WebhookContext } from '../src/receiver.ts';
export type { VerifiedWebhook } from '../src/verify.ts';
export { Webhook, WebhookCtx } from './nestjs/decorators.ts';
export { WebhookInterceptor } from './nestjs/interceptor.ts';
export { WebhookReceiverModule } from './nestjs/module.ts';
export { WEBHOOK_RECEIVER_OPTIONS, type WebhookReceiverAsyncOptions, type WebhookReceiverOptions } from './nestjs/options.ts';
export { WebhookReceiverService } from './nestjs/service.ts';

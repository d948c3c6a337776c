/** What the interceptor leaves on the request, and the parameter decorators that read it. */

import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { WebhookContext } from '../../src/receiver.ts';
import type { VerifiedWebhook } from '../../src/verify.ts';

/**
 * Where the interceptor leaves the verified webhook for the parameter decorators: a property of
 * the request under a symbol of this module's own (as the Fastify adapter keeps its body state),
 * cheaper per request than a WeakMap entry and gone with the request.
 */
export const VERIFIED = Symbol('webhook-receiver verified');

interface Verified {
  webhook: VerifiedWebhook;
  context: WebhookContext;
}

/** A request the interceptor may have marked as verified. */
export interface MarkedRequest {
  [VERIFIED]?: Verified;
}

function verifiedOf(context: ExecutionContext, decorator: string): Verified {
  const found = context.switchToHttp().getRequest<MarkedRequest>()[VERIFIED];
  if (found === undefined) {
    throw new TypeError(`${decorator} is used on a route without WebhookInterceptor: add @UseInterceptors(WebhookInterceptor) to the route or its controller`);
  }
  return found;
}

/**
 * Parameter decorator: the verified webhook of a route behind {@link WebhookInterceptor}.
 *
 * @example
 * ```ts
 * @Post() @UseInterceptors(WebhookInterceptor)
 * receive(@Webhook() webhook: VerifiedWebhook) { return { id: webhook.id }; }
 * ```
 */
export const Webhook: () => ParameterDecorator = createParamDecorator((_data: unknown, context: ExecutionContext) => verifiedOf(context, '@Webhook()').webhook);

/**
 * Parameter decorator: the handler's {@link WebhookContext} (`signal`, aborted when the claim is
 * lost; `claim`, for stores that settle it in the handler's transaction), the same object every
 * adapter gives.
 *
 * @example
 * ```ts
 * @Post() @UseInterceptors(WebhookInterceptor)
 * async receive(@Webhook() webhook: VerifiedWebhook, @WebhookCtx() context: WebhookContext) {
 *   await this.orders.apply(webhook.json(), { signal: context.signal });
 * }
 * ```
 */
export const WebhookCtx: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext) => verifiedOf(context, '@WebhookCtx()').context,
);

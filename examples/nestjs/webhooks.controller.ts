import { Controller, HttpCode, Inject, Post, UseInterceptors } from '@nestjs/common';
import { Webhook, WebhookCtx, WebhookInterceptor, type VerifiedWebhook, type WebhookContext } from 'webhook-receiver/nestjs';

/** The events this app expects; the body is opaque bytes until the signature checked out. */
interface WebhookEvent {
  type: string;
  data?: unknown;
}

/** The token of the event handler, injected explicitly (no reliance on decorator metadata). */
export const EVENT_HANDLER = 'EVENT_HANDLER';
export type EventHandler = (event: WebhookEvent, webhook: VerifiedWebhook, context: WebhookContext) => void | Promise<void>;

@Controller('webhooks')
export class WebhooksController {
  constructor(@Inject(EVENT_HANDLER) private readonly onEvent: EventHandler) {}

  // The interceptor verifies and claims before this runs; it completes the claim when this
  // returns and releases it when this throws (Nest answers 500, and the sender retries).
  @Post()
  @HttpCode(200)
  @UseInterceptors(WebhookInterceptor)
  async receive(@Webhook() webhook: VerifiedWebhook, @WebhookCtx() context: WebhookContext) {
    await this.onEvent(webhook.json<WebhookEvent>(), webhook, context);
    return { received: true, id: webhook.id, keyId: webhook.keyId ?? null };
  }
}

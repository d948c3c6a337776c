/**
 * `webhook-receiver/cloudflare`: what runs on Cloudflare Workers with state: the Durable Object
 * store (`durableObjectStore` and its `WebhookClaims` object) and the inbox on Cloudflare Queues
 * (`cloudflareQueueInbox`), whose claims and dead letters live in the same objects.
 *
 * @module webhook-receiver/cloudflare
 */

export * from './stores/durable-object/index.ts';
export * from './inbox/cloudflare/index.ts';

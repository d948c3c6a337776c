// The Cloudflare Workers block of docs/hono.md, type-checked as written (tsconfig.json includes it;
// test/types/readme-blocks.test.ts checks the guide's copy too).
import { Hono, type MiddlewareHandler } from 'hono';
import { createMiddleware } from 'hono/factory';
import { webhooks, type WebhookEnv } from 'webhook-receiver/hono';

type Env = { Bindings: { WEBHOOK_SECRET: string } };
const app = new Hono<Env>();
// Built on the first request, where the secret is (Workers pass it in c.env), and kept.
let verify: MiddlewareHandler<Env & WebhookEnv> | undefined;
const verified = createMiddleware<Env & WebhookEnv>((c, next) => {
  verify ??= webhooks<Env>({ secrets: c.env.WEBHOOK_SECRET });
  return verify(c, next);
});
app.post('/webhooks', verified, (c) => c.json({ id: c.get('webhook').id }));
export default app;

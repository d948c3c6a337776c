/**
 * A Next.js API route (Pages Router): signed webhooks on POST /api/webhooks, on the Node.js
 * runtime. For the App Router, see examples/nextjs/app/api/webhooks/route.ts.
 *
 * `bodyParser: false` is what matters: Next.js otherwise parses the body before the route runs,
 * and the raw bytes that were signed are gone. The Express adapter then reads them from the
 * request itself. Left on, every delivery is answered 500 BODY_UNAVAILABLE, and the log names
 * this setting.
 *
 * Deduplication uses the in-memory store, which lives in one server process. On serverless
 * hosting, where retries may reach another instance, use a shared store:
 * `idempotency: { store: redisStore({ client }) }` from 'webhook-receiver/redis'.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorResponse, WebhookError } from 'webhook-receiver';
import { webhooks, type VerifiedWebhook, type WebhookMiddleware } from 'webhook-receiver/express';

export const config = { api: { bodyParser: false } };

interface WebhookEvent {
  type: string;
  data?: unknown;
}

/** Next.js's request and response (`NextApiRequest`, `NextApiResponse`), as far as this route uses them. */
type ApiRequest = IncomingMessage & { body?: unknown; webhook?: VerifiedWebhook };
type ApiResponse = ServerResponse & { status(code: number): ApiResponse; json(body: unknown): void };

const PARSED =
  'Next.js parsed the request body before this API route ran, so the raw bytes that were signed are gone. Turn the ' +
  'body parser off for this route: export const config = { api: { bodyParser: false } }';

// Built on the first request rather than when the module loads: `next build` loads API routes,
// usually without the deployment's secrets. Then kept, with its store, for the server's life.
let verify: WebhookMiddleware | undefined;

function createVerify(): WebhookMiddleware {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) throw new Error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
  return webhooks({ secrets: secret });
}

/**
 * Runs the middleware: `true` once it verified and claimed the webhook, `false` when it answered
 * by itself (a rejection, a duplicate, an id in flight).
 */
function verified(req: ApiRequest, res: ApiResponse): Promise<boolean> {
  verify ??= createVerify();
  return new Promise((resolve, reject) => {
    res.once('close', () => resolve(false));
    verify!(req, res, (error) => (error === undefined ? resolve(true) : reject(error)));
  });
}

export default async function handler(req: ApiRequest, res: ApiResponse): Promise<void> {
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    res.status(405).end();
    return;
  }
  if (req.body !== undefined || req.readableEnded) {
    // The sender gets the code and a short message; the fix (how this app is built) is the hint, for the log.
    const error = new WebhookError('BODY_UNAVAILABLE', 'the server could not read the raw request body, so the signature cannot be checked', { hint: PARSED });
    const answer = errorResponse(error);
    console.warn(`[webhook-receiver] rejected POST /api/webhooks: BODY_UNAVAILABLE ${error.message} (${error.hint})`);
    res.writeHead(answer.status, answer.headers).end(answer.body);
    return;
  }
  if (!(await verified(req, res))) return;
  const webhook = req.webhook!;
  // A throw here becomes Next's 500: the id is released and the sender's retry runs it again.
  const event = webhook.json<WebhookEvent>();
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
  // A 2xx marks the id as processed.
  res.status(200).json({ received: true, id: webhook.id, keyId: webhook.keyId ?? null });
}

import { createServer } from 'node:http';
import { generateSecret, signWebhook } from 'webhook-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type WebhookEvent } from '../../examples/koa.ts';
import { listen } from '../adapters/node-http.ts';
import { BODY, envelope, post, scriptTests } from './support.ts';

describe('examples/koa.ts', () => {
  const secret = generateSecret();
  const runs: string[] = [];
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const app = createApp({ secrets: secret, onRejected: () => {} }, (event: WebhookEvent, webhook) => void runs.push(`${webhook.id} ${event.type}`));
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- Koa's callback settles every error itself (ctx.onerror): its promise never rejects.
    const listening = await listen(createServer(app.callback()));
    url = `http://127.0.0.1:${listening.port}`;
    close = listening.close;
  });
  afterAll(() => close());

  it('processes a signed event once, answers the retry as a duplicate, refuses a tampered body', async () => {
    const signed = await signWebhook({ secret, body: BODY, id: 'msg_koa_1' });
    expect(await post(`${url}/webhooks`, signed.headers)).toEqual({ status: 200, body: { received: true, id: 'msg_koa_1', keyId: null } });
    expect(await post(`${url}/webhooks`, signed.headers)).toEqual({ status: 200, body: { duplicate: true } });
    expect(await post(`${url}/webhooks`, signed.headers, BODY.replace('paid', 'void'))).toEqual({ status: 401, body: envelope('SIGNATURE_MISMATCH', /^no signature matched/) });
    expect(runs).toEqual(['msg_koa_1 invoice.paid']);
  });

  it('leaves JSON parsing to the other routes', async () => {
    expect(await post(`${url}/api/echo`, {}, '{"a":1}')).toEqual({ status: 200, body: { parsed: { a: 1 } } });
  });

  scriptTests('koa.ts', /^webhook msg_script_1: invoice\.paid \(key 0\)$/m);
});

import { generateSecret, signWebhook } from 'webhook-receiver';
import { describe, expect, it } from 'vitest';
import { createApp, start } from '../../examples/hono-node.ts';
import { BODY, concurrentDeliveries, envelope, post, Runs, scriptTests, type Answer } from './support.ts';

const quiet = { onRejected: () => undefined };
const next = { key: generateSecret(), keyId: 'next' };
const prev = { key: generateSecret(), keyId: 'prev' };

async function send(app: ReturnType<typeof createApp>, headers: Record<string, string>, body = BODY): Promise<Answer> {
  const response = await app.request('/webhooks', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: response.status, body: await response.json() };
}

describe('examples/hono-node.ts', () => {
  it('processes a signed event once (app.request), and answers its retry as a duplicate', async () => {
    const runs = new Runs();
    const app = createApp({ secrets: [next, prev], ...quiet }, runs.onEvent);
    const signed = await signWebhook({ secret: [next.key, prev.key], body: BODY, id: 'msg_hono_1' });
    expect(await send(app, signed.headers)).toEqual({ status: 200, body: { received: true, id: 'msg_hono_1', keyId: 'next' } });
    const retry = await signWebhook({ secret: next.key, body: BODY, id: 'msg_hono_1' });
    expect(await send(app, retry.headers)).toEqual({ status: 200, body: { duplicate: true } });
    expect(runs.runs).toEqual([{ id: 'msg_hono_1', type: 'invoice.paid', keyId: 'next' }]);
  });

  it('refuses a tampered body and an unsigned event in the error envelope, without running the handler', async () => {
    const runs = new Runs();
    const app = createApp({ secrets: [next, prev], ...quiet }, runs.onEvent);
    const signed = await signWebhook({ secret: prev.key, body: BODY });
    expect(await send(app, signed.headers, `${BODY}\n`)).toEqual({
      status: 401,
      body: envelope('SIGNATURE_MISMATCH', /^no signature matched: 1 v1 entry tried against 2 HMAC secrets/),
    });
    const unsigned = { 'webhook-id': 'msg_hono_unsigned', 'webhook-timestamp': String(signed.timestamp) };
    expect(await send(app, unsigned)).toEqual({ status: 401, body: envelope('MISSING_SIGNATURE', /^webhook-signature header is missing/) });
    expect(runs.runs).toEqual([]);
  });

  it('serves on 127.0.0.1 with start(), and runs the handler once for ten concurrent deliveries', async () => {
    const runs = new Runs();
    const { server, port } = await start({ secrets: next, ...quiet }, 0, runs.onEvent);
    try {
      const url = `http://127.0.0.1:${port}/webhooks`;
      const signed = await signWebhook({ secret: next.key, body: BODY, id: 'msg_hono_many' });
      const { statuses, answers } = await concurrentDeliveries(() => post(url, signed.headers), runs, 10);
      expect(statuses).toEqual([200, ...Array<number>(9).fill(409)]);
      expect(answers.filter((answer) => answer.status === 409).map((answer) => answer.body)).toEqual(
        Array(9).fill(envelope('IN_PROGRESS', /^another delivery of this webhook is being processed/)),
      );
      expect(runs.runs).toHaveLength(1);
      expect(await post(url, signed.headers)).toEqual({ status: 200, body: { duplicate: true } });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  scriptTests('hono-node.ts', /^webhook msg_script_1: invoice\.paid \(key 0\)$/m);
});

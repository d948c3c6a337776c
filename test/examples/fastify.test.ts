import { generateSecret, signWebhook } from 'webhook-receiver';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../examples/fastify.ts';
import { BODY, concurrentDeliveries, envelope, Runs, scriptTests, type Answer } from './support.ts';

const quiet = { onRejected: () => undefined };
const next = { key: generateSecret(), keyId: 'next' };
const prev = { key: generateSecret(), keyId: 'prev' };

function appWith(runs: Runs) {
  return createApp({ secrets: [next, prev], ...quiet }, { onEvent: runs.onEvent, logger: false });
}

async function inject(app: ReturnType<typeof createApp>, headers: Record<string, string>, body = BODY): Promise<Answer> {
  const response = await app.inject({ method: 'POST', url: '/webhooks', headers: { 'content-type': 'application/json', ...headers }, payload: body });
  return { status: response.statusCode, body: response.json() };
}

describe('examples/fastify.ts', () => {
  it('hands the handler the parsed JSON of a signed event once, and answers its retry as a duplicate', async () => {
    const runs = new Runs();
    const app = appWith(runs);
    const signed = await signWebhook({ secret: next.key, body: BODY, id: 'msg_fastify_1' });
    expect(await inject(app, signed.headers)).toEqual({ status: 200, body: { received: true, id: 'msg_fastify_1', keyId: 'next' } });
    const retry = await signWebhook({ secret: prev.key, body: BODY, id: 'msg_fastify_1' });
    expect(await inject(app, retry.headers)).toEqual({ status: 200, body: { duplicate: true } });
    expect(runs.runs).toEqual([{ id: 'msg_fastify_1', type: 'invoice.paid', keyId: 'next' }]);
    await app.close();
  });

  it('verifies with the previous secret during a rotation and says so', async () => {
    const runs = new Runs();
    const app = appWith(runs);
    const signed = await signWebhook({ secret: prev.key, body: BODY, id: 'msg_fastify_2' });
    expect(await inject(app, signed.headers)).toEqual({ status: 200, body: { received: true, id: 'msg_fastify_2', keyId: 'prev' } });
    await app.close();
  });

  it('refuses a tampered body and a stale timestamp in the error envelope, without running the handler', async () => {
    const runs = new Runs();
    const app = appWith(runs);
    const signed = await signWebhook({ secret: next.key, body: BODY });
    expect(await inject(app, signed.headers, BODY.replace('paid', 'void'))).toEqual({
      status: 401,
      body: envelope('SIGNATURE_MISMATCH', /^no signature matched: 1 v1 entry tried against 2 HMAC secrets/),
    });
    const stale = await signWebhook({ secret: next.key, body: BODY, timestamp: Math.floor(Date.now() / 1000) - 3600 });
    expect(await inject(app, stale.headers)).toEqual({ status: 401, body: envelope('TIMESTAMP_TOO_OLD', /^webhook-timestamp is 360\d s in the past; the tolerance is 300 s/) });
    expect(runs.runs).toEqual([]);
    await app.close();
  });

  it('leaves routes outside the webhook scope to Fastify', async () => {
    const app = appWith(new Runs());
    const echoed = await app.inject({ method: 'POST', url: '/api/echo', payload: { hello: 'world' } });
    expect([echoed.statusCode, echoed.json()]).toEqual([200, { parsed: { hello: 'world' } }]);
    await app.close();
  });

  it('runs the handler once for ten concurrent deliveries of one id', async () => {
    const runs = new Runs();
    const app = appWith(runs);
    const signed = await signWebhook({ secret: next.key, body: BODY, id: 'msg_fastify_many' });
    const { statuses } = await concurrentDeliveries(() => inject(app, signed.headers), runs, 10);
    expect(statuses).toEqual([200, ...Array<number>(9).fill(409)]);
    expect(runs.runs).toHaveLength(1);
    await app.close();
  });

  // Fastify's request log has the handler's line.
  scriptTests('fastify.ts', /"webhookId":"msg_script_1","type":"invoice.paid"/);
});

/**
 * The suite's entry point on workerd, for `workerd test`: runs it, then sends signed requests to
 * examples/cloudflare-worker.ts, bound as the service `EXAMPLE` with the same `WEBHOOK_SECRET`,
 * and prints one report line. Work like signing needs a request context on workerd (random values
 * cannot be drawn at start-up), hence the `test` handler rather than top-level code.
 */

import { reply, signedRequest, smoke, type Reply } from './smoke.ts';

interface Env {
  EXAMPLE: { fetch(request: Request): Promise<Response> };
  WEBHOOK_SECRET: string;
}

async function example(env: Env): Promise<Record<string, Reply>> {
  const url = 'http://example.test/webhooks';
  const secret = env.WEBHOOK_SECRET;
  const body = '{"type":"invoice.paid"}';
  const send = async (request: Request): Promise<Reply> => reply(await env.EXAMPLE.fetch(request));
  const signed = await signedRequest(url, { secret, body, id: 'msg_worker_2' });
  return {
    valid: await send(await signedRequest(url, { secret, body, id: 'msg_worker_1' })),
    duplicate: await send(await signedRequest(url, { secret, body, id: 'msg_worker_1' })),
    tampered: await send(new Request(url, { method: 'POST', headers: signed.headers, body: body.replace('paid', 'void') })),
    wrongMethod: await send(new Request(url)),
    wrongPath: await send(new Request('http://example.test/other', { method: 'POST', body })),
  };
}

export default {
  async test(_controller: unknown, env: Env): Promise<void> {
    const report = await smoke();
    console.log(`SMOKE_REPORT ${JSON.stringify({ ...report, example: await example(env) })}`);
  },
};

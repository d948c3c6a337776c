import type { INestApplication } from '@nestjs/common';
import { generateSecret, signWebhook } from 'webhook-receiver';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApp } from '../../examples/nestjs/main.ts';
import { BODY, envelope, post, scriptTests } from './support.ts';

describe.each(['express', 'fastify'] as const)('examples/nestjs on %s', (platform) => {
  const secret = generateSecret();
  const runs: string[] = [];
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    vi.stubEnv('WEBHOOK_SECRET', secret);
    vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    app = await createApp(platform, (event, webhook) => void runs.push(`${webhook.id} ${event.type}`));
    await app.listen(0, '127.0.0.1');
    url = `${await app.getUrl()}/webhooks`.replace('[::1]', '127.0.0.1');
  });
  afterAll(async () => {
    await app.close();
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  it('processes a signed event once, answers the retry as a duplicate, refuses a tampered body', async () => {
    const signed = await signWebhook({ secret, body: BODY, id: `msg_nest_${platform}` });
    expect(await post(url, signed.headers)).toEqual({ status: 200, body: { received: true, id: `msg_nest_${platform}`, keyId: null } });
    expect(await post(url, signed.headers)).toEqual({ status: 200, body: { duplicate: true } });
    expect(await post(url, signed.headers, BODY.replace('paid', 'void'))).toEqual({ status: 401, body: envelope('SIGNATURE_MISMATCH', /^no signature matched/) });
    expect(runs).toEqual([`msg_nest_${platform} invoice.paid`]);
  });
});

// Started with tsx, which emits no decorator metadata: injection by explicit token still works.
describe('examples/nestjs/main.ts as a script', () => {
  scriptTests('nestjs/main.ts', /^webhook msg_script_1: invoice\.paid \(key 0\)$/m);
});

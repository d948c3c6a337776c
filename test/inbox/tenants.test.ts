/**
 * The inbox with tenant keys, on BullMQ against the real redis-server: each tenant's
 * delivery is accepted only with its own secret; the same webhook-id from two tenants is two jobs
 * (namespaces `t.<tenant>` apart, with deduplication off too), and a worker runs the handler once
 * for each with `webhook.tenant` set; the jobs hold the tenant and never a secret (every key of the queue in
 * Redis read raw); and Express on `/webhooks/:tenant` over real HTTP answers 202.
 */

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { Queue } from 'bullmq';
import express from 'express';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { webhooks as expressWebhooks } from '../../adapters/express.ts';
import { isWebhookError } from '../../src/errors.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { hexJobId } from '../../src/inbox/job.ts';
import type { InboxJob, InboxWorker } from '../../src/inbox/types.ts';
import { tenantKeys } from '../../src/keys.ts';
import { createReceiver } from '../../src/receiver.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { listen } from '../adapters/node-http.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';
import { Outcomes } from './conformance.ts';

const PREFIX = 'test-tenants';
const silent = { warn: () => {}, error: () => {} };
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** Two tenants with secrets of their own, and a fresh queue on the shared Redis. */
async function fixture() {
  const secrets: Record<string, string> = { acme: generateSecret(), globex: generateSecret() };
  const loads: string[] = [];
  const keys = tenantKeys({
    tenant: (request) => request.params.tenant,
    load: async (tenant) => {
      loads.push(tenant);
      const secret = secrets[tenant];
      return secret === undefined ? undefined : [secret];
    },
  });
  const connection = await connectIORedis(sharedRedisUrl!);
  const queue = new Queue(`tenants-${randomBytes(5).toString('hex')}`, { connection, prefix: PREFIX });
  closers.push(async () => {
    await queue.obliterate({ force: true });
    await queue.close();
    connection.disconnect();
  });
  const inbox = bullmqInbox({ queue, backoff: { delayMs: 0 }, logger: silent });
  return { secrets, loads, keys, connection, queue, inbox };
}

/** Every value under the queue's keys in Redis, as text: hashes, lists, sets, sorted sets, strings, streams. */
async function rawQueueText(redis: Redis, queue: Queue): Promise<string> {
  const texts: string[] = [];
  let cursor = '0';
  for (let round = 0; round < 10_000; round++) {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${PREFIX}:${queue.name}:*`, 'COUNT', 500);
    for (const key of found) {
      const type = await redis.type(key);
      texts.push(key);
      if (type === 'hash') texts.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === 'list') texts.push(JSON.stringify(await redis.lrange(key, 0, -1)));
      else if (type === 'set') texts.push(JSON.stringify(await redis.smembers(key)));
      else if (type === 'zset') texts.push(JSON.stringify(await redis.zrange(key, '0', '-1')));
      else if (type === 'string') texts.push(String(await redis.get(key)));
      else if (type === 'stream') texts.push(JSON.stringify(await redis.xrange(key, '-', '+')));
    }
    cursor = next;
    if (cursor === '0') return texts.join('\n');
  }
  throw new Error('SCAN did not finish');
}

/** Fails when any form of a secret (as given, or its base64 key alone) appears in `text`. */
function expectNoSecret(text: string, secrets: string[]): void {
  for (const secret of secrets) {
    expect(text).not.toContain(secret);
    expect(text).not.toContain(secret.slice('whsec_'.length));
  }
}

describe.skipIf(sharedRedisUrl === null)('the inbox with tenant keys (BullMQ)', () => {
  it('accepts each tenant only with its own secret, enqueues one id from both tenants twice, and the worker runs each with its tenant; no job holds a secret', async () => {
    const { secrets, loads, keys, connection, queue, inbox } = await fixture();
    const receiver = createReceiver({ keys, inbox });
    const body = (tenant: string) => `{"type":"invoice.paid","for":"${tenant}"}`;
    const deliver = async (tenant: string, signedFor: string, id: string) => {
      const signed = await signWebhook({ secret: secrets[signedFor]!, body: body(tenant), id });
      return receiver.accept({ headers: { ...signed.headers, 'content-type': 'application/json' }, body: body(tenant), params: { tenant } });
    };
    const refusal = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: unknown) => (isWebhookError(error) ? { code: error.code, status: error.status } : { thrown: String(error) }),
      );

    // The other tenant's secret: 401, nothing enqueued.
    expect(await refusal(deliver('acme', 'globex', 'msg_cross'))).toEqual({ code: 'SIGNATURE_MISMATCH', status: 401 });
    expect(await refusal(deliver('globex', 'acme', 'msg_cross'))).toEqual({ code: 'SIGNATURE_MISMATCH', status: 401 });
    // An unknown tenant: 404 before any key is tried.
    expect(await refusal(deliver('initech', 'acme', 'msg_unknown'))).toEqual({ code: 'UNKNOWN_TENANT', status: 404 });
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 0 });

    // One webhook-id from both tenants, each with its own secret: two jobs.
    const acme = await deliver('acme', 'acme', 'msg_same');
    const globex = await deliver('globex', 'globex', 'msg_same');
    expect([acme.outcome, acme.webhook.tenant]).toEqual(['enqueued', 'acme']);
    expect([globex.outcome, globex.webhook.tenant]).toEqual(['enqueued', 'globex']);
    // Each tenant's retry is its own duplicate.
    expect((await deliver('acme', 'acme', 'msg_same')).outcome).toBe('duplicate');
    expect((await deliver('globex', 'globex', 'msg_same')).outcome).toBe('duplicate');
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 2 });
    expect([...new Set(loads)].sort()).toEqual(['acme', 'globex', 'initech']);

    for (const tenant of ['acme', 'globex']) {
      const job = await queue.getJob(await hexJobId(`t.${tenant}:s:msg_same`));
      expect(job?.data).toMatchObject<Partial<InboxJob>>({ id: 'msg_same', namespace: `t.${tenant}`, tenant, signed: true, keyIndex: 0 });
    }
    const raw = await rawQueueText(connection, queue);
    // The scan reads the jobs' stored data (JSON inside the job hash, escaped once more here).
    expect(raw).toContain('\\"tenant\\":\\"acme\\"');
    expect(raw).toContain('\\"tenant\\":\\"globex\\"');
    expectNoSecret(raw, Object.values(secrets));

    const outcomes = new Outcomes();
    const runs: { tenant: string | undefined; id: string; body: string }[] = [];
    const worker: InboxWorker = await inbox.work(
      async (webhook) => {
        runs.push({ tenant: webhook.tenant, id: webhook.id, body: webhook.text() });
      },
      { concurrency: 2, onOutcome: outcomes.record },
    );
    let closed = false;
    closers.push(() => (closed ? undefined : worker.close()));
    await outcomes.until(() => outcomes.of('msg_same').filter((outcome) => outcome === 'processed').length === 2);
    expect(outcomes.events.map((event) => [event.outcome, event.namespace]).sort()).toEqual([
      ['processed', 't.acme'],
      ['processed', 't.globex'],
    ]);
    expect(runs.map(({ tenant, id, body: text }) => ({ tenant, id, text })).sort((a, b) => String(a.tenant).localeCompare(String(b.tenant)))).toEqual([
      { tenant: 'acme', id: 'msg_same', text: body('acme') },
      { tenant: 'globex', id: 'msg_same', text: body('globex') },
    ]);
    // Closing waits for BullMQ to settle both jobs: done (removed on completion), none failed or left.
    await worker.close();
    closed = true;
    expect(await queue.getJobCounts('active', 'failed', 'wait', 'delayed')).toEqual({ active: 0, failed: 0, wait: 0, delayed: 0 });
    expect(runs).toHaveLength(2);
    expectNoSecret(await rawQueueText(connection, queue), Object.values(secrets));
  });

  it('with idempotency off, one id from both tenants is still two jobs, each in its tenant namespace', async () => {
    const { secrets, keys, queue, inbox } = await fixture();
    const receiver = createReceiver({ keys, inbox, idempotency: false });
    for (const tenant of ['acme', 'globex']) {
      const body = `{"for":"${tenant}"}`;
      const signed = await signWebhook({ secret: secrets[tenant]!, body, id: 'msg_no_store' });
      expect((await receiver.accept({ headers: signed.headers, body, params: { tenant } })).outcome).toBe('enqueued');
    }
    const jobs = await queue.getJobs(['wait']);
    expect(jobs.map((job) => [(job.data as InboxJob).namespace, job.id]).sort()).toEqual([
      ['t.acme', await hexJobId('t.acme:s:msg_no_store')],
      ['t.globex', await hexJobId('t.globex:s:msg_no_store')],
    ]);
  });

  it('Express on /webhooks/:tenant with webhooks({ keys, inbox }): 202 {"enqueued":true} per tenant over real HTTP, 401 and 404 otherwise', async () => {
    const { secrets, keys, queue, inbox } = await fixture();
    const app = express();
    let ran = 0;
    app.post('/webhooks/:tenant', expressWebhooks({ keys, inbox, onRejected: () => {} }), (_req, res) => {
      ran++;
      res.sendStatus(204);
    });
    const served = await listen(createServer(app));
    closers.push(() => served.close());
    const post = async (tenant: string, signedFor: string, id: string) => {
      const body = '{"type":"ping"}';
      const signed = await signWebhook({ secret: secrets[signedFor]!, body, id });
      const response = await fetch(`http://127.0.0.1:${served.port}/webhooks/${tenant}`, {
        method: 'POST',
        headers: { ...signed.headers, 'content-type': 'application/json' },
        body,
      });
      return { status: response.status, body: await response.text() };
    };

    expect(await post('acme', 'acme', 'msg_http')).toEqual({ status: 202, body: '{"enqueued":true}' });
    expect(await post('globex', 'globex', 'msg_http')).toEqual({ status: 202, body: '{"enqueued":true}' });
    expect(await post('acme', 'acme', 'msg_http')).toEqual({ status: 200, body: '{"duplicate":true}' });
    expect((await post('acme', 'globex', 'msg_http_cross')).status).toBe(401);
    const unknown = await post('initech', 'acme', 'msg_http_unknown');
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toMatchObject({ error: 'UNKNOWN_TENANT' });
    expect(ran).toBe(0);

    const jobs = await queue.getJobs(['wait']);
    expect(jobs.map((job) => [(job.data as InboxJob).tenant, (job.data as InboxJob).namespace]).sort()).toEqual([
      ['acme', 't.acme'],
      ['globex', 't.globex'],
    ]);
  });
});

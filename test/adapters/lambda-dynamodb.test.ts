/**
 * The Lambda adapter with the DynamoDB store, on dynalite: two handler instances on one
 * table stand for two Lambda containers. A delivery runs once across them, a crashed invocation's
 * delivery runs again once its lock has passed, and a table that cannot be reached is 503 with
 * `Retry-After`, in bounded time.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookHandler, type LambdaHandler, type LambdaHttpEvent } from '../../adapters/lambda.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { dynamoStore, type DynamoClientLike, type DynamoStore } from '../../src/stores/dynamodb.ts';
import { localConfig, startDynalite, type Dynalite } from '../support/dynamodb.ts';
import { freePort } from '../support/redis-server.ts';

const secret = generateSecret();
const BODY = JSON.stringify({ type: 'invoice.paid', data: { id: 'in_1' } });
const context = { getRemainingTimeInMillis: () => 10_000, awsRequestId: 'req-1' };

let dynalite: Dynalite;
let table: string;

beforeAll(async () => {
  dynalite = await startDynalite();
  ({ table } = await dynalite.table());
});
afterAll(async () => {
  await dynalite?.close();
});

function event(headers: Record<string, string>, body: string): LambdaHttpEvent {
  const fixture = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/lambda/http-api.json'), 'utf8')) as LambdaHttpEvent;
  return { ...fixture, headers: { ...fixture.headers, ...headers }, body, isBase64Encoded: false };
}

/** One "container": its own client, store and handler, as a cold start builds them. */
function container(runs: string[], options: { now?: () => number; client?: DynamoClientLike; work?: () => Promise<void> } = {}): { handler: LambdaHandler; store: DynamoStore } {
  const store = dynamoStore({ client: options.client ?? dynalite.client(), table, ...(options.now ? { now: options.now } : {}) });
  const handler = webhookHandler({ secrets: secret, idempotency: { store } }, async (webhook) => {
    runs.push(webhook.id);
    await options.work?.();
    return { statusCode: 200, body: JSON.stringify({ received: webhook.id }) };
  });
  return { handler, store };
}

describe('webhookHandler with dynamoStore', () => {
  it('runs a delivery once across two containers, sequential and concurrent', async () => {
    const runs: string[] = [];
    const a = container(runs);
    const b = container(runs);
    const first = await signWebhook({ secret, body: BODY, id: 'msg_dyn_seq' });
    expect(await a.handler(event(first.headers, BODY), context)).toMatchObject({ statusCode: 200, body: '{"received":"msg_dyn_seq"}' });
    // The retry reaches the other container, with a new timestamp and signature.
    const retry = await signWebhook({ secret, body: BODY, id: 'msg_dyn_seq' });
    expect(await b.handler(event(retry.headers, BODY), context)).toMatchObject({ statusCode: 200, body: '{"duplicate":true}' });

    const together = await signWebhook({ secret, body: BODY, id: 'msg_dyn_both' });
    const answers = await Promise.all([a, b, a, b].map(({ handler }) => handler(event(together.headers, BODY), context)));
    const statuses = answers.map((answer) => answer.statusCode).sort();
    // One ran; the others found it processing (409) or, once it finished, completed (200 duplicate).
    expect(runs).toEqual(['msg_dyn_seq', 'msg_dyn_both']);
    expect(answers.filter((answer) => answer.body === '{"received":"msg_dyn_both"}')).toHaveLength(1);
    expect(statuses.every((status) => status === 200 || status === 409)).toBe(true);
  });

  it('runs a crashed invocation’s delivery again in another container once its lock has passed, and not before', async () => {
    const runs: string[] = [];
    // Both containers' clocks, moved by the test instead of waiting out the lock.
    let time = Date.now();
    const now = () => time;
    // Container A crashes mid-handler: its handler never returns, and from then on nothing it
    // sends reaches DynamoDB (no renewal, no release).
    let crashed = false;
    const shared = dynalite.client();
    const dying: DynamoClientLike = {
      send: (command, options) => (crashed ? Promise.reject(new Error('container gone')) : shared.send(command as never, options)),
    };
    let entered!: () => void;
    const running = new Promise<void>((resolve) => (entered = resolve));
    const a = container(runs, { now, client: dying, work: () => (entered(), (crashed = true), new Promise<void>(() => {})) });
    const b = container(runs, { now });
    const signed = await signWebhook({ secret, body: BODY, id: 'msg_dyn_crash' });
    void a.handler(event(signed.headers, BODY), context);
    await running;

    // While A's lock holds, the sender's retry is refused as in progress, with Retry-After.
    const early = await b.handler(event(signed.headers, BODY), context);
    expect(early.statusCode).toBe(409);
    expect(JSON.parse(early.body)).toMatchObject({ error: 'IN_PROGRESS' });
    expect(Number(early.headers?.['retry-after'] ?? early.headers?.['Retry-After'])).toBeGreaterThan(0);

    // Past the lock (bounded by the invocation's 10 s) and the clock margin: B runs it.
    time += 10_000 + 1000 + 1;
    const later = await b.handler(event(signed.headers, BODY), context);
    expect(later).toMatchObject({ statusCode: 200, body: '{"received":"msg_dyn_crash"}' });
    expect(runs).toEqual(['msg_dyn_crash', 'msg_dyn_crash']);
    const again = await b.handler(event(signed.headers, BODY), context);
    expect(again).toMatchObject({ statusCode: 200, body: '{"duplicate":true}' });
  });

  it('answers 503 STORE_UNAVAILABLE with Retry-After, in bounded time, when the table cannot be reached', async () => {
    const client = new DynamoDBClient({ ...localConfig(`http://127.0.0.1:${await freePort()}`), maxAttempts: 2 });
    const runs: string[] = [];
    const { handler } = container(runs, { client });
    const signed = await signWebhook({ secret, body: BODY, id: 'msg_dyn_down' });
    // Bounded by the client's two attempts against a closed port (refused at once), not by a clock:
    // a hang fails at the test's timeout.
    const answer = await handler(event(signed.headers, BODY), context);
    expect(answer.statusCode).toBe(503);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'STORE_UNAVAILABLE' });
    expect(Number(answer.headers?.['retry-after'] ?? answer.headers?.['Retry-After'])).toBeGreaterThan(0);
    expect(runs).toEqual([]);
    client.destroy();
  });
});

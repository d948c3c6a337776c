/**
 * examples/aws-sqs/ end to end, as AWS would run its two functions, with no AWS: the accepting
 * function invoked with a function URL event (test/fixtures/lambda/, payload format 2.0) against
 * fauxqs and dynalite; Lambda's SQS trigger played by receiving from the queue, invoking the
 * worker function with the records Lambda passes, and deleting the records it did not report as
 * failed, as the event source mapping does with ReportBatchItemFailures on.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeleteMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { generateSecret, signWebhook } from 'webhook-receiver';
import type { LambdaHttpEvent } from 'webhook-receiver/lambda';
import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';
import { acceptHandler, awsParts } from '../../examples/aws-sqs/accept.ts';
import { workerHandler } from '../../examples/aws-sqs/worker.ts';
import { startDynalite, type Dynalite } from '../support/dynamodb.ts';
import { countIn, freshQueues, lambdaRecord, receiveAsLambda, sqsClient, startSqs, type FauxqsServer } from '../support/sqs.ts';
import { fauxqsRuns } from '../support/node-version.ts';

const available = fauxqsRuns();

const secret = generateSecret();
let server: FauxqsServer;
let sqs: SQSClient;
let dynalite: Dynalite;
let log: MockInstance<typeof console.log>;

beforeAll(async () => {
  if (!available) return;
  server = await startSqs();
  sqs = sqsClient(server);
  dynalite = await startDynalite();
  log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
});
afterAll(async () => {
  if (!available) return;
  vi.restoreAllMocks();
  sqs.destroy();
  await server.stop();
  await dynalite.close();
});

function functionUrlEvent(headers: Record<string, string>, body: string): LambdaHttpEvent {
  const fixture = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/lambda/http-api.json'), 'utf8')) as LambdaHttpEvent;
  return { ...fixture, headers: { ...fixture.headers, ...headers }, body, isBase64Encoded: false };
}

const context = { getRemainingTimeInMillis: () => 30_000, awsRequestId: 'req-1', functionName: 'webhooks' };

describe.skipIf(!available)('examples/aws-sqs', () => {
  it('function URL -> accepting Lambda -> SQS -> worker Lambda, claims in DynamoDB: each event once, a poison one to the dead-letter queue', { timeout: 60_000 }, async () => {
    const { queueUrl, name, deadName } = freshQueues(server, { maxReceiveCount: 14 });
    const { table } = await dynalite.table();
    const env = { WEBHOOK_SECRET: secret, QUEUE_URL: queueUrl, CLAIMS_TABLE: table };
    const clients = { sqs, dynamodb: dynalite.client() };
    const accept = acceptHandler(env, clients);
    const work = workerHandler(env, clients);

    const paidBody = JSON.stringify({ type: 'invoice.paid', data: { id: 'in_1' } });
    const poisonBody = JSON.stringify({ data: {} });
    const paid = { headers: (await signWebhook({ secret, body: paidBody, id: 'msg_aws_1' })).headers, body: paidBody };
    const poison = { headers: (await signWebhook({ secret, body: poisonBody, id: 'msg_aws_2' })).headers, body: poisonBody };
    const accepted = await accept(functionUrlEvent(paid.headers, paid.body), context);
    expect(accepted).toMatchObject({ statusCode: 202 });
    expect(JSON.parse(accepted.body!)).toEqual({ enqueued: true });
    // The sender's retry of a delivery already accepted: a duplicate, not a second job.
    const again = await accept(functionUrlEvent(paid.headers, paid.body), context);
    expect(again.statusCode).toBe(200);
    expect(JSON.parse(again.body!)).toMatchObject({ duplicate: true });
    expect((await accept(functionUrlEvent(poison.headers, poison.body), context)).statusCode).toBe(202);
    // A forged delivery never reaches the queue.
    const forged = await accept(functionUrlEvent({ ...paid.headers, 'webhook-id': 'msg_aws_forged' }, paid.body), context);
    expect(forged.statusCode).toBe(401);
    expect(countIn(server, name).ready).toBe(2);

    const records = (await receiveAsLambda(sqs, queueUrl)).map((message) => lambdaRecord(message));
    const response = await work({ Records: records }, context);
    expect(response).toEqual({ batchItemFailures: [] });
    for (const record of records) await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: record.receiptHandle }));
    expect(log.mock.calls.map(([line]) => String(line))).toEqual(['webhook msg_aws_1: invoice.paid']);
    expect(countIn(server, name)).toEqual({ ready: 0, delayed: 0, inflight: 0 });
    expect(countIn(server, deadName).ready).toBe(1);
    const { inbox } = awsParts(env, clients);
    const letters = await inbox.deadLetters();
    expect(letters.map((letter) => [letter.webhookId, letter.attempts, letter.error])).toEqual([['msg_aws_2', 1, { name: 'PermanentError', message: 'the event has no type' }]]);
  });
});

/**
 * The capacity section's count of DynamoDB write units (bench/aws-usage.ts), checked against
 * dynalite's own `ConsumedCapacity`, which it returns when a request asks for it: the store's
 * writes as the receiver and the worker send them, and writes of items past 1 KB, where the
 * rules (the larger of the item before and after, rounded up per KB) decide the count.
 */

import { PutItemCommand, UpdateItemCommand, DeleteItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { itemBytes, meteredDynamo, meteredSqs } from '../../bench/aws-usage.ts';
import type { AwsClient } from '../../src/lib/aws.ts';
import { startDynalite, type Dynalite } from '../support/dynamodb.ts';

/**
 * A client that asks dynalite for the capacity each write consumed (`ReturnConsumedCapacity`),
 * which the store itself never asks for, and adds it up: the figure the meter is checked against.
 */
function asking(client: AwsClient): { client: AwsClient; consumed(): number } {
  let consumed = 0;
  return {
    client: {
      async send(command, options) {
        const input = (command as { input: Record<string, unknown> }).input;
        if (/^(Put|Update|Delete)Item/.test(command.constructor.name)) input.ReturnConsumedCapacity = 'TOTAL';
        const reply = (await client.send(command, options)) as { ConsumedCapacity?: { CapacityUnits?: number } } | undefined;
        consumed += reply?.ConsumedCapacity?.CapacityUnits ?? 0;
        return reply;
      },
    },
    consumed: () => consumed,
  };
}

describe('the write units the capacity section counts', () => {
  let dynalite: Dynalite;
  beforeAll(async () => {
    dynalite = await startDynalite();
  });
  afterAll(async () => {
    await dynalite.close();
  });

  it('sizes items by the attribute names and values, numbers by their significant digits', () => {
    // 'pk' 2 + 'abc' 3; 'n' 1 + 1700000000000 (2 significant digits: 1 byte, plus 1); 'x' 1 + 1.
    expect(itemBytes({ pk: { S: 'abc' } })).toBe(5);
    expect(itemBytes({ n: { N: '1700000000000' } })).toBe(3);
    expect(itemBytes({ n: { N: '-0.0012345' } })).toBe(1 + 3 + 1);
    expect(itemBytes({ x: { BOOL: true } })).toBe(2);
    expect(itemBytes({ ü: { S: 'é' } })).toBe(4);
    expect(() => itemBytes({ l: { L: [] } as never })).toThrow(/no size rule/);
  });

  it("counts the store's claims and completions as dynalite does, and a failed claim as 1 WCU", async () => {
    const { open } = await dynalite.table();
    const checked = asking(dynalite.client({ maxAttempts: 1 }));
    const meter = meteredDynamo(checked.client);
    const store = open({}, meter.client);
    for (let i = 0; i < 5; i++) {
      const claim = await store.claim(`default:s:msg_${i}`, 60_000);
      if (claim.status !== 'acquired') throw new Error('a fresh id was not acquired');
      await store.complete(`default:s:msg_${i}`, claim.token, 60_000);
    }
    const held = await store.claim('default:s:held', 60_000);
    if (held.status !== 'acquired') throw new Error('a fresh id was not acquired');
    await store.extend(`default:s:held`, held.token, 60_000);
    await store.release(`default:s:held`, held.token);
    const usage = meter.usage();
    expect(usage.requests).toEqual({ PutItem: 6, UpdateItem: 6, DeleteItem: 1 });
    expect(usage.writeUnits).toBe(13);
    expect(usage.writeUnits).toBe(checked.consumed());
    expect(usage.largestItemBytes).toBeLessThan(1024);

    // A duplicate: the claim's write fails its condition, billed all the same (dynalite returns
    // no capacity with the failure, so this one is checked against the rule alone), and the
    // store reads the item (a consistent read: 1 RCU), as it does where the failure carries none.
    expect((await store.claim('default:s:msg_0', 60_000)).status).toBe('completed');
    const after = meter.usage();
    expect(after.conditionFailed).toBe(1);
    expect(after.writeUnits).toBe(14);
    expect(after.requests.GetItem).toBe(1);
    expect(after.readUnits).toBe(1);
  });

  it('charges items past 1 KB by the larger of before and after, as dynalite does', async () => {
    const { table } = await dynalite.table();
    const checked = asking(dynalite.client({ maxAttempts: 1 }));
    const meter = meteredDynamo(checked.client);
    const send = (command: object) => meter.client.send(command);
    const key = { pk: { S: 'big' } };
    // 2.5 KB, then 0.5 KB over it (the larger: 3 WCU), then 3.5 KB (4), then deleted (4).
    await send(new PutItemCommand({ TableName: table, Item: { ...key, body: { S: 'x'.repeat(2500) } } }));
    await send(new PutItemCommand({ TableName: table, Item: { ...key, body: { S: 'x'.repeat(500) } } }));
    await send(new UpdateItemCommand({ TableName: table, Key: key, UpdateExpression: 'SET #b = :b, #n = :n', ExpressionAttributeNames: { '#b': 'body', '#n': 'n' }, ExpressionAttributeValues: { ':b': { S: 'y'.repeat(3500) }, ':n': { N: '12' } } }));
    await send(new DeleteItemCommand({ TableName: table, Key: key }));
    expect(meter.usage().writeUnits).toBe(3 + 3 + 4 + 4);
    expect(meter.usage().writeUnits).toBe(checked.consumed());
  });

  it('counts SQS requests by action, and the largest message body', async () => {
    const sent: string[] = [];
    const meter = meteredSqs({
      async send(command) {
        sent.push(command.constructor.name);
        return {};
      },
    });
    class SendMessageCommand {
      constructor(readonly input: { MessageBody: string }) {}
    }
    class DeleteMessageCommand {
      readonly input = {};
    }
    await meter.client.send(new SendMessageCommand({ MessageBody: 'é'.repeat(10) }));
    await meter.client.send(new SendMessageCommand({ MessageBody: 'x' }));
    await meter.client.send(new DeleteMessageCommand());
    expect(meter.usage()).toEqual({ requests: { SendMessage: 2, DeleteMessage: 1 }, largestBodyBytes: 20 });
    expect(sent).toEqual(['SendMessageCommand', 'SendMessageCommand', 'DeleteMessageCommand']);
  });
});

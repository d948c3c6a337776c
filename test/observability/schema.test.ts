/**
 * Standard Schema validation and the typed router, with real zod and valibot, through the
 * receiver and the adapters.
 */

import Fastify from 'fastify';
import { Hono } from 'hono';
import * as v from 'valibot';
import { z } from 'zod';
import express from 'express';
import { describe, expect, expectTypeOf, it, vi } from 'vitest';
import { webhookOf as expressWebhookOf, webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhooks as fastifyWebhooks, webhookOf } from '../../adapters/fastify.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { webhooks as honoWebhooks } from '../../adapters/hono.ts';
import { createReceiver } from '../../src/receiver.ts';
import { createRouter, type WebhookEvent } from '../../src/router.ts';
import type { OutcomeEvent } from '../../src/telemetry.ts';
import { payloadErrorOf, type PayloadIssues, type StandardSchemaV1 } from '../../src/schema.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { createVerifier } from '../../src/verify.ts';

const SECRET = generateSecret();
const quiet = { onRejected: () => {} };

async function input(id: string, body: string) {
  const signed = await signWebhook({ secret: SECRET, body, id });
  return { headers: signed.headers, body };
}
async function fetchRequest(id: string, body: string): Promise<Request> {
  const { headers } = await input(id, body);
  return new Request('http://127.0.0.1/hooks', { method: 'POST', headers, body });
}

const libraries = [
  ['zod', z.object({ invoiceId: z.string(), amount: z.number() })],
  ['valibot', v.object({ invoiceId: v.string(), amount: v.number() })],
] as const;

describe.each(libraries)('webhook.json(schema) with %s', (_name, schema) => {
  it('returns the typed value', async () => {
    const receiver = createReceiver({ secrets: SECRET });
    const result = await receiver.handle(await input('msg_s1', '{"invoiceId":"in_1","amount":5}'), (webhook) => {
      const value = webhook.json(schema);
      expectTypeOf(value).toEqualTypeOf<{ invoiceId: string; amount: number }>();
      return value;
    });
    expect(result).toMatchObject({ outcome: 'processed', value: { invoiceId: 'in_1', amount: 5 } });
  });

  it('throws INVALID_PAYLOAD listing where, never the values, and releases the claim', async () => {
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store: memoryStore() } });
    const body = '{"invoiceId":"SECRET-VALUE-9","amount":"SECRET-AMOUNT-7"}';
    const error = await receiver.handle(await input('msg_s2', body), (webhook) => webhook.json(schema)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_PAYLOAD', status: 400 });
    const message = (error as Error).message;
    expect(message).toContain('amount');
    expect(message).not.toContain('SECRET-AMOUNT-7');
    expect(message).not.toContain('SECRET-VALUE-9');
    expect((error as { cause: PayloadIssues }).cause.issues.length).toBeGreaterThan(0);
    // Released: the retry runs the handler again.
    const retry = await receiver.handle(await input('msg_s2', '{"invoiceId":"in_2","amount":1}'), (webhook) => webhook.json(schema).amount);
    expect(retry).toMatchObject({ outcome: 'processed', value: 1 });
  });

  it('a body that is not JSON is INVALID_PAYLOAD, without quoting it', async () => {
    const receiver = createReceiver({ secrets: SECRET });
    const error = await receiver.handle(await input('msg_s3', 'SECRET-TEXT not json'), (webhook) => webhook.json(schema)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_PAYLOAD' });
    expect((error as Error).message).not.toContain('SECRET-TEXT');
  });
});

describe('asynchronous schemas', () => {
  const slow = z.object({ id: z.string() }).refine(async (value) => value.id.startsWith('in_'));
  const slowValibot = v.pipeAsync(v.object({ id: v.string() }), v.checkAsync(async (value) => value.id.startsWith('in_')));

  it('json(schema) refuses them with a TypeError that points to parse', async () => {
    const receiver = createReceiver({ secrets: SECRET });
    await expect(receiver.handle(await input('msg_a1', '{"id":"in_1"}'), (webhook) => webhook.json(slow))).rejects.toThrow(
      expect.objectContaining({ name: 'TypeError', message: expect.stringContaining('await webhook.parse(schema)') }),
    );
  });

  it('parse(schema) takes both kinds', async () => {
    const receiver = createReceiver({ secrets: SECRET });
    const ok = await receiver.handle(await input('msg_a2', '{"id":"in_1"}'), async (webhook) => [await webhook.parse(slow), await webhook.parse(slowValibot), await webhook.parse(z.object({ id: z.string() }))]);
    expect(ok).toMatchObject({ outcome: 'processed', value: [{ id: 'in_1' }, { id: 'in_1' }, { id: 'in_1' }] });
    await expect(receiver.handle(await input('msg_a3', '{"id":"x"}'), (webhook) => webhook.parse(slowValibot))).rejects.toMatchObject({ code: 'INVALID_PAYLOAD' });
  });

  it('anything that is not a Standard Schema is a TypeError', async () => {
    const receiver = createReceiver({ secrets: SECRET });
    await expect(receiver.handle(await input('msg_a4', '{}'), (webhook) => webhook.json({} as never))).rejects.toThrow(TypeError);
  });
});

describe('the typed router', () => {
  const event = (type: string, data: unknown) => JSON.stringify({ type, timestamp: '2026-01-01T00:00:00Z', data });

  it('routes by type with typed, validated data (zod and valibot), and acknowledges unhandled types', async () => {
    const seen: string[] = [];
    const router = createRouter()
      .on('invoice.paid', z.object({ invoiceId: z.string() }), (paid) => {
        expectTypeOf(paid).toEqualTypeOf<WebhookEvent<'invoice.paid', { invoiceId: string }>>();
        seen.push(`paid ${paid.data.invoiceId}`);
      })
      .on('invoice.voided', v.object({ reason: v.string() }), (voided) => {
        expectTypeOf(voided.data.reason).toEqualTypeOf<string>();
        seen.push(`voided ${voided.data.reason}`);
      });
    const handler = webhookHandler({ secrets: SECRET, ...quiet }, async (webhook, _request, context) => {
      await router.handle(webhook, context);
    });
    expect((await handler(await fetchRequest('msg_r1', event('invoice.paid', { invoiceId: 'in_1' })))).status).toBe(204);
    expect((await handler(await fetchRequest('msg_r2', event('invoice.voided', { reason: 'dup' })))).status).toBe(204);
    expect((await handler(await fetchRequest('msg_r3', event('customer.created', { id: 1 })))).status).toBe(204);
    const bad = await handler(await fetchRequest('msg_r4', event('invoice.paid', { invoiceId: 7 })));
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: 'INVALID_PAYLOAD', message: expect.stringContaining('invoiceId') });
    const notAnEvent = await handler(await fetchRequest('msg_r5', '{"hello":1}'));
    expect(notAnEvent.status).toBe(400);
    expect(seen).toEqual(['paid in_1', 'voided dup']);
  });

  it("unhandled: 'retry' fails the delivery (500, claim released); a function sees the event", async () => {
    const retrying = createRouter({ unhandled: 'retry' });
    const receiver = createReceiver({ secrets: SECRET });
    await expect(receiver.handle(await input('msg_r6', event('x.y', {})), (webhook) => retrying.handle(webhook))).rejects.toThrow(/no handler .* 'x\.y'/);
    const ignored: string[] = [];
    const custom = createRouter({ unhandled: (e) => void ignored.push(e.type) });
    const result = await receiver.handle(await input('msg_r7', event('x.z', {})), (webhook) => custom.handle(webhook));
    expect(result).toMatchObject({ outcome: 'processed', value: { handled: false, type: 'x.z' } });
    expect(ignored).toEqual(['x.z']);
  });

  it('refuses bad registrations at once', () => {
    const router = createRouter().on('a', z.string(), () => {});
    expect(() => router.on('a', z.string(), () => {})).toThrow(TypeError);
    expect(() => router.on('', z.string(), () => {})).toThrow(TypeError);
    expect(() => router.on('b', {} as never, () => {})).toThrow(TypeError);
    expect(() => createRouter({ unhandled: 'ignore' as never })).toThrow(TypeError);
  });
});

describe('adapters answer INVALID_PAYLOAD with 400 after releasing', () => {
  const schema = z.object({ amount: z.number() });

  it('Hono: the envelope, and the retry runs again', async () => {
    let runs = 0;
    const app = new Hono();
    app.post('/hooks', honoWebhooks({ secrets: SECRET, ...quiet }), (c) => {
      runs++;
      c.get('webhook').json(schema);
      return c.body(null, 204);
    });
    for (let attempt = 0; attempt < 2; attempt++) {
      const response = await app.request(await fetchRequest('msg_h1', '{"amount":"1"}'));
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: 'INVALID_PAYLOAD' });
    }
    expect(runs).toBe(2);
  });

  it('Fastify: the envelope, and the retry runs again', async () => {
    let runs = 0;
    const app = Fastify();
    await app.register(async (scope) => {
      await scope.register(fastifyWebhooks, { secrets: SECRET, ...quiet });
      scope.post('/hooks', async (request, reply) => {
        runs++;
        webhookOf(request).json(schema);
        return reply.code(204).send();
      });
    });
    for (let attempt = 0; attempt < 2; attempt++) {
      const { headers, body } = await input('msg_f1', '{"amount":"1"}');
      const response = await app.inject({ method: 'POST', url: '/hooks', headers: { ...headers, 'content-type': 'application/json' }, payload: body });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: 'INVALID_PAYLOAD', message: expect.any(String) });
    }
    expect(runs).toBe(2);
    await app.close();
  });

  it('Express and Fastify: onOutcome counts the refusal as rejected INVALID_PAYLOAD, though only the status reaches the middleware', async () => {
    const outcomes: unknown[][] = [];
    const onOutcome = (event: OutcomeEvent) => outcomes.push([event.outcome, event.status, event.code]);
    const expressApp = express();
    expressApp.post('/hooks', expressWebhooks({ secrets: SECRET, onOutcome, ...quiet }), (req, res, next) => {
      try {
        expressWebhookOf(req).json(schema);
        res.sendStatus(204);
      } catch (error) {
        next(error);
      }
    });
    const { headers, body } = await input('msg_e_outcome', '{"amount":"1"}');
    await new Promise<void>((resolve, reject) => {
      const server = expressApp.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        fetch(`http://127.0.0.1:${port}/hooks`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body })
          .then((res) => expect(res.status).toBe(400))
          .then(() => server.close(() => resolve()), reject);
      });
    });
    const fastifyApp = Fastify();
    await fastifyApp.register(async (scope) => {
      await scope.register(fastifyWebhooks, { secrets: SECRET, onOutcome, ...quiet });
      scope.post('/hooks', async (request, reply) => {
        webhookOf(request).json(schema);
        return reply.code(204).send();
      });
    });
    const second = await input('msg_f_outcome', '{"amount":"1"}');
    const response = await fastifyApp.inject({ method: 'POST', url: '/hooks', headers: { ...second.headers, 'content-type': 'application/json' }, payload: second.body });
    expect(response.statusCode).toBe(400);
    await fastifyApp.close();
    await vi.waitFor(() => expect(outcomes).toHaveLength(2));
    expect(outcomes).toEqual([
      ['rejected', 400, 'INVALID_PAYLOAD'],
      ['rejected', 400, 'INVALID_PAYLOAD'],
    ]);
  });
});

describe('one order of checks for json(schema) and parse(schema)', () => {
  const verifier = createVerifier({ secrets: SECRET });
  const verified = async (id: string, body: string) => verifier.verify(await input(id, body));
  const notASchema = { '~standard': { version: 2, validate: () => ({ value: 1 }) } } as never;
  const schemaMessage = (where: string) =>
    `${where} needs a Standard Schema (zod 3.24+, valibot 1, arktype 2, …): an object with '~standard' version 1 and validate()`;

  it.each([
    ['a body that is not JSON', 'SECRET-TEXT not json'],
    ['a JSON body', '{"id":"in_1"}'],
  ])('a bad schema is a TypeError from both, whatever the body (%s), and is not noted as a payload error', async (_label, body) => {
    const webhook = await verified(`msg_o-${body.length}`, body);
    expect(() => webhook.json(notASchema)).toThrow(new TypeError(schemaMessage('webhook.json(schema)')));
    // A rejection, never a synchronous throw: parse returns a promise.
    const parsed = webhook.parse(notASchema);
    await expect(parsed).rejects.toThrow(new TypeError(schemaMessage('webhook.parse(schema)')));
    expect(payloadErrorOf(webhook)).toBeUndefined();
  });

  it('a good schema with a body that is not JSON is INVALID_PAYLOAD from both, noted for the webhook', async () => {
    const webhook = await verified('msg_o3', 'not json');
    const schema = z.object({ id: z.string() });
    expect(() => webhook.json(schema)).toThrow(expect.objectContaining({ code: 'INVALID_PAYLOAD', message: 'the payload is not valid JSON' }));
    await expect(webhook.parse(schema)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD', message: 'the payload is not valid JSON' });
    expect(payloadErrorOf(webhook)).toMatchObject({ code: 'INVALID_PAYLOAD', message: 'the payload is not valid JSON' });
    expect(payloadErrorOf(webhook)?.cause).toBeInstanceOf(SyntaxError);
    // The router parses the same way.
    const routed = await createRouter().handle(await verified('msg_o3r', 'not json')).catch((error: unknown) => error);
    expect(routed).toMatchObject({ code: 'INVALID_PAYLOAD', status: 400, message: 'the payload is not valid JSON' });
    expect((routed as Error).cause).toBeInstanceOf(SyntaxError);
  });

  it('a schema answering with a thenable that is not a Promise: parse awaits it, json refuses it', async () => {
    const webhook = await verified('msg_o4', '{"id":"in_1"}');
    const thenable = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: (value: unknown) => ({ then: (resolve: (result: unknown) => void) => resolve({ value: { wrapped: value } }) }),
      },
    } as unknown as StandardSchemaV1<unknown, { wrapped: unknown }>;
    await expect(webhook.parse(thenable)).resolves.toEqual({ wrapped: { id: 'in_1' } });
    expect(() => webhook.json(thenable)).toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringContaining('await webhook.parse(schema)') }));
  });
});

describe('the router, per delivery', () => {
  const verifier = createVerifier({ secrets: SECRET });
  const verified = async (id: string, body: string) => verifier.verify(await input(id, body));

  it("hands the handler the schema's output as data, and validates with the schema on() checked", async () => {
    const seen: unknown[] = [];
    let validations = 0;
    const counted: StandardSchemaV1<unknown, number> = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: (value) => {
          validations++;
          return typeof value === 'string' ? { value: value.length } : { issues: [{ message: 'not a string', path: ['n'] }] };
        },
      },
    };
    const router = createRouter().on('t.len', counted, (event) => void seen.push(event));
    const routed = await router.handle(await verified('msg_p1', JSON.stringify({ type: 't.len', timestamp: 'T', data: 'abcd' })));
    expect(routed).toEqual({ handled: true, type: 't.len', value: undefined });
    expect(seen).toEqual([{ type: 't.len', timestamp: 'T', data: 4 }]);
    expect(validations).toBe(1);

    const refused = await verified('msg_p2', JSON.stringify({ type: 't.len', timestamp: 'T', data: 5 }));
    await expect(router.handle(refused)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD', message: 'the payload does not match the expected schema (1 issue, at n)' });
    expect(payloadErrorOf(refused)).toMatchObject({ code: 'INVALID_PAYLOAD' });
    expect(seen).toHaveLength(1);
  });

  it.each([
    ['{"type":"","data":1}', 'type (a non-empty string), timestamp (a string)'],
    ['{"type":"a","timestamp":1}', 'timestamp (a string), data'],
    ['{"timestamp":"T","data":null}', 'type (a non-empty string)'],
    ['{"type":"a","timestamp":"T"}', 'data'],
  ])('names exactly what the envelope %s lacks, and notes it', async (body, missing) => {
    const webhook = await verified(`msg_e-${body.length}`, body);
    const expected = `the payload is not a Standard Webhooks event: ${missing} missing or of the wrong type`;
    await expect(createRouter().handle(webhook)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD', message: expected });
    expect(payloadErrorOf(webhook)).toMatchObject({ message: expected });
  });
});

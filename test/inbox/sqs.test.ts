/**
 * The inbox on SQS against fauxqs (an SQS emulator, in process on a free loopback port): the shared
 * contract (conformance.ts), then what only SQS does: the message limit read from the queue, FIFO
 * group and deduplication ids, the Lambda handler's partial batch responses (Lambda's trigger
 * played by receiving and deleting as Lambda does, with the real record shape), the per-group stop
 * of a FIFO batch (synthetic events: fauxqs returns one message per FIFO group per receive), the
 * worker's heartbeat, the redrive policy's dead letters, listing without consuming, and the queue
 * down (503) and back (fauxqs's dataDir keeps its state across the restart).
 */

import { getEventListeners } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChangeMessageVisibilityCommand, DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { PermanentError, WebhookError } from '../../src/errors.ts';
import { InboxGate } from '../../src/receiver/accept.ts';
import { sqsInbox, type SqsInbox, type SqsInboxOptions } from '../../src/inbox/sqs/index.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { countIn, freshQueues, lambdaRecord, randomSuffix, receiveAsLambda, sqsClient, startSqs, type FauxqsServer } from '../support/sqs.ts';
import { acceptedJob, describeInbox, Outcomes } from './conformance.ts';
import { describeOrderedInbox } from './ordering.ts';
import { fauxqsRuns } from '../support/node-version.ts';

// fauxqs needs Node 22.5 or later.
const available = fauxqsRuns();
if (!available) console.warn(`NOTICE: fauxqs needs Node 22.5 or later (this is ${process.versions.node}): the SQS inbox tests are SKIPPED`);

let server: FauxqsServer;
let client: SQSClient;
const quiet = { warn: () => {}, error: () => {} };

beforeAll(async () => {
  if (!available) return;
  server = await startSqs();
  client = sqsClient(server);
});

afterAll(async () => {
  if (!available) return;
  client.destroy();
  await server.stop();
});

function inboxOn(options: Partial<SqsInboxOptions> & { queueUrl: string }): SqsInbox {
  return sqsInbox({ client, maxAttempts: 3, backoff: { delayMs: 0 }, waitTimeSeconds: 1, logger: quiet, ...options });
}

describeInbox('sqs', {
  available,
  async make({ maxAttempts }) {
    const { queueUrl } = freshQueues(server, { maxReceiveCount: maxAttempts + 2 });
    const inbox = inboxOn({ queueUrl, maxAttempts });
    return { inbox, cleanup: () => inbox.close() };
  },
});

// The receiver and the workers share one process here: a memory store judges the ordered jobs.
describeOrderedInbox('sqs', {
  available,
  async make({ maxAttempts }) {
    const { queueUrl } = freshQueues(server, { maxReceiveCount: maxAttempts + 2 });
    const inbox = inboxOn({ queueUrl, maxAttempts });
    return { inbox, cleanup: () => inbox.close() };
  },
  store: async () => memoryStore(),
});

const idOf = (label: string) => `msg_sqs_${label}_${randomSuffix()}`;

describe.skipIf(!available)('sqsInbox', () => {
  it('refuses bad options at once, with a typed error that names the option', () => {
    const queueUrl = 'http://127.0.0.1/000000000000/options';
    expect(() => sqsInbox(undefined as never)).toThrow(new TypeError('sqsInbox needs an options object: sqsInbox({ client, queueUrl })'));
    expect(() => sqsInbox({ client: {} as never, queueUrl })).toThrow(new TypeError('sqsInbox client must be an SQSClient from @aws-sdk/client-sqs (v3): it has no send()'));
    expect(() => sqsInbox({ client, queueUrl: 'my-queue' })).toThrow(new TypeError('sqsInbox queueUrl must be a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)'));
    expect(() => sqsInbox({ client, queueUrl, deadLetterQueueUrl: queueUrl })).toThrow(new TypeError('sqsInbox deadLetterQueueUrl must be another queue than queueUrl'));
    expect(() => sqsInbox({ client, queueUrl, maxMessageBytes: 1023 })).toThrow(new RangeError("sqsInbox maxMessageBytes must be a whole number from 1024 to 1048576 (default: the queue's MaximumMessageSize)"));
    expect(() => sqsInbox({ client, queueUrl, visibilityTimeoutSeconds: 0.5 })).toThrow(new RangeError('sqsInbox visibilityTimeoutSeconds must be a whole number from 1 to 43200 (default 30)'));
    expect(() => sqsInbox({ client, queueUrl, waitTimeSeconds: 21 })).toThrow(new RangeError('sqsInbox waitTimeSeconds must be a whole number from 1 to 20 (default 20)'));
    expect(() => sqsInbox({ client, queueUrl, maxAttempts: 0 })).toThrow(new RangeError('sqsInbox maxAttempts must be a whole number from 1 to 1000 (default 12)'));
    expect(() => sqsInbox({ client, queueUrl }).lambda(() => {}, { reserveMs: -1 })).toThrow(new RangeError('sqsInbox lambda reserveMs must be a non-negative number of milliseconds (default 2 000)'));
  });

  it('refuses at accept, with 413 naming the limit read from the queue, a job whose message would pass MaximumMessageSize', async () => {
    const { queueUrl, name } = freshQueues(server, { attributes: { MaximumMessageSize: '1024' } });
    const inbox = inboxOn({ queueUrl });
    const small = await acceptedJob('{"a":1}', { id: idOf('small') });
    expect(await inbox.enqueue(small)).toBe('enqueued');
    const large = await acceptedJob(JSON.stringify({ pad: 'x'.repeat(600) }), { id: idOf('large') });
    const refusal = await inbox.enqueue(large).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(WebhookError);
    expect(refusal).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', status: 413 });
    expect((refusal as Error).message).toMatch(/past the queue's limit of 1024$/);
    expect(countIn(server, name).ready).toBe(1);
    // Given, the limit is not read from the queue (this one takes 1 MiB).
    const other = freshQueues(server);
    const given = inboxOn({ queueUrl: other.queueUrl, maxMessageBytes: 1024 });
    await expect(given.enqueue(large)).rejects.toThrow(/past the queue's limit of 1024$/);
    expect(await given.enqueue(small)).toBe('enqueued');
  });

  it('on a FIFO queue: groups by entity (or spreads by job), deduplicates a second send of one generation, not a re-send of the next', async () => {
    const { queueUrl, name } = freshQueues(server, { fifo: true });
    const inbox = inboxOn({ queueUrl });
    const job = await acceptedJob('{"a":1}', { id: idOf('fifo') });
    expect(await inbox.enqueue(job)).toBe('enqueued');
    expect(await inbox.enqueue(job)).toBe('enqueued');
    expect(countIn(server, name).ready).toBe(1);
    const other = await acceptedJob('{"b":2}', { id: idOf('fifo-other') });
    await inbox.enqueue(other);
    const ordered = { ...(await acceptedJob('{"c":3}', { id: idOf('fifo-ordered') })), entity: 'order-7', version: `i${'0'.repeat(39)}1`, exclusive: false };
    await inbox.enqueue(ordered);
    const queue = server.inspectQueue(name)!;
    const groups = queue.messages.ready.map((message) => message.messageGroupId);
    expect(groups).toHaveLength(3);
    expect(new Set(groups).size).toBe(3);
    for (const group of groups) expect(group).toMatch(/^[0-9a-f]{64}$/);
    // A job of the same entity shares its group.
    const sibling = { ...ordered, id: idOf('fifo-sibling') };
    await inbox.enqueue(sibling);
    const after = server.inspectQueue(name)!.messages.ready.map((message) => message.messageGroupId);
    expect(after.filter((group) => group === after[2])).toHaveLength(2);
  });

  it('Lambda: answers the failed records as batchItemFailures; a retried one comes back after its backoff with attempt 2; a PermanentError goes to the dead-letter queue', async () => {
    const { queueUrl, name, deadName } = freshQueues(server);
    const inbox = inboxOn({ queueUrl, idempotency: { store: memoryStore() } });
    const ok = await acceptedJob('{"ok":1}', { id: idOf('ok') });
    const flaky = await acceptedJob('{"flaky":1}', { id: idOf('flaky') });
    const poison = await acceptedJob('{"poison":1}', { id: idOf('poison') });
    for (const job of [ok, flaky, poison]) await inbox.enqueue(job);
    const seen: [string, number][] = [];
    const outcomes = new Outcomes();
    const handler = inbox.lambda(
      (webhook, context) => {
        seen.push([webhook.id, context.attempt]);
        if (webhook.id === poison.id) throw new PermanentError('account deleted');
        if (webhook.id === flaky.id && context.attempt === 1) throw new Error('downstream 502');
      },
      { concurrency: 3, onOutcome: outcomes.record, logger: quiet },
    );
    /** One invocation as Lambda's event source mapping makes it: receive, invoke, delete what succeeded. */
    const invoke = async () => {
      const messages = await receiveAsLambda(client, queueUrl);
      const records = messages.map((message) => lambdaRecord(message));
      const response = await handler({ Records: records }, { getRemainingTimeInMillis: () => 60_000 });
      const failed = new Set(response.batchItemFailures.map((failure) => failure.itemIdentifier));
      for (const record of records) if (!failed.has(record.messageId)) await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: record.receiptHandle }));
      return { records, failed };
    };
    const first = await invoke();
    expect(first.records).toHaveLength(3);
    const idOfRecord = (messageId: string) => (JSON.parse(first.records.find((record) => record.messageId === messageId)!.body) as { job: { id: string } }).job.id;
    expect([...first.failed].map(idOfRecord)).toEqual([flaky.id]);
    // The backoff is 0: its visibility was set to 0, so it is back at once.
    const second = await invoke();
    expect(second.records).toHaveLength(1);
    expect(second.failed.size).toBe(0);
    expect(seen.sort()).toEqual([[flaky.id, 1], [flaky.id, 2], [ok.id, 1], [poison.id, 1]].sort());
    expect(outcomes.of(poison.id)).toEqual(['dead_lettered']);
    expect(countIn(server, name)).toEqual({ ready: 0, delayed: 0, inflight: 0 });
    expect(countIn(server, deadName).ready).toBe(1);
    const letters = await inbox.deadLetters();
    expect(letters.map((letter) => [letter.webhookId, letter.attempts, letter.error])).toEqual([[poison.id, 1, { name: 'PermanentError', message: 'account deleted' }]]);
  });

  it('Lambda on a FIFO queue: a record left in its group stops the rest of that group in the batch, not the other groups (synthetic event)', async () => {
    const { queueUrl } = freshQueues(server, { fifo: true });
    const inbox = inboxOn({ queueUrl, idempotency: { store: memoryStore() } });
    const [a1, a2, b1] = await Promise.all([acceptedJob('{}', { id: idOf('a1') }), acceptedJob('{}', { id: idOf('a2') }), acceptedJob('{}', { id: idOf('b1') })]);
    const ran: string[] = [];
    const handler = inbox.lambda(
      (webhook) => {
        ran.push(webhook.id);
        if (webhook.id === a1!.id) throw new Error('a1 fails');
      },
      { concurrency: 2, logger: quiet },
    );
    // Receipt handles that name no message: the failed record's visibility change fails (told to
    // onError), and it is reported failed as it would be anyway.
    const record = (job: { id: string }, group: string, n: number) => ({
      messageId: `m-${n}`,
      receiptHandle: `handle-${n}`,
      body: JSON.stringify({ job, attemptsBefore: 0, generation: 0 }),
      attributes: { ApproximateReceiveCount: '1', MessageGroupId: group, SentTimestamp: String(Date.now()) },
      eventSource: 'aws:sqs',
    });
    const response = await handler({ Records: [record(a1!, 'A', 1), record(b1!, 'B', 2), record(a2!, 'A', 3)] }, { getRemainingTimeInMillis: () => 60_000 });
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm-1' }, { itemIdentifier: 'm-3' }]);
    expect(ran.sort()).toEqual([a1!.id, b1!.id].sort());
  });

  it('Lambda: a record is not started without time to finish; a running handler is aborted before the invocation ends and reported failed', async () => {
    const { queueUrl } = freshQueues(server);
    const inbox = inboxOn({ queueUrl, idempotency: { store: memoryStore() } });
    const [slow, late] = await Promise.all([acceptedJob('{}', { id: idOf('slow') }), acceptedJob('{}', { id: idOf('late') })]);
    for (const job of [slow, late]) await inbox.enqueue(job);
    const ran: string[] = [];
    let aborted: unknown;
    const handler = inbox.lambda(
      (webhook, context) => {
        ran.push(webhook.id);
        return new Promise<void>((_resolve, reject) => {
          context.signal.addEventListener('abort', () => {
            aborted = context.signal.reason;
            reject(new Error('stopped: out of time'));
          });
        });
      },
      { reserveMs: 1000, logger: quiet },
    );
    const messages = await receiveAsLambda(client, queueUrl);
    const records = messages.map((message) => lambdaRecord(message));
    const ends = Date.now() + 1500;
    const response = await handler({ Records: records }, { getRemainingTimeInMillis: () => ends - Date.now() });
    // The first ran until 1 000 ms were left, the second found no time to start.
    expect(ran).toHaveLength(1);
    // The runner aborts the handler's signal as when an engine takes a job away.
    expect(aborted).toBeInstanceOf(Error);
    expect(response.batchItemFailures.map((failure) => failure.itemIdentifier).sort()).toEqual(records.map((record) => record.messageId).sort());
  });

  it('work: renews the visibility of a message while its handler runs (heartbeat), so it is delivered once', async () => {
    const { queueUrl, name } = freshQueues(server);
    const inbox = inboxOn({ queueUrl, visibilityTimeoutSeconds: 1 });
    const job = await acceptedJob('{}', { id: idOf('heartbeat') });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let runs = 0;
    const outcomes = new Outcomes();
    const worker = await inbox.work(
      async () => {
        runs++;
        started();
        await released;
      },
      { idempotency: { store: memoryStore(), lockSeconds: 1 }, concurrency: 2, onOutcome: outcomes.record, logger: quiet },
    );
    try {
      await inbox.enqueue(job);
      await running;
      const deadline = () => server.inspectQueue(name)!.messages.inflight[0]?.visibilityDeadline ?? 0;
      const first = deadline();
      // Still invisible well past the visibility it was received with: renewed while the handler runs.
      await expect.poll(() => Date.now() > first + 500 && countIn(server, name).inflight === 1 && deadline() > Date.now(), { timeout: 10_000, interval: 50 }).toBe(true);
      release();
      await outcomes.until(() => outcomes.of(job.id).includes('processed'));
      expect(runs).toBe(1);
      await expect.poll(() => countIn(server, name).inflight, { timeout: 5000 }).toBe(0);
      expect(countIn(server, name).ready).toBe(0);
    } finally {
      release();
      await worker.close({ timeoutMs: 2000 });
    }
  });

  it('work: a slow job holds one slot only; the worker receives for the others and runs them meanwhile', async () => {
    const { queueUrl } = freshQueues(server);
    const inbox = inboxOn({ queueUrl });
    const slow = await acceptedJob('{}', { id: idOf('slow-slot') });
    const quick = await Promise.all(Array.from({ length: 6 }, (_, i) => acceptedJob(`{"i":${i}}`, { id: idOf(`quick${i}`) })));
    // The slow one first, so that the first receive takes it with a quick one.
    for (const job of [slow, ...quick]) await inbox.enqueue(job);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const outcomes = new Outcomes();
    let slowDone = false;
    const worker = await inbox.work(
      async (webhook) => {
        if (webhook.id !== slow.id) return;
        await released;
        slowDone = true;
      },
      { concurrency: 2, onOutcome: outcomes.record, logger: quiet },
    );
    try {
      await outcomes.until(() => quick.every((job) => outcomes.of(job.id).includes('processed')));
      expect(slowDone).toBe(false);
      release();
      await outcomes.until(() => outcomes.of(slow.id).includes('processed'));
    } finally {
      release();
      await worker.close({ timeoutMs: 2000 });
    }
  });

  it('work: a worker kept at its concurrency waits for a free slot without piling listeners on its poller', async () => {
    const { queueUrl } = freshQueues(server);
    const inbox = inboxOn({ queueUrl });
    const jobs = await Promise.all(Array.from({ length: 16 }, (_, i) => acceptedJob(`{"i":${i}}`, { id: idOf(`busy${i}`) })));
    for (const job of jobs) await inbox.enqueue(job);
    // Watched, not replaced: every listener still reaches the real EventTarget.
    const added = vi.spyOn(EventTarget.prototype, 'addEventListener');
    const outcomes = new Outcomes();
    const worker = await inbox.work(() => {}, { concurrency: 1, onOutcome: outcomes.record, logger: quiet });
    try {
      await outcomes.until(() => jobs.every((job) => outcomes.of(job.id).includes('processed')));
      const signals = new Set(added.mock.contexts.filter((target): target is AbortSignal => target instanceof AbortSignal));
      const most = Math.max(...[...signals].map((signal) => getEventListeners(signal, 'abort').length));
      // The poller's own signal holds the long poll's listener and at most one wait's: not one a job.
      expect(most).toBeLessThanOrEqual(2);
    } finally {
      added.mockRestore();
      await worker.close({ timeoutMs: 2000 });
    }
  });

  it('a message the redrive policy moved (its worker never settled it) is listed with its failure unknown, and retry runs it', async () => {
    const { queueUrl } = freshQueues(server, { maxReceiveCount: 1 });
    const inbox = inboxOn({ queueUrl, maxAttempts: 3 });
    const job = await acceptedJob('{}', { id: idOf('redriven') });
    await inbox.enqueue(job);
    // A worker that received it and died: visible again, and the next receive moves it.
    const [message] = (await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1 }))).Messages ?? [];
    await client.send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: message!.ReceiptHandle!, VisibilityTimeout: 0 }));
    expect((await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1 }))).Messages ?? []).toEqual([]);
    const letters = await inbox.deadLetters();
    expect(letters).toEqual([
      { webhookId: job.id, namespace: 'default', signed: true, attempts: 1, error: { name: 'RetriesExhausted', message: expect.stringContaining('redrive policy') }, acceptedAt: new Date(job.acceptedAt), firstAttemptAt: undefined, failedAt: undefined, job },
    ]);
    // Listing does not consume: the same again.
    expect((await inbox.deadLetters()).map((letter) => letter.webhookId)).toEqual([job.id]);
    const outcomes = new Outcomes();
    const worker = await inbox.work(() => {}, { onOutcome: outcomes.record, logger: quiet });
    try {
      expect(await inbox.retry(job.id)).toBe(true);
      await outcomes.until(() => outcomes.of(job.id).includes('processed'));
      expect(outcomes.events.find((event) => event.webhookId === job.id)!.attempt).toBe(1);
      expect(await inbox.deadLetters()).toEqual([]);
    } finally {
      await worker.close({ timeoutMs: 2000 });
    }
  });

  it('a message the redrive policy moved counts its receives as attempts also when deadLetterQueueUrl is given', async () => {
    const { queueUrl, deadLetterQueueUrl } = freshQueues(server, { maxReceiveCount: 1 });
    const inbox = inboxOn({ queueUrl, deadLetterQueueUrl, maxAttempts: 3 });
    const job = await acceptedJob('{}', { id: idOf('redriven-named') });
    await inbox.enqueue(job);
    const [message] = (await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1 }))).Messages ?? [];
    await client.send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: message!.ReceiptHandle!, VisibilityTimeout: 0 }));
    expect((await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1 }))).Messages ?? []).toEqual([]);
    expect((await inbox.deadLetters()).map((letter) => [letter.webhookId, letter.attempts, letter.error.name])).toEqual([[job.id, 1, 'RetriesExhausted']]);
  });

  it('warns once when the queue has no redrive policy, or one that moves messages before the last attempt', async () => {
    const warnings: string[] = [];
    const logger = { warn: (_fields: object, message: string) => void warnings.push(message), error: () => {} };
    const none = freshQueues(server, { maxReceiveCount: null });
    const inbox = inboxOn({ queueUrl: none.queueUrl, deadLetterQueueUrl: none.deadLetterQueueUrl, logger });
    await inbox.enqueue(await acceptedJob('{}', { id: idOf('warn') }));
    await inbox.enqueue(await acceptedJob('{}', { id: idOf('warn2') }));
    const low = freshQueues(server, { maxReceiveCount: 3 });
    await inboxOn({ queueUrl: low.queueUrl, maxAttempts: 3, logger }).enqueue(await acceptedJob('{}', { id: idOf('warn3') }));
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain('has no redrive policy');
    expect(warnings[1]).toContain('after 3 receives, not above maxAttempts (3)');
    // Without a redrive policy nor deadLetterQueueUrl, a worker cannot dead-letter: it does not start.
    await expect(inboxOn({ queueUrl: none.queueUrl, logger }).work(() => {})).rejects.toThrow(/no dead-letter queue/);
  });

  it('retry and purge find one dead letter among others and leave the others listed', async () => {
    const { queueUrl, deadLetterQueueUrl } = freshQueues(server);
    const inbox = inboxOn({ queueUrl });
    const jobs = await Promise.all(Array.from({ length: 12 }, (_, i) => acceptedJob(`{"i":${i}}`, { id: idOf(`letter${i}`) })));
    for (const job of jobs) {
      const body = JSON.stringify({ job, attemptsBefore: 0, generation: 0, failure: { attempts: 3, error: { name: 'Error', message: `failed ${job.id}` }, failedAt: Date.now() } });
      await client.send(new SendMessageCommand({ QueueUrl: deadLetterQueueUrl, MessageBody: body }));
    }
    expect((await inbox.deadLetters()).map((letter) => letter.webhookId).sort()).toEqual(jobs.map((job) => job.id).sort());
    expect((await inbox.deadLetters({ limit: 5 })).length).toBe(5);
    expect(await inbox.purge(jobs[4]!.id)).toBe(true);
    expect(await inbox.purge(jobs[4]!.id)).toBe(false);
    expect(await inbox.retry(jobs[7]!.id, { namespace: 'other' })).toBe(false);
    expect(await inbox.retry(jobs[7]!.id)).toBe(true);
    const left = (await inbox.deadLetters()).map((letter) => letter.webhookId).sort();
    expect(left).toEqual(jobs.filter((_, i) => i !== 4 && i !== 7).map((job) => job.id).sort());
    // The retried job is on the source queue, as a new generation with its attempts counted anew.
    const [message] = (await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1 }))).Messages ?? [];
    expect(JSON.parse(message!.Body!)).toEqual({ job: jobs[7], attemptsBefore: 0, generation: 1 });
  });
  it('rejects a request SQS does not answer within its bound, also through a client that drops the abort signal', async () => {
    // A server that takes connections and never answers.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const mute = sqsClient({ port: (silent.address() as AddressInfo).port });
    // Wraps the SDK client as an application might (logging, tracing), passing no options on.
    const wrapped = { send: (command: object) => mute.send(command as SendMessageCommand) };
    try {
      const inbox = sqsInbox({ client: wrapped, queueUrl: 'http://127.0.0.1/000000000000/never', maxMessageBytes: 262_144, timeoutMs: 200, logger: quiet });
      await expect(inbox.enqueue(await acceptedJob('{}', { id: idOf('mute') }))).rejects.toThrow('SQS did not answer SendMessage within 200 ms');
    } finally {
      mute.destroy();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe.skipIf(!available)('sqsInbox with the queue down', () => {
  it('answers 503 INBOX_UNAVAILABLE within its budget while SQS is down, and takes jobs again once it is back, with the earlier ones kept', { timeout: 60_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'fauxqs-'));
    let own = await startSqs({ dataDir });
    const port = own.port;
    const ownClient = sqsClient(own);
    try {
      const { queueUrl, name } = freshQueues(own);
      const inbox = sqsInbox({ client: ownClient, queueUrl, maxMessageBytes: 262_144, timeoutMs: 1500, logger: quiet });
      const gate = new InboxGate(inbox);
      await gate.enqueue(await acceptedJob('{}', { id: idOf('before') }), undefined);
      await own.stop();
      const began = Date.now();
      const refusal = await gate.enqueue(await acceptedJob('{}', { id: idOf('down') }), undefined).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refusal).toMatchObject({ code: 'INBOX_UNAVAILABLE', status: 503 });
      expect(Date.now() - began).toBeLessThan(1500 + 1000);
      own = await startSqs({ dataDir, port });
      await gate.enqueue(await acceptedJob('{}', { id: idOf('after') }), undefined);
      expect(countIn(own, name).ready).toBe(2);
    } finally {
      ownClient.destroy();
      await own.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

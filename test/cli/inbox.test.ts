/**
 * `webhook-receiver inbox list|retry|purge` as a person runs it, against a real Redis (BullMQ),
 * a real PostgreSQL (pg-boss, on Node 22.12 or later) and fauxqs (SQS, on Node 22.5 or later): dead letters listed, one retried and
 * processed, one purged; misuse is exit code 2 and never repeats the URL (it may hold a password).
 */

import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { pgBossInbox, type PgBossLike } from '../../src/inbox/pg-boss.ts';
import { sqsInbox } from '../../src/inbox/sqs/index.ts';
import { acceptedJob, Outcomes } from '../inbox/conformance.ts';
import { sharedPostgresUrl } from '../support/postgres.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';
import { freshQueues, sqsClient, startSqs } from '../support/sqs.ts';
import { run } from './support.ts';
import { fauxqsRuns, pgBossRuns } from '../support/node-version.ts';

describe('webhook-receiver inbox: misuse', () => {
  it('needs a subcommand, a URL and an id, and never repeats the URL', async () => {
    expect(await run(['inbox'])).toMatchObject({ code: 2, stderr: expect.stringContaining('name what to do: list, retry, purge') });
    expect(await run(['inbox', 'list'])).toMatchObject({ code: 2, stderr: expect.stringContaining('no URL: pass --url, or set INBOX_URL') });
    const secretUrl = 'mysql://admin:hunter2-password@db.internal/x';
    const wrong = await run(['inbox', 'list'], { env: { INBOX_URL: secretUrl } });
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('the URL must start with redis://');
    expect(wrong.stderr + wrong.stdout).not.toContain('hunter2');
    expect(await run(['inbox', 'retry'], { env: { INBOX_URL: 'redis://127.0.0.1:1' } })).toMatchObject({ code: 2, stderr: expect.stringContaining('retry needs --id') });
    const help = await run(['inbox', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: webhook-receiver inbox <list|retry|purge>');
  });
});

/** A loopback port where nothing listens: taken, then let go. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** A server that accepts connections and never says a word: a host behind a firewall that holds them, or the wrong service. */
async function silentServer(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('webhook-receiver inbox: an engine it cannot reach', () => {
  /** Child processes that load BullMQ or pg-boss on a loaded machine: generous, and still bounded. */
  const TIMEOUT = 60_000;
  const REDIS_PASSWORD = 'r3dis-pass-never-shown';
  const PG_PASSWORD = 'pg-pass-never-shown';

  it('gives up on a port where nothing listens, naming the URL without its password and what to check', { timeout: TIMEOUT * 2 }, async () => {
    const port = await closedPort();
    // From INBOX_URL for Redis, from --url for PostgreSQL: neither may be repeated with its password.
    const redis = await run(['inbox', 'list'], { env: { INBOX_URL: `redis://:${REDIS_PASSWORD}@127.0.0.1:${port}` }, timeoutMs: TIMEOUT });
    expect(redis.stdout).toBe('');
    expect(redis.stderr).toBe(
      `webhook-receiver inbox: cannot reach Redis at redis://:***@127.0.0.1:${port}: connection refused: nothing listens on that host and port (ECONNREFUSED): ` +
        "check that Redis is running there and the URL's host and port (rediss:// for TLS)\n",
    );
    expect(redis.code).toBe(1);
    const postgres = await run(['inbox', 'retry', '--id', 'msg_1', '--url', `postgres://admin:${PG_PASSWORD}@127.0.0.1:${port}/jobs`], { timeoutMs: TIMEOUT });
    expect(postgres.stdout).toBe('');
    expect(postgres.stderr).toBe(
      `webhook-receiver inbox: cannot reach PostgreSQL at postgres://admin:***@127.0.0.1:${port}/jobs: connection refused: nothing listens on that host and port (ECONNREFUSED): ` +
        "check that PostgreSQL is running there and the URL's host and port (and sslmode, when it needs TLS)\n",
    );
    expect(postgres.code).toBe(1);
  });

  it('gives up after --timeout on a server that never answers, for either engine', { timeout: TIMEOUT * 2 }, async () => {
    const silent = await silentServer();
    try {
      const redis = await run(['inbox', 'list', '--timeout', '1', '--url', `redis://:${REDIS_PASSWORD}@127.0.0.1:${silent.port}/0?password=${REDIS_PASSWORD}`], { timeoutMs: TIMEOUT });
      expect(redis.stderr).toMatch(new RegExp(`^webhook-receiver inbox: no answer from Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${silent.port}/0\\?… within 1 s while connecting: check that Redis is running there`));
      expect(redis.stderr).toContain('on a slow link, raise --timeout\n');
      expect(redis.code).toBe(1);
      expect(redis.stdout + redis.stderr).not.toContain(REDIS_PASSWORD);
      const postgres = await run(['inbox', 'purge', '--id', 'msg_1', '--timeout', '1'], { env: { INBOX_URL: `postgresql://admin:${PG_PASSWORD}@127.0.0.1:${silent.port}/jobs` }, timeoutMs: TIMEOUT });
      expect(postgres.stderr).toMatch(new RegExp(`^webhook-receiver inbox: no answer from PostgreSQL at postgresql://admin:\\*\\*\\*@127\\.0\\.0\\.1:${silent.port}/jobs within 1 s while connecting: check that PostgreSQL is running there`));
      expect(postgres.code).toBe(1);
      expect(postgres.stdout + postgres.stderr).not.toContain(PG_PASSWORD);
    } finally {
      await silent.close();
    }
  });

  it('refuses a --timeout that is not a number of seconds', async () => {
    const result = await run(['inbox', 'list', '--timeout', 'soon'], { env: { INBOX_URL: 'redis://127.0.0.1:1' } });
    expect(result).toMatchObject({ code: 2, stderr: expect.stringContaining('--timeout must be a whole number from 1 to 600') });
  });
});

describe.skipIf(sharedRedisUrl === null)('webhook-receiver inbox on BullMQ', () => {
  const closers: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('lists the dead letters, retries one (processed), and purges another', { timeout: 60_000 }, async () => {
    const connection = await connectIORedis(sharedRedisUrl!);
    closers.push(() => connection.disconnect());
    const name = `cli-${randomBytes(5).toString('hex')}`;
    const queue = new Queue(name, { connection, prefix: 'test-cli' });
    closers.push(async () => {
      await queue.obliterate({ force: true });
      await queue.close();
    });
    const inbox = bullmqInbox({ queue, maxAttempts: 2, backoff: { delayMs: 0 }, logger: { warn: () => {}, error: () => {} } });
    const outcomes = new Outcomes();
    let healed = false;
    const worker = await inbox.work(
      () => {
        if (!healed) throw new PermanentError('no such customer');
      },
      { onOutcome: outcomes.record },
    );
    closers.push(() => worker.close({ timeoutMs: 1000 }));
    const first = await acceptedJob('{"a":1}', { id: `msg_cli_${name}_1` });
    const second = await acceptedJob('{"a":2}', { id: `msg_cli_${name}_2` });
    await inbox.enqueue(first);
    await inbox.enqueue(second);
    await outcomes.until(() => outcomes.events.filter((event) => event.outcome === 'dead_lettered').length === 2);
    await expect.poll(async () => (await inbox.deadLetters()).length, { timeout: 10_000 }).toBe(2);

    const env = { INBOX_URL: sharedRedisUrl! };
    const listed = await run(['inbox', 'list', '--queue', name, '--prefix', 'test-cli'], { env });
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trim().split('\n').sort();
    expect(lines).toHaveLength(2);
    // The first attempt's start, then the last attempt's end: one attempt, so the one's start and end.
    const listedLine = new RegExp(`^${first.id}  default  1 attempts  (\\d{4}-\\d\\d-\\d\\dT[^ ]+Z)  (\\d{4}-\\d\\d-\\d\\dT[^ ]+Z)  PermanentError: no such customer$`).exec(lines[0]!);
    expect(listedLine).not.toBeNull();
    expect(Date.parse(listedLine![1]!)).toBeLessThanOrEqual(Date.parse(listedLine![2]!));
    expect(listed.stderr).toContain(`2 dead letters in bullmq queue ${name}`);
    const json = await run(['inbox', 'list', '--json', '--queue', name, '--prefix', 'test-cli'], { env });
    expect(json.stdout.trim().split('\n').map((text) => (JSON.parse(text) as { webhookId: string }).webhookId).sort()).toEqual([first.id, second.id].sort());

    healed = true;
    expect(await run(['inbox', 'retry', '--id', first.id, '--queue', name, '--prefix', 'test-cli'], { env })).toMatchObject({ code: 0, stdout: `retried ${first.id}\n` });
    await outcomes.until(() => outcomes.of(first.id).includes('processed'));
    expect(await run(['inbox', 'purge', '--id', second.id, '--queue', name, '--prefix', 'test-cli'], { env })).toMatchObject({ code: 0, stdout: `purged ${second.id}\n` });
    expect(await inbox.deadLetters()).toEqual([]);
    const missing = await run(['inbox', 'purge', '--id', second.id, '--queue', name, '--prefix', 'test-cli'], { env });
    expect(missing).toMatchObject({ code: 1, stderr: `no dead letter of ${JSON.stringify(second.id)} in namespace default\n` });
  });
});

const pgBossAvailable = sharedPostgresUrl !== null && pgBossRuns();

describe.skipIf(!pgBossAvailable)('webhook-receiver inbox on pg-boss', () => {
  it('lists, retries and purges a dead letter, and leaves the queue\'s retry policy as the app set it', { timeout: 90_000 }, async () => {
    const { PgBoss } = await import('pg-boss');
    const schema = `cli_${randomBytes(4).toString('hex')}`;
    const boss = new PgBoss({ connectionString: sharedPostgresUrl!, schema, schedule: false });
    boss.on('error', () => {});
    await boss.start();
    const name = `cli-${randomBytes(5).toString('hex')}`;
    // The app's policy: 3 attempts, a minute apart (pg-boss's retryLimit 2, retryDelay 60).
    const inbox = pgBossInbox({ boss: boss as unknown as PgBossLike, queue: name, maxAttempts: 3, backoff: { delayMs: 60_000 }, pollingIntervalSeconds: 0.5 });
    const outcomes = new Outcomes();
    const worker = await inbox.work(
      () => {
        // What a sender sent may end up in an error's message: a terminal escape among it.
        throw new PermanentError('gone \u001b[31mred');
      },
      { onOutcome: outcomes.record },
    );
    try {
      const job = await acceptedJob('{}', { id: `msg_cli_${name}` });
      await inbox.enqueue(job);
      await outcomes.until(() => outcomes.of(job.id).includes('dead_lettered'));
      await expect.poll(async () => (await inbox.deadLetters()).length, { timeout: 10_000 }).toBe(1);
      const env = { INBOX_URL: sharedPostgresUrl! };
      const listed = await run(['inbox', 'list', '--queue', name, '--schema', schema], { env });
      expect(listed.code).toBe(0);
      expect(listed.stdout).toMatch(new RegExp(`^${job.id}  default  1 attempts  \\d{4}-[^ ]+Z  \\d{4}-[^ ]+Z  PermanentError: gone \\\\x1b\\[31mred\\n$`));
      // Back on the queue, and (still failing) a dead letter again.
      expect(await run(['inbox', 'retry', '--id', job.id, '--queue', name, '--schema', schema], { env })).toMatchObject({ code: 0, stdout: `retried ${job.id}\n` });
      await outcomes.until(() => outcomes.of(job.id).filter((outcome) => outcome === 'dead_lettered').length === 2);
      await expect.poll(async () => (await inbox.deadLetters()).length, { timeout: 10_000 }).toBe(1);
      expect(await run(['inbox', 'purge', '--id', job.id, '--queue', name, '--schema', schema], { env })).toMatchObject({ code: 0, stdout: `purged ${job.id}\n` });
      expect(await inbox.deadLetters()).toEqual([]);
      // The operator's commands changed no setting: jobs sent afterwards still get the app's policy.
      const settings = (await boss.getQueue(name)) as { retryLimit?: number; retryDelay?: number; retryBackoff?: boolean } | null;
      expect(settings).toMatchObject({ retryLimit: 2, retryDelay: 60, retryBackoff: true });
    } finally {
      await worker.close({ timeoutMs: 1000 });
      await inbox.close();
      await boss.stop({ graceful: false, timeout: 2000 });
      const pool = new pg.Pool({ connectionString: sharedPostgresUrl! });
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });
});

const sqsRuns = fauxqsRuns();

describe.skipIf(!sqsRuns)('webhook-receiver inbox on SQS', () => {
  it('takes a queue URL: lists the dead letters on the queue its redrive policy names, retries one (processed), purges another', { timeout: 90_000 }, async () => {
    const server = await startSqs();
    const client = sqsClient(server);
    const { queueUrl } = freshQueues(server, { maxReceiveCount: 5 });
    const inbox = sqsInbox({ client, queueUrl, maxAttempts: 2, backoff: { delayMs: 0 }, waitTimeSeconds: 1, logger: { warn: () => {}, error: () => {} } });
    const outcomes = new Outcomes();
    let healed = false;
    const worker = await inbox.work(
      () => {
        if (!healed) throw new PermanentError('no such customer');
      },
      { onOutcome: outcomes.record, logger: { warn: () => {}, error: () => {} } },
    );
    try {
      const suffix = randomBytes(4).toString('hex');
      const first = await acceptedJob('{"a":1}', { id: `msg_cli_sqs_${suffix}_1` });
      const second = await acceptedJob('{"a":2}', { id: `msg_cli_sqs_${suffix}_2` });
      await inbox.enqueue(first);
      await inbox.enqueue(second);
      await outcomes.until(() => outcomes.events.filter((event) => event.outcome === 'dead_lettered').length === 2);
      // The credentials come from the SDK's environment, as an operator's would.
      const env = { INBOX_URL: queueUrl, AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test', AWS_REGION: 'us-east-1' };
      const endpoint = ['--endpoint', `http://127.0.0.1:${server.port}`];
      const listed = await run(['inbox', 'list', ...endpoint], { env });
      expect(listed.code).toBe(0);
      const lines = listed.stdout.trim().split('\n').sort();
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(new RegExp(`^${first.id}  default  1 attempts  \\d{4}-[^ ]+Z  \\d{4}-[^ ]+Z  PermanentError: no such customer$`));
      expect(listed.stderr).toContain('2 dead letters in sqs queue');
      healed = true;
      expect(await run(['inbox', 'retry', '--id', first.id, ...endpoint], { env })).toMatchObject({ code: 0, stdout: `retried ${first.id}\n` });
      await outcomes.until(() => outcomes.of(first.id).includes('processed'));
      expect(await run(['inbox', 'purge', '--id', second.id, ...endpoint], { env })).toMatchObject({ code: 0, stdout: `purged ${second.id}\n` });
      expect(await inbox.deadLetters()).toEqual([]);
      const missing = await run(['inbox', 'purge', '--id', second.id, ...endpoint], { env });
      expect(missing).toMatchObject({ code: 1, stderr: `no dead letter of ${JSON.stringify(second.id)} in namespace default\n` });
      // Misuse: an endpoint that is not a URL.
      expect(await run(['inbox', 'list', '--endpoint', 'localhost:4566'], { env })).toMatchObject({ code: 2 });
    } finally {
      await worker.close({ timeoutMs: 1000 });
      client.destroy();
      await server.stop();
    }
  });
});

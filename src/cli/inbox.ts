/**
 * `webhook-receiver inbox list|retry|purge`: an inbox's dead letters from a connection URL, for an
 * operator at a shell. `redis://` and `rediss://` mean BullMQ, `postgres://` and `postgresql://`
 * mean pg-boss, `https://` (and `http://`, for a local SQS) a queue URL of SQS; each engine is
 * loaded only when used (all are optional peers). The URL may hold a password, so it is read from
 * `INBOX_URL` by default and never printed.
 */

import { escapeControlCharacters } from '../lib/encoding.ts';
import type { PgBossLike } from '../inbox/pg-boss.ts';
import { isQueueUrl } from '../inbox/sqs/queue.ts';
import type { DeadLetter, Inbox } from '../inbox/types.ts';
import { noAnswer, scrubbed, shownUrl, unreachable, within, type ServerKind } from './connect.ts';
import { io, parse, printHelp, UsageError, wholeNumber } from './options.ts';

export const INBOX_HELP = `Usage: webhook-receiver inbox <list|retry|purge> [options]

Lists an inbox's dead letters, puts one back on its queue (attempts counted anew), or deletes one.
The engine follows from the URL: redis:// or rediss:// for BullMQ, postgres:// or postgresql://
for pg-boss, an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<queue>) for SQS,
whose dead letters are on the queue its redrive policy names. SQS takes its credentials from
the AWS SDK's usual places (AWS_PROFILE, AWS_ACCESS_KEY_ID…), never from an option.

Commands:
  list                print the dead letters, oldest first: id, namespace, attempts, first
                      attempt at, last attempt ended at (- where the engine cannot tell), error
  retry               put the dead letter of --id back on the queue
  purge               delete the dead letter of --id (the sender's late retries stay duplicates)

Options:
  --url URL           the engine's connection URL. Default: INBOX_URL (prefer it: command-line
                      arguments end up in shell history and process lists)
  --queue NAME        the queue's name, for BullMQ and pg-boss (default webhooks)
  --id ID             the webhook id, for retry and purge
  --namespace NS      the idempotency namespace (default default)
  --unsigned          the dead letter of an unsigned delivery
  --limit N           list at most N (default 1000)
  --json              list as one JSON object per line (the body in base64)
  --prefix P          BullMQ's key prefix (default bull)
  --schema S          pg-boss's schema (default pgboss)
  --region R          SQS's region (default: AWS_REGION, or the queue URL's)
  --endpoint URL      SQS's endpoint, for a local SQS (default: the region's)
  --timeout S         seconds to wait for the engine to connect, and then for the command to
                      complete (default 10 each); then it gives up, naming the URL without its
                      password and what to check
  --help              show this help

Exit codes: 0 done, 1 no such dead letter or the engine failed, 2 misuse.`;

const SUBCOMMANDS = ['list', 'retry', 'purge'] as const;

/** An inbox opened from a URL, and how to let go of its connections. */
interface Opened {
  inbox: Inbox;
  close(): Promise<void>;
}

/** How long closing may take once the command is done or has given up: closing never holds the answer back. */
const CLOSE_MS = 2000;

async function openBullmq(url: string, queueName: string, prefix: string | undefined, timeoutMs: number): Promise<Opened> {
  // Loaded here, not at the top: BullMQ is an optional peer the other commands never need.
  const [{ Queue }, { Redis }, { bullmqInbox }] = await Promise.all([import('bullmq'), import('ioredis'), import('../inbox/bullmq.ts')]);
  // Connected here, before BullMQ sees it, and never again: ioredis would otherwise reconnect
  // forever to a server that refuses, and BullMQ wait for it without a word. A command in flight
  // when the connection drops fails rather than waits for another. The connect timeout is past the
  // command's own bound, so the bound's message (no answer) is the one given.
  const connection = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs + 1000, maxRetriesPerRequest: 1, retryStrategy: () => null });
  let lastError: unknown;
  connection.on('error', (error: unknown) => {
    lastError = error;
  });
  let connected;
  try {
    connected = await within(connection.connect(), timeoutMs);
  } catch (error) {
    connection.disconnect();
    // ioredis rejects with "Connection is closed"; the reason came as an 'error' event before it.
    throw unreachable('Redis', url, lastError ?? error);
  }
  if (connected.timedOut) {
    connection.disconnect();
    throw noAnswer('Redis', url, timeoutMs / 1000, 'while connecting');
  }
  const queue = new Queue(queueName, { connection, ...(prefix === undefined ? {} : { prefix }) });
  queue.on('error', () => {});
  const silent = { warn: () => {}, error: () => {} };
  const inbox = bullmqInbox({ queue, logger: silent });
  return {
    inbox,
    close: async () => {
      await within(inbox.close(), CLOSE_MS).catch(() => {});
      await within(queue.close(), CLOSE_MS).catch(() => {});
      connection.disconnect();
    },
  };
}

async function openPgBoss(url: string, queueName: string, schema: string | undefined, timeoutMs: number): Promise<Opened> {
  const [{ PgBoss }, { pgBossInbox }] = await Promise.all([import('pg-boss'), import('../inbox/pg-boss.ts')]);
  const boss = new PgBoss({
    connectionString: url,
    ...(schema === undefined ? {} : { schema }),
    supervise: false,
    schedule: false,
    migrate: false,
    max: 2,
    // Past the command's own bound, so the bound's message (no answer) is the one given.
    connectionTimeoutMillis: timeoutMs + 1000,
  });
  boss.on('error', () => {});
  const close = () => within(boss.stop({ graceful: false, close: true, timeout: CLOSE_MS }), CLOSE_MS).then(() => {}, () => {});
  let started;
  try {
    started = await within(boss.start(), timeoutMs);
  } catch (error) {
    await close();
    throw unreachable('PostgreSQL', url, error);
  }
  if (started.timedOut) {
    // stop() waits for the start in flight, which ends at pg's own connection timeout: not awaited.
    void close();
    throw noAnswer('PostgreSQL', url, timeoutMs / 1000, 'while connecting');
  }
  // Only reads, retries and purges dead letters: the queue's settings (retries, backoff) stay the app's.
  const inbox = pgBossInbox({ boss: boss as unknown as PgBossLike, queue: queueName });
  return {
    inbox,
    close: async () => {
      await within(inbox.close(), CLOSE_MS).catch(() => {});
      await close();
    },
  };
}

async function openSqs(queueUrl: string, region: string | undefined, endpoint: string | undefined, timeoutMs: number): Promise<Opened> {
  const [{ SQSClient }, { sqsInbox }] = await Promise.all([import('@aws-sdk/client-sqs'), import('../inbox/sqs/index.ts')]);
  // The region named by an AWS queue URL's host (sqs.<region>.amazonaws.com), unless told.
  const fromUrl = /^https?:\/\/sqs[.-]([a-z0-9-]+)\.amazonaws\.com/i.exec(queueUrl)?.[1];
  const client = new SQSClient({
    region: region ?? process.env.AWS_REGION ?? fromUrl ?? 'us-east-1',
    ...(endpoint === undefined ? {} : { endpoint }),
    maxAttempts: 1,
  });
  // Only reads, retries and purges dead letters: the queue's settings stay the app's.
  const inbox = sqsInbox({ client, queueUrl, timeoutMs, logger: { warn: () => {}, error: () => {} } });
  return {
    inbox,
    close: async () => {
      await within(inbox.close(), CLOSE_MS).catch(() => {});
      client.destroy();
    },
  };
}

function line(letter: DeadLetter): string {
  const time = (date: Date | undefined) => date?.toISOString() ?? '-';
  return [
    letter.webhookId,
    letter.namespace + (letter.signed ? '' : ' (unsigned)'),
    `${letter.attempts} attempts`,
    time(letter.firstAttemptAt),
    time(letter.failedAt),
    // The handler's error may quote what the sender sent: no control characters reach the terminal.
    escapeControlCharacters(`${letter.error.name}: ${letter.error.message}`),
  ].join('  ');
}

export async function inboxCommand(args: string[]): Promise<number> {
  const [subcommand, ...rest] = args;
  if (subcommand === undefined || subcommand === '--help' || subcommand === '-h') {
    if (subcommand === undefined) throw new UsageError(`name what to do: ${SUBCOMMANDS.join(', ')}`);
    return printHelp(INBOX_HELP);
  }
  if (!(SUBCOMMANDS as readonly string[]).includes(subcommand)) throw new UsageError(`unknown inbox command (it is none of ${SUBCOMMANDS.join(', ')})`);
  const { values } = parse('inbox', rest, {
    url: { type: 'string' },
    queue: { type: 'string' },
    id: { type: 'string' },
    namespace: { type: 'string' },
    unsigned: { type: 'boolean' },
    limit: { type: 'string' },
    json: { type: 'boolean' },
    prefix: { type: 'string' },
    schema: { type: 'string' },
    region: { type: 'string' },
    endpoint: { type: 'string' },
    timeout: { type: 'string' },
  });
  if (values.help) return printHelp(INBOX_HELP);
  const url = values.url ?? process.env.INBOX_URL ?? '';
  if (url === '') throw new UsageError('no URL: pass --url, or set INBOX_URL');
  const scheme = /^([a-z]+):\/\//i.exec(url)?.[1]?.toLowerCase();
  const engine =
    scheme === 'redis' || scheme === 'rediss' ? 'bullmq' : scheme === 'postgres' || scheme === 'postgresql' ? 'pg-boss' : scheme === 'https' || scheme === 'http' ? 'sqs' : undefined;
  // The URL itself is never repeated: it may carry a password.
  if (engine === undefined) throw new UsageError('the URL must start with redis://, rediss:// (BullMQ), postgres:// or postgresql:// (pg-boss), or be an SQS queue URL (https://)');
  if (engine === 'sqs' && !isQueueUrl(url)) throw new UsageError('an SQS queue URL names the queue: https://sqs.<region>.amazonaws.com/<account>/<queue>');
  const endpoint = values.endpoint;
  if (endpoint !== undefined && !/^https?:\/\/\S+$/.test(endpoint)) throw new UsageError('--endpoint must be an http:// or https:// URL');
  const limit = wholeNumber(values.limit, '--limit', 1, 100_000);
  const id = values.id;
  if (subcommand !== 'list' && (id === undefined || id === '')) throw new UsageError(`${subcommand} needs --id`);
  const timeoutSeconds = wholeNumber(values.timeout, '--timeout', 1, 600) ?? 10;
  const timeoutMs = timeoutSeconds * 1000;
  const queueName = engine === 'sqs' ? url.slice(url.lastIndexOf('/') + 1) : (values.queue ?? 'webhooks');
  const kind: ServerKind = engine === 'bullmq' ? 'Redis' : engine === 'pg-boss' ? 'PostgreSQL' : 'SQS';
  const opened =
    engine === 'bullmq'
      ? await openBullmq(url, queueName, values.prefix, timeoutMs)
      : engine === 'pg-boss'
        ? await openPgBoss(url, queueName, values.schema, timeoutMs)
        : await openSqs(url, values.region, endpoint, timeoutMs);
  /** The engine's answer within the bound; a failure names the URL without its password. */
  const ask = async <T>(work: () => Promise<T>, step: string): Promise<T> => {
    let answer;
    try {
      answer = await within(work(), timeoutMs);
    } catch (error) {
      throw new Error(`${step} failed on ${engine} (${kind} at ${shownUrl(url)}): ${scrubbed(error instanceof Error ? error.message : String(error), url)}`);
    }
    if (answer.timedOut) {
      const unsure = subcommand === 'list' ? '' : ` (the ${subcommand} may or may not have been done: list the dead letters to see)`;
      throw noAnswer(kind, url, timeoutSeconds, `while ${step}${unsure}`);
    }
    return answer.value;
  };
  try {
    const inbox = opened.inbox;
    if (subcommand === 'list') {
      const letters = await ask(() => inbox.deadLetters(limit === undefined ? undefined : { limit }), 'listing the dead letters');
      for (const letter of letters) io.out(values.json ? JSON.stringify(letter) : line(letter));
      if (!values.json) io.err(`${letters.length} dead letter${letters.length === 1 ? '' : 's'} in ${engine} queue ${queueName}`);
      return 0;
    }
    const selector = { namespace: values.namespace ?? 'default', signed: values.unsigned !== true };
    const done = await ask(() => (subcommand === 'retry' ? inbox.retry(id!, selector) : inbox.purge(id!, selector)), `${subcommand === 'retry' ? 'retrying' : 'purging'} the dead letter`);
    if (!done) {
      io.err(`no dead letter of ${JSON.stringify(id)} in namespace ${selector.namespace}${selector.signed ? '' : ' (unsigned)'}`);
      return 1;
    }
    io.out(`${subcommand === 'retry' ? 'retried' : 'purged'} ${id!}`);
    return 0;
  } finally {
    await opened.close();
  }
}

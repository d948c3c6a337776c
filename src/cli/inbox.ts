/**
 * `webhook-receiver inbox list|retry|purge`: an inbox's dead letters from a connection URL, for an
 * operator at a shell. `redis://` and `rediss://` mean BullMQ, `postgres://` and `postgresql://`
 * mean pg-boss; each engine is loaded only when used (both are optional peers). The URL may hold a
 * password, so it is read from `INBOX_URL` by default and never printed.
 */

import { escapeControlCharacters } from '../encoding.ts';
import type { PgBossLike } from '../inbox/pg-boss.ts';
import type { DeadLetter, Inbox } from '../inbox/types.ts';
import { io, parse, printHelp, UsageError, wholeNumber } from './options.ts';

export const INBOX_HELP = `Usage: webhook-receiver inbox <list|retry|purge> [options]

Lists an inbox's dead letters, puts one back on its queue (attempts counted anew), or deletes one.
The engine follows from the URL: redis:// or rediss:// for BullMQ, postgres:// or postgresql://
for pg-boss.

Commands:
  list                print the dead letters, oldest first: id, namespace, attempts, first
                      attempt at, last attempt ended at (- where the engine cannot tell), error
  retry               put the dead letter of --id back on the queue
  purge               delete the dead letter of --id (the sender's late retries stay duplicates)

Options:
  --url URL           the engine's connection URL. Default: INBOX_URL (prefer it: command-line
                      arguments end up in shell history and process lists)
  --queue NAME        the queue's name (default webhooks)
  --id ID             the webhook id, for retry and purge
  --namespace NS      the idempotency namespace (default default)
  --unsigned          the dead letter of an unsigned delivery
  --limit N           list at most N (default 1000)
  --json              list as one JSON object per line (the body in base64)
  --prefix P          BullMQ's key prefix (default bull)
  --schema S          pg-boss's schema (default pgboss)
  --help              show this help

Exit codes: 0 done, 1 no such dead letter or the engine failed, 2 misuse.`;

const SUBCOMMANDS = ['list', 'retry', 'purge'] as const;

/** An inbox opened from a URL, and how to let go of its connections. */
interface Opened {
  inbox: Inbox;
  close(): Promise<void>;
}

async function openBullmq(url: string, queueName: string, prefix: string | undefined): Promise<Opened> {
  // Loaded here, not at the top: BullMQ is an optional peer the other commands never need.
  const [{ Queue }, { Redis }, { bullmqInbox }] = await Promise.all([import('bullmq'), import('ioredis'), import('../inbox/bullmq.ts')]);
  // Fail fast rather than queue commands forever while the server is unreachable.
  const connection = new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 5000, enableOfflineQueue: true, lazyConnect: false });
  connection.on('error', () => {});
  const queue = new Queue(queueName, { connection, ...(prefix === undefined ? {} : { prefix }) });
  queue.on('error', () => {});
  const silent = { warn: () => {}, error: () => {} };
  const inbox = bullmqInbox({ queue, logger: silent });
  return {
    inbox,
    close: async () => {
      await inbox.close();
      await queue.close();
      connection.disconnect();
    },
  };
}

async function openPgBoss(url: string, queueName: string, schema: string | undefined): Promise<Opened> {
  const [{ PgBoss }, { pgBossInbox }] = await Promise.all([import('pg-boss'), import('../inbox/pg-boss.ts')]);
  const boss = new PgBoss({ connectionString: url, ...(schema === undefined ? {} : { schema }), supervise: false, schedule: false, migrate: false, max: 2 });
  boss.on('error', () => {});
  await boss.start();
  // Only reads, retries and purges dead letters: the queue's settings (retries, backoff) stay the app's.
  const inbox = pgBossInbox({ boss: boss as unknown as PgBossLike, queue: queueName });
  return {
    inbox,
    close: async () => {
      await inbox.close();
      await boss.stop({ graceful: false, close: true, timeout: 2000 });
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
  });
  if (values.help) return printHelp(INBOX_HELP);
  const url = values.url ?? process.env.INBOX_URL ?? '';
  if (url === '') throw new UsageError('no URL: pass --url, or set INBOX_URL');
  const scheme = /^([a-z]+):\/\//i.exec(url)?.[1]?.toLowerCase();
  const engine = scheme === 'redis' || scheme === 'rediss' ? 'bullmq' : scheme === 'postgres' || scheme === 'postgresql' ? 'pg-boss' : undefined;
  // The URL itself is never repeated: it may carry a password.
  if (engine === undefined) throw new UsageError('the URL must start with redis://, rediss:// (BullMQ), postgres:// or postgresql:// (pg-boss)');
  const limit = wholeNumber(values.limit, '--limit', 1, 100_000);
  const id = values.id;
  if (subcommand !== 'list' && (id === undefined || id === '')) throw new UsageError(`${subcommand} needs --id`);
  const queueName = values.queue ?? 'webhooks';
  const opened = engine === 'bullmq' ? await openBullmq(url, queueName, values.prefix) : await openPgBoss(url, queueName, values.schema);
  try {
    const inbox = opened.inbox;
    if (subcommand === 'list') {
      const letters = await inbox.deadLetters(limit === undefined ? undefined : { limit });
      for (const letter of letters) io.out(values.json ? JSON.stringify(letter) : line(letter));
      if (!values.json) io.err(`${letters.length} dead letter${letters.length === 1 ? '' : 's'} in ${engine} queue ${queueName}`);
      return 0;
    }
    const selector = { namespace: values.namespace ?? 'default', signed: values.unsigned !== true };
    const done = subcommand === 'retry' ? await inbox.retry(id!, selector) : await inbox.purge(id!, selector);
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

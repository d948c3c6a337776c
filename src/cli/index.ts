#!/usr/bin/env node
/**
 * The `webhook-receiver` command: make secrets, sign a request, verify a captured one, run a
 * local receiver that shows every delivery as it arrives, and check a live endpoint against the
 * standard, record deliveries and replay them against your own endpoint, and look after an
 * inbox's dead letters. Secrets come from `--secret` or from
 * `WEBHOOK_SECRET` (comma-separated), so they can stay out of shell history; none is ever printed,
 * except by `generate-secret`, whose output is the point.
 *
 * Exit codes: 0 success, 1 a failed verification or a runtime failure, 2 misuse.
 */

import { readFileSync } from 'node:fs';
import { isWebhookError } from '../errors.ts';
import { CHECK_HELP, checkCommand } from './check.ts';
import { GENERATE_SECRET_HELP, generateSecretCommand } from './generate-secret.ts';
import { INBOX_HELP, inboxCommand } from './inbox.ts';
import { LISTEN_HELP, listenCommand } from './listen.ts';
import { RELAY_HELP, relayCommand } from './relay.ts';
import { pullCommand } from './relay-pull.ts';
import { REPLAY_HELP, replayCommand } from './replay.ts';
import { UsageError, io, printHelp } from './options.ts';
import { SIGN_HELP, signCommand } from './sign.ts';
import { VERIFY_HELP, verifyCommand } from './verify.ts';

const COMMANDS = ['generate-secret', 'sign', 'verify', 'listen', 'check', 'replay', 'relay', 'inbox'] as const;
type Command = (typeof COMMANDS)[number];

const MAIN_HELP = `Usage: webhook-receiver <command> [options]

Commands:
  generate-secret     print a fresh signing secret
  sign                sign a body and print the webhook-* headers (or a curl command)
  verify              verify a captured request and explain what is wrong with it
  listen              run a local receiver that prints every delivery and its verification
  check               test a live endpoint against the standard: forged, stale, replayed deliveries
  replay              send captured deliveries (listen --record, the relay's documents) to your endpoint, re-signed
  relay               the relay's API: list deliveries, rotate a destination's signing secret, pull events
  inbox               list, retry or purge an inbox's dead letters (BullMQ or pg-boss, from a URL)

Run 'webhook-receiver <command> --help' for a command's options, 'webhook-receiver --version' for the version.
Exit codes: 0 success, 1 verification failed (or a runtime error), 2 misuse.`;

/** Each command: its help and how it runs. A `Record` over the names, so none is left out. */
const RUN: Record<Command, { help: string; run: (args: string[]) => Promise<number> }> = {
  'generate-secret': { help: GENERATE_SECRET_HELP, run: generateSecretCommand },
  sign: { help: SIGN_HELP, run: signCommand },
  verify: { help: VERIFY_HELP, run: verifyCommand },
  listen: { help: LISTEN_HELP, run: listenCommand },
  check: { help: CHECK_HELP, run: checkCommand },
  replay: { help: REPLAY_HELP, run: replayCommand },
  relay: { help: RELAY_HELP, run: (args) => (args[0] === 'pull' ? pullCommand(args.slice(1)) : relayCommand(args)) },
  inbox: { help: INBOX_HELP, run: inboxCommand },
};

/**
 * This package's version, from its package.json: two folders up from this file in the sources
 * (src/cli/), one up from the built dist/cli.mjs.
 */
function version(): string {
  for (const path of ['../package.json', '../../package.json']) {
    try {
      const { name, version: v } = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { name?: string; version: string };
      if (name === 'webhook-receiver') return v;
    } catch {
      // Not there: the other layout.
    }
  }
  throw new Error('cannot find the package.json of webhook-receiver');
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    io.err(MAIN_HELP);
    return 2;
  }
  if (command === '--help' || command === '-h' || command === 'help') return printHelp(MAIN_HELP);
  if (command === '--version' || command === '-v') {
    io.out(version());
    return 0;
  }
  if (!(COMMANDS as readonly string[]).includes(command)) {
    // Never repeated: a secret passed as the first argument would be printed.
    io.err(`webhook-receiver: unknown command (the first argument is none of ${COMMANDS.join(', ')})\n\n${MAIN_HELP}`);
    return 2;
  }
  try {
    return await RUN[command as Command].run(rest);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`webhook-receiver ${command}: ${error.message}\nRun 'webhook-receiver ${command} --help' for usage.`);
      return 2;
    }
    io.err(`webhook-receiver ${command}: ${isWebhookError(error) ? `${error.code} ${error.message}` : error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

/**
 * Once a command has answered, what it left behind may not keep the process alive: a driver still
 * waiting on a server that never answered (a connection attempt with its own, longer timer) is
 * cut off this long after. The timer is unref'd, so a process with nothing left ends at once.
 */
const LINGER_MS = 1000;

function endSoon(): void {
  setTimeout(() => process.exit(), LINGER_MS).unref();
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    endSoon();
  },
  (error: unknown) => {
    io.err(`webhook-receiver: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
    endSoon();
  },
);

/**
 * `webhook-receiver relay pull`: a trigger's events sent to a local endpoint, signed with the
 * local secret, so a laptop receives the relay's events without a public URL or a tunnel. Each
 * event is replayed as `replay --event-id` replays one (its captured headers, credentials and old
 * signatures left out, its exact body), and the cursor is saved only once every event of a batch
 * was answered 2xx (or skipped by rule): the endpoint never misses an event, and its claims answer
 * an event sent twice as a duplicate (the webhook-id is the same each time).
 */

import { escapeControlCharacters } from '../lib/encoding.ts';
import { fileCursor } from '../relay/file-cursor.ts';
import type { CursorStore } from '../relay/cursor.ts';
import { RelayError } from '../relay/index.ts';
import { triggerLoop } from '../relay/trigger-loop.ts';
import type { TriggerErrorContext } from '../relay/trigger-types.ts';
import type { TriggerEvent } from '../relay/types.ts';
import type { SecretInput } from '../secrets.ts';
import { createSigner } from '../sign.ts';
import { HTTP_TOKEN, parseRelayEvent, signReplay } from '../testing/signed-replay.ts';
import { quoted } from '../testing/recorded.ts';
import { SECRET_HELP, UsageError, asUsage, io, isLoopback, parse, printHelp, secretsFrom, wholeNumber } from './options.ts';
import { RELAY_CONNECTION_HELP, eventDocuments, refuseKeyOption, relayConnection, relayFailureText, uuidOption } from './relay.ts';
import { answerText, send } from './replay.ts';

const PULL_HELP = `Usage: webhook-receiver relay pull --trigger UUID --to URL [--secret S]... [--cursor FILE] [--once]
                                 [--include-rejected] [--method M] [--limit N] [--yes]

Pulls a trigger's events from the relay and sends each to your endpoint, signed with your secret
and a fresh timestamp, as the relay would deliver it: no public URL, no tunnel. Prints one line
per event. Events the relay would forward unsigned (verificationState unattempted) are sent
unsigned; events whose signature failed at capture are never sent (unless --include-rejected).
Each event is replayed as 'replay --event-id' replays one: its captured headers in order, without
credentials or old signatures, its exact body; its webhook-id is the one the sender captured
(else the event's id), the same on every send, so your endpoint's deduplication holds.

  --trigger UUID      the trigger to pull (the key needs triggers:read and events:read)
  --to URL            your endpoint (http:// or https://). Anything but this machine needs --yes
${SECRET_HELP.replace('a trusted secret', 'the signing secret').replace(" or 'whpk_…' to verify v1a", " or 'whsk_…' for v1a")}
  --cursor FILE       resume from the cursor in FILE, and keep it there (created if missing).
                      Saved only once every event of a batch was answered 2xx. Default: from the
                      trigger's start, remembered only while the command runs
  --once              stop when the trigger has caught up (exit 1 if an event was not answered 2xx)
                      Without it: keep polling (backing off while there is nothing), until Ctrl-C
  --include-rejected  also send events whose signature failed at capture, re-signed
  --method M          the method for events the relay did not record one for (older captures)
  --limit N           events per poll, 1 to 200 (default: the relay's)
  --yes               allow a --to that is not this machine
${RELAY_CONNECTION_HELP.replace('give up after S seconds in all (default 30)', 'seconds each call to the relay and each send may take (default 30)')}
  --help              show this help

Exit codes: 0 caught up (--once) or stopped, 1 an event was not answered 2xx or the relay failed
(--once), 2 misuse.`;

/** An event the endpoint did not answer 2xx: the batch stops there, and the cursor stays before it. */
class NotTaken extends Error {}

/** The event as the relay would forward it: which secret signs it, or why it is not sent. */
function verdict(event: TriggerEvent, includeRejected: boolean): 'signed' | 'unsigned' | 'skip' {
  if (event.verificationState === 'unattempted') return 'unsigned';
  if (event.verificationState === 'failed') return includeRejected ? 'signed' : 'skip';
  return 'signed';
}

/** A failure of the loop in a few words for a person. */
function failureText(error: unknown, context: TriggerErrorContext, seconds: number): string {
  if (error instanceof RelayError) return relayFailureText(error, seconds);
  const text = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
  return context.stage === 'cursor' ? `cannot keep the cursor: ${text}` : text;
}

export async function pullCommand(args: string[]): Promise<number> {
  refuseKeyOption(args);
  const { values } = parse('relay pull', args, {
    trigger: { type: 'string' },
    to: { type: 'string' },
    secret: { type: 'string', multiple: true },
    cursor: { type: 'string' },
    once: { type: 'boolean' },
    'include-rejected': { type: 'boolean' },
    method: { type: 'string' },
    limit: { type: 'string' },
    yes: { type: 'boolean' },
    'relay-url': { type: 'string' },
    timeout: { type: 'string' },
  });
  if (values.help) return printHelp(PULL_HELP);
  const triggerId = uuidOption(values.trigger, '--trigger');
  if (triggerId === undefined) throw new UsageError('no --trigger: pass the UUID of the trigger to pull');
  if (values.to === undefined) throw new UsageError('no --to: pass your endpoint, e.g. --to http://localhost:3000/webhooks');
  const target = URL.canParse(values.to) ? new URL(values.to) : undefined;
  if (target === undefined || (target.protocol !== 'http:' && target.protocol !== 'https:')) throw new UsageError('--to needs an http:// or https:// URL');
  if (target.username !== '' || target.password !== '') throw new UsageError('--to must not carry credentials (user:password@)');
  if (!isLoopback(target.hostname) && values.yes !== true) throw new UsageError(`${target.host} is not this machine: pulling runs its real handler. Pass --yes to send there anyway`);
  const method = values.method?.toUpperCase();
  if (method !== undefined && !HTTP_TOKEN.test(method)) throw new UsageError('--method takes an HTTP method such as POST');
  const limit = wholeNumber(values.limit, '--limit', 1, 200);
  if (values.cursor === '') throw new UsageError('--cursor takes a file name');
  const includeRejected = values['include-rejected'] === true;
  const secrets: SecretInput[] = secretsFrom(values.secret);
  // Checked before anything is pulled: messages name a secret by position, never its value.
  await asUsage(async () => createSigner(secrets));
  const { relay, seconds } = relayConnection({ 'relay-url': values['relay-url'], timeout: values.timeout });
  let saved: string | undefined;
  const cursor: CursorStore = values.cursor === undefined ? { load: async () => saved, save: async (next) => void (saved = next) } : fileCursor(values.cursor);

  let sent = 0;
  let sequence = 0;

  /** Sends one event, with a line for it either way; throws when it was not answered 2xx. */
  async function forward(event: TriggerEvent, signal: AbortSignal): Promise<void> {
    const number = ++sequence;
    const head = `#${number} ${new Date().toISOString()} event ${event.id} (${event.verificationState})`;
    const how = verdict(event, includeRejected);
    if (how === 'skip') {
      io.out(escapeControlCharacters(`${head}: skipped: its signature failed when the relay captured it, and the relay never forwards such events (--include-rejected sends it)`));
      return;
    }
    const { event: document, payload } = await eventDocuments(relay, event.id, method, AbortSignal.any([signal, AbortSignal.timeout(seconds * 1000)]));
    const source = parseRelayEvent(document, payload);
    const replay = await signReplay(source, how === 'unsigned' ? { unsigned: true, includeRejected } : { secret: secrets, includeRejected });
    const line = `${head} ${replay.method} webhook-id ${quoted(replay.id)}, ${replay.signed ? 'signed' : 'unsigned'}, ${replay.body.byteLength} bytes`;
    let answer;
    try {
      answer = await send(target!, replay, seconds * 1000);
    } catch (error) {
      const reason = (error as Error).name === 'TimeoutError' ? `no answer within ${seconds} s` : ((error as NodeJS.ErrnoException).code ?? (error as Error).message);
      io.out(escapeControlCharacters(`${line}: failed: ${reason}`));
      throw new NotTaken(`event ${event.id} got no answer (${reason})`);
    }
    io.out(escapeControlCharacters(`${line}: ${answerText(answer)} in ${Math.round(answer.ms)} ms`));
    if (answer.status < 200 || answer.status >= 300) throw new NotTaken(`event ${event.id} was answered ${answer.status}`);
    sent++;
  }

  // A misuse the loop meets (an event whose method was not recorded, and no --method) ends the command.
  let misuse: Error | undefined;
  let interrupted = false;
  const puller = triggerLoop({
    relay,
    triggerId,
    cursor,
    // Each event's documents are fetched whole (its headers are only there): inline bodies would come twice.
    wait: { inlineBodies: false, ...(limit === undefined ? {} : { limit }) },
    each: forward,
    report(error, context) {
      if (interrupted) return;
      if (error instanceof UsageError || error instanceof TypeError) {
        misuse ??= error;
        void puller.close();
        return;
      }
      const reason = failureText(error, context, seconds);
      // Without a next wait (--once), the command stops here.
      if (context.retryInMs === undefined) io.err(escapeControlCharacters(`webhook-receiver relay pull: stopped: ${reason}; the cursor stays before this batch, so the next pull sends it again`));
      else io.err(escapeControlCharacters(`webhook-receiver relay pull: ${reason}; trying this batch again in ${Math.round(context.retryInMs / 1000)} s`));
    },
  });
  const stop = () => {
    interrupted = true;
    void puller.close();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  io.out(`pulling trigger ${triggerId} into ${target.href} (signed with ${secrets.length} ${secrets.length === 1 ? 'key' : 'keys'}; cursor ${values.cursor === undefined ? 'in memory' : 'in the --cursor file'})${values.once === true ? '' : '. Ctrl-C to stop.'}`);
  let failed = false;
  try {
    if (values.once === true) {
      try {
        // Batch after batch until the trigger has caught up; the first failure stops the command.
        for (let caughtUp = false; !caughtUp; ) caughtUp = (await puller.pollOnce()).caughtUp;
      } catch {
        // Reported already; after Ctrl-C it is only the interruption.
        failed = !interrupted;
      }
    } else {
      await puller.run();
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  if (misuse !== undefined) throw new UsageError(misuse.message);
  if (failed) return 1;
  io.out(`${values.once === true && !interrupted ? 'caught up' : 'stopped'}: ${sent} ${sent === 1 ? 'event' : 'events'} sent and answered 2xx`);
  return 0;
}

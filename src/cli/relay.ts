/**
 * `webhook-receiver relay`: what a destination does with the relay's own API from a shell: list
 * its deliveries, and rotate its signing secret into a file. The relay's address comes from
 * `--relay-url` or `RELAY_URL`, its API key only from `RELAY_API_KEY`: a key on the command line
 * ends up in shell history and process lists. Every command gives up after `--timeout` seconds.
 */

import { isCredentialHeader } from '../testing/redact.ts';
import { closeSync, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { base64Encode, escapeControlCharacters } from '../lib/encoding.ts';
import { RelayError, relayClient, type RelayClient } from '../relay/index.ts';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../relay/types.ts';
import { isRelayId } from '../relay/ids.ts';
import { UsageError, io, parse, printHelp, wholeNumber } from './options.ts';

export const RELAY_CONNECTION_HELP = `  --relay-url URL     the relay's base URL (https, or http on this machine). Default: RELAY_URL
                      The API key is read from RELAY_API_KEY only (never an option: arguments
                      end up in shell history and process lists)
  --timeout S         give up after S seconds in all (default 30)`;

export const RELAY_HELP = `Usage: webhook-receiver relay deliveries [--destination UUID] [--status S]... [--since TIME]
       webhook-receiver relay rotate --destination UUID --out FILE [--force] [--print]
       webhook-receiver relay pull --trigger UUID --to URL [--secret S]... [--cursor FILE] [--once]

deliveries   Lists the relay's outbound deliveries in the relay's order: status, attempt, the
             destination's status code, the error and the next retry, and how to replay each.
  --destination UUID  only this destination's deliveries
  --status S          only deliveries in this status; repeat it (${DELIVERY_STATUSES.join(', ')})
  --since TIME        only deliveries created at or after TIME (RFC 3339, e.g. 2026-11-28T09:00:00Z,
                      or Unix seconds). Filtered here: the relay's API has no such parameter

rotate       Rotates a destination's signing secret and writes the new one to a file.
  --destination UUID  the replay destination
  --out FILE          created before the rotation, mode 0600; refused if it exists
  --force             replace an existing FILE (only once the new secret is safely written)
  --print             also print the new secret on stdout (default: only its keyId)
             The file holds one JSON object: { "destinationId", "keyId", "signingSecret" }.
             The relay shows a secret once: if the file cannot be written after the rotation,
             the secret is printed on stderr rather than lost.

pull         Pulls a trigger's events and sends each to your local endpoint, signed with your
             secret: the relay's events on this machine, without a public URL or a tunnel.
             'webhook-receiver relay pull --help' tells more.

${RELAY_CONNECTION_HELP}
  --help              show this help

Exit codes: 0 success, 1 the relay refused or could not be reached, 2 misuse.`;

const DEFAULT_TIMEOUT_SECONDS = 30;

/** The key's environment variable, named in every message that concerns it. */
const KEY_VARIABLE = 'RELAY_API_KEY';

/**
 * Refuses an API key given as an option, before the options are parsed (the parser's own
 * message would not say why), and without repeating anything that follows it.
 */
export function refuseKeyOption(args: readonly string[]): void {
  for (const arg of args) {
    if (arg === '--') return;
    if (/^--(api-key|apikey|key|relay-api-key|relay-key)(=|$)/.test(arg)) {
      throw new UsageError(`the relay's API key is read from ${KEY_VARIABLE} only, never from an option: command-line arguments end up in shell history and process lists. Set ${KEY_VARIABLE} in the environment (from your secret store) and run again`);
    }
  }
}

/** A client of the relay from `--relay-url`/`RELAY_URL` and `RELAY_API_KEY`, and the command's deadline. */
export function relayConnection(values: { 'relay-url'?: string | undefined; timeout?: string | undefined }): { relay: RelayClient; signal: AbortSignal; seconds: number } {
  const baseUrl = values['relay-url'] ?? process.env.RELAY_URL ?? '';
  if (baseUrl === '') throw new UsageError("no relay: pass --relay-url or set RELAY_URL (the relay's base URL)");
  const apiKey = process.env[KEY_VARIABLE] ?? '';
  if (apiKey === '') throw new UsageError(`no API key: set ${KEY_VARIABLE} (whk_…) in the environment`);
  const seconds = wholeNumber(values.timeout, '--timeout', 1, 3600) ?? DEFAULT_TIMEOUT_SECONDS;
  let relay: RelayClient;
  try {
    relay = relayClient({ baseUrl, apiKey, timeoutMs: Math.min(10, seconds) * 1000, retryBudgetMs: Math.floor((seconds * 1000) / 2) });
  } catch (error) {
    // The client's messages never quote the key.
    if (error instanceof TypeError || error instanceof RangeError) throw new UsageError(error.message.replace(/^relayClient: apiKey/, KEY_VARIABLE).replace(/^relayClient: baseUrl/, 'the relay URL'));
    throw error;
  }
  return { relay, signal: AbortSignal.timeout(seconds * 1000), seconds };
}

/** A relay failure as one line for a person, with what to do about the ones a person can fix. */
export function relayFailureText(error: RelayError, seconds: number): string {
  const text = error.code === 'ABORTED' ? error.message.replace('aborted by the caller', `gave up after ${seconds} s (--timeout)`) : error.message;
  const hint =
    error.code === 'UNAUTHORIZED'
      ? ` (check ${KEY_VARIABLE})`
      : error.code === 'FORBIDDEN'
        ? ` (the key in ${KEY_VARIABLE} lacks the scope this needs)`
        : error.status === 429 && error.retryAfter !== undefined
          ? ` (try again in ${error.retryAfter} s)`
          : '';
  return escapeControlCharacters(`relay error ${error.code}: ${text}${hint}`);
}

export function uuidOption(value: string | undefined, option: string): string | undefined {
  if (value === undefined) return undefined;
  // Never repeated: a value in the wrong place may be a secret.
  if (!isRelayId(value)) throw new UsageError(`${option} takes a UUID (the relay's ids are UUIDs)`);
  return value;
}

function sinceOption(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (/^[0-9]{1,12}$/.test(value)) return Number(value) * 1000;
  const at = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/i.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(at)) throw new UsageError('--since takes an RFC 3339 time (2026-11-28T09:00:00Z), a date (2026-11-28) or Unix seconds');
  return at;
}

async function deliveriesCommand(args: string[]): Promise<number> {
  refuseKeyOption(args);
  const { values } = parse('relay deliveries', args, {
    destination: { type: 'string' },
    status: { type: 'string', multiple: true },
    since: { type: 'string' },
    'relay-url': { type: 'string' },
    timeout: { type: 'string' },
  });
  if (values.help) return printHelp(RELAY_HELP);
  const destinationId = uuidOption(values.destination, '--destination');
  const statuses = values.status ?? [];
  for (const status of statuses) {
    if (!(DELIVERY_STATUSES as readonly string[]).includes(status)) throw new UsageError(`--status takes one of ${DELIVERY_STATUSES.join(', ')}`);
  }
  const since = sinceOption(values.since);
  const { relay, signal, seconds } = relayConnection(values);

  let shown = 0;
  let skipped = 0;
  try {
    for await (const delivery of relay.deliveries({ destinationId, statuses: statuses as DeliveryStatus[], signal })) {
      const created = typeof delivery.createdAt === 'string' ? Date.parse(delivery.createdAt) : Number.NaN;
      if (since !== undefined && !(created >= since)) {
        skipped++;
        continue;
      }
      shown++;
      const parts = [
        delivery.createdAt ?? '-',
        delivery.status,
        `attempt ${delivery.attempt ?? '-'}`,
        `status code ${delivery.statusCode ?? '-'}`,
        `next retry ${delivery.nextRetryAt ?? '-'}`,
        `delivery ${delivery.id}`,
        `event ${delivery.eventId}`,
        `destination ${delivery.destinationId}`,
      ];
      if (typeof delivery.error === 'string' && delivery.error !== '') parts.push(`error ${JSON.stringify(delivery.error.length > 300 ? `${delivery.error.slice(0, 300)}…` : delivery.error)}`);
      io.out(escapeControlCharacters(parts.join('  ')));
      io.out(`  replay: webhook-receiver replay --event-id ${delivery.eventId} --to <your endpoint URL>`);
    }
  } catch (error) {
    if (error instanceof RelayError) {
      io.err(`webhook-receiver relay deliveries: ${relayFailureText(error, seconds)}`);
      return 1;
    }
    throw error;
  }
  io.out(`${shown} ${shown === 1 ? 'delivery' : 'deliveries'}${since === undefined ? '' : ` created since ${new Date(since).toISOString()} (${skipped} older left out)`}`);
  if (shown > 0) {
    io.out(
      "A replay sends the event's captured body re-signed with your secret. Its webhook-id is the one the original sender captured with the event (else the event's id): the relay does not publish which webhook-id its own delivery carried, so your endpoint will not recognise a replay as a duplicate of the relay's delivery, only of an earlier replay of the same event. Make sure the handler's effects are idempotent by your own keys before replaying a delivery that may have half succeeded.",
    );
  }
  return 0;
}

/** Where the secret goes until it is safely written: the file itself, or a new file beside it with --force. */
function openOut(file: string, force: boolean): { fd: number; path: string } {
  const path = force ? join(dirname(file), `.${basename(file)}.${process.pid}.${Date.now()}.tmp`) : file;
  try {
    // Exclusive create, owner-only: never a file someone else prepared, never readable by others.
    return { fd: openSync(path, 'wx', 0o600), path };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unwritable';
    if (code === 'EEXIST') throw new UsageError('the --out file exists: pass --force to replace it (only once the new secret is written), or choose another file. Nothing was rotated');
    throw new UsageError(`cannot create the --out file (${code}). Nothing was rotated`);
  }
}

function discard(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone.
  }
}

async function rotateCommand(args: string[]): Promise<number> {
  refuseKeyOption(args);
  const { values } = parse('relay rotate', args, {
    destination: { type: 'string' },
    out: { type: 'string' },
    force: { type: 'boolean' },
    print: { type: 'boolean' },
    'relay-url': { type: 'string' },
    timeout: { type: 'string' },
  });
  if (values.help) return printHelp(RELAY_HELP);
  const destinationId = uuidOption(values.destination, '--destination');
  if (destinationId === undefined) throw new UsageError('no --destination: pass the UUID of the replay destination whose secret to rotate');
  if (values.out === undefined || values.out === '') throw new UsageError('no --out: pass the file to write the new secret to (created 0600); the relay shows it only once');
  const { relay, signal, seconds } = relayConnection(values);
  const force = values.force === true;

  // The file first: a rotation whose secret has nowhere to go would be lost.
  const out = openOut(values.out, force);
  let rotated;
  try {
    rotated = await relay.rotateSigningSecret(destinationId, { signal });
  } catch (error) {
    closeSync(out.fd);
    discard(out.path);
    if (error instanceof RelayError) {
      io.err(`webhook-receiver relay rotate: ${relayFailureText(error, seconds)}`);
      if (error.status === 0) io.err('The answer never came, so the rotation may or may not have happened; the relay shows a new secret only once. Rotate again to get a secret you hold.');
      return 1;
    }
    throw error;
  }

  const content = `${JSON.stringify({ destinationId: rotated.destinationId, keyId: rotated.keyId, signingSecret: rotated.signingSecret })}\n`;
  try {
    writeSync(out.fd, content);
    fsyncSync(out.fd);
    closeSync(out.fd);
    if (force) {
      renameSync(out.path, values.out);
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unwritable';
    // A half-written or unplaced copy is not left behind under a hidden name: the secret is shown below instead.
    if (force) discard(out.path);
    io.err(`webhook-receiver relay rotate: WARNING: the rotation happened but the secret could not be written to the --out file (${code}). The relay shows it only once, so here it is; store it now, then clear this terminal:`);
    io.err(content.trimEnd());
    return 1;
  }
  io.out(`rotated the signing secret of destination ${rotated.destinationId}: keyId ${rotated.keyId}, written to ${values.out} (mode 0600)`);
  if (values.print === true) io.out(rotated.signingSecret);
  io.out(
    [
      'Next steps:',
      `  1. Deploy the new secret now, listed first: secrets: [{ key: <new secret>, keyId: '${rotated.keyId}' }, { key: <old secret>, keyId: <old keyId> }]`,
      '     (or return both from tenantKeys). The relay says old and new keys may both validate during an overlap whose length it does not publish:',
      '     deliveries may carry only the new signature at any time from now on.',
      `  2. Watch which keyId matches (webhook.keyId, onOutcome's keyId, the webhook.verified metric): once nothing matches the old one any more, remove it.`,
      `  3. Delete ${values.out} once the secret is in your secret store.`,
    ].join('\n'),
  );
  return 0;
}

/** `webhook-receiver relay <deliveries|rotate>` (`pull` is `relay-pull.ts`'s, which builds on this module). */
export async function relayCommand(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined || sub === '--help' || sub === '-h') {
    if (sub === undefined) {
      io.err(RELAY_HELP);
      return 2;
    }
    return printHelp(RELAY_HELP);
  }
  if (sub === 'deliveries') return deliveriesCommand(rest);
  if (sub === 'rotate') return rotateCommand(rest);
  // Not repeated: a secret may have been typed here.
  throw new UsageError('unknown relay command: deliveries, rotate or pull');
}

/** A captured event's two documents, as `parseRelayEvent` takes them, and the headers left out. */
interface EventDocuments {
  event: { id: string; method: string; headers: [string, string][]; contentType: string | null; payloadBytes: number };
  payload: { contentType: string | null; bytes: number; bodyBase64: string };
  dropped: string[];
}

/**
 * The event `eventId` and its raw body from the relay, as the documents `parseRelayEvent` takes,
 * with credential and signature headers left out. A `method` of null (an older row: the relay did
 * not record it) needs `method` from the caller: it must not be read as POST.
 */
export async function relayEventDocuments(
  eventId: string,
  method: string | undefined,
  values: { 'relay-url'?: string | undefined },
): Promise<EventDocuments> {
  const id = uuidOption(eventId, '--event-id')!;
  const { relay, signal, seconds } = relayConnection({ 'relay-url': values['relay-url'] });
  try {
    return await eventDocuments(relay, id, method, signal);
  } catch (error) {
    if (error instanceof RelayError) throw new Error(relayFailureText(error, seconds));
    throw error;
  }
}

/** {@link relayEventDocuments} with a client already made: `replay --event-id` and `relay pull` share it. */
export async function eventDocuments(
  relay: RelayClient,
  id: string,
  method: string | undefined,
  signal: AbortSignal,
): Promise<EventDocuments> {
  const event = await relay.event(id, { signal });
  const payload = await relay.payload(id, { signal });
  if (event.method === null && method === undefined) {
    throw new UsageError('the relay did not record this event\'s method (an older capture): pass --method (e.g. --method POST) to say which to replay it with; nothing was sent');
  }
  if (event.method !== null && method !== undefined && event.method.toUpperCase() !== method.toUpperCase()) {
    throw new UsageError(`the relay recorded this event's method as ${event.method}: --method is only for events whose method was not recorded; nothing was sent`);
  }
  const dropped: string[] = [];
  const headers = event.headers.filter(([name]) => {
    // The relay keeps a capture's headers unscrubbed: the sender's credentials and signatures
    // are in them, and are never sent again (the rule recordings follow).
    if (!isCredentialHeader(name)) return true;
    if (!dropped.includes(name.toLowerCase())) dropped.push(name.toLowerCase());
    return false;
  });
  return {
    event: { id: event.id, method: event.method ?? method!, headers, contentType: event.contentType, payloadBytes: payload.body.byteLength },
    payload: { contentType: payload.contentType, bytes: payload.body.byteLength, bodyBase64: base64Encode(payload.body) },
    dropped,
  };
}

/**
 * `webhook-receiver replay`: send captured deliveries (a `listen --record` file, or the
 * relay's event and payload documents) to your own endpoint, re-signed with your local secret and
 * a fresh timestamp, headers in their captured order with repeats kept (`node:http` with a raw
 * header array: Fetch's `Headers` would join repeats and sort the names).
 */

import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { escapeControlCharacters } from '../lib/encoding.ts';
import type { SecretInput } from '../secrets.ts';
import { createSigner } from '../sign.ts';
import { HTTP_TOKEN, parseCapturedDelivery, parseRelayEvent, recordedRejection, signReplay, type CapturedDelivery, type ReplaySource, type SignedReplay } from '../testing/signed-replay.ts';
import { quoted } from '../testing/recorded.ts';
import { refuseKeyOption, relayEventDocuments } from './relay.ts';
import { SECRET_HELP, UsageError, asUsage, io, isLoopback, parse, printHelp, secretsFrom, wholeNumber } from './options.ts';

export const REPLAY_HELP = `Usage: webhook-receiver replay --to URL (--from FILE [--id ID | --last N] | --event FILE --payload FILE
                              | --event-id UUID [--relay-url URL])
                              [--secret S]... [--unsigned] [--new-id] [--drop-header NAME]...
                              [--include-rejected] [--method M] [--timeout S] [--yes]

Sends captured deliveries to your endpoint again: the same body bytes, the same headers in their
captured order (repeats kept), re-signed with your secret and a fresh webhook-timestamp. Prints
each answer (status, the error envelope's error and message, time taken).

Where the deliveries come from (one of):
  --from FILE         a file written by 'webhook-receiver listen --record FILE': every line, or
    --id ID           only the last line whose webhook-id (or svix-id) is ID
    --last N          only the last N lines
  --event FILE        the relay's event view (GET /v1/events/{eventId}) saved as JSON, with
  --payload FILE      its payload envelope (GET /v1/events/{id}/payload): { contentType, bytes,
                      bodyBase64 }; bytes must equal the decoded length, else nothing is sent
  --event-id UUID     the event fetched from the relay's API (RELAY_URL or --relay-url, and
                      RELAY_API_KEY from the environment only), its body length checked. Its
                      captured credential headers (authorization, cookie, x-api-key…) and
                      signatures (webhook-signature, svix-signature, stripe-signature…) are left out
    --relay-url URL   the relay's base URL, instead of RELAY_URL

Options:
  --to URL            where to send them (http:// or https://). Anything but this machine needs
                      --yes: replaying runs the endpoint's real handler
${SECRET_HELP.replace('a trusted secret', 'the signing secret').replace(" or 'whpk_…' to verify v1a", " or 'whsk_…' for v1a")}
  --unsigned          send without a signature (as the relay forwards unattempted events);
                      never implied by a missing secret
  --new-id            a fresh webhook-id for each delivery. Default: the captured webhook-id (or
                      svix-id), else the relay event's id, else a fresh one; kept, so the endpoint's
                      deduplication answers a second replay as a duplicate
  --drop-header NAME  leave this captured header out; repeat it. Always left out: the captured
                      webhook-*/svix-* signing headers (replaced), host, connection, content-length,
                      transfer-encoding, content-encoding (the bytes are decoded) and other
                      hop-by-hop headers, and every credential: authorization, cookie, x-api-key,
                      other senders' signatures (stripe-signature, x-hub-signature-256…), any
                      header recorded as [redacted]
  --include-rejected  also replay captures that failed verification when captured (listen's
                      verdict, the relay's verificationState "failed"). Skipped by default, and
                      listed with the reason: re-signed with your secret, a forgery would pass
  --method M          the method for a capture that did not record one (the relay's older
                      events have method null, never to be read as POST); a recorded method is kept
  --timeout S         seconds each request may take (default 10)
  --yes               allow a --to that is not this machine
  --help              show this help

Exit codes: 0 every answer was 2xx, 1 an answer was not 2xx, the endpoint could not be reached,
or every chosen capture was skipped, 2 misuse or a malformed recording or document (then nothing
is sent).`;

const ANSWER_BODY_MAX_BYTES = 64 * 1024;

/** Reads a file for the command, as a usage error naming the option when it cannot. */
function readInput(file: string, option: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read the file given with ${option}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  }
}

/** The first value of a header in a line not yet checked, for choosing lines by id. */
function lineHeader(record: Record<string, unknown>, name: string): string | undefined {
  if (!Array.isArray(record.headers)) return undefined;
  for (const pair of record.headers as unknown[]) {
    if (Array.isArray(pair) && typeof pair[0] === 'string' && pair[0].toLowerCase() === name && typeof pair[1] === 'string') return pair[1];
  }
  return undefined;
}

/** A chosen capture: what is sent, or why it is not. */
type Chosen = { source: ReplaySource; where: string } | { skipped: string; where: string };

/** How a chosen capture is named in the output: where it is, and its webhook-id when it has one. */
function named(where: string, id: string | undefined): string {
  return id === undefined ? where : `${where} (webhook-id ${quoted(id)})`;
}

/** Re-reads a check's `TypeError` as misuse: the input is malformed, and nothing was sent. */
function checked<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(`${error.message}; nothing was sent`);
    throw error;
  }
}

/**
 * Deliveries from a recording: every line must be a JSON object, and the lines chosen are checked
 * in full before anything is sent (a line whose body was not kept blocks only its own replay). A
 * line `listen` refused is skipped, unless `includeRejected`: then it is checked like the others.
 */
function fromRecording(file: string, id: string | undefined, last: number | undefined, includeRejected: boolean): Chosen[] {
  const lines: { record: Record<string, unknown>; where: string }[] = [];
  const text = readInput(file, '--from').split('\n');
  for (let index = 0; index < text.length; index++) {
    const line = text[index]!;
    if (line.trim() === '') continue;
    const where = `--from line ${index + 1}`;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      throw new UsageError(`${where} is not JSON; nothing was sent`);
    }
    if (typeof record !== 'object' || record === null || Array.isArray(record)) throw new UsageError(`${where} is not a JSON object; nothing was sent`);
    lines.push({ record: record as Record<string, unknown>, where });
  }
  if (lines.length === 0) throw new UsageError('the --from file holds no recorded deliveries');
  let chosen = last === undefined ? lines : lines.slice(-last);
  if (id !== undefined) {
    const idOf = (record: Record<string, unknown>) => lineHeader(record, 'webhook-id') ?? lineHeader(record, 'svix-id');
    let match: (typeof lines)[number] | undefined;
    for (let at = lines.length - 1; at >= 0 && match === undefined; at--) if (idOf(lines[at]!.record) === id) match = lines[at];
    // The id is not repeated: a value in the wrong place may be a secret.
    if (match === undefined) throw new UsageError('no recorded delivery in the --from file carries the webhook-id given with --id');
    chosen = [match];
  }
  return chosen.map(({ record, where }): Chosen => {
    const rejected = checked(() => recordedRejection(record, where));
    // Skipped before the rest is checked: a refused line's body may not even have been kept.
    if (rejected !== undefined && !includeRejected) return { skipped: rejected.reason, where: named(where, lineHeader(record, 'webhook-id') ?? lineHeader(record, 'svix-id')) };
    return { source: checked(() => parseCapturedDelivery(record as unknown as CapturedDelivery, where)), where };
  });
}

function fromRelay(eventFile: string, payloadFile: string, includeRejected: boolean): Chosen {
  const event = readInput(eventFile, '--event');
  const payload = readInput(payloadFile, '--payload');
  const source = checked(() => parseRelayEvent(event, payload));
  const where = named('the relay event', source.eventId);
  return source.rejected !== undefined && !includeRejected ? { skipped: source.rejected.reason, where } : { source, where };
}

/** An event fetched from the relay by id, credential and signature headers left out (and said so). */
async function fromRelayById(eventId: string, method: string | undefined, relayUrl: string | undefined, includeRejected: boolean): Promise<Chosen> {
  const { event, payload, dropped } = await relayEventDocuments(eventId, method?.toUpperCase(), { 'relay-url': relayUrl });
  if (dropped.length > 0) io.out(`left out the captured ${dropped.join(', ')} (credentials and old signatures are not sent again)`);
  const source = checked(() => parseRelayEvent(event, payload));
  const where = named('the relay event', source.eventId);
  return source.rejected !== undefined && !includeRejected ? { skipped: source.rejected.reason, where } : { source, where };
}

interface Answer {
  status: number;
  contentType: string | undefined;
  body: Uint8Array;
  ms: number;
}

/** Sends one replay through `node:http`: the headers as a raw array, so order and repeats stay. */
export function send(target: URL, replay: SignedReplay, timeoutMs: number): Promise<Answer> {
  const raw: string[] = ['host', target.host];
  for (const [name, value] of replay.headers) raw.push(name, value);
  raw.push('content-length', String(replay.body.byteLength));
  const started = performance.now();
  return new Promise<Answer>((resolve, reject) => {
    const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(
      target,
      { method: replay.method, headers: raw, agent: false, signal: AbortSignal.timeout(timeoutMs) },
      (response: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        response.on('data', (chunk: Buffer) => {
          // Only the start of an answer is shown: a large one is read to the end, not kept.
          if (kept < ANSWER_BODY_MAX_BYTES) chunks.push(chunk);
          kept += chunk.byteLength;
        });
        response.on('error', reject);
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            contentType: response.headers['content-type'],
            body: new Uint8Array(Buffer.concat(chunks)),
            ms: performance.now() - started,
          }),
        );
      },
    );
    request.on('error', reject);
    request.end(replay.body);
  });
}

/** The answer in a few words: a duplicate, the error envelope's code and message, or nothing more. */
export function answerText(answer: Answer): string {
  const text = new TextDecoder().decode(answer.body.subarray(0, ANSWER_BODY_MAX_BYTES));
  let envelope: unknown;
  try {
    envelope = /json/i.test(answer.contentType ?? '') ? JSON.parse(text) : undefined;
  } catch {
    envelope = undefined;
  }
  const record = typeof envelope === 'object' && envelope !== null ? (envelope as Record<string, unknown>) : {};
  if (record.duplicate === true) return `${answer.status} duplicate`;
  if (typeof record.error === 'string') {
    const message = typeof record.message === 'string' ? `: ${record.message.length > 300 ? `${record.message.slice(0, 300)}…` : record.message}` : '';
    return `${answer.status} ${record.error}${message}`;
  }
  return String(answer.status);
}

const ID_SOURCE: Record<SignedReplay['idSource'], string> = {
  captured: 'captured',
  event: "the relay event's id",
  fresh: 'fresh: none captured',
  new: 'new: --new-id',
};

/** Exit codes: 0 every answer was 2xx, 1 one was not (or no answer came). */
export async function replayCommand(args: string[]): Promise<number> {
  refuseKeyOption(args);
  const { values } = parse('replay', args, {
    'event-id': { type: 'string' },
    'relay-url': { type: 'string' },
    to: { type: 'string' },
    from: { type: 'string' },
    id: { type: 'string' },
    last: { type: 'string' },
    event: { type: 'string' },
    payload: { type: 'string' },
    secret: { type: 'string', multiple: true },
    unsigned: { type: 'boolean' },
    'new-id': { type: 'boolean' },
    'drop-header': { type: 'string', multiple: true },
    'include-rejected': { type: 'boolean' },
    method: { type: 'string' },
    timeout: { type: 'string' },
    yes: { type: 'boolean' },
  });
  if (values.help) return printHelp(REPLAY_HELP);

  if (values.to === undefined) throw new UsageError('no --to: pass the URL to send the deliveries to, e.g. --to http://127.0.0.1:3000/webhooks');
  const target = URL.canParse(values.to) ? new URL(values.to) : undefined;
  if (target === undefined || (target.protocol !== 'http:' && target.protocol !== 'https:')) throw new UsageError('--to needs an http:// or https:// URL');
  // Printed on every line: a URL with credentials would print them.
  if (target.username !== '' || target.password !== '') throw new UsageError('--to must not carry credentials (user:password@)');
  if (!isLoopback(target.hostname) && values.yes !== true) {
    throw new UsageError(`${target.host} is not this machine: replaying runs its real handler. Pass --yes to send there anyway`);
  }

  const fromFile = values.from !== undefined;
  const fromRelayDocs = values.event !== undefined || values.payload !== undefined;
  const fromRelayId = values['event-id'] !== undefined;
  if (fromFile && fromRelayDocs) throw new UsageError('pass either --from FILE or --event FILE --payload FILE, not both');
  if (fromRelayId && (fromFile || fromRelayDocs)) throw new UsageError('--event-id fetches the event from the relay: pass it without --from, --event or --payload');
  if (!fromRelayId && values['relay-url'] !== undefined) throw new UsageError('--relay-url goes with --event-id');
  if (!fromFile && !fromRelayDocs && !fromRelayId) throw new UsageError('nothing to replay: pass --from FILE (a listen --record file), --event FILE --payload FILE (the relay\'s documents) or --event-id UUID (fetched from the relay)');
  if (fromRelayDocs && (values.event === undefined || values.payload === undefined)) throw new UsageError('--event and --payload go together: the event view and its payload envelope');
  if (!fromFile && (values.id !== undefined || values.last !== undefined)) throw new UsageError('--id and --last choose lines of a --from file');
  if (values.id !== undefined && values.last !== undefined) throw new UsageError('pass either --id or --last, not both');
  if (values.id === '') throw new UsageError('--id must not be empty');
  const last = wholeNumber(values.last, '--last', 1, 1_000_000);
  const timeoutMs = (wholeNumber(values.timeout, '--timeout', 1, 600) ?? 10) * 1000;
  const dropHeaders = values['drop-header'] ?? [];
  for (const name of dropHeaders) if (!HTTP_TOKEN.test(name)) throw new UsageError('--drop-header takes a header name');
  const method = values.method;
  if (method !== undefined && !HTTP_TOKEN.test(method)) throw new UsageError('--method takes an HTTP method such as POST');
  const includeRejected = values['include-rejected'] === true;

  // Signed unless --unsigned says otherwise; a forgotten secret is an error, never an unsigned replay.
  let secrets: SecretInput[] | undefined;
  if (values.unsigned === true) {
    if (values.secret !== undefined) throw new UsageError('pass either --secret or --unsigned, not both');
  } else {
    const configured = values.secret !== undefined || (process.env.WEBHOOK_SECRET ?? '').trim() !== '';
    if (!configured) throw new UsageError('no secret: pass --secret or set WEBHOOK_SECRET (comma-separated for several); to send without a signature, pass --unsigned');
    secrets = secretsFrom(values.secret);
    // Checked now, before anything is sent: messages name the secret by position, never its value.
    await asUsage(async () => createSigner(secrets!));
  }

  const chosen = fromFile
    ? fromRecording(values.from!, values.id, last, includeRejected)
    : fromRelayId
      ? [await fromRelayById(values['event-id']!, method, values['relay-url'], includeRejected)]
      : [fromRelay(values.event!, values.payload!, includeRejected)];
  const sources: ReplaySource[] = [];
  const skipped: string[] = [];
  for (const capture of chosen) {
    if ('skipped' in capture) {
      skipped.push(`skipped ${capture.where}: ${capture.skipped}`);
      continue;
    }
    // Never read as POST: the method must be told (checked for every capture before any is sent).
    if (capture.source.method === null && method === undefined) {
      throw new UsageError(`${capture.where} has no method (null: not recorded): pass --method to say which to send; nothing was sent`);
    }
    sources.push(capture.source);
  }
  for (const line of skipped) io.out(escapeControlCharacters(line));
  const skipNote = skipped.length === 0 ? '' : `; ${skipped.length} skipped: refused when captured (--include-rejected replays them)`;
  if (sources.length === 0) {
    io.out(`nothing replayed${skipNote}`);
    return 1;
  }
  const count = sources.length;
  io.out(
    `replaying ${count} ${count === 1 ? 'delivery' : 'deliveries'} to ${target.href} (${secrets === undefined ? 'unsigned' : `signed with ${secrets.length} ${secrets.length === 1 ? 'key' : 'keys'}`}; ${values['new-id'] === true ? 'new ids' : 'ids kept'})`,
  );
  let succeeded = 0;
  for (const [index, source] of sources.entries()) {
    // Signed just before it is sent: the timestamp is fresh for each one, however slow the others.
    const replay = await signReplay(source, {
      secret: secrets,
      unsigned: secrets === undefined,
      newId: values['new-id'] === true,
      dropHeaders,
      includeRejected,
      ...(method === undefined ? {} : { method }),
    });
    const rejected = source.rejected === undefined ? '' : `, refused when captured (${source.rejected.code})`;
    const head = `#${index + 1} ${replay.method} webhook-id ${quoted(replay.id)} (${ID_SOURCE[replay.idSource]}), ${replay.body.byteLength} bytes${rejected}`;
    try {
      const answer = await send(target, replay, timeoutMs);
      if (answer.status >= 200 && answer.status < 300) succeeded++;
      io.out(escapeControlCharacters(`${head}: ${answerText(answer)} in ${Math.round(answer.ms)} ms`));
    } catch (error) {
      const reason = (error as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : ((error as NodeJS.ErrnoException).code ?? (error as Error).message);
      io.out(escapeControlCharacters(`${head}: failed: ${reason}`));
    }
  }
  io.out(`${succeeded} of ${count} answered 2xx${skipNote}`);
  return succeeded === count ? 0 : 1;
}

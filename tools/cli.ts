#!/usr/bin/env node
/**
 * The `webhook-receiver` command: make secrets, sign a request, verify a captured one, run a
 * local receiver that shows every delivery as it arrives, and check a live endpoint against the
 * standard (issue 16). Secrets come from `--secret` or from
 * `WEBHOOK_SECRET` (comma-separated), so they can stay out of shell history; none is ever printed,
 * except by `generate-secret`, whose output is the point.
 *
 * Exit codes: 0 success, 1 a failed verification or a runtime failure, 2 misuse.
 */

import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { concatChunks, escapeControlCharacters } from '../src/encoding.ts';
import { isWebhookError } from '../src/errors.ts';
import { errorResponse } from '../src/http.ts';
import type { SecretInput } from '../src/secrets.ts';
import { generateKeyPair, generateSecret, signWebhook } from '../src/sign.ts';
import { WebhookAssertionError, assertSignedWebhook, explainVerificationFailure } from '../src/testing/assert.ts';
import { CHECK_CASES, checkEndpoint, formatCheckReport, isJsonText, shellQuote, type CheckCaseId } from '../src/testing/check.ts';
import { keyLabel } from '../src/testing/diagnose.ts';
import { bodyText, describeBody } from '../src/testing/recorded.ts';
import { startWebhookServer, type Answer, type IncomingDelivery } from './test-receiver.ts';
import { openRecording, type Recording } from '../src/cli/record.ts';
import { replayCommand, replayHelp } from '../src/cli/replay.ts';

/** Misuse: a clear message and exit code 2. */
class UsageError extends Error {
  constructor(message: string, readonly command?: string) {
    super(message);
  }
}

const COMMANDS = ['generate-secret', 'sign', 'verify', 'listen', 'check', 'replay'] as const;
type Command = (typeof COMMANDS)[number];

const SECRET_HELP = `  --secret S          a trusted secret ('whsec_…', base64, or 'whpk_…' to verify v1a); repeat it
                      for several. Default: WEBHOOK_SECRET, comma-separated for several (prefer it:
                      command-line arguments end up in shell history and process lists)`;

const HELP: Record<Command | 'main', string> = {
  main: `Usage: webhook-receiver <command> [options]

Commands:
  generate-secret     print a fresh signing secret
  sign                sign a body and print the webhook-* headers (or a curl command)
  verify              verify a captured request and explain what is wrong with it
  listen              run a local receiver that prints every delivery and its verification
  check               test a live endpoint against the standard: forged, stale, replayed deliveries
  replay              send captured deliveries (listen --record, the relay's documents) to your endpoint, re-signed

Run 'webhook-receiver <command> --help' for a command's options, 'webhook-receiver --version' for the version.
Exit codes: 0 success, 1 verification failed (or a runtime error), 2 misuse.`,
  'generate-secret': `Usage: webhook-receiver generate-secret [--asymmetric]

Prints a fresh v1 secret: 'whsec_' and the base64 of 32 random bytes.

Options:
  --asymmetric        print a v1a Ed25519 key pair instead, one per line:
                      'secret-key: whsk_…' (for the sender), 'public-key: whpk_…' (for receivers)
  --help              show this help`,
  sign: `Usage: webhook-receiver sign [--secret S] [--id ID] [--timestamp SECONDS]
                            [--body TEXT | --body-file FILE | < stdin] [--curl URL]

Signs a body the way a Standard Webhooks sender does and prints the headers to send,
one 'name: value' per line.

Options:
${SECRET_HELP.replace('a trusted secret', 'a signing secret').replace(" or 'whpk_…' to verify v1a", " or 'whsk_…' for v1a")}
  --id ID             webhook-id (default: a fresh msg_… id)
  --timestamp S       webhook-timestamp in Unix seconds (default: now)
  --body TEXT         the body, as UTF-8 text
  --body-file FILE    the body, the file's exact bytes
                      (with neither, the body is read from stdin)
  --curl URL          print a ready curl command that sends the signed request to URL
                      (content-type application/json for a JSON body, else application/octet-stream)
  --help              show this help`,
  verify: `Usage: webhook-receiver verify [--secret S]... --header 'NAME: VALUE'...
                              [--body-file FILE | --body TEXT | < stdin] [--tolerance S] [--now S]

Verifies a captured request. Prints what matched, or what is wrong and which usual sender bug
explains it. Exit code 0 when it verifies, 1 when it does not.

Options:
${SECRET_HELP}
  --header 'N: V'     a request header as captured; repeat it (webhook-id, webhook-timestamp,
                      webhook-signature, or their svix-* names)
  --body-file FILE    the body, the file's exact bytes
  --body TEXT         the body, as UTF-8 text (with neither, the body is read from stdin)
  --tolerance S       accepted timestamp distance in seconds (default 300)
  --now S             check as if the clock read these Unix seconds (for an old capture)
  --help              show this help`,
  listen: `Usage: webhook-receiver listen [--secret S]... [--port P] [--forward URL] [--record FILE]
                              [--max-body-bytes N]

Runs a receiver on http://127.0.0.1:P that prints every delivery as it arrives, with its
verification outcome (and the diagnosis when it fails). Verified deliveries are answered 204, or
forwarded; failed ones get the error envelope and status a real receiver sends. Stop with Ctrl-C.

Options:
${SECRET_HELP}
  --port P            the port (default: a free one; the URL is printed on start)
  --forward URL       send verified deliveries on to URL (your app) and answer with its status
  --record FILE       append every delivery to FILE, one JSON line each (method, path, headers in
                      order, contentType, bytes, bodyBase64, receivedAt, status, verification), for
                      'webhook-receiver replay'. Created with mode 0600: it holds real payloads
  --max-body-bytes N  the largest body read and recorded (default 1048576); a larger one is
                      answered 413 and recorded without its body
  --help              show this help`,
  check: `Usage: webhook-receiver check URL [--secret S]... [--json] [--tolerance S] [--unsigned accept]
                             [--body-file FILE] [--print-curl] [--only CASES] [--skip CASES]
                             [--timeout S] [--concurrency N] [--yes]

Sends a battery of deliveries to a live endpoint (valid, rotated, forged, stale, replayed) and
prints, for each case, what a conforming receiver answers, what came back, and a verdict.
Every delivery carries a webhook-id starting msg_check_; the valid ones run the endpoint's
real handler. The URL must not carry credentials (user:password@).

Options:
${SECRET_HELP.replace('a trusted secret', "the endpoint's signing secret").replace(" or 'whpk_…' to verify v1a", " or 'whsk_…' for v1a").replace('for several.', 'for several, current first, to test rotation.')}
  --json              print the report as JSON (with each case's curl command only with --print-curl)
  --tolerance S       the endpoint's timestamp tolerance in seconds (default 300): the stale
                      cases step 60 s past it
  --unsigned accept   the endpoint is meant to accept unsigned deliveries
  --body-file FILE    send this file (your app's own event) as the valid payload
  --print-curl        print each case as a curl command (signed headers only, never a secret)
  --only CASES        run only these cases, comma-separated (valid always runs)
  --skip CASES        leave these cases out, comma-separated
  --timeout S         seconds each request may take (default 10)
  --concurrency N     copies sent at once by the concurrent case (default 5)
  --yes               allow a target that is not this machine (the valid deliveries run its handler)
  --help              show this help

Cases: ${CHECK_CASES.map((c) => c.id).join(', ')}

Exit codes: 0 every security case passed, 1 a security case failed or the endpoint could not be
reached, 2 misuse.`,
  replay: replayHelp(SECRET_HELP),
};

interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

const io: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

function parse<T extends NonNullable<ParseArgsConfig['options']>>(command: Command, args: string[], options: T, allowPositionals = false) {
  try {
    return parseArgs({ args, options: { ...options, help: { type: 'boolean' } }, strict: true, allowPositionals });
  } catch (error) {
    const code = (error as { code?: string }).code;
    // Never echo a stray argument: it may be a secret passed without --secret.
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') throw new UsageError('unexpected argument: options start with --, values follow their option', command);
    // Node's message for an unknown option repeats the argument whole ('--timestamp=…' included).
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError('unknown option: see the options below', command);
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_')) throw new UsageError(optionOnly((error as Error).message.split('\n')[0]!), command);
    throw error;
  }
}

/** An option error with any quoted value cut out: `Option '--port <value>' argument missing` stays. */
function optionOnly(message: string): string {
  return message.replace(/'(--?[A-Za-z0-9-]+)[= ][^']*'/g, "'$1'");
}

/** This package's version, from its package.json (one level up from tools/ and from dist/). */
function version(): string {
  const { version: v } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return v;
}

function secretsFrom(given: string[] | undefined): SecretInput[] {
  const list = given !== undefined && given.length > 0 ? given : (process.env.WEBHOOK_SECRET ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (list.length === 0) throw new UsageError('no secret: pass --secret, or set WEBHOOK_SECRET (comma-separated for several)');
  return list;
}

/** Core option errors (TypeError / RangeError) name the secret by index and never contain it. */
async function asUsage<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof TypeError || error instanceof RangeError) throw new UsageError(error.message);
    throw error;
  }
}

const MAX_INPUT_BYTES = 16 * 1024 * 1024;

async function readStdin(): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of process.stdin as AsyncIterable<Uint8Array>) {
    total += chunk.byteLength;
    if (total > MAX_INPUT_BYTES) throw new UsageError(`the body on stdin is over ${MAX_INPUT_BYTES} bytes`);
    chunks.push(chunk);
  }
  return concatChunks(chunks, total);
}

/** The body from exactly one of --body, --body-file or stdin. */
async function bodyFrom(values: { body?: string | undefined; 'body-file'?: string | undefined }): Promise<{ bytes: Uint8Array; file?: string }> {
  if (values.body !== undefined && values['body-file'] !== undefined) throw new UsageError('pass either --body or --body-file, not both');
  if (values.body !== undefined) return { bytes: new TextEncoder().encode(values.body) };
  const file = values['body-file'];
  if (file !== undefined) {
    try {
      return { bytes: new Uint8Array(readFileSync(file)), file };
    } catch (error) {
      throw new UsageError(`cannot read the file given with --body-file: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`);
    }
  }
  if (process.stdin.isTTY) throw new UsageError('no body: pass --body TEXT or --body-file FILE, or pipe it on stdin');
  return { bytes: await readStdin() };
}

function seconds(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  // The value is never repeated (issue 12): it may be a secret pasted in the wrong place.
  if (/^[0-9]{13,}$/.test(value)) throw new UsageError(`${option} has ${value.length} digits: it looks like milliseconds; pass Unix seconds`);
  if (!/^[0-9]{1,12}$/.test(value)) throw new UsageError(`${option} must be Unix seconds (digits only)`);
  return Number(value);
}

/** Whether the body is JSON text, and so can be labelled `application/json`. */
function isJson(bytes: Uint8Array): boolean {
  const text = bodyText(bytes);
  return text !== undefined && isJsonText(text);
}

async function generateSecretCommand(args: string[]): Promise<number> {
  const { values } = parse('generate-secret', args, { asymmetric: { type: 'boolean' } });
  if (values.help) return help('generate-secret');
  if (values.asymmetric) {
    const pair = await generateKeyPair();
    io.out(`secret-key: ${pair.secretKey}`);
    io.out(`public-key: ${pair.publicKey}`);
  } else {
    io.out(generateSecret());
  }
  return 0;
}

async function signCommand(args: string[]): Promise<number> {
  const { values } = parse('sign', args, {
    secret: { type: 'string', multiple: true },
    id: { type: 'string' },
    timestamp: { type: 'string' },
    body: { type: 'string' },
    'body-file': { type: 'string' },
    curl: { type: 'string' },
  });
  if (values.help) return help('sign');
  const secrets = secretsFrom(values.secret);
  const timestamp = seconds(values.timestamp, '--timestamp');
  if (values.id !== undefined && values.id === '') throw new UsageError('--id must not be empty');
  let target: URL | undefined;
  if (values.curl !== undefined) {
    target = URL.canParse(values.curl) ? new URL(values.curl) : undefined;
    if (target === undefined || (target.protocol !== 'http:' && target.protocol !== 'https:')) {
      throw new UsageError('--curl needs an http:// or https:// URL');
    }
  }
  const body = await bodyFrom(values);
  const signed = await asUsage(() => signWebhook({ secret: secrets, body: body.bytes, id: values.id, timestamp }));
  const headers = Object.entries(signed.headers);
  if (target === undefined) {
    for (const [name, value] of headers) io.out(`${name}: ${value}`);
    return 0;
  }
  let data: string;
  if (body.file !== undefined) data = `--data-binary @${shellQuote(body.file)}`;
  else {
    const text = bodyText(body.bytes);
    // A shell argument cannot carry NUL, and --data-raw sends text: binary bodies need a file.
    if (text === undefined || text.includes('\0')) throw new UsageError('a binary body cannot go on a curl command line: pass it with --body-file');
    data = `--data-raw ${shellQuote(text)}`;
  }
  // Without a content-type, curl labels a --data body as a form (x-www-form-urlencoded).
  const lines = [`curl -sS -X POST ${shellQuote(target.href)}`, `-H ${shellQuote(`content-type: ${isJson(body.bytes) ? 'application/json' : 'application/octet-stream'}`)}`];
  for (const [name, value] of headers) lines.push(`-H ${shellQuote(`${name}: ${value}`)}`);
  lines.push(data);
  io.out(lines.join(' \\\n  '));
  return 0;
}

function headerPair(text: string): [string, string] {
  const colon = text.indexOf(':');
  const name = colon > 0 ? text.slice(0, colon).trim() : '';
  if (name === '' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
    throw new UsageError(`--header must look like 'name: value'`);
  }
  // HTTP strips the whitespace around a field value (RFC 9110, section 5.5).
  return [name, text.slice(colon + 1).trim()];
}

async function verifyCommand(args: string[]): Promise<number> {
  const { values } = parse('verify', args, {
    secret: { type: 'string', multiple: true },
    header: { type: 'string', multiple: true },
    body: { type: 'string' },
    'body-file': { type: 'string' },
    tolerance: { type: 'string' },
    now: { type: 'string' },
  });
  if (values.help) return help('verify');
  const secrets = secretsFrom(values.secret);
  const headers = (values.header ?? []).map(headerPair);
  if (headers.length === 0) throw new UsageError("no headers: pass the captured ones with --header 'webhook-id: …' (repeat it)");
  let toleranceSeconds: number | undefined;
  if (values.tolerance !== undefined) {
    if (!/^[0-9]{1,9}$/.test(values.tolerance) || Number(values.tolerance) === 0) throw new UsageError('--tolerance must be a positive whole number of seconds');
    toleranceSeconds = Number(values.tolerance);
  }
  const nowSeconds = seconds(values.now, '--now');
  const now = nowSeconds === undefined ? undefined : () => nowSeconds * 1000;
  const body = await bodyFrom(values);
  try {
    const webhook = await asUsage(() => assertSignedWebhook({ headers, body: body.bytes }, { secrets, toleranceSeconds, now }));
    const ago = Math.floor((now ?? Date.now)() / 1000) - Math.floor(webhook.timestamp.getTime() / 1000);
    io.out(`verified: webhook-id ${JSON.stringify(webhook.id)} with ${keyLabel(webhook.keyIndex ?? 0, webhook.keyId)} (${webhook.scheme})`);
    io.out(`  webhook-timestamp ${webhook.timestamp.toISOString()} (${ago >= 0 ? `${ago} s ago` : `${-ago} s ahead`})`);
    io.out(`  body: ${await describeBody(webhook.body)}`);
    return 0;
  } catch (error) {
    if (!(error instanceof WebhookAssertionError)) throw error;
    io.out(error.message.replace(/^expected a signed webhook, but /, 'NOT VERIFIED: '));
    return 1;
  }
}

/** Headers that describe one hop and must not be copied onto the forwarded request. */
const HOP_BY_HOP = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-connection', 'content-length', 'expect']);
const FORWARD_TIMEOUT_MS = 10_000;

async function forward(target: URL, delivery: IncomingDelivery): Promise<{ answer: Answer; line: string }> {
  const headers = new Headers();
  for (const [name, value] of delivery.headers) if (!HOP_BY_HOP.has(name.toLowerCase())) headers.append(name, value);
  try {
    const response = await fetch(target, {
      method: delivery.method,
      headers,
      body: delivery.method === 'GET' || delivery.method === 'HEAD' ? undefined : (delivery.body as Uint8Array<ArrayBuffer>),
      redirect: 'manual',
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    });
    const body = new Uint8Array(await response.arrayBuffer());
    const contentType = response.headers.get('content-type');
    return {
      answer: { status: response.status, headers: contentType === null ? {} : { 'content-type': contentType }, body },
      line: `forwarded to ${target.href}: ${response.status}`,
    };
  } catch (error) {
    const timedOut = (error as Error).name === 'TimeoutError';
    const reason = timedOut ? `no answer within ${FORWARD_TIMEOUT_MS} ms` : ((error as Error & { cause?: { code?: string } }).cause?.code ?? (error as Error).message);
    return {
      answer: { status: timedOut ? 504 : 502, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: 'FORWARD_FAILED', message: reason }) },
      line: `forwarding to ${target.href} failed: ${reason}`,
    };
  }
}

function indent(text: string): string {
  return text.split('\n').map((line) => `    ${line}`).join('\n');
}

/** Bodies over this are not diagnosed by `listen`: each candidate bug costs a hash of the body. */
export const LISTEN_DIAGNOSIS_MAX_BODY_BYTES = 64 * 1024;
/** How long `listen` spends diagnosing one failed delivery, at most. */
export const LISTEN_DIAGNOSIS_MS = 1000;

/** The delivery's block, with the diagnosis of a failed verification when it is affordable. */
async function diagnosed(delivery: IncomingDelivery, lines: string[], secrets: readonly SecretInput[]): Promise<string> {
  if (delivery.verification.ok) return lines.join('\n');
  const answered = lines.pop()!;
  if (delivery.body.byteLength > LISTEN_DIAGNOSIS_MAX_BODY_BYTES) {
    lines.push(
      `  ${delivery.verification.error.message}`,
      `  (not diagnosed: the body is ${delivery.body.byteLength} bytes, over the ${LISTEN_DIAGNOSIS_MAX_BODY_BYTES} bytes listen diagnoses)`,
    );
  } else {
    const explained = await explainVerificationFailure(delivery.verification.error, {
      headers: delivery.headers,
      body: delivery.body,
      secrets,
      toleranceSeconds: 300,
      nowMs: Date.now(),
      deadlineMs: Date.now() + LISTEN_DIAGNOSIS_MS,
    });
    lines.push(indent(explained.message));
  }
  lines.push(answered);
  return lines.join('\n');
}

async function listenCommand(args: string[]): Promise<number> {
  const { values } = parse('listen', args, {
    secret: { type: 'string', multiple: true },
    port: { type: 'string' },
    forward: { type: 'string' },
    record: { type: 'string' },
    'max-body-bytes': { type: 'string' },
  });
  if (values.help) return help('listen');
  const maxBodyBytes = wholeNumber(values['max-body-bytes'], '--max-body-bytes', 1, 1024 * 1024 * 1024);
  const secrets = secretsFrom(values.secret);
  let port = 0;
  if (values.port !== undefined) {
    if (!/^[0-9]{1,5}$/.test(values.port) || Number(values.port) > 65535) throw new UsageError('--port must be a number from 0 to 65535');
    port = Number(values.port);
  }
  let target: URL | undefined;
  if (values.forward !== undefined) {
    target = URL.canParse(values.forward) ? new URL(values.forward) : undefined;
    if (target === undefined || (target.protocol !== 'http:' && target.protocol !== 'https:')) {
      throw new UsageError('--forward needs an http:// or https:// URL');
    }
  }
  let recording: Recording | undefined;
  try {
    if (values.record !== undefined) recording = openRecording(values.record);
  } catch (error) {
    throw new UsageError(`cannot open the file given with --record: ${(error as NodeJS.ErrnoException).code ?? 'unwritable'}`);
  }
  let count = 0;
  /** Each delivery's printed block, made when it is answered and printed after. */
  const pending = new Map<number, string[]>();
  const server = await asUsage(() =>
    startWebhookServer({
      secrets,
      port,
      maxBodyBytes,
      async answer(delivery, { sequence, attempt }) {
        count++;
        const lines = [`#${sequence} ${new Date().toISOString()} ${delivery.method} ${delivery.path} (attempt ${attempt})`];
        let answer: Answer;
        if (delivery.verification.ok) {
          const webhook = delivery.verification.webhook;
          lines.push(`  verified: webhook-id ${JSON.stringify(webhook.id)} with ${keyLabel(webhook.keyIndex ?? 0, webhook.keyId)} (${webhook.scheme})`);
          lines.push(`  body: ${await describeBody(delivery.body)}`);
          if (target !== undefined) {
            const forwarded = await forward(target, delivery);
            lines.push(`  ${forwarded.line}`);
            answer = forwarded.answer;
          } else {
            answer = { status: 204 };
          }
        } else {
          // What a receiver built on this package answers (the adapters' table), at once: the
          // diagnosis runs after the answer was sent (issue 12), bounded in time and body size.
          lines.push(`  REJECTED ${delivery.verification.error.code}`);
          answer = errorResponse(delivery.verification.error);
        }
        lines.push(`  answered ${answer.status}`);
        pending.set(sequence, lines);
        return answer;
      },
      onDelivery(delivery, { sequence, receivedAt }) {
        try {
          recording?.write(delivery, receivedAt);
        } catch (error) {
          io.err(`recording delivery #${sequence} failed: ${(error as NodeJS.ErrnoException).code ?? 'write error'}`);
        }
        const lines = pending.get(sequence) ?? [];
        pending.delete(sequence);
        // Line by line: the block's own line breaks stay, any control character from the request
        // (path, id, body excerpt) is escaped.
        void diagnosed(delivery, lines, secrets).then((text) => io.out(text.split('\n').map(escapeControlCharacters).join('\n')));
      },
      onError(error) {
        io.err(escapeControlCharacters(`internal error: ${error instanceof Error ? error.message : String(error)}`));
      },
    }),
  ).catch((error: unknown) => {
    recording?.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new Error(`port ${port} is in use: pick another with --port`);
    throw error;
  });
  io.out(`listening on ${server.url} (${secrets.length} ${secrets.length === 1 ? 'key' : 'keys'}${target ? `; forwarding verified deliveries to ${target.href}` : ''}${recording ? '; recording every delivery to the --record file' : ''}). Ctrl-C to stop.`);
  if (recording?.widerMode !== undefined) io.err(`note: the --record file is readable by others (mode ${recording.widerMode.toString(8)}); it holds real payloads: chmod 600 it`);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      void server.close().then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  recording?.close();
  io.out(`stopped after ${count} ${count === 1 ? 'delivery' : 'deliveries'}`);
  return 0;
}

/** True for a host name that only this machine answers. */
function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** `--only a,b --only c`: case ids, checked by checkEndpoint (which never repeats a value). */
function caseIds(values: string[] | undefined): CheckCaseId[] | undefined {
  return values?.flatMap((value) => value.split(',')).map((id) => id.trim()).filter((id) => id !== '') as CheckCaseId[] | undefined;
}

function wholeNumber(value: string | undefined, option: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]{1,9}$/.test(value) || Number(value) < min || Number(value) > max) throw new UsageError(`${option} must be a whole number from ${min} to ${max}`);
  return Number(value);
}

/** Exit codes: 0 every security case passed, 1 a security case failed or the endpoint was not reached. */
async function checkCommand(args: string[]): Promise<number> {
  const { values, positionals } = parse(
    'check',
    args,
    {
      secret: { type: 'string', multiple: true },
      json: { type: 'boolean' },
      tolerance: { type: 'string' },
      unsigned: { type: 'string' },
      'body-file': { type: 'string' },
      'print-curl': { type: 'boolean' },
      only: { type: 'string', multiple: true },
      skip: { type: 'string', multiple: true },
      timeout: { type: 'string' },
      concurrency: { type: 'string' },
      yes: { type: 'boolean' },
    },
    true,
  );
  if (values.help) return help('check');
  // Never echo a stray argument: it may be a secret passed without --secret.
  if (positionals.length === 0) throw new UsageError('no URL: pass the endpoint to check, e.g. webhook-receiver check http://127.0.0.1:3000/webhooks');
  if (positionals.length > 1) throw new UsageError('one URL only: options start with --, values follow their option');
  const target = positionals[0]!;
  // The scheme, credentials and case ids are checkEndpoint's to refuse; only this machine is the CLI's.
  const host = URL.canParse(target) ? new URL(target) : undefined;
  if (host !== undefined && !isLoopback(host.hostname) && !values.yes) {
    throw new UsageError(`${host.host} is not this machine: the valid deliveries run its real handler (ids msg_check_…). Pass --yes to check it anyway`);
  }
  const secrets = secretsFrom(values.secret);
  if (values.unsigned !== undefined && values.unsigned !== 'accept' && values.unsigned !== 'reject') {
    throw new UsageError("--unsigned takes 'accept' (or 'reject', the default)");
  }
  const toleranceSeconds = wholeNumber(values.tolerance, '--tolerance', 1, 31_536_000);
  const timeoutSeconds = wholeNumber(values.timeout, '--timeout', 1, 120);
  const concurrency = wholeNumber(values.concurrency, '--concurrency', 2, 50);
  const body = values['body-file'] === undefined ? undefined : (await bodyFrom(values)).bytes;
  const report = await asUsage(() =>
    checkEndpoint(target, {
      secrets,
      toleranceSeconds,
      unsigned: values.unsigned as 'accept' | 'reject' | undefined,
      body,
      only: caseIds(values.only),
      skip: caseIds(values.skip),
      timeoutMs: timeoutSeconds === undefined ? undefined : timeoutSeconds * 1000,
      concurrency,
    }),
  );
  const curl = values['print-curl'] === true;
  // A row's curl command carries the whole URL, query included: printed only when asked for.
  if (values.json) io.out(JSON.stringify(report, (key, value: unknown) => (key === 'curl' && !curl ? undefined : value), 2));
  else io.out(formatCheckReport(report, { curl }));
  if (!report.reachable) {
    io.err(`webhook-receiver check: cannot reach ${report.target}: ${report.unreachableReason ?? 'no answer'}`);
    return 1;
  }
  return report.conforms ? 0 : 1;
}

function help(command: Command | 'main'): number {
  io.out(HELP[command]);
  return 0;
}

const RUN: Record<Command, (args: string[]) => Promise<number>> = {
  'generate-secret': generateSecretCommand,
  sign: signCommand,
  verify: verifyCommand,
  listen: listenCommand,
  check: checkCommand,
  replay: (args) =>
    replayCommand(args, {
      ...io,
      parse: (rest, options) => parse('replay', rest, options),
      secretsFrom,
      usage: (message) => new UsageError(message),
      isLoopback,
      help: () => help('replay'),
    }),
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    io.err(HELP.main);
    return 2;
  }
  if (command === '--help' || command === '-h' || command === 'help') return help('main');
  if (command === '--version' || command === '-v') {
    io.out(version());
    return 0;
  }
  if (!(COMMANDS as readonly string[]).includes(command)) {
    // Never repeated: a secret passed as the first argument would be printed (issue 12).
    io.err(`webhook-receiver: unknown command (the first argument is none of ${COMMANDS.join(', ')})\n\n${HELP.main}`);
    return 2;
  }
  try {
    return await RUN[command as Command](rest);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`webhook-receiver ${command}: ${error.message}\nRun 'webhook-receiver ${command} --help' for usage.`);
      return 2;
    }
    io.err(`webhook-receiver ${command}: ${isWebhookError(error) ? `${error.code} ${error.message}` : error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    io.err(`webhook-receiver: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);

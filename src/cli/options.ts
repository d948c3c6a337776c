/**
 * What the commands share: parsing their options, reading secrets and bodies, and misuse
 * reported as a clear message with exit code 2. Secrets and stray values are never repeated.
 */

import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { concatChunks } from '../lib/encoding.ts';
import type { SecretInput } from '../secrets.ts';
import { isJsonText } from '../testing/check-endpoint/cases.ts';
import { bodyText } from '../testing/recorded.ts';

/** Misuse: a clear message and exit code 2. */
export class UsageError extends Error {
  constructor(message: string, readonly command?: string) {
    super(message);
  }
}

export const SECRET_HELP = `  --secret S          a trusted secret ('whsec_…', base64, or 'whpk_…' to verify v1a); repeat it
                      for several. Default: WEBHOOK_SECRET, comma-separated for several (prefer it:
                      command-line arguments end up in shell history and process lists)`;

export interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

export const io: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** Prints a command's help; exit code 0. */
export function printHelp(text: string): number {
  io.out(text);
  return 0;
}

export function parse<T extends NonNullable<ParseArgsConfig['options']>>(command: string, args: string[], options: T, allowPositionals = false) {
  try {
    return parseArgs({ args, options: { ...options, help: { type: 'boolean' } }, strict: true, allowPositionals });
  } catch (error) {
    const code = (error as { code?: string }).code;
    // Never echo a stray argument: it may be a secret passed without --secret.
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') throw new UsageError('unexpected argument: options start with --, values follow their option', command);
    // Node's message for an unknown option repeats the argument whole ('--timestamp=…' included):
    // the option is found and named here instead, up to any '='.
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(unknownOption(args, options), command);
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_')) throw new UsageError(optionOnly((error as Error).message.split('\n')[0]!), command);
    throw error;
  }
}

/** What an option name looks like: anything else may be a secret typed after '--', and is not repeated. */
const OPTION_NAME = /^--?[a-z][a-z0-9-]{0,30}$/;

/**
 * The first argument that is not one of `options`, named up to any '=' when it looks like an option
 * name (never its value), with the nearest known option and the command's options listed.
 */
function unknownOption(args: readonly string[], options: NonNullable<ParseArgsConfig['options']>): string {
  const known = [...Object.keys(options), 'help'];
  const list = `the options are ${known.map((name) => `--${name}`).join(', ')}`;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') break;
    if (!arg.startsWith('-') || arg === '-') continue;
    const name = arg.startsWith('--') ? arg.slice(2).split('=')[0]! : arg.slice(1, 2);
    const option = arg.startsWith('--') ? options[name] : undefined;
    if (option !== undefined || (arg.startsWith('--') && name === 'help')) {
      // A string option's value follows it, unless it came with '='.
      if (option?.type === 'string' && !arg.includes('=')) i++;
      continue;
    }
    const shown = arg.startsWith('--') ? `--${name}` : `-${name}`;
    if (!OPTION_NAME.test(shown)) return `unknown option (not repeated: it does not look like an option name, and may be a value typed after '--'); ${list}`;
    const nearest = known.find((candidate) => editDistance(candidate, name) <= 2);
    return `unknown option ${shown}${nearest === undefined ? '' : ` (did you mean --${nearest}?)`}; ${list}`;
  }
  return `unknown option; ${list}`;
}

/** Levenshtein distance, for the "did you mean" of a mistyped option (short strings only). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

/** An option error with any quoted value cut out: `Option '--port <value>' argument missing` stays. */
function optionOnly(message: string): string {
  return message.replace(/'(--?[A-Za-z0-9-]+)[= ][^']*'/g, "'$1'");
}

export function secretsFrom(given: string[] | undefined): SecretInput[] {
  const list = given !== undefined && given.length > 0 ? given : (process.env.WEBHOOK_SECRET ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (list.length === 0) throw new UsageError('no secret: pass --secret, or set WEBHOOK_SECRET (comma-separated for several)');
  return list;
}

/** Core option errors (TypeError / RangeError) name the secret by index and never contain it. */
export async function asUsage<T>(run: () => Promise<T>): Promise<T> {
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
export async function bodyFrom(values: { body?: string | undefined; 'body-file'?: string | undefined }): Promise<{ bytes: Uint8Array; file?: string }> {
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

export function seconds(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  // The value is never repeated: it may be a secret pasted in the wrong place.
  if (/^[0-9]{13,}$/.test(value)) throw new UsageError(`${option} has ${value.length} digits: it looks like milliseconds; pass Unix seconds`);
  if (!/^[0-9]{1,12}$/.test(value)) throw new UsageError(`${option} must be Unix seconds (digits only)`);
  return Number(value);
}

/** Whether the body is JSON text, and so can be labelled `application/json`. */
export function isJson(bytes: Uint8Array): boolean {
  const text = bodyText(bytes);
  return text !== undefined && isJsonText(text);
}

export function wholeNumber(value: string | undefined, option: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]{1,9}$/.test(value) || Number(value) < min || Number(value) > max) throw new UsageError(`${option} must be a whole number from ${min} to ${max}`);
  return Number(value);
}

/** True for a host name that only this machine answers (`check` and `replay` need `--yes` for any other). */
export function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

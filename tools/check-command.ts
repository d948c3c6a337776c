/**
 * `webhook-receiver check URL` (issue 16): runs the conformance battery of `checkEndpoint`
 * against a live endpoint and prints one row per case. Secrets come from `--secret` or
 * `WEBHOOK_SECRET` and are never printed; `--print-curl` prints the computed headers only.
 *
 * Exit codes: 0 every security case passed, 1 a security case failed or the endpoint could not
 * be reached, 2 misuse.
 */

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { CHECK_CASES, checkEndpoint, formatCheckReport, type CheckCaseId } from '../src/testing/check.ts';

/**
 * The command's help text.
 *
 * @example
 * ```ts
 * console.log(CHECK_HELP);
 * ```
 */
export const CHECK_HELP = `Usage: webhook-receiver check URL [--secret S]... [--json] [--tolerance S] [--unsigned accept]
                             [--body-file FILE] [--print-curl] [--only CASES] [--skip CASES]
                             [--timeout S] [--concurrency N] [--yes]

Sends a battery of deliveries to a live endpoint (valid, rotated, forged, stale, replayed) and
prints, for each case, what a conforming receiver answers, what came back, and a verdict.
Every delivery carries a webhook-id starting msg_check_; the valid ones run the endpoint's
real handler.

Options:
  --secret S          the endpoint's signing secret ('whsec_…', or 'whsk_…' for v1a); repeat it
                      for several, current first, to test rotation. Default: WEBHOOK_SECRET,
                      comma-separated for several (prefer it: command-line arguments end up in
                      shell history and process lists)
  --json              print the report as JSON
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
reached, 2 misuse.`;

/**
 * Where the command writes.
 *
 * @example
 * ```ts
 * const io: CheckIo = { out: console.log, err: console.error };
 * ```
 */
export interface CheckIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

class CheckUsageError extends Error {}

/** True for a host name that only this machine answers. */
function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

function caseIds(values: string[] | undefined, option: string): CheckCaseId[] | undefined {
  if (values === undefined) return undefined;
  const known = CHECK_CASES.map((c) => c.id as string);
  const ids = values.flatMap((value) => value.split(',')).map((id) => id.trim()).filter((id) => id !== '');
  for (const id of ids) {
    if (!known.includes(id)) throw new CheckUsageError(`${option}: unknown case ${JSON.stringify(id.length > 30 ? `${id.slice(0, 30)}…` : id)}; the cases are ${known.join(', ')}`);
  }
  return ids as CheckCaseId[];
}

function wholeNumber(value: string | undefined, option: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]{1,9}$/.test(value) || Number(value) < min || Number(value) > max) throw new CheckUsageError(`${option} must be a whole number from ${min} to ${max}`);
  return Number(value);
}

async function run(args: string[], io: CheckIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
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
        help: { type: 'boolean' },
      },
    });
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_')) throw new CheckUsageError((error as Error).message.split('\n')[0]!);
    throw error;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.out(CHECK_HELP);
    return 0;
  }
  // Never echo a stray argument: it may be a secret passed without --secret.
  if (positionals.length === 0) throw new CheckUsageError('no URL: pass the endpoint to check, e.g. webhook-receiver check http://127.0.0.1:3000/webhooks');
  if (positionals.length > 1) throw new CheckUsageError('one URL only: options start with --, values follow their option');
  const given = positionals[0]!;
  const target = URL.canParse(given) ? new URL(given) : undefined;
  if (target === undefined || (target.protocol !== 'http:' && target.protocol !== 'https:')) {
    const shown = target === undefined ? 'that is not a URL' : `got ${target.protocol}`;
    throw new CheckUsageError(`check needs an http:// or https:// URL (${shown})`);
  }
  if (!isLoopback(target.hostname) && !values.yes) {
    throw new CheckUsageError(
      `${target.host} is not this machine: the valid deliveries run its real handler (ids msg_check_…). Pass --yes to check it anyway`,
    );
  }

  const fromEnv = (process.env.WEBHOOK_SECRET ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  const secrets = values.secret !== undefined && values.secret.length > 0 ? values.secret : fromEnv;
  if (secrets.length === 0) throw new CheckUsageError('no secret: pass --secret, or set WEBHOOK_SECRET (comma-separated for several)');
  if (values.unsigned !== undefined && values.unsigned !== 'accept' && values.unsigned !== 'reject') {
    throw new CheckUsageError("--unsigned takes 'accept' (or 'reject', the default)");
  }
  const toleranceSeconds = wholeNumber(values.tolerance, '--tolerance', 1, 31_536_000);
  const timeoutSeconds = wholeNumber(values.timeout, '--timeout', 1, 120);
  const concurrency = wholeNumber(values.concurrency, '--concurrency', 2, 50);
  const only = caseIds(values.only, '--only');
  const skip = caseIds(values.skip, '--skip');
  if (skip?.includes('valid')) throw new CheckUsageError('--skip: the valid case always runs; it is the baseline for every other row');

  let body: Uint8Array | undefined;
  const file = values['body-file'];
  if (file !== undefined) {
    try {
      body = new Uint8Array(readFileSync(file));
    } catch (error) {
      throw new CheckUsageError(`cannot read the body file ${JSON.stringify(file)}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  }

  let report;
  try {
    report = await checkEndpoint(target.href, {
      secrets,
      toleranceSeconds,
      unsigned: values.unsigned as 'accept' | 'reject' | undefined,
      body,
      only,
      skip,
      timeoutMs: timeoutSeconds === undefined ? undefined : timeoutSeconds * 1000,
      concurrency,
    });
  } catch (error) {
    // Option errors name a secret by its index, never by its value.
    if (error instanceof TypeError || error instanceof RangeError) throw new CheckUsageError(error.message);
    throw error;
  }

  if (values.json) io.out(JSON.stringify(report, null, 2));
  else io.out(formatCheckReport(report, { curl: values['print-curl'] === true }));
  if (!report.reachable) {
    io.err(`webhook-receiver check: cannot reach ${report.target}: ${report.unreachableReason ?? 'no answer'}`);
    return 1;
  }
  return report.conforms ? 0 : 1;
}

/**
 * Runs `webhook-receiver check` with the arguments after the command name; resolves with the
 * exit code. Misuse is reported on `io.err` with exit code 2.
 *
 * @example
 * ```ts
 * process.exitCode = await checkCommand(['http://127.0.0.1:3000/webhooks', '--json'], io);
 * ```
 */
export async function checkCommand(args: string[], io: CheckIo): Promise<number> {
  try {
    return await run(args, io);
  } catch (error) {
    if (error instanceof CheckUsageError) {
      io.err(`webhook-receiver check: ${error.message}\nRun 'webhook-receiver check --help' for usage.`);
      return 2;
    }
    io.err(`webhook-receiver check: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

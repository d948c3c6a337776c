/**
 * `webhook-receiver check`: run the conformance battery against a live endpoint and print the
 * report (or JSON).
 */

import { CHECK_CASES, checkEndpoint, formatCheckReport, type CheckCaseId } from '../testing/check-endpoint.ts';
import { SECRET_HELP, UsageError, asUsage, bodyFrom, io, isLoopback, parse, printHelp, secretsFrom, wholeNumber } from './options.ts';

export const CHECK_HELP = `Usage: webhook-receiver check URL [--secret S]... [--json] [--tolerance S] [--unsigned accept]
                             [--body-file FILE] [--print-curl] [--only CASES] [--skip CASES]
                             [--timeout S] [--concurrency N] [--unknown-tenant-url URL]
                             [--tenant URL=VARIABLE]... [--yes]

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
  --unknown-tenant-url URL
                      for an endpoint with a tenant per URL: a URL of it naming a tenant it
                      does not know; a correctly signed delivery there must get 404
  --tenant URL=VARIABLE
                      another tenant of the endpoint: its URL, and the environment variable
                      holding its secrets (comma-separated); repeat it for several. A delivery
                      signed for URL is sent to the first one's URL and must be refused, and the
                      report warns when one secret is given for several tenants
  --yes               allow a target that is not this machine (the valid deliveries run its handler)
  --help              show this help

Cases: ${CHECK_CASES.map((c) => c.id).join(', ')}

Exit codes: 0 every security case passed, 1 a security case failed or the endpoint could not be
reached, 2 misuse.`;

/** `--only a,b --only c`: case ids, checked by checkEndpoint (which never repeats a value). */
function caseIds(values: string[] | undefined): CheckCaseId[] | undefined {
  return values?.flatMap((value) => value.split(',')).map((id) => id.trim()).filter((id) => id !== '') as CheckCaseId[] | undefined;
}

/**
 * `--tenant URL=VARIABLE`: the tenant's secrets come from the environment, never from the command
 * line (shell history, process lists). Split at the last '=': a variable's name has none.
 */
function tenantFrom(value: string, index: number): { url: string; secrets: string[] } {
  const at = value.lastIndexOf('=');
  const name = at < 0 ? '' : value.slice(at + 1);
  // The value is not repeated: it may be a secret pasted where the variable's name belongs.
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new UsageError(`--tenant ${index + 1}: give URL=VARIABLE, the name of an environment variable holding that tenant's secrets`);
  const secrets = (process.env[name] ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  // Nor is the name: a secret pasted there (whsec_abc…) looks like one.
  if (secrets.length === 0) throw new UsageError(`--tenant ${index + 1}: the environment variable it names is not set (it holds that tenant's secrets, comma-separated)`);
  return { url: value.slice(0, at), secrets };
}

/** Exit codes: 0 every security case passed, 1 a security case failed or the endpoint was not reached. */
export async function checkCommand(args: string[]): Promise<number> {
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
      'unknown-tenant-url': { type: 'string' },
      tenant: { type: 'string', multiple: true },
      yes: { type: 'boolean' },
    },
    true,
  );
  if (values.help) return printHelp(CHECK_HELP);
  // Never echo a stray argument: it may be a secret passed without --secret.
  if (positionals.length === 0) throw new UsageError('no URL: pass the endpoint to check, e.g. webhook-receiver check http://127.0.0.1:3000/webhooks');
  if (positionals.length > 1) throw new UsageError('one URL only: options start with --, values follow their option');
  const target = positionals[0]!;
  const tenants = (values.tenant ?? []).map(tenantFrom);
  const unknownTenantUrl = values['unknown-tenant-url'];
  // The scheme, credentials and case ids are checkEndpoint's to refuse; only this machine is the CLI's.
  for (const url of [target, unknownTenantUrl, ...tenants.map((t) => t.url)]) {
    const host = url !== undefined && URL.canParse(url) ? new URL(url) : undefined;
    if (host !== undefined && !isLoopback(host.hostname) && !values.yes) {
      throw new UsageError(`${host.host} is not this machine: the valid deliveries run its real handler (ids msg_check_…). Pass --yes to check it anyway`);
    }
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
      unknownTenantUrl,
      tenants,
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

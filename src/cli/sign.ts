/**
 * `webhook-receiver sign`: sign a body as a Standard Webhooks sender does, and print the headers or a
 * ready curl command.
 */

import { signWebhook } from '../sign.ts';
import { shellQuote } from '../testing/check-endpoint/send.ts';
import { bodyText } from '../testing/recorded.ts';
import { SECRET_HELP, UsageError, asUsage, bodyFrom, io, isJson, parse, printHelp, secretsFrom, seconds } from './options.ts';

export const SIGN_HELP = `Usage: webhook-receiver sign [--secret S] [--id ID] [--timestamp SECONDS]
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
                      and prints the answer's status line, headers and body
                      (content-type application/json for a JSON body, else application/octet-stream)
  --help              show this help`;

export async function signCommand(args: string[]): Promise<number> {
  const { values } = parse('sign', args, {
    secret: { type: 'string', multiple: true },
    id: { type: 'string' },
    timestamp: { type: 'string' },
    body: { type: 'string' },
    'body-file': { type: 'string' },
    curl: { type: 'string' },
  });
  if (values.help) return printHelp(SIGN_HELP);
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
  // Without a content-type, curl labels a --data body as a form (x-www-form-urlencoded). `-i`
  // prints the status line and headers: a 204 has no body, and would otherwise print nothing.
  const lines = [`curl -sS -i -X POST ${shellQuote(target.href)}`, `-H ${shellQuote(`content-type: ${isJson(body.bytes) ? 'application/json' : 'application/octet-stream'}`)}`];
  for (const [name, value] of headers) lines.push(`-H ${shellQuote(`${name}: ${value}`)}`);
  lines.push(data);
  io.out(lines.join(' \\\n  '));
  return 0;
}

/**
 * `webhook-receiver verify`: verify a captured request, and explain what is wrong with it when it
 * does not verify.
 */

import { WebhookAssertionError, assertSignedWebhook } from '../testing/assert.ts';
import { keyLabel } from '../testing/diagnose.ts';
import { describeBody } from '../testing/recorded.ts';
import { SECRET_HELP, UsageError, asUsage, bodyFrom, io, parse, printHelp, secretsFrom, seconds } from './options.ts';

export const VERIFY_HELP = `Usage: webhook-receiver verify [--secret S]... --header 'NAME: VALUE'...
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
  --help              show this help`;

function headerPair(text: string): [string, string] {
  const colon = text.indexOf(':');
  const name = colon > 0 ? text.slice(0, colon).trim() : '';
  if (name === '' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
    throw new UsageError(`--header must look like 'name: value'`);
  }
  // HTTP strips the whitespace around a field value (RFC 9110, section 5.5).
  return [name, text.slice(colon + 1).trim()];
}

export async function verifyCommand(args: string[]): Promise<number> {
  const { values } = parse('verify', args, {
    secret: { type: 'string', multiple: true },
    header: { type: 'string', multiple: true },
    body: { type: 'string' },
    'body-file': { type: 'string' },
    tolerance: { type: 'string' },
    now: { type: 'string' },
  });
  if (values.help) return printHelp(VERIFY_HELP);
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

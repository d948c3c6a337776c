/**
 * `webhook-receiver generate-secret`: a fresh v1 secret, or a v1a key pair. The one command whose
 * output is a secret: that is its point.
 */

import { generateKeyPair, generateSecret } from '../sign.ts';
import { io, parse, printHelp } from './options.ts';

export const GENERATE_SECRET_HELP = `Usage: webhook-receiver generate-secret [--asymmetric]

Prints a fresh v1 secret: 'whsec_' and the base64 of 32 random bytes.

Options:
  --asymmetric        print a v1a Ed25519 key pair instead, one per line:
                      'secret-key: whsk_…' (for the sender), 'public-key: whpk_…' (for receivers)
  --help              show this help`;

export async function generateSecretCommand(args: string[]): Promise<number> {
  const { values } = parse('generate-secret', args, { asymmetric: { type: 'boolean' } });
  if (values.help) return printHelp(GENERATE_SECRET_HELP);
  if (values.asymmetric) {
    const pair = await generateKeyPair();
    io.out(`secret-key: ${pair.secretKey}`);
    io.out(`public-key: ${pair.publicKey}`);
  } else {
    io.out(generateSecret());
  }
  return 0;
}

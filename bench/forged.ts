/**
 * Section 7: what a forged request costs, per body size. An unauthenticated sender
 * chooses the signature header, so the cost that matters is the worst one it can pick:
 *
 * - `v1`: the longest header accepted (64 entries) against three HMAC secrets; each secret costs
 *   one HMAC over the body whatever the entries, then cheap comparisons;
 * - `v1a`: as many distinct well-formed `v1a` entries as the verifier will look at, against one
 *   and against three `whpk_` public keys; each pair checked costs an Ed25519 verification over
 *   the whole body.
 *
 * The baseline is the forged `v1` request of the same size, timed in the same repetitions.
 */

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { jsonBody, KiB, MiB, newSecret, nowSeconds, sizeLabel } from './fixtures.ts';
import { ratioText, table, timeSummary, type BenchConfig, type SectionReport } from './report.ts';
import { ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

function publicKey(): string {
  const raw = Buffer.from(generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!, 'base64url');
  return `whpk_${raw.toString('base64')}`;
}

function entries(version: 'v1' | 'v1a', count: number, bytes: number): string {
  return Array.from({ length: count }, () => {
    const signature = randomBytes(bytes);
    // An Ed25519 signature whose S is not below the group order is refused before the body is
    // hashed; a forger who wants the expensive path keeps S small, so the bench does too.
    if (version === 'v1a') signature[63]! &= 0x0f;
    return `${version},${signature.toString('base64')}`;
  }).join(' ');
}

/** Keeps results alive (a module variable is never optimised away). */
let sink: unknown;

export async function runForged(config: BenchConfig): Promise<SectionReport> {
  const { createVerifier, isWebhookError } = config.pkg.index;
  const v1Keys = [newSecret().secret, newSecret().secret, newSecret().secret];
  const oneEd = [publicKey()];
  const threeEd = [publicKey(), publicKey(), publicKey()];
  // The most distinct v1a entries a header could carry before the verifier refused it, when every
  // entry was checked; now every entry past the bound is left unchecked, so 8 still shows the full
  // cost.
  const V1A_ENTRIES = 8;
  const sizes = config.quick ? [KiB] : [KiB, 64 * KiB, MiB];
  const rows: string[][] = [];

  for (const size of sizes) {
    const body = jsonBody(size);
    const id = `msg_${randomBytes(8).toString('hex')}`;
    const forged = (secrets: string[], signature: string): Candidate['run'] => {
      const verifier = createVerifier({ secrets });
      const headers = { 'webhook-id': id, 'webhook-timestamp': String(nowSeconds()), 'webhook-signature': signature };
      return async (n) => {
        for (let i = 0; i < n; i++) {
          const error = await verifier.verify({ headers, body }).then(
            () => undefined,
            (e: unknown) => e,
          );
          if (!isWebhookError(error)) throw new Error('a forged request passed, or failed without a WebhookError');
          sink = error.code;
        }
      };
    };
    const candidates: Candidate[] = [
      { name: 'v1', run: forged(v1Keys, entries('v1', 64, 32)) },
      { name: 'v1a, 1 key', run: forged(oneEd, entries('v1a', V1A_ENTRIES, 64)) },
      { name: 'v1a, 3 keys', run: forged(threeEd, entries('v1a', V1A_ENTRIES, 64)) },
    ];
    const timings = await timeInterleaved(candidates, {
      reps: config.quick ? 2 : 5,
      rounds: config.quick ? 2 : size >= MiB ? 5 : 11,
      batchMs: size >= MiB ? 40 : 5,
      warmupMs: config.quick ? 10 : 100,
    });
    for (const candidate of candidates) {
      const ratio = summarize(ratios(series(timings, candidate.name), series(timings, 'v1')));
      rows.push([sizeLabel(size), candidate.name, timeSummary(summarize(series(timings, candidate.name))), candidate.name === 'v1' ? '1' : ratioText(ratio)]);
    }
  }
  void sink;

  const body = [
    'Time to refuse one forged request, by body size: `v1` with 64 entries against three HMAC secrets; `v1a` with ' +
      `${V1A_ENTRIES} distinct entries against one and three \`whpk_\` keys. At most keys × max(2, keys) ` +
      'Ed25519 verifications run per request, whatever the header holds (2 with one key, 9 with three).',
    '',
    table(['size', 'forged request', 'time to refuse', '÷ forged v1'], rows),
  ].join('\n');
  return { id: 'forged', title: '8. Forged requests', body, targets: [] };
}

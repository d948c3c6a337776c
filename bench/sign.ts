/**
 * Section 7: signing, 1 KiB JSON, one `whsec_` secret, the id and timestamp given (as a sender
 * that assigns its own ids does):
 *
 * - a signer built once with `createSigner(secret)`, then `signer.sign({ body, id, timestamp })`;
 * - `signWebhook({ secret, body, id, timestamp })`, which decodes the secret on every call;
 * - the baseline: a bare `createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body)
 *   .digest('base64')` with the key imported beforehand as a `KeyObject` (as the package keys),
 *   the least a sender computes;
 * - beside it, the same with the key as a Buffer: on Node 24 that alone costs about four times as
 *   much (fixtures.ts), which is what a hand-written signer keyed with bytes pays there.
 */

import { createHmac } from 'node:crypto';
import { jsonBody, KiB, newSecret, nowSeconds } from './fixtures.ts';
import { judged, ratioText, table, timeSummary, timeText, type BenchConfig, type SectionReport } from './report.ts';
import { microTiming, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const SIGNER = 'createSigner(secret), then sign()';
const SIGN_WEBHOOK = 'signWebhook({ secret, … })';
const BARE = 'bare createHmac';
const BARE_BUFFER = 'bare createHmac, Buffer key';

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink = 0;

export async function runSign(config: BenchConfig): Promise<SectionReport> {
  const { createSigner, signWebhook } = config.pkg.index;
  const { secret, key, bytes } = newSecret();
  const body = jsonBody(KiB);
  const id = 'msg_2LWQx4hZ3PbqFfXx0b8VUh3SBWh';
  const timestamp = nowSeconds();
  const signer = createSigner(secret);
  const bare = () => `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
  const bareBuffer = () => `v1,${createHmac('sha256', bytes).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;

  // Every candidate must produce the same signature before it is timed.
  const expected = bare();
  const signed = [bareBuffer(), (await signer.sign({ body, id, timestamp })).signature, (await signWebhook({ secret, body, id, timestamp })).signature];
  if (signed.some((signature) => signature !== expected)) throw new Error('a signer disagrees with the bare HMAC: the comparison would be meaningless');

  const candidates: Candidate[] = [
    {
      name: SIGNER,
      async run(n) {
        for (let i = 0; i < n; i++) sink ^= (await signer.sign({ body, id, timestamp })).signature.length;
      },
    },
    {
      name: SIGN_WEBHOOK,
      async run(n) {
        for (let i = 0; i < n; i++) sink ^= (await signWebhook({ secret, body, id, timestamp })).signature.length;
      },
    },
    {
      name: BARE,
      run(n) {
        for (let i = 0; i < n; i++) sink ^= bare().length;
      },
    },
    {
      name: BARE_BUFFER,
      run(n) {
        for (let i = 0; i < n; i++) sink ^= bareBuffer().length;
      },
    },
  ];
  const timings = await timeInterleaved(candidates, microTiming(config.quick));
  const base = series(timings, BARE);
  const rows = candidates.map((c) => [c.name, timeSummary(summarize(series(timings, c.name))), c.name === BARE ? '1' : ratioText(summarize(ratios(series(timings, c.name), base)))]);
  const signerOverBare = summarize(ratios(series(timings, SIGNER), base));
  const median = (name: string) => timeText(summarize(series(timings, name)).median);

  const text = [
    'Time per signature, 1 KiB JSON, one `whsec_` secret, id and timestamp given. The bare baseline is `createHmac` with ' +
      'the key imported beforehand as a `KeyObject` (`createSecretKey`, as the package keys), `update` of `id.timestamp.` ' +
      'then of the body, `digest(\'base64\')`; the row keyed with a Buffer is the same call with the key as bytes (on ' +
      'Node 24 several times slower, on 22 and 26 the same).',
    '',
    table(['candidate', 'time per call', '÷ bare createHmac'], rows),
    '',
    '`signWebhook` decodes the secret and imports the key on every call; a signer does it once, in `createSigner`.',
  ].join('\n');
  return {
    id: 'sign',
    title: '7. Signing',
    body: text,
    targets: [
      {
        what: 'reusable signer ÷ bare `createHmac`, 1 KiB',
        target: '≤ 1.3',
        ...judged(signerOverBare, '≤', 1.3),
        context: `${median(SIGNER)} vs ${median(BARE)}; signWebhook ${median(SIGN_WEBHOOK)}`,
      },
    ],
  };
}

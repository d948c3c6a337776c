/**
 * Section 2: rotation. Three secrets, the matching one last, 1 KiB.
 *
 * - steady state: one verifier, warmed up, verifying the same kind of message again and again
 *   (it tries the key that matched last first);
 * - first call: the first `verify` of verifiers built beforehand (building them is not timed),
 *   which must try the keys in order.
 *
 * Each is compared with the same measurement on a verifier that holds only the matching secret.
 */

import type { Verifier } from '../src/verify.ts';
import { jsonBody, KiB, newSecret, signedMessage } from './fixtures.ts';
import { judged, ratioText, table, timeSummary, timeText, type BenchConfig, type SectionReport } from './report.ts';
import { microTiming, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink = 0;

export async function runRotation(config: BenchConfig): Promise<SectionReport> {
  const { createVerifier } = config.pkg.index;
  const [oldest, older, current] = [newSecret(), newSecret(), newSecret()];
  const three = { secrets: [oldest.secret, older.secret, current.secret] };
  const one = { secrets: current.secret };
  const message = signedMessage(current.key, jsonBody(KiB));
  const input = { headers: message.headers, body: message.body };

  const steadyThree = createVerifier(three);
  const steadyOne = createVerifier(one);
  const matched = await steadyThree.verify(input);
  if (matched.keyIndex !== 2) throw new Error(`rotation fixture matched key ${matched.keyIndex}, not the last one`);

  // First calls: fresh verifiers for each batch, built before the batch is timed.
  let unused: Verifier[] = [];
  const firstCall = (name: string, options: typeof three | typeof one): Candidate => ({
    name,
    prepare(n) {
      unused = Array.from({ length: n }, () => createVerifier(options));
    },
    async run() {
      for (const verifier of unused) sink ^= (await verifier.verify(input)).keyIndex!;
      unused = [];
    },
  });
  const candidates: Candidate[] = [
    {
      name: 'three: steady',
      async run(n) {
        for (let i = 0; i < n; i++) sink ^= (await steadyThree.verify(input)).keyIndex!;
      },
    },
    {
      name: 'one: steady',
      async run(n) {
        for (let i = 0; i < n; i++) sink ^= (await steadyOne.verify(input)).keyIndex!;
      },
    },
    firstCall('three: first call', three),
    firstCall('one: first call', one),
  ];

  const timings = await timeInterleaved(candidates, microTiming(config.quick));

  const steady = summarize(ratios(series(timings, 'three: steady'), series(timings, 'one: steady')));
  const first = summarize(ratios(series(timings, 'three: first call'), series(timings, 'one: first call')));
  const median = (name: string) => summarize(series(timings, name)).median;
  const rows = [
    ['three secrets, match last: steady state', timeSummary(summarize(series(timings, 'three: steady'))), ratioText(steady)],
    ['one secret: steady state', timeSummary(summarize(series(timings, 'one: steady'))), '1'],
    ['three secrets, match last: first call', timeSummary(summarize(series(timings, 'three: first call'))), ratioText(first)],
    ['one secret: first call', timeSummary(summarize(series(timings, 'one: first call'))), '1'],
  ];
  const body = [
    'Three HMAC secrets, the message signed with the last one, 1 KiB JSON. "First call" is the first `verify` of a ' +
      'verifier just built (its construction not timed): it tries the keys in order. In steady state the verifier ' +
      'tries the key that matched last first.',
    '',
    table(['case', 'time per call', '÷ one secret (same case)'], rows),
  ].join('\n');
  return {
    id: 'rotation',
    title: '2. Rotation',
    body,
    targets: [
      {
        what: 'three secrets, match last, steady state ÷ one secret (1 KiB)',
        target: '≤ 1.2',
        ...judged(steady, '≤', 1.2),
        context: `${timeText(median('three: steady'))} vs ${timeText(median('one: steady'))}; first call ÷ one: ${ratioText(first)}`,
      },
    ],
  };
}

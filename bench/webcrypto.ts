/**
 * Section 3: the WebCrypto path, forced as on an edge runtime, against bare `crypto.subtle.sign`
 * with a key imported once, over a pre-built `id.timestamp.body` buffer. 1 KiB, one call at a
 * time and 64 in flight. Node's default path (node:crypto) is shown for context: Node must never
 * take the WebCrypto one.
 */

import { webcrypto } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { handWrittenWebCryptoVerify, jsonBody, KiB, newSecret, signedMessage } from './fixtures.ts';
import type { BuiltPackage } from './build.ts';
import { judged, ratioText, table, timeSummary, timeText, type BenchConfig, type SectionReport } from './report.ts';
import { inFlight, oneAtATime, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

export const IN_FLIGHT = 64;

/**
 * The main thread's CPU time so far, in milliseconds (user + system, this thread only). It leaves
 * out the main thread's waits for the thread pool, and also the time it was runnable but not
 * running: with 64 calls in flight the pool's four threads compete with it for two cores, and the
 * event loop's active time (the measure this replaced) counted the main thread's time taken away
 * by them, which moved the ratio of the same two candidates between 1.08 and 2.03 from run to run.
 * Wall time counts that competition too; the main thread's CPU time is what a verifier adds.
 */
const threadCpuUsage = (process as NodeJS.Process & { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage?.bind(process);
export const mainThreadClock = (): number => {
  // On a Node without per-thread CPU time, the event loop's active time stands in.
  if (threadCpuUsage === undefined) return performance.eventLoopUtilization().active;
  const { user, system } = threadCpuUsage();
  return (user + system) / 1000;
};

/** The calls section 3 times, over one verifier, one key and one signed 1 KiB message. */
export interface WebCryptoCalls {
  /** Our verifier with the WebCrypto backend forced. */
  ours: () => Promise<unknown>;
  /** The cheapest hand-written WebCrypto check (the target's floor). */
  hand: () => Promise<boolean>;
  /** Bare `subtle.sign` over a pre-built buffer, and over one joined per call. */
  bare: () => Promise<ArrayBuffer>;
  bareJoined: () => Promise<ArrayBuffer>;
  /** Our verifier on Node's default path (node:crypto). */
  node: () => Promise<unknown>;
}

/** Section 3's set-up, checked (bench/profile-pair.ts profiles the same calls). */
export async function webCryptoCalls(pkg: BuiltPackage): Promise<WebCryptoCalls> {
  const { defaultBackend, webCryptoBackend } = pkg.crypto;
  const { createVerifierWith } = pkg.verify;
  const { createVerifier } = pkg.index;
  if (defaultBackend.name !== 'node') throw new Error(`on Node the default backend must be node:crypto, not ${defaultBackend.name}`);
  const { secret, key, bytes } = newSecret();
  const message = signedMessage(key, jsonBody(KiB));
  const input = { headers: message.headers, body: message.body };
  const forced = createVerifierWith({ secrets: secret }, webCryptoBackend);
  const nodePath = createVerifier({ secrets: secret });
  const subtle = webcrypto.subtle;
  const cryptoKey = await subtle.importKey('raw', bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const content = new Uint8Array(message.signedContent);
  const prefix = new TextEncoder().encode(`${message.id}.${message.timestamp}.`);
  // WebCrypto signs one buffer, so a verifier must join id.timestamp. and the body on every call:
  // this baseline pays that copy too, to show how much of the difference it is.
  const joined = () => {
    const bytes = new Uint8Array(prefix.length + message.body.length);
    bytes.set(prefix, 0);
    bytes.set(message.body, prefix.length);
    return bytes;
  };
  if ((await forced.verify(input)).id !== message.id) throw new Error('the forced WebCrypto verifier rejected the fixture');
  const buffers: Uint8Array<ArrayBuffer>[] = [];
  const hand = () => handWrittenWebCryptoVerify(message.headers, message.body, cryptoKey, subtle, buffers);
  if (!(await hand())) throw new Error('the hand-written WebCrypto check rejected the fixture');

  return {
    ours: () => forced.verify(input),
    hand,
    bare: () => subtle.sign('HMAC', cryptoKey, content),
    bareJoined: () => subtle.sign('HMAC', cryptoKey, joined()),
    node: () => nodePath.verify(input),
  };
}

export async function runWebCrypto(config: BenchConfig): Promise<SectionReport> {
  const { ours, hand, bare, bareJoined, node } = await webCryptoCalls(config.pkg);
  const sequential: Candidate[] = [
    { name: 'ours, sequential', run: oneAtATime(ours) },
    { name: 'bare, sequential', run: oneAtATime(bare) },
    { name: 'node path, sequential', run: oneAtATime(node) },
  ];
  const concurrent: Candidate[] = [
    { name: 'ours, 64 in flight', run: inFlight(ours, IN_FLIGHT) },
    { name: 'bare, 64 in flight', run: inFlight(bare, IN_FLIGHT) },
    { name: 'bare + join, 64 in flight', run: inFlight(bareJoined, IN_FLIGHT) },
    { name: 'hand-written, 64 in flight', run: inFlight(hand, IN_FLIGHT) },
  ];
  const timing = { reps: config.quick ? 3 : 7, rounds: config.quick ? 2 : 11, warmupMs: config.quick ? 30 : 200 };
  const timings = new Map([
    // One call at a time, in short batches: in batches of 25 ms some repetitions of ours fell into a
    // mode where each call waited about 13 µs longer on the thread pool (scheduling, not work).
    ...(await timeInterleaved(sequential, { ...timing, batchMs: 5 })),
    // 64 in flight, in batches of tens of milliseconds: in 5 ms ones the thread pool's start-up and
    // the scheduling of its threads beside the main thread moved the ratio between 1.5 and 2.2 from
    // run to run.
    ...(await timeInterleaved(concurrent, { ...timing, batchMs: config.quick ? 5 : 25, minIterations: IN_FLIGHT })),
  ]);

  // The target's measure: the main thread's CPU time, the same two candidates (see mainThreadClock).
  const busy = await timeInterleaved(
    [
      { name: 'ours', run: inFlight(ours, IN_FLIGHT) },
      { name: 'hand', run: inFlight(hand, IN_FLIGHT) },
    ],
    { ...timing, batchMs: config.quick ? 5 : 25, minIterations: IN_FLIGHT, clock: mainThreadClock },
  );
  const oursBusy = summarize(series(busy, 'ours'));
  const handBusy = summarize(series(busy, 'hand'));
  const busyRatio = summarize(ratios(series(busy, 'ours'), series(busy, 'hand')));

  const of = (name: string) => series(timings, name);
  const seq = summarize(ratios(of('ours, sequential'), of('bare, sequential')));
  const par = summarize(ratios(of('ours, 64 in flight'), of('bare, 64 in flight')));
  const handPar = summarize(ratios(of('hand-written, 64 in flight'), of('bare, 64 in flight')));
  const oursOverHand = summarize(ratios(of('ours, 64 in flight'), of('hand-written, 64 in flight')));
  const nodeOverWeb = summarize(ratios(of('node path, sequential'), of('ours, sequential')));
  const median = (name: string) => timeText(summarize(of(name)).median);
  const rows = [
    ['sequential', 'ours, WebCrypto forced', timeSummary(summarize(of('ours, sequential'))), ratioText(seq)],
    ['sequential', 'bare `crypto.subtle.sign`', timeSummary(summarize(of('bare, sequential'))), '1'],
    ['sequential', 'ours, Node default (node:crypto)', timeSummary(summarize(of('node path, sequential'))), `${ratioText(nodeOverWeb, 3)} of the WebCrypto path`],
    ['64 in flight', 'ours, WebCrypto forced', timeSummary(summarize(of('ours, 64 in flight'))), ratioText(par)],
    ['64 in flight', 'bare `crypto.subtle.sign`', timeSummary(summarize(of('bare, 64 in flight'))), '1'],
    [
      '64 in flight',
      'bare `crypto.subtle.sign` over a buffer joined per call',
      timeSummary(summarize(of('bare + join, 64 in flight'))),
      ratioText(summarize(ratios(of('bare + join, 64 in flight'), of('bare, 64 in flight')))),
    ],
    [
      '64 in flight',
      'hand-written check: headers, window, join into a reused buffer, `subtle.sign`, `timingSafeEqual`',
      timeSummary(summarize(of('hand-written, 64 in flight'))),
      `${ratioText(handPar)}; ours ÷ this ${ratioText(oursOverHand)}`,
    ],
    ['64 in flight, main thread only', 'ours, WebCrypto forced', timeSummary(oursBusy), `${ratioText(busyRatio)} of the hand-written check`],
    ['64 in flight, main thread only', 'hand-written check', timeSummary(handBusy), '1'],
  ];
  const body = [
    `1 KiB JSON, one secret. Time per verification (64 in flight: wall time of rounds of ${IN_FLIGHT} concurrent calls, ` +
      'divided by the calls). The bare baseline signs a pre-built buffer with a key imported once.',
    '',
    table(['mode', 'candidate', 'time per call', '÷ bare'], rows),
    '',
    'One call at a time, Node\'s WebCrypto costs about 50 µs whatever the work (each call goes through the thread ' +
      'pool), which hides everything else. With 64 in flight the thread pool works in parallel and what is measured is ' +
      'the main thread\'s cost per call: there the verifier\'s own work shows (the headers, the join of ' +
      '`id.timestamp.` and the body that WebCrypto\'s one-buffer API forces, and the promise turns). The hand-written ' +
      'row is the cheapest check that reads the headers on this path: the same checks as section 1\'s hand-written one, ' +
      'the join into a reused buffer, one `sign`. It is the floor for this figure: what a verifier adds to a bare ' +
      '`sign` cannot be less than what it costs.',
    '',
    'The target compares the main thread\'s CPU time per call (user + system of that thread alone), the last two rows. ' +
      'Wall time with 64 in flight also counts the thread pool\'s four threads competing with the main thread for two ' +
      'cores, and moved the ratio of the same two candidates between 0.8 and 1.35 from round to round on a loaded ' +
      'machine; the event loop\'s active time, the measure before this one, counted the main thread\'s time taken ' +
      'away by those threads, and moved the ratio between 1.08 and 2.03 from run to run. The wall-time ratio is in the ' +
      'context column.',
  ].join('\n');
  return {
    id: 'webcrypto',
    title: '3. WebCrypto path',
    body,
    targets: [
      {
        what: 'forced WebCrypto verify ÷ bare `crypto.subtle` sign, sequential (1 KiB)',
        target: '≤ 1.2',
        ...judged(seq, '≤', 1.2),
        context: `${median('ours, sequential')} vs ${median('bare, sequential')}`,
      },
      {
        // Like with like: the cheapest hand-written check on this path is the floor, since
        // `subtle.sign` takes one buffer and a check that reads the headers must join them.
        what: 'forced WebCrypto verify ÷ the cheapest hand-written WebCrypto check, main-thread time, 64 in flight (1 KiB)',
        target: '≤ 1.15',
        ...judged(busyRatio, '≤', 1.15),
        context: `${timeText(oursBusy.median)} vs ${timeText(handBusy.median)} of main-thread time per call; wall time ${median('ours, 64 in flight')} vs ${median('hand-written, 64 in flight')}, ratio ${ratioText(oursOverHand)}; ÷ bare \`subtle.sign\` ${ratioText(par)} (the hand-written check ${ratioText(handPar)})`,
      },
    ],
  };
}

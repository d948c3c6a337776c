/**
 * Section 1: the peers, same work. Verifying one valid 1 KiB and one valid 1 MiB
 * request, and refusing one forged 1 KiB request, with each library a Node app would use to
 * receive signed webhooks, each fed its own scheme's headers for the same body:
 *
 * - `standardwebhooks` and `svix` 2 (`new Webhook(secret).verify(body, headers)`), Standard
 *   Webhooks headers, as ours;
 * - `@octokit/webhooks-methods` `verify(secret, body, "sha256=<hex>")` (GitHub's scheme: one HMAC
 *   of the body, no timestamp, no id); it takes the body as a string only, so it gets the body
 *   decoded once beforehand (its decoding is not timed: that favours it);
 * - Stripe's `webhooks.constructEvent` and `constructEventAsync` (`t=<seconds>,v1=<hex>` over
 *   `timestamp.body`), which parse the event as JSON;
 * - ours on node:crypto (Node's default) and on WebCrypto (forced, as on an edge runtime);
 * - the floor: a bare HMAC-SHA256 of the pre-joined `id.timestamp.body` bytes, and the cheapest
 *   hand-written check of the request (fixtures.ts: read the three headers, one HMAC,
 *   `timingSafeEqual`), both keyed with a `KeyObject` as the package keys; beside them the same
 *   hand-written check keyed with a Buffer (on Node 24 several times slower), and the hand-written
 *   check of GitHub's scheme (one HMAC of the body alone, hex), so that what separates ours from
 *   `@octokit/webhooks-methods` shows as the scheme's share and the package's.
 *
 * Every signature is computed here with node:crypto, never by the library that checks it, and
 * every candidate must accept its valid request and refuse its forged one before it is timed.
 *
 * `measurePeers` is shared with peers-child.ts, which repeats the valid-request rows on other
 * Node lines (22 and 24) in a child process of that line.
 */

import { spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { Webhook as Svix2Webhook } from 'svix2';
import { ensureNode, FULL_SUITE_LINE, NODE_LINES } from '../test/support/node-lines.ts';
import type { BuiltPackage } from './build.ts';
import type { BarChart } from './charts.ts';
import { handWrittenGithubVerify, handWrittenVerify, hmacKey, jsonBody, KiB, MiB, newSecret, nowSeconds, signedMessage, sizeLabel } from './fixtures.ts';
import { peerVersions, judged, ratioText, ROOT, table, timeSummary, timeText, type BenchConfig, type SectionReport, type TargetResult } from './report.ts';
import { microTiming, oneAtATime, ratios, series, summarize, timeInterleaved, times, type Candidate, type Timings, type TimingOptions } from './stats.ts';

import { FLOOR, HAND, HAND_BUFFER, HAND_GITHUB, OURS } from './labels.ts';

const OURS_JSON = 'ours, node:crypto, + json()';
const OURS_WEB = 'ours, WebCrypto';
const STANDARD = 'standardwebhooks';
const SVIX = 'svix 2';
const OCTOKIT = '@octokit/webhooks-methods';
const STRIPE = 'Stripe constructEvent';
const STRIPE_ASYNC = 'Stripe constructEventAsync';

/** The libraries compared with ours. */
const PEERS = [STANDARD, SVIX, OCTOKIT, STRIPE, STRIPE_ASYNC] as const;

/** One request a candidate is timed on. */
export interface PeerCase {
  label: string;
  size: number;
  forged: boolean;
}

export const CASES: readonly PeerCase[] = [
  { label: '1 KiB, valid', size: KiB, forged: false },
  { label: '1 MiB, valid', size: MiB, forged: false },
  { label: '1 KiB, forged', size: KiB, forged: true },
];

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink: unknown;

/** Runs `op` and says whether it refused (threw, rejected, or answered `false`). */
async function refuses(op: () => unknown): Promise<boolean> {
  try {
    return (await op()) === false;
  } catch {
    return true;
  }
}

/** A candidate: `op` n times, awaited only when it returns a promise. */
function candidate(name: string, op: () => unknown, async: boolean): Candidate {
  return { name, run: async ? oneAtATime(op as () => Promise<unknown>) : times(op) };
}

/** A refusing candidate: `op` n times, its error caught (awaited when asynchronous), as an app does. */
function refusing(name: string, op: () => unknown, async: boolean): Candidate {
  return async
    ? {
        name,
        async run(n) {
          for (let i = 0; i < n; i++) {
            try {
              sink = await (op() as Promise<unknown>);
            } catch (error) {
              sink = error;
            }
          }
        },
      }
    : {
        name,
        run(n) {
          for (let i = 0; i < n; i++) {
            try {
              sink = op();
            } catch (error) {
              sink = error;
            }
          }
        },
      };
}

/** The candidates of one case, checked (valid accepted, forged refused) before they are timed. */
async function candidatesOf(pkg: Pick<BuiltPackage, 'index' | 'verify' | 'crypto'>, peerCase: PeerCase): Promise<Candidate[]> {
  const { secret, key, bytes } = newSecret();
  const body = jsonBody(peerCase.size);
  const text = body.toString('utf8');
  const message = signedMessage(key, body);
  const forgedEntry = `v1,${randomBytes(32).toString('base64')}`;
  const headers = peerCase.forged ? { ...message.headers, 'webhook-signature': forgedEntry } : message.headers;
  const stringHeaders = headers as Record<string, string>;
  const input = { headers, body };
  const ours = pkg.index.createVerifier({ secrets: secret });
  const web = pkg.verify.createVerifierWith({ secrets: secret }, pkg.crypto.webCryptoBackend);
  const standard = new StandardWebhook(secret);
  const svix = new Svix2Webhook(secret);

  // GitHub's scheme: the secret is a plain string, the signature the hex HMAC of the body.
  const githubSecret = randomBytes(20).toString('hex');
  const githubSignature = peerCase.forged ? `sha256=${randomBytes(32).toString('hex')}` : `sha256=${createHmac('sha256', githubSecret).update(body).digest('hex')}`;
  const githubHeaders = { ...message.headers, 'x-hub-signature-256': githubSignature };
  const githubKey = hmacKey(Buffer.from(githubSecret));
  // Stripe's: `whsec_…` used as a string key, `t=<seconds>,v1=<hex of HMAC(t.body)>`.
  const stripeSecret = `whsec_${randomBytes(24).toString('hex')}`;
  const t = nowSeconds();
  const stripeHeader = `t=${t},v1=${peerCase.forged ? randomBytes(32).toString('hex') : createHmac('sha256', stripeSecret).update(`${t}.`).update(body).digest('hex')}`;
  const stripe = new Stripe('sk_test_bench_not_a_key').webhooks;

  const ops: [name: string, op: () => unknown, async: boolean][] = [
    [OURS, () => ours.verify(input), true],
    ...(peerCase.forged ? [] : [[OURS_JSON, async () => (await ours.verify(input)).json(), true] as [string, () => unknown, boolean]]),
    [OURS_WEB, () => web.verify(input), true],
    [HAND, () => handWrittenVerify(headers, body, key), false],
    [HAND_BUFFER, () => handWrittenVerify(headers, body, bytes), false],
    [HAND_GITHUB, () => handWrittenGithubVerify(githubHeaders, body, githubKey), false],
    [FLOOR, () => createHmac('sha256', key).update(message.signedContent).digest('base64'), false],
    [STANDARD, () => standard.verify(body, stringHeaders), false],
    [SVIX, () => svix.verify(body, stringHeaders), false],
    [OCTOKIT, () => octokitVerify(githubSecret, text, githubSignature), true],
    [STRIPE, () => stripe.constructEvent(body, stripeHeader, stripeSecret), false],
    [STRIPE_ASYNC, () => stripe.constructEventAsync(body, stripeHeader, stripeSecret), true],
  ];
  for (const [name, op] of ops) {
    if (name === FLOOR) continue;
    const refused = await refuses(op);
    if (refused !== peerCase.forged) {
      throw new Error(`${name} ${refused ? 'refused the valid' : 'accepted the forged'} ${peerCase.label} request: the comparison would be meaningless`);
    }
  }
  return ops.map(([name, op, async]) => (peerCase.forged && name !== FLOOR ? refusing(name, op, async) : candidate(name, op, async)));
}

/** Timing of a case: microTiming, with fewer rounds for 1 MiB (each call of a peer takes milliseconds). */
function caseTiming(peerCase: PeerCase, quick: boolean): TimingOptions {
  const micro = microTiming(quick);
  return peerCase.size >= MiB ? { ...micro, rounds: quick ? 2 : 7, batchMs: 10 } : micro;
}

/** Each case's timings, candidates interleaved within a case. */
export async function measurePeers(pkg: Pick<BuiltPackage, 'index' | 'verify' | 'crypto'>, cases: readonly PeerCase[], quick: boolean): Promise<Map<string, Timings>> {
  const results = new Map<string, Timings>();
  for (const peerCase of cases) results.set(peerCase.label, await timeInterleaved(await candidatesOf(pkg, peerCase), caseTiming(peerCase, quick)));
  return results;
}

/** What each library checks: the rows of the fairness table. */
const FEATURES: readonly (readonly string[])[] = [
  // library, scheme, timestamp window, id signed, rotation (several secrets), typed errors, parses JSON in verify, runtimes
  ['ours', 'Standard Webhooks (`webhook-*`, `svix-*`), v1 and v1a', 'yes, 5 min both ways, configurable', 'yes (and returned, for idempotency)', 'yes: a list of secrets, reports which matched (`keyIndex`, `keyId`)', 'yes: one class, a stable `code` per failure', 'no (`webhook.json()` on demand)', 'node:crypto on Node, WebCrypto elsewhere'],
  ['`standardwebhooks` 1', 'Standard Webhooks (`webhook-*`), v1', 'yes, 5 min', 'yes', 'no (one secret per instance)', 'one error class, message only', 'yes, by default (`jsonParse: false` to skip)', 'Node and WebCrypto-less JS (fast-sha256 in JS)'],
  ['`svix` 2', 'Standard Webhooks (`svix-*`, `webhook-*`), v1', 'yes, 5 min', 'yes', 'no', 'one error class, message only', 'no (returns nothing since 2.0)', 'as `standardwebhooks` (it wraps it)'],
  ['`@octokit/webhooks-methods` 6', 'GitHub (`x-hub-signature-256: sha256=<hex>`)', 'no (GitHub sends none)', 'no (GitHub signs the body only)', 'no', 'no: resolves `false`, throws on bad arguments', 'no (string bodies only)', 'node:crypto on Node, WebCrypto in browsers'],
  ['Stripe `constructEvent(Async)`', 'Stripe (`t=…,v1=<hex>`)', 'yes, 5 min by default (past only)', 'no (the id is in the body)', 'several `v1` entries, one secret', '`StripeSignatureVerificationError`', 'yes, always', 'node:crypto; SubtleCrypto provider for edge'],
];

function featureTable(): string {
  return table(['library', 'scheme', 'timestamp window', 'message id signed', 'secret rotation', 'typed errors', 'parses JSON in verify', 'crypto'], FEATURES);
}

/** `peer ÷ ours` of one case: 1 or more when the peer is no faster (judged with {@link judged}: a range spanning 1 is a tie). */
function peerOverOurs(timings: Timings, name: string) {
  const ratio = summarize(ratios(series(timings, name), series(timings, OURS)));
  return { name, ratio };
}

/** One candidate's figures on one request, as a line's table prints them. */
export interface LineRow {
  request: string;
  candidate: string;
  /** Median time per call, seconds. */
  time: number;
  /** Medians of the candidate ÷ ours and ÷ the floor within each repetition. */
  overOurs: number;
  overFloor: number;
}

/** Section 1's table on another Node line, measured by peers-child.ts. */
export interface LineRows {
  version: string;
  rows: LineRow[];
}

/** Every candidate's figures of every case, as {@link LineRows} carries them. */
export function lineRowsOf(results: ReadonlyMap<string, Timings>): LineRow[] {
  const rows: LineRow[] = [];
  for (const [request, timings] of results) {
    const ours = series(timings, OURS);
    const floor = series(timings, FLOOR);
    for (const [candidate, values] of timings) {
      rows.push({
        request,
        candidate,
        time: summarize(values).median,
        overOurs: summarize(ratios(values, ours)).median,
        overFloor: summarize(ratios(values, floor)).median,
      });
    }
  }
  return rows;
}

/**
 * What the scheme costs and what the package costs, of the distance between ours and
 * `@octokit/webhooks-methods` on one request: the hand-written GitHub-scheme check over the
 * hand-written Standard Webhooks check (the scheme's share, whoever writes the verifier), and
 * octokit over the hand-written GitHub-scheme check (its package's share).
 */
function schemeShare(timings: Timings): string {
  const of = (a: string, b: string) => ratioText(summarize(ratios(series(timings, a), series(timings, b))));
  return `GitHub's scheme by hand ÷ Standard Webhooks by hand ${of(HAND_GITHUB, HAND)}; \`@octokit/webhooks-methods\` ÷ GitHub's scheme by hand ${of(OCTOKIT, HAND_GITHUB)}; ours ÷ Standard Webhooks by hand ${of(OURS, HAND)}`;
}

export async function runPeers(config: BenchConfig): Promise<SectionReport> {
  const results = await measurePeers(config.pkg, CASES, config.quick);
  const rows: string[][] = [];
  const targets: TargetResult[] = [];
  const bars: BarChart['bars'] = [];
    // The WebCrypto path one call at a time (tens of µs of thread-pool hops on Node) would flatten
  // every other bar: it stays in the table.
  const chartSeries = [OURS, FLOOR, HAND, HAND_GITHUB, OCTOKIT, STRIPE, STRIPE_ASYNC, STANDARD, SVIX];
  for (const peerCase of CASES) {
    const timings = results.get(peerCase.label)!;
    const ours = series(timings, OURS);
    const floor = series(timings, FLOOR);
    for (const [name, values] of timings) {
      rows.push([
        peerCase.label,
        name,
        timeSummary(summarize(values)),
        name === OURS ? '1' : ratioText(summarize(ratios(values, ours))),
        ratioText(summarize(ratios(values, floor))),
      ]);
      if (chartSeries.includes(name)) bars.push({ group: peerCase.label, series: name, y: summarize(ratios(values, ours)).median });
    }
    const median = (name: string) => timeText(summarize(series(timings, name)).median);
    // No peer faster than ours: the fastest peer of the case, against ours.
    const fastest = PEERS.map((name) => peerOverOurs(timings, name)).sort((a, b) => a.ratio.median - b.ratio.median)[0]!;
    targets.push({
      what: `fastest peer ÷ ours (node:crypto), ${peerCase.label}`,
      target: '≥ 1 (a range spanning 1 is a tie)',
      ...judged(fastest.ratio, '≥', 1),
      context: `${fastest.name}: ${median(fastest.name)} vs ours ${median(OURS)}`,
    });
    if (peerCase.label === '1 KiB, valid' || peerCase.label === '1 KiB, forged') {
      const overHand = summarize(ratios(ours, series(timings, HAND)));
      // The forged request keeps its earlier, looser target: refusing costs a thrown error.
      const limit = peerCase.forged ? 1.3 : 1.05;
      targets.push({
        what: `ours (node:crypto) ÷ the hand-written check, ${peerCase.label}`,
        target: `≤ ${limit}`,
        ...judged(overHand, '≤', limit),
        context: `${median(OURS)} vs ${median(HAND)}; ÷ bare HMAC ${ratioText(summarize(ratios(ours, floor)))}`,
      });
    }
    if (peerCase.size === MiB) {
      const overFloor = summarize(ratios(ours, floor));
      targets.push({
        what: `ours (node:crypto) ÷ bare HMAC (the floor), ${peerCase.label}`,
        target: '≤ 1.05',
        ...judged(overFloor, '≤', 1.05),
        context: `${median(OURS)} vs ${median(FLOOR)}`,
      });
    }
  }

  const lines = await otherLines(config);
  const body = [
    'Time per call, each library fed its own scheme\'s headers for the same JSON body (signed here with node:crypto), one ' +
      `secret. "÷ ours" is over ours on node:crypto, Node's default path; "÷ floor" over a bare HMAC-SHA256 of the pre-joined ` +
      '`id.timestamp.body` bytes. The hand-written check reads the three headers, checks the window, computes one HMAC and ' +
      'compares with `timingSafeEqual`: the cheapest correct check of the request. A forged request carries a well-formed ' +
      'signature of its scheme that no key produced; every library refuses it (a thrown error, caught, or `false`).',
    '',
    `Measured: ${peerVersions()}.`,
    '',
    table(['request', 'candidate', 'time per call', '÷ ours', '÷ floor'], rows),
    '',
    '![Peers, time per call ÷ ours](../docs/benchmarks/peers.svg)',
    '',
    '**Where a peer ties us, both are at the floor.** A verifier\'s cost is one HMAC over the body plus what it does around ' +
      'it. `@octokit/webhooks-methods` checks less than we do (no timestamp, no id: GitHub\'s scheme signs the body alone) ' +
      'and so does about what the hand-written check does; ours does the hand-written check\'s work plus header parsing ' +
      'for both header families, rotation and typed errors, and costs what the hand-written check costs. At 1 MiB every ' +
      'HMAC-based verifier that hashes the bytes once is at the floor; `standardwebhooks` and `svix` hash with a SHA-256 ' +
      'written in JavaScript, which is why they fall behind as bodies grow. Stripe parses the event as JSON inside ' +
      '`constructEvent`, so its row includes `JSON.parse` (compare it with "ours + json()"). The WebCrypto row is our ' +
      'edge-runtime path forced on Node, one call at a time: every `subtle.sign` goes through the thread pool, so it is ' +
      'slow here and never used on Node (section 3 measures it with 64 in flight).',
    '',
    '**What the distance to `@octokit/webhooks-methods` is made of.** The two hand-written checks do the least their ' +
      'scheme allows, keyed alike: the Standard Webhooks one hashes `id.timestamp.` before the body and checks the ' +
      'timestamp window, the GitHub one hashes the body alone and compares hex. Their ratio is what the scheme costs ' +
      'whoever writes the verifier; each package over the hand-written check of its own scheme is what the package adds.',
    '',
    table(['request', 'the scheme\'s share and each package\'s'], CASES.filter((c) => c.size === KiB).map((c) => [c.label, schemeShare(results.get(c.label)!)])),
    '',
    '### What each library checks',
    '',
    featureTable(),
    ...(lines === undefined ? [] : ['', '### On each Node line', '', lines]),
  ].join('\n');
  const chart: BarChart = {
    kind: 'bar',
    id: 'peers',
    title: `Time per call ÷ ours (node:crypto), Node ${process.versions.node}`,
    x: { title: 'request' },
    y: { title: 'time ÷ ours (lower is faster)', unit: 'ratio' },
    bars,
    seriesOrder: chartSeries,
  };
  return { id: 'peers', title: '1. Peers, same work', body, targets, charts: [chart] };
}

/**
 * Section 1's table again on the other supported lines (22, 24), each in a child process of that
 * line (peers-child.ts), the package built once and shared; in a quick run once, on this process's
 * own Node, to prove the path. Node 24 is where a floor keyed with bytes is slow (fixtures.ts):
 * its table is published whole, so what a Node 24 user gains can be read from it.
 */
async function otherLines(config: BenchConfig): Promise<string | undefined> {
  const lines: LineRows[] = [];
  const binaries = config.quick ? [process.execPath] : await Promise.all(OTHER_LINES.map(async (major) => (await ensureNode(major)).path));
  for (const binary of binaries) lines.push(await lineRows(binary, config));
  const rows = lines.flatMap((line) =>
    line.rows.map((row) => [`v${line.version}`, row.request, row.candidate, timeText(row.time), row.candidate === OURS ? '1' : row.overOurs.toFixed(2), row.overFloor.toFixed(2)]),
  );
  return [
    `Every request again, fewer repetitions, each line in a child process of its own (${config.quick ? "quick run: this process's own Node only" : `Node ${OTHER_LINES.join(' and ')}`}); ` +
      'each ratio is the median of the candidate ÷ ours (node:crypto), or ÷ the floor, within each repetition. The floor and ' +
      'the hand-written checks are keyed with a `KeyObject`, as the package keys; the row keyed with a Buffer is what an ' +
      'app that keys `createHmac` with the secret\'s bytes pays (on Node 24 several times the rest).',
    '',
    table(['Node', 'request', 'candidate', 'time per call', '÷ ours', '÷ floor'], rows),
  ].join('\n');
}

/** The other supported lines the peer rows are repeated on. */
const OTHER_LINES = NODE_LINES.filter((line) => line !== FULL_SUITE_LINE);

function lineRows(binary: string, config: BenchConfig): Promise<LineRows> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['--import', 'tsx', join(ROOT, 'bench', 'peers-child.ts'), config.pkg.dir, config.quick ? 'quick' : 'full'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    // A child that hangs must not hold up the bench: this sub-run takes about ten seconds.
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) reject(new Error(`the peer rows on ${binary} exited with ${signal ?? code}\n${err.trim()}`));
      else resolve(JSON.parse(out) as LineRows);
    });
  });
}

/**
 * Section 13: growth curves. How a cost grows with what a user's traffic brings, at a
 * few sample points each, every point timed interleaved with its baselines:
 *
 * - verification against body size, 64 B to 4 MiB: ours, the hand-written check, the bare HMAC
 *   (the floor), `standardwebhooks` and `svix` 2;
 * - verification against the number of secrets, 1 to 16, the message signed with the first and
 *   with the last (steady state: the verifier tries the key that matched last first), and the
 *   first call of a fresh verifier with the match last (it tries the keys in order);
 * - refusing a forged request against the number of `v1` entries in its header (1 to 64, the most
 *   a header may carry), one secret, 1 KiB, ours against the hand-written check;
 * - the memory store's claim + complete and its heap against the ids it holds (1 000 to
 *   1 000 000), in a child process run with `--expose-gc` (curve-memory-child.ts).
 *
 * The section has a time budget: when it runs out, the remaining points of a curve are skipped and
 * the report says so (a loaded machine gives fewer points, never a longer run). Each curve is also
 * a chart (charts.ts); adding one is a matter of building a `Curve` and listing it.
 */

import { spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as Svix2Webhook } from 'svix2';
import type { Verifier } from '../src/verify.ts';
import { curveTable, type Curve, type CurvePoint } from './charts.ts';
import { handWrittenVerify, jsonBody, KiB, MiB, newSecret, signedMessage, sizeLabel } from './fixtures.ts';
import { FLOOR, HAND } from './labels.ts';
import { ROOT, SECTION_BUDGET_SECONDS, type BenchConfig, type SectionReport } from './report.ts';
import { oneAtATime, ratios, series, summarize, timeInterleaved, times, type Candidate, type TimingOptions } from './stats.ts';

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink: unknown;

/** A point's timing: fewer repetitions than a headline figure; a curve shows a shape, not a target. */
export function curveTiming(quick: boolean, size = KiB): TimingOptions {
  if (quick) return { reps: 2, rounds: 2, batchMs: 2, warmupMs: 10 };
  return size >= MiB ? { reps: 5, rounds: 3, batchMs: 20, warmupMs: 50 } : { reps: 5, rounds: 9, batchMs: 2, warmupMs: 100 };
}

/** Runs `measure` for each x until the deadline; returns the points and the xs skipped. */
export async function sample(xs: readonly number[], deadline: number, measure: (x: number) => Promise<CurvePoint[]>): Promise<{ points: CurvePoint[]; skipped: number[] }> {
  const points: CurvePoint[] = [];
  const skipped: number[] = [];
  for (const x of xs) {
    if (performance.now() > deadline) skipped.push(x);
    else points.push(...(await measure(x)));
  }
  return { points, skipped };
}

export function skippedText(skipped: readonly number[], label: (x: number) => string): string {
  return skipped.length === 0 ? '' : `\n\n_Skipped, the section's time budget being spent: ${skipped.map(label).join(', ')}._`;
}

/** Medians of each candidate's time per call, as points at `x`. */
async function timedPoints(x: number, candidates: readonly Candidate[], timing: TimingOptions): Promise<{ points: CurvePoint[]; of: (name: string) => number[] }> {
  const timings = await timeInterleaved(candidates, timing);
  return {
    points: candidates.map((c) => ({ x, series: c.name, y: summarize(series(timings, c.name)).median })),
    of: (name) => series(timings, name),
  };
}

const OURS = 'ours';

async function bodySizeCurve(config: BenchConfig, deadline: number): Promise<{ curve: Curve; text: string }> {
  const sizes = config.quick ? [64, KiB] : [64, KiB, 16 * KiB, 256 * KiB, MiB, 4 * MiB];
  const overFloor: string[] = [];
  const { points, skipped } = await sample(sizes, deadline, async (size) => {
    const { secret, key } = newSecret();
    const message = signedMessage(key, jsonBody(size));
    const input = { headers: message.headers, body: message.body };
    // Past the default limit of 1 MiB the body would be refused unread: raise it for the curve.
    const verifier = config.pkg.index.createVerifier({ secrets: secret, maxBodyBytes: Math.max(size, MiB) });
    const standard = new StandardWebhook(secret);
    const svix = new Svix2Webhook(secret);
    const headers = message.headers as Record<string, string>;
    const candidates: Candidate[] = [
      { name: OURS, run: oneAtATime(() => verifier.verify(input)) },
      { name: HAND, run: times(() => handWrittenVerify(message.headers, message.body, key)) },
      { name: FLOOR, run: times(() => createHmac('sha256', key).update(message.signedContent).digest('base64')) },
      { name: 'standardwebhooks', run: times(() => standard.verify(message.body, headers)) },
      { name: 'svix 2', run: times(() => svix.verify(message.body, headers)) },
    ];
    const { points: at, of } = await timedPoints(size, candidates, curveTiming(config.quick, size));
    overFloor.push(`${sizeLabel(size)} ${summarize(ratios(of(OURS), of(FLOOR))).median.toFixed(2)}`);
    return at;
  });
  const curve: Curve = {
    kind: 'line',
    id: 'curve-body-size',
    title: 'Verify: time per call vs body size',
    x: { title: 'body size', log: true, unit: 'bytes' },
    y: { title: 'time per call', log: true, unit: 'seconds' },
    points,
  };
  const text = [
    '### Verify vs body size',
    '',
    'One secret, JSON bodies, Node\'s headers. `standardwebhooks` parses the JSON by default, as its users call it; `svix` 2 does not.',
    '',
    curveTable(curve),
    '',
    `Ours ÷ the floor, by size: ${overFloor.join('; ')}.${skippedText(skipped, sizeLabel)}`,
  ].join('\n');
  return { curve, text };
}

async function secretsCurve(config: BenchConfig, deadline: number): Promise<{ curve: Curve; text: string }> {
  const counts = config.quick ? [1, 4] : [1, 2, 4, 8, 16];
  const { createVerifier } = config.pkg.index;
  const { points, skipped } = await sample(counts, deadline, async (count) => {
    const secrets = Array.from({ length: count }, () => newSecret());
    const all = { secrets: secrets.map((s) => s.secret) };
    const body = jsonBody(KiB);
    const first = signedMessage(secrets[0]!.key, body);
    const last = signedMessage(secrets[count - 1]!.key, body);
    let fresh: Verifier[] = [];
    // One verifier per steady-state candidate, so each keeps its own remembered key.
    const verifyAll = (message: typeof first) => {
      const steady = createVerifier(all);
      return oneAtATime(() => steady.verify({ headers: message.headers, body: message.body }));
    };
    const candidates: Candidate[] = [
      { name: 'match first, steady state', run: verifyAll(first) },
      { name: 'match last, steady state', run: verifyAll(last) },
      {
        name: 'match last, first call of a new verifier',
        prepare(n) {
          fresh = Array.from({ length: n }, () => createVerifier(all));
        },
        async run() {
          for (const verifier of fresh) sink = await verifier.verify({ headers: last.headers, body: last.body });
          fresh = [];
        },
      },
    ];
    return (await timedPoints(count, candidates, curveTiming(config.quick))).points;
  });
  const curve: Curve = {
    kind: 'line',
    id: 'curve-secrets',
    title: 'Verify (1 KiB): time per call vs number of secrets',
    x: { title: 'secrets', log: true, unit: 'count' },
    y: { title: 'time per call', unit: 'seconds' },
    points,
  };
  const text = [
    '### Verify vs number of secrets',
    '',
    '1 KiB, the message signed with the first or the last secret. In steady state the verifier tries the key that matched ' +
      'last first, so rotation costs nothing once traffic flows; a new verifier\'s first call tries the keys in order, one ' +
      'HMAC each (building the verifiers is not timed).',
    '',
    curveTable(curve) + skippedText(skipped, String),
  ].join('\n');
  return { curve, text };
}

async function entriesCurve(config: BenchConfig, deadline: number): Promise<{ curve: Curve; text: string }> {
  const counts = config.quick ? [1, 64] : [1, 4, 16, 64];
  const { createVerifier } = config.pkg.index;
  const { points, skipped } = await sample(counts, deadline, async (count) => {
    const { secret, key } = newSecret();
    const message = signedMessage(key, jsonBody(KiB));
    const forged = Array.from({ length: count }, () => `v1,${randomBytes(32).toString('base64')}`).join(' ');
    const headers = { ...message.headers, 'webhook-signature': forged };
    const input = { headers, body: message.body };
    const verifier = createVerifier({ secrets: secret });
    if (handWrittenVerify(headers, message.body, key)) throw new Error('the hand-written check accepted a forged header');
    const candidates: Candidate[] = [
      { name: 'ours, refusing', run: oneAtATime(() => verifier.verify(input).catch((error: unknown) => error)) },
      { name: 'hand-written check, refusing', run: times(() => handWrittenVerify(headers, message.body, key)) },
    ];
    return (await timedPoints(count, candidates, curveTiming(config.quick))).points;
  });
  const curve: Curve = {
    kind: 'line',
    id: 'curve-signature-entries',
    title: 'Refusing a forged request (1 KiB): time vs v1 entries in its header',
    x: { title: 'v1 entries in webhook-signature', log: true, unit: 'count' },
    y: { title: 'time per call', unit: 'seconds' },
    points,
  };
  const text = [
    '### Refusing a forged request vs signature entries',
    '',
    'One secret, 1 KiB, a header of well-formed `v1` entries that no key produced (64 is the most a header may carry). ' +
      'Each entry costs a base64 decode and a constant-time comparison; the HMAC is computed once whatever the count.',
    '',
    curveTable(curve) + skippedText(skipped, String),
  ].join('\n');
  return { curve, text };
}

interface MemoryPoint {
  ids: number;
  heapPerId: number;
  heapUsed: number;
  secondsPerDelivery: number;
}

/**
 * Runs a curve's child script (`bench/<script>`) with `--expose-gc`, the build's directory and
 * `args`, and reads its points: one JSON line each. The child stops at its own deadline (it is
 * given one in `args`); `timeoutMs` only ends one that hangs.
 */
export function curveChild<T>(script: string, config: BenchConfig, args: readonly string[], timeoutMs: number): Promise<T[]> {
  return new Promise((resolve, reject) => {
    const argv = ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench', script), config.pkg.dir, ...args];
    const child = spawn(process.execPath, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    // The child stops at the deadline on its own; this only ends one that hangs.
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs + 30_000);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) reject(new Error(`the curve's child ${script} exited with ${signal ?? code}\n${err.trim()}`));
      else resolve(out.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as T));
    });
  });
}

async function memoryCurves(config: BenchConfig, deadline: number): Promise<{ curves: Curve[]; text: string }> {
  const held = config.quick ? [1_000, 10_000] : [1_000, 10_000, 100_000, 1_000_000];
  const limitMs = Math.round(Math.max(5_000, deadline - performance.now()));
  const result = await curveChild<MemoryPoint>('curve-memory-child.ts', config, [held.join(','), String(config.quick ? 2_000 : 20_000), String(limitMs)], limitMs);
  const skipped = held.filter((n) => !result.some((p) => p.ids === n));
  const claim: Curve = {
    kind: 'line',
    id: 'curve-memory-claim',
    title: 'Memory store: claim + complete vs ids held',
    x: { title: 'ids held', log: true, unit: 'count' },
    y: { title: 'time per claim + complete', unit: 'seconds' },
    points: result.map((p) => ({ x: p.ids, series: 'claim + complete of a new id, store full', y: p.secondsPerDelivery })),
  };
  const heap: Curve = {
    kind: 'line',
    id: 'curve-memory-heap',
    title: 'Memory store: heap per id vs ids held',
    x: { title: 'ids held', log: true, unit: 'count' },
    y: { title: 'heap per id held', unit: 'bytes' },
    points: result.map((p) => ({ x: p.ids, series: 'heap above the empty store ÷ ids held', y: p.heapPerId })),
  };
  const text = [
    '### Memory store vs ids held',
    '',
    '`memoryStore({ max: n })` filled with n completed ids (31-character webhook-ids), then timed on new ids: each claim ' +
      'finds the store full and forgets the oldest completed id. Heap after two full collections, in a child process run ' +
      'with `--expose-gc`.',
    '',
    curveTable(claim),
    '',
    curveTable(heap) + skippedText(skipped, (n) => n.toLocaleString('en-US')),
  ].join('\n');
  return { curves: [claim, heap], text };
}

export async function runCurves(config: BenchConfig): Promise<SectionReport> {
  // The budget is shared by the curves in order; each gets at most its slice, the memory curve last.
  const start = performance.now();
  const budgetMs = SECTION_BUDGET_SECONDS.curves * 1000;
  const until = (fraction: number) => start + budgetMs * fraction;
  const size = await bodySizeCurve(config, until(0.35));
  const secrets = await secretsCurve(config, until(0.5));
  const entries = await entriesCurve(config, until(0.6));
  const memory = await memoryCurves(config, until(0.95));
  const body = [
    'A few sample points per curve, each timed interleaved with its baselines (5 repetitions; medians). A curve shows a ' +
      'shape: its points have no targets. The charts are in docs/benchmarks/.',
    '',
    size.text,
    '',
    secrets.text,
    '',
    entries.text,
    '',
    memory.text,
  ].join('\n');
  return { id: 'curves', title: '13. Growth curves', body, targets: [], charts: [size.curve, secrets.curve, entries.curve, ...memory.curves] };
}

/**
 * Timing and summaries. Every figure the suite reports is a ratio measured inside one repetition,
 * where the candidate and its baseline ran back to back (in an order that rotates from one
 * repetition to the next), so a burst of machine noise hits both. A ratio's median over the
 * repetitions is the headline; min–max is the spread.
 */

import { performance } from 'node:perf_hooks';

/** Median and spread of a sample. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  /** How many values were summarised. */
  count: number;
}

export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) throw new RangeError('summarize needs at least one value');
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]!, count: sorted.length };
}

/** Element-wise `a[i] / b[i]`: ratios within each repetition. */
export function ratios(a: readonly number[], b: readonly number[]): number[] {
  if (a.length !== b.length) throw new RangeError('ratios needs two series of the same length');
  return a.map((value, i) => value / b[i]!);
}

/**
 * One thing to time: `run(n)` performs the operation `n` times. A synchronous candidate returns
 * nothing, so that timing it adds no promise to its cost.
 */
export interface Candidate {
  name: string;
  /** Untimed set-up before each batch of `n` (for instance, objects the batch uses up). */
  prepare?(n: number): void;
  run(n: number): void | Promise<void>;
}

export interface TimingOptions {
  /** Repetitions: each yields one figure per candidate (and so one ratio per pair). */
  reps: number;
  /**
   * Rounds per repetition. A round times every candidate once, in an order that rotates from
   * round to round; a repetition's figure for a candidate is the median of its rounds. Short
   * batches in many rounds keep a batch from straddling a pre-emption by another process, and the
   * median drops the batches that did.
   */
  rounds: number;
  /** Wall time one batch should take, from which each candidate's iteration count is derived. */
  batchMs: number;
  /** Warm-up per candidate before anything is timed (the JIT, caches, lazy imports). */
  warmupMs: number;
  /** At least this many operations per batch. */
  minIterations?: number;
  /**
   * What a batch is timed by, in milliseconds: wall time (`performance.now`) unless given, or, say,
   * the event loop's cumulative busy time, to leave out waits for the thread pool.
   */
  clock?: () => number;
}

/**
 * The settings of the sections that time one call of a few microseconds (verify, rotation,
 * signing, the receiver): 7 repetitions of 21 rounds of 2 ms batches (3 of 3 in a smoke run).
 */
export function microTiming(quick: boolean): TimingOptions {
  return { reps: quick ? 3 : 7, rounds: quick ? 3 : 21, batchMs: 2, warmupMs: quick ? 20 : 200 };
}

/** Seconds per operation of each candidate, one value per repetition. */
export type Timings = Map<string, number[]>;

async function timeBatch(candidate: Candidate, n: number, clock: () => number): Promise<number> {
  candidate.prepare?.(n);
  const start = clock();
  const pending = candidate.run(n);
  if (pending !== undefined) await pending;
  return (clock() - start) / 1000 / n;
}

const wallClock = () => performance.now();

/**
 * Warms every candidate up and sizes each one's batch to about `batchMs`, then runs `reps`
 * repetitions of `rounds` rounds each (see {@link TimingOptions.rounds}).
 */
export async function timeInterleaved(candidates: readonly Candidate[], options: TimingOptions): Promise<Timings> {
  const clock = options.clock ?? wallClock;
  const iterations = new Map<string, number>();
  for (const candidate of candidates) {
    // Grow the batch until one takes a measurable time; the last one sets the estimate.
    let n = 1;
    let perOp = await timeBatch(candidate, n, clock);
    const deadline = performance.now() + options.warmupMs;
    while (performance.now() < deadline) {
      if (perOp * n < options.batchMs / 1000) n *= 2;
      perOp = await timeBatch(candidate, n, clock);
    }
    iterations.set(candidate.name, Math.max(options.minIterations ?? 1, Math.round(options.batchMs / 1000 / perOp)));
  }
  const timings: Timings = new Map(candidates.map((c) => [c.name, []]));
  let turn = 0;
  for (let rep = 0; rep < options.reps; rep++) {
    const rounds = new Map<string, number[]>(candidates.map((c) => [c.name, []]));
    for (let round = 0; round < options.rounds; round++, turn++) {
      for (let k = 0; k < candidates.length; k++) {
        const candidate = candidates[(turn + k) % candidates.length]!;
        rounds.get(candidate.name)!.push(await timeBatch(candidate, iterations.get(candidate.name)!, clock));
      }
    }
    for (const [name, values] of rounds) timings.get(name)!.push(summarize(values).median);
  }
  return timings;
}

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink: unknown;

/** A candidate's `run`: a synchronous `op` `n` times (no promise added to its cost). */
export function times(op: () => unknown): (n: number) => void {
  return (n) => {
    for (let i = 0; i < n; i++) sink = op();
  };
}

/** A candidate's `run`: `op` awaited `n` times, one after the other. */
export function oneAtATime(op: () => Promise<unknown>): (n: number) => Promise<void> {
  return async (n) => {
    for (let i = 0; i < n; i++) sink = await op();
  };
}

/** A candidate's `run`: `op` `n` times in rounds of `width` concurrent calls (the last may be smaller). */
export function inFlight(op: () => Promise<unknown>, width: number): (n: number) => Promise<void> {
  return async (n) => {
    for (let done = 0; done < n; done += width) sink = await Promise.all(Array.from({ length: Math.min(width, n - done) }, op));
  };
}

/** Per-repetition values of one candidate, or a clear error naming it. */
export function series(timings: Timings, name: string): number[] {
  const values = timings.get(name);
  if (values === undefined) throw new Error(`no timings for ${name}`);
  return values;
}

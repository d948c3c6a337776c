/**
 * `npm run bench:profile:pair -- <pair>`: where one of our figures spends its time beyond its floor,
 * part by part, each part named by what it keeps, from V8's CPU profiler in this process. Pairs:
 *
 * - `claim`: section 11's claim + complete (the receiver with the memory store, the stores full to
 *   the default bound, a fresh signed id a call) beside verify + a bare bounded `Map`;
 * - `webcrypto`: section 3's forced WebCrypto verifier beside the cheapest hand-written WebCrypto
 *   check, 64 in flight.
 *
 * The two candidates are the section's own (the same set-up), run in batches that alternate, each
 * batch sampled on its own and its main thread's CPU time taken. The package is the bench's build
 * (as it ships), with source maps, so every frame of it names its source file: a sample goes to
 * the innermost frame of the package or of the bench on its stack (a `Map` look-up or a native
 * call counts to the function that called it), and that frame's file and function name its part
 * (each pair's `parts`). Samples with no such frame are Node's (by module), the garbage
 * collector's, or V8's outside JavaScript (turns of the microtask queue among them).
 *
 *   npm run bench:profile:pair -- claim [--seconds 3] [--interval 100] [--top 15] [--max <ids>] [--write <file>] [--node 24]
 *   npm run bench:profile:pair -- webcrypto
 *
 * A profile costs the candidates some speed (a sample every `--interval` µs): compare the two
 * columns with each other, not with bench/RESULTS.md. Read parts as sizes: at this grain a part
 * moves by a few hundredths of a microsecond between runs.
 */

import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { findSourceMap } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { getHeapStatistics } from 'node:v8';
import { FULL_SUITE_LINE, rerunOnLine } from '../test/support/node-lines.ts';
import { buildPackage, type BuiltPackage } from './build.ts';
import { runAsCommand, wholeNumber } from './command.ts';
import { BARE_MAP, CLAIM } from './labels.ts';
import { receiverBench } from './receiver.ts';
import { fixed, ROOT, signedFixed, table } from './report.ts';
import { inFlight, type Candidate } from './stats.ts';
import { IN_FLIGHT, mainThreadClock, webCryptoCalls } from './webcrypto.ts';
import { BUILD_MARK, type CpuProfile } from './profile.ts';

/** A part of the package (or of the bench) and what it keeps, by file and function. */
export interface Part {
  name: string;
  /** Matched against the frame's file, relative to the repository root. */
  file: RegExp;
  /** Matched against the frame's function name; absent: any function of the file. */
  fn?: RegExp;
}

const FENCING = 'fencing: a fresh 128-bit token per claim, checked when it settles';
/** The parts every pair shares, tried after its own: the profiler's batches and the bench's loop. */
const BENCH_PARTS: readonly Part[] = [
  { name: "the profiler's own start and stop, once a batch", file: /^bench\/profile-pair\.ts$/ },
  { name: "the bench's loop (each call awaited, the result kept)", file: /^bench\// },
];

/** Section 11's parts, in the order they are tried: the first whose file (and function, when given) matches. */
export const CLAIM_PARTS: readonly Part[] = [
  { name: FENCING, file: /^src\/stores\/memory\/space\.ts$/, fn: /^(issue|owns)$/ },
  { name: FENCING, file: /^src\/lib\/token\.ts$/ },
  { name: "the store's arguments checked (bad input is a typed error)", file: /^src\/(stores\/internal|lib\/checks)\.ts$/, fn: /^check/ },
  { name: "the store's record: each id's lock and its expiry, completions remembered for their TTL, the bound", file: /^src\/stores\/memory\// },
  {
    name: "the claim protocol: the id's key space (tenant; signed or unsigned), ordering (off here), the store's answer checked against its contract, the claim and its outcome",
    file: /^src\/(receiver|rejection|ordering)(\.ts$|\/)/,
  },
  { name: 'renewal, cancellation, settling once: the held claim, its lock times, its handler context, the keeper', file: /^src\/(claims|context|stores\/internal|lib\/linked-set)\.ts$/ },
  { name: 'telemetry, off', file: /^src\/telemetry(\.ts$|\/)/ },
  { name: 'verification: headers, timestamp, HMAC, the signature list', file: /^src\/(verify|headers|crypto|secrets|keys|body|errors|lib\/(hash|encoding))(\.ts$|\/)/ },
  { name: 'the bare Map', file: /^bench\/bare-map\.ts$/ },
  ...BENCH_PARTS,
];

/** Section 3's parts, tried the same way. */
export const WEBCRYPTO_PARTS: readonly Part[] = [
  { name: 'the HMAC through `crypto.subtle`: the signed content joined into a pooled buffer, the call, its answer', file: /^src\/crypto\.ts$/ },
  { name: 'the signature list compared in constant time', file: /^src\/lib\/encoding\.ts$/ },
  { name: 'headers, timestamp and signature list read and checked (each fault a typed error)', file: /^src\/(headers|verify\/(inspect|wire|limits))\.ts$/ },
  { name: 'the verifier around them: its secrets tried in turn, the verified webhook, the promise it answers', file: /^src\/(verify|secrets|keys|errors|body|verify\/webhook)\.ts$/ },
  { name: 'the hand-written check: headers, window, join into a reused buffer, `subtle.sign`', file: /^bench\/fixtures\.ts$/, fn: /^(handWrittenWebCryptoVerify|firstValue)$/ },
  { name: 'the hand-written compare (`timingSafeEqual` of each `v1` entry)', file: /^bench\/fixtures\.ts$/, fn: /^handWrittenMatch$/ },
  ...BENCH_PARTS,
];

/**
 * Node's WebCrypto, called the same way by ours and by the hand-written check: `subtle.sign`'s own
 * JavaScript, and its hand-off of the job to the thread pool (`jobPromise`: the job made, then
 * queued to libuv's pool, whose four threads share the queue's lock with the main thread).
 */
export const WEBCRYPTO_NODE_PARTS: readonly NodePart[] = [
  { name: "Node's WebCrypto, both alike: the job handed to the thread pool (`jobPromise`)", url: /^node:internal\/crypto\/util$/, fn: /^jobPromise$/ },
  { name: "Node's WebCrypto, both alike: `subtle.sign`'s arguments checked and converted", url: /^node:internal\/crypto\// },
];

const GC = 'garbage collector';
const OUTSIDE = 'V8 outside JavaScript (microtask turns, stubs)';
const NATIVE = 'native code called from neither the package nor the bench';

/** A frame as the profile gives it: where its function starts (0-based line and column). */
interface Frame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber?: number;
}

/** A repository-relative path, or `undefined` outside the repository or in its dependencies. */
function inRepository(path: string): string | undefined {
  const file = relative(ROOT, path).split('\\').join('/');
  return file.startsWith('..') || file.startsWith('node_modules/') ? undefined : file;
}

/**
 * The repository file a frame's code comes from: the bench's own files as they are, the build's
 * chunks through their source maps (the source file the function starts in); `undefined` for
 * anything else (Node, dependencies, native code).
 */
export function sourceOf(frame: Frame): string | undefined {
  if (!frame.url.startsWith('file:')) return undefined;
  const path = fileURLToPath(frame.url);
  if (path.includes(BUILD_MARK)) {
    const entry = findSourceMap(path)?.findEntry(frame.lineNumber, frame.columnNumber ?? 0);
    if (entry === undefined || !('originalSource' in entry)) return undefined;
    const source = entry.originalSource.startsWith('file:') ? fileURLToPath(entry.originalSource) : join(path, '..', entry.originalSource);
    return inRepository(source);
  }
  return inRepository(path);
}

/** How a part named by no entry of a pair's parts starts: the file's path follows. */
const ELSEWHERE = 'elsewhere in the repository: ';

/** The part of `parts` a frame of the package or the bench belongs to; a file no part names is named by its path. */
export function partOfFrame(parts: readonly Part[], file: string, functionName: string): string {
  const part = parts.find((p) => p.file.test(file) && (p.fn === undefined || p.fn.test(functionName)));
  return part?.name ?? `${ELSEWHERE}${file}`;
}

/** Busy time by part and by function (µs, summed over the samples). */
export interface PairProfile {
  busyMicros: number;
  parts: Map<string, number>;
  functions: Map<string, number>;
}

export function emptyPairProfile(): PairProfile {
  return { busyMicros: 0, parts: new Map(), functions: new Map() };
}

/**
 * Work of Node's that a part of the package or the bench calls, named apart from its caller: the
 * caller's samples with a frame matching `url` (and `fn`, when given) anywhere below it go to `name`.
 */
export interface NodePart {
  name: string;
  url: RegExp;
  fn?: RegExp;
}

/**
 * Adds `profile`'s samples to `into`. Each goes to the innermost frame of the repository on its
 * stack: to the first of `nodeParts` that a frame of Node's between that frame and the sample
 * matches, else to that frame's part of `parts` (and to that frame's function, either way). A
 * sample with no frame of the repository goes to the innermost module of Node's on its stack,
 * else to the garbage collector, V8 outside JavaScript, or other native code. Idle samples are
 * left out.
 */
export function addSamples(into: PairProfile, profile: CpuProfile, parts: readonly Part[], nodeParts: readonly NodePart[] = []): void {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const add = (map: Map<string, number>, key: string, micros: number) => map.set(key, (map.get(key) ?? 0) + micros);
  for (let i = 0; i < profile.samples.length; i++) {
    const leaf = nodes.get(profile.samples[i]!);
    if (leaf === undefined) throw new Error(`the profile has a sample of node ${profile.samples[i]}, which it does not list`);
    const { functionName } = leaf.callFrame;
    if (functionName === '(idle)') continue;
    const micros = profile.timeDeltas[i + 1] ?? 0;
    into.busyMicros += micros;
    let part: string | undefined;
    // Frames below the innermost frame of the repository, innermost first.
    const below: Frame[] = [];
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const frame = nodes.get(id)!.callFrame;
      const file = sourceOf(frame);
      if (file === undefined) {
        below.push(frame);
        continue;
      }
      // The bundler renames a function whose name another chunk's already has (`claim$1`).
      const name = frame.functionName.replace(/\$\d+$/, '');
      const called = nodeParts.find((p) => below.some((f) => p.url.test(f.url) && (p.fn === undefined || p.fn.test(f.functionName))));
      part = called?.name ?? partOfFrame(parts, file, name);
      add(into.functions, `${name || '(anonymous)'} ${file}`, micros);
      break;
    }
    const nodeModule = below.find((frame) => frame.url.startsWith('node:'))?.url;
    part ??=
      nodeModule !== undefined
        ? `Node's ${nodeModule}, called from neither the package nor the bench`
        : functionName === '(garbage collector)'
          ? GC
          : functionName === '(program)'
            ? OUTSIDE
            : NATIVE;
    add(into.parts, part, micros);
  }
}

/**
 * One candidate's samples, how many calls they cover, its main thread's CPU time over them (µs)
 * and the bytes V8 allocated on its heap meanwhile (`undefined` on a Node whose heap statistics
 * do not count them: before Node 26).
 */
export interface ProfiledCandidate {
  name: string;
  calls: number;
  cpuMicros: number;
  allocatedBytes: number | undefined;
  profile: PairProfile;
}

/** The bytes V8 has allocated on this isolate's heap so far, where Node reports them. */
function allocatedSoFar(): number | undefined {
  return (getHeapStatistics() as { total_allocated_bytes?: number }).total_allocated_bytes;
}

/**
 * The report: each part's µs per call for our candidate and for its floor, their difference, and
 * the difference over the floor's total (what the part adds to the target's ratio); the sampled
 * totals and the main thread's CPU time; then each candidate's top functions.
 */
export function renderPairProfile(ours: ProfiledCandidate, floor: ProfiledCandidate, top: number): string {
  // Each figure per call: a part's µs, or a candidate's total of some measure.
  const partOf = (c: ProfiledCandidate, part: string) => (c.profile.parts.get(part) ?? 0) / c.calls;
  const parts = [...new Set([...ours.profile.parts.keys(), ...floor.profile.parts.keys()])];
  const share = (part: string) => partOf(ours, part) - partOf(floor, part);
  parts.sort((a, b) => share(b) - share(a));
  // Parts under half a hundredth of a µs in both columns are summed into one row (a file no part
  // names is always shown).
  const tiny = (part: string) => !part.startsWith(ELSEWHERE) && partOf(ours, part) < 0.005 && partOf(floor, part) < 0.005;
  const floorTotal = floor.profile.busyMicros / floor.calls;
  const row = (name: string, o: number, f: number) => [name, fixed(o), fixed(f), signedFixed(o - f), signedFixed((o - f) / floorTotal, 3)];
  const rows = parts.filter((part) => !tiny(part)).map((part) => row(part, partOf(ours, part), partOf(floor, part)));
  const small = parts.filter(tiny);
  if (small.length > 0) {
    const sum = (c: ProfiledCandidate) => small.reduce((total, part) => total + partOf(c, part), 0);
    rows.push(row(`smaller parts (${small.length}, each under 0.005 µs in both)`, sum(ours), sum(floor)));
  }
  const total = (name: string, of: (c: ProfiledCandidate) => number, digits = 2) => {
    const [o, f] = [of(ours) / ours.calls, of(floor) / floor.calls];
    rows.push([name, fixed(o, digits), fixed(f, digits), signedFixed(o - f, digits), `ratio ${fixed(o / f)}`]);
  };
  total('**sampled time per call**', (c) => c.profile.busyMicros);
  total('**main thread CPU time per call (user + system)**', (c) => c.cpuMicros);
  // What the garbage collector's part grows with: the bytes each call leaves on the heap.
  if (ours.allocatedBytes !== undefined && floor.allocatedBytes !== undefined) total('**bytes allocated on the heap per call**', (c) => c.allocatedBytes!, 0);
  const lines = [
    `calls profiled: ${ours.name} ${ours.calls}, ${floor.name} ${floor.calls}`,
    '',
    table(['µs per call', ours.name, floor.name, 'difference', 'difference ÷ the floor'], rows),
  ];
  for (const c of [ours, floor]) {
    lines.push('', `${c.name}: the ${top} functions of the repository with the most samples (each sample to its innermost frame of the repository; µs per call)`, '');
    const functions = [...c.profile.functions].sort((a, b) => b[1] - a[1]).slice(0, top);
    lines.push(table(['µs', 'function'], functions.map(([name, micros]) => [fixed(micros / c.calls), `\`${name}\``])));
  }
  return lines.join('\n');
}

interface Options {
  seconds: number;
  interval: number;
  /** The stores' bound (`claim`); absent: the memory store's default. */
  max: number | undefined;
}

/** What a pair profiles: its two candidates over the built package, and how to close them. */
interface PairSetup {
  ours: Candidate;
  floor: Candidate;
  /** What the report's first line says of the set-up. */
  about: string;
  close(): Promise<void>;
}

/** A pair of candidates to profile, from one section of the bench. */
interface Pair {
  /** The heading of the file `--write` writes. */
  title: string;
  /** What the file `--write` writes says the pair is, after the command that wrote it. */
  description: string;
  parts: readonly Part[];
  /** Node's work that the parts call, named apart (see {@link NodePart}). */
  nodeParts: readonly NodePart[];
  /**
   * Calls per batch: about a quarter of a second, so that the garbage one candidate leaves is
   * mostly collected in its own batch, and the profiler's start and stop are a small part of each.
   */
  batch: number;
  setup(pkg: BuiltPackage, options: Options): Promise<PairSetup>;
}

export const PAIRS = {
  claim: {
    title: 'Where claim + complete spends its time beyond its floor',
    description:
      "section 11's claim + complete (the receiver with the memory store) and its floor (verify + a bare bounded `Map`). " +
      'Each part is named by the guarantee it keeps.',
    parts: CLAIM_PARTS,
    nodeParts: [],
    batch: 25_000,
    async setup(pkg, options) {
      const bench = await receiverBench(pkg.index, options.max ?? pkg.index.DEFAULT_MEMORY_STORE_MAX);
      const pick = (name: string): Candidate => {
        const candidate = bench.candidates.find((c) => c.name === name);
        if (candidate === undefined) throw new Error(`section 11 has no candidate named ${JSON.stringify(name)}`);
        return candidate;
      };
      return { ours: pick(CLAIM), floor: pick(BARE_MAP), about: `the stores full to ${bench.max.toLocaleString('en-US')} ids`, close: bench.close };
    },
  },
  webcrypto: {
    title: 'Where the WebCrypto path spends its main thread beyond its floor',
    description:
      "section 3's verifier with the WebCrypto backend forced and its floor (the cheapest hand-written WebCrypto check), " +
      `${IN_FLIGHT} in flight. Each part is named by what it does; the target compares the main thread's CPU time.`,
    parts: WEBCRYPTO_PARTS,
    nodeParts: WEBCRYPTO_NODE_PARTS,
    batch: 200 * IN_FLIGHT,
    async setup(pkg) {
      const { ours, hand } = await webCryptoCalls(pkg);
      return {
        ours: { name: 'ours, WebCrypto forced', run: inFlight(ours, IN_FLIGHT) },
        floor: { name: 'hand-written WebCrypto check', run: inFlight(hand, IN_FLIGHT) },
        about: `1 KiB, ${IN_FLIGHT} calls in flight`,
        close: async () => {},
      };
    },
  },
} satisfies Record<string, Pair>;

/** A pair's two candidates, in alternating batches, each batch sampled on its own. */
async function profilePair(pair: Pair, options: Options): Promise<{ about: string; ours: ProfiledCandidate; floor: ProfiledCandidate }> {
  // Source maps are read for modules loaded after this (the build's chunks).
  process.setSourceMapsEnabled(true);
  const pkg = await buildPackage({ sourcemap: true });
  const session = new Session();
  session.connect();
  let setup: PairSetup | undefined;
  try {
    setup = await pair.setup(pkg, options);
    const chosen = [setup.ours, setup.floor];
    // Warm-up, unsampled: the JIT settles before the first sample.
    for (let i = 0; i < 2; i++) {
      for (const c of chosen) {
        c.prepare?.(pair.batch);
        await c.run(pair.batch);
      }
    }
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: options.interval });
    const results = chosen.map((c): ProfiledCandidate => ({ name: c.name, calls: 0, cpuMicros: 0, allocatedBytes: allocatedSoFar() === undefined ? undefined : 0, profile: emptyPairProfile() }));
    const deadline = performance.now() + options.seconds * 2 * 1000;
    for (let round = 0; performance.now() < deadline || round < 2; round++) {
      for (let k = 0; k < chosen.length; k++) {
        const index = (round + k) % chosen.length;
        const candidate = chosen[index]!;
        const result = results[index]!;
        candidate.prepare?.(pair.batch);
        await session.post('Profiler.start');
        const cpu = mainThreadClock();
        const allocated = allocatedSoFar();
        await candidate.run(pair.batch);
        result.cpuMicros += (mainThreadClock() - cpu) * 1000;
        if (result.allocatedBytes !== undefined) result.allocatedBytes += allocatedSoFar()! - allocated!;
        const { profile } = await session.post('Profiler.stop');
        addSamples(result.profile, profile as CpuProfile, pair.parts, pair.nodeParts);
        result.calls += pair.batch;
      }
    }
    await session.post('Profiler.disable');
    return { about: setup.about, ours: results[0]!, floor: results[1]! };
  } finally {
    session.disconnect();
    await setup?.close();
    pkg.remove();
  }
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      seconds: { type: 'string', default: '3' },
      interval: { type: 'string', default: '100' },
      top: { type: 'string', default: '15' },
      max: { type: 'string' },
      write: { type: 'string' },
      node: { type: 'string' },
    },
  });
  const names = Object.keys(PAIRS);
  const [name] = positionals;
  if (positionals.length !== 1 || !names.includes(name!)) throw new TypeError(`name one pair to profile, one of ${names.join(', ')}; got ${JSON.stringify(positionals.join(' '))}`);
  const pair: Pair = PAIRS[name as keyof typeof PAIRS];
  const options: Options = { seconds: wholeNumber('seconds', values.seconds), interval: wholeNumber('interval', values.interval), max: values.max === undefined ? undefined : wholeNumber('max', values.max) };
  const top = wholeNumber('top', values.top);
  const line = values.node ?? String(FULL_SUITE_LINE);
  if (process.versions.node.split('.')[0] !== line) {
    process.exitCode = await rerunOnLine(line, join('bench', 'profile-pair.ts'), process.argv.slice(2), 'bench:profile:pair');
    return;
  }
  const { about, ours, floor } = await profilePair(pair, options);
  const report = [
    `Node ${process.versions.node}; ${about}; about ${options.seconds} s sampled per candidate, ` +
      `in alternating batches of ${pair.batch.toLocaleString('en-US')} calls; a sample every ${options.interval} µs. Figures are per call.`,
    '',
    renderPairProfile(ours, floor, top),
  ].join('\n');
  console.log(report);
  if (values.write !== undefined) {
    const heading =
      `# ${pair.title}\n\n` +
      `Written by \`npm run bench:profile:pair -- ${name} --write ${values.write}\` (bench/profile-pair.ts): ${pair.description} ` +
      'Profiled in one process, the package as it ships (with source maps); each sample goes to the innermost frame of the ' +
      'package or the bench on its stack. A profile costs the candidates some speed: compare the two columns with each other, ' +
      'not with bench/RESULTS.md.\n\n';
    writeFileSync(values.write, `${heading}${report}\n`);
  }
}

runAsCommand(import.meta.url, main);

/**
 * `npm run bench:profile:claim`: where section 11's claim + complete spends its time beyond its
 * floor (verify + a bare bounded `Map`), by the guarantee each part of the package keeps, from
 * V8's CPU profiler in this process.
 *
 * The two candidates are section 11's own (bench/receiver.ts: the same set-up, the stores full to
 * the memory store's default bound, a fresh signed id a call), run in batches that alternate, each
 * batch sampled on its own. The package is the bench's build (as it ships), with source maps, so
 * every frame of it names its source file: a sample goes to the innermost frame of the package or
 * of the bench on its stack (a `Map` look-up or the HMAC's native code counts to the function that
 * called it), and that frame's file and function name its part (`PARTS`). Samples with no such
 * frame are the garbage collector's, or V8's outside JavaScript (turns of the microtask queue
 * among them).
 *
 *   npm run bench:profile:claim -- [--seconds 3] [--interval 100] [--top 15] [--max <ids>] [--write <file>] [--node 24]
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
import { FULL_SUITE_LINE, rerunOnLine } from '../test/support/node-lines.ts';
import { buildPackage } from './build.ts';
import { runAsCommand, wholeNumber } from './command.ts';
import { BARE_MAP, CLAIM } from './labels.ts';
import { receiverBench } from './receiver.ts';
import { ROOT, table } from './report.ts';
import type { Candidate } from './stats.ts';
import { BUILD_MARK, type CpuProfile } from './profile.ts';

/** A part of the package (or of the bench) and the guarantee it keeps, by file and function. */
interface Part {
  name: string;
  /** Matched against the frame's file, relative to the repository root. */
  file: RegExp;
  /** Matched against the frame's function name; absent: any function of the file. */
  fn?: RegExp;
}

const FENCING = 'fencing: a fresh 128-bit token per claim, checked when it settles';

/** Parts in the order they are tried: the first whose file (and function, when given) matches. */
export const PARTS: readonly Part[] = [
  { name: FENCING, file: /^src\/stores\/memory\/space\.ts$/, fn: /^(issue|owns)$/ },
  { name: FENCING, file: /^src\/lib\/token\.ts$/ },
  { name: "the store's arguments checked (bad input is a typed error)", file: /^src\/(stores\/internal|lib\/checks)\.ts$/, fn: /^check/ },
  { name: "the store's record: each id's lock and its expiry, completions remembered for their TTL, the bound", file: /^src\/stores\/memory\// },
  {
    name: "the claim protocol: the id's key space (tenant; signed or unsigned), ordering (off here), the store's answer checked against its contract, the claim and its outcome",
    file: /^src\/(receiver|rejection|ordering)(\.ts$|\/)/,
  },
  { name: 'renewal, cancellation, settling once: the held claim, its lock times, its handler context, the keeper', file: /^src\/(claims|context|stores\/internal)\.ts$/ },
  { name: 'telemetry, off', file: /^src\/telemetry(\.ts$|\/)/ },
  { name: 'verification: headers, timestamp, HMAC, the signature list', file: /^src\/(verify|headers|crypto|secrets|keys|body|errors|lib\/(hash|encoding))(\.ts$|\/)/ },
  { name: 'the bare Map', file: /^bench\/bare-map\.ts$/ },
  { name: "the profiler's own start and stop, once a batch", file: /^bench\/profile-claim\.ts$/ },
  { name: "the bench's loop (each call awaited, the result kept)", file: /^bench\// },
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

/** The part a frame of the package or the bench belongs to; any other file of the package is named by its file. */
export function partOfFrame(file: string, functionName: string): string {
  const part = PARTS.find((p) => p.file.test(file) && (p.fn === undefined || p.fn.test(functionName)));
  return part?.name ?? `elsewhere in the repository: ${file}`;
}

/** Busy time by part and by function (µs, summed over the samples). */
export interface ClaimProfile {
  busyMicros: number;
  parts: Map<string, number>;
  functions: Map<string, number>;
}

export function emptyClaimProfile(): ClaimProfile {
  return { busyMicros: 0, parts: new Map(), functions: new Map() };
}

/**
 * Adds `profile`'s samples to `into`: each goes to the innermost frame of the repository on its
 * stack (its part, and that frame's function), else to the garbage collector, V8 outside
 * JavaScript, or other native code. Idle samples are left out.
 */
export function addSamples(into: ClaimProfile, profile: CpuProfile): void {
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
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const frame = nodes.get(id)!.callFrame;
      const file = sourceOf(frame);
      if (file === undefined) continue;
      // The bundler renames a function whose name another chunk's already has (`claim$1`).
      const name = frame.functionName.replace(/\$\d+$/, '');
      part = partOfFrame(file, name);
      add(into.functions, `${name || '(anonymous)'} ${file}`, micros);
      break;
    }
    part ??= functionName === '(garbage collector)' ? GC : functionName === '(program)' ? OUTSIDE : NATIVE;
    add(into.parts, part, micros);
  }
}

/** One candidate's samples and how many calls they cover. */
export interface ProfiledCandidate {
  name: string;
  calls: number;
  profile: ClaimProfile;
}

const fixed2 = (micros: number) => micros.toFixed(2);

/**
 * The report: each part's µs per call for claim + complete and for its floor, their difference,
 * and the difference over the floor's total (what the part adds to the target's ratio); then each
 * candidate's top functions.
 */
export function renderClaimProfile(ours: ProfiledCandidate, floor: ProfiledCandidate, top: number): string {
  const per = (c: ProfiledCandidate, micros: number) => micros / c.calls;
  const parts = [...new Set([...ours.profile.parts.keys(), ...floor.profile.parts.keys()])];
  const share = (part: string) => per(ours, ours.profile.parts.get(part) ?? 0) - per(floor, floor.profile.parts.get(part) ?? 0);
  parts.sort((a, b) => share(b) - share(a));
  const floorTotal = per(floor, floor.profile.busyMicros);
  // Under half the last digit either way prints as zero (never `-0.00`).
  const signed = (value: number, digits: number) => {
    const half = 0.5 * 10 ** -digits;
    return value >= half ? `+${value.toFixed(digits)}` : value <= -half ? value.toFixed(digits) : (0).toFixed(digits);
  };
  const rows = parts.map((part) => [part, fixed2(per(ours, ours.profile.parts.get(part) ?? 0)), fixed2(per(floor, floor.profile.parts.get(part) ?? 0)), signed(share(part), 2), signed(share(part) / floorTotal, 3)]);
  const oursTotal = per(ours, ours.profile.busyMicros);
  rows.push(['**sampled time per call**', fixed2(oursTotal), fixed2(floorTotal), signed(oursTotal - floorTotal, 2), `ratio ${(oursTotal / floorTotal).toFixed(2)}`]);
  const lines = [
    `calls profiled: ${ours.name} ${ours.calls}, ${floor.name} ${floor.calls}`,
    '',
    table(['µs per call', ours.name, floor.name, 'difference', 'difference ÷ the floor'], rows),
  ];
  for (const c of [ours, floor]) {
    lines.push('', `${c.name}: the ${top} functions of the repository with the most samples (each sample to its innermost frame of the repository; µs per call)`, '');
    const functions = [...c.profile.functions].sort((a, b) => b[1] - a[1]).slice(0, top);
    lines.push(table(['µs', 'function'], functions.map(([name, micros]) => [fixed2(per(c, micros)), `\`${name}\``])));
  }
  return lines.join('\n');
}

interface Options {
  seconds: number;
  interval: number;
  /** The stores' bound; absent: the memory store's default. */
  max: number | undefined;
}

/**
 * Calls per batch: about a quarter of a second, so that the garbage one candidate leaves is mostly
 * collected in its own batch, and the profiler's start and stop are a small part of each.
 */
const BATCH = 25_000;

/** Section 11's two candidates, in alternating batches, each batch sampled on its own. */
async function profileClaim(options: Options): Promise<{ max: number; ours: ProfiledCandidate; floor: ProfiledCandidate }> {
  // Source maps are read for modules loaded after this (the build's chunks).
  process.setSourceMapsEnabled(true);
  const pkg = await buildPackage({ sourcemap: true });
  const bench = await receiverBench(pkg.index, options.max ?? pkg.index.DEFAULT_MEMORY_STORE_MAX);
  const session = new Session();
  session.connect();
  try {
    const pick = (name: string): Candidate => {
      const candidate = bench.candidates.find((c) => c.name === name);
      if (candidate === undefined) throw new Error(`section 11 has no candidate named ${JSON.stringify(name)}`);
      return candidate;
    };
    const chosen = [pick(CLAIM), pick(BARE_MAP)];
    // Warm-up, unsampled: the JIT settles before the first sample.
    for (let i = 0; i < 2; i++) {
      for (const c of chosen) {
        c.prepare?.(BATCH);
        await c.run(BATCH);
      }
    }
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: options.interval });
    const results = chosen.map((c): ProfiledCandidate => ({ name: c.name, calls: 0, profile: emptyClaimProfile() }));
    const deadline = performance.now() + options.seconds * 2 * 1000;
    for (let round = 0; performance.now() < deadline || round < 2; round++) {
      for (let k = 0; k < chosen.length; k++) {
        const index = (round + k) % chosen.length;
        const candidate = chosen[index]!;
        candidate.prepare?.(BATCH);
        await session.post('Profiler.start');
        await candidate.run(BATCH);
        const { profile } = await session.post('Profiler.stop');
        addSamples(results[index]!.profile, profile as CpuProfile);
        results[index]!.calls += BATCH;
      }
    }
    await session.post('Profiler.disable');
    return { max: bench.max, ours: results[0]!, floor: results[1]! };
  } finally {
    session.disconnect();
    await bench.close();
    pkg.remove();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '3' },
      interval: { type: 'string', default: '100' },
      top: { type: 'string', default: '15' },
      max: { type: 'string' },
      write: { type: 'string' },
      node: { type: 'string' },
    },
  });
  const options: Options = { seconds: wholeNumber('seconds', values.seconds), interval: wholeNumber('interval', values.interval), max: values.max === undefined ? undefined : wholeNumber('max', values.max) };
  const top = wholeNumber('top', values.top);
  const line = values.node ?? String(FULL_SUITE_LINE);
  if (process.versions.node.split('.')[0] !== line) {
    process.exitCode = await rerunOnLine(line, join('bench', 'profile-claim.ts'), process.argv.slice(2), 'bench:profile:claim');
    return;
  }
  const { max, ours, floor } = await profileClaim(options);
  const report = [
    `Node ${process.versions.node}; the stores full to ${max.toLocaleString('en-US')} ids; about ${options.seconds} s sampled per candidate, ` +
      `in alternating batches of ${BATCH.toLocaleString('en-US')} calls; a sample every ${options.interval} µs. Figures are per call.`,
    '',
    renderClaimProfile(ours, floor, top),
  ].join('\n');
  console.log(report);
  if (values.write !== undefined) {
    const heading =
      '# Where claim + complete spends its time beyond its floor\n\n' +
      `Written by \`npm run bench:profile:claim -- --write ${values.write}\` (bench/profile-claim.ts): section 11's claim + complete ` +
      '(the receiver with the memory store) and its floor (verify + a bare bounded `Map`), profiled in one process from the ' +
      "package as it ships (with source maps). Each sample goes to the innermost frame of the package or the bench on its stack, and each part is named " +
      'by the guarantee it keeps. A profile costs the candidates some speed: compare the two columns with each other, not with ' +
      'bench/RESULTS.md.\n\n';
    writeFileSync(values.write, `${heading}${report}\n`);
  }
}

runAsCommand(import.meta.url, main);

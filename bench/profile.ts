/**
 * `npm run bench:profile -- <framework>/<variant> …`: where the HTTP section's server cells spend
 * their time, from V8's CPU profiler, side by side. Each cell is the section's own server
 * (http-server.ts) under the section's load generator (10 connections, 1 KiB signed JSON, fresh
 * ids); the cells run interleaved, as the section runs them, after a one-second warm-up each, and
 * each server samples itself only while it is measured. What is printed, per request:
 *
 * - the server's CPU time (user + system, all its threads), as the section measures it;
 * - the main thread's busy time from the samples, in parts: the kernel sending the answer (the
 *   native socket write), the garbage collector, V8 and libuv outside JavaScript, this package,
 *   each dependency, each of Node's modules, and the bench's own code (the handler, the
 *   hand-written check, the bare `Map`);
 * - what the other threads took (CPU time the main thread's samples do not hold: V8's helper
 *   threads, the thread pool);
 * - the functions with the most samples of their own.
 *
 *   npm run bench:profile -- node:http/adapter node:http/inline-store
 *   npm run bench:profile -- fastify/verify fastify/inline --seconds 4 --reps 3 --interval 500 --top 25
 *   npm run bench:profile -- … --out <dir>      also writes each cell's .cpuprofile (for DevTools)
 *   npm run bench:profile -- … --node 24        on that Node line (default: the newest LTS, as `npm run bench`)
 *   npm run bench:profile -- … --rate 5000      load at that many requests a second instead of as fast
 *                                                as each server answers: every cell then sees the same load
 *
 * Cells: the HTTP section's `<framework>/<variant>` pairs (http-server.ts lists them). A profile
 * costs its server some speed (a sample every `--interval` µs): compare cells profiled together,
 * never with `npm run bench`'s figures. At this grain a part moves by a microsecond or so between
 * runs, and a whole cell by up to a fifth: read parts as sizes.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { FULL_SUITE_LINE, rerunOnLine } from '../test/support/node-lines.ts';
import { buildPackage } from './build.ts';
import { runAsCommand, wholeNumber } from './command.ts';
import { newSecret } from './fixtures.ts';
import { Child, CONNECTIONS, sizedRuns, START_TIMEOUT_MS, startServer, type ServerChild } from './http.ts';
import { FRAMEWORKS, VARIANTS } from './http-cases.ts';
import { fixed, signedFixed, table } from './report.ts';

/** The part of a V8 CPU profile (`Profiler.stop`'s `profile`) this file reads. */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  samples: number[];
  /** Microseconds between a sample and the one before it (the first: since the profile started). */
  timeDeltas: number[];
}

/** A profile's main-thread busy time, by part and by function (µs, summed over the samples). */
export interface ProfileParts {
  busyMicros: number;
  parts: Map<string, number>;
  functions: Map<string, number>;
}

/** The native functions through which Node writes to a socket: their samples are the kernel's send. */
const SOCKET_WRITES = new Set(['writeLatin1String', 'writeUtf8String', 'writeAsciiString', 'writeUcs2String', 'writeBuffer', 'writev']);

/** The directory the bench builds the package into (build.ts): samples from there are this package's. */
export const BUILD_MARK = '/webhook-receiver-bench/';

/** Native functions of Node's HMAC (node:crypto's `Hmac`): its key set-up, update and digest. */
const HMAC_NATIVES = new Set(['init', 'update', 'digest', 'Hmac']);

/** Node's modules, by what they do for a request (the first match names the part). */
const NODE_PARTS: [RegExp, string][] = [
  [/^node:(_http_|net$|internal\/http)/, 'Node: HTTP (parser, server, response)'],
  [/^node:(internal\/streams|internal\/stream_base_commons|stream|string_decoder)/, 'Node: streams'],
  [/^node:(events|internal\/event_target|internal\/abort_controller)/, 'Node: events'],
  [/^node:(crypto|internal\/crypto)/, 'Node: crypto'],
  [/^node:(internal\/process|timers|internal\/timers|internal\/async_hooks)/, 'Node: ticks, timers, async hooks'],
  [/^node:(buffer|internal\/buffer|internal\/encoding)/, 'Node: buffers and text decoding'],
];

/** The part a sampled function belongs to, by where its code is. */
export function partOf(callFrame: { functionName: string; url: string }): string {
  const { functionName, url } = callFrame;
  if (url === '') {
    if (SOCKET_WRITES.has(functionName)) return 'the kernel: socket writes';
    if (functionName === '(garbage collector)') return 'garbage collector';
    if (functionName === '(program)') return 'V8 and libuv, outside JavaScript';
    if (HMAC_NATIVES.has(functionName)) return 'native: HMAC';
    return 'native: other';
  }
  if (url.includes(BUILD_MARK)) return 'this package';
  const modules = url.lastIndexOf('/node_modules/');
  if (modules !== -1) {
    const [scope, name] = url.slice(modules + '/node_modules/'.length).split('/');
    return `dependency: ${scope!.startsWith('@') ? `${scope}/${name}` : scope}`;
  }
  if (url.startsWith('node:')) return NODE_PARTS.find(([pattern]) => pattern.test(url))?.[1] ?? 'Node: other';
  if (url.includes('/bench/')) return "the bench's code (handler, hand-written check, bare Map)";
  return 'other';
}

/** Sums a profile's samples by part and by function; idle samples are left out. */
export function profileParts(profile: CpuProfile): ProfileParts {
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const parts = new Map<string, number>();
  const functions = new Map<string, number>();
  let busyMicros = 0;
  // A sample's time is the delta to the next sample: the time until the next sample was taken.
  for (let i = 0; i < profile.samples.length; i++) {
    const frame = frames.get(profile.samples[i]!);
    if (frame === undefined) throw new Error(`the profile has a sample of node ${profile.samples[i]}, which it does not list`);
    const micros = profile.timeDeltas[i + 1] ?? 0;
    if (frame.functionName === '(idle)') continue;
    busyMicros += micros;
    const part = partOf(frame);
    parts.set(part, (parts.get(part) ?? 0) + micros);
    const where = frame.url === '' ? '' : ` ${frame.url.replace(/^.*\/(node_modules|bench)\//, '$1/').replace(/^.*webhook-receiver-bench\/[^/]+\//, '')}:${frame.lineNumber + 1}`;
    const name = `${frame.functionName || '(anonymous)'}${where}`;
    functions.set(name, (functions.get(name) ?? 0) + micros);
  }
  return { busyMicros, parts, functions };
}

/** One profiled cell: its runs' requests and CPU time, and its profile's parts. */
interface Profiled {
  cell: string;
  requests: number;
  cpuMicros: number;
  profile: ProfileParts;
}

/** `<framework>/<variant>` checked against the HTTP section's cells. */
function parseCell(text: string): [string, string] {
  const slash = text.lastIndexOf('/');
  const framework = text.slice(0, slash);
  const variant = text.slice(slash + 1);
  if (slash === -1 || !(FRAMEWORKS as readonly string[]).includes(framework) || !(VARIANTS as readonly string[]).includes(variant)) {
    throw new TypeError(`a cell is <framework>/<variant> with framework one of ${FRAMEWORKS.join(', ')} and variant one of ${VARIANTS.join(', ')}; got ${JSON.stringify(text)}`);
  }
  return [framework, variant];
}

/** Parts under this many µs per request in every cell are summed into one row. */
const SMALL_PART_MICROS = 0.5;

/**
 * The report: the parts side by side (µs per request), then each cell's top functions. With
 * `diff`, a column per pair of cells (the first minus the second, the third minus the fourth, …).
 */
export function renderProfiles(profiled: readonly Profiled[], top: number, diff = false): string {
  const perRequest = (p: Profiled, micros: number) => micros / p.requests;
  const largest = new Map<string, number>();
  for (const p of profiled) for (const [part, micros] of p.profile.parts) largest.set(part, Math.max(largest.get(part) ?? 0, perRequest(p, micros)));
  const order = [...largest].filter(([, most]) => most >= SMALL_PART_MICROS).sort((a, b) => b[1] - a[1]).map(([part]) => part);
  const small = (p: Profiled) => [...p.profile.parts].filter(([part]) => !order.includes(part)).reduce((sum, [, micros]) => sum + micros, 0);
  type Figure = (p: Profiled) => number;
  const figures: [string, Figure][] = [
    ['server CPU time (all threads)', (p) => p.cpuMicros / p.requests],
    ['main thread busy (samples)', (p) => perRequest(p, p.profile.busyMicros)],
    ...order.map((part): [string, Figure] => [`  ${part}`, (p) => perRequest(p, p.profile.parts.get(part) ?? 0)]),
    [`  smaller parts (each under ${SMALL_PART_MICROS} µs)`, (p) => perRequest(p, small(p))],
    ['other threads (CPU time − main thread)', (p) => (p.cpuMicros - p.profile.busyMicros) / p.requests],
  ];
  const pairs = diff ? Array.from({ length: profiled.length >> 1 }, (_, i) => [profiled[2 * i]!, profiled[2 * i + 1]!] as const) : [];
  const header = ['µs per request', ...profiled.map((p) => p.cell), ...pairs.map(([a, b]) => `${a.cell} − ${b.cell}`)];
  const rows = figures.map(([name, figure]) => [name, ...profiled.map((p) => fixed(figure(p), 1)), ...pairs.map(([a, b]) => signedFixed(figure(a) - figure(b), 1))]);
  const lines = [`requests profiled: ${profiled.map((p) => `${p.cell} ${p.requests}`).join(', ')}`, '', table(header, rows)];
  for (const p of profiled) {
    lines.push('', `${p.cell}: the ${top} functions with the most samples of their own (µs per request)`, '');
    const functions = [...p.profile.functions].sort((a, b) => b[1] - a[1]).slice(0, top);
    lines.push(table(['µs', 'function'], functions.map(([name, micros]) => [fixed(perRequest(p, micros), 1), `\`${name}\``])));
  }
  return lines.join('\n');
}

/** The four cells of a targeted framework's two targets, in the order `--diff` pairs them. */
const TARGET_CELLS = ['adapter', 'inline-store', 'verify', 'inline'] as const;
/** The frameworks with targets in the HTTP section, profiled when no cell is named. */
const TARGET_FRAMEWORKS = ['express', 'fastify', 'hono', 'node:http'] as const;

interface ProfileOptions {
  seconds: number;
  reps: number;
  interval: number;
  out: string | undefined;
  /** Requests a second the load is sent at; absent: as fast as each server answers. */
  rate: number | undefined;
}

/** Runs `cells` (each `[framework, variant]`) interleaved under load and profiles each. */
async function profileCells(cells: readonly (readonly [string, string])[], options: ProfileOptions): Promise<Profiled[]> {
  const pkg = await buildPackage();
  const { secret } = newSecret();
  const env = { BENCH_SECRET: secret, BENCH_BUILD: pkg.dir };
  const load = new Child('http-load.ts', [], env);
  const servers: [string, ServerChild][] = [];
  try {
    await load.ask('ready', undefined, START_TIMEOUT_MS, 'starting the load generator');
    for (const [framework, variant] of cells) servers.push([`${framework}/${variant}`, await startServer([framework, variant], env, `${framework} ${variant}`)]);
    const sized = sizedRuns(load);
    const run = (cell: string, server: ServerChild, duration: number) => sized(cell, server, cell, duration, CONNECTIONS, undefined, options.rate);
    for (const [cell, server] of servers) await run(cell, server, 1);
    const totals = new Map(servers.map(([cell]) => [cell, { requests: 0, cpuMicros: 0 }]));
    for (const [cell, server] of servers) await server.child.ask('profile', { type: 'profile', action: 'start', intervalMicros: options.interval }, 5000, `profiling ${cell}`);
    for (let rep = 0; rep < options.reps; rep++) {
      for (let k = 0; k < servers.length; k++) {
        const [cell, server] = servers[(rep + k) % servers.length]!;
        const result = await run(cell, server, options.seconds);
        const sums = totals.get(cell)!;
        sums.requests += result.processed;
        sums.cpuMicros += result.cpuPerRequest * result.processed;
      }
    }
    const profiled: Profiled[] = [];
    for (const [cell, server] of servers) {
      const { profile } = await server.child.ask<{ profile: CpuProfile }>('profile', { type: 'profile', action: 'stop' }, 30_000, `profiling ${cell}`);
      if (options.out !== undefined) {
        mkdirSync(options.out, { recursive: true });
        writeFileSync(join(options.out, `${cell.replace(/[^a-z0-9-]+/gi, '-')}.cpuprofile`), JSON.stringify(profile));
      }
      profiled.push({ cell, ...totals.get(cell)!, profile: profileParts(profile) });
    }
    return profiled;
  } finally {
    await Promise.all(servers.map(([, server]) => server.child.stop()));
    await load.stop();
    pkg.remove();
  }
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      seconds: { type: 'string', default: '4' },
      reps: { type: 'string', default: '3' },
      interval: { type: 'string', default: '500' },
      top: { type: 'string', default: '15' },
      diff: { type: 'boolean', default: false },
      out: { type: 'string' },
      write: { type: 'string' },
      node: { type: 'string' },
      rate: { type: 'string' },
    },
  });
  const options: ProfileOptions = {
    seconds: wholeNumber('seconds', values.seconds),
    reps: wholeNumber('reps', values.reps),
    interval: wholeNumber('interval', values.interval),
    out: values.out,
    rate: values.rate === undefined ? undefined : wholeNumber('rate', values.rate),
  };
  const top = wholeNumber('top', values.top);
  const groups = positionals.length > 0 ? [positionals.map(parseCell)] : TARGET_FRAMEWORKS.map((framework) => TARGET_CELLS.map((variant) => [framework, variant] as const));
  const diff = values.diff || positionals.length === 0;

  const line = values.node ?? String(FULL_SUITE_LINE);
  if (process.versions.node.split('.')[0] !== line) {
    process.exitCode = await rerunOnLine(line, join('bench', 'profile.ts'), process.argv.slice(2), 'bench:profile');
    return;
  }

  const sections = [
    `Node ${process.versions.node}; per cell ${options.reps} runs of ${options.seconds} s under load (10 connections${options.rate === undefined ? '' : `, ${options.rate} requests a second`}), interleaved, ` +
      `after a 1 s warm-up; a sample every ${options.interval} µs. Figures are per request.`,
  ];
  for (const cells of groups) {
    const profiled = await profileCells(cells, options);
    const text = renderProfiles(profiled, top, diff);
    sections.push(groups.length > 1 ? `## ${cells[0]![0]}\n\n${text}` : text);
    process.stderr.write(`bench:profile: ${cells.map((cell) => cell.join('/')).join(', ')} profiled\n`);
  }
  const report = sections.join('\n\n');
  console.log(report);
  if (values.write !== undefined) {
    const heading =
      '# Where the HTTP section\'s servers spend their time\n\n' +
      `Written by \`npm run bench:profile -- --write ${values.write}\` (bench/profile.ts): each targeted framework's four cells ` +
      '(our adapter with the memory store and the hand-written check with a bare bounded `Map`; our adapter verifying only and the ' +
      'hand-written check), profiled together. A profile costs its server some speed: compare these cells with each other, not with ' +
      'bench/RESULTS.md. Between runs a part moves by a microsecond or more and a whole cell by up to a fifth: read parts as sizes.\n\n';
    writeFileSync(values.write, `${heading}${report}\n`);
  }
}

runAsCommand(import.meta.url, main);

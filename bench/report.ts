/**
 * What a section hands back, and how it is printed: Markdown tables with ratios (median and
 * min–max over repetitions), absolute figures for context, and each target marked pass or miss.
 */

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, release, totalmem, type } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BuiltPackage } from './build.ts';
import type { Chart } from './charts.ts';
import type { Summary } from './stats.ts';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Seconds of load per HTTP run in a quick run (`--quick`): enough for every cell to answer a few
 * hundred requests, which is all the smoke run proves (its figures are not measurements).
 */
export const QUICK_RUN_SECONDS = 0.5;

/** Settings every section reads. */
export interface BenchConfig {
  /** The smoke run: one small size, few iterations, short HTTP runs, a small memory run. */
  quick: boolean;
  /** The package under test, as built for publishing. */
  pkg: BuiltPackage;
}

/** One row of the targets table. */
export interface TargetResult {
  what: string;
  /** The bound the figure must meet, e.g. `≤ 1.5`. */
  target: string;
  /** The measured figure, formatted (a ratio's median and spread, a count, …). */
  measured: string;
  /** Absolute figures the ratio came from. */
  context: string;
  /** Met; a tie counts as met. */
  pass: boolean;
  /** Met as a tie: the median is past the target, the range of repetitions reaches it. */
  tie?: boolean;
}

export interface SectionReport {
  /** The `--only` name. */
  id: SectionId;
  title: string;
  /** The section's own tables and remarks, in Markdown. */
  body: string;
  targets: TargetResult[];
  /** Wall time of the section, in seconds. */
  seconds?: number;
  /** The machine's 1-minute load average, sampled while the section ran. */
  load?: LoadSample;
  /** Charts of the section's figures (bars, growth curves), written as SVG by a full run. */
  charts?: Chart[];
}

/** Load averages seen during a section, and the core count they are judged against. */
export interface LoadSample {
  min: number;
  max: number;
  cores: number;
}

/**
 * A section is flagged when the 1-minute load average went above the core count while it ran:
 * more work was runnable than there were cores, competing with the candidates and their baselines.
 * That work may be another process's or the bench's own (its HTTP and store sections run servers
 * and load generators, and the average carries their load into the sections after them).
 */
export function loadIsHigh(load: LoadSample): boolean {
  return load.max > load.cores;
}

export function loadWarning(title: string, load: LoadSample): string {
  return (
    `**Warning**: the load average (1 min) reached ${fixed(load.max, 1)} on ${load.cores} cores during "${title}": more work ` +
    'was runnable than there are cores, from other processes or from the bench\'s own servers and load generators (the ' +
    'one-minute average carries a load-generating section\'s load into the sections after it), so its absolute figures may ' +
    'be low and its ratios noisier than usual (CPU-time ratios hold best).'
  );
}

export const SECTION_IDS = ['peers', 'rotation', 'webcrypto', 'http', 'redis', 'memory', 'sign', 'forged', 'stores', 'http-stores', 'receiver', 'keys', 'curves', 'ordering', 'inbox', 'capacity'] as const;
export type SectionId = (typeof SECTION_IDS)[number];

/**
 * Each section's time budget in a full run, in seconds: a section that takes longer is
 * flagged in the report, and the growth curves and the tenant-key curve stop sampling points when
 * theirs runs out. Each leaves its section room for a loaded machine, so together they come to
 * more than {@link FULL_RUN_BUDGET_SECONDS}, which a run on a quiet machine keeps.
 */
export const SECTION_BUDGET_SECONDS: Record<SectionId, number> = {
  peers: 90,
  rotation: 15,
  webcrypto: 30,
  http: 420,
  redis: 30,
  memory: 30,
  sign: 15,
  forged: 30,
  stores: 120,
  'http-stores': 90,
  receiver: 20,
  keys: 45,
  curves: 90,
  ordering: 30,
  inbox: 165,
  capacity: 270,
};

// ---------------------------------------------------------------------------------------------
// Formatting

export function fixed(value: number, digits = 2): string {
  return value.toFixed(digits);
}

/** A difference with its sign, `+0.25` or `-0.25`; under half the last digit either way, zero (never `-0.00`). */
export function signedFixed(value: number, digits = 2): string {
  const half = 0.5 * 10 ** -digits;
  return value >= half ? `+${fixed(value, digits)}` : value <= -half ? fixed(value, digits) : fixed(0, digits);
}

/**
 * A ratio judged as every target is: met when its median is within `limit`; a tie when only its
 * range (min–max over repetitions) reaches it, counted as met and said so in `measured`; else
 * missed. Spread into a {@link TargetResult}.
 */
export function judged(s: Pick<Summary, 'median' | 'min' | 'max'>, bound: '≤' | '≥', limit: number): Pick<TargetResult, 'measured' | 'pass' | 'tie'> {
  const within = (value: number) => (bound === '≤' ? value <= limit : value >= limit);
  const tie = !within(s.median) && within(bound === '≤' ? s.min : s.max);
  return { measured: `${ratioText(s)}${tie ? ': a tie' : ''}`, pass: tie || within(s.median), tie };
}

/** `1.26 (1.20–1.31)`: a ratio's median and its spread. */
export function ratioText(s: Pick<Summary, 'median' | 'min' | 'max'>, digits = 2): string {
  return `${fixed(s.median, digits)} (${fixed(s.min, digits)}–${fixed(s.max, digits)})`;
}

/** A duration in seconds, in the unit that reads best. */
export function timeText(seconds: number): string {
  if (seconds >= 1) return `${fixed(seconds, 2)} s`;
  if (seconds >= 1e-3) return `${fixed(seconds * 1e3, seconds >= 0.1 ? 0 : 2)} ms`;
  if (seconds >= 1e-6) return `${fixed(seconds * 1e6, seconds >= 1e-4 ? 0 : seconds >= 1e-5 ? 1 : 2)} µs`;
  return `${fixed(seconds * 1e9, 0)} ns`;
}

/** `3.10 µs (3.02–3.40)`. */
export function timeSummary(s: Summary): string {
  return `${timeText(s.median)} (${timeText(s.min)}–${timeText(s.max)})`;
}

export function rateText(perSecond: number): string {
  return Math.round(perSecond).toLocaleString('en-US');
}

export function bytesText(bytes: number): string {
  if (Math.abs(bytes) >= 1024 ** 3) return `${fixed(bytes / 1024 ** 3, 1)} GiB`;
  if (Math.abs(bytes) >= 1024 * 1024) return `${fixed(bytes / 1024 / 1024, 1)} MiB`;
  if (Math.abs(bytes) >= 1024) return `${fixed(bytes / 1024, 1)} KiB`;
  return `${Math.round(bytes)} B`;
}

/** A Markdown table. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** The line under the targets' heading when some are ties: its start (the README reads the count after it) and its rest. */
export const TIES_LINE_START = 'Met:';
const TIES_LINE_REST =
  "the median over repetitions is past the target, but the range of repetitions reaches it (a range that spans the target is a tie, as the targets are judged): on this machine the two can't be told apart.";

function mark(target: TargetResult): string {
  return target.tie === true ? 'tie' : target.pass ? 'pass' : '**MISS**';
}

// ---------------------------------------------------------------------------------------------
// Where the numbers were taken

/** The version of an installed package, from its package.json (`not installed` when absent). */
function packageVersion(name: string): string {
  try {
    const json = JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version?: string };
    return json.version ?? '?';
  } catch {
    return 'not installed';
  }
}

function redisServerVersion(): string {
  try {
    const out = execFileSync('redis-server', ['--version'], { encoding: 'utf8', timeout: 5000 });
    return /v=(\S+)/.exec(out)?.[1] ?? out.trim();
  } catch {
    return 'not installed';
  }
}

const PACKAGES = ['express', 'fastify', 'hono', '@hono/node-server', 'koa', '@nestjs/core', 'autocannon', 'ioredis', 'redis', 'pg', 'postgres', '@aws-sdk/client-dynamodb', 'dynalite', 'bullmq', 'pg-boss', 'vega', 'vega-lite'] as const;

/** The peer libraries section 1 measures, with their versions. */
export function peerVersions(): string {
  return [
    `standardwebhooks ${packageVersion('standardwebhooks')}`,
    `svix ${packageVersion('svix2')} (installed as \`svix2\`)`,
    `@octokit/webhooks-methods ${packageVersion('@octokit/webhooks-methods')}`,
    `stripe ${packageVersion('stripe')}`,
  ].join(', ');
}

function environmentText(): string {
  const cpu = cpus();
  const own = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  const packages = PACKAGES.map((name) => `${name} ${packageVersion(name)}`).join(', ');
  return [
    `- Machine: ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${cpu.length} cores, ${bytesText(totalmem())} memory; ${type()} ${release()}`,
    `- Runtime: Node ${process.version} (V8 ${process.versions.v8}), OpenSSL ${process.versions.openssl}; redis-server ${redisServerVersion()}`,
    `- Peers: ${peerVersions()}`,
    `- Packages: ${own.name} ${own.version}; ${packages}`,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// The whole report

export interface RunInfo {
  startedAt: Date;
  seconds: number;
  quick: boolean;
  only: SectionId | undefined;
}

/** What `npm run bench` must stay under, all sections together: 20 minutes (about 18 on a quiet two-core machine). */
export const FULL_RUN_BUDGET_SECONDS = 1200;

export function renderReport(sections: readonly SectionReport[], run: RunInfo): string {
  const targets = sections.flatMap((s) => s.targets);
  const missed = targets.filter((t) => !t.pass).length;
  const ties = targets.filter((t) => t.tie === true).length;
  const kind = run.quick ? 'quick smoke run (few iterations: not a measurement)' : run.only ? `section ${run.only} only` : 'full run';
  const warnings = sections.filter((s) => s.load !== undefined && loadIsHigh(s.load)).map((s) => `- ${loadWarning(s.title, s.load!)}`);
  if (!run.quick && run.only === undefined && run.seconds > FULL_RUN_BUDGET_SECONDS) {
    warnings.push(`- **Warning**: the full run took ${Math.round(run.seconds)} s, over its budget of ${FULL_RUN_BUDGET_SECONDS} s.`);
  }
  if (!run.quick) {
    for (const s of sections) {
      if (s.seconds !== undefined && s.seconds > SECTION_BUDGET_SECONDS[s.id]) {
        warnings.push(`- **Warning**: "${s.title}" took ${Math.round(s.seconds)} s, over its budget of ${SECTION_BUDGET_SECONDS[s.id]} s.`);
      }
    }
  }
  const parts = [
    '# Benchmark results',
    '',
    `Written by \`npm run bench\`: ${kind} on Node ${process.version}, started ${run.startedAt.toISOString().replace('T', ' ').slice(0, 16)} UTC, wall time ${Math.round(run.seconds)} s.`,
    '',
    environmentText(),
    '',
    ...(warnings.length > 0 ? [...warnings, ''] : []),
    'Every ratio is measured within one repetition, where the candidate and its baseline ran back to back in an order ' +
      'that rotates between repetitions; the figure is the median over repetitions, with min–max in brackets. ' +
      'Absolute figures are medians too, for context only: they move with the machine, the ratios much less. ' +
      'This package is measured as it ships: built by tsdown with the project\'s configuration (ESM), then imported.',
    '',
    `## Targets (${targets.length - missed} of ${targets.length} met)`,
    '',
    ...(ties > 0 ? [`${TIES_LINE_START} ${ties} of them ${ties === 1 ? 'is a tie' : 'are ties'}: ${TIES_LINE_REST}`, ''] : []),
    table(
      ['what', 'target', 'measured', 'from', ''],
      targets.map((t) => [t.what, t.target, t.measured, t.context, mark(t)]),
    ),
  ];
  for (const section of sections) {
    parts.push('', `## ${section.title}`, '', section.body.trim());
    if (section.seconds !== undefined) {
      const load = section.load === undefined ? '' : `; load average (1 min) ${fixed(section.load.min, 1)}–${fixed(section.load.max, 1)} on ${section.load.cores} cores`;
      parts.push('', `_Section wall time: ${section.seconds.toFixed(1)} s (budget ${SECTION_BUDGET_SECONDS[section.id]} s)${load}._`);
    }
    if (section.load !== undefined && loadIsHigh(section.load)) parts.push('', loadWarning(section.title, section.load));
  }
  return `${parts.join('\n')}\n`;
}

/**
 * The line after which bench/RESULTS.md holds figures measured apart from the full run (other
 * Node lines, telemetry, a before-and-after of a change): a full run rewrites what comes before it
 * and carries the rest over unchanged.
 */
export const KEPT_MARKER = '<!-- kept: measured apart from the full run; a full run carries everything below over -->';

/** `report` followed by the kept part of `previous` (the file it replaces), when it has one. */
export function withKeptPart(report: string, previous: string | undefined): string {
  const at = previous?.indexOf(KEPT_MARKER) ?? -1;
  return at === -1 ? report : `${report.trimEnd()}\n\n${previous!.slice(at)}`;
}

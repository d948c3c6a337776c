/**
 * `npm run bench`: every section, a Markdown report printed and written to bench/RESULTS.md, the
 * charts written to docs/benchmarks/, the README's benchmark block regenerated.
 *
 *   npm run bench                       the full run (under fifteen minutes), on the newest LTS line (Node 26,
 *                                       installed from npm on first use as the test command installs it, see
 *                                       test/support/node-lines.ts): writes bench/RESULTS.md, docs/benchmarks/*.svg
 *                                       and README.md's marked block
 *   npm run bench -- --quick            the smoke run: few iterations, short HTTP runs (not a measurement), on the
 *                                       Node that runs it (the test command runs it on Node 26)
 *   npm run bench -- --section <name>  one section: peers, rotation, webcrypto, http, redis, memory, sign, forged,
 *                                       stores, http-stores, receiver, keys, curves, ordering, inbox, capacity (`--only <name>` is the same
 *                                       flag)
 *   npm run bench -- --node <major>     run on that Node line (22, 24, 26, …) instead of the default; the report
 *                                       names the Node it ran on, as always
 *   npm run bench -- --out <file>       write the report there (a quick or partial run writes nowhere by default)
 *   npm run bench -- --charts <dir>     write the charts there (a quick or partial run writes none by default)
 *   npm run bench -- --readme           only regenerate README.md's benchmark block, and the guides' blocks of measured
 *                                       figures (docs/benchmarks.md, docs/operating.md), from bench/RESULTS.md
 *
 * While a section runs, the machine's load average is sampled; a section that ran while it was
 * above the core count, or past its time budget, is flagged in the report and on stderr.
 */

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { FULL_SUITE_LINE, rerunOnLine } from '../test/support/node-lines.ts';
import { buildPackage } from './build.ts';
import { runCapacity } from './capacity.ts';
import { writeCharts } from './charts.ts';
import { updateDocBlocks } from './doc-blocks.ts';
import { runCurves } from './curves.ts';
import { runForged } from './forged.ts';
import { README_END, README_START, updateReadme } from './readme.ts';
import { runPeers } from './peers.ts';
import { runHttp } from './http.ts';
import { runHttpStores } from './http-stores.ts';
import { runInbox } from './inbox.ts';
import { runKeys } from './keys.ts';
import { runMemory } from './memory.ts';
import { runOrdering } from './ordering.ts';
import { runReceiver } from './receiver.ts';
import { runRedis } from './redis.ts';
import {
  FULL_RUN_BUDGET_SECONDS,
  loadIsHigh,
  loadWarning,
  renderReport,
  ROOT,
  SECTION_IDS,
  type BenchConfig,
  type LoadSample,
  type SectionId,
  type SectionReport,
  withKeptPart,
} from './report.ts';
import { runRotation } from './rotation.ts';
import { runStores } from './stores.ts';
import { runSign } from './sign.ts';
import { runWebCrypto } from './webcrypto.ts';

const SECTIONS: Record<SectionId, (config: BenchConfig) => Promise<SectionReport>> = {
  peers: runPeers,
  rotation: runRotation,
  webcrypto: runWebCrypto,
  http: runHttp,
  redis: runRedis,
  memory: runMemory,
  sign: runSign,
  forged: runForged,
  stores: runStores,
  'http-stores': runHttpStores,
  receiver: runReceiver,
  keys: runKeys,
  curves: runCurves,
  ordering: runOrdering,
  inbox: runInbox,
  capacity: runCapacity,
};

function isSectionId(value: string): value is SectionId {
  return (SECTION_IDS as readonly string[]).includes(value);
}

/** Samples the 1-minute load average every few seconds until `stop()`. */
function sampleLoad(): { stop(): LoadSample } {
  const cores = cpus().length;
  let min = loadavg()[0]!;
  let max = min;
  const take = () => {
    const now = loadavg()[0]!;
    min = Math.min(min, now);
    max = Math.max(max, now);
  };
  const timer = setInterval(take, 2000);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      take();
      return { min, max, cores };
    },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      section: { type: 'string' },
      only: { type: 'string' },
      out: { type: 'string' },
      readme: { type: 'boolean', default: false },
      node: { type: 'string' },
      charts: { type: 'string' },
    },
    strict: true,
  });
  if (values.readme) {
    readme('from bench/RESULTS.md');
    return;
  }
  if (values.section !== undefined && values.only !== undefined && values.section !== values.only) {
    throw new TypeError('--section and --only are the same flag: give one');
  }
  const only = values.section ?? values.only;
  if (only !== undefined && !isSectionId(only)) {
    throw new TypeError(`--section takes one of ${SECTION_IDS.join(', ')}; got ${JSON.stringify(only)}`);
  }
  if (values.node !== undefined) {
    process.exitCode = await onLine(values.node, process.argv.slice(2));
    return;
  }
  // A measuring run (not --quick) is on the newest LTS line unless --node names another: the
  // package supports 22 and later, and the headline must be on the Node users run.
  const major = Number(process.versions.node.split('.')[0]);
  if (!values.quick && major !== FULL_SUITE_LINE) {
    process.stderr.write(`bench: this is Node ${process.versions.node}; a measuring run is on Node ${FULL_SUITE_LINE} (the newest LTS line) unless --node names another\n`);
    process.exitCode = await onLine(String(FULL_SUITE_LINE), process.argv.slice(2));
    return;
  }
  const startedAt = new Date();
  const start = performance.now();
  const pkg = await buildPackage();
  const config: BenchConfig = { quick: values.quick ?? false, pkg };

  const reports: SectionReport[] = [];
  try {
    for (const id of only === undefined ? SECTION_IDS : [only]) {
      process.stderr.write(`bench: ${id}…\n`);
      const sectionStart = performance.now();
      const load = sampleLoad();
      const report = await SECTIONS[id](config);
      report.seconds = (performance.now() - sectionStart) / 1000;
      report.load = load.stop();
      process.stderr.write(`bench: ${id} done in ${report.seconds.toFixed(1)} s\n`);
      if (loadIsHigh(report.load)) process.stderr.write(`bench: ${loadWarning(report.title, report.load).replace(/\*\*/g, '')}\n`);
      reports.push(report);
    }
  } finally {
    pkg.remove();
  }

  const seconds = (performance.now() - start) / 1000;
  if (!config.quick && only === undefined && seconds > FULL_RUN_BUDGET_SECONDS) {
    process.stderr.write(`bench: the full run took ${Math.round(seconds)} s, over its budget of ${FULL_RUN_BUDGET_SECONDS} s\n`);
  }
  const markdown = renderReport(reports, { startedAt, seconds, quick: config.quick, only });
  process.stdout.write(markdown);
  // Charts: a full run replaces the committed ones; a smoke or partial run writes them only where told.
  const chartsDir = values.charts ?? (config.quick || only !== undefined ? undefined : join(ROOT, 'docs', 'benchmarks'));
  if (chartsDir !== undefined) {
    // A smoke run's charts say so in their titles, wherever they end up.
    const charts = reports.flatMap((r) => r.charts ?? []).map((chart) => (config.quick ? { ...chart, title: `${chart.title} (quick smoke run: not a measurement)` } : chart));
    const written = await writeCharts(charts, chartsDir);
    process.stderr.write(`bench: ${written.length} charts written to ${chartsDir}\n`);
  }
  // Only a full run replaces the committed results; a smoke or partial run writes where told.
  const results = join(ROOT, 'bench', 'RESULTS.md');
  const out = values.out ?? (config.quick || only !== undefined ? undefined : results);
  if (out !== undefined) {
    // The figures measured apart (other Node lines, telemetry) stay when the full run is redone.
    writeFileSync(out, out === results ? withKeptPart(markdown, existsSync(results) ? readFileSync(results, 'utf8') : undefined) : markdown);
    process.stderr.write(`bench: written to ${out}\n`);
    if (out === results) readme('');
  }
}

/**
 * Regenerates README.md's benchmark block; a README without the markers is reported, not fatal
 * (the results and charts are written either way).
 */
function readme(from: string): void {
  const outcome = updateReadme();
  if (outcome === 'no-markers') {
    process.stderr.write(
      `bench: README.md has no benchmark block, so it was left alone: put the lines\n  ${README_START}\n  ${README_END}\n` +
        'where the headline belongs, then run `npm run bench -- --readme`\n',
    );
  } else {
    process.stderr.write(`bench: README.md benchmark block regenerated${from ? ` ${from}` : ''}\n`);
  }
  // The guides' blocks of measured figures (docs/benchmarks.md's Node 24 and claim + complete blocks, docs/operating.md's capacity block).
  for (const file of updateDocBlocks()) process.stderr.write(`bench: ${file} has no generated block's markers, so it was left alone\n`);
}

/**
 * Runs this same command under Node `line` (the reference library gains more from newer
 * V8 than this package does, so the margins differ by line), without `--node`: the child's report
 * records the Node it ran on.
 */
function onLine(line: string, args: string[]): Promise<number> {
  return rerunOnLine(line, join('bench', 'run.ts'), args, 'bench');
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);

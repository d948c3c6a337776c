/**
 * `npm run test:lines` (the last step of `npm test`): the whole suite (vitest.config.ts) on the
 * newest LTS line, Node 26, and the smoke subset (vitest.lines.config.ts) on the other lines users
 * run, 22 and 24, one after the other, with vitest itself running under that line's binary so that
 * its workers, and every child process a test starts with `process.execPath`, are that line too.
 * The machine's own Node may be an unsupported line (20 here) that only runs npm: no test runs on
 * it. The binaries come from npm on first use and are then reused (test/support/node-lines.ts);
 * the machine's own Node stays the one on the PATH.
 *
 *   npm run test:lines                     the whole suite on 26, the smoke subset on 22 and 24
 *   npm run test:lines -- --lines 24,26    some lines (26 still runs the whole suite)
 *   npm run test:lines -- --smoke          the smoke subset on every line, 26 included
 *   npm run test:lines -- --refresh        reinstall each line's newest release first
 *   npm run test:lines -- -- <vitest args> passed to each vitest run (e.g. a file filter)
 *
 * A line that cannot be installed (no registry, no binary package for this platform) is skipped
 * with a notice, except under CI, where that is a failure.
 */

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { isCI } from '../support/redis-server.ts';
import { ensureNode, FULL_SUITE_LINE, NODE_LINES, NodeLineError, runWith, type NodeBinary } from '../support/node-lines.ts';

const root = resolve(import.meta.dirname, '../..');
const vitest = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');

function parseLines(text: string | undefined): number[] {
  if (text === undefined) return [...NODE_LINES];
  const lines = text.split(',').map((part) => Number(part.trim()));
  if (lines.length === 0 || lines.some((major) => !Number.isInteger(major))) {
    throw new TypeError(`--lines takes major versions separated by commas, e.g. 22,24,26; got ${JSON.stringify(text)}`);
  }
  return lines;
}

/** What a vitest JSON report (`--reporter=json`) says of a failed run, as much as this reads of it. */
interface JsonReport {
  numFailedTests?: number;
  testResults?: { name: string; status: string; message?: string; assertionResults?: { fullName: string; status: string; duration?: number; failureMessages?: string[] }[] }[];
}

/**
 * What vitest's JSON report gives as a test's error when the test timed out: a placeholder, not
 * the "Test timed out" its own output prints.
 */
const TIMEOUT_PLACEHOLDER = 'Error: STACK_TRACE_ERROR';

/** The first line of a failure's message, shortened: enough to name it in a summary. */
const firstLine = (text: string | undefined) => (text ?? '').split('\n', 1)[0]!.slice(0, 300);

/**
 * The failed tests a run's JSON report lists (file, test and the first line of its error), or
 * why none are listed: a run that failed outside any test (an unhandled error, a setup that
 * threw) says so above, in vitest's own output.
 */
function failuresIn(reportPath: string): string[] {
  let report: JsonReport;
  try {
    report = JSON.parse(readFileSync(reportPath, 'utf8')) as JsonReport;
  } catch {
    return ['no report was written: the run ended before vitest reported (see its output above)'];
  }
  const failures: string[] = [];
  for (const file of report.testResults ?? []) {
    const name = relative(root, file.name);
    const failed = (file.assertionResults ?? []).filter((test) => test.status === 'failed');
    for (const test of failed) {
      const error = firstLine(test.failureMessages?.[0]);
      const said = error === TIMEOUT_PLACEHOLDER ? `timed out after ${((test.duration ?? 0) / 1000).toFixed(1)} s` : error;
      failures.push(`${name} > ${test.fullName}: ${said}`);
    }
    if (failed.length === 0 && file.status === 'failed') failures.push(`${name}: ${firstLine(file.message) || 'failed outside its tests'}`);
  }
  return failures.length > 0 ? failures : ['no test failed: an error outside the tests (vitest lists it above as an unhandled error) failed the run'];
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: { lines: { type: 'string' }, refresh: { type: 'boolean', default: false }, smoke: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: true,
  });
  const lines = parseLines(values.lines);
  const log = (text: string) => console.log(`node-lines: ${text}`);

  // Installs run side by side (each is one download); the test runs do not, they share two cores.
  const started = performance.now();
  const ready = await Promise.all(
    lines.map(async (major): Promise<NodeBinary | NodeLineError> => {
      try {
        return await ensureNode(major, { refresh: values.refresh, log });
      } catch (error) {
        if (error instanceof NodeLineError) return error;
        throw error;
      }
    }),
  );
  const missing = ready.filter((entry): entry is NodeLineError => entry instanceof NodeLineError);
  for (const error of missing) console.warn(`\n  NOTICE: ${error.message}; that line's run is SKIPPED.\n`);
  if (missing.length > 0 && isCI()) {
    console.error('node-lines: CI is set, so a line that cannot be tested is a failure.');
    return 1;
  }
  const binaries = ready.filter((entry): entry is NodeBinary => !(entry instanceof NodeLineError));
  for (const binary of binaries) {
    log(`Node ${binary.major}: v${binary.version} at ${relative(root, binary.path)} (${binary.installed ? 'installed now' : 'cached'})`);
  }
  const setupSeconds = (performance.now() - started) / 1000;

  // Each run's JSON report, read back below: a CI log shows its tail, so the tests that failed on an
  // earlier line are named again after the last line's run.
  const reports = mkdtempSync(join(tmpdir(), 'node-lines-'));
  const results: { version: string; what: string; code: number; seconds: number; report: string }[] = [];
  for (const binary of binaries) {
    const whole = binary.major === FULL_SUITE_LINE && !values.smoke;
    const what = whole ? 'the whole suite' : 'the smoke subset';
    console.log(`\nnode-lines: ${what} on Node v${binary.version} (${relative(root, binary.path)})\n`);
    const runStarted = performance.now();
    const report = join(reports, `node-${binary.major}.json`);
    const config = whole ? 'vitest.config.ts' : 'vitest.lines.config.ts';
    const code = await runWith(binary.path, [vitest, 'run', '--config', config, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...positionals]);
    results.push({ version: binary.version, what, code, seconds: (performance.now() - runStarted) / 1000, report });
  }

  console.log(`\nnode-lines: binaries ready in ${setupSeconds.toFixed(1)} s`);
  for (const { version, what, code, seconds, report } of results) {
    console.log(`node-lines: Node v${version}, ${what}: ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${seconds.toFixed(1)} s`);
    if (code !== 0) for (const line of failuresIn(report)) console.log(`node-lines:   ${line}`);
  }
  rmSync(reports, { recursive: true, force: true });
  for (const error of missing) console.log(`node-lines: SKIPPED: ${error.message}`);
  return results.every((result) => result.code === 0) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(2);
  },
);

/**
 * Before and after a change that should not change speed (a restructuring): the package built at
 * an earlier revision and as it is now, each row's two candidates timed interleaved in one process
 * (bench/stats.ts), so the machine's drift falls on both alike. A row holds when the ratio's range
 * spans 1 or lies below it.
 *
 * Rows: verify (valid and forged, 1 KiB, one `whsec_` secret), the receiver's claim + complete and
 * `handle` with a handler that does nothing (memory store, a fresh id a call, signed untimed).
 *
 *   node --import tsx bench/before-after.ts --base <revision> [--quick]   (on the Node that runs it)
 *
 * The earlier revision is checked out into a temporary git worktree (removed afterwards) and built
 * there by its own build command; the current tree is built as the other sections build it
 * (bench/build.ts). Prints a Markdown section.
 */

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { buildPackage } from './build.ts';
import { freshCandidate, jsonBody, KiB, newSecret, type SignedMessage } from './fixtures.ts';
import { ratioText, ROOT, table, timeText } from './report.ts';
import { microTiming, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

type Index = typeof import('../src/index.ts');

/** Keeps results alive, so no timed call is optimised away. */
let sink = 0;

/** The package's index as built at `revision`, from a temporary worktree; `remove()` deletes it. */
function buildAt(revision: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'webhook-receiver-before-'));
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  git('worktree', 'add', '--detach', dir, revision);
  const remove = () => {
    git('worktree', 'remove', '--force', dir);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    execFileSync(process.execPath, [join(ROOT, 'node_modules', 'tsdown', 'dist', 'run.mjs'), '--log-level', 'error'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    return { dir, remove };
  } catch (error) {
    remove();
    throw error;
  }
}

/** The four rows' candidates for one build, named `<row>, <label>`. */
function candidatesOf(pkg: Index, label: string): Candidate[] {
  const { createReceiver, createVerifier, memoryStore } = pkg;
  const { secret, key } = newSecret();
  const forgedKey = newSecret().key;
  const body = jsonBody(KiB);
  const verifier = createVerifier({ secrets: secret });
  const claiming = createReceiver({ secrets: secret, idempotency: { store: memoryStore() } });
  const handling = createReceiver({ secrets: secret, idempotency: { store: memoryStore() } });
  let serial = 0;
  const nextId = () => `msg_${label}_${(serial++).toString(36)}`;
  const fresh = (name: string, signWith: typeof key, run: (message: SignedMessage) => Promise<void>): Candidate => freshCandidate(`${name}, ${label}`, signWith, body, nextId, run);
  return [
    fresh('verify, valid', key, async ({ headers, body: raw }) => {
      sink ^= (await verifier.verify({ headers, body: raw })).id.length;
    }),
    fresh('verify, forged', forgedKey, async ({ headers, body: raw }) => {
      const refused = await verifier.verify({ headers, body: raw }).then(
        () => false,
        () => true,
      );
      if (!refused) throw new Error('a forged message was accepted: the comparison would be meaningless');
      sink ^= 1;
    }),
    fresh('claim + complete', key, async ({ headers, body: raw }) => {
      const claim = await claiming.claim({ headers, body: raw });
      if (claim.outcome !== 'acquired') throw new Error(`a fresh id was answered ${claim.outcome}`);
      await claim.complete();
      sink ^= claim.webhook.id.length;
    }),
    fresh('handle', key, async ({ headers, body: raw }) => {
      const result = await handling.handle({ headers, body: raw }, () => undefined);
      if (result.outcome !== 'processed') throw new Error(`a fresh id was answered ${result.outcome}`);
      sink ^= result.webhook.id.length;
    }),
  ];
}

const ROWS = ['verify, valid', 'verify, forged', 'claim + complete', 'handle'];

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { base: { type: 'string' }, quick: { type: 'boolean', default: false } }, strict: true });
  if (values.base === undefined) throw new TypeError('--base <revision> names the revision to compare with, e.g. --base HEAD~10');
  const before = buildAt(values.base);
  const after = await buildPackage();
  try {
    const old = (await import(pathToFileURL(join(before.dir, 'dist', 'index.mjs')).href)) as Index;
    const candidates = [...candidatesOf(old, 'before'), ...candidatesOf(after.index, 'after')];
    const timings = await timeInterleaved(candidates, microTiming(values.quick));
    const rows = ROWS.map((row) => {
      const was = series(timings, `${row}, before`);
      const now = series(timings, `${row}, after`);
      const ratio = summarize(ratios(now, was));
      return [row, timeText(summarize(was).median), timeText(summarize(now).median), ratioText(ratio), ratio.min <= 1 ? 'holds' : '**slower**'];
    });
    const revision = execFileSync('git', ['rev-parse', '--short', values.base], { cwd: ROOT, encoding: 'utf8' }).trim();
    console.log(
      [
        `## Before and after the restructuring (\`node --import tsx bench/before-after.ts --base ${revision}\`, Node ${process.versions.node})`,
        '',
        `Node ${process.version}; the package built at ${revision} and as it is now, each row's two candidates interleaved in one process: time per call (median of ${microTiming(values.quick).reps} repetitions), and after ÷ before (median, min–max). A row holds when that range reaches 1 or below.`,
        '',
        table(['row (1 KiB, memory store)', 'before', 'after', 'after ÷ before', ''], rows),
      ].join('\n'),
    );
  } finally {
    after.remove();
    before.remove();
    if (sink === 0.5) console.log('');
  }
}

await main();

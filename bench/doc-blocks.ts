/**
 * The blocks of the guides that carry measured figures, generated from bench/RESULTS.md as the
 * README's headline is (readme.ts) and written between markers: docs/benchmarks.md's Node 24
 * block (section 1's table on Node 24: what keying with a `KeyObject` gains there), its split of
 * what claim + complete adds (section 11's rows) and docs/operating.md's capacity block (section
 * 16's tables). A full `npm run bench` regenerates them
 * after writing RESULTS.md, `npm run bench -- --readme` does it alone; where RESULTS.md has no
 * figure yet, the block says "not measured yet" and invents none.
 */

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  BARE_MAP,
  CAPACITY_TITLE,
  CLAIM,
  FLOOR,
  HAND,
  HAND_BUFFER,
  HAND_GITHUB,
  OURS,
  PARTS_HEADING,
  RECEIVER_ONLY,
  RECEIVER_TITLE,
  SCALE_HEADING,
  STORE_ONLY,
  TWO_HEADING,
  USAGE_HEADING,
} from './labels.ts';
import { firstTable } from './readme.ts';
import { ROOT, table } from './report.ts';

/** One generated block: the file (from the repository's root), its markers, what it holds. */
export interface DocBlock {
  file: string;
  start: string;
  end: string;
  render(results: string): string;
}

const markers = (name: string) => ({
  start: `<!-- ${name}:start (generated from bench/RESULTS.md by \`npm run bench -- --readme\`) -->`,
  end: `<!-- ${name}:end -->`,
});

const NOT_MEASURED = 'Not measured yet: bench/RESULTS.md holds no such figures. A full `npm run bench` (on a quiet machine) writes them here.';

/** `Written by …` of a RESULTS.md: what kind of run, and when. */
function stamp(results: string): string {
  const match = /^Written by `npm run bench`: (.+?), started (.+? UTC)/m.exec(results);
  return match === null ? 'bench/RESULTS.md' : `bench/RESULTS.md (${match[1]}, ${match[2]})`;
}

/** The text of section `title` of a RESULTS.md (up to the next `## `), or `undefined`. */
function sectionOf(results: string, title: string): string | undefined {
  const at = results.indexOf(`\n## ${title}\n`);
  if (at === -1) return undefined;
  const rest = results.slice(at + 1);
  const next = rest.indexOf('\n## ', 3);
  return next === -1 ? rest : rest.slice(0, next);
}

/** The header and rows of the first table after `heading` in `text`, as Markdown again. */
function tableAfter(text: string, heading: string): string | undefined {
  const at = text.indexOf(`\n${heading}\n`);
  if (at === -1) return undefined;
  const lines = text.slice(at + heading.length + 2).split('\n');
  const start = lines.findIndex((line) => line.startsWith('|'));
  if (start === -1 || lines.slice(0, start).some((line) => line.startsWith('#'))) return undefined;
  const end = lines.findIndex((line, i) => i > start && !line.startsWith('|'));
  return lines.slice(start, end === -1 ? undefined : end).join('\n');
}

/** `2.58 µs` → seconds. */
function seconds(text: string): number {
  const match = /^([\d.]+) (ns|µs|ms|s)$/.exec(text.trim());
  if (match === null) return Number.NaN;
  return Number(match[1]) * { ns: 1e-9, µs: 1e-6, ms: 1e-3, s: 1 }[match[2] as 'ns' | 'µs' | 'ms' | 's'];
}

/** docs/benchmarks.md's Node 24 block, from section 1's table on each Node line. */
export function node24Block(results: string): string {
  const heading = results.indexOf('\n### On each Node line\n');
  const rows = heading === -1 ? [] : firstTable(results, heading).filter((row) => row[0]?.startsWith('v24.'));
  const cell = (request: string, candidate: string) => rows.find((row) => row[1] === request && row[2] === candidate);
  const request = '1 KiB, valid';
  const ours = cell(request, OURS);
  const hand = cell(request, HAND);
  const buffer = cell(request, HAND_BUFFER);
  if (ours === undefined || hand === undefined || buffer === undefined) return NOT_MEASURED;
  const gain = seconds(buffer[3]!) / seconds(ours[3]!);
  const shown = [OURS, HAND, HAND_BUFFER, FLOOR, HAND_GITHUB, '@octokit/webhooks-methods', 'standardwebhooks'];
  return [
    `On Node ${ours[0]}, one valid 1 KiB request: ours ${ours[3]}, the hand-written check keyed with a \`KeyObject\` ` +
      `${hand[3]} (${hand[4]} of ours), the same check keyed with the secret's bytes ${buffer[3]} (${buffer[4]} of ours). ` +
      `The check keyed with a Buffer takes ${gain.toFixed(1)} times as long as this package's verification: that is what ` +
      'an app on Node 24 that keys `createHmac` with the bytes gains by moving to this package, which imports each secret ' +
      'once as a `KeyObject`. From ' +
      `${stamp(results)}:`,
    '',
    table(
      ['request', 'candidate', 'time per call', '÷ ours', '÷ floor'],
      rows.filter((row) => shown.includes(row[2]!)).map((row) => [row[1]!, row[2]!, row[3]!, row[4]!, row[5]!]),
    ),
  ].join('\n');
}

/** docs/operating.md's capacity block, from section 16. */
export function capacityBlock(results: string): string {
  const section = sectionOf(results, CAPACITY_TITLE);
  const parts = section === undefined ? undefined : tableAfter(section, PARTS_HEADING);
  if (parts === undefined) return NOT_MEASURED;
  const usage = tableAfter(section!, USAGE_HEADING);
  const two = tableAfter(section!, TWO_HEADING);
  const scale = tableAfter(section!, SCALE_HEADING);
  const warned = /^\*\*Warning\*\*: the load average/m.test(section!);
  return [
    `Measured on one machine, from ${stamp(results)}${warned ? ' (**the machine was loaded during this run: read the figures as a shape, not as a size**)' : ''}. CPU time per delivery, by process:`,
    '',
    parts,
    '',
    '![CPU time per delivery, by process](benchmarks/capacity-parts.svg)',
    '',
    // A run on a Node that fauxqs does not run on has no AWS shape, and no such table.
    ...(usage === undefined
      ? []
      : [
          "What the DynamoDB store + SQS inbox shape asked of DynamoDB and SQS per delivery, counted from the requests the receiver's and the worker's clients sent (DynamoDB bills write units, SQS requests):",
          '',
          usage,
          '',
        ]),
    "The measured check: two receiver processes sharing one store, each given the load one receiver is given alone, against the model (this machine's cores divided by the summed CPU time per request of one receiver running alone in the same repetition, the load generator included because it shares the cores here; the median of the repetitions, min–max in brackets):",
    '',
    two ?? NOT_MEASURED,
    '',
    'Past this machine, an extrapolation from the per-process figures, not a measurement (deliveries per second):',
    '',
    scale ?? NOT_MEASURED,
    '',
    '![Deliveries per second vs receiver processes, extrapolated](benchmarks/capacity-receivers.svg)',
  ].join('\n');
}

/** What each part of claim + complete costs, as docs/benchmarks.md shows it: section 11's rows. */
const SPLIT_ROWS: readonly [string, string][] = [
  [BARE_MAP, 'the floor: a verification + a bare bounded `Map`'],
  [CLAIM, 'claim + complete (the target: ≤ 1.15 of the floor)'],
  [RECEIVER_ONLY, "the receiver's claim protocol, the bare `Map` as its store"],
  [STORE_ONLY, 'the memory store alone, after a verification'],
];

/** docs/benchmarks.md's split of what claim + complete adds to the floor, from section 11. */
export function receiverSplitBlock(results: string): string {
  const section = sectionOf(results, RECEIVER_TITLE);
  const rows = section === undefined ? [] : firstTable(section, 0);
  const found = SPLIT_ROWS.map(([name, label]) => [label, rows.find((row) => row[0] === name)] as const);
  if (found.some(([, row]) => row === undefined)) return NOT_MEASURED;
  return [
    `From ${stamp(results)}, section 11 (time per delivery: median, min–max; each ratio taken within a repetition):`,
    '',
    table(
      ['what', 'time per delivery', '÷ the floor'],
      found.map(([label, row]) => [label, row![1]!, row![3]!]),
    ),
  ].join('\n');
}

export const DOC_BLOCKS: readonly DocBlock[] = [
  { file: join('docs', 'benchmarks.md'), ...markers('bench-node24'), render: node24Block },
  { file: join('docs', 'benchmarks.md'), ...markers('bench-receiver-split'), render: receiverSplitBlock },
  { file: join('docs', 'operating.md'), ...markers('bench-capacity'), render: capacityBlock },
];

/** Whether `text` holds the block's start marker and, after it, its end marker. */
function hasMarkers(text: string, block: DocBlock): boolean {
  const start = text.indexOf(block.start);
  return start !== -1 && text.indexOf(block.end) > start;
}

/** Replaces the text between `block`'s markers in `text` with its rendering of `results`. */

export function withBlock(text: string, block: DocBlock, results: string): string {
  const start = text.indexOf(block.start);
  const end = text.indexOf(block.end);
  if (!hasMarkers(text, block)) throw new Error(`${block.file} lacks the markers ${block.start} … ${block.end}`);
  return `${text.slice(0, start + block.start.length)}\n${block.render(results)}\n${text.slice(end)}`;
}

/**
 * Regenerates every block from bench/RESULTS.md, in place; returns the files whose markers are
 * missing (left alone: the caller says so, the bench goes on).
 */
export function updateDocBlocks(): string[] {
  const results = readFileSync(join(ROOT, 'bench', 'RESULTS.md'), 'utf8');
  const missing: string[] = [];
  for (const block of DOC_BLOCKS) {
    const path = join(ROOT, block.file);
    const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
    if (!hasMarkers(text, block)) {
      missing.push(block.file);
      continue;
    }
    writeFileSync(path, withBlock(text, block, results));
  }
  return missing;
}

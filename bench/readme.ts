/**
 * The README's benchmark headline, generated from bench/RESULTS.md and written between two markers
 * in README.md: the peer chart, a five-row table (ours, the floor and three peers at 1 KiB and
 * 1 MiB, from section 1) and how many targets the run met, with a link to the full results. A full
 * `npm run bench` does it after writing RESULTS.md; `npm run bench -- --readme` does it alone.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, table, TIES_LINE_START } from './report.ts';

export const README_START = '<!-- bench-table:start (generated from bench/RESULTS.md by `npm run bench -- --readme`) -->';
export const README_END = '<!-- bench-table:end -->';

/** The section 1 rows the headline shows, in this order, and what the README calls them. */
const HEADLINE_ROWS: readonly (readonly [candidate: string, label: string])[] = [
  ['ours, node:crypto', '**webhook-receiver**'],
  ['bare HMAC (floor)', 'bare HMAC of the same bytes (the floor)'],
  ['@octokit/webhooks-methods', '`@octokit/webhooks-methods` (checks no timestamp, no id)'],
  ['Stripe constructEvent', 'Stripe `constructEvent` (parses the JSON too)'],
  ['standardwebhooks', '`standardwebhooks` (`svix` 2 within a few %)'],
];
const HEADLINE_CASES = ['1 KiB, valid', '1 MiB, valid'] as const;
const PEERS_HEADING = /^## 1\. Peers, same work$/m;

/** The cells of a Markdown table row, its escaped pipes restored. */
function cells(line: string): string[] {
  return line
    .slice(1, -1)
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim().replace(/\\\|/g, '|'));
}

/** The body rows of the first Markdown table after `from` in `text`. */
export function firstTable(text: string, from: number): string[][] {
  const lines = text.slice(from).split('\n');
  const start = lines.findIndex((line) => line.startsWith('|'));
  if (start === -1) return [];
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(cells(line));
  }
  return rows;
}

/** `2.58 µs (2.56 µs–2.64 µs)` → `2.58 µs`: a figure's median. */
function median(cell: string): string {
  return cell.replace(/ \(.*\)$/, '');
}

/** The README block for a RESULTS.md text. */
export function readmeHeadline(results: string): string {
  const targets = /^## Targets \((\d+) of (\d+) met\)$/m.exec(results);
  if (targets === null) throw new Error('bench/RESULTS.md has no "## Targets" table');
  const stamp = /^Written by `npm run bench`: (.+?), started (.+? UTC)/m.exec(results);
  const when = stamp ? ` (${stamp[1]}, ${stamp[2]})` : '';
  const ties = new RegExp(`^${TIES_LINE_START} (\\d+) of them`, 'm').exec(results);
  // What a tie is, docs/benchmarks.md says ("Met, tied, missed").
  const tieText = ties === null ? '' : `, ${ties[1]} of them ${ties[1] === '1' ? 'a tie' : 'ties'}`;
  const met = `${targets[1]} of ${targets[2]} targets met${tieText}${when}; every figure, the machine and the fairness notes are in [bench/RESULTS.md](bench/RESULTS.md), how to read them in [docs/benchmarks.md](docs/benchmarks.md).`;
  const heading = PEERS_HEADING.exec(results);
  const rows = heading === null ? [] : firstTable(results, heading.index);
  const cell = (candidate: string, request: string) => rows.find((row) => row[0] === request && row[1] === candidate);
  const found = HEADLINE_ROWS.filter(([candidate]) => HEADLINE_CASES.every((request) => cell(candidate, request) !== undefined));
  if (found.length === 0) return `No peer comparison in bench/RESULTS.md yet: run \`npm run bench\`. ${met}`;
  return [
    'Time per verification of one valid request, each library with its own scheme\'s headers, measured in one run ' +
      '(ratios over ours taken back to back; lower is faster):',
    '',
    '![Time per call of each library ÷ ours](docs/benchmarks/peers.svg)',
    '',
    table(
      ['', ...HEADLINE_CASES.flatMap((request) => [request.replace(', valid', ''), '÷ ours'])],
      found.map(([candidate, label]) => [label, ...HEADLINE_CASES.flatMap((request) => [median(cell(candidate, request)![2]!), median(cell(candidate, request)![3]!)])]),
    ),
    '',
    met,
  ].join('\n');
}

/** Replaces the text between the markers in `readme` with the headline. */
export function withReadmeHeadline(readme: string, results: string): string {
  const start = readme.indexOf(README_START);
  const end = readme.indexOf(README_END);
  if (start === -1 || end < start) throw new Error(`README.md lacks the markers ${README_START} … ${README_END}`);
  return `${readme.slice(0, start + README_START.length)}\n${readmeHeadline(results)}\n${readme.slice(end)}`;
}

/**
 * Regenerates README.md's benchmark block from bench/RESULTS.md, in place. A README without the
 * markers is left alone and reported (`'no-markers'`): the caller says so, the bench goes on.
 */
export function updateReadme(): 'updated' | 'no-markers' {
  const readmePath = join(ROOT, 'README.md');
  const readme = readFileSync(readmePath, 'utf8');
  const start = readme.indexOf(README_START);
  if (start === -1 || readme.indexOf(README_END) < start) return 'no-markers';
  writeFileSync(readmePath, withReadmeHeadline(readme, readFileSync(join(ROOT, 'bench', 'RESULTS.md'), 'utf8')));
  return 'updated';
}

/**
 * The benchmark guide's table of every target, generated from bench/RESULTS.md: the rows of its
 * targets table, written between two markers in docs/benchmarks.md (the README shows a few
 * headline figures and links there). A full `npm run bench` does it after writing RESULTS.md;
 * `npm run bench -- --readme` does it alone, from the committed results.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, table } from './report.ts';

export const README_START = '<!-- bench-table:start (generated from bench/RESULTS.md by `npm run bench -- --readme`) -->';
export const README_END = '<!-- bench-table:end -->';

/** The cells of a Markdown table row, its escaped pipes restored. */
function cells(line: string): string[] {
  return line
    .slice(1, -1)
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim().replace(/\\\|/g, '|'));
}

/** The README table for a RESULTS.md text: what, measured, target and verdict of every target. */
export function readmeTable(results: string): string {
  const heading = /^## Targets \((\d+) of (\d+) met\)$/m.exec(results);
  if (heading === null) throw new Error('bench/RESULTS.md has no "## Targets" table');
  const lines = results.slice(heading.index + heading[0].length).split('\n');
  const start = lines.findIndex((line) => line.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [what, target, measured, , verdict] = cells(line);
    rows.push([what!, measured!, target!, verdict === 'pass' ? 'met' : 'missed']);
  }
  const stamp = /^Written by `npm run bench`: (.+?), started (.+? UTC)/m.exec(results);
  return [
    `${heading[1]} of ${heading[2]} targets met${stamp ? ` (${stamp[1]}, ${stamp[2]})` : ''}:`,
    '',
    table(['what', 'measured', 'target', ''], rows),
  ].join('\n');
}

/** Replaces the text between the markers in `readme` with the table. */
export function withReadmeTable(readme: string, results: string): string {
  const start = readme.indexOf(README_START);
  const end = readme.indexOf(README_END);
  if (start === -1 || end < start) throw new Error(`${BENCH_PAGE} lacks the markers ${README_START} … ${README_END}`);
  return `${readme.slice(0, start + README_START.length)}\n${readmeTable(results)}\n${readme.slice(end)}`;
}

/** The page that holds the generated table. */
export const BENCH_PAGE = 'docs/benchmarks.md';

/** Regenerates docs/benchmarks.md's table from bench/RESULTS.md, in place. */
export function updateReadme(): void {
  const readmePath = join(ROOT, BENCH_PAGE);
  const results = readFileSync(join(ROOT, 'bench', 'RESULTS.md'), 'utf8');
  writeFileSync(readmePath, withReadmeTable(readFileSync(readmePath, 'utf8'), results));
}

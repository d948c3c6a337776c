/**
 * No file on the request path is over about 400 lines: what a request runs through (the core, the
 * receiver, the stores, the inbox, the adapters, the relay client) stays in files of one concern
 * each, read in one sitting. The testing kit and the command line are tools around the request
 * path, not on it, and are not held to this.
 */

import { readFileSync } from 'node:fs';
import { relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tsFiles } from '../support/import-graph.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** "About 400": a file may run a few lines over while it still reads as one concern. */
const MOST_LINES = 425;
const OFF_THE_REQUEST_PATH = ['src/testing/', 'src/cli/'];

const rel = (file: string): string => relative(root, file).split(sep).join('/');
const lineCount = (file: string): number => readFileSync(file, 'utf8').split('\n').length - 1;

describe('the request path', () => {
  it(`has no file in src/ or adapters/ over ${MOST_LINES} lines`, () => {
    const files = [...tsFiles(`${root}src`), ...tsFiles(`${root}adapters`)].map(rel).filter((path) => !OFF_THE_REQUEST_PATH.some((prefix) => path.startsWith(prefix)));
    expect(files.length).toBeGreaterThan(100);
    const over = files.map((path) => ({ path, lines: lineCount(`${root}${path}`) })).filter(({ lines }) => lines > MOST_LINES);
    expect(over).toEqual([]);
  });
});

/**
 * The files derived from entry-points.ts: package.json's `exports`, tsconfig.json's `paths` and
 * typedoc.json's `entryPoints`, each as it is and as the list says it should be. The entry-point
 * test compares them; `npm run entry-points` writes them:
 *
 *   npm run entry-points          write the derived parts of the three files from the list
 *
 * Only the derived value is replaced: the comments and every other line of the files stay as
 * they are.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageExports, tsconfigPaths, typedocEntryPoints } from '../../entry-points.ts';

const root = resolve(import.meta.dirname, '../..');

/** One derived file: its text now and the text the list gives it. */
export interface DerivedFile {
  readonly file: string;
  readonly current: string;
  readonly expected: string;
}

/**
 * Where the value of `"key":` starts and ends in a JSON-with-comments text (the first such key
 * after `from`): the offsets of its opening bracket and just past its closing one.
 */
function valueRange(text: string, key: string, from = 0): { start: number; end: number } {
  const at = text.indexOf(`"${key}":`, from);
  if (at === -1) throw new Error(`no "${key}" in the file`);
  const start = text.slice(at).search(/[[{]/) + at;
  let depth = 0;
  for (let index = start; index < text.length; index += 1) {
    const char = text[index];
    if (char === '"') {
      // Skip the string, escapes included.
      for (index += 1; text[index] !== '"'; index += text[index] === '\\' ? 2 : 1);
    } else if (char === '[' || char === '{') {
      depth += 1;
    } else if (char === ']' || char === '}') {
      depth -= 1;
      if (depth === 0) return { start, end: index + 1 };
    }
  }
  throw new Error(`the value of "${key}" does not close`);
}

/** The indentation of the line that holds `offset`. */
function indentAt(text: string, offset: number): string {
  const lineStart = text.lastIndexOf('\n', offset) + 1;
  return /^\s*/.exec(text.slice(lineStart))?.[0] ?? '';
}

function replaceValue(text: string, key: string, render: (indent: string) => string): string {
  const { start, end } = valueRange(text, key);
  return text.slice(0, start) + render(indentAt(text, start)) + text.slice(end);
}

function read(file: string): string {
  return readFileSync(resolve(root, file), 'utf8');
}

/** The three derived files, as they are and as entry-points.ts says they should be. */
export function derivedFiles(): DerivedFile[] {
  const pkgText = read('package.json');
  const pkg = JSON.parse(pkgText) as Record<string, unknown>;
  const tsconfig = read('tsconfig.json');
  const typedoc = read('typedoc.json');
  return [
    { file: 'package.json', current: pkgText, expected: `${JSON.stringify({ ...pkg, exports: packageExports() }, null, 2)}\n` },
    {
      file: 'tsconfig.json',
      current: tsconfig,
      expected: replaceValue(tsconfig, 'paths', (indent) => {
        const lines = Object.entries(tsconfigPaths()).map(([name, targets]) => `${indent}  ${JSON.stringify(name)}: ${JSON.stringify(targets).replaceAll(',', ', ')}`);
        return `{\n${lines.join(',\n')}\n${indent}}`;
      }),
    },
    {
      file: 'typedoc.json',
      current: typedoc,
      expected: replaceValue(typedoc, 'entryPoints', (indent) => {
        const lines = typedocEntryPoints().map((source) => `${indent}  ${JSON.stringify(source)}`);
        return `[\n${lines.join(',\n')}\n${indent}]`;
      }),
    },
  ];
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const { file, current, expected } of derivedFiles()) {
    if (current === expected) continue;
    writeFileSync(resolve(root, file), expected);
    console.log(`entry-points: wrote ${file}`);
  }
}

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
import ts from 'typescript';
import { packageExports, tsconfigPaths, typedocEntryPoints } from '../../entry-points.ts';

const root = resolve(import.meta.dirname, '../..');

/** One derived file: its text now and the text the list gives it. */
export interface DerivedFile {
  readonly file: string;
  readonly current: string;
  readonly expected: string;
}

/**
 * Where the value of the property `key` starts and ends in a JSON-with-comments text (the first
 * such property, at any depth), read with TypeScript's JSON parser, so a comment or a string that
 * names the key is never taken for it.
 */
function valueRange(text: string, key: string): { start: number; end: number } {
  const json = ts.parseJsonText('derived.json', text);
  let value: ts.Expression | undefined;
  const visit = (node: ts.Node): void => {
    if (value !== undefined) return;
    if (ts.isPropertyAssignment(node) && ts.isStringLiteral(node.name) && node.name.text === key) value = node.initializer;
    else ts.forEachChild(node, visit);
  };
  visit(json);
  if (value === undefined) throw new Error(`no "${key}" in the file`);
  return { start: value.getStart(json), end: value.end };
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

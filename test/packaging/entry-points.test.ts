/**
 * entry-points.ts is the one list of the package's entry points. Everything else that names them
 * is derived from it (tsdown.config.ts at build time; package.json, tsconfig.json and typedoc.json
 * by `npm run entry-points`) or held to it here, both ways: nothing missing, nothing extra.
 */

import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import tsdownConfig from '../../tsdown.config.ts';
import { buildEntries, CLI, ENTRY_POINTS, subpathOf } from '../../entry-points.ts';
import { derivedFiles } from '../support/entry-points.ts';

const root = resolve(import.meta.dirname, '../..');

/** The files a tsconfig compiles as its roots, relative to the repository. */
function rootFilesOf(config: string): Set<string> {
  const parsed = ts.getParsedCommandLineOfConfigFile(resolve(root, config), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
  });
  if (parsed === undefined) throw new Error(`${config} did not parse`);
  return new Set(parsed.fileNames.map((file) => file.slice(root.length + 1)));
}

describe('the one list of entry points', () => {
  it('names each entry once, with a source file that exists', () => {
    const all = [...ENTRY_POINTS, CLI];
    expect(new Set(all.map((entry) => entry.name)).size).toBe(all.length);
    expect(new Set(all.map((entry) => entry.source)).size).toBe(all.length);
    for (const entry of all) {
      expect(existsSync(resolve(root, entry.source)), entry.source).toBe(true);
      if (entry.require !== undefined) expect(existsSync(resolve(root, entry.require)), entry.require).toBe(true);
    }
  });

  it.each(derivedFiles().map((derived) => [derived.file, derived] as const))('%s says what the list says (npm run entry-points writes it)', (_file, derived) => {
    expect(derived.current).toBe(derived.expected);
  });

  it('package.json exports exactly the listed subpaths, and the CLI through bin', () => {
    const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { exports: Record<string, unknown>; bin: Record<string, string> };
    expect(Object.keys(pkg.exports).sort()).toEqual([...ENTRY_POINTS.map(subpathOf), './package.json'].sort());
    expect(Object.values(pkg.bin)).toEqual([`./dist/${CLI.name}.mjs`]);
  });

  it('tsdown builds every listed entry, the CLI, and nothing else, in both formats', () => {
    const config = tsdownConfig as { entry?: unknown; format?: { cjs?: { entry?: unknown } } };
    expect(config.entry).toEqual(buildEntries('esm'));
    expect(config.format?.cjs?.entry).toEqual(buildEntries('cjs'));
    // What the list says, read from it here rather than through buildEntries: every entry and the
    // CLI from its source, the CommonJS build from `require` where an entry has one.
    const all = [...ENTRY_POINTS, CLI];
    expect(Object.keys(buildEntries('esm')).sort()).toEqual(all.map((entry) => entry.name).sort());
    expect(buildEntries('esm')).toEqual(Object.fromEntries(all.map((entry) => [entry.name, entry.source])));
    expect(buildEntries('cjs')).toEqual(Object.fromEntries(all.map((entry) => [entry.name, entry.require ?? entry.source])));
  });

  it('compiles the Node-free entries without Node types, and only those', () => {
    const core = rootFilesOf('tsconfig.core.json');
    for (const entry of [...ENTRY_POINTS, CLI]) {
      expect(core.has(entry.source), `${entry.source} in tsconfig.core.json`).toBe(!entry.node);
    }
    // No other adapter sits in the core build than the Node-free ones and the helpers they share.
    const adapters = [...core].filter((file) => file.startsWith('adapters/')).sort();
    const neutral = ENTRY_POINTS.filter((entry) => !entry.node && entry.source.startsWith('adapters/')).map((entry) => entry.source);
    expect(adapters).toEqual([...neutral, 'adapters/web.ts'].sort());
    // Everything is still type-checked somewhere: the rest with Node types.
    const full = rootFilesOf('tsconfig.json');
    for (const entry of [...ENTRY_POINTS, CLI]) expect(full.has(entry.source), entry.source).toBe(true);
  });
});

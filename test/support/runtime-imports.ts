/**
 * The packages the shipped code may load at run time, read from its source as the import graph
 * reads it (import-graph.ts): static imports and re-exports that are not type-only, `import('…')`,
 * and `require('…')` (also through `createRequire`); and apart, the packages it only imports types
 * from. Node's built-ins and relative paths are left out.
 */

import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative } from 'node:path';
import { moduleReferences, tsFiles } from './import-graph.ts';

/** A package name from a module specifier: `@aws-sdk/client-dynamodb/x` is `@aws-sdk/client-dynamodb`. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('node:') || builtinModules.includes(specifier.split('/')[0]!)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** The packages a source tree names: package name to the files (relative to the root) that load it, or only import its types. */
export interface PackageImports {
  readonly runtime: Map<string, string[]>;
  readonly typesOnly: Map<string, string[]>;
}

/** The packages the `.ts` files under `folders` load at run time, and those they only import types from. */
export function packageImports(root: string, folders: readonly string[]): PackageImports {
  const runtime = new Map<string, string[]>();
  const types = new Map<string, string[]>();
  const note = (specifier: string, file: string, into: Map<string, string[]>) => {
    const name = packageOf(specifier);
    if (name === undefined) return;
    const files = into.get(name) ?? [];
    if (!files.includes(file)) files.push(file);
    into.set(name, files);
  };
  for (const folder of folders) {
    for (const path of tsFiles(join(root, folder))) {
      if (path.endsWith('.d.ts')) continue;
      const file = relative(root, path);
      // `import { type A } from 'x'` loads 'x' (verbatimModuleSyntax keeps it, with no names).
      for (const { specifier, typeOnly } of moduleReferences(file, readFileSync(path, 'utf8'))) note(specifier, file, typeOnly ? types : runtime);
    }
  }
  const typesOnly = new Map([...types].filter(([name]) => !runtime.has(name)));
  return { runtime, typesOnly };
}

/**
 * The packages the shipped code may load at run time, read from its source with the TypeScript
 * parser: static imports and re-exports that are not type-only, `import('…')`, and `require('…')`
 * (also through `createRequire`); and apart, the packages it only imports types from. Node's
 * built-ins and relative paths are left out.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative } from 'node:path';
import ts from 'typescript';

/** A package name from a module specifier: `@aws-sdk/client-dynamodb/x` is `@aws-sdk/client-dynamodb`. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('node:') || builtinModules.includes(specifier.split('/')[0]!)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** Whether an import brings in a value (and so a module load), not only types. */
function loadsAtRunTime(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(node)) return !node.isTypeOnly;
  const clause = node.importClause;
  // `import 'x'`: a side effect.
  if (clause === undefined) return true;
  if (clause.isTypeOnly) return false;
  if (clause.name !== undefined) return true;
  const bindings = clause.namedBindings;
  if (bindings === undefined || ts.isNamespaceImport(bindings)) return true;
  // verbatimModuleSyntax keeps `import { type A } from 'x'` as an import of 'x' with no names.
  return true;
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
  const note = (specifier: string, file: string, into = runtime) => {
    const name = packageOf(specifier);
    if (name === undefined) return;
    const files = into.get(name) ?? [];
    if (!files.includes(file)) files.push(file);
    into.set(name, files);
  };
  for (const folder of folders) {
    for (const entry of readdirSync(join(root, folder), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.d.ts')) continue;
      const path = join(entry.parentPath, entry.name);
      const file = relative(root, path);
      const source = ts.createSourceFile(file, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
      const visit = (node: ts.Node): void => {
        if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
          note(node.moduleSpecifier.text, file, loadsAtRunTime(node) ? runtime : types);
        } else if (ts.isCallExpression(node) && node.arguments.length >= 1 && ts.isStringLiteralLike(node.arguments[0]!)) {
          const callee = node.expression;
          const dynamic = callee.kind === ts.SyntaxKind.ImportKeyword;
          const required = (ts.isIdentifier(callee) && callee.text === 'require') || ts.isCallExpression(callee);
          if (dynamic || required) note(node.arguments[0].text, file);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
  }
  const typesOnly = new Map([...types].filter(([name]) => !runtime.has(name)));
  return { runtime, typesOnly };
}

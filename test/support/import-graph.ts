/**
 * The import graph of the package's own sources, walked file by file: every relative import and
 * re-export (type-only ones included: a type circle still ties the modules together), read from
 * TypeScript's syntax tree so comments and strings never count. One reading serves both the
 * circle check and the receiver/inbox direction check.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** Every `.ts` file under `dir`, as absolute paths. */
export function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** One import of one source file: the file it names, and whether only types come through it. */
export interface ImportEdge {
  from: string;
  to: string;
  /**
   * `import type` or `export type`: erased at build time, so the importing module never loads the
   * other. An import whose names are each marked `type` inline is not: it is still emitted (as
   * `import {} from`, with `verbatimModuleSyntax`) and loads the module.
   */
  typeOnly: boolean;
}

/** One module a source file names: the specifier as written, and whether only types come through it. */
export interface ModuleReference {
  specifier: string;
  /** As {@link ImportEdge.typeOnly}: erased at build time, so the module is never loaded through it. */
  typeOnly: boolean;
}

/** Whether a call loads the module its first argument names: `import()`, `require()`, or `createRequire(…)(…)`. */
function loadsModule(callee: ts.Expression): boolean {
  return callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require') || ts.isCallExpression(callee);
}

/**
 * Every module a source text names (imports, re-exports, `import x = require()`, dynamic `import()`,
 * `require()` also through `createRequire`, and `import('…')` types), read from the syntax tree, so
 * comments and strings never count. The one reading of imports that the import graph and the
 * package's dependency check share.
 */
export function moduleReferences(file: string, text: string): ModuleReference[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: ModuleReference[] = [];
  const add = (specifier: ts.Node | undefined, typeOnly: boolean): void => {
    if (specifier !== undefined && ts.isStringLiteralLike(specifier)) found.push({ specifier: specifier.text, typeOnly });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node.moduleSpecifier, node.importClause?.isTypeOnly === true);
    else if (ts.isExportDeclaration(node)) add(node.moduleSpecifier, node.isTypeOnly);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node.moduleReference.expression, node.isTypeOnly);
    else if (ts.isCallExpression(node) && loadsModule(node.expression)) add(node.arguments[0], false);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, true);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Every relative import of each file in `files` ({@link moduleReferences}); imports of packages and
 * of files outside `files` are left out.
 */
export function importEdges(files: readonly string[], read: (file: string) => string = (file) => readFileSync(file, 'utf8')): ImportEdge[] {
  const known = new Set(files);
  return files.flatMap((from) =>
    moduleReferences(from, read(from))
      .filter(({ specifier }) => specifier.startsWith('.'))
      .map(({ specifier, typeOnly }) => ({ from, to: resolve(dirname(from), specifier), typeOnly }))
      .filter(({ to }) => known.has(to)),
  );
}

/**
 * file → the files it imports, each once, from `edges` (read by {@link importEdges}); every file of
 * `files` is a key, whether it imports anything or not.
 */
export function importGraph(edges: readonly ImportEdge[], files: readonly string[] = []): Map<string, string[]> {
  const graph = new Map<string, string[]>(files.map((file) => [file, []]));
  for (const { from, to } of edges) {
    const targets = graph.get(from) ?? [];
    if (!targets.includes(to)) targets.push(to);
    graph.set(from, targets);
  }
  return graph;
}

/**
 * Every import circle, each as the files along it (the first file repeated at the end), found by
 * a depth-first walk: one circle per back edge, so each reported circle is a real path.
 */
export function importCircles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const circles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      const seen = state.get(next);
      if (seen === 'open') circles.push([...path.slice(path.indexOf(next)), next]);
      else if (seen === undefined) visit(next);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return circles;
}

/** A circle as a line: `src/a.ts -> src/b.ts -> src/a.ts`. */
export function circleText(circle: readonly string[], root: string): string {
  return circle.map((file) => relative(root, file)).join(' -> ');
}

/**
 * Markdown's TypeScript blocks type-checked as written: each ```ts block becomes a module of its
 * own, compiled by the TypeScript compiler API under this repository's strict settings
 * (tsconfig.json, `module: nodenext`), with `webhook-receiver/*` resolved to the source entries
 * through tsconfig.json's `paths`. Nothing is written to disk. Used for the README and the guides.
 */

import { join, resolve } from 'node:path';
import ts from 'typescript';

export const root = resolve(import.meta.dirname, '../..');

export interface Block {
  /** Line of the block's first code line in its document. */
  line: number;
  code: string;
}

/** The ```ts blocks of a markdown document. */
export function tsBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  for (const match of markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)) {
    const opening = markdown.slice(0, match.index).split('\n').length;
    blocks.push({ line: opening + 1, code: match[1] ?? '' });
  }
  return blocks;
}

export interface CheckOptions {
  /** How diagnostics name the document: `README.md`, `docs/inbox.md`. */
  document: string;
  /** Declarations every block sees (the app's own things), or none. */
  prelude?: string;
  /** Appended after a block (its line numbers stay the document's); `export {}` is always added. */
  suffixOf?: (block: Block) => string;
  /** `types` of the program; default `['node']`. */
  types?: string[];
  /** More root files (a module whose augmentation the blocks rely on). */
  extraRoots?: string[];
}

/** Type-checks the blocks as one program; returns each diagnostic as `<document>:<line>: TS<code> <message>`. */
export function typeCheckBlocks(selected: Block[], options: CheckOptions): string[] {
  const parsed = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.json'), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
  });
  if (!parsed) throw new Error('tsconfig.json did not parse');
  const compilerOptions: ts.CompilerOptions = {
    ...parsed.options,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    noEmit: true,
    types: options.types ?? ['node'],
  };
  // Virtual files inside the repository, so node_modules, package.json's "type" and tsconfig.json's
  // paths resolve as they do for the repository's own files.
  const virtualDir = join(root, 'test/types/blocks', options.document.replace(/[^\w.-]/g, '_'));
  const fileOf = (block: Block) => join(virtualDir, `line-${block.line}.ts`);
  const preludeFile = join(virtualDir, 'placeholders.d.ts');
  const sourceText = (block: Block) => `${block.code}\n${options.suffixOf?.(block) ?? ''}\nexport {};\n`;
  const virtual = new Map<string, string>([
    ...(options.prelude === undefined ? [] : [[preludeFile, options.prelude] as const]),
    ...selected.map((block) => [fileOf(block), sourceText(block)] as const),
  ]);
  const host = ts.createCompilerHost(compilerOptions, true);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (name) => virtual.has(name) || fileExists.call(host, name);
  host.readFile = (name) => virtual.get(name) ?? readFile.call(host, name);
  host.getSourceFile = (name, language, onError, create) => {
    const text = virtual.get(name);
    return text === undefined ? getSourceFile.call(host, name, language, onError, create) : ts.createSourceFile(name, text, language, true);
  };
  host.directoryExists = (name) => name === virtualDir || ts.sys.directoryExists(name);
  const program = ts.createProgram({ rootNames: [...virtual.keys(), ...(options.extraRoots ?? [])], options: compilerOptions, host });
  const lineOf = new Map(selected.map((block) => [fileOf(block), block.line]));
  const diagnostics = [...program.getGlobalDiagnostics(), ...program.getOptionsDiagnostics()].map(
    (d) => `TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`,
  );
  for (const name of virtual.keys()) {
    const file = program.getSourceFile(name);
    if (!file) throw new Error(`${name} is not in the program`);
    for (const d of [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]) {
      const { line } = file.getLineAndCharacterOfPosition(d.start ?? 0);
      const where = name === preludeFile ? `placeholders:${line + 1}` : `${options.document}:${(lineOf.get(name) ?? 0) + line}`;
      diagnostics.push(`${where}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    }
  }
  return diagnostics;
}

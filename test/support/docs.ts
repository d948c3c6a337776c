/**
 * The documentation as the tests read it: README.md, CONTRIBUTING.md and the guides in docs/, and
 * the fenced code blocks in them.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const root = resolve(import.meta.dirname, '../..');

/** Every Markdown page under `dir` (relative to the repository), sorted. */
function pages(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? pages(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : []))
    .sort();
}

/** README.md and the guides: the pages whose TypeScript blocks are type-checked. */
export function guideFiles(): string[] {
  return ['README.md', ...pages('docs')];
}

/** The pages whose relative links must resolve: the guides and CONTRIBUTING.md. */
export function linkedFiles(): string[] {
  return [...guideFiles(), 'CONTRIBUTING.md'];
}

export function readDoc(file: string): string {
  return readFileSync(join(root, file), 'utf8');
}

export interface CodeBlock {
  /** The Markdown file, relative to the repository. */
  file: string;
  /** Line of the block's first code line in that file. */
  line: number;
  code: string;
}

/** The fenced blocks of one language; an indented block (in a list item) loses its indent. */
export function codeBlocks(markdown: string, file: string, language = 'ts'): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  for (const match of markdown.matchAll(new RegExp(`^( *)\`\`\`${language}\\n([\\s\\S]*?)^\\1\`\`\`$`, 'gm'))) {
    const opening = markdown.slice(0, match.index).split('\n').length;
    const indent = match[1] ?? '';
    const code = (match[2] ?? '')
      .split('\n')
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n');
    blocks.push({ file, line: opening + 1, code });
  }
  return blocks;
}

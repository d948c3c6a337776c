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
  /**
   * The block's run marker, when the line right above its fence is `<!-- run: … -->`: a complete
   * program that test/packaging/docs-programs.test.ts runs from the packed package.
   */
  run?: RunMarker;
}

/**
 * `<!-- run: <kind> key=value key="a value" -->`: how a complete program of the guides is run.
 * `server` listens (its port is replaced by a free one) and gets a signed delivery and its
 * duplicate; `program` runs until it is ready (its top-level code finished) and is then stopped;
 * `script` must exit 0 by itself; `lifecycle` handles SIGTERM and must exit by itself within
 * `timeout` ms of it. `needs` lists the servers it connects to (`redis`, `postgres`, `dynamodb`, `relay`: the relay's emulator);
 * `fails` marks a program known not to run as written, with the reason.
 */
export interface RunMarker {
  kind: 'server' | 'program' | 'script' | 'lifecycle';
  needs: string[];
  timeoutMs?: number;
  fails?: string;
}

const RUN_MARKER = /^<!-- run: (server|program|script|lifecycle)((?: [a-z]+=(?:"[^"]*"|[^\s"]+))*) -->$/;

/** The marker on `line`, or `undefined`; a line that starts like one but does not parse throws. */
function parseRunMarker(line: string, where: string): RunMarker | undefined {
  if (!line.startsWith('<!-- run:')) return undefined;
  const match = RUN_MARKER.exec(line);
  if (!match) throw new Error(`${where}: a run marker that does not parse: ${line}`);
  const options = Object.fromEntries([...(match[2] ?? '').matchAll(/ ([a-z]+)=(?:"([^"]*)"|([^\s"]+))/g)].map((option) => [option[1]!, option[2] ?? option[3]!]));
  for (const key of Object.keys(options)) if (!['needs', 'timeout', 'fails'].includes(key)) throw new Error(`${where}: unknown run option ${key}`);
  const timeoutMs = options.timeout === undefined ? undefined : Number(options.timeout);
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) throw new Error(`${where}: timeout must be a number of ms`);
  if ((match[1] === 'lifecycle') !== (timeoutMs !== undefined)) throw new Error(`${where}: a lifecycle program, and only one, states its timeout`);
  return { kind: match[1] as RunMarker['kind'], needs: options.needs ? options.needs.split(',') : [], timeoutMs, fails: options.fails };
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
    const above = markdown.slice(0, match.index).split('\n').at(-2)?.trim() ?? '';
    const run = parseRunMarker(above, `${file}:${opening}`);
    blocks.push({ file, line: opening + 1, code, ...(run ? { run } : {}) });
  }
  return blocks;
}

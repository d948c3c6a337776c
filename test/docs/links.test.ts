/**
 * Every relative link in the README, CONTRIBUTING.md and the guides in docs/ resolves:
 * the file or folder exists, and a `#anchor` names a heading of the target page (as GitHub makes
 * heading anchors). Guides name API symbols; they never link into the generated API reference,
 * which a fresh clone does not have.
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { linkedFiles, readDoc, root } from '../support/docs.ts';

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page's headings, repeated ones numbered as GitHub numbers them (`-1`, `-2`). */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const match of withoutFences(markdown).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = slug(match[1] ?? '');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/** The text with fenced blocks blanked (line numbers kept), so a heading shown as code is not one. */
function withoutFences(markdown: string): string {
  return markdown.replace(/^( *)(```|~~~)[\s\S]*?^\1\2/gm, (block) => block.replace(/[^\n]/g, ' '));
}

/** The text with fenced blocks and inline code blanked, so a link shown as code is not one. */
function withoutCode(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, (code) => ' '.repeat(code.length));
}

interface Link {
  file: string;
  line: number;
  target: string;
}

/** The inline links and images of a page (`[text](target)`), outside code. */
function links(markdown: string, file: string): Link[] {
  const text = withoutCode(markdown);
  const found: Link[] = [];
  for (const match of text.matchAll(/!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    found.push({ file, line: text.slice(0, match.index).split('\n').length, target: match[1] ?? '' });
  }
  return found;
}

/** Why a relative link does not resolve, or `undefined` when it does (or is not relative). */
function brokenReason(link: Link, read: (file: string) => string = readDoc): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) return undefined; // https:, mailto:
  const [path = '', anchor] = link.target.split('#', 2) as [string, string | undefined];
  const target = path === '' ? link.file : normalize(join(dirname(link.file), decodeURIComponent(path)));
  if (target.startsWith('..')) return `points outside the repository (${target})`;
  if (/^(\.tmp|docs-api)(\/|$)/.test(target)) return 'points into the generated API reference: name the symbol instead';
  if (!existsSync(join(root, target))) return `${target} does not exist`;
  if (anchor === undefined) return undefined;
  if (statSync(join(root, target)).isDirectory() || !target.endsWith('.md')) return `#${anchor} on ${target}, which is not a Markdown page`;
  if (!anchors(read(target)).has(anchor)) return `${target} has no heading with the anchor #${anchor}`;
  return undefined;
}

describe('relative links in the README, CONTRIBUTING.md and docs/', () => {
  const files = linkedFiles();
  const all = files.flatMap((file) => links(readDoc(file), file));

  it('finds the pages and their links', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'CONTRIBUTING.md', 'docs/README.md', 'docs/express.md', 'docs/errors.md']));
    expect(all.filter((link) => !/^[a-z]+:/i.test(link.target)).length).toBeGreaterThan(80);
  });

  it('resolve: every file exists, and every #anchor names a heading of its page', () => {
    const broken = all.flatMap((link) => {
      const reason = brokenReason(link);
      return reason === undefined ? [] : [`${link.file}:${link.line}: (${link.target}) ${reason}`];
    });
    expect(broken).toEqual([]);
  });

  it('every guide in docs/ is listed in the index', () => {
    const index = links(readDoc('docs/README.md'), 'docs/README.md').map((link) => normalize(join('docs', link.target.split('#')[0] ?? '')));
    expect(files.filter((file) => file.startsWith('docs/') && file !== 'docs/README.md' && !index.includes(file))).toEqual([]);
  });

  it('the checker catches a missing file, a missing anchor and a link into the API reference', () => {
    const page = '# Title\n\n## Your own store: check it with `checkStore`\n\n## Notes\n\n## Notes\n';
    // A page of made-up headings, read in place of docs/errors.md.
    const read = (file: string) => (file === 'docs/errors.md' ? page : readDoc(file));
    const at = (target: string) => brokenReason({ file: 'docs/errors.md', line: 1, target }, read);
    expect([...anchors(page)]).toEqual(['title', 'your-own-store-check-it-with-checkstore', 'notes', 'notes-1']);
    expect(at('#notes-1')).toBeUndefined();
    expect(at('#nowhere')).toBe('docs/errors.md has no heading with the anchor #nowhere');
    expect(at('missing.md')).toBe('docs/missing.md does not exist');
    expect(at('express.md#no-such-heading')).toBe('docs/express.md has no heading with the anchor #no-such-heading');
    expect(at('../.tmp/api/index.html')).toBe('points into the generated API reference: name the symbol instead');
    expect(at('https://example.com/x#y')).toBeUndefined();
    expect(links('see [a](a.md) and `[b](b.md)`\n```md\n[c](c.md)\n```\n![d](d.png "title")', 'x.md').map((link) => link.target)).toEqual(['a.md', 'd.png']);
  });
});

/**
 * No import circle in `src/` or `adapters/`: modules import in one direction only,
 * so each can be read, tested and split on its own. Type-only imports count too.
 */

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { circleText, importCircles, importEdges, importGraph, tsFiles } from '../support/import-graph.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('the import graph', () => {
  it('has no circle in src/ or adapters/', () => {
    const files = [...tsFiles(join(root, 'src')), ...tsFiles(join(root, 'adapters'))];
    const graph = importGraph(importEdges(files), files);
    // The walk sees the package: every source file, and the imports between the receiver's modules.
    expect(files.length).toBeGreaterThan(50);
    expect(graph.get(join(root, 'src', 'http.ts'))).toContain(join(root, 'src', 'logger.ts'));
    expect(importCircles(graph).map((circle) => circleText(circle, root))).toEqual([]);
  });

  it('finds circles, type-only ones and re-exports included, and ignores imports in comments and strings', () => {
    const sources: Record<string, string> = {
      '/p/a.ts': "import { b } from './b.ts';\nexport const a = b;",
      '/p/b.ts': "import type { C } from './c.ts';\nexport const b = 1 as unknown as C;",
      '/p/c.ts': "export { a } from './a.ts';\nexport type C = number;",
      '/p/d.ts': "/** import { e } from './e.ts'; */\nconst text = \"import { e } from './e.ts'\";\nexport const d = text;",
      '/p/e.ts': "import { d } from './d.ts';\nexport const e = d;",
    };
    const graph = importGraph(importEdges(Object.keys(sources), (file) => sources[file]!), Object.keys(sources));
    expect(graph.get('/p/d.ts')).toEqual([]);
    expect(importCircles(graph).map((circle) => circleText(circle, '/p'))).toEqual(['a.ts -> b.ts -> c.ts -> a.ts']);
  });
});

/**
 * One direction between the receiver and the inbox. The inbox builds on the receiver: it hands
 * itself in as an `InboxIntake`, the interface the receiver defines, and its workers run the claim
 * protocol the receiver runs. So the receiver (`src/receiver.ts`, `src/receiver/`) imports nothing
 * from `src/inbox/`, not even through another module, and the inbox imports from the receiver only
 * types, and only those that sit below both (`src/receiver/types.ts`). What both run (the claim
 * protocol, the handler's context, the job format) sits in `src/` beside them, and imports neither.
 * Read from the real import graph, type-only imports included.
 */

import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importEdges, importGraph, tsFiles, type ImportEdge } from '../support/import-graph.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Types of the receiver that the inbox may name: the intake it implements and what that names. */
const NEUTRAL_TYPES = ['src/receiver/types.ts'];

/** The same path on every platform: `src/inbox/worker.ts`. */
const rel = (base: string, file: string): string => relative(base, file).split(sep).join('/');
const receiverSide = (path: string): boolean => path === 'src/receiver.ts' || path.startsWith('src/receiver/');
const inboxSide = (path: string): boolean => path.startsWith('src/inbox/');

/** Every file reachable from `start` along `edges` (runtime ones only with `runtimeOnly`), each with the path that reaches it. */
function reachable(edges: readonly ImportEdge[], start: string, runtimeOnly: boolean): Map<string, string[]> {
  const next = importGraph(runtimeOnly ? edges.filter((edge) => !edge.typeOnly) : edges);
  const paths = new Map<string, string[]>([[start, [start]]]);
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const to of next.get(file) ?? []) {
      if (paths.has(to)) continue;
      paths.set(to, [...paths.get(file)!, to]);
      queue.push(to);
    }
  }
  return paths;
}

/** What breaks the direction, one line each (empty when none does), for the files under `base`. */
function directionProblems(base: string, edges: readonly ImportEdge[]): string[] {
  const problems: string[] = [];
  const files = new Set(edges.flatMap((edge) => [edge.from, edge.to]));
  for (const edge of edges) {
    const from = rel(base, edge.from);
    const to = rel(base, edge.to);
    if (receiverSide(from) && inboxSide(to)) problems.push(`${from} imports ${to}: the receiver imports nothing from the inbox`);
    if (inboxSide(from) && receiverSide(to) && !(edge.typeOnly && NEUTRAL_TYPES.includes(to))) {
      problems.push(`${from} imports ${to}${edge.typeOnly ? '' : ' at run time'}: the inbox takes only the types in ${NEUTRAL_TYPES.join(', ')} from the receiver`);
    }
  }
  for (const file of files) {
    const path = rel(base, file);
    // Through a module in between: the receiver never reaches the inbox, types included; the
    // inbox never loads the receiver.
    if (receiverSide(path)) {
      for (const [to, via] of reachable(edges, file, false)) {
        if (inboxSide(rel(base, to))) problems.push(`${path} reaches ${rel(base, to)} through ${via.map((step) => rel(base, step)).join(' -> ')}`);
      }
    }
    if (inboxSide(path)) {
      for (const [to, via] of reachable(edges, file, true)) {
        if (receiverSide(rel(base, to))) problems.push(`${path} loads ${rel(base, to)} through ${via.map((step) => rel(base, step)).join(' -> ')}`);
      }
    }
  }
  return [...new Set(problems)].sort();
}

describe('the direction between the receiver and the inbox', () => {
  it('holds in src/: the receiver imports nothing of the inbox, the inbox only the neutral types of the receiver', () => {
    const files = tsFiles(join(root, 'src'));
    const edges = importEdges(files);
    const paths = edges.map((edge) => `${rel(root, edge.from)} -> ${rel(root, edge.to)}`);
    // The walk sees the pieces it judges: the receiver accepting through its own intake, the
    // worker on the shared claim protocol, the inbox naming the intake as a type.
    expect(paths).toContain('src/receiver.ts -> src/receiver/accept.ts');
    expect(paths).toContain('src/inbox/worker.ts -> src/claims.ts');
    expect(edges).toContainEqual({ from: join(root, 'src/inbox/types.ts'), to: join(root, 'src/receiver/types.ts'), typeOnly: true });
    expect(directionProblems(root, edges)).toEqual([]);
  });

  it('finds an import either way, one through a module in between, and a runtime import of the neutral types', () => {
    const sources: Record<string, string> = {
      '/p/src/receiver.ts': "import { gate } from './receiver/accept.ts';\nexport const receiver = gate;",
      '/p/src/receiver/accept.ts': "import { job } from '../shared.ts';\nexport const gate = job;",
      '/p/src/receiver/types.ts': 'export type Intake = { engine: string };\nexport const DEFAULT = 1;',
      '/p/src/receiver/claims.ts': 'export const keeper = 1;',
      '/p/src/shared.ts': "import type { Job } from './inbox/types.ts';\nexport const job = 1 as unknown as Job;",
      '/p/src/inbox/types.ts': "import type { Intake } from '../receiver/types.ts';\nexport type Job = Intake;",
      '/p/src/inbox/worker.ts': "import { keeper } from '../receiver/claims.ts';\nimport { DEFAULT } from '../receiver/types.ts';\nexport const worker = keeper + DEFAULT;",
      '/p/src/inbox/bullmq.ts': "export { receiver } from '../receiver.ts';",
      '/p/src/inbox/pg-boss.ts': "import { type Intake } from '../receiver/types.ts';\nexport const intake = {} as Intake;",
    };
    const edges = importEdges(Object.keys(sources), (file) => sources[file]!);
    expect(directionProblems('/p', edges)).toEqual([
      "src/inbox/bullmq.ts imports src/receiver.ts at run time: the inbox takes only the types in src/receiver/types.ts from the receiver",
      'src/inbox/bullmq.ts loads src/receiver.ts through src/inbox/bullmq.ts -> src/receiver.ts',
      'src/inbox/bullmq.ts loads src/receiver/accept.ts through src/inbox/bullmq.ts -> src/receiver.ts -> src/receiver/accept.ts',
      "src/inbox/pg-boss.ts imports src/receiver/types.ts at run time: the inbox takes only the types in src/receiver/types.ts from the receiver",
      'src/inbox/pg-boss.ts loads src/receiver/types.ts through src/inbox/pg-boss.ts -> src/receiver/types.ts',
      "src/inbox/worker.ts imports src/receiver/claims.ts at run time: the inbox takes only the types in src/receiver/types.ts from the receiver",
      "src/inbox/worker.ts imports src/receiver/types.ts at run time: the inbox takes only the types in src/receiver/types.ts from the receiver",
      'src/inbox/worker.ts loads src/receiver/claims.ts through src/inbox/worker.ts -> src/receiver/claims.ts',
      'src/inbox/worker.ts loads src/receiver/types.ts through src/inbox/worker.ts -> src/receiver/types.ts',
      'src/receiver.ts reaches src/inbox/types.ts through src/receiver.ts -> src/receiver/accept.ts -> src/shared.ts -> src/inbox/types.ts',
      'src/receiver/accept.ts reaches src/inbox/types.ts through src/receiver/accept.ts -> src/shared.ts -> src/inbox/types.ts',
    ]);
  });

  it('reads type-only imports and re-exports apart from the ones loaded at run time', () => {
    const sources: Record<string, string> = {
      '/q/a.ts': [
        "import type { B } from './b.ts';",
        "import { type C } from './c.ts';",
        "export type { D } from './d.ts';",
        "export * from './e.ts';",
        "type F = import('./f.ts').F;",
        "const g = () => import('./g.ts');",
        "const i = createRequire(import.meta.url)('./i.ts');",
        "// import { h } from './h.ts';",
        "const text = \"import { h } from './h.ts'\";",
        'export const a = [g, i, text] as unknown as [B, C, F];',
      ].join('\n'),
      ...Object.fromEntries(['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'].map((name) => [`/q/${name}.ts`, `export type ${name.toUpperCase()} = 1;`])),
    };
    const edges = importEdges(Object.keys(sources), (file) => sources[file]!);
    expect(edges.map((edge) => `${rel('/q', edge.to)} ${edge.typeOnly ? 'type' : 'runtime'}`)).toEqual([
      'b.ts type',
      'c.ts runtime',
      'd.ts type',
      'e.ts runtime',
      'f.ts type',
      'g.ts runtime',
      'i.ts runtime',
    ]);
  });
});

/**
 * Section 6: memory. One million distinct ids through `memoryStore()` with its default bound
 * (100 000), in a child process run with `--expose-gc` so the heap is read after full
 * collections. After the bound is reached the heap must stay flat.
 */

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { bytesText, fixed, rateText, ROOT, table, type BenchConfig, type SectionReport } from './report.ts';

interface Checkpoint {
  ids: number;
  heapUsed: number;
  seconds: number;
}

/** Growth allowed between twice the bound and the end: 10 % (V8 heap noise, not a leak). */
const FLAT = 1.1;

function runChild(build: string, ids: number, checkpoints: readonly number[], max: number | undefined, timeoutMs: number): Promise<Checkpoint[]> {
  return new Promise((resolve, reject) => {
    const args = ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench', 'memory-child.ts'), build, String(ids), checkpoints.join(',')];
    if (max !== undefined) args.push(String(max));
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) {
        reject(new Error(`memory child exited with ${signal ?? code}${signal === 'SIGKILL' ? ` (time limit ${timeoutMs} ms)` : ''}\n${err.trim()}`));
        return;
      }
      resolve(
        out
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as Checkpoint),
      );
    });
  });
}

export async function runMemory(config: BenchConfig): Promise<SectionReport> {
  // The smoke run keeps the shape (five times the bound) with a bound of 10 000.
  const max = config.quick ? 10_000 : config.pkg.index.DEFAULT_MEMORY_STORE_MAX;
  const ids = config.quick ? 50_000 : 1_000_000;
  const checkpoints = config.quick ? [10_000, 20_000, 50_000] : [100_000, 200_000, 500_000, 1_000_000];
  const points = await runChild(config.pkg.dir, ids, checkpoints, config.quick ? max : undefined, config.quick ? 20_000 : 120_000);

  const start = points[0]!;
  const atBound = points.find((p) => p.ids === max)!;
  const afterBound = points.find((p) => p.ids === 2 * max)!;
  const end = points[points.length - 1]!;
  const growth = end.heapUsed / afterBound.heapUsed;
  const rows = points.map((p) => [
    p.ids.toLocaleString('en-US'),
    bytesText(p.heapUsed),
    p.ids === 0 ? '' : bytesText(p.heapUsed - start.heapUsed),
    p.ids === 0 ? '' : `${Math.round((p.heapUsed - start.heapUsed) / Math.min(p.ids, max))} B`,
  ]);
  const body = [
    `${ids.toLocaleString('en-US')} distinct ids (31-character webhook-ids under the default namespace), each claimed then ` +
      `completed as the receiver does, through \`memoryStore(${config.quick ? `{ max: ${max} }` : ''})\` (bound ${max.toLocaleString('en-US')} ids). ` +
      'Heap in use after two full collections, in a child process run with `--expose-gc`.',
    '',
    table(['ids pushed', 'heap used', 'above the empty store', 'per id held'], rows),
    '',
    `Throughput of the store alone (claim + complete, awaited one after the other): ${rateText(end.ids / end.seconds)} ids/s.`,
  ].join('\n');
  return {
    id: 'memory',
    title: '6. Memory',
    body,
    targets: [
      {
        what: `memory store heap after ${end.ids.toLocaleString('en-US')} ids, ${config.quick ? `bound ${max.toLocaleString('en-US')} (quick run)` : 'default bound'}`,
        target: `flat after the bound (≤ ${FLAT}× the heap at twice the bound)`,
        measured: `${fixed(growth, 3)}×`,
        context: `${bytesText(atBound.heapUsed)} at ${max.toLocaleString('en-US')} ids, ${bytesText(afterBound.heapUsed)} at ${(2 * max).toLocaleString('en-US')}, ${bytesText(end.heapUsed)} at ${end.ids.toLocaleString('en-US')}`,
        pass: growth <= FLAT,
      },
    ],
  };
}

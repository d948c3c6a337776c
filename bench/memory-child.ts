/**
 * Run by the memory section in its own process, with `--expose-gc`: pushes distinct ids through
 * `memoryStore` (a claim, then its completion, as the receiver does for every new webhook) and
 * prints one JSON line per checkpoint with the heap in use after a full collection.
 *
 *   node --expose-gc --import tsx bench/memory-child.ts <build dir> <ids> <checkpoint,checkpoint,…> [max]
 */

import { performance } from 'node:perf_hooks';
import { importBuilt } from './build.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const collect = gc;

const [build, totalArg, checkpointsArg, maxArg] = process.argv.slice(2);
if (build === undefined) throw new Error('the first argument is the directory of the built package');
const { memoryStore } = await importBuilt<typeof import('../src/index.ts')>(build, 'index');
const total = Number(totalArg);
const checkpoints = new Set((checkpointsArg ?? '').split(',').filter(Boolean).map(Number));
const max = maxArg === undefined ? undefined : Number(maxArg);
if (!Number.isSafeInteger(total) || total < 1) throw new RangeError('the second argument is how many ids to push');

const LOCK_MS = 60_000;
const TTL_MS = 86_400_000;

function heapUsed(): number {
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}

let start = performance.now();
/** Time spent in checkpoints, left out of the store's own time. */
let paused = 0;

function report(ids: number): void {
  const at = performance.now();
  const seconds = (at - start - paused) / 1000;
  process.stdout.write(`${JSON.stringify({ ids, heapUsed: heapUsed(), seconds })}\n`);
  paused += performance.now() - at;
}

const store = max === undefined ? memoryStore() : memoryStore({ max });
report(0);
start = performance.now();
paused = 0;
for (let i = 1; i <= total; i++) {
  // The receiver's key: namespace, ':', then a webhook-id as long as a relay's (31 characters).
  const key = `default:msg_${String(i).padStart(27, '0')}`;
  const claim = await store.claim(key, LOCK_MS);
  if (claim.status !== 'acquired') throw new Error(`id ${i} was not new: ${claim.status}`);
  if (!(await store.complete(key, claim.token, TTL_MS))) throw new Error(`id ${i} could not be completed`);
  if (checkpoints.has(i)) report(i);
}

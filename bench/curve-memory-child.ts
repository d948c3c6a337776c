/**
 * Run by the growth curves (curves.ts) in its own process, with `--expose-gc`: for each number of
 * ids held, a fresh `memoryStore({ max: n })` filled with n completed ids, its heap above the empty
 * store after full collections, then the time of claim + complete on new ids (each evicting the
 * oldest). One JSON line per point; it stops before a point that would not fit the time given.
 *
 *   node --expose-gc --import tsx bench/curve-memory-child.ts <build dir> <n,n,…> <deliveries> [ms]
 */

import { performance } from 'node:perf_hooks';
import { importBuilt } from './build.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const collect = gc;

const [build, heldArg, deliveriesArg, limitArg] = process.argv.slice(2);
if (build === undefined || heldArg === undefined) throw new Error('arguments: <build dir> <n,n,…> <deliveries>');
const { memoryStore } = await importBuilt<typeof import('../src/index.ts')>(build, 'index');
const deliveries = Number(deliveriesArg);
/** Milliseconds this child may take: no point is started after them. */
const limitMs = limitArg === undefined ? Number.POSITIVE_INFINITY : Number(limitArg);
const began = performance.now();

const LOCK_MS = 60_000;
const TTL_MS = 86_400_000;
let serial = 0;
// The receiver's key: namespace, class, then a webhook-id as long as a relay's (31 characters).
const nextKey = () => `default:s:msg_${String(serial++).padStart(27, '0')}`;

function heapUsed(): number {
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}

async function deliver(store: ReturnType<typeof memoryStore>): Promise<void> {
  const key = nextKey();
  const claim = await store.claim(key, LOCK_MS);
  if (claim.status !== 'acquired') throw new Error(`a new id was answered ${claim.status}`);
  if (!(await store.complete(key, claim.token, TTL_MS))) throw new Error('a claim could not be completed');
}

for (const held of heldArg.split(',').map(Number)) {
  if (performance.now() - began > limitMs) break;
  const empty = heapUsed();
  let store: ReturnType<typeof memoryStore> | undefined = memoryStore({ max: held });
  for (let i = 0; i < held; i++) await deliver(store);
  const heap = heapUsed() - empty;
  // Warm-up, then the timed deliveries: the store is full, so each forgets the oldest id.
  for (let i = 0; i < Math.min(1000, deliveries); i++) await deliver(store);
  const start = performance.now();
  for (let i = 0; i < deliveries; i++) await deliver(store);
  const seconds = (performance.now() - start) / 1000;
  process.stdout.write(`${JSON.stringify({ ids: held, heapUsed: heap, heapPerId: heap / held, secondsPerDelivery: seconds / deliveries })}\n`);
  store = undefined;
}

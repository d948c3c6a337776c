/**
 * Section 14: what ordering costs a store. A claim and its completion of a fresh id,
 * without ordering (`claim` + `complete`) and with it (`claimOrdered` + `completeOrdered`:
 * exclusive, the entity's version checked and its lock taken in the claim, the version recorded
 * and the lock freed in the completion), on the memory store and on the Redis store (ioredis,
 * a local redis-server), timed in one run with the two alternating. Entities come from a pool of
 * 1 000, versions only grow, so no delivery is stale or busy: the cost of the check itself.
 */

import { Redis } from 'ioredis';
import type { EntityOrder, IdempotencyStore } from '../src/stores/types.ts';
import { findRedisServer, isCI, startRedisServer } from '../test/support/redis-server.ts';
import { ratioText, table, timeSummary, type BenchConfig, type SectionReport } from './report.ts';
import { oneAtATime, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const LOCK_MS = 30_000;
const TTL_MS = 86_400_000;
const ENTITIES = 1000;

/** Plain and ordered candidates on one store: fresh ids, entities in turn, growing versions. */
function candidates(label: string, store: IdempotencyStore, encodeVersion: (value: unknown) => string): [Candidate, Candidate] {
  let counter = 0;
  const key = () => `default:s:bench_${label}_${(counter++).toString(36)}`;
  const plain = async () => {
    const id = key();
    const claimed = await store.claim(id, LOCK_MS);
    if (claimed.status !== 'acquired') throw new Error(`bench: plain claim answered ${claimed.status}`);
    await store.complete(id, claimed.token, TTL_MS);
  };
  const ordered = async () => {
    const n = counter;
    const id = key();
    const order: EntityOrder = { entity: `default:o:${label}_${n % ENTITIES}`, version: encodeVersion(n), exclusive: true };
    const claimed = await store.ordering!.claimOrdered(id, LOCK_MS, TTL_MS, order);
    if (claimed.status !== 'acquired') throw new Error(`bench: ordered claim answered ${claimed.status}`);
    await store.ordering!.completeOrdered(id, claimed.token, TTL_MS, order);
  };
  return [
    { name: `${label} plain`, run: oneAtATime(plain) },
    { name: `${label} ordered`, run: oneAtATime(ordered) },
  ];
}

export async function runOrdering(config: BenchConfig): Promise<SectionReport> {
  const title = '14. Ordering: claim + complete with and without';
  const { memoryStore, encodeVersion } = config.pkg.index;
  const timing = { reps: config.quick ? 3 : 7, rounds: config.quick ? 3 : 11, batchMs: config.quick ? 5 : 20, warmupMs: config.quick ? 50 : 300 };
  const rows: string[][] = [];
  const measure = async (label: string, store: IdempotencyStore) => {
    const [plain, ordered] = candidates(label, store, encodeVersion);
    const timings = await timeInterleaved([plain, ordered], timing);
    const p = series(timings, plain.name);
    const o = series(timings, ordered.name);
    rows.push([label, timeSummary(summarize(p)), timeSummary(summarize(o)), ratioText(summarize(ratios(o, p)))]);
  };

  await measure('memory', memoryStore({ max: 10_000_000 }));

  const notes: string[] = [];
  if (findRedisServer() === undefined) {
    if (isCI()) throw new Error('redis-server is not on the PATH, so the ordering section cannot run its Redis row; CI is set, so this is a failure');
    notes.push('SKIPPED (Redis row): redis-server is not on the PATH.');
  } else {
    const server = await startRedisServer();
    const redis = new Redis(server.url, { lazyConnect: true });
    await redis.connect();
    try {
      await measure('Redis (ioredis)', config.pkg.redis.redisStore({ client: redis, prefix: 'bench-ordering:' }));
    } finally {
      redis.disconnect();
      await server.close();
    }
  }

  const body = [
    `A fresh id claimed and completed, one at a time; with ordering, exclusive, entities in turn from a pool of ${ENTITIES}, versions growing (medians of ${timing.reps} repetitions, min–max).`,
    '',
    table(['store', 'claim + complete', 'ordered claim + complete', 'ordered / plain'], rows),
    ...notes.map((note) => `\n${note}`),
    '',
    "Both pairs go through the stores' promises; Redis's ordered scripts touch three keys sharing the entity's hash tag instead of one.",
  ].join('\n');
  return { id: 'ordering', title, body, targets: [] };
}

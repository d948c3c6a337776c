/**
 * Run by the tenant-keys curve (keys.ts) in its own process, with `--expose-gc`: for each number
 * of tenants n, `tenantKeys({ maxTenants: n })` with every tenant's keys loaded and cached (one
 * verified request each), and the memory that took above the empty cache after full collections:
 * V8's heap and the external memory (key material held outside it). The loader's own map of
 * secrets is built before the first reading: it is the app's data, not the cache's. One JSON line
 * per point; it stops before a point that would not fit the time given.
 *
 *   node --expose-gc --import tsx bench/curve-tenants-child.ts <build dir> <n,n,…> [ms]
 */

import { performance } from 'node:perf_hooks';
import { importBuilt } from './build.ts';
import { jsonBody, newSecret, signedMessage } from './fixtures.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const collect = gc;

const [build, countsArg, limitArg] = process.argv.slice(2);
if (build === undefined || countsArg === undefined) throw new Error('arguments: <build dir> <n,n,…> [ms]');
const { tenantKeys } = await importBuilt<typeof import('../src/index.ts')>(build, 'index');
/** Milliseconds this child may take: no point is started after them. */
const limitMs = limitArg === undefined ? Number.POSITIVE_INFINITY : Number(limitArg);
const began = performance.now();

function used(): number {
  collect();
  collect();
  const memory = process.memoryUsage();
  return memory.heapUsed + memory.external;
}

/** The memory n cached tenants take above the empty cache, in bytes. */
async function heldBy(n: number): Promise<number> {
  // Each tenant its own secret, as tenants have; its request signed with it.
  const names = Array.from({ length: n }, (_, i) => `tenant-${i}`);
  const secrets = new Map<string, string[]>();
  const inputs = names.map((name) => {
    const { secret, key } = newSecret();
    secrets.set(name, [secret]);
    const message = signedMessage(key, jsonBody(64));
    return { headers: message.headers, body: message.body, params: { tenant: name } };
  });
  const empty = used();
  const keys = tenantKeys({ tenant: (request) => request.params.tenant, load: async (tenant) => secrets.get(tenant), maxTenants: n, ttlSeconds: 3600 });
  const verifier = keys.verifier();
  for (const input of inputs) await verifier.verify(input);
  if (keys.usage().tenants !== n) throw new Error(`${n} tenants verified, ${keys.usage().tenants} cached`);
  return used() - empty;
}

// A first round not counted: what the first use of the code costs once (compiled code, lazily
// built state) is not a tenant's.
await heldBy(100);
for (const n of countsArg.split(',').map(Number)) {
  if (performance.now() - began > limitMs) break;
  process.stdout.write(`${JSON.stringify({ tenants: n, bytesPerTenant: (await heldBy(n)) / n })}\n`);
}

/**
 * Section 12: tenant keys.
 *
 * - verification with a cached tenant's keys (`tenantKeys(…).verifier()`, 1 000 tenants cached,
 *   the tenant named by a route parameter) against a static verifier with the same keys
 *   (`createVerifier({ secrets })`), 1 KiB, the same input object for both;
 * - a flood: 10 000 requests at once, each naming a random tenant, against a loader that answers
 *   "unknown" after 5 ms (a database round trip): how many times the loader ran, and how long
 *   the refused requests took to be answered;
 * - a growth curve: time per verified request against the number of tenants (1 to
 *   100 000), each request for a random tenant with its own secret, the loader answering from an
 *   in-memory map, the cache warm, against a static verifier with one secret fed as many requests
 *   in the same order; past the default bound on cached tenants (`maxTenants`, 10 000), with that
 *   bound and with it raised to the number of tenants. And the memory a cached tenant takes, in
 *   a child process run with `--expose-gc` (curve-tenants-child.ts).
 */

import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { curveTable, type Curve } from './charts.ts';
import { curveChild, curveTiming, sample, skippedText } from './curves.ts';
import { jsonBody, KiB, newSecret, signedMessage } from './fixtures.ts';
import { bytesText, judged, ratioText, SECTION_BUDGET_SECONDS, table, timeSummary, timeText, type BenchConfig, type SectionReport } from './report.ts';
import { microTiming, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const STATIC = 'static verifier, same keys';
const TENANT = 'tenant keys, tenant cached';
const TENANTS = 1_000;
const FLOOD = 10_000;
const LOAD_MS = 5;

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink = 0;

/** The requests of one curve point: `tenants` tenants, each with its own secret; and as many for one fixed secret. */
function curveRequests(tenants: number) {
  const body = jsonBody(KiB);
  const secrets = new Map<string, string[]>();
  const tenantInputs = Array.from({ length: tenants }, (_, i) => {
    const name = `tenant-${i}`;
    const { secret, key } = newSecret();
    secrets.set(name, [secret]);
    const message = signedMessage(key, body);
    return { headers: message.headers, body: message.body, params: { tenant: name } };
  });
  const one = newSecret();
  const staticInputs = Array.from({ length: tenants }, () => {
    const message = signedMessage(one.key, body);
    return { headers: message.headers, body: message.body };
  });
  return { secrets, tenantInputs, staticInputs, staticSecret: one.secret };
}

/** Random tenant indexes below `tenants`, the same sequence for every candidate of a point. */
const ORDER_LENGTH = 1 << 16;

const CURVE_STATIC = 'static verifier, one secret';
const CURVE_DEFAULT = 'tenant keys, maxTenants default (10,000)';
const CURVE_RAISED = 'tenant keys, maxTenants = tenants';
const CURVE_MAP = 'a Map of static verifiers, one per tenant';

/**
 * Time per verified request against the number of tenants, and memory per cached tenant.
 * Each request names a random tenant; the cache is warm (every tenant verified once first;
 * the TTL raised to an hour, so no entry expires while the point is timed).
 */
async function tenantsCurve(config: BenchConfig, deadline: number): Promise<{ curves: Curve[]; text: string }> {
  const { createVerifier, tenantKeys, TENANT_KEYS_DEFAULTS } = config.pkg.index;
  const bound = TENANT_KEYS_DEFAULTS.maxTenants;
  const counts = config.quick ? [1, 100] : [1, 100, bound, 10 * bound];
  const overStatic: string[] = [];
  const { points, skipped } = await sample(counts, deadline, async (tenants) => {
    const { secrets, tenantInputs, staticInputs, staticSecret } = curveRequests(tenants);
    const order = Uint32Array.from({ length: ORDER_LENGTH }, () => Math.floor(Math.random() * tenants));
    const load = async (tenant: string) => secrets.get(tenant);
    const tenantOf = (request: { params: Readonly<Record<string, string | undefined>> }) => request.params.tenant;
    const walk = (verifier: { verify(input: (typeof tenantInputs)[number] | (typeof staticInputs)[number]): Promise<{ body: Uint8Array }> }, inputs: readonly object[]) => {
      let at = 0;
      return async (n: number) => {
        for (let i = 0; i < n; i++) sink ^= (await verifier.verify(inputs[order[at++ & (ORDER_LENGTH - 1)]!] as never)).body.length;
      };
    };
    // Many keys cost something whatever holds them (each request's key is another object, cold
    // in the CPU's caches): a static verifier per tenant in a Map, built up front, shows that part.
    const perTenant = new Map([...secrets].map(([name, list]) => [name, createVerifier({ secrets: list })]));
    const byMap = {
      verify: (input: (typeof tenantInputs)[number]) => perTenant.get(input.params.tenant)!.verify(input),
    };
    const candidates: Candidate[] = [
      { name: CURVE_STATIC, run: walk(createVerifier({ secrets: staticSecret }), staticInputs) },
      { name: CURVE_MAP, run: walk(byMap as never, tenantInputs) },
    ];
    const configs = tenants > bound ? [[CURVE_DEFAULT, bound] as const, [CURVE_RAISED, tenants] as const] : [[CURVE_DEFAULT, bound] as const];
    for (const [name, maxTenants] of configs) {
      const verifier = tenantKeys({ tenant: tenantOf, load, maxTenants, ttlSeconds: 3600 }).verifier();
      for (const input of tenantInputs) sink ^= (await verifier.verify(input)).body.length;
      candidates.push({ name, run: walk(verifier, tenantInputs) });
    }
    const timings = await timeInterleaved(candidates, curveTiming(config.quick));
    const over = (name: string, baseline: string) => ratioText(summarize(ratios(series(timings, name), series(timings, baseline))));
    for (const [name] of configs) {
      overStatic.push(`${tenants.toLocaleString('en-US')} tenant${tenants === 1 ? '' : 's'}, ${name.slice('tenant keys, '.length)}: ${over(name, CURVE_STATIC)} (÷ the Map: ${over(name, CURVE_MAP)})`);
    }
    return candidates.map((c) => ({ x: tenants, series: c.name, y: summarize(series(timings, c.name)).median }));
  });
  const time: Curve = {
    kind: 'line',
    id: 'curve-tenant-keys',
    title: 'Tenant keys: time per verified request (1 KiB) vs tenants, a random tenant each',
    x: { title: 'tenants', log: true, unit: 'count' },
    y: { title: 'time per request', log: true, unit: 'seconds' },
    points,
  };
  const heldCounts = config.quick ? [100, 1_000] : [1_000, bound, 10 * bound];
  const limitMs = Math.round(Math.max(5_000, deadline - performance.now()));
  const held = await curveChild<{ tenants: number; bytesPerTenant: number }>('curve-tenants-child.ts', config, [heldCounts.join(','), String(limitMs)], limitMs);
  const memory: Curve = {
    kind: 'line',
    id: 'curve-tenant-keys-memory',
    title: 'Tenant keys: memory per cached tenant vs tenants cached',
    x: { title: 'tenants cached', log: true, unit: 'count' },
    y: { title: 'memory per tenant', unit: 'bytes' },
    points: held.map((p) => ({ x: p.tenants, series: 'V8 heap + external, per tenant', y: p.bytesPerTenant })),
  };
  const heldSkipped = heldCounts.filter((n) => !held.some((p) => p.tenants === n));
  const perTenant = held.at(-1);
  const text = [
    '### Tenant keys vs number of tenants',
    '',
    'Each request names a random tenant (the same random sequence for every candidate), each tenant has its own secret ' +
      'and its request is signed with it; the loader answers from an in-memory map. The cache is warm: every tenant was ' +
      'verified once before timing (`ttlSeconds` raised to an hour, so nothing expires meanwhile). The baseline verifies as ' +
      'many requests, in the same order, with a static verifier and one fixed secret; beside it, a `Map` from tenant to a ' +
      'static verifier of its own, built up front (no cache, no loader): what holding many keys costs by itself, since each ' +
      'request\'s key and verifier are other objects, mostly not in the CPU\'s caches. ' +
      `Up to \`maxTenants\` (default ${bound.toLocaleString('en-US')}) every tenant stays cached; past it, the least recently ` +
      'used are evicted, so a random tenant is mostly not cached: its request waits for a load (here an in-memory answer; ' +
      'in an app a database round trip, at most `maxConcurrentLoads` at once, the rest refused with 503 ' +
      '`KEYS_UNAVAILABLE`), and its keys are decoded again. Raising `maxTenants` to the number of active tenants keeps them all cached.',
    '',
    curveTable(time) + skippedText(skipped, (n) => n.toLocaleString('en-US')),
    '',
    `Tenant keys ÷ static verifier: ${overStatic.join('; ')}.`,
    '',
    `Memory a cached tenant takes: V8's heap and the external memory (key material) above the empty cache, over the ` +
      'tenants, with `tenantKeys({ maxTenants: n })` and n tenants verified once, one HMAC secret each; measured in a child ' +
      'process run with `--expose-gc`, after two full collections, once the code has run once:',
    '',
    curveTable(memory) + skippedText(heldSkipped, (n) => n.toLocaleString('en-US')),
    ...(perTenant === undefined
      ? []
      : ['', `So ${perTenant.tenants.toLocaleString('en-US')} cached tenants take about ${bytesText(perTenant.bytesPerTenant * perTenant.tenants)}. A fixed part (the cache's own) weighs on the smallest count; the larger ones are what a tenant costs.`]),
  ].join('\n');
  return { curves: [time, memory], text };
}

export async function runKeys(config: BenchConfig): Promise<SectionReport> {
  const sectionStart = performance.now();
  const { createVerifier, tenantKeys, TENANT_KEYS_DEFAULTS } = config.pkg.index;
  const { secret, key } = newSecret();
  const message = signedMessage(key, jsonBody(KiB));
  const name = `tenant-${TENANTS / 2}`;
  const input = { headers: message.headers, body: message.body, params: { tenant: name } };

  const keys = tenantKeys({ tenant: (request) => request.params.tenant, load: async () => [secret], maxTenants: TENANTS });
  const tenantVerifier = keys.verifier();
  for (let i = 0; i < TENANTS; i++) await tenantVerifier.verify({ ...input, params: { tenant: `tenant-${i}` } });
  const staticVerifier = createVerifier({ secrets: [secret] });
  if ((await tenantVerifier.verify(input)).tenant !== name || (await staticVerifier.verify(input)).id !== message.id) {
    throw new Error('tenant keys fixture rejected: the comparison would be meaningless');
  }

  const candidates: Candidate[] = [
    {
      name: STATIC,
      async run(n) {
        for (let i = 0; i < n; i++) sink ^= (await staticVerifier.verify(input)).body.length;
      },
    },
    {
      name: TENANT,
      async run(n) {
        for (let i = 0; i < n; i++) sink ^= (await tenantVerifier.verify(input)).body.length;
      },
    },
  ];
  const timings = await timeInterleaved(candidates, microTiming(config.quick));
  const over = summarize(ratios(series(timings, TENANT), series(timings, STATIC)));
  const median = (candidate: string) => summarize(series(timings, candidate)).median;

  // The flood: every request at once, each naming a tenant nobody has.
  let loads = 0;
  let loadsEnded = 0;
  const flooded = tenantKeys({
    tenant: (request) => request.params.tenant,
    load: () =>
      new Promise<undefined>((resolve) => {
        loads++;
        setTimeout(() => {
          loadsEnded++;
          resolve(undefined);
        }, LOAD_MS);
      }),
  });
  const floodVerifier = flooded.verifier();
  const refusedAt: number[] = [];
  let refusedAfterALoad = 0;
  const started = performance.now();
  const outcomes = await Promise.all(
    Array.from({ length: FLOOD }, () =>
      floodVerifier.verify({ ...input, params: { tenant: randomBytes(12).toString('base64url') } }).then(
        () => 'verified',
        (error: { code?: string }) => {
          if (error.code === 'KEYS_UNAVAILABLE') {
            refusedAt.push(performance.now() - started);
            if (loadsEnded > 0) refusedAfterALoad++;
          }
          return String(error.code);
        },
      ),
    ),
  );
  const wall = performance.now() - started;
  const unknown = outcomes.filter((code) => code === 'UNKNOWN_TENANT').length;
  const lastRefusal = Math.max(...refusedAt);
  const limit = TENANT_KEYS_DEFAULTS.maxConcurrentLoads;

  const rows = [
    [STATIC, timeSummary(summarize(series(timings, STATIC))), '1'],
    [TENANT, timeSummary(summarize(series(timings, TENANT))), ratioText(over)],
  ];
  const floodRows = [
    // Issuing 10 000 requests takes longer than one load: the refusals' figure includes issuing them.
    [
      `${FLOOD.toLocaleString('en-US')} at once, a ${LOAD_MS} ms loader`,
      String(loads),
      `${unknown} \`UNKNOWN_TENANT\`, ${refusedAt.length.toLocaleString('en-US')} \`KEYS_UNAVAILABLE\``,
      `${lastRefusal.toFixed(1)} ms`,
      `${wall.toFixed(1)} ms`,
    ],
  ];
  // The curve gets what is left of the section's budget (the two figures above take a few seconds).
  const curve = await tenantsCurve(config, sectionStart + SECTION_BUDGET_SECONDS.keys * 1000 * 0.9);

  const body = [
    `1 KiB JSON, one HMAC secret. The tenant verifier holds ${TENANTS.toLocaleString('en-US')} tenants; the tenant ` +
      'is named by a route parameter and its keys are cached, so each call costs the tenant function, one cache ' +
      'look-up and the verification. Both verify the same input object.',
    '',
    table(['candidate', 'time per call', '÷ static'], rows),
    '',
    `### A flood of random tenant names`,
    '',
    `Every request names a different tenant that does not exist; the loader answers "unknown" after ${LOAD_MS} ms. ` +
      `Loads run at most ${limit} at a time (\`maxConcurrentLoads\`, the default), made-up names in three quarters of ` +
      'them (the last quarter is kept for tenants loaded before); every request past that is refused with ' +
      '`503 KEYS_UNAVAILABLE` without a load and without waiting for one.',
    '',
    table(['flood', 'loader calls', 'answers', 'last refusal answered after', 'all answered after'], floodRows),
    '',
    curve.text,
  ].join('\n');

  return {
    id: 'keys',
    title: '12. Tenant keys',
    body,
    charts: curve.curves,
    targets: [
      {
        what: 'tenant keys verify (tenant cached) ÷ static verifier, same keys, 1 KiB',
        target: '≤ 1.05',
        ...judged(over, '≤', 1.05),
        context: `${timeText(median(TENANT))} vs ${timeText(median(STATIC))}`,
      },
      {
        what: `loader calls, ${FLOOD.toLocaleString('en-US')} requests naming random tenants at once`,
        target: `≤ ${limit}`,
        measured: String(loads),
        context: `refusals answered within ${lastRefusal.toFixed(1)} ms of the first request, ${refusedAfterALoad} of them after a load ended`,
        pass: loads <= limit && refusedAfterALoad === 0,
      },
    ],
  };
}

/**
 * Section 12: tenant keys (issue 25).
 *
 * - verification with a cached tenant's keys (`tenantKeys(…).verifier()`, 1 000 tenants cached,
 *   the tenant named by a route parameter) against a static verifier with the same keys
 *   (`createVerifier({ secrets })`), 1 KiB, the same input object for both;
 * - a flood: 10 000 requests at once, each naming a random tenant, against a loader that answers
 *   "unknown" after 5 ms (a database round trip): how many times the loader ran, and how long
 *   the refused requests took to be answered.
 */

import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { jsonBody, KiB, newSecret, signedMessage } from './fixtures.ts';
import { ratioText, table, timeSummary, timeText, type BenchConfig, type SectionReport } from './report.ts';
import { microTiming, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const STATIC = 'static verifier, same keys';
const TENANT = 'tenant keys, tenant cached';
const TENANTS = 1_000;
const FLOOD = 10_000;
const LOAD_MS = 5;

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink = 0;

export async function runKeys(config: BenchConfig): Promise<SectionReport> {
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
      `Loads run ${limit} at a time (\`maxConcurrentLoads\`, the default); every request past that is refused with ` +
      '`503 KEYS_UNAVAILABLE` without a load and without waiting for one.',
    '',
    table(['flood', 'loader calls', 'answers', 'last refusal answered after', 'all answered after'], floodRows),
  ].join('\n');

  return {
    id: 'keys',
    title: '12. Tenant keys',
    body,
    targets: [
      {
        what: 'tenant keys verify (tenant cached) ÷ static verifier, same keys, 1 KiB',
        target: '≤ 1.05',
        measured: ratioText(over),
        context: `${timeText(median(TENANT))} vs ${timeText(median(STATIC))}`,
        pass: over.median <= 1.05,
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

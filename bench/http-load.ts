/**
 * The load generator of the HTTP section, in its own process (neither the servers' nor the
 * orchestrator's): autocannon's API, driven over an IPC channel.
 *
 * For each run it is sent `{ type: 'run', url, seconds, connections, expectedRps, tag }`. It signs
 * a pool of requests first (a 1 KiB JSON body, each with its own `webhook-id` and a fresh
 * timestamp), then has autocannon take them in turn across all connections, so no id is sent
 * twice; past the end of the pool it signs on the fly (and says how often). It answers with
 * `{ type: 'result', … }`.
 */

import { createRequire } from 'node:module';
import { jsonBody, KiB, nowSeconds, signEntry } from './fixtures.ts';

/** The part of autocannon's options and result this file uses (the package ships no types). */
interface AutocannonRequest {
  setupRequest?: (request: { headers?: Record<string, string> }) => { headers?: Record<string, string> };
}
interface AutocannonOptions {
  url: string;
  method: 'POST';
  connections: number;
  pipelining: number;
  duration: number;
  body: Buffer;
  headers: Record<string, string>;
  requests: AutocannonRequest[];
}
interface AutocannonResult {
  duration: number;
  requests: { total: number; average: number };
  latency: { p50: number; p99: number; average: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats?: Record<string, { count: number }>;
}
type Autocannon = (options: AutocannonOptions) => Promise<AutocannonResult>;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

export interface RunRequest {
  type: 'run';
  url: string;
  seconds: number;
  connections: number;
  /** Sizes the pool: requests per second the last run of this cell reached. */
  expectedRps: number;
  /** Distinguishes this run's ids from every other run's. */
  tag: string;
  /**
   * Every `every`-th request carries an id named after `tag` instead of the run's own: two load
   * generators given the same shared tag send those ids to two servers at about the same moment,
   * as a sender's retry can land on another process (the capacity section's two receivers).
   */
  shared?: { tag: string; every: number };
  /** Requests a second across all connections, sent at that pace whatever the answers' speed (absent: as fast as the server answers). */
  rate?: number;
}

export interface RunResult {
  type: 'result';
  rps: number;
  p50: number;
  p99: number;
  total: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  pooled: number;
  signedOnTheFly: number;
}

const secret = process.env.BENCH_SECRET;
if (secret === undefined || !secret.startsWith('whsec_')) throw new Error('BENCH_SECRET must hold a whsec_ secret');
const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
const body = jsonBody(KiB);

function signedHeaders(request: RunRequest, n: number, timestamp: number): Record<string, string> {
  const id = request.shared !== undefined && n % request.shared.every === 0 ? `msg_${request.shared.tag}_${n}` : `msg_${request.tag}_${n}`;
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signEntry(key, id, timestamp, body) };
}

async function run(request: RunRequest): Promise<RunResult> {
  const size = Math.ceil(request.expectedRps * request.seconds * 1.2) + 2000;
  const timestamp = nowSeconds();
  const pool = Array.from({ length: size }, (_, n) => signedHeaders(request, n, timestamp));
  let next = 0;
  let onTheFly = 0;
  const result = await autocannon({
    url: request.url,
    method: 'POST',
    connections: request.connections,
    pipelining: 1,
    duration: request.seconds,
    ...(request.rate === undefined ? {} : { overallRate: request.rate }),
    body,
    headers: { 'content-type': 'application/json' },
    requests: [
      {
        setupRequest(req) {
          const n = next++;
          let signed = pool[n];
          if (signed === undefined) {
            onTheFly++;
            signed = signedHeaders(request, n, nowSeconds());
          }
          return { ...req, headers: { ...req.headers, ...signed } };
        },
      },
    ],
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stats.count;
  return {
    type: 'result',
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    pooled: Math.min(next, size),
    signedOnTheFly: onTheFly,
  };
}

if (typeof process.send !== 'function') throw new Error('http-load.ts runs as a child with an IPC channel');
process.on('message', (message: RunRequest) => {
  if (message?.type !== 'run') return;
  run(message).then(
    (result) => process.send!(result),
    (error: unknown) => process.send!({ type: 'error', message: error instanceof Error ? error.stack : String(error) }),
  );
});
process.once('disconnect', () => process.exit(0));
process.send({ type: 'ready' });

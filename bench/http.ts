/**
 * Section 4: HTTP on 127.0.0.1, a 1 KiB JSON body, for Express, Fastify, Hono (on
 * @hono/node-server) and plain node:http, each with six variants (http-cases.ts): no
 * verification, a hand-written inline `node:crypto` check, an inline `standardwebhooks` check,
 * this package's adapter verifying only, the hand-written check plus a bare bounded Map of ids,
 * and this package's adapter with verification and the memory store; each of ours is compared
 * with the baseline doing the same work. Hono has a seventh: this package's Fetch
 * handler on the same `@hono/node-server`, without Hono. Koa and NestJS have the inline
 * check and the adapter verifying only.
 *
 * Each server runs in its own process (http-server.ts), and autocannon in another
 * (http-load.ts). Every request carries its own `webhook-id` and a valid signature, so the
 * adapter processes each one (a duplicate would be answered 200 instead of 204 and fail the run).
 * Per framework: a warm-up run per variant, then repetitions that each run every variant once, in
 * an order that rotates between repetitions.
 */

import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { newSecret } from './fixtures.ts';
import { selectedFrameworks, TARGETED, variantsOf, WEBHOOK_PATH, type Framework, type Variant } from './http-cases.ts';
import type { RunRequest, RunResult } from './http-load.ts';
import { type BenchConfig, fixed, QUICK_RUN_SECONDS, rateText, judged, ratioText, ROOT, type SectionReport, table, type TargetResult } from './report.ts';
import { ratios, summarize } from './stats.ts';

export const CONNECTIONS = 10;
// A bound on a hang, not a timing: a framework's servers start together, and at a load average of
// 9 to 14 on two cores one of seven took over 30 s to listen.
export const START_TIMEOUT_MS = 120_000;

const VARIANT_LABELS: Record<Variant, string> = {
  none: '(a) no verification',
  inline: '(b) hand-written node:crypto check',
  standardwebhooks: '(c) inline standardwebhooks',
  verify: '(d) our adapter, verification only (`idempotency: false`)',
  'inline-store': '(e) hand-written check + a bare bounded Map of ids',
  adapter: '(f) our adapter + memory store',
  fetch: '(g) our Fetch handler + memory store, on @hono/node-server without Hono',
};

/**
 * Like with like: each of our rows is compared with the baseline that does the same
 * work: verification only with the hand-written check, verification and the memory store with the
 * hand-written check plus the bare store operations, the Fetch handler with the Hono adapter.
 */
const LIKE: Partial<Record<Variant, Variant>> = { verify: 'inline', adapter: 'inline-store', fetch: 'adapter' };

/** A child with an IPC channel, and a way to wait for its next message of a given type. */
export class Child {
  readonly #process: ChildProcess;
  readonly #waiting: { type: string; resolve: (message: Record<string, unknown>) => void }[] = [];
  #stderr = '';
  #exit: string | undefined;

  constructor(script: string, args: readonly string[], env: Record<string, string>) {
    this.#process = fork(join(ROOT, 'bench', script), [...args], {
      cwd: ROOT,
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.#process.stderr?.on('data', (chunk: Buffer) => {
      if (this.#stderr.length < 8192) this.#stderr += chunk.toString('utf8');
    });
    this.#process.on('message', (message: Record<string, unknown>) => {
      const index = this.#waiting.findIndex((w) => w.type === message.type || message.type === 'error');
      if (index !== -1) this.#waiting.splice(index, 1)[0]!.resolve(message);
    });
    this.#process.once('exit', (code, signal) => {
      this.#exit = `exited with ${signal ?? code}`;
      for (const w of this.#waiting.splice(0)) w.resolve({ type: 'exit' });
    });
  }

  /** The child's process id (its CPU time is read from /proc by the capacity section). */
  get pid(): number {
    return this.#process.pid!;
  }

  /** Sends `request` (if any) and waits for a message of `type`, at most `timeoutMs`. */
  async ask<T>(type: string, request: object | undefined, timeoutMs: number, what: string): Promise<T> {
    if (this.#exit !== undefined) throw new Error(`${what}: the child ${this.#exit}\n${this.#stderr.trim()}`);
    let timer: NodeJS.Timeout | undefined;
    const reply = new Promise<Record<string, unknown>>((resolve) => {
      this.#waiting.push({ type, resolve });
      timer = setTimeout(() => resolve({ type: 'timeout' }), timeoutMs);
    });
    if (request !== undefined) this.#process.send(request);
    const message = await reply;
    clearTimeout(timer);
    if (message.type === type) return message as T;
    const why = message.type === 'error' ? String(message.message) : message.type === 'exit' ? `the child ${this.#exit}` : `no answer within ${timeoutMs} ms`;
    throw new Error(`${what}: ${why}\n${this.#stderr.trim()}`);
  }

  async stop(): Promise<void> {
    if (this.#exit !== undefined) return;
    const exited = new Promise<void>((resolve) => this.#process.once('exit', () => resolve()));
    this.#process.disconnect();
    const timer = setTimeout(() => this.#process.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}

/** A server child and the port it listens on. */
export interface ServerChild {
  child: Child;
  port: number;
}

/** One run's autocannon figures, and the server's CPU time per request it processed (µs). */
export interface CheckedRun extends RunResult {
  cpuPerRequest: number;
  processed: number;
}

/**
 * Requests per second a run's pool of pre-signed requests is sized for: twice the fastest run of
 * the cell so far (at least 10 000), or 60 000 before its first run. Signing 150 000 requests costs
 * the load generator about 0.35 s before every run, which slow cells (a few thousand req/s) do not
 * need; a request past the pool is signed on the fly and counted.
 */
export function poolRps(fastestOfCell: number): number {
  return fastestOfCell > 0 ? Math.max(10_000, 2 * fastestOfCell) : 60_000;
}

/**
 * One load run against `server`, checked: every answer must be the handler's 204 (or `status`: an
 * inbox's 202) and every one of them a processed event (a few more may have been processed while
 * autocannon closed its connections at the end); anything else fails the run.
 */
export async function checkedRun(
  load: Child,
  server: ServerChild,
  what: string,
  seconds: number,
  connections: number,
  expectedRps: number,
  status = 204,
  rate?: number,
): Promise<CheckedRun> {
  type Stats = { processed: number; cpuMicros: number };
  const before = await server.child.ask<Stats>('stats', { type: 'stats' }, 5000, what);
  const request: RunRequest = {
    type: 'run',
    url: `http://127.0.0.1:${server.port}${WEBHOOK_PATH}`,
    seconds,
    connections,
    expectedRps,
    tag: randomBytes(6).toString('hex'),
    ...(rate === undefined ? {} : { rate }),
  };
  const result = await load.ask<RunResult>('result', request, (seconds + 60) * 1000, `load on ${what}`);
  const after = await server.child.ask<Stats>('stats', { type: 'stats' }, 5000, what);
  const processed = after.processed - before.processed;
  const answered = result.statusCodes[String(status)] ?? 0;
  const others = Object.entries(result.statusCodes).filter(([code]) => code !== String(status));
  if (others.length > 0 || result.errors > 0 || result.timeouts > 0 || answered === 0 || processed < answered || processed > answered + connections) {
    throw new Error(
      `${what}: the run was not clean: statuses ${JSON.stringify(result.statusCodes)}, ${result.errors} errors, ` +
        `${result.timeouts} timeouts, ${processed} events processed for ${answered} answers ${status}`,
    );
  }
  return { ...result, processed, cpuPerRequest: (after.cpuMicros - before.cpuMicros) / processed };
}

/**
 * Checked runs whose pool of pre-signed requests is sized by the fastest run so far of the same
 * `key` (poolRps): a request signed on the fly costs the load generator time, which would slow
 * the cells it bottlenecks.
 */
export function sizedRuns(
  load: Child,
): (key: string, server: ServerChild, what: string, seconds: number, connections: number, status?: number, rate?: number) => Promise<CheckedRun> {
  const fastest = new Map<string, number>();
  return async (key, server, what, seconds, connections, status, rate) => {
    const result = await checkedRun(load, server, what, seconds, connections, poolRps(fastest.get(key) ?? 0), status, rate);
    fastest.set(key, Math.max(fastest.get(key) ?? 0, result.rps));
    return result;
  };
}

/** Starts a server child (http-server.ts with `args`) and waits for its port. */
export async function startServer(args: readonly string[], env: Record<string, string>, what: string): Promise<ServerChild> {
  const child = new Child('http-server.ts', args, env);
  try {
    const { port } = await child.ask<{ port: number }>('ready', undefined, START_TIMEOUT_MS, `starting ${what}`);
    return { child, port };
  } catch (error) {
    await child.stop();
    throw error;
  }
}

interface Cell {
  rps: number[];
  p99: number[];
  /** Server CPU time per processed request, µs. */
  cpu: number[];
  signedOnTheFly: number;
}

export async function runHttp(config: BenchConfig): Promise<SectionReport> {
  // Five shorter runs rather than three long ones: on a shared machine the median of five shrugs
  // off a run that another process disturbed.
  // Two seconds a run (formerly three): the CPU-per-request headline settles quicker than req/s,
  // and the whole `npm run bench` must stay under ten minutes on a loaded machine too.
  const seconds = config.quick ? QUICK_RUN_SECONDS : 2;
  // The smoke run only proves that every cell works: no warm-up.
  const warmupSeconds = config.quick ? 0 : 1;
  const reps = config.quick ? 1 : 5;
  // Koa and NestJS have no target (their rows are context): three repetitions instead of five keep
  // the whole run within its ten minutes now that section 10 and the Fetch cell were added.
  const repsOf = (framework: Framework) => (config.quick || TARGETED.includes(framework) ? reps : 3);
  const { secret } = newSecret();
  const env = { BENCH_SECRET: secret, BENCH_BUILD: config.pkg.dir };
  const frameworks = selectedFrameworks(process.env.BENCH_HTTP_FRAMEWORKS);
  const load = new Child('http-load.ts', [], env);
  const cells = new Map<string, Cell>();
  const sized = sizedRuns(load);
  const cellOf = (framework: Framework, variant: Variant): Cell => {
    const name = `${framework} ${variant}`;
    let cell = cells.get(name);
    if (cell === undefined) cells.set(name, (cell = { rps: [], p99: [], cpu: [], signedOnTheFly: 0 }));
    return cell;
  };

  try {
    await load.ask('ready', undefined, START_TIMEOUT_MS, 'starting the load generator');
    for (const framework of frameworks) {
      const variants = variantsOf(framework);
      const servers = new Map<Variant, ServerChild>();
      try {
        // Settled, not all: a server that fails to start must not leave the others running.
        const started = await Promise.allSettled(variants.map(async (variant) => [variant, await startServer([framework, variant], env, `${framework} ${variant}`)] as const));
        for (const outcome of started) if (outcome.status === 'fulfilled') servers.set(...outcome.value);
        const failed = started.find((outcome) => outcome.status === 'rejected');
        if (failed !== undefined) throw failed.reason;
        const measure = async (variant: Variant, duration: number): Promise<CheckedRun> => {
          const what = `${framework} ${variant}`;
          const result = await sized(what, servers.get(variant)!, what, duration, CONNECTIONS);
          cellOf(framework, variant).signedOnTheFly += result.signedOnTheFly;
          return result;
        };

        if (warmupSeconds > 0) for (const variant of variants) await measure(variant, warmupSeconds);
        for (let rep = 0; rep < repsOf(framework); rep++) {
          for (let k = 0; k < variants.length; k++) {
            const variant = variants[(rep + k) % variants.length]!;
            const result = await measure(variant, seconds);
            const cell = cellOf(framework, variant);
            cell.rps.push(result.rps);
            cell.p99.push(result.p99);
            cell.cpu.push(result.cpuPerRequest);
          }
        }
      } finally {
        await Promise.all([...servers.values()].map((s) => s.child.stop()));
      }
    }
  } finally {
    await load.stop();
  }

  const rows: string[][] = [];
  const targets: TargetResult[] = [];
  let onTheFly = 0;
  for (const framework of frameworks) {
    const rps = (variant: Variant) => cellOf(framework, variant).rps;
    const cpuOf = (variant: Variant) => cellOf(framework, variant).cpu;
    for (const variant of variantsOf(framework)) {
      const cell = cellOf(framework, variant);
      onTheFly += cell.signedOnTheFly;
      const r = summarize(cell.rps);
      const c = summarize(cell.cpu);
      const p99 = summarize(cell.p99).median;
      const like = LIKE[variant];
      const compared = like !== undefined && variantsOf(framework).includes(like);
      rows.push([
        framework,
        VARIANT_LABELS[variant],
        `${rateText(r.median)} (${rateText(r.min)}–${rateText(r.max)})`,
        `${fixed(c.median, 1)} µs (${fixed(c.min, 1)}–${fixed(c.max, 1)})`,
        compared ? VARIANT_LABELS[like].slice(0, 3) : '–',
        compared ? ratioText(summarize(ratios(cell.cpu, cpuOf(like)))) : '–',
        compared ? ratioText(summarize(ratios(cell.rps, rps(like)))) : '–',
        // autocannon records latency in whole milliseconds.
        p99 < 1 ? '< 1 ms' : `${fixed(p99, 0)} ms`,
      ]);
    }
    const cpu = (variant: Variant) => fixed(summarize(cpuOf(variant)).median, 1);
    // The headline is server CPU per request, candidate over baseline within each repetition: it
    // holds when the machine is loaded, where req/s moved 0.39–2.43. req/s stands beside it.
    const context = (a: Variant, b: Variant) =>
      `server CPU ${cpu(a)} vs ${cpu(b)} µs per request; req/s ${rateText(summarize(rps(a)).median)} vs ${rateText(summarize(rps(b)).median)}, ` +
      `ratio ${ratioText(summarize(ratios(rps(a), rps(b))))}`;
    // Koa and NestJS are shown against their own inline check, for context: they have no target.
    if (!TARGETED.includes(framework)) continue;
    // The req/s targets (≥ 0.9 of the inline check, ≥ 1.4× inline standardwebhooks) as CPU per
    // request, each of ours against the baseline doing the same work.
    const overInline = summarize(ratios(cpuOf('verify'), cpuOf('inline')));
    targets.push({
      what: `adapter, verification only, server CPU per request ÷ hand-written inline check, ${framework}`,
      target: '≤ 1.11 (req/s ≥ 0.9)',
      ...judged(overInline, '≤', 1 / 0.9),
      context: context('verify', 'inline'),
    });
    const overBareStore = summarize(ratios(cpuOf('adapter'), cpuOf('inline-store')));
    targets.push({
      what: `adapter + memory store, server CPU per request ÷ hand-written check + a bare Map, ${framework}`,
      target: '≤ 1.11 (req/s ≥ 0.9)',
      ...judged(overBareStore, '≤', 1 / 0.9),
      context: context('adapter', 'inline-store'),
    });
    if (framework !== 'express') {
      const overStandard = summarize(ratios(cpuOf('verify'), cpuOf('standardwebhooks')));
      targets.push({
        what: `adapter, verification only, server CPU per request ÷ inline \`standardwebhooks\`, ${framework}`,
        target: '≤ 0.71 (req/s ≥ 1.4×)',
        ...judged(overStandard, '≤', 1 / 1.4),
        // The least any verifier could score here: the hand-written check against the same baseline.
        context: `${context('verify', 'standardwebhooks')}; the hand-written check ÷ inline \`standardwebhooks\` ${ratioText(summarize(ratios(cpuOf('inline'), cpuOf('standardwebhooks'))))}`,
      });
    }
    if (framework === 'hono') {
      // The Fetch handler on Node against the Hono adapter on the same server, same runs.
      const fetchOverAdapter = summarize(ratios(rps('fetch'), rps('adapter')));
      targets.push({
        what: 'Fetch handler on Node ÷ Hono adapter on Node, req/s, 1 KiB',
        target: '≥ 0.9',
        ...judged(fetchOverAdapter, '≥', 0.9),
        context:
          `req/s ${rateText(summarize(rps('fetch')).median)} vs ${rateText(summarize(rps('adapter')).median)}; server CPU ${cpu('fetch')} vs ${cpu('adapter')} µs per request, ` +
          `ratio ${ratioText(summarize(ratios(cpuOf('fetch'), cpuOf('adapter'))))}`,
      });
    }
  }

  const body = [
    `autocannon in its own process, ${CONNECTIONS} connections, ${seconds} s per run, ${reps} repetition${reps === 1 ? '' : 's'} ` +
      (repsOf('koa') === reps ? '' : `(Koa and NestJS, which have no target: ${repsOf('koa')}) `) +
      `${warmupSeconds > 0 ? `after a ${warmupSeconds} s warm-up per server` : 'without warm-up'}; each server in its own process. Every request: POST, 1 KiB JSON, its own ` +
      '`webhook-id`, a valid signature; every handler gets the parsed event and answers 204 (checked: every answer was a 204 ' +
      'and every 204 a processed event). Requests per second are medians over repetitions (min–max); p99 latency is the median of the runs\' p99.',
    '',
    table(['framework', 'variant', 'req/s', 'server CPU per request', 'compared with', 'CPU ÷ that', 'req/s ÷ that', 'p99'], rows),
    '',
    '"Server CPU per request" is the server process\'s CPU time (user + system) over the requests its handler processed, ' +
      'and it is the headline of the targets: unlike req/s it does not depend on whether the server or the load generator ' +
      'was the bottleneck, nor on what else the machine runs. On two cores the load generator and the server each take ' +
      'one, so the fastest cells (around 50 000 req/s here) measure the load generator as much as the server, and their ' +
      'req/s ratios understate the differences in server cost; under load, req/s ratios moved 0.39–2.43 between runs.',
    '',
    'Each of our rows is compared with the row that does the same work ("compared with"): (d), verification only, with the ' +
      'hand-written check (b); (f), verification and the memory store, with the hand-written check plus the bare store ' +
      'operations (e): a `Map` bounded like the store, where each id is looked up, the oldest forgotten when full, the new one ' +
      'inserted, and marked done after the handler; (g) with (f).',
    '',
    'How each variant reads the body: Express (a) `express.json()`, (b)/(c)/(e) `express.raw()`, (d)/(f) `webhooks()`; Fastify (a) its ' +
      'JSON parser, (b)/(c)/(e) a buffer parser for `application/json`, (d)/(f) the plugin in a scope; Hono (a) `c.req.json()`, (b)/(e) ' +
      '`c.req.arrayBuffer()`, (c) `c.req.text()`, (d)/(f) `webhooks()`; node:http (a)/(b)/(c)/(e) the stream read by hand, (d)/(f) the ' +
      'Express middleware of this package used as a plain `(req, res, next)` function; Koa (b) the stream read by hand in a ' +
      'middleware, (d) `webhooks()` before the handler; NestJS on Express and on Fastify, both created with `rawBody: true`: ' +
      '(b) a route that checks `req.rawBody` by hand, (d) the same route behind `WebhookInterceptor`. Row (g) is this package\'s ' +
      'Fetch handler (`webhook-receiver/fetch`) served by `@hono/node-server` as `serve({ fetch })` serves it, without a Hono ' +
      'app, measured in the same repetitions as the Hono rows; its handler reads `webhook.json()` and returns nothing (204).' +
      (onTheFly > 0 ? ` ${onTheFly} requests outran the pre-signed pool and were signed by the load generator on the fly.` : ''),
  ].join('\n');
  return { id: 'http', title: '4. HTTP', body, targets };
}

/**
 * The benchmark suite's smoke run (`npm run bench -- --quick`), as a child process: it proves that
 * every section still runs and reports, with few iterations and one-second HTTP runs. Benchmarks
 * are not tests: nothing here asserts a speed, only that the report is complete.
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { findPostgresBin } from '../support/postgres-server.ts';
import { ensureNode, NodeLineError } from '../support/node-lines.ts';
import { findRedisServer, isCI } from '../support/redis-server.ts';
import { fauxqsRuns, pgBossRuns } from '../support/node-version.ts';

const root = resolve(import.meta.dirname, '../..');
// The smoke run takes about a minute and a half on a quiet machine (190 s with the load average at
// 13 to 22 on two cores before the capacity section, which took 90 s more at a load of 12);
// nothing is timed against this limit: it only stops a run that hangs.
const TIME_LIMIT_MS = 520_000;

interface Result {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function runBench(args: readonly string[]): Promise<Result> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { cwd: root, timeout: TIME_LIMIT_MS });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code, signal) => resolvePromise({ code, signal, stdout, stderr }));
  });
}

/** The rows of the Markdown table that follows `heading`, as arrays of cells. */
function tableAfter(markdown: string, heading: string): string[][] {
  const start = markdown.indexOf(`\n${heading}\n`);
  if (start === -1) throw new Error(`no section ${heading} in the report`);
  const rows: string[][] = [];
  let inTable = false;
  for (const line of markdown.slice(start + heading.length + 2).split('\n')) {
    if (line.startsWith('## ')) break;
    if (line.startsWith('|')) {
      inTable = true;
      rows.push(line.slice(1, -1).split(' | ').map((cell) => cell.trim()));
    } else if (inTable) break;
  }
  // The header and its --- line.
  return rows.slice(2);
}

const redisPresent = findRedisServer() !== undefined || isCI();
const storesPresent = redisPresent && (findPostgresBin() !== undefined || Boolean(process.env.DATABASE_URL));
// pg-boss 12 runs on Node 22.12 and later: on an older Node the inbox section measures BullMQ only.
const inboxEngines = pgBossRuns() ? ['bullmq', 'pg-boss'] : ['bullmq'];
// fauxqs (the local SQS the inbox section accepts into) runs on Node 22.5 and later.
const sqsRuns = fauxqsRuns();

describe('npm run bench -- --quick', () => {
  it(
    'runs every section and prints the targets table and each section\'s table',
    async () => {
      const charts = mkdtempSync(join(tmpdir(), 'bench-charts-'));
      onTestFinished(() => rmSync(charts, { recursive: true, force: true }));
      const result = await runBench(['--quick', '--charts', charts]);
      expect(result.signal, result.stderr).toBeNull();
      expect(result.code, result.stderr).toBe(0);
      const report = result.stdout;

      expect(report).toMatch(/^# Benchmark results\n/);
      expect(report).toContain('quick smoke run');
      expect(report).toMatch(/- Machine: .+, \d+ cores, .+ memory/);
      expect(report).toMatch(/- Runtime: Node v\d+/);

      const targetsHeading = /^## Targets \(\d+ of \d+ met\)$/m.exec(report);
      expect(targetsHeading).not.toBeNull();
      const targets = tableAfter(report, targetsHeading![0]);
      const what = targets.map((row) => row[0]);
      const expected = [
        ...['1 KiB, valid', '1 MiB, valid', '1 KiB, forged'].flatMap((request) => [
          `fastest peer ÷ ours (node:crypto), ${request}`,
          ...(request.startsWith('1 KiB') ? [`ours (node:crypto) ÷ the hand-written check, ${request}`] : [`ours (node:crypto) ÷ bare HMAC (the floor), ${request}`]),
        ]),
        'three secrets, match last, steady state ÷ one secret (1 KiB)',
        'forced WebCrypto verify ÷ bare `crypto.subtle` sign, sequential (1 KiB)',
        'forced WebCrypto verify ÷ the cheapest hand-written WebCrypto check, main-thread time, 64 in flight (1 KiB)',
        ...['express', 'fastify', 'hono', 'node:http'].flatMap((framework) => [
          `adapter, verification only, server CPU per request ÷ hand-written inline check, ${framework}`,
          `adapter + memory store, server CPU per request ÷ hand-written check + a bare Map, ${framework}`,
          ...(framework === 'express' ? [] : [`adapter, verification only, server CPU per request ÷ inline \`standardwebhooks\`, ${framework}`]),
          ...(framework === 'hono' ? ['Fetch handler on Node ÷ Hono adapter on Node, req/s, 1 KiB'] : []),
        ]),
        ...(redisPresent
          ? ['Redis round trips per claim (steady state; ioredis and node-redis)', 'Redis store process CPU per delivery ÷ the bare client sending the same two EVALSHAs (ioredis, 64 in flight)']
          : []),
        'memory store heap after 50,000 ids, bound 10,000 (quick run)',
        'reusable signer ÷ bare `createHmac`, 1 KiB',
        ...(storesPresent
          ? [
              ...['Redis store (ioredis, `enableAutoPipelining: true`)', 'Redis store (node-redis, default client)', 'Postgres store (`pg` Pool, max 16)'].map(
                (store) => `${store} behind the Fastify adapter, server CPU per request ÷ hand-written verify + the same store commands, 16 connections`,
              ),
            ]
          : []),
        'receiver claim + complete ÷ (verify + a bare Map), memory store, 1 KiB',
        'tenant keys verify (tenant cached) ÷ static verifier, same keys, 1 KiB',
        'loader calls, 10,000 requests naming random tenants at once',
        ...(storesPresent
          ? [
              'accepting into bullmq (Fastify adapter, Redis store, ioredis), server CPU per request ÷ hand-written verify + the same store commands + `queue.add`, 16 connections',
              'accepting into pg-boss (Fastify adapter, Postgres store, `pg` Pool), server CPU per request ÷ hand-written verify + the same store commands + `boss.send`, 16 connections',
            ].slice(0, inboxEngines.length)
          : []),
        ...(storesPresent && sqsRuns
          ? ['accepting into sqs (Fastify adapter, Redis store, ioredis; local SQS), server CPU per request ÷ hand-written verify + the same store commands + `SendMessage`, 16 connections']
          : []),
        // Section 16's measured check of the capacity model: throughput against the prediction, ids once.
        ...(storesPresent
          ? ['Redis', 'Postgres'].flatMap((store) => [
              `two receivers sharing one ${store}: measured ÷ predicted throughput (cores ÷ summed CPU per delivery)`,
              `two receivers sharing one ${store}: ids processed twice or by neither`,
            ])
          : []),
      ];
      expect(what).toEqual(expected);
      for (const row of targets) {
        expect(row).toHaveLength(5);
        // A measured figure, and a verdict either way (speeds are not asserted).
        expect(row[2]).toMatch(/\d/);
        expect(['pass', 'tie', '**MISS**']).toContain(row[4]);
      }

      // Section 1: every candidate on each request, ours first; the peer versions in the header.
      expect(report).toMatch(/^- Peers: standardwebhooks \d+\.\d+\.\d+, svix 2\.\d+\.\d+ .*, @octokit\/webhooks-methods \d+\.\d+\.\d+, stripe \d+\.\d+\.\d+$/m);
      const peers = tableAfter(report, '## 1. Peers, same work');
      const candidates = (extra: string[]) => [
        'ours, node:crypto',
        ...extra,
        'ours, WebCrypto',
        'hand-written check',
        'hand-written check, Buffer key',
        'hand-written check, GitHub scheme',
        'bare HMAC (floor)',
        'standardwebhooks',
        'svix 2',
        '@octokit/webhooks-methods',
        'Stripe constructEvent',
        'Stripe constructEventAsync',
      ];
      expect(peers.map((row) => `${row[0]}: ${row[1]}`)).toEqual([
        ...candidates(['ours, node:crypto, + json()']).map((c) => `1 KiB, valid: ${c}`),
        ...candidates(['ours, node:crypto, + json()']).map((c) => `1 MiB, valid: ${c}`),
        ...candidates([]).map((c) => `1 KiB, forged: ${c}`),
      ]);
      for (const row of peers) expect(row[3]).toMatch(/^(1|\d+\.\d\d \()/);
      // What the distance to the GitHub-scheme peer is made of, on both 1 KiB requests.
      const sharesParagraph = report.split('\n').find((line) => line.startsWith('**What the distance to `@octokit/webhooks-methods` is made of.**'));
      expect(sharesParagraph).toBeDefined();
      const shares = tableAfter(report, sharesParagraph!);
      expect(shares.map((row) => row[0])).toEqual(['1 KiB, valid', '1 KiB, forged']);
      for (const row of shares) {
        expect(row[1]).toMatch(/^GitHub's scheme by hand ÷ Standard Webhooks by hand \d+\.\d\d \(.*\); `@octokit\/webhooks-methods` ÷ GitHub's scheme by hand \d+\.\d\d \(.*\); ours ÷ Standard Webhooks by hand \d+\.\d\d \(/);
      }
      expect(tableAfter(report, '### What each library checks').map((row) => row[0])).toHaveLength(5);
      // The sub-run on another Node line (in a quick run, this process's own line) prints section 1's whole table.
      const lines = tableAfter(report, '### On each Node line');
      expect(lines.map((row) => `${row[1]}: ${row[2]}`)).toEqual(peers.map((row) => `${row[0]}: ${row[1]}`));
      for (const row of lines) {
        expect(row[0]).toBe(process.version);
        expect(row[3]).toMatch(/^[\d.]+ [nµm]?s$/);
        expect(row[4]).toMatch(row[2] === 'ours, node:crypto' ? /^1$/ : /^\d+\.\d\d$/);
        expect(row[5]).toMatch(/^\d+\.\d\d$/);
      }
      expect(tableAfter(report, '## 2. Rotation')).toHaveLength(4);
      const webCrypto = tableAfter(report, '## 3. WebCrypto path');
      expect(webCrypto).toHaveLength(9);
      // The floor of the 64-in-flight figure: the cheapest hand-written check, and ours over it.
      expect(webCrypto[6]![1]).toMatch(/^hand-written check/);
      expect(webCrypto[6]![3]).toMatch(/^\d+\.\d+ \(.*\); ours ÷ this \d+\.\d+ \(/);
      // The target's figure: main-thread time per call, ours over the hand-written check.
      expect(webCrypto.slice(7).map((row) => `${row[0]}: ${row[1]}`)).toEqual(['64 in flight, main thread only: ours, WebCrypto forced', '64 in flight, main thread only: hand-written check']);
      expect(webCrypto[7]![3]).toMatch(/^\d+\.\d+ \(.*\) of the hand-written check$/);

      const http = tableAfter(report, '## 4. HTTP');
      expect(http.map((row) => `${row[0]} ${row[1]!.slice(0, 3)}`)).toEqual(
        [
          ...['express', 'fastify', 'hono', 'node:http'].flatMap((framework) =>
            [...['(a)', '(b)', '(c)', '(d)', '(e)', '(f)'], ...(framework === 'hono' ? ['(g)'] : [])].map((v) => `${framework} ${v}`),
          ),
          // Koa and NestJS: the inline check and the adapter verifying only.
          ...['koa', 'nestjs-express', 'nestjs-fastify'].flatMap((framework) => ['(b)', '(d)'].map((v) => `${framework} ${v}`)),
        ],
      );
      for (const row of http) {
        expect(row[2]).toMatch(/^[\d,]+ \(/);
        // Server CPU per request, with its spread; our rows against the row doing the same work.
        expect(row[3]).toMatch(/^\d+\.\d µs \(/);
        const like = { '(d)': '(b)', '(f)': '(e)', '(g)': '(f)' }[row[1]!.slice(0, 3)];
        expect(row[4]).toBe(like ?? '–');
        if (like !== undefined) expect(row[5]).toMatch(/^\d+\.\d\d \(/);
      }

      if (redisPresent) {
        expect(report).toContain('| ioredis | claim, steady state (20 claims) | 1.00 | 20 EVALSHA |');
        expect(report).toContain('| node-redis | claim, steady state (20 claims) | 1.00 | 20 EVALSHA |');
        expect(report).toMatch(/^Process CPU per delivery \(claim, then complete\), 64 in flight, ioredis: our store [\d.]+ µs, the bare client/m);
      } else {
        expect(report).toContain('SKIPPED: redis-server is not on the PATH');
      }

      const memory = tableAfter(report, '## 6. Memory');
      expect(memory.map((row) => row[0])).toEqual(['0', '10,000', '20,000', '50,000']);

      expect(tableAfter(report, '## 7. Signing').map((row) => row[0])).toEqual([
        'createSigner(secret), then sign()',
        'signWebhook({ secret, … })',
        'bare createHmac',
        'bare createHmac, Buffer key',
      ]);
      // Every section says how long it took and what the machine's load was meanwhile.
      expect(report.match(/^_Section wall time: [\d.]+ s \(budget \d+ s\); load average \(1 min\) [\d.]+–[\d.]+ on \d+ cores\._$/gm)).toHaveLength(16);
      const forged = tableAfter(report, '## 8. Forged requests');
      expect(forged.map((row) => `${row[0]} ${row[1]}`)).toEqual(['1 KiB v1', '1 KiB v1a, 1 key', '1 KiB v1a, 3 keys']);
      if (storesPresent) {
        const stores = tableAfter(report, '## 9. Shared stores under concurrency');
        expect(stores.map((row) => `${row[0]} ${row[1]}`)).toEqual(
          ['Redis (ioredis)', 'Postgres (pg)', 'Postgres (postgres.js)', 'DynamoDB (dynalite), first claim', 'DynamoDB (dynalite), duplicate'].flatMap((store) =>
            ['1', '16', '128'].map((width) => `${store} ${width}`),
          ),
        );
        for (const row of stores) expect(row[2]).toMatch(/^[\d,]+$/);
        // Section 10: the Fastify adapter with each store and, beside each shared store, the
        // hand-written route sending the same store commands; server and database CPU per request.
        const behind = tableAfter(report, '## 10. Stores behind an adapter (HTTP)');
        const hand = 'hand-written: verify + the same store commands';
        expect(behind.map((row) => `${row[0]}: ${row[1]}`)).toEqual([
          'memory store (default): our adapter',
          ...['Redis store, ioredis, `enableAutoPipelining: true`', 'Redis store, node-redis, default client', 'Postgres store, `pg` Pool (max 16)'].flatMap((store) => [
            `${store}: our adapter`,
            `${store}: ${hand}`,
          ]),
        ]);
        for (const row of behind) {
          expect(row[2]).toMatch(/^[\d,]+ \(/);
          expect(row[4]).toMatch(/^\d+\.\d µs \(/);
        }
        for (const row of behind.slice(1)) {
          // Ours against the hand-written route of the same store; the database's CPU beside both.
          expect(row[5]).toMatch(row[1] === hand ? /^1$/ : /^\d+\.\d\d \(/);
          expect(row[6]).toMatch(/^\d+\.\d µs \(/);
        }
      } else {
        expect(report).toContain('SKIPPED:');
      }
      expect(tableAfter(report, '## 11. Receiver: claim and complete').map((row) => row[0])).toEqual([
        'verify alone',
        'claim + complete',
        'verify + a bare Map: look up, forget the oldest, insert, mark done',
        'the receiver without a store (`idempotency: false`) + the bare Map',
        'verify + the memory store called directly (claim, complete)',
        'handle, a handler that does nothing',
      ]);
      expect(tableAfter(report, '## 12. Tenant keys').map((row) => row[0])).toEqual(['static verifier, same keys', 'tenant keys, tenant cached']);
      const flood = tableAfter(report, '### A flood of random tenant names');
      expect(flood.map((row) => row[0])).toEqual(['10,000 at once, a 5 ms loader']);
      // A quarter of the 16 load slots is kept for known tenants: made-up names take 12 at most.
      expect(flood[0]![1]).toBe('12');
      // The tenant-keys curve (a smoke run samples 1 and 100 tenants), and memory per cached tenant.
      const tenantCurve = tableAfter(report, '### Tenant keys vs number of tenants');
      expect(tenantCurve.map((row) => row[0])).toEqual(['1', '100']);
      for (const row of tenantCurve) expect(row.slice(1, 4).every((cell) => /^[\d.]+ [nµm]?s$/.test(cell))).toBe(true);
      expect(report).toMatch(/^\| tenants cached \| V8 heap \+ external, per tenant \|$/m);
      // Section 14: claim + complete with and without ordering, memory and (with a Redis) Redis.
      expect(tableAfter(report, '## 14. Ordering: claim + complete with and without').map((row) => row[0])).toEqual(redisPresent ? ['memory', 'Redis (ioredis)'] : ['memory']);
      // Section 15: each engine's accepting adapter, its hand-written route and the synchronous
      // mode on the same store; then accepted per second vs connections (1 and 16 in a smoke run).
      if (storesPresent) {
        const inbox = tableAfter(report, '## 15. Inbox: accepting into a queue (HTTP)');
        const routes = ['our adapter accepting (202)', 'hand-written: verify + the same store commands', 'our adapter, synchronous mode'];
        // SQS has no synchronous row of its own: its store is Redis, whose row BullMQ's group shows.
        expect(inbox.map((row) => `${row[0]!.split(' ')[0]}: ${routes.find((route) => row[1]!.startsWith(route))}`)).toEqual([
          ...inboxEngines.flatMap((engine) => routes.map((route) => `${engine}: ${route}`)),
          ...(sqsRuns ? routes.slice(0, 2).map((route) => `sqs: ${route}`) : []),
        ]);
        for (const row of inbox) {
          expect(row[2]).toMatch(/^[\d,]+ \(/);
          expect(row[3]).toMatch(/^\d+\.\d µs \(/);
          expect(row[5]).toMatch(/^\d+\.\d µs \(/);
          expect(row[7]).toMatch(/ms$/);
        }
        expect(inbox.filter((row) => row[1]!.startsWith(routes[0]!)).every((row) => /^\d+\.\d\d \(/.test(row[4]!))).toBe(true);
        expect(tableAfter(report, '### Accepting into BullMQ vs connections').map((row) => row[0])).toEqual(['1', '16']);
      } else {
        expect(report).toContain('so the inbox section cannot run');
      }
      // Section 16: CPU time per delivery by process for each shape, DynamoDB's write units and
      // SQS's requests for the AWS shape (on a Node that runs fauxqs), the two-receiver check, and
      // the extrapolation to N receivers.
      if (storesPresent) {
        const aws = 'DynamoDB store + SQS inbox';
        const shapes = [
          'memory store',
          'Redis store',
          'Postgres store',
          'Redis store + BullMQ inbox',
          ...(inboxEngines.includes('pg-boss') ? ['Postgres store + pg-boss inbox'] : []),
          ...(sqsRuns ? [aws] : []),
        ];
        const parts = tableAfter(report, '### CPU time per delivery, by process');
        expect(parts.map((row) => row[0])).toEqual(shapes);
        const time = /^[\d.]+ [nµm]?s$/;
        for (const row of parts) {
          expect(row[1]).toMatch(time);
          // Redis, Postgres, the queue worker: measured where the shape has that process, '–' where not.
          expect(row[2]).toMatch(row[0]!.startsWith('Redis') ? time : /^–$/);
          expect(row[3]).toMatch(row[0]!.startsWith('Postgres') ? time : /^–$/);
          expect(row[4]).toMatch(row[0]!.includes('inbox') ? time : /^–$/);
          expect(row[5]).toMatch(time);
          expect(row[6]).toMatch(/^[\d,]+$/);
          // The local AWS stand-ins' CPU (dynalite, fauxqs): the AWS shape's only.
          expect(row[8]).toMatch(row[0] === aws ? time : /^–$/);
        }
        if (sqsRuns) {
          // Counted from the requests sent, whole deliveries each: a claim and a completion on each
          // side, 1 WCU each (the items are about 100 bytes), and one message sent and deleted.
          const usage = tableAfter(report, '### DynamoDB write units and SQS requests per delivery');
          expect(usage.map((row) => [row[0], row[1], row[2], row[3]])).toEqual([
            ['receiver (accepting)', '1.00 PutItem, 1.00 UpdateItem', '0.00', '2.00'],
            ['queue worker (draining)', '1.00 PutItem, 1.00 UpdateItem', '0.00', '2.00'],
            ['both', '2.00 PutItem, 2.00 UpdateItem', '0.00', '4.00'],
          ]);
          expect(usage[0]![5]).toMatch(/^1\.00 SendMessage/);
          expect(usage[1]![5]).toMatch(/^1\.00 DeleteMessage, [\d.]+ ReceiveMessage/);
        } else {
          expect(report).toContain(`${aws}: not measured in this run: fauxqs, its local SQS, needs Node 22.5 or later`);
        }
        const two = tableAfter(report, '### Two receivers sharing one store');
        expect(two.map((row) => row[0])).toEqual(['Redis store', 'Postgres store']);
        for (const row of two) {
          expect(row[1]).toMatch(/^[\d,]+$/);
          expect(row[2]).toMatch(/^[\d,]+$/);
          // The median of the repetitions, with min–max in brackets when there were several.
          expect(row[3]).toMatch(/^\d+\.\d\d(?: \(\d+\.\d\d–\d+\.\d\d\))?$/);
          // The receivers' and the store's CPU per request during the check, then with one receiver.
          expect(row[4]).toMatch(/^[\d.]+ (?:ns|µs|ms|s) \([\d.]+ (?:ns|µs|ms|s)\)$/);
          // Every id once is a correctness figure, not a speed: it holds in a smoke run too.
          expect(row[5]).toMatch(/ ids sent to both: 0 processed twice, 0 by neither$/);
        }
        const scale = tableAfter(report, '### Past this machine (extrapolation)');
        expect(scale.map((row) => row[0])).toEqual(shapes.slice(1));
        if (sqsRuns) expect(scale.at(-1)!.at(-1)).toMatch(/^[\d,]+: one DynamoDB partition \(1,000 WCU\/s ÷ 4\.00 WCU per delivery;/);
      } else {
        expect(report).toContain('so the capacity section cannot run');
      }
    },
    TIME_LIMIT_MS + 10_000,
  );

  it('refuses an unknown section by name', async () => {
    for (const flag of ['--section', '--only']) {
      const result = await runBench([flag, 'nonsense']);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain('--section takes one of peers, rotation, webcrypto, http, redis, memory, sign, forged, stores, http-stores, receiver, keys, curves, ordering, inbox, capacity; got "nonsense"');
    }
  }, 60_000);

  it('--section runs that part alone', async () => {
    const result = await runBench(['--quick', '--section', 'sign']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('quick smoke run');
    expect(result.stdout.match(/^## \d\. .+$/gm)).toEqual(['## 7. Signing']);
    const targets = tableAfter(result.stdout, /^## Targets \(\d+ of \d+ met\)$/m.exec(result.stdout)![0]);
    expect(targets.map((row) => row[0])).toEqual(['reusable signer ÷ bare `createHmac`, 1 KiB']);
  }, TIME_LIMIT_MS);
});

describe('npm run bench -- --node <major>', () => {
  it('runs on that Node line, and the report names it', async (context) => {
    try {
      await ensureNode(24);
    } catch (error) {
      // Offline with no cached binary: as with redis-server, a notice here and a failure under CI.
      if (error instanceof NodeLineError && !isCI()) {
        console.warn(`NOTICE: ${error.message}; the --node bench test is SKIPPED`);
        context.skip();
      }
      throw error;
    }
    const result = await runBench(['--node', '24', '--quick', '--only', 'rotation']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/^bench: running on Node v24\.\d+\.\d+ /m);
    expect(result.stdout).toMatch(/^- Runtime: Node v24\.\d+\.\d+ \(V8 /m);
    expect(result.stdout).toContain('## 2. Rotation');
  }, TIME_LIMIT_MS + 10_000);

  it('refuses a line that is not a major version', async () => {
    const result = await runBench(['--node', 'latest']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('--node takes a major version such as 24; got "latest"');
  });
});

/**
 * The demo behind `npm start`: a receiver (Hono on Node, in-memory idempotency store) and a sender
 * in one process, on 127.0.0.1. The sender delivers what a relay and the open internet send a
 * destination, and the demo prints what the receiver answered and how often the handler ran.
 *
 * The keys are generated for this run and never printed; the table names them by keyId.
 */

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono, type Handler } from 'hono';
import { generateSecret, signWebhook, type SecretInput } from 'webhook-receiver';
import { webhooks } from 'webhook-receiver/hono';

// A rotation in progress: the relay's new secret ("current") and the one it replaces ("previous")
// are both trusted. A secret retired in an earlier rotation is no longer trusted at all.
const current = { key: generateSecret(), keyId: 'current' };
const previous = { key: generateSecret(), keyId: 'previous' };
const retired = generateSecret();

// ---------------------------------------------------------------------------------------------
// The receiver

let handlerRuns = 0;
// The handler of an 'order.slow' event waits until the sender opens this gate: it stands for
// work that takes a while, and keeps the concurrent case the same on every run.
let openGate = (): void => undefined;
let gate = Promise.resolve();

function receiver(): Hono {
  const app = new Hono();
  const secrets = [current, previous];
  const silent = () => undefined; // the table reports every rejection; no log lines needed

  const handle: Handler = async (c) => {
    const webhook = c.get('webhook');
    handlerRuns += 1;
    const event = await c.req.json<{ type: string }>();
    if (event.type === 'order.slow') await gate;
    return c.json({ received: true, signed: webhook.signed, keyId: webhook.keyId ?? null });
  };
  app.post('/webhooks', webhooks({ secrets, onRejected: silent }), handle);
  // The relay forwards events whose inbound signature it never checked without a signature; this
  // endpoint opts in to them, and its handler sees webhook.signed === false.
  app.post('/webhooks/unsigned-ok', webhooks({ secrets, unsigned: 'accept', onRejected: silent }), handle);
  return app;
}

// ---------------------------------------------------------------------------------------------
// The sender

interface Answer {
  status: number;
  body: { received?: boolean; signed?: boolean; keyId?: string | null; duplicate?: boolean; error?: string; message?: string };
}

interface Row {
  name: string;
  status: string;
  outcome: string;
  runs: number;
  message?: string;
}

let baseUrl = '';

async function post(path: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const response = await fetch(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

/** What the receiver did, from its answer; `detailed` adds which key verified it. */
function outcomeOf({ body }: Answer, detailed: boolean): string {
  if (body.received) {
    if (!detailed) return 'processed';
    return body.signed ? `processed, key "${body.keyId}"` : 'processed, marked unsigned';
  }
  if (body.duplicate) return detailed ? 'duplicate: handler skipped' : 'duplicate';
  return body.error ?? 'unexpected answer';
}

/** "1 × 200, 9 × 409" */
function tally(values: string[]): string {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return [...counts].map(([value, n]) => `${n} × ${value}`).join(', ');
}

/** Runs one case: its deliveries, what they were answered, and how many handler runs they caused. */
async function run(name: string, send: () => Promise<Answer[]>): Promise<Row> {
  const before = handlerRuns;
  const answers = await send();
  const single = answers.length === 1;
  return {
    name,
    status: single ? String(answers[0]!.status) : tally(answers.map((answer) => String(answer.status))),
    outcome: single ? outcomeOf(answers[0]!, true) : tally(answers.map((answer) => outcomeOf(answer, false))),
    runs: handlerRuns - before,
    message: answers.find((answer) => answer.body.message)?.body.message,
  };
}

const event = (type: string): string => JSON.stringify({ type, data: { orderId: 'ord_1042' } });
const seconds = (): number => Math.floor(Date.now() / 1000);

async function signedPost(secret: SecretInput | SecretInput[], body: string, options: { id?: string; timestamp?: number; send?: string } = {}): Promise<Answer[]> {
  const signed = await signWebhook({ secret, body, id: options.id, timestamp: options.timestamp });
  return [await post('/webhooks', options.send ?? body, signed.headers)];
}

async function cases(): Promise<Row[]> {
  const rows: Row[] = [];
  const paid = event('order.paid');
  const firstId = 'msg_demo_valid';

  rows.push(await run('valid event', () => signedPost(current, paid, { id: firstId })));
  rows.push(await run('tampered body', () => signedPost(current, paid, { send: paid.replace('ord_1042', 'ord_9999') })));
  rows.push(await run('stale timestamp (10 min old)', () => signedPost(current, paid, { timestamp: seconds() - 600 })));
  rows.push(await run('millisecond timestamp', () => signedPost(current, paid, { timestamp: Date.now() })));
  // A retry carries the same webhook-id with a new timestamp and signature.
  rows.push(await run('duplicate (retry of the valid event)', () => signedPost(current, paid, { id: firstId })));

  rows.push(
    await run('10 concurrent duplicates', async () => {
      const slow = event('order.slow');
      const signed = await signWebhook({ secret: current, body: slow, id: 'msg_demo_concurrent' });
      gate = new Promise((resolve) => {
        openGate = resolve;
      });
      const timer = setTimeout(openGate, 5000); // never hang, whatever happens
      let answered = 0;
      const deliveries = Array.from({ length: 10 }, () =>
        post('/webhooks', slow, signed.headers).then((answer) => {
          // The nine that did not get the claim are answered at once; then the first may finish.
          if (++answered === 9) openGate();
          return answer;
        }),
      );
      const answers = await Promise.all(deliveries);
      clearTimeout(timer);
      return answers;
    }),
  );

  rows.push(await run('signed during rotation (new + old key)', () => signedPost([current, previous], paid)));
  rows.push(await run('signed with the previous key only', () => signedPost(previous, paid)));
  rows.push(await run('signed with a retired key only', () => signedPost(retired, paid)));

  const unsigned = { 'webhook-id': 'msg_demo_unsigned', 'webhook-timestamp': String(seconds()) };
  rows.push(await run('unsigned event -> /webhooks', async () => [await post('/webhooks', paid, unsigned)]));
  rows.push(await run("unsigned event -> unsigned: 'accept'", async () => [await post('/webhooks/unsigned-ok', paid, unsigned)]));
  return rows;
}

// ---------------------------------------------------------------------------------------------
// The table

function table(rows: Row[]): string {
  const head = ['case', 'HTTP status', 'outcome', 'handler runs'];
  const cells = rows.map((row) => [row.name, row.status, row.outcome, String(row.runs)]);
  const widths = head.map((title, i) => Math.max(title.length, ...cells.map((line) => line[i]!.length)));
  const line = (values: string[]): string => values.map((value, i) => value.padEnd(widths[i]!)).join(' | ').trimEnd();
  return [line(head), widths.map((width) => '-'.repeat(width)).join('-|-'), ...cells.map(line)].join('\n');
}

const server = await new Promise<Server>((resolve) => {
  const started = serve({ fetch: receiver().fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(started as Server));
});
baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
console.log(`receiver listening on ${baseUrl} (POST /webhooks, POST /webhooks/unsigned-ok)\n`);

try {
  const rows = await cases();
  console.log(table(rows));
  console.log('\nWhy the others were not processed (the "message" of the error envelope):');
  for (const row of rows) if (row.message) console.log(`  ${row.name}: ${row.message}`);
} finally {
  server.closeAllConnections();
  server.close();
}

/**
 * A real HTTP endpoint on loopback that records every delivery, verifies it with the core and
 * answers what the test says, so a sender's retries can be tested against real statuses.
 *
 * `node:http` is imported inside the functions, not at the top: the `webhook-receiver/testing`
 * entry must stay loadable on edge runtimes, where only the Web helpers are used.
 */

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { readNodeBody } from '../../../adapters/node.ts';
import { DEFAULT_MAX_BODY_BYTES } from '../../body.ts';
import { WebhookError, isWebhookError } from '../../errors.ts';
import { errorResponse } from '../../http.ts';
import { headerValues } from '../../headers.ts';
import type { SecretInput } from '../../secrets.ts';
import { createVerifier, type VerifiedWebhook } from '../../verify.ts';

/**
 * One request the test receiver got, as it arrived.
 *
 * @example
 * ```ts
 * const [delivery] = await receiver.waitForDeliveries(1);
 * expect(delivery.verification.ok).toBe(true);
 * expect(delivery.status).toBe(204);
 * ```
 */
export interface Delivery {
  method: string;
  /** The request target: path and query string. */
  path: string;
  /** Every header as received, in order, names in their original case. */
  headers: [string, string][];
  /**
   * The body bytes. A body over 1 MiB is not read: it is recorded empty, with the verdict
   * `PAYLOAD_TOO_LARGE`, and answered 413.
   */
  body: Uint8Array;
  /** The core verifier's verdict on this request. The answer does not depend on it unless `respond` says so. */
  verification: { ok: true; webhook: VerifiedWebhook } | { ok: false; error: WebhookError };
  /** The status the receiver answered. */
  status: number;
}

/**
 * Options of {@link createTestReceiver}.
 *
 * @example
 * ```ts
 * const options: TestReceiverOptions = { secrets: secret, respond: (_, attempt) => (attempt < 3 ? 503 : 204) };
 * ```
 */
export interface TestReceiverOptions {
  /** The keys deliveries are verified with. */
  secrets: SecretInput | readonly SecretInput[];
  /**
   * The status to answer. `attempt` is 1 for the first delivery of a `webhook-id` to arrive, 2 for
   * the next, and so on; `delivery.status` holds the default answer when it is called. Default:
   * 204 for every delivery, verified or not (the verdict is in `delivery.verification`), so a
   * sender under test is never retried by accident. To answer like a real receiver, return
   * `delivery.verification.ok ? 204 : delivery.verification.error.status`: a failed verification
   * answered with its own status also gets the error envelope `{ "error": CODE, "message": … }`.
   * A body over 1 MiB is the one exception to the default: it is not read, and answered 413.
   */
  respond?: (delivery: Delivery, attempt: number) => number;
  /** Default: a free port. The receiver always listens on 127.0.0.1. */
  port?: number;
}

/**
 * A running test receiver.
 *
 * @example
 * ```ts
 * const receiver = await createTestReceiver({ secrets: secret });
 * await relay.forward(event, receiver.url);
 * const [delivery] = await receiver.waitForDeliveries(1);
 * await receiver.close();
 * ```
 */
export interface TestReceiver {
  /** `http://127.0.0.1:PORT`, without a trailing slash: append any path. */
  readonly url: string;
  /**
   * Every request, in arrival order. A request is listed once it is answered, at the place of its
   * arrival: one that arrived first but sent its body slowly comes before a later, faster one.
   */
  readonly deliveries: readonly Delivery[];
  /**
   * Resolves with the deliveries once at least `count` have arrived; rejects after `timeoutMs`
   * (default 5000) with a message listing what did arrive, or at once if `respond` threw.
   */
  waitForDeliveries(count: number, options?: { timeoutMs?: number }): Promise<readonly Delivery[]>;
  /** Stops listening and drops open connections. Pending waits reject. */
  close(): Promise<void>;
}

/** What the server answers to one delivery. */
export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

/** A delivery before it is answered. */
export type IncomingDelivery = Omit<Delivery, 'status'>;

/** Where a delivery stands, numbered when its request arrived (before its body was read). */
interface Arrival {
  /** 1 for the first request the server got, 2 for the second, and so on. */
  sequence: number;
  /** 1 for the first request carrying its `webhook-id`, 2 for the next; 1 without an id. */
  attempt: number;
  /** When the request arrived. */
  receivedAt: Date;
}

/** Options of the shared server behind the test receiver and `webhook-receiver listen`. */
export interface WebhookServerOptions {
  secrets: SecretInput | readonly SecretInput[];
  port?: number;
  maxBodyBytes?: number;
  /** Decides the answer. A throw answers 500 and is reported to `onError`. */
  answer: (delivery: IncomingDelivery, arrival: Arrival) => Answer | Promise<Answer>;
  /** Called once per delivery, after it is answered. */
  onDelivery?: (delivery: Delivery, arrival: Arrival) => void;
  /** Called when `answer` throws. */
  onError?: (error: unknown, delivery: IncomingDelivery) => void;
}

/** A running shared server. */
export interface WebhookServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

function checkPort(port: unknown): number {
  if (port === undefined) return 0;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError('port must be a whole number from 0 to 65535 (0 or none: a free port)');
  }
  return port;
}

function headerPairs(raw: readonly string[]): [string, string][] {
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
  return pairs;
}

function idOf(pairs: [string, string][]): string | undefined {
  const value = headerValues(pairs, 'webhook-id') ?? headerValues(pairs, 'svix-id');
  return Array.isArray(value) ? value[0] : value;
}

/**
 * `node:http`, reached so that bundlers for edge runtimes (esbuild in wrangler, workerd without
 * Node compatibility) see no Node import: `webhook-receiver/testing` stays bundleable there for
 * its Web helpers, and only `createTestReceiver` needs Node.
 */
export async function loadNodeHttp(): Promise<typeof import('node:http')> {
  const fromProcess = globalThis.process?.getBuiltinModule?.('node:http') as typeof import('node:http') | undefined;
  if (fromProcess) return fromProcess;
  // Node 20 before 20.16 has no getBuiltinModule; a computed specifier is left alone by bundlers.
  const specifier = ['node', 'http'].join(':');
  return (await import(specifier)) as typeof import('node:http');
}

/**
 * The server shared by {@link createTestReceiver} and the `listen` command: loopback only,
 * bounded body, every request verified by the core. Internal.
 */
export async function startWebhookServer(options: WebhookServerOptions): Promise<WebhookServer> {
  const port = checkPort(options.port);
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const verifier = createVerifier({ secrets: options.secrets, maxBodyBytes: limit });
  const attempts = new Map<string, number>();
  let arrived = 0;
  const http = await loadNodeHttp();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const headers = headerPairs(req.rawHeaders);
    // Numbered now, as the request arrives: a slow body must not let a later request overtake it.
    const id = idOf(headers);
    const attempt = id === undefined ? 1 : (attempts.get(id) ?? 0) + 1;
    if (id !== undefined) attempts.set(id, attempt);
    const arrival: Arrival = { sequence: ++arrived, attempt, receivedAt: new Date() };

    // The adapters' reader: the same limit, declared or streamed, and nothing past it is read.
    let body: Uint8Array = new Uint8Array(0);
    let tooLarge = false;
    let verification: Delivery['verification'];
    try {
      // A plain Uint8Array, as typed: a small Buffer is a view into Node's shared pool.
      body = new Uint8Array(await readNodeBody(req, limit, req.headers));
      verification = { ok: true, webhook: await verifier.verify({ headers, body }) };
    } catch (error) {
      if (!isWebhookError(error)) throw error;
      tooLarge = error.code === 'PAYLOAD_TOO_LARGE';
      verification = { ok: false, error };
    }
    const incoming: IncomingDelivery = { method: req.method ?? 'GET', path: req.url ?? '/', headers, body, verification };
    let answer: Answer;
    try {
      answer = await options.answer(incoming, arrival);
    } catch (error) {
      options.onError?.(error, incoming);
      answer = { status: 500, headers: { 'content-type': 'text/plain' }, body: 'answer failed' };
    }
    const delivery: Delivery = { ...incoming, status: answer.status };
    const responseHeaders: Record<string, string> = { ...answer.headers };
    // A body left unread must not be read later as the next request on this connection.
    if (tooLarge) responseHeaders.connection = 'close';
    const noBody = answer.status === 204 || answer.status === 304 || answer.status < 200;
    res.writeHead(answer.status, responseHeaders);
    if (tooLarge) res.once('finish', () => req.socket.destroy());
    res.end(noBody ? undefined : answer.body);
    options.onDelivery?.(delivery, arrival);
  };

  const server: Server = http.createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500, { connection: 'close' });
      res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the test receiver did not get a TCP port');
  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${address.port}`,
    port: address.port,
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}

/** 204 whatever the verdict: only a body the receiver did not read is refused. */
function defaultStatus(delivery: IncomingDelivery): number {
  return !delivery.verification.ok && delivery.verification.error.code === 'PAYLOAD_TOO_LARGE' ? 413 : 204;
}

function summary(delivery: Delivery): string {
  const id = idOf(delivery.headers);
  const verdict = delivery.verification.ok ? 'verified' : delivery.verification.error.code;
  return `${delivery.method} ${delivery.path} webhook-id ${id === undefined ? '(none)' : JSON.stringify(id)}: ${verdict}, answered ${delivery.status}`;
}

/**
 * Starts an HTTP receiver on `127.0.0.1` that records every request, verifies it with `secrets`
 * and answers the status `respond` picks (204 by default, whatever the verdict), so the sender
 * under test meets real retries. Needs Node (or Bun or Deno) for `node:http`.
 *
 * @example
 * ```ts
 * import { createTestReceiver } from 'webhook-receiver/testing';
 *
 * const receiver = await createTestReceiver({
 *   secrets: destinationSecret,
 *   respond: (delivery, attempt) => (attempt === 1 ? 503 : 204), // fail the first try
 * });
 * await relay.addDestination(receiver.url + '/webhooks');
 * const deliveries = await receiver.waitForDeliveries(2, { timeoutMs: 10_000 });
 * expect(deliveries.map((d) => d.status)).toEqual([503, 204]);
 * expect(deliveries.every((d) => d.verification.ok)).toBe(true);
 * await receiver.close();
 * ```
 */
export async function createTestReceiver(options: TestReceiverOptions): Promise<TestReceiver> {
  if (typeof options !== 'object' || options === null) throw new TypeError('createTestReceiver needs options with secrets');
  const { respond } = options;
  if (respond !== undefined && typeof respond !== 'function') throw new TypeError('respond must be a function (delivery, attempt) => status');

  const deliveries: Delivery[] = [];
  /** The arrival sequence of each entry of `deliveries`. */
  const sequences: number[] = [];
  let failure: Error | undefined;
  interface Waiter {
    count: number;
    resolve: (deliveries: readonly Delivery[]) => void;
    reject: (error: Error) => void;
    timer: ReturnType<typeof setTimeout>;
  }
  const waiters = new Set<Waiter>();
  const settle = () => {
    for (const waiter of waiters) {
      if (failure !== undefined) waiter.reject(failure);
      else if (deliveries.length >= waiter.count) waiter.resolve(deliveries.slice());
      else continue;
      clearTimeout(waiter.timer);
      waiters.delete(waiter);
    }
  };

  const server = await startWebhookServer({
    secrets: options.secrets,
    port: options.port,
    answer(incoming, { sequence, attempt }) {
      const fallback = defaultStatus(incoming);
      let status = fallback;
      if (respond !== undefined) {
        status = respond({ ...incoming, status: fallback }, attempt);
        if (!Number.isInteger(status) || status < 200 || status > 599) {
          throw new RangeError(`respond returned ${String(status)} for delivery #${sequence}; it must return an HTTP status from 200 to 599`);
        }
      }
      if (!incoming.verification.ok && status === incoming.verification.error.status) {
        const envelope = errorResponse(incoming.verification.error);
        return { status, headers: envelope.headers, body: envelope.body };
      }
      return { status };
    },
    onError(error) {
      failure ??= new Error(`the test receiver's respond() failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    },
    onDelivery(delivery, { sequence }) {
      // Usually the last to arrive; an earlier request answered later goes back to its place.
      let at = deliveries.length;
      while (at > 0 && sequences[at - 1]! > sequence) at--;
      deliveries.splice(at, 0, delivery);
      sequences.splice(at, 0, sequence);
      settle();
    },
  });

  let closed = false;
  return {
    url: server.url,
    deliveries,
    waitForDeliveries(count, waitOptions) {
      if (!Number.isSafeInteger(count) || count < 0) return Promise.reject(new RangeError('count must be a whole number of deliveries'));
      const timeoutMs = waitOptions?.timeoutMs ?? 5000;
      if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
        return Promise.reject(new RangeError('timeoutMs must be a positive number of milliseconds'));
      }
      if (failure !== undefined) return Promise.reject(failure);
      if (deliveries.length >= count) return Promise.resolve(deliveries.slice());
      if (closed) return Promise.reject(new Error(`the test receiver is closed; ${deliveries.length} of ${count} deliveries arrived`));
      return new Promise<readonly Delivery[]>((resolve, reject) => {
        const waiter: Waiter = {
          count,
          resolve,
          reject,
          timer: setTimeout(() => {
            waiters.delete(waiter);
            const arrived = deliveries.length === 0 ? 'none arrived' : `${deliveries.length} arrived:\n${deliveries.map((d, i) => `  #${i + 1} ${summary(d)}`).join('\n')}`;
            reject(new Error(`expected ${count} ${count === 1 ? 'delivery' : 'deliveries'} at ${server.url} within ${timeoutMs} ms, but ${arrived}`));
          }, timeoutMs),
        };
        waiters.add(waiter);
      });
    },
    async close() {
      closed = true;
      for (const waiter of waiters) {
        clearTimeout(waiter.timer);
        waiter.reject(new Error(`the test receiver was closed while waiting for ${waiter.count} deliveries; ${deliveries.length} arrived`));
      }
      waiters.clear();
      await server.close();
    },
  };
}

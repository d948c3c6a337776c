/**
 * A real HTTP endpoint on loopback that records every delivery, verifies it with the core and
 * answers what the test says, so a sender's retries can be tested against real statuses.
 *
 * `node:http` is imported inside the functions, not at the top: the `webhook-receiver/testing`
 * entry must stay loadable on edge runtimes, where only the Web helpers are used.
 */

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { DEFAULT_MAX_BODY_BYTES, declaredLength, payloadTooLarge } from '../src/body.ts';
import { concatChunks } from '../src/encoding.ts';
import { WebhookError, isWebhookError } from '../src/errors.ts';
import { errorResponse } from '../src/http.ts';
import { headerValues } from '../src/headers.ts';
import type { SecretInput } from '../src/secrets.ts';
import { createVerifier, type VerifiedWebhook } from '../src/verify.ts';

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
  /** The body bytes (at most 1 MiB are read; a larger body is refused with 413 `PAYLOAD_TOO_LARGE`). */
  body: Uint8Array;
  /** The core verifier's verdict on this request. */
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
   * The status to answer. `attempt` is 1 for the first delivery of a `webhook-id`, 2 for the next,
   * and so on; `delivery.status` holds the default answer when it is called. Default: 204 for a
   * verified delivery, the verifier's status (401, 400, 413) otherwise, as a real receiver answers.
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
  /** Every request, in arrival order. */
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

/** Options of the shared server behind the test receiver and `webhook-receiver listen`. */
export interface WebhookServerOptions {
  secrets: SecretInput | readonly SecretInput[];
  port?: number;
  maxBodyBytes?: number;
  /** Decides the answer. A throw answers 500 and is reported to `onError`. */
  answer: (delivery: IncomingDelivery, attempt: number) => Answer | Promise<Answer>;
  /** Called once per delivery, after it is answered. */
  onDelivery?: (delivery: Delivery, attempt: number) => void;
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

/** Reads at most `limit` bytes; `tooLarge` when the body (declared or actual) is over it. */
function readBody(req: IncomingMessage, limit: number): Promise<{ body: Uint8Array; tooLarge: boolean; declared: number | undefined }> {
  const declared = declaredLength(req.headers['content-length']);
  if (declared !== undefined && declared > limit) return Promise.resolve({ body: new Uint8Array(0), tooLarge: true, declared });
  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    let total = 0;
    const stop = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    const onData = (chunk: Uint8Array) => {
      if (total + chunk.byteLength > limit) {
        // Stop reading here; the rest is never buffered (the answer closes the connection).
        stop();
        req.pause();
        chunks.push(chunk.subarray(0, limit - total));
        resolve({ body: concatChunks(chunks, limit), tooLarge: true, declared });
        return;
      }
      chunks.push(chunk);
      total += chunk.byteLength;
    };
    const onEnd = () => {
      stop();
      resolve({ body: concatChunks(chunks, total), tooLarge: false, declared });
    };
    const onError = (error: Error) => {
      stop();
      reject(error);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
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
async function loadNodeHttp(): Promise<typeof import('node:http')> {
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
  const http = await loadNodeHttp();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const headers = headerPairs(req.rawHeaders);
    const { body, tooLarge, declared } = await readBody(req, limit);
    let verification: Delivery['verification'];
    if (tooLarge) {
      verification = { ok: false, error: payloadTooLarge(limit, declared) };
    } else {
      try {
        verification = { ok: true, webhook: await verifier.verify({ headers, body }) };
      } catch (error) {
        if (!isWebhookError(error)) throw error;
        verification = { ok: false, error };
      }
    }
    const id = idOf(headers);
    let attempt = 1;
    if (id !== undefined) {
      attempt = (attempts.get(id) ?? 0) + 1;
      attempts.set(id, attempt);
    }
    const incoming: IncomingDelivery = { method: req.method ?? 'GET', path: req.url ?? '/', headers, body, verification };
    let answer: Answer;
    try {
      answer = await options.answer(incoming, attempt);
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
    options.onDelivery?.(delivery, attempt);
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

function defaultStatus(delivery: IncomingDelivery): number {
  return delivery.verification.ok ? 204 : delivery.verification.error.status;
}

function summary(delivery: Delivery): string {
  const id = idOf(delivery.headers);
  const verdict = delivery.verification.ok ? 'verified' : delivery.verification.error.code;
  return `${delivery.method} ${delivery.path} webhook-id ${id === undefined ? '(none)' : JSON.stringify(id)}: ${verdict}, answered ${delivery.status}`;
}

/**
 * Starts an HTTP receiver on `127.0.0.1` that records every request, verifies it with `secrets`
 * and answers the status `respond` picks, so the sender under test meets real retries. Needs
 * Node (or Bun or Deno) for `node:http`.
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
    answer(incoming, attempt) {
      const fallback = defaultStatus(incoming);
      let status = fallback;
      if (respond !== undefined) {
        status = respond({ ...incoming, status: fallback }, attempt);
        if (!Number.isInteger(status) || status < 200 || status > 599) {
          throw new RangeError(`respond returned ${String(status)} for delivery #${deliveries.length + 1}; it must return an HTTP status from 200 to 599`);
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
    onDelivery(delivery) {
      deliveries.push(delivery);
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

/**
 * PostgreSQL for tests: the shared server from the global setup, both clients (`pg` and
 * postgres.js) connected the way an app would, tables of their own, and a loopback proxy that
 * counts the round trips a client makes (each Sync or simple Query message the client sends is one
 * wait for the server's ReadyForQuery).
 */

import { randomBytes } from 'node:crypto';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';
import postgres from 'postgres';
import { inject } from 'vitest';

/** The shared server's URL, or `null` (then the Postgres tests skip; the global setup said why). */
export const sharedPostgresUrl: string | null = inject('postgresUrl');

export type PostgresKind = 'pg' | 'postgres.js';
export const POSTGRES_KINDS: readonly PostgresKind[] = ['pg', 'postgres.js'];

/** A client of either kind, as the store sees it, plus what tests need around it. */
export type PostgresClient =
  | { kind: 'pg'; client: pg.Pool; query(text: string, values?: unknown[]): Promise<Record<string, unknown>[]>; close(): Promise<void> }
  | { kind: 'postgres.js'; client: postgres.Sql; query(text: string, values?: unknown[]): Promise<Record<string, unknown>[]>; close(): Promise<void> };

/** Connects a client of `kind` to `url`, with a pool of `max` connections. */
export function connectPostgres(kind: PostgresKind, url: string, max = 10): PostgresClient {
  if (kind === 'pg') {
    const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: 10_000 });
    pool.on('error', () => {});
    return {
      kind,
      client: pool,
      query: async (text, values) => (await pool.query(text, values)).rows as Record<string, unknown>[],
      close: () => pool.end(),
    };
  }
  const sql = postgres(url, { max, onnotice: () => {}, connect_timeout: 10 });
  return {
    kind,
    client: sql,
    query: async (text, values) => [...(await sql.unsafe(text, values as never[]))] as Record<string, unknown>[],
    close: () => sql.end({ timeout: 5 }),
  };
}

/** A table name no other test (or app sharing a DATABASE_URL database) uses. */
export function uniqueTable(label: string): string {
  return `test_${label.replace(/[^a-z0-9_]/gi, '_')}_${randomBytes(5).toString('hex')}`.toLowerCase();
}

/** A proxy in front of the server that counts the round trips of the connections through it. */
export interface CountingProxy {
  /** The URL to connect through the proxy. */
  readonly url: string;
  /** Round trips seen so far, over every connection through the proxy. */
  readonly roundTrips: number;
  /** Statements (Parse or simple Query texts) seen so far, in order. */
  readonly statements: readonly string[];
  close(): Promise<void>;
}

/**
 * Starts a TCP proxy on 127.0.0.1 in front of `url`'s server, reading the frontend protocol:
 * after the start-up packet every message is a type byte and a length. `S` (Sync) ends an
 * extended-protocol exchange and `Q` is a simple query: each is one round trip.
 */
export async function startCountingProxy(url: string): Promise<CountingProxy> {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  let roundTrips = 0;
  const statements: string[] = [];
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 5432) });
    sockets.add(client).add(upstream);
    let started = false;
    let pending = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        if (!started) {
          if (pending.length < 8) return;
          const length = pending.readInt32BE(0);
          if (pending.length < length) return;
          // SSLRequest / GSSENCRequest (80877103 / 80877104) come before the real start-up packet.
          const code = pending.readInt32BE(4);
          if (code !== 80877103 && code !== 80877104) started = true;
          pending = pending.subarray(length);
          continue;
        }
        if (pending.length < 5) return;
        const type = String.fromCharCode(pending[0]!);
        const length = pending.readInt32BE(1);
        if (pending.length < 1 + length) return;
        if (type === 'S' || type === 'Q') roundTrips++;
        if (type === 'Q') statements.push(pending.subarray(5, length).toString('utf8').replace(/\0$/, ''));
        if (type === 'P') {
          // Parse: statement name (C string), then the query text.
          const body = pending.subarray(5, 1 + length);
          const nameEnd = body.indexOf(0);
          const textEnd = body.indexOf(0, nameEnd + 1);
          statements.push(body.subarray(nameEnd + 1, textEnd).toString('utf8'));
        }
        pending = pending.subarray(1 + length);
      }
    });
    upstream.on('data', (chunk) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no proxy port');
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(address.port);
  return {
    url: proxied.toString(),
    get roundTrips() {
      return roundTrips;
    },
    statements,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

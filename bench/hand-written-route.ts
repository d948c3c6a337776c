/**
 * The hand-written route that our Fastify adapter with a shared store is compared with, like
 * with like: the same Fastify, a buffer parser for the body (the usual recipe for the raw
 * bytes), the hand-written check of section 4 (fixtures.ts), then the store's own claim sent bare
 * (bare-store.ts), the route's work, the store's own completion sent bare, and the answer. The
 * stores section's route works as every handler of the bench does (parse the event, count it) and
 * answers 204; the inbox section's adds the job to its engine and answers 202.
 */

import type { IncomingHttpHeaders } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import type { BareDelivery } from './bare-store.ts';
import { handWrittenVerify, type HmacKey } from './fixtures.ts';
import { WEBHOOK_PATH } from './http-cases.ts';

/**
 * The receiver's defaults for a claim (`DEFAULT_RENEWED_LOCK_SECONDS`, the lock with a store that
 * renews, as every shared store of the bench does; `DEFAULT_TTL_SECONDS`), written out as a
 * hand-written route would write its own.
 */
export const LOCK_MS = 30_000;
export const TTL_MS = 86_400_000;

const UNAUTHORIZED = JSON.stringify({ error: 'SIGNATURE_MISMATCH', message: 'invalid signature' });

/** The receiver's key of a signed delivery in the default namespace (`${namespace}:s:${id}`). */
const keyOf = (id: string) => `default:s:${id}`;

/** What the route does between the claim and the completion: the handler's work, or the engine's add. */
export type RouteWork = (storeKey: string, headers: IncomingHttpHeaders, body: Buffer) => unknown;

/**
 * A Fastify app (not yet ready) whose one route is the hand-written route: `work` between the
 * bare claim and the bare completion, then `answer` (a status, and a JSON body when it has one).
 */
export function handWrittenRoute(key: HmacKey, bare: BareDelivery, work: RouteWork, answer: { status: number; json?: string }): FastifyInstance {
  const app = Fastify({ logger: false });
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  app.post(WEBHOOK_PATH, async (request, reply) => {
    const body = request.body as Buffer;
    if (!handWrittenVerify(request.headers, body, key)) return reply.code(401).type('application/json').send(UNAUTHORIZED);
    const storeKey = keyOf(request.headers['webhook-id'] as string);
    await bare.claim(storeKey);
    await work(storeKey, request.headers, body);
    await bare.complete(storeKey);
    return answer.json === undefined ? reply.code(answer.status).send() : reply.code(answer.status).type('application/json').send(answer.json);
  });
  return app;
}

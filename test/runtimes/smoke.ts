/**
 * The runtime smoke suite: the core (verify, sign with v1 and v1a, rotation), the Hono adapter and
 * the Fetch handler, through the package's public entry points. Every request to the adapters is
 * built by `signedRequest` from 'webhook-receiver/testing', so that entry is proven on each runtime
 * too. It runs unchanged on Node (in vitest, from source), and on Bun, Deno and workerd (from the
 * built package, see runtimes.test.ts); it only observes and returns what it saw, and the test
 * compares that with the expected outcomes. Secrets are generated here, per run, and never reported.
 */

import { Hono } from 'hono';
import { createReceiver, createVerifier, generateKeyPair, generateSecret, signWebhook, type VerifierOptions, type WebhookInput } from 'webhook-receiver';
import { webhookHandler } from 'webhook-receiver/fetch';
import { webhooks } from 'webhook-receiver/hono';
// The entry also holds createTestReceiver, which reaches node:http only when called (through
// process.getBuiltinModule), so it bundles for workerd without Node compatibility.
import { signedRequest } from 'webhook-receiver/testing';

// smoke-worker.ts sends the example worker the same requests.
export { signedRequest };

interface RuntimeInfo {
  name: 'bun' | 'deno' | 'workerd' | 'node' | 'unknown';
  /** `Bun.version`, `Deno.version.deno`, `process.versions.node`; workerd reports none. */
  version: string | undefined;
  userAgent: string | undefined;
  /** `typeof globalThis.process`: 'undefined' on workerd without the Node compatibility flag. */
  process: string;
  /** `typeof process.getBuiltinModule`: how the package finds `node:crypto`. */
  getBuiltinModule: string;
}

/** Calls to `crypto.subtle` while the suite ran: the package's WebCrypto path at work. */
interface SubtleCalls {
  sign: number;
  verify: number;
}

export interface Reply {
  status: number;
  contentType: string | null;
  body: unknown;
}

export interface SmokeReport {
  runtime: RuntimeInfo;
  subtle: SubtleCalls;
  core: Record<string, unknown>;
  hono: Record<string, unknown>;
  fetch: Record<string, unknown>;
}

interface RuntimeGlobals {
  Bun?: { version: string };
  Deno?: { version: { deno: string } };
  process?: { versions?: { node?: string }; getBuiltinModule?: unknown };
  navigator?: { userAgent?: string };
}

function runtimeInfo(): RuntimeInfo {
  // Through unknown: examples/runtime-globals.d.ts declares Deno and Bun for tsc, not at run time.
  const g = globalThis as unknown as RuntimeGlobals;
  const userAgent = g.navigator?.userAgent;
  let name: RuntimeInfo['name'] = 'unknown';
  if (g.Bun) name = 'bun';
  else if (g.Deno) name = 'deno';
  else if (userAgent === 'Cloudflare-Workers') name = 'workerd';
  else if (g.process?.versions?.node) name = 'node';
  return {
    name,
    version: g.Bun?.version ?? g.Deno?.version.deno ?? (name === 'node' ? g.process?.versions?.node : undefined),
    userAgent,
    process: typeof g.process,
    getBuiltinModule: typeof g.process?.getBuiltinModule,
  };
}

/** Counts calls to `SubtleCrypto.prototype.sign/verify` until the returned function restores them. */
function countSubtleCalls(calls: SubtleCalls): () => void {
  const proto = SubtleCrypto.prototype;
  const { sign, verify } = proto;
  proto.sign = function countedSign(this: SubtleCrypto, ...args: Parameters<SubtleCrypto['sign']>) {
    calls.sign += 1;
    return sign.apply(this, args);
  };
  proto.verify = function countedVerify(this: SubtleCrypto, ...args: Parameters<SubtleCrypto['verify']>) {
    calls.verify += 1;
    return verify.apply(this, args);
  };
  return () => {
    proto.sign = sign;
    proto.verify = verify;
  };
}

/** 'ok', or the `code` of the `WebhookError` it failed with (or the name of another error). */
async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? code : `threw ${(error as Error).name}`;
  }
}

/**
 * A response as the tests compare it: status, media type (runtimes differ in the parameters:
 * Bun's `Response.json` adds `;charset=utf-8`) and the body, parsed when it is JSON.
 */
export async function reply(response: Response): Promise<Reply> {
  const contentType = response.headers.get('content-type')?.split(';')[0] ?? null;
  const text = await response.text();
  return { status: response.status, contentType, body: contentType === 'application/json' ? (JSON.parse(text) as unknown) : text };
}

const now = (): number => Math.floor(Date.now() / 1000);
/** The versions in a `webhook-signature` value: 'v1,abc= v1a,def=' -> ['v1', 'v1a']. */
const versions = (signature: string): string[] => signature.split(' ').map((entry) => entry.slice(0, entry.indexOf(',')));
const URL_BASE = 'http://smoke.test/webhooks';
const BODY = '{"type":"invoice.paid","data":{"id":"in_1"}}';

/** The known vector of the Standard Webhooks reference libraries. */
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  headers: {
    'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    'webhook-timestamp': '1614265330',
    'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  },
  body: '{"test": 2432232314}',
};

async function core(): Promise<Record<string, unknown>> {
  const vectorOptions: VerifierOptions = { secrets: VECTOR.secret, now: () => 1614265330_000 };
  const vector = await createVerifier(vectorOptions).verify({ headers: VECTOR.headers, body: VECTOR.body });

  const hmac = generateSecret();
  const v1 = await signWebhook({ secret: hmac, body: BODY, id: 'msg_smoke_v1' });
  const v1Webhook = await createVerifier({ secrets: hmac }).verify({ headers: v1.headers, body: BODY });

  const { secretKey, publicKey } = await generateKeyPair();
  const v1a = await signWebhook({ secret: secretKey, body: BODY, id: 'msg_smoke_v1a' });
  const edVerifier = createVerifier({ secrets: { key: publicKey, keyId: 'ed25519-key' } });
  const v1aWebhook = await edVerifier.verify({ headers: v1a.headers, body: BODY });
  const both = await signWebhook({ secret: [hmac, secretKey], body: BODY });

  // A rotation: the new secret and the one it replaces are trusted; an older one was retired.
  const [next, prev, retired] = [generateSecret(), generateSecret(), generateSecret()];
  const rotation = createVerifier({ secrets: [{ key: next, keyId: 'next' }, { key: prev, keyId: 'prev' }] });
  const verifyWith = async (secret: string | string[], timestamp?: number): Promise<WebhookInput> => ({
    headers: (await signWebhook({ secret, body: BODY, timestamp })).headers,
    body: BODY,
  });
  const duringRotation = await rotation.verify(await verifyWith([next, prev]));
  const prevOnly = await rotation.verify(await verifyWith(prev));

  const unsignedHeaders = { 'webhook-id': 'msg_smoke_unsigned', 'webhook-timestamp': String(now()) };
  const acceptsUnsigned = await createVerifier({ secrets: hmac, unsigned: 'accept' }).verify({ headers: unsignedHeaders, body: BODY });

  const receiver = createReceiver({ secrets: hmac });
  let runs = 0;
  const first = await receiver.handle({ headers: v1.headers, body: BODY }, () => (runs += 1));
  const again = await receiver.handle({ headers: v1.headers, body: BODY }, () => (runs += 1));

  return {
    vector: { id: vector.id, scheme: vector.scheme, keyIndex: vector.keyIndex, json: vector.json() },
    vectorTampered: await outcome(createVerifier(vectorOptions).verify({ headers: VECTOR.headers, body: VECTOR.body.replace('2', '3') })),
    v1: { id: v1Webhook.id, scheme: v1Webhook.scheme, signature: versions(v1.signature), text: v1Webhook.text() },
    v1a: { id: v1aWebhook.id, scheme: v1aWebhook.scheme, keyId: v1aWebhook.keyId, signature: versions(v1a.signature) },
    v1aTampered: await outcome(edVerifier.verify({ headers: v1a.headers, body: `${BODY} ` })),
    v1AndV1a: {
      entries: versions(both.signature),
      byPublicKey: (await edVerifier.verify({ headers: both.headers, body: BODY })).scheme,
      bySecret: (await createVerifier({ secrets: hmac }).verify({ headers: both.headers, body: BODY })).scheme,
    },
    rotation: {
      duringRotation: duringRotation.keyId,
      previousOnly: prevOnly.keyId,
      retiredOnly: await outcome(rotation.verify(await verifyWith(retired))),
    },
    staleTimestamp: await outcome(rotation.verify(await verifyWith(next, now() - 600))),
    futureTimestamp: await outcome(rotation.verify(await verifyWith(next, now() + 600))),
    millisecondTimestamp: await outcome(rotation.verify(await verifyWith(next, Date.now()))),
    missingSignature: await outcome(createVerifier({ secrets: hmac }).verify({ headers: unsignedHeaders, body: BODY })),
    unsignedAccepted: { signed: acceptsUnsigned.signed, scheme: acceptsUnsigned.scheme ?? null },
    receiver: { outcomes: [first.outcome, again.outcome], runs },
  };
}

async function hono(): Promise<Record<string, unknown>> {
  const secret = generateSecret();
  let runs = 0;
  const app = new Hono();
  app.post('/webhooks', webhooks({ secrets: { key: secret, keyId: 'hono-key' }, onRejected: () => undefined }), async (c) => {
    runs += 1;
    const webhook = c.get('webhook');
    const event = await c.req.json<{ type: string }>();
    return c.json({ id: webhook.id, keyId: webhook.keyId, type: event.type });
  });
  const send = async (init: Parameters<typeof signedRequest>[1]): Promise<Reply> => reply(await app.request(await signedRequest(URL_BASE, init)));

  const valid = await send({ secret, body: BODY, id: 'msg_hono_1' });
  const duplicate = await send({ secret, body: BODY, id: 'msg_hono_1' });
  const signed = await signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_hono_2' });
  const tampered = await reply(await app.request(URL_BASE, { method: 'POST', headers: signed.headers, body: `${BODY} ` }));
  const unsigned = await reply(await app.request(URL_BASE, { method: 'POST', headers: { 'webhook-id': 'msg_hono_3', 'webhook-timestamp': String(now()) }, body: BODY }));
  const before = runs;
  const concurrent = await Promise.all(Array.from({ length: 5 }, () => send({ secret, body: BODY, id: 'msg_hono_4' })));
  return {
    valid,
    duplicate,
    tampered,
    unsigned,
    concurrent: { handlerRuns: runs - before, processed: concurrent.filter((r) => r.status === 200 && (r.body as { id?: string }).id === 'msg_hono_4').length },
    handlerRuns: runs,
  };
}

async function fetchHandler(): Promise<Record<string, unknown>> {
  const { secretKey, publicKey } = await generateKeyPair();
  const secret = generateSecret();
  let runs = 0;
  const handle = webhookHandler(
    { secrets: [{ key: secret, keyId: 'hmac-key' }, { key: publicKey, keyId: 'ed25519-key' }], onRejected: () => undefined },
    (webhook) => {
      runs += 1;
      if (webhook.json<{ type: string }>().type === 'ping') return undefined;
      return Response.json({ id: webhook.id, scheme: webhook.scheme, keyId: webhook.keyId });
    },
  );
  const v1a = await reply(await handle(await signedRequest(URL_BASE, { secret: secretKey, body: BODY, id: 'msg_fetch_1' })));
  const duplicate = await reply(await handle(await signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_fetch_1' })));
  const v1 = await reply(await handle(await signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_fetch_2' })));
  const noContent = await reply(await handle(await signedRequest(URL_BASE, { secret, body: '{"type":"ping"}', id: 'msg_fetch_3' })));
  const signed = await signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_fetch_4' });
  const tampered = await reply(await handle(new Request(URL_BASE, { method: 'POST', headers: signed.headers, body: BODY.replace('in_1', 'in_2') })));
  return { v1a, duplicate, v1, noContent, tampered, handlerRuns: runs };
}

/** Runs the suite and reports what it observed. */
export async function smoke(): Promise<SmokeReport> {
  const subtle: SubtleCalls = { sign: 0, verify: 0 };
  const restore = countSubtleCalls(subtle);
  try {
    return { runtime: runtimeInfo(), subtle, core: await core(), hono: await hono(), fetch: await fetchHandler() };
  } finally {
    restore();
  }
}

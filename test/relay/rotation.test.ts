/**
 * A signing-secret rotation end to end: the `relay rotate` command writes the new secret to a
 * 0600 file, a real receiver (Express, over HTTP) is deployed with both secrets, the emulator
 * forwards during the overlap with both signatures and the receiver reports the new keyId; once
 * the overlap ends only the new key signs, and a receiver without the old secret still verifies.
 */

import { readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { webhookOf, webhooks } from '../../adapters/express.ts';
import type { SecretInput } from '../../src/secrets.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { relayEmulator, type RelayEmulator } from '../../src/testing/index.ts';
import { run } from '../cli/support.ts';
import { KEY, expectNoKeyShown, record } from './support.ts';

let emulator: RelayEmulator;
let dir: string;
let server: Server;
let url: string;
/** The app the one server at `url` runs: swapped to deploy other secrets, as a redeploy would. */
let current: express.Express | undefined;

beforeAll(async () => {
  emulator = await relayEmulator({ apiKeys: [{ key: KEY }] });
  dir = await mkdtemp(join(tmpdir(), 'relay-rotation-'));
  server = createServer((req, res) => {
    if (current === undefined) res.writeHead(503).end();
    else current(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  url = `http://127.0.0.1:${address.port}/hooks`;
});

afterAll(async () => {
  await emulator.close();
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  await rm(dir, { recursive: true, force: true });
  expectNoKeyShown();
});

interface Deployed {
  /** The keyId that verified each delivery the handler ran for. */
  keyIds: (string | undefined)[];
  /** How many v1 signatures each verified delivery carried. */
  signatureCounts: number[];
  outcomes: string[];
}

/** Deploys a real receiver (Express) with `secrets` at `url`. */
function deploy(secrets: SecretInput[]): Deployed {
  const deployed: Deployed = { keyIds: [], signatureCounts: [], outcomes: [] };
  const app = express();
  app.post('/hooks', webhooks({ secrets, idempotency: { store: memoryStore() }, onOutcome: (event) => deployed.outcomes.push(event.outcome) }), (req, res) => {
    deployed.keyIds.push(webhookOf(req).keyId);
    deployed.signatureCounts.push(String(req.headers['webhook-signature']).split(' ').length);
    res.sendStatus(204);
  });
  current = app;
  return deployed;
}

it('rotates through the CLI, verifies during and after the overlap, and the old key can go', async () => {
  const { destination, signingSecret: oldSecret, keyId: oldKeyId } = emulator.addDestination({ url });
  const before = deploy([{ key: oldSecret, keyId: oldKeyId }]);
  const event = emulator.addEvent({ body: '{"type":"invoice.paid"}' });
  expect((await emulator.forward(event.id, destination.id)).status).toBe(204);
  expect(before.signatureCounts).toEqual([1]);

  const out = join(dir, 'secret.json');
  const rotated = await run(['relay', 'rotate', '--destination', destination.id, '--out', out], { env: { RELAY_URL: emulator.url, RELAY_API_KEY: KEY } });
  record(rotated.stdout + rotated.stderr);
  expect(rotated.stderr).toBe('');
  expect(rotated.code).toBe(0);
  expect(statSync(out).mode & 0o777).toBe(0o600);
  const file = JSON.parse(readFileSync(out, 'utf8')) as { destinationId: string; keyId: string; signingSecret: string };
  expect(file.destinationId).toBe(destination.id);
  expect(rotated.stdout).toContain(`keyId ${file.keyId}`);
  expect(rotated.stdout).not.toContain(file.signingSecret);
  expect(emulator.signingSecrets(destination.id)).toEqual([
    { keyId: file.keyId, secret: file.signingSecret },
    { keyId: oldKeyId, secret: oldSecret },
  ]);

  // During the overlap a receiver not yet redeployed still verifies (the old signature is there).
  expect((await emulator.forward(event.id, destination.id)).status).toBe(204);
  expect(before.signatureCounts).toEqual([1, 2]);
  expect(before.keyIds).toEqual([oldKeyId, oldKeyId]);

  // Deployed at once, newest first, both with their keyIds: the new keyId is the one reported.
  const both = deploy([
    { key: file.signingSecret, keyId: file.keyId },
    { key: oldSecret, keyId: oldKeyId },
  ]);
  expect((await emulator.forward(event.id, destination.id)).status).toBe(204);
  expect(both.signatureCounts).toEqual([2]);
  expect(both.keyIds).toEqual([file.keyId]);

  // After the overlap only the new key signs.
  emulator.endOverlap(destination.id);
  expect(emulator.signingSecrets(destination.id)).toEqual([{ keyId: file.keyId, secret: file.signingSecret }]);
  expect((await emulator.forward(event.id, destination.id)).status).toBe(204);
  expect(both.signatureCounts).toEqual([2, 1]);
  expect(both.keyIds).toEqual([file.keyId, file.keyId]);

  // The old secret removed: still verifies. The old secret alone: refused.
  const newOnly = deploy([{ key: file.signingSecret, keyId: file.keyId }]);
  expect((await emulator.forward(event.id, destination.id)).status).toBe(204);
  expect(newOnly.keyIds).toEqual([file.keyId]);
  const oldOnly = deploy([{ key: oldSecret, keyId: oldKeyId }]);
  expect((await emulator.forward(event.id, destination.id)).status).toBe(401);
  expect(oldOnly.outcomes).toEqual(['rejected']);
});

/**
 * What the example tests share: signed deliveries over real HTTP, a handler that can be held to
 * make concurrent deliveries overlap, and running a Node example as the script a user starts.
 */

import { join } from 'node:path';
import { generateSecret, signWebhook } from 'webhook-receiver';
import { expect, it } from 'vitest';
import { root, run, startServer, type ServerProcess } from '../runtimes/harness.ts';

export const BODY = '{"type":"invoice.paid","data":{"id":"in_1"}}';

/** A rejected delivery's envelope: the code, and a message that says which check failed. */
export const envelope = (error: string, message: RegExp): { error: string; message: unknown } => ({ error, message: expect.stringMatching(message) });

export interface Answer {
  status: number;
  body: unknown;
}

/** POSTs over real HTTP and reads the answer (JSON when it says so). */
export async function post(url: string, headers: Record<string, string>, body = BODY): Promise<Answer> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  return { status: response.status, body: response.headers.get('content-type')?.startsWith('application/json') ? (JSON.parse(text) as unknown) : text };
}

export interface Run {
  id: string;
  type: string;
  keyId: string | undefined;
}

/**
 * An example's event handler that records its runs. While `hold()` is in force, runs wait until
 * `release()`: a handler that is still working when the duplicates arrive.
 */
export class Runs {
  readonly runs: Run[] = [];
  #held: Promise<void> | undefined;
  #release: () => void = () => undefined;

  readonly onEvent = async (event: { type: string }, webhook: { id: string; keyId: string | undefined }): Promise<void> => {
    this.runs.push({ id: webhook.id, type: event.type, keyId: webhook.keyId });
    if (this.#held) await this.#held;
  };

  hold(): void {
    this.#held = new Promise((resolve) => {
      this.#release = resolve;
    });
  }

  release(): void {
    this.#release();
    this.#held = undefined;
  }
}

/**
 * Sends `count` deliveries of one signed webhook at once, while the handler is held; the held
 * run is released once the others were answered (or after 5 s, so a failure cannot hang).
 * Returns the statuses, sorted.
 */
export async function concurrentDeliveries(send: () => Promise<Answer>, runs: Runs, count: number): Promise<{ statuses: number[]; answers: Answer[] }> {
  runs.hold();
  const timer = setTimeout(() => runs.release(), 5000);
  let answered = 0;
  try {
    const answers = await Promise.all(
      Array.from({ length: count }, () =>
        send().then((answer) => {
          if (++answered === count - 1) runs.release();
          return answer;
        }),
      ),
    );
    return { statuses: answers.map((answer) => answer.status).sort((a, b) => a - b), answers };
  } finally {
    clearTimeout(timer);
    runs.release();
  }
}

const tsx = join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs');

/** Starts `examples/<file>` as a user would (`npx tsx examples/<file>`), on a free port. */
function startExample(file: string, secret: string): Promise<ServerProcess> {
  return startServer(process.execPath, [tsx, join('examples', file)], { cwd: root, env: { WEBHOOK_SECRET: secret, PORT: '0' }, timeoutMs: 15_000 });
}

/**
 * The two tests every Node example gets: started as a script (`npx tsx examples/<file>` with
 * WEBHOOK_SECRET and PORT), it serves signed webhooks over real HTTP, logs the handler's run in
 * `logged` and never the secret; without WEBHOOK_SECRET it refuses to start and says why.
 */
export function scriptTests(file: string, logged: RegExp): void {
  it('runs as a script, configured by WEBHOOK_SECRET and PORT', async () => {
    const secret = generateSecret();
    const script = await startExample(file, secret);
    try {
      const first = await signWebhook({ secret, body: BODY, id: 'msg_script_1' });
      expect(await post(script.url, first.headers)).toEqual({ status: 200, body: { received: true, id: 'msg_script_1', keyId: null } });
      const retry = await signWebhook({ secret, body: BODY, id: 'msg_script_1' });
      expect(await post(script.url, retry.headers)).toEqual({ status: 200, body: { duplicate: true } });
      expect(await post(script.url, first.headers, `${BODY} `)).toEqual({ status: 401, body: envelope('SIGNATURE_MISMATCH', /^no signature matched/) });
      expect(script.output()).toMatch(logged);
      expect(script.output()).not.toContain(secret);
    } finally {
      await script.stop();
    }
  });

  it('refuses to start without WEBHOOK_SECRET, and says so', async () => {
    const result = await run(process.execPath, [tsx, join('examples', file)], { cwd: root, env: { WEBHOOK_SECRET: '', PORT: '0' }, timeoutMs: 15_000 });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
  });
}

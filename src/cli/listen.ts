/**
 * `webhook-receiver listen`: a local receiver that prints every delivery as it arrives, with its
 * verification outcome and, for a failed one, the diagnosis; verified deliveries can be forwarded
 * to the app.
 */

import { escapeControlCharacters } from '../lib/encoding.ts';
import { errorResponse } from '../http.ts';
import type { SecretInput } from '../secrets.ts';
import { explainVerificationFailure } from '../testing/assert.ts';
import { keyLabel } from '../testing/diagnose.ts';
import { startWebhookServer, type Answer, type IncomingDelivery } from '../testing/node/test-receiver.ts';
import { describeBody } from '../testing/recorded.ts';
import { SECRET_HELP, UsageError, asUsage, io, parse, printHelp, secretsFrom, wholeNumber } from './options.ts';
import { openRecording, type Recording } from './record.ts';

export const LISTEN_HELP = `Usage: webhook-receiver listen [--secret S]... [--port P] [--forward URL] [--record FILE]
                              [--max-body-bytes N]

Runs a receiver on http://127.0.0.1:P that prints every delivery as it arrives, with its
verification outcome (and the diagnosis when it fails). Verified deliveries are answered 204, or
forwarded; failed ones get the error envelope and status a real receiver sends. Stop with Ctrl-C.

Options:
${SECRET_HELP}
  --port P            the port (default: a free one; the URL is printed on start)
  --forward URL       send verified deliveries on to URL (your app) and answer with its status
  --record FILE       append every delivery to FILE, one JSON line each (method, path, headers in
                      order, contentType, bytes, bodyBase64, receivedAt, status, verification), for
                      'webhook-receiver replay'. Credential headers (authorization, cookie, every
                      signature…) are written as [redacted]. Created with mode 0600: it holds real
                      payloads
  --max-body-bytes N  the largest body read and recorded (default 1048576); a larger one is
                      answered 413 and recorded without its body
  --help              show this help`;

/** Headers that describe one hop and must not be copied onto the forwarded request. */
const HOP_BY_HOP = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-connection', 'content-length', 'expect']);
const FORWARD_TIMEOUT_MS = 10_000;

async function forward(target: URL, delivery: IncomingDelivery): Promise<{ answer: Answer; line: string }> {
  const headers = new Headers();
  for (const [name, value] of delivery.headers) if (!HOP_BY_HOP.has(name.toLowerCase())) headers.append(name, value);
  try {
    const response = await fetch(target, {
      method: delivery.method,
      headers,
      body: delivery.method === 'GET' || delivery.method === 'HEAD' ? undefined : (delivery.body as Uint8Array<ArrayBuffer>),
      redirect: 'manual',
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    });
    const body = new Uint8Array(await response.arrayBuffer());
    const contentType = response.headers.get('content-type');
    return {
      answer: { status: response.status, headers: contentType === null ? {} : { 'content-type': contentType }, body },
      line: `forwarded to ${target.href}: ${response.status}`,
    };
  } catch (error) {
    const timedOut = (error as Error).name === 'TimeoutError';
    const reason = timedOut ? `no answer within ${FORWARD_TIMEOUT_MS} ms` : ((error as Error & { cause?: { code?: string } }).cause?.code ?? (error as Error).message);
    return {
      answer: { status: timedOut ? 504 : 502, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: 'FORWARD_FAILED', message: reason }) },
      line: `forwarding to ${target.href} failed: ${reason}`,
    };
  }
}

function indent(text: string): string {
  return text.split('\n').map((line) => `    ${line}`).join('\n');
}

/** Bodies over this are not diagnosed by `listen`: each candidate bug costs a hash of the body. */
const LISTEN_DIAGNOSIS_MAX_BODY_BYTES = 64 * 1024;
/** How long `listen` spends diagnosing one failed delivery, at most. */
const LISTEN_DIAGNOSIS_MS = 1000;

/** The delivery's block, with the diagnosis of a failed verification when it is affordable. */
async function diagnosed(delivery: IncomingDelivery, lines: string[], secrets: readonly SecretInput[]): Promise<string> {
  if (delivery.verification.ok) return lines.join('\n');
  const answered = lines.pop()!;
  if (delivery.body.byteLength > LISTEN_DIAGNOSIS_MAX_BODY_BYTES) {
    lines.push(
      `  ${delivery.verification.error.message}`,
      `  (not diagnosed: the body is ${delivery.body.byteLength} bytes, over the ${LISTEN_DIAGNOSIS_MAX_BODY_BYTES} bytes listen diagnoses)`,
    );
  } else {
    const explained = await explainVerificationFailure(delivery.verification.error, {
      headers: delivery.headers,
      body: delivery.body,
      secrets,
      toleranceSeconds: 300,
      nowMs: Date.now(),
      deadlineMs: Date.now() + LISTEN_DIAGNOSIS_MS,
    });
    lines.push(indent(explained.message));
  }
  lines.push(answered);
  return lines.join('\n');
}

export async function listenCommand(args: string[]): Promise<number> {
  const { values } = parse('listen', args, {
    secret: { type: 'string', multiple: true },
    port: { type: 'string' },
    forward: { type: 'string' },
    record: { type: 'string' },
    'max-body-bytes': { type: 'string' },
  });
  if (values.help) return printHelp(LISTEN_HELP);
  const maxBodyBytes = wholeNumber(values['max-body-bytes'], '--max-body-bytes', 1, 1024 * 1024 * 1024);
  const secrets = secretsFrom(values.secret);
  let port = 0;
  if (values.port !== undefined) {
    if (!/^[0-9]{1,5}$/.test(values.port) || Number(values.port) > 65535) throw new UsageError('--port must be a number from 0 to 65535');
    port = Number(values.port);
  }
  let target: URL | undefined;
  if (values.forward !== undefined) {
    target = URL.canParse(values.forward) ? new URL(values.forward) : undefined;
    if (target === undefined || (target.protocol !== 'http:' && target.protocol !== 'https:')) {
      throw new UsageError('--forward needs an http:// or https:// URL');
    }
  }
  let recording: Recording | undefined;
  try {
    if (values.record !== undefined) recording = openRecording(values.record);
  } catch (error) {
    throw new UsageError(`cannot open the file given with --record: ${(error as NodeJS.ErrnoException).code ?? 'unwritable'}`);
  }
  let count = 0;
  /** Each delivery's printed block, made when it is answered and printed after. */
  const pending = new Map<number, string[]>();
  const server = await asUsage(() =>
    startWebhookServer({
      secrets,
      port,
      maxBodyBytes,
      async answer(delivery, { sequence, attempt }) {
        count++;
        const lines = [`#${sequence} ${new Date().toISOString()} ${delivery.method} ${delivery.path} (attempt ${attempt})`];
        let answer: Answer;
        if (delivery.verification.ok) {
          const webhook = delivery.verification.webhook;
          lines.push(`  verified: webhook-id ${JSON.stringify(webhook.id)} with ${keyLabel(webhook.keyIndex ?? 0, webhook.keyId)} (${webhook.scheme})`);
          lines.push(`  body: ${await describeBody(delivery.body)}`);
          if (target !== undefined) {
            const forwarded = await forward(target, delivery);
            lines.push(`  ${forwarded.line}`);
            answer = forwarded.answer;
          } else {
            answer = { status: 204 };
          }
        } else {
          // What a receiver built on this package answers (the adapters' table), at once: the
          // diagnosis runs after the answer was sent, bounded in time and body size.
          lines.push(`  REJECTED ${delivery.verification.error.code}`);
          answer = errorResponse(delivery.verification.error);
        }
        lines.push(`  answered ${answer.status}`);
        pending.set(sequence, lines);
        return answer;
      },
      onDelivery(delivery, { sequence, receivedAt }) {
        try {
          recording?.write(delivery, receivedAt);
        } catch (error) {
          io.err(`recording delivery #${sequence} failed: ${(error as NodeJS.ErrnoException).code ?? 'write error'}`);
        }
        const lines = pending.get(sequence) ?? [];
        pending.delete(sequence);
        // Line by line: the block's own line breaks stay, any control character from the request
        // (path, id, body excerpt) is escaped.
        void diagnosed(delivery, lines, secrets).then((text) => io.out(text.split('\n').map(escapeControlCharacters).join('\n')));
      },
      onError(error) {
        io.err(escapeControlCharacters(`internal error: ${error instanceof Error ? error.message : String(error)}`));
      },
    }),
  ).catch((error: unknown) => {
    recording?.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new Error(`port ${port} is in use: pick another with --port`);
    throw error;
  });
  io.out(`listening on ${server.url} (${secrets.length} ${secrets.length === 1 ? 'key' : 'keys'}${target ? `; forwarding verified deliveries to ${target.href}` : ''}${recording ? '; recording every delivery to the --record file' : ''}). Ctrl-C to stop.`);
  if (recording?.widerMode !== undefined) io.err(`note: the --record file is readable by others (mode ${recording.widerMode.toString(8)}); it holds real payloads: chmod 600 it`);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      // The test receiver's close() never rejects.
      void server.close().then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  recording?.close();
  io.out(`stopped after ${count} ${count === 1 ? 'delivery' : 'deliveries'}`);
  return 0;
}

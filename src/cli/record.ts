/**
 * `webhook-receiver listen --record FILE`: each delivery appended to FILE as one JSON
 * line (a `CapturedDelivery`), for `webhook-receiver replay` or the testing kit to send again.
 * The file holds real payloads, so it is created readable by its owner only.
 */

import { closeSync, fstatSync, openSync, writeSync } from 'node:fs';
import { base64Encode } from '../lib/encoding.ts';
import { redactCredentialHeaders } from '../testing/redact.ts';
import type { CapturedDelivery } from '../testing/signed-replay.ts';
import type { Delivery } from '../testing/node/test-receiver.ts';

/**
 * A recording file open for appending.
 *
 * @example
 * ```ts
 * const recording = openRecording('deliveries.jsonl');
 * recording.write(delivery, new Date());
 * recording.close();
 * ```
 */
export interface Recording {
  /** Set when the file already existed with permissions for group or others: say so to the user. */
  readonly widerMode: number | undefined;
  /** Appends one delivery as one line. */
  write(delivery: Delivery, receivedAt: Date): void;
  close(): void;
}

/**
 * The line written for one delivery: the relay's field names where they exist, the body as
 * base64 (so a body that is not UTF-8 survives byte for byte), and what `listen` answered and
 * concluded. Credential headers keep their name and lose their value (`[redacted]`): the file
 * must not hand out a password, a session or a signature still valid at the real endpoint.
 * A body over the limit was not read: `bytes` is 0 and the verdict says
 * `PAYLOAD_TOO_LARGE`, which `replay` refuses rather than send an empty body.
 *
 * @example
 * ```ts
 * const line = JSON.stringify(capturedDelivery(delivery, new Date()));
 * ```
 */
function capturedDelivery(delivery: Delivery, receivedAt: Date): CapturedDelivery {
  const contentType = delivery.headers.find(([name]) => name.toLowerCase() === 'content-type')?.[1] ?? null;
  const { verification } = delivery;
  return {
    method: delivery.method,
    path: delivery.path,
    headers: redactCredentialHeaders(delivery.headers),
    contentType,
    bytes: delivery.body.byteLength,
    bodyBase64: base64Encode(delivery.body),
    receivedAt: receivedAt.toISOString(),
    status: delivery.status,
    verification: verification.ok
      ? {
          ok: true,
          id: verification.webhook.id,
          // Received over HTTP and verified: a signature's scheme, never a pulled event's 'relay'.
          scheme: (verification.webhook.scheme as 'v1' | 'v1a' | undefined) ?? null,
          keyIndex: verification.webhook.keyIndex ?? null,
          keyId: verification.webhook.keyId ?? null,
        }
      : { ok: false, code: verification.error.code, message: verification.error.message },
  };
}

/**
 * Opens (or creates, mode 0600) `file` for appending. Throws the `fs` error when it cannot.
 *
 * @example
 * ```ts
 * const recording = openRecording(values.record);
 * if (recording.widerMode !== undefined) console.warn('the file is readable by others');
 * ```
 */
export function openRecording(file: string): Recording {
  // 'a': O_APPEND, so lines from this and any other writer never overwrite each other. The mode
  // applies only when the file is created; an existing file keeps its own, reported below.
  const fd = openSync(file, 'a', 0o600);
  const mode = fstatSync(fd).mode & 0o777;
  let closed = false;
  return {
    widerMode: (mode & 0o077) !== 0 ? mode : undefined,
    write(delivery, receivedAt) {
      const line = new TextEncoder().encode(`${JSON.stringify(capturedDelivery(delivery, receivedAt))}\n`);
      // Synchronously and whole: lines stay in arrival order and a stop never leaves half a line.
      let written = 0;
      while (written < line.byteLength) written += writeSync(fd, line, written);
    },
    close() {
      if (closed) return;
      closed = true;
      closeSync(fd);
    },
  };
}

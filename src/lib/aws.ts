/**
 * What the AWS-backed parts (the DynamoDB store, the SQS inbox) share about the application's AWS
 * SDK v3: its command classes, imported from the application's own copy on first use (an SDK
 * client sends only its own command objects), and one request bounded by a timeout that aborts it.
 */

import { withTimeout } from './timeout.ts';

/** An SDK v3 client, by the one method the package calls. */
export interface AwsClient {
  send(command: object, options?: { abortSignal?: AbortSignal }): Promise<unknown>;
}

/** An SDK command class. */
export type CommandClass = new (input: object) => object;

/**
 * The command classes of an SDK package, imported by `load` once. `load` names the package with a
 * string literal, so an application's bundler sees it (it is never bundled into this package). A
 * failed import is tried again on the next call; it rejects with `missing`, the import's error as
 * its `cause`.
 */
export function commandLoader<T>(load: () => Promise<unknown>, missing: string): () => Promise<T> {
  let commands: Promise<T> | undefined;
  return () => {
    commands ??= load().then(
      (sdk) => sdk as T,
      (error: unknown) => {
        commands = undefined;
        throw new Error(missing, { cause: error });
      },
    );
    return commands;
  };
}

/**
 * One request: the command `make` builds from the loaded classes, sent through `client`. Rejects
 * with `onTimeout()` once `timeoutMs` has passed, aborting the request, even when the client
 * ignores its abort signal. `signal`, when given, aborts the request too (the client rejects).
 */
export async function sendCommand<T>(
  client: AwsClient,
  commands: () => Promise<T>,
  make: (sdk: T) => object,
  timeoutMs: number,
  onTimeout: () => Error,
  signal?: AbortSignal,
): Promise<unknown> {
  const controller = new AbortController();
  const forward = () => controller.abort(signal?.reason);
  signal?.addEventListener('abort', forward, { once: true });
  try {
    const request = commands().then((sdk) => client.send(make(sdk), { abortSignal: controller.signal }));
    return await withTimeout(request, timeoutMs, () => {
      const error = onTimeout();
      controller.abort(error);
      return error;
    });
  } finally {
    signal?.removeEventListener('abort', forward);
  }
}

/** The receiver the Nest module builds, once per app, and its logging through Nest's `Logger`. */

import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import { errorText } from '../../src/errors.ts';
import { AdapterFlow, type AdapterOptions } from '../../src/http.ts';
import { escapeControlCharacters } from '../../src/lib/encoding.ts';
import type { WebhookLogger } from '../../src/logger.ts';
import type { Receiver } from '../../src/receiver.ts';
import type { WebhookReceiverOptions } from './options.ts';

/** The context Nest's log lines of the receiver carry (`[WebhookReceiver]` in Nest's console format). */
const LOG_CONTEXT = 'WebhookReceiver';

/** `fields` as `name=value` pairs for a text line: strings quoted (and escaped), `undefined` left out. */
function fieldsText(fields: object): string {
  const pairs: string[] = [];
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined) pairs.push(`${name}=${typeof value === 'string' ? JSON.stringify(value) : String(value)}`);
  }
  return pairs.join(' ');
}

/**
 * The receiver's default logging through Nest's `Logger` (context `WebhookReceiver`), so
 * rejections and store failures take the app's own log format and level: Nest's loggers take one
 * message, so the fields go into it. Request values (the path, the claimed id) are escaped.
 */
function nestLogger(): WebhookLogger {
  const logger = new Logger(LOG_CONTEXT);
  return {
    warn(fields, message) {
      logger.warn(escapeControlCharacters(`${message} ${fieldsText(fields)}`));
    },
    error(fields, message) {
      const { err, ...rest } = fields as { err?: unknown };
      const stack = err instanceof Error ? err.stack : undefined;
      logger.error(escapeControlCharacters(`${message} ${fieldsText(rest)}: ${errorText(err)}`), stack);
    },
  };
}

/**
 * The receiver the module builds from its options, once per app. Inject it to reach the
 * receiver (a readiness check with `receiver.ping()`, or `receiver.inbox` when the module accepts
 * into one); on shutdown (`app.close()`, or a signal with `app.enableShutdownHooks()`) it closes
 * the receiver, which stops renewals and lets completions in flight finish.
 *
 * @example
 * ```ts
 * import { Inject } from '@nestjs/common';
 * import { WebhookReceiverService } from 'webhook-receiver/nestjs';
 * class Ready { constructor(@Inject(WebhookReceiverService) private readonly webhooks: WebhookReceiverService) {}
 *   check() { return this.webhooks.receiver.ping(); } }
 * ```
 */
export class WebhookReceiverService implements OnApplicationShutdown {
  /** @internal The adapters' shared flow. */
  readonly flow: AdapterFlow;
  /** The receiver behind the interceptor. */
  readonly receiver: Receiver;

  constructor(options: AdapterOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError('WebhookReceiverModule needs an options object: WebhookReceiverModule.forRoot({ secrets })');
    const { isGlobal: _isGlobal, ...receiverOptions } = options as WebhookReceiverOptions;
    // Nest's Logger unless the app chose a logger; `onRejected` and `onError`, when given, still
    // replace the logging they cover.
    this.flow = new AdapterFlow({ ...receiverOptions, logger: receiverOptions.logger ?? nestLogger() });
    this.receiver = this.flow.receiver;
  }

  /** Closes the receiver when Nest shuts down (`app.enableShutdownHooks()`). */
  onApplicationShutdown(): Promise<void> {
    return this.receiver.close();
  }
}

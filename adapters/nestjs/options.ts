/** The options of `WebhookReceiverModule` and the token they are injected by. */

import type { InjectionToken, ModuleMetadata } from '@nestjs/common';
import type { AdapterOptions } from '../../src/http.ts';

/**
 * The injection token of the module's options (what `forRoot` was given, or what the
 * `forRootAsync` factory returned).
 *
 * @example
 * ```ts
 * import { Inject } from '@nestjs/common';
 * import { WEBHOOK_RECEIVER_OPTIONS, type WebhookReceiverOptions } from 'webhook-receiver/nestjs';
 * class Health { constructor(@Inject(WEBHOOK_RECEIVER_OPTIONS) readonly options: WebhookReceiverOptions) {} }
 * ```
 */
export const WEBHOOK_RECEIVER_OPTIONS = 'WEBHOOK_RECEIVER_OPTIONS';

/**
 * Options of {@link WebhookReceiverModule.forRoot}: every adapter's, plus whether the module is
 * global.
 *
 * @example
 * ```ts
 * const options: WebhookReceiverOptions = { secrets: process.env.WEBHOOK_SECRET!, isGlobal: true };
 * ```
 */
export interface WebhookReceiverOptions extends AdapterOptions {
  /** Makes the interceptor usable in every module without importing this one. Default `false`. */
  isGlobal?: boolean;
}

/**
 * Options of {@link WebhookReceiverModule.forRootAsync}: the options built by a factory, for
 * instance from `ConfigService`.
 *
 * @example
 * ```ts
 * const async: WebhookReceiverAsyncOptions = {
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ secrets: config.getOrThrow<string>('WEBHOOK_SECRET') }),
 * };
 * ```
 */
export interface WebhookReceiverAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Builds the options from the providers named in `inject`, in that order. */
  useFactory: (...args: never[]) => AdapterOptions | Promise<AdapterOptions>;
  inject?: InjectionToken[];
  isGlobal?: boolean;
}

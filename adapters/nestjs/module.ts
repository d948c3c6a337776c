/** The Nest module: `forRoot` and `forRootAsync`. */

import { Module, type DynamicModule, type ModuleMetadata, type Provider } from '@nestjs/common';
import type { AdapterOptions } from '../../src/http.ts';
import { WebhookInterceptor } from './interceptor.ts';
import { WEBHOOK_RECEIVER_OPTIONS, type WebhookReceiverAsyncOptions, type WebhookReceiverOptions } from './options.ts';
import { WebhookReceiverService } from './service.ts';

function moduleOf(optionsProvider: Provider, imports: ModuleMetadata['imports'], isGlobal: boolean | undefined): DynamicModule {
  const service: Provider = {
    provide: WebhookReceiverService,
    useFactory: (options: AdapterOptions) => new WebhookReceiverService(options),
    inject: [WEBHOOK_RECEIVER_OPTIONS],
  };
  return {
    module: WebhookReceiverModule,
    global: isGlobal === true,
    imports: imports ?? [],
    providers: [optionsProvider, service, WebhookInterceptor],
    exports: [WEBHOOK_RECEIVER_OPTIONS, WebhookReceiverService, WebhookInterceptor],
  };
}

/**
 * The module that configures the receiver: `forRoot(options)`, or `forRootAsync` to build the
 * options from other providers (`ConfigService`, a provider of the app's inbox). Import it in the
 * module whose controllers use {@link WebhookInterceptor} (or pass `isGlobal: true`). Create the
 * app with `rawBody: true`. With `inbox` in the options the interceptor accepts into it and
 * answers 202 itself; run `inbox.work(handler)` from a provider's `onApplicationBootstrap`.
 *
 * @example
 * ```ts
 * import { Module } from '@nestjs/common';
 * import { ConfigModule, ConfigService } from '@nestjs/config';
 * import { WebhookReceiverModule } from 'webhook-receiver/nestjs';
 *
 * @Module({
 *   imports: [
 *     WebhookReceiverModule.forRootAsync({
 *       imports: [ConfigModule.forRoot()],
 *       inject: [ConfigService],
 *       useFactory: (config: ConfigService) => ({ secrets: config.getOrThrow<string>('WEBHOOK_SECRET') }),
 *     }),
 *   ],
 *   controllers: [WebhooksController],
 * })
 * export class AppModule {}
 * // main.ts: const app = await NestFactory.create(AppModule, { rawBody: true });
 * ```
 */
export class WebhookReceiverModule {
  /**
   * The module with fixed options. They are checked when the app starts: a bad secret fails it.
   *
   * @example
   * ```ts
   * @Module({ imports: [WebhookReceiverModule.forRoot({ secrets: process.env.WEBHOOK_SECRET! })], controllers: [WebhooksController] })
   * export class AppModule {}
   * ```
   */
  static forRoot(options: WebhookReceiverOptions): DynamicModule {
    if (typeof options !== 'object' || options === null) throw new TypeError('WebhookReceiverModule.forRoot needs an options object: forRoot({ secrets })');
    return moduleOf({ provide: WEBHOOK_RECEIVER_OPTIONS, useValue: options }, [], options.isGlobal);
  }

  /**
   * The module with options from a factory (which may be async and inject other providers).
   *
   * @example
   * ```ts
   * WebhookReceiverModule.forRootAsync({
   *   imports: [ConfigModule],
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ secrets: config.getOrThrow<string>('WEBHOOK_SECRET') }),
   * });
   * ```
   */
  static forRootAsync(options: WebhookReceiverAsyncOptions): DynamicModule {
    if (typeof options?.useFactory !== 'function') throw new TypeError('WebhookReceiverModule.forRootAsync needs a useFactory function');
    const provider: Provider = { provide: WEBHOOK_RECEIVER_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] };
    return moduleOf(provider, options.imports, options.isGlobal);
  }
}
Module({})(WebhookReceiverModule);

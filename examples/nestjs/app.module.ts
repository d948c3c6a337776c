import { Module, type DynamicModule } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { WebhookReceiverModule } from 'webhook-receiver/nestjs';
import { EVENT_HANDLER, WebhooksController, type EventHandler } from './webhooks.controller.ts';

const logEvent: EventHandler = (event, webhook) => {
  console.log(`webhook ${webhook.id}: ${event.type} (key ${webhook.keyId ?? webhook.keyIndex})`);
};

@Module({})
export class AppModule {
  /** The app, its secret read through ConfigService (WEBHOOK_SECRET in the environment). */
  static register(onEvent: EventHandler = logEvent): DynamicModule {
    return {
      module: AppModule,
      imports: [
        WebhookReceiverModule.forRootAsync({
          imports: [ConfigModule.forRoot({ ignoreEnvFile: true })],
          inject: [ConfigService],
          // During a rotation, list both secrets: [current, previous].
          useFactory: (config: ConfigService) => ({ secrets: config.getOrThrow<string>('WEBHOOK_SECRET') }),
        }),
      ],
      controllers: [WebhooksController],
      providers: [{ provide: EVENT_HANDLER, useValue: onEvent }],
    };
  }
}

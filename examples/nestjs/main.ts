/**
 * NestJS (12, Express or Fastify platform): signed webhooks on POST /webhooks.
 *
 *   WEBHOOK_SECRET=whsec_… npx tsx examples/nestjs/main.ts              # Express, 127.0.0.1:3000, or PORT
 *   WEBHOOK_SECRET=whsec_… PLATFORM=fastify npx tsx examples/nestjs/main.ts
 *
 * NestJS's decorators need `experimentalDecorators` (and, for constructor injection by type,
 * `emitDecoratorMetadata`) in tsconfig.json. tsx (esbuild) emits no decorator metadata, so this
 * app injects by explicit token (`@Inject(EVENT_HANDLER)`), as webhook-receiver/nestjs does, and
 * runs under tsx as it does under tsc, SWC or vitest.
 */

import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { AppModule } from './app.module.ts';
import type { EventHandler } from './webhooks.controller.ts';

/**
 * Creates the app. `rawBody: true` is what matters: Nest then keeps the exact bytes that were
 * signed in `req.rawBody`, on either platform, and the interceptor verifies those.
 */
export function createApp(platform: 'express' | 'fastify' = 'express', onEvent?: EventHandler): Promise<INestApplication> {
  const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
  return NestFactory.create(AppModule.register(onEvent), adapter, { rawBody: true, logger: ['error', 'warn'] });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!process.env.WEBHOOK_SECRET) {
    console.error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)');
    process.exit(1);
  }
  const app = await createApp(process.env.PLATFORM === 'fastify' ? 'fastify' : 'express');
  // Closes the receiver on SIGTERM: renewals stop, completions in flight finish.
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
  const { port } = (app.getHttpServer() as { address(): AddressInfo }).address();
  console.log(`listening on http://127.0.0.1:${port}/webhooks`);
}

/**
 * `webhook-receiver/nestjs` through real NestJS (@nestjs/core, @nestjs/testing) on both
 * platforms, @nestjs/platform-express and @nestjs/platform-fastify, over real HTTP: the shared
 * behaviour, the raw body Nest keeps with `rawBody: true` (and the fix when it is off),
 * forRootAsync with ConfigService, and a client that leaves.
 */

import { Controller, Inject, Logger, Post, Res, UseInterceptors, type ArgumentsHost, type INestApplication, type LoggerService } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { ConfigModule, ConfigService } from '@nestjs/config';
import type { DynamicModule } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  Webhook,
  WebhookCtx,
  WebhookInterceptor,
  WebhookReceiverModule,
  WebhookReceiverService,
  WEBHOOK_RECEIVER_OPTIONS,
  type VerifiedWebhook,
  type WebhookContext,
} from '../../adapters/nestjs.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { generateSecret } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import {
  adapterConformance,
  BODY_UNAVAILABLE_MESSAGE,
  literally,
  expectDuplicate,
  expectEnvelope,
  expectInProgress,
  expectProcessed,
  Recorder,
  signed,
  type Endpoint,
  type Outgoing,
  type Reply,
} from './conformance.ts';
import { realHttpBehaviour, type Served } from './node-http.ts';

const RECORDER = 'RECORDER';
const CONTEXTS = 'CONTEXTS';

/** Express's response and Fastify's reply both have `status(code)`. */
interface StatusSetter {
  status(code: number): unknown;
}

@Controller()
class HookController {
  // Explicit tokens: the tests do not rely on decorator metadata for injection.
  constructor(
    @Inject(RECORDER) private readonly recorder: Recorder,
    @Inject(CONTEXTS) private readonly contexts: WebhookContext[],
  ) {}

  // `/hook` and any path under it: the rejection-context test sends control characters in the path.
  @Post(['hook', 'hook/*'])
  @UseInterceptors(WebhookInterceptor)
  async hook(@Webhook() webhook: VerifiedWebhook, @WebhookCtx() context: WebhookContext, @Res({ passthrough: true }) res: StatusSetter) {
    this.contexts.push(context);
    // Read as the quick start reads it (Nest's @Body() parse answers a body that is not JSON 400 itself).
    const { status, body } = await this.recorder.handle(webhook, webhook.json());
    res.status(status);
    return body;
  }

  @Post('unguarded')
  unguarded(@Webhook() webhook: VerifiedWebhook) {
    return { id: webhook.id };
  }
}

type Platform = 'express' | 'fastify';
const PLATFORMS: Platform[] = ['express', 'fastify'];

interface Built extends Served {
  app: INestApplication;
  contexts: WebhookContext[];
  /** What reached Nest's exception filters. */
  errors: unknown[];
}

/** Nest's own answer to an error, with a record of the error: the tests see what the filters got. */
class RecordingFilter extends BaseExceptionFilter {
  constructor(
    private readonly errors: unknown[],
    applicationRef: ConstructorParameters<typeof BaseExceptionFilter>[0],
  ) {
    super(applicationRef);
  }

  override catch(exception: unknown, host: ArgumentsHost): void {
    this.errors.push(exception);
    super.catch(exception, host);
  }
}

async function build(
  platform: Platform,
  receiverModule: DynamicModule,
  recorder: Recorder,
  { rawBody = true, logger = false }: { rawBody?: boolean; logger?: LoggerService | false } = {},
): Promise<Built> {
  const contexts: WebhookContext[] = [];
  const moduleRef = await Test.createTestingModule({
    imports: [receiverModule],
    controllers: [HookController],
    providers: [
      { provide: RECORDER, useValue: recorder },
      { provide: CONTEXTS, useValue: contexts },
    ],
  }).compile();
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = moduleRef.createNestApplication(adapter, { rawBody, logger });
  const errors: unknown[] = [];
  app.useGlobalFilters(new RecordingFilter(errors, app.getHttpAdapter()));
  await app.listen(0, '127.0.0.1');
  const server = app.getHttpServer() as import('node:http').Server;
  const { port } = server.address() as import('node:net').AddressInfo;
  const close = (): Promise<void> => app.close();
  const endpoint: Endpoint = {
    async send({ headers, body, path = '/hook' }: Outgoing): Promise<Reply> {
      // Bytes go as they are (superagent would write a Buffer with a JSON content type as JSON).
      const res = await request(server).post(path).set(headers).serialize((value: unknown) => value as string).send(typeof body === 'string' ? body : Buffer.from(body));
      return { status: res.status, headers: res.headers as Record<string, string>, body: res.text };
    },
    close,
  };
  return { app, endpoint, port, server, contexts, errors, close };
}

describe.each(PLATFORMS)('NestJS on @nestjs/platform-%s', (platform) => {
  const serve = (options: AdapterOptions, recorder: Recorder): Promise<Built> => build(platform, WebhookReceiverModule.forRoot(options), recorder);
  // Content-Encoding: Nest's own body parser (rawBody: true) reads JSON bodies before any
  // interceptor and answers an encoding it does not inflate (x-gzip, br) or a bad gzip body in its
  // own body, on Express (body-parser) and Fastify alike; the interceptor never sees them.
  adapterConformance(`NestJS (${platform})`, async (options, recorder) => (await serve(options, recorder)).endpoint, {
    contentEncoding: true,
    frameworkParsesJson: true,
    // The default log is Nest's Logger (the tests here build apps with `logger: false`, so the spy reads it).
    frameworkLog: {
      warnings: () => {
        const warn = vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => {});
        // The receiver's Logger (its context), not Nest's own warnings (a route path it converts).
        const ours = (index: number) => (warn.mock.contexts[index] as { context?: unknown }).context === 'WebhookReceiver';
        return { lines: () => warn.mock.calls.filter((_, index) => ours(index)).map(([message]) => String(message)), restore: () => warn.mockRestore() };
      },
      line: (method, path, code, webhookId) =>
        new RegExp(`^webhook rejected: .* code="${code}" status=401 webhookId=${literally(JSON.stringify(webhookId))} method="${method}" path=${literally(JSON.stringify(path))}$`),
    },
  });
  realHttpBehaviour(`NestJS (${platform})`, serve, { closesConnection: true, frameworkReadsBody: true });

  const open: Built[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((built) => built.close()));
  });

  async function setup(options: Partial<AdapterOptions> = {}, settings: { rawBody?: boolean } = {}) {
    const secret = generateSecret();
    const recorder = new Recorder();
    const built = await build(platform, WebhookReceiverModule.forRoot({ secrets: secret, onRejected: () => {}, ...options }), recorder, settings);
    open.push(built);
    return { secret, recorder, ...built };
  }

  it('verifies the raw body Nest kept (rawBody: true), byte for byte, and gives the same WebhookContext', async () => {
    const { secret, recorder, endpoint, contexts } = await setup();
    // Spacing and escapes that a re-serialised req.body would not reproduce.
    const body = '{ "type" : "invoice.paid",\n  "note": "d\\u00e9j\\u00e0 vu" }';
    const request = await signed(secret, { type: 'x' });
    const { signWebhook } = await import('../../src/sign.ts');
    const message = await signWebhook({ secret, body, id: request.id });
    expectProcessed(await endpoint.send({ headers: { ...message.headers, 'content-type': 'application/json' }, body }), request.id);
    expect(recorder.runs).toMatchObject([{ id: request.id, event: { type: 'invoice.paid', note: 'déjà vu' } }]);
    expect(contexts).toHaveLength(1);
    expect(contexts[0]!.signal).toBeInstanceOf(AbortSignal);
    expect(contexts[0]!.claim).toMatchObject({ token: expect.any(String) });
  });

  it('says exactly what to change when the app was created without rawBody: true', async () => {
    const rejected: { hint?: string }[] = [];
    const { secret, recorder, endpoint } = await setup({ onRejected: (error) => rejected.push(error) }, { rawBody: false });
    const request = await signed(secret, { type: 'a' });
    expect(expectEnvelope(await endpoint.send(request), 500, 'BODY_UNAVAILABLE')).toBe(BODY_UNAVAILABLE_MESSAGE);
    // The fix is the hint: in the log, never in the answer.
    expect(rejected[0]?.hint).toContain('NestFactory.create(AppModule, { rawBody: true })');
    expect(recorder.runs).toEqual([]);
  });

  it('fails loudly when @Webhook() is used on a route without the interceptor', async () => {
    const { secret, endpoint, errors } = await setup();
    const request = await signed(secret, { type: 'a' });
    const reply = await endpoint.send({ ...request, path: '/unguarded' });
    // Nest's own answer to an error it does not know; the error that reached it says what to fix.
    expect(reply.status).toBe(500);
    expect(JSON.parse(reply.body)).toEqual({ statusCode: 500, message: 'Internal server error' });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(TypeError);
    expect((errors[0] as TypeError).message).toBe(
      '@Webhook() is used on a route without WebhookInterceptor: add @UseInterceptors(WebhookInterceptor) to the route or its controller',
    );
  });

  describe("logging through Nest's Logger", () => {
    /** The app's logger: what Nest's `Logger` hands it, call by call. */
    function appLogger(): LoggerService & { calls: [string, ...unknown[]][] } {
      const calls: [string, ...unknown[]][] = [];
      const record =
        (level: string) =>
        (message: unknown, ...params: unknown[]) =>
          void calls.push([level, message, ...params]);
      return { calls, log: record('log'), warn: record('warn'), error: record('error'), debug: record('debug'), verbose: record('verbose'), fatal: record('fatal') };
    }
    const ofReceiver = (logger: ReturnType<typeof appLogger>) => logger.calls.filter((call) => call.at(-1) === 'WebhookReceiver');

    it("logs a rejection as warn(message, 'WebhookReceiver'), the fields in the message, never a secret", async () => {
      const logger = appLogger();
      const secret = generateSecret();
      const built = await build(platform, WebhookReceiverModule.forRoot({ secrets: secret }), new Recorder(), { logger });
      open.push(built);
      const forged = await signed(generateSecret(), { type: 'a' });
      expectEnvelope(await built.endpoint.send({ ...forged, path: '/hook?token=s3cr3t' }), 401, 'SIGNATURE_MISMATCH');
      const calls = ofReceiver(logger);
      expect(calls).toHaveLength(1);
      const [level, message, context] = calls[0]!;
      expect([level, context]).toEqual(['warn', 'WebhookReceiver']);
      expect(message).toMatch(/^webhook rejected: no signature matched/);
      expect(message).toMatch(new RegExp(` code="SIGNATURE_MISMATCH" status=401 webhookId=${literally(JSON.stringify(forged.id))} method="POST" path="/hook"$`));
      expect(JSON.stringify(logger.calls)).not.toContain(secret.slice(6));
      expect(JSON.stringify(logger.calls)).not.toContain('s3cr3t');
    });

    it("logs a store failure as error(message, stack, 'WebhookReceiver')", async () => {
      const logger = appLogger();
      const secret = generateSecret();
      const inner = memoryStore();
      const store = { ...inner, claim: inner.claim, release: inner.release, complete: () => Promise.reject(new Error('store down')) };
      const built = await build(platform, WebhookReceiverModule.forRoot({ secrets: secret, idempotency: { store, lockSeconds: 0.05 } }), new Recorder(), { logger });
      open.push(built);
      const request = await signed(secret, { type: 'a' });
      expectProcessed(await built.endpoint.send(request), request.id);
      const errors = ofReceiver(logger).filter(([level]) => level === 'error');
      expect(errors.length).toBeGreaterThan(0);
      const [, message, stack, context] = errors[0]!;
      expect(context).toBe('WebhookReceiver');
      expect(message).toMatch(new RegExp(`^webhook receiver: could not complete the idempotency claim .*stage="complete" webhookId=${literally(JSON.stringify(request.id))} willRetry=(true|false): Error: store down$`));
      expect(String(stack)).toMatch(/^Error: store down\n/);
    });

    it('an explicit logger or onRejected still wins over Nest\'s Logger', async () => {
      const logger = appLogger();
      const own: string[] = [];
      const rejected: string[] = [];
      const mine = { warn: (_fields: object, message: string) => void own.push(message), error: () => {} };
      for (const options of [{ logger: mine }, { onRejected: (error: { code: string }) => void rejected.push(error.code) }]) {
        const secret = generateSecret();
        const built = await build(platform, WebhookReceiverModule.forRoot({ secrets: secret, ...options }), new Recorder(), { logger });
        open.push(built);
        expectEnvelope(await built.endpoint.send(await signed(generateSecret(), { type: 'a' })), 401, 'SIGNATURE_MISMATCH');
      }
      expect(own).toHaveLength(1);
      expect(own[0]).toMatch(/^webhook rejected: /);
      expect(rejected).toEqual(['SIGNATURE_MISMATCH']);
      expect(ofReceiver(logger)).toEqual([]);
    });
  });

  it('builds its options with forRootAsync from ConfigService', async () => {
    const secret = generateSecret();
    const recorder = new Recorder();
    const receiverModule = WebhookReceiverModule.forRootAsync({
      imports: [ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ WEBHOOK_SECRET: secret })] })],
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({ secrets: config.getOrThrow<string>('WEBHOOK_SECRET'), onRejected: () => {} }),
    });
    const built = await build(platform, receiverModule, recorder);
    open.push(built);
    const request = await signed(secret, { type: 'a' });
    expectProcessed(await built.endpoint.send(request), request.id);
    expectDuplicate(await built.endpoint.send(request));
    expect(built.app.get(WEBHOOK_RECEIVER_OPTIONS)).toMatchObject({ secrets: secret });
    // The service's receiver is the one the interceptor uses, built with the factory's secret.
    const service = built.app.get(WebhookReceiverService);
    expect(service.receiver).toBe(service.flow.receiver);
    const other = await signed(secret, { type: 'a' });
    const claim = await service.receiver.claim({ headers: other.headers, body: other.body });
    expect(claim.outcome).toBe('acquired');
    await claim.release();
  });
});

describe('WebhookReceiverModule', () => {
  it('refuses a missing options object or factory with a TypeError', () => {
    expect(() => WebhookReceiverModule.forRoot(undefined as never)).toThrow(TypeError);
    expect(() => WebhookReceiverModule.forRootAsync({} as never)).toThrow(TypeError);
  });

  it('fails the app at start-up on a bad secret', async () => {
    await expect(build('express', WebhookReceiverModule.forRoot({ secrets: 'whsec_not base64!' }), new Recorder())).rejects.toThrow(
      new TypeError('secrets[0] contains whitespace (often a trailing newline from a file or an environment variable); trim it'),
    );
  });
});

/**
 * The error model's additions: `PermanentError` (422 `PERMANENT_FAILURE`), the `hint`
 * that goes to the log and never into an answer, and `instanceof` across two copies of the
 * classes (two module instances of the source here; the built CommonJS and ES module copies in
 * test/packaging/instanceof.test.ts).
 */

import { describe, expect, it } from 'vitest';
import { PermanentError, WebhookError, bodyUnavailable, isWebhookError } from '../../src/errors.ts';
import { errorResponse } from '../../src/http.ts';
import { createReceiver } from '../../src/receiver.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { SECRET, delivery } from '../receiver/support.ts';

interface ErrorsModule {
  WebhookError: typeof WebhookError;
  PermanentError: typeof PermanentError;
}

describe('PermanentError', () => {
  it('is a WebhookError with code PERMANENT_FAILURE and status 422, its message and cause kept', () => {
    const cause = new Error('row not found');
    const error = new PermanentError('no order ord_1', { cause });
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toBeInstanceOf(WebhookError);
    expect(error).toBeInstanceOf(Error);
    expect(isWebhookError(error)).toBe(true);
    expect([error.name, error.code, error.status, error.message, error.cause]).toEqual(['PermanentError', 'PERMANENT_FAILURE', 422, 'no order ord_1', cause]);
    expect(new PermanentError().message).toBe('the handler cannot process this webhook, and retrying it will not help');
    expect(errorResponse(error)).toEqual({
      status: 422,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ error: 'PERMANENT_FAILURE', message: 'no order ord_1' }),
    });
    expect(new WebhookError('PERMANENT_FAILURE', 'x')).not.toBeInstanceOf(PermanentError);
  });

  it('thrown by a handler in the synchronous mode: the claim is released and the error propagates', async () => {
    const store = memoryStore();
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store } });
    const failing = receiver.handle(await delivery('msg_perm'), () => {
      throw new PermanentError('unknown customer');
    });
    await expect(failing).rejects.toMatchObject({ code: 'PERMANENT_FAILURE', status: 422 });
    // Released, not completed: the retry runs (and decides again).
    expect((await receiver.handle(await delivery('msg_perm'), () => 'ran')).outcome).toBe('processed');
  });
});

describe('hint', () => {
  it('is kept beside the message for the log, and no answer serialises it', () => {
    const error = bodyUnavailable('mount webhooks() before express.json()');
    expect(error).toMatchObject({ code: 'BODY_UNAVAILABLE', status: 500, hint: 'mount webhooks() before express.json()' });
    const answer = errorResponse(error);
    expect(answer.body).toBe(JSON.stringify({ error: 'BODY_UNAVAILABLE', message: 'the server could not read the raw request body, so the signature cannot be checked' }));
    expect(answer.body).not.toContain('express');
    expect(new WebhookError('MISSING_ID', 'x').hint).toBeUndefined();
    expect(new WebhookError('MISSING_ID', 'x', { hint: 'h' }).hint).toBe('h');
  });
});

describe('instanceof across two copies of the classes', () => {
  it('an error made by either copy is an instance of both copies’ classes; other errors are not', async () => {
    // A query makes the module loader evaluate the file again: a second copy with classes of its own.
    const specifier: string = '../../src/errors.ts?second-copy';
    const copy = (await import(/* @vite-ignore */ specifier)) as ErrorsModule;
    expect(copy.WebhookError).not.toBe(WebhookError);
    expect(copy.PermanentError).not.toBe(PermanentError);
    const copies = [{ WebhookError, PermanentError }, copy];
    for (const maker of copies) {
      const permanent = new maker.PermanentError('gone');
      const plain = new maker.WebhookError('MISSING_ID', 'x');
      for (const checker of copies) {
        expect(permanent instanceof checker.PermanentError).toBe(true);
        expect(permanent instanceof checker.WebhookError).toBe(true);
        expect(plain instanceof checker.WebhookError).toBe(true);
        expect(plain instanceof checker.PermanentError).toBe(false);
      }
    }
    for (const checker of copies) {
      expect(new Error('x') instanceof checker.PermanentError).toBe(false);
      expect({ name: 'PermanentError', code: 'PERMANENT_FAILURE', status: 422 } instanceof checker.PermanentError).toBe(false);
      expect((null as unknown as object) instanceof checker.PermanentError).toBe(false);
    }
    // A subclass keeps the ordinary prototype test.
    class Gone extends copy.PermanentError {}
    expect(new Gone('x') instanceof Gone).toBe(true);
    expect(new PermanentError('x') instanceof Gone).toBe(false);
    expect(new Gone('x') instanceof PermanentError).toBe(true);
  });
});

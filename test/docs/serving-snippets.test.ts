/**
 * A guide's snippet that serves HTTP with the core directly (a Fetch handler that calls
 * `receiver.handle`, `receiver.accept`, `receiver.claim` or a verifier) answers the core's
 * refusals with their documented status: copied as written, a forged signature must be a 401 in
 * the `{ error, message }` envelope, not the server's bare 500. The adapters do that themselves;
 * a snippet on the core does it with `errorResponse(error)`.
 */
import { describe, expect, it } from 'vitest';
import { codeBlocks, guideFiles, readDoc } from '../support/docs.ts';

/** Serves HTTP: a function from a Fetch `Request` to a `Response`. */
const SERVES = /\(\s*request:\s*Request\b[^)]*\)\s*:\s*Promise<Response>/;
/** Calls the core itself, where a refusal is thrown at the caller. */
const CALLS_CORE = /\breceiver\.(?:handle|accept|claim)\(|\.verify(?:Request)?\(|\bverifyWebhook\(/;

const serving = guideFiles().flatMap((file) => codeBlocks(readDoc(file), file).filter((block) => SERVES.test(block.code) && CALLS_CORE.test(block.code)));

describe('snippets that serve HTTP with the core', () => {
  it('exist (the test finds them)', () => {
    expect(serving.map((block) => block.file)).toEqual(expect.arrayContaining(['README.md', 'docs/ordering.md', 'docs/inbox.md']));
  });

  it.each(serving.map((block) => [`${block.file}:${block.line}`, block] as const))('%s answers a WebhookError with errorResponse()', (_, block) => {
    expect(block.code).toMatch(/\bisWebhookError\(error\)|\berror instanceof WebhookError\b/);
    expect(block.code).toContain('errorResponse(');
  });
});

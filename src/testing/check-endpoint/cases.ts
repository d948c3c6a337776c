/**
 * The case battery: the bodies it sends, and how each case of {@link CHECK_CASES} builds its
 * requests (signed when it is its turn to run) and which judge reads its answers.
 */

import { randomBytes } from '../../crypto.ts';
import { base64Encode } from '../../lib/encoding.ts';
import { shellQuote, type Outgoing } from './send.ts';
import { concurrentJudge, notObservable, oversizedJudge, reported, single, timingJudge, twice, unknownTenantJudge, type Built, type CaseContext, type Judge, type SignedOutgoing } from './judge.ts';
import { CHECK_CASES, type CheckCaseId } from './table.ts';

// ---------------------------------------------------------------------------------------------
// Bodies

export const DEFAULT_BODY = '{"type":"check.delivery","data":{"amount":1250,"currency":"EUR","note":"sent by webhook-receiver check"}}';
// Keys out of alphabetical order, spaces around ':' and ',', a trailing zero, an exponent and an
// escape: a parse and re-serialise (in any language) changes these bytes, so a receiver that
// verifies its own re-serialisation refuses this valid delivery.
const FORMATTING_BODY = '{ "type" : "check.formatting",\n  "zeta" : 1.50, "alpha" : [ 1e2, -0.0 ],\n  "escaped" : "caf\\u00e9 \\/ tab\\t" }\n';
const NON_ASCII_BODY = '{"type":"check.non_ascii","data":{"name":"Zoë Ångström","city":"東京","note":"🎉 ünïcödé"}}';
const NON_JSON_BODY = 'check: this body is plain text, not JSON\n';

const MANY_ENTRIES = 32;
const PREVIEW_CHARS = 200;

/** Whether the text parses as JSON. Internal: shared with the command line. */
export function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * The same JSON with a space around every structural token, found token by token so numbers and
 * strings keep their exact text (a parse and re-serialise would round big integers).
 */
function respaced(json: string): string {
  let out = '';
  let inString = false;
  let escaped = false;
  for (const char of json) {
    if (inString) {
      out += char;
      if (escaped) escaped = false;
      else if (char === '\\') escaped = true;
      else if (char === '"') inString = false;
      continue;
    }
    if (char === '"') {
      inString = true;
      out += char;
    } else if (char === ' ' || char === '\n' || char === '\r' || char === '\t') {
      // Dropped: the structural tokens get their own spacing.
    } else if (char === '{' || char === '[') out += `${char} `;
    else if (char === '}' || char === ']') out += ` ${char}`;
    else if (char === ',' || char === ':') out += ` ${char} `;
    else out += char;
  }
  return `${out}\n`;
}

/** One digit changed (the last one), so a payload validator still accepts the tampered body. */
function tampered(body: string): string {
  for (let i = body.length - 1; i >= 0; i--) {
    const code = body.charCodeAt(i);
    if (code >= 48 && code <= 57) return `${body.slice(0, i)}${(code - 48 + 1) % 10}${body.slice(i + 1)}`;
  }
  return `${body} `;
}

export function preview(text: string): string {
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text;
}

/** One valid request, changed after signing (the refused cases). */
async function changed(context: CaseContext, change: (request: SignedOutgoing) => Outgoing): Promise<Built> {
  return { requests: [change(await context.signed(context.body))] };
}

/**
 * How each case of {@link CHECK_CASES} builds its requests and judges its answers. A `Record`
 * over the ids, so a case added to the table without its runner does not compile.
 */
const RUNNERS: Record<CheckCaseId, { build: (context: CaseContext) => Promise<Built>; judge: Judge }> = {
  valid: { build: async (c) => ({ requests: [await c.signed(c.body)] }), judge: single('accept') },

  // The sender signs with its current key, the first one; during a rotation it signs with all.
  'rotation-all-keys': { build: async (c) => ({ requests: [await c.signed(c.body, { signer: c.signers.all })] }), judge: single('accept') },

  'rotation-new-key-first': {
    build: async (c) => {
      const valid = await c.signed(c.body);
      const ahead = await c.signers.unknown.sign({ body: c.body, id: valid.id, timestamp: valid.timestamp });
      // A sender that rotated before the receiver did signs with its new key first (contract:
      // "any secret matching any v1 entry passes"); a receiver reading only the first entry fails.
      return { requests: [{ ...valid, headers: { ...valid.headers, 'webhook-signature': `${ahead.signature} ${valid.signature}` } }] };
    },
    judge: single('accept'),
  },

  'rotation-second-key': {
    build: async (c) =>
      c.signers.second === undefined
        ? notObservable('one secret given: pass the previous and the current one to test rotation')
        : { requests: [await c.signed(c.body, { signer: c.signers.second })] },
    judge: single('accept'),
  },

  'json-formatting': {
    build: async (c) => {
      if (c.userBody !== undefined && !c.bodyIsJson) return notObservable('the body given is not JSON');
      return { requests: [await c.signed(c.userBody === undefined ? FORMATTING_BODY : respaced(c.userBody), { type: 'application/json' })] };
    },
    judge: single('accept'),
  },

  'non-ascii': {
    build: async (c) => {
      const requests = [await c.signed(NON_ASCII_BODY, { type: 'application/json; charset=utf-8' })];
      if (c.userBody === undefined) return { requests };
      // A made-up payload: an endpoint that validates its own events may refuse it for that.
      return { requests, security: false, judge: reported('accepted', 'refused (the payload is made up, so this is not judged when --body-file is given)') };
    },
    judge: single('accept'),
  },

  'non-json': {
    build: async (c) => ({ requests: [await c.signed(NON_JSON_BODY, { type: 'text/plain; charset=utf-8' })] }),
    judge: reported('accepted', 'refused: the standard lets a receiver refuse a body it cannot use'),
  },

  'empty-body': {
    build: async (c) => {
      const { 'content-type': _, ...headers } = (await c.signed('')).headers;
      return { requests: [{ headers, body: '' }] };
    },
    judge: reported('accepted', 'refused: the standard lets a receiver refuse an empty body'),
  },

  'svix-headers': {
    build: (c) =>
      changed(c, (request) => ({
        ...request,
        headers: {
          'content-type': request.headers['content-type']!,
          'svix-id': request.id,
          'svix-timestamp': String(request.timestamp),
          'svix-signature': request.signature,
        },
      })),
    judge: reported('accepted (reads svix-* names too)', 'refused: the endpoint reads only webhook-* names, which the standard allows'),
  },

  'tampered-body': { build: (c) => changed(c, (request) => ({ ...request, body: tampered(c.body) })), judge: single('refuse') },

  'tampered-id': { build: (c) => changed(c, (request) => ({ ...request, headers: { ...request.headers, 'webhook-id': c.newId() } })), judge: single('refuse') },

  'tampered-timestamp': {
    build: (c) => changed(c, (request) => ({ ...request, headers: { ...request.headers, 'webhook-timestamp': String(request.timestamp - 1) } })),
    judge: single('refuse'),
  },

  'unknown-key': { build: async (c) => ({ requests: [await c.signed(c.body, { signer: c.signers.unknown })] }), judge: single('refuse') },

  'unknown-tenant': {
    build: async (c) => {
      if (c.unknownTenantUrl === undefined) return notObservable('no unknown-tenant URL given (unknownTenantUrl, --unknown-tenant-url)');
      return { requests: [{ ...(await c.signed(c.body)), url: c.unknownTenantUrl }] };
    },
    judge: unknownTenantJudge,
  },

  'cross-tenant': {
    build: async (c) => {
      const other = c.tenants[0];
      if (other === undefined) return notObservable("no other tenant given (tenants, --tenant): there is no other tenant's URL to send to");
      // One secret given for both: the delivery verifies there by design (the report warns).
      if (other.shared) return notObservable("the other tenant was given one of this tenant's secrets, so it verifies there (see the warning)");
      return { requests: [{ ...(await c.signed(c.body)), url: other.url }] };
    },
    judge: single('refuse'),
  },

  unsigned: {
    build: async (c) => {
      const { 'webhook-signature': _, ...headers } = (await c.signed(c.body)).headers;
      const requests = [{ headers, body: c.body }];
      return c.unsignedPolicy === 'accept' ? { requests, expected: '2xx (unsigned accepted)', judge: single('accept') } : { requests };
    },
    judge: single('refuse'),
  },

  'stale-past': { build: async (c) => ({ requests: [await c.signed(c.body, { timestamp: c.nowSeconds() - c.toleranceSeconds - 60 })] }), judge: single('refuse') },

  'stale-future': { build: async (c) => ({ requests: [await c.signed(c.body, { timestamp: c.nowSeconds() + c.toleranceSeconds + 60 })] }), judge: single('refuse') },

  milliseconds: {
    build: async (c) => {
      const ms = c.now();
      return { requests: [await c.signed(c.body, { timestamp: ms - (ms % 1000) + 123 })] };
    },
    judge: single('refuse'),
  },

  'reserialised-body': {
    build: async (c) => {
      // The compact form a parse and re-serialise produces; sent pretty. A receiver that verifies
      // its own re-serialisation instead of the raw bytes finds the signature "valid".
      const parsed: unknown = JSON.parse(c.bodyIsJson ? c.body : DEFAULT_BODY);
      const compact = JSON.stringify(parsed);
      const pretty = JSON.stringify(parsed, null, 2);
      const request = await c.signed(compact, { type: 'application/json' });
      return { requests: [{ ...request, body: pretty === compact ? ` ${compact}` : pretty }] };
    },
    judge: single('refuse'),
  },

  'many-entries': {
    build: (c) =>
      changed(c, (request) => {
        const entries: string[] = [];
        for (let i = 0; i < MANY_ENTRIES; i++) entries.push(i % 8 === 7 ? `v1a,${base64Encode(randomBytes(64))}` : `v1,${base64Encode(randomBytes(32))}`);
        return { ...request, headers: { ...request.headers, 'webhook-signature': entries.join(' ') } };
      }),
    judge: single('refuse'),
  },

  oversized: {
    build: async (c) => {
      const head = '{"type":"check.oversized","padding":"';
      const tail = '"}';
      const fill = c.oversizedBytes - head.length - tail.length;
      const request = await c.signed(`${head}${'a'.repeat(fill)}${tail}`, { type: 'application/json' });
      return { requests: [{ ...request, curlData: `{ printf '%s' ${shellQuote(head)}; head -c ${fill} /dev/zero | tr '\\0' a; printf '%s' ${shellQuote(tail)}; }` }] };
    },
    judge: oversizedJudge,
  },

  duplicate: {
    build: async (c) => {
      const request = await c.signed(c.body);
      return { requests: [request, request] };
    },
    judge: twice('second copy'),
  },

  retry: {
    build: async (c) => {
      // The contract: "a retry carries the same id with a new timestamp and signature".
      const first = await c.signed(c.body, { timestamp: c.nowSeconds() - 1 });
      return { requests: [first, await c.signed(c.body, { id: first.id, timestamp: first.timestamp + 1 })] };
    },
    judge: twice('retry'),
  },

  concurrent: {
    build: async (c) => {
      const request = await c.signed(c.body);
      return { requests: Array.from({ length: c.concurrency }, () => request) };
    },
    judge: concurrentJudge,
  },

  timing: { build: async () => ({ requests: [] }), judge: timingJudge },
};

/** The battery: each case's description and expectation, with how it is built and judged. */
export const CASES = CHECK_CASES.map((c) => ({ ...c, ...RUNNERS[c.id] }));

/**
 * Section 1: one verification per payload size, Node, one secret.
 *
 * - ours: `createVerifier({ secrets }).verify({ headers, body })`;
 * - `standardwebhooks` and `svix` (`new Webhook(secret).verify(body, headers)`), which parse the
 *   body as JSON when it verifies; `standardwebhooks` with `jsonParse: false` as well, to show
 *   their verification alone;
 * - the floor: `createHmac('sha256', key).update(id.timestamp.body).digest('base64')` over a
 *   buffer built beforehand, the least any verifier must do. `digest('base64')` rather than
 *   `digest()`: on Node the raw digest costs more (it allocates a Buffer), and the floor is the
 *   cheapest way to the MAC. The `digest()` form is shown too;
 * - the practical baseline: the hand-written `createHmac` + `timingSafeEqual` check with header
 *   parsing (fixtures.ts).
 *
 * Ours returns the webhook without parsing it (`webhook.json()` parses on demand), so "ours +
 * json()" is there too, for a like-for-like reading against the two libraries.
 */

import { createHmac } from 'node:crypto';
import type { Verifier } from '../src/verify.ts';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { handWrittenVerify, jsonBody, KiB, MiB, newSecret, signedMessage, SIZES, sizeLabel } from './fixtures.ts';
import { fixed, ratioText, table, timeSummary, timeText, type BenchConfig, type SectionReport, type TargetResult } from './report.ts';
import { microTiming, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const OURS = 'ours';
const OURS_JSON = 'ours + json()';
const FLOOR = "floor: bare HMAC, digest('base64')";
const FLOOR_RAW = 'bare HMAC, digest()';
const HAND = 'hand-written createHmac + timingSafeEqual';
const STANDARD = 'standardwebhooks';
const STANDARD_RAW = 'standardwebhooks, jsonParse: false';
const SVIX = 'svix';

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink = 0;

function assertTrue(ok: boolean, what: string): void {
  if (!ok) throw new Error(`benchmark fixture rejected by ${what}: the comparison would be meaningless`);
}

export async function runVerify(config: BenchConfig): Promise<SectionReport> {
  const { secret, key } = newSecret();
  const verifier = config.pkg.index.createVerifier({ secrets: secret });
  const standard = new StandardWebhook(secret);
  const svix = new SvixWebhook(secret);
  const sizes = config.quick ? [KiB] : SIZES;

  const rows: string[][] = [];
  const targets: TargetResult[] = [];
  for (const size of sizes) {
    const message = signedMessage(key, jsonBody(size));
    const { headers, body, signedContent } = message;
    const input = { headers, body };
    const stringHeaders = headers as Record<string, string>;

    // Every candidate must accept the fixture before it is timed.
    assertTrue((await verifier.verify(input)).id === message.id, OURS);
    assertTrue(handWrittenVerify(headers, body, key), HAND);
    assertTrue(typeof standard.verify(body, stringHeaders) === 'object', STANDARD);
    assertTrue(typeof svix.verify(body, stringHeaders) === 'object', SVIX);

    const candidates: Candidate[] = [
      {
        name: OURS,
        async run(n) {
          for (let i = 0; i < n; i++) sink ^= (await verifier.verify(input)).body.length;
        },
      },
      {
        name: OURS_JSON,
        async run(n) {
          for (let i = 0; i < n; i++) sink ^= (await verifier.verify(input)).json<{ type: string }>().type.length;
        },
      },
      {
        name: FLOOR,
        run(n) {
          for (let i = 0; i < n; i++) sink ^= createHmac('sha256', key).update(signedContent).digest('base64').length;
        },
      },
      {
        name: FLOOR_RAW,
        run(n) {
          for (let i = 0; i < n; i++) sink ^= createHmac('sha256', key).update(signedContent).digest()[0]!;
        },
      },
      {
        name: HAND,
        run(n) {
          for (let i = 0; i < n; i++) sink ^= handWrittenVerify(headers, body, key) ? 1 : 0;
        },
      },
      {
        name: STANDARD,
        run(n) {
          for (let i = 0; i < n; i++) sink ^= (standard.verify(body, stringHeaders) as { type: string }).type.length;
        },
      },
      {
        name: STANDARD_RAW,
        run(n) {
          for (let i = 0; i < n; i++) sink ^= standard.verify(body, stringHeaders, { jsonParse: false }) === undefined ? 1 : 0;
        },
      },
      {
        name: SVIX,
        run(n) {
          for (let i = 0; i < n; i++) sink ^= (svix.verify(body, stringHeaders) as { type: string }).type.length;
        },
      },
    ];

    const timings = await timeInterleaved(candidates, microTiming(config.quick));
    const floor = series(timings, FLOOR);
    const ours = series(timings, OURS);
    for (const candidate of candidates) {
      const own = series(timings, candidate.name);
      rows.push([
        sizeLabel(size),
        candidate.name,
        timeSummary(summarize(own)),
        ratioText(summarize(ratios(own, floor))),
        candidate.name === OURS ? '1' : ratioText(summarize(ratios(own, ours))),
      ]);
    }

    const oursOverFloor = summarize(ratios(ours, floor));
    const standardOverOurs = summarize(ratios(series(timings, STANDARD), ours));
    const context = (a: string, b: string) =>
      `${timeText(summarize(series(timings, a)).median)} vs ${timeText(summarize(series(timings, b)).median)}`;
    if (size === KiB || size === MiB) {
      const overHand = summarize(ratios(ours, series(timings, HAND)));
      targets.push({
        what: `our verify ÷ hand-written check, ${sizeLabel(size)}`,
        target: '≤ 1.05',
        measured: ratioText(overHand),
        context: context(OURS, HAND),
        pass: overHand.median <= 1.05,
      });
      const limit = size === KiB ? 1.5 : 1.05;
      targets.push({
        what: `our verify ÷ bare HMAC, ${sizeLabel(size)}`,
        target: `≤ ${limit}`,
        measured: ratioText(oursOverFloor),
        context: context(OURS, FLOOR),
        pass: oursOverFloor.median <= limit,
      });
      const least = size === KiB ? 4 : 10;
      targets.push({
        what: `\`standardwebhooks\` verify ÷ ours, ${sizeLabel(size)}`,
        target: `≥ ${least}`,
        measured: ratioText(standardOverOurs, 1),
        context: `${context(STANDARD, OURS)}; ÷ (ours + json()) ${fixed(summarize(ratios(series(timings, STANDARD), series(timings, OURS_JSON))).median, 1)}`,
        pass: standardOverOurs.median >= least,
      });
    }
  }

  const rejections = await runForged(config, verifier, key);
  targets.push(rejections.target);

  const body = [
    'Time per verification, one secret, JSON bodies, headers as Node presents them (eight headers, lower case). ' +
      '"÷ floor" is each candidate\'s time over the bare HMAC of a pre-built `id.timestamp.body` buffer, digested to ' +
      'base64 (on Node the cheapest form: `digest()` allocates a Buffer and costs more, see its row); "÷ ours" is over ' +
      '`createVerifier().verify` of the built package.',
    '',
    table(['size', 'candidate', 'time per call', '÷ floor', '÷ ours'], rows),
    '',
    '`standardwebhooks` and `svix` parse the body as JSON inside `verify` (their default); ours parses only when ' +
      '`webhook.json()` is called, hence the "ours + json()" row. The hand-written check lacks what the package adds ' +
      '(malformed-header errors, rotation, `svix-*` names, typed errors).',
    '',
    rejections.body,
  ].join('\n');
  return { id: 'verify', title: '1. Verify, per payload size', body, targets };
}

const FORGED = 'ours, refusing a forged `v1` signature';
const HAND_FORGED = 'hand-written check, refusing it';
const FORGED_FLOOR = "bare HMAC of the same content, digest('base64')";

/**
 * A forged request, 1 KiB, one key: a well-formed, fresh `v1` entry that no key produced. Ours
 * rejects with `SIGNATURE_MISMATCH` (awaited and caught, as an app does); the baseline is the
 * bare check of the same request (the hand-written `createHmac` + `timingSafeEqual`, which
 * returns false), the bare HMAC for context.
 */
async function runForged(config: BenchConfig, verifier: Verifier, key: Buffer): Promise<{ body: string; target: TargetResult }> {
  const message = signedMessage(key, jsonBody(KiB));
  const headers = { ...message.headers, 'webhook-signature': `v1,${Buffer.alloc(32, 0x5a).toString('base64')}` };
  const { body, signedContent } = message;
  const input = { headers, body };
  const code = await verifier.verify(input).then(
    () => 'accepted',
    (error: unknown) => (error as { code?: string }).code,
  );
  if (code !== 'SIGNATURE_MISMATCH') throw new Error(`the forged fixture got ${String(code)}, not SIGNATURE_MISMATCH`);
  if (handWrittenVerify(headers, body, key)) throw new Error('the hand-written check accepted the forged fixture');

  const candidates: Candidate[] = [
    {
      name: FORGED,
      async run(n) {
        for (let i = 0; i < n; i++) {
          try {
            await verifier.verify(input);
          } catch (error) {
            sink ^= (error as { status: number }).status;
          }
        }
      },
    },
    {
      name: HAND_FORGED,
      run(n) {
        for (let i = 0; i < n; i++) sink ^= handWrittenVerify(headers, body, key) ? 1 : 2;
      },
    },
    {
      name: FORGED_FLOOR,
      run(n) {
        for (let i = 0; i < n; i++) sink ^= createHmac('sha256', key).update(signedContent).digest('base64').length;
      },
    },
  ];
  const timings = await timeInterleaved(candidates, microTiming(config.quick));
  const hand = series(timings, HAND_FORGED);
  const floor = series(timings, FORGED_FLOOR);
  const rows = candidates.map((c) => {
    const own = series(timings, c.name);
    return [c.name, timeSummary(summarize(own)), ratioText(summarize(ratios(own, hand))), ratioText(summarize(ratios(own, floor)))];
  });
  const forged = series(timings, FORGED);
  const overHand = summarize(ratios(forged, hand));
  const median = (name: string) => timeText(summarize(series(timings, name)).median);
  return {
    body: [
      '### A forged request, 1 KiB, one key',
      '',
      'A fresh, well-formed `v1` entry that no key produced. Ours rejects with `SIGNATURE_MISMATCH` (awaited and caught); ' +
        'the bare check is the hand-written `createHmac` + `timingSafeEqual` of the same request, which returns false.',
      '',
      table(['candidate', 'time per call', '÷ bare check', '÷ bare HMAC'], rows),
    ].join('\n'),
    target: {
      what: 'forged `v1` request ÷ bare HMAC check of it, 1 KiB, one key',
      target: '≤ 1.3',
      measured: ratioText(overHand),
      context: `${median(FORGED)} vs ${median(HAND_FORGED)}; ÷ bare HMAC digest ${ratioText(summarize(ratios(forged, floor)))}`,
      pass: overHand.median <= 1.3,
    },
  };
}

/**
 * Section 11: what idempotency adds to a verification, in one process, with the memory store:
 *
 * - verify alone: `createVerifier().verify` of a signed 1 KiB message (the baseline);
 * - claim + complete: `receiver.claim` of the same kind of message, then `claim.complete()`, the
 *   handler's work left out (what an adapter does around it);
 * - handle: `receiver.handle` with a handler that does nothing, the whole delivery.
 *
 * Every call gets a message with an id of its own, signed in `prepare` (untimed), so each claim
 * is a first delivery that the store records; the verify baseline gets the same messages. The
 * store (its default bound) is filled before anything is timed, so each claim forgets the oldest
 * completed id to make room, as a busy receiver's does.
 */

import { BareIdMap } from './bare-map.ts';
import { freshCandidate, jsonBody, KiB, newSecret, signedMessage, type SignedMessage } from './fixtures.ts';
import { ratioText, table, timeSummary, timeText, type BenchConfig, type SectionReport } from './report.ts';
import { microTiming, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const VERIFY = 'verify alone';
const CLAIM = 'claim + complete';
const HANDLE = 'handle, a handler that does nothing';
const BARE_MAP = 'verify + a bare Map: look up, forget the oldest, insert, mark done';

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink = 0;

export async function runReceiver(config: BenchConfig): Promise<SectionReport> {
  const { createReceiver, createVerifier, memoryStore, DEFAULT_MEMORY_STORE_MAX } = config.pkg.index;
  const { secret, key } = newSecret();
  const body = jsonBody(KiB);
  const verifier = createVerifier({ secrets: secret });
  const max = config.quick ? 5_000 : DEFAULT_MEMORY_STORE_MAX;
  const store = memoryStore({ max });
  const receiver = createReceiver({ secrets: secret, idempotency: { store } });
  let serial = 0;
  const nextId = () => `msg_${(serial++).toString(36).padStart(10, '0')}`;

  // Filled to its bound first (untimed), so every timed claim finds a full store and forgets the
  // oldest completed id to make room: a busy receiver's steady state.
  for (let i = 0; i < max; i++) {
    const { headers, body: raw } = signedMessage(key, body, nextId());
    const claim = await receiver.claim({ headers, body: raw });
    if (claim.outcome !== 'acquired') throw new Error(`filling the store: a fresh id was answered ${claim.outcome}`);
    await claim.complete();
  }
  if (store.usage().signed.completed !== max) throw new Error('the store did not fill to its bound');

  // The least any bounded in-process deduplication adds to a verification (bare-map.ts), full to
  // the same bound.
  const bare = new BareIdMap(max);
  for (let i = 0; i < max; i++) bare.claim(`bare_${i}`);

  const fresh = (name: string, run: (message: SignedMessage) => Promise<void>): Candidate => freshCandidate(name, key, body, nextId, run);

  const candidates: Candidate[] = [
    fresh(VERIFY, async ({ headers, body: raw }) => {
      sink ^= (await verifier.verify({ headers, body: raw })).id.length;
    }),
    fresh(CLAIM, async ({ headers, body: raw }) => {
      const claim = await receiver.claim({ headers, body: raw });
      if (claim.outcome !== 'acquired') throw new Error(`a fresh id was answered ${claim.outcome}: the comparison would be meaningless`);
      await claim.complete();
      sink ^= claim.webhook.id.length;
    }),
    fresh(BARE_MAP, async ({ headers, body: raw }) => {
      const { id } = await verifier.verify({ headers, body: raw });
      if (!bare.claim(id)) throw new Error('a fresh id was found in the bare map: the comparison would be meaningless');
      bare.complete(id);
      sink ^= id.length;
    }),
    fresh(HANDLE, async ({ headers, body: raw }) => {
      const result = await receiver.handle({ headers, body: raw }, () => undefined);
      if (result.outcome !== 'processed') throw new Error(`a fresh id was answered ${result.outcome}: the comparison would be meaningless`);
      sink ^= result.webhook.id.length;
    }),
  ];
  const timings = await timeInterleaved(candidates, microTiming(config.quick));
  await receiver.close();
  const base = series(timings, VERIFY);
  const rows = candidates.map((c) => [c.name, timeSummary(summarize(series(timings, c.name))), c.name === VERIFY ? '1' : ratioText(summarize(ratios(series(timings, c.name), base)))]);
  const claimOverVerify = summarize(ratios(series(timings, CLAIM), base));
  const claimOverFloor = summarize(ratios(series(timings, CLAIM), series(timings, BARE_MAP)));
  const median = (name: string) => timeText(summarize(series(timings, name)).median);

  const text = [
    `Time per delivery, 1 KiB JSON, one \`whsec_\` secret, the memory store with a bound of ${max.toLocaleString('en-US')} ids, filled before timing (so each claim also forgets the oldest completed id). Every call gets a message ` +
      'with an id of its own, signed beforehand (untimed), so each claim is a first delivery; the baseline verifies the same kind ' +
      'of message. "Claim + complete" is what an adapter adds around the handler; "handle" is the whole delivery. ' +
      `The bare-Map row is a floor, not a store: a \`Map\` of ${max.toLocaleString('en-US')} ids where each new id is looked up, ` +
      'the oldest forgotten, the new one inserted and then marked done, with no locks, expiry, tokens or claim protocol. What it adds to a ' +
      'verification is the least any bounded in-process deduplication adds, so claim + complete is judged against it (like with like).',
    '',
    table(['candidate', 'time per call', '÷ verify alone'], rows),
  ].join('\n');
  return {
    id: 'receiver',
    title: '11. Receiver: claim and complete',
    body: text,
    targets: [
      {
        // Like with like: verification plus our store against verification plus the
        // bare operations of a bounded Map, not against verification alone.
        what: 'receiver claim + complete ÷ (verify + a bare Map), memory store, 1 KiB',
        target: '≤ 1.15',
        measured: ratioText(claimOverFloor),
        context: `${median(CLAIM)} vs ${median(BARE_MAP)}; ÷ verify alone ${ratioText(claimOverVerify)}; handle ${median(HANDLE)}`,
        pass: claimOverFloor.median <= 1.15,
      },
    ],
  };
}

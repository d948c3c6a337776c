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
import { BARE_MAP, CLAIM, RECEIVER_ONLY, RECEIVER_TITLE, STORE_ONLY } from './labels.ts';
import { freshCandidate, jsonBody, KiB, newSecret, signedMessage, type SignedMessage } from './fixtures.ts';
import { judged, ratioText, table, timeSummary, timeText, type BenchConfig, type SectionReport } from './report.ts';
import { microTiming, ratios, series, summarize, timeInterleaved, type Candidate } from './stats.ts';

const VERIFY = 'verify alone';
const HANDLE = 'handle, a handler that does nothing';

/** Keeps results alive (a module variable is never optimised away), so no timed call is either. */
let sink = 0;

/** The package's index, as the bench builds it. */
type Index = BenchConfig['pkg']['index'];

/** Section 11's candidates over one set-up, and how to close its receivers. */
export interface ReceiverBench {
  candidates: Candidate[];
  /** The memory store's bound the stores were filled to. */
  max: number;
  close(): Promise<void>;
}

/**
 * Section 11's set-up: a receiver whose memory store is full to `max`, the bare Map and the second
 * store filled to the same bound, and one candidate per row (bench/profile-pair.ts profiles the
 * same ones).
 */
export async function receiverBench(pkg: Index, max: number): Promise<ReceiverBench> {
  const { createReceiver, createVerifier, memoryStore, DEFAULT_RENEWED_LOCK_SECONDS, DEFAULT_TTL_SECONDS } = pkg;
  const { secret, key } = newSecret();
  const body = jsonBody(KiB);
  const verifier = createVerifier({ secrets: secret });
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

  // Where claim + complete's cost over the floor goes, one part at a time: the receiver's claim
  // protocol with the bare Map in place of a store, and the store's records without the receiver.
  const unstored = createReceiver({ secrets: secret, idempotency: false });
  const direct = memoryStore({ max });
  // The receiver's key of a signed id in the default namespace, and its defaults with this store.
  const keyOf = (id: string) => `default:s:${id}`;
  const LOCK_MS = DEFAULT_RENEWED_LOCK_SECONDS * 1000;
  const TTL_MS = DEFAULT_TTL_SECONDS * 1000;
  for (let i = 0; i < max; i++) {
    const key = keyOf(`direct_${i}`);
    const claimed = await direct.claim(key, LOCK_MS);
    if (claimed.status !== 'acquired' || !(await direct.complete(key, claimed.token, TTL_MS))) throw new Error('filling the second store failed');
  }

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
    fresh(RECEIVER_ONLY, async ({ headers, body: raw }) => {
      const claim = await unstored.claim({ headers, body: raw });
      const { id } = claim.webhook;
      if (!bare.claim(id)) throw new Error('a fresh id was found in the bare map: the comparison would be meaningless');
      await claim.complete();
      bare.complete(id);
      sink ^= id.length;
    }),
    fresh(STORE_ONLY, async ({ headers, body: raw }) => {
      const key = keyOf((await verifier.verify({ headers, body: raw })).id);
      const claimed = await direct.claim(key, LOCK_MS);
      if (claimed.status !== 'acquired') throw new Error(`a fresh id was answered ${claimed.status}: the comparison would be meaningless`);
      if (!(await direct.complete(key, claimed.token, TTL_MS))) throw new Error('a completion of a live claim was refused');
      sink ^= key.length;
    }),
    fresh(HANDLE, async ({ headers, body: raw }) => {
      const result = await receiver.handle({ headers, body: raw }, () => undefined);
      if (result.outcome !== 'processed') throw new Error(`a fresh id was answered ${result.outcome}: the comparison would be meaningless`);
      sink ^= result.webhook.id.length;
    }),
  ];
  const close = async () => {
    await receiver.close();
    await unstored.close();
  };
  return { candidates, max, close };
}

export async function runReceiver(config: BenchConfig): Promise<SectionReport> {
  const { candidates, max, close } = await receiverBench(config.pkg.index, config.quick ? 5_000 : config.pkg.index.DEFAULT_MEMORY_STORE_MAX);
  const timings = await timeInterleaved(candidates, microTiming(config.quick));
  await close();
  const base = series(timings, VERIFY);
  const floor = series(timings, BARE_MAP);
  const rows = candidates.map((c) => [
    c.name,
    timeSummary(summarize(series(timings, c.name))),
    c.name === VERIFY ? '1' : ratioText(summarize(ratios(series(timings, c.name), base))),
    c.name === BARE_MAP ? '1' : ratioText(summarize(ratios(series(timings, c.name), floor))),
  ]);
  const claimOverVerify = summarize(ratios(series(timings, CLAIM), base));
  const claimOverFloor = summarize(ratios(series(timings, CLAIM), floor));
  const median = (name: string) => timeText(summarize(series(timings, name)).median);

  const text = [
    `Time per delivery, 1 KiB JSON, one \`whsec_\` secret, the memory store with a bound of ${max.toLocaleString('en-US')} ids, filled before timing (so each claim also forgets the oldest completed id). Every call gets a message ` +
      'with an id of its own, signed beforehand (untimed), so each claim is a first delivery; the baseline verifies the same kind ' +
      'of message. "Claim + complete" is what an adapter adds around the handler; "handle" is the whole delivery. ' +
      `The bare-Map row is a floor, not a store: a \`Map\` of ${max.toLocaleString('en-US')} ids where each new id is looked up, ` +
      'the oldest forgotten, the new one inserted and then marked done, with no locks, expiry, tokens or claim protocol. What it adds to a ' +
      'verification is the least any bounded in-process deduplication adds, so claim + complete is judged against it (like with like). ' +
      'Two rows split what claim + complete adds to that floor: the receiver\'s claim protocol with the bare Map standing in for the store ' +
      '(a claim object, its handler context, the outcome, an awaited completion), and the memory store called directly after a ' +
      'verification, through its public API (two awaited calls; a record per id with its 128-bit token and its expiry, in a second ' +
      'store filled to the same bound).',
    '',
    table(['candidate', 'time per call', '÷ verify alone', '÷ verify + a bare Map'], rows),
  ].join('\n');
  return {
    id: 'receiver',
    title: RECEIVER_TITLE,
    body: text,
    targets: [
      {
        // Like with like: verification plus our store against verification plus the
        // bare operations of a bounded Map, not against verification alone.
        what: 'receiver claim + complete ÷ (verify + a bare Map), memory store, 1 KiB',
        target: '≤ 1.15',
        ...judged(claimOverFloor, '≤', 1.15),
        context: `${median(CLAIM)} vs ${median(BARE_MAP)}; ÷ verify alone ${ratioText(claimOverVerify)}; handle ${median(HANDLE)}`,
      },
    ],
  };
}

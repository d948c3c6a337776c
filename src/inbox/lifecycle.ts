/**
 * What every engine keeps about its own workers: the ones it started (so `inbox.close()` can close
 * those still running) and the stores their claims live in (so a dead letter whose handler had in
 * fact succeeded is neither listed nor retried). Internal: engines use it.
 */

import type { IdempotencyStore } from '../stores/types.ts';
import { readJob } from '../job-format.ts';
import type { DeadLetter, InboxWorker, WorkOptions } from './types.ts';
import { processedIn, type JobRunner } from './worker.ts';

/** How many claims a dead-letter listing checks at once. */
const PROBES_AT_ONCE = 8;

/** How an engine stops one worker (see `JobRunner.close`). */
export interface EngineStop {
  stop(): Promise<void>;
  force(): Promise<void>;
}

export class WorkerStores {
  readonly #factory: string;
  /** The inbox's `idempotency.store`: the default of its workers. */
  readonly #store: IdempotencyStore | undefined;
  /** Every store a claim of this inbox's jobs may be completed in, with how long it keeps one. */
  readonly #stores = new Map<IdempotencyStore, number>();
  readonly #running = new Set<InboxWorker>();
  #closed: Promise<void> | undefined;

  /** `retentionMs`: how long the engine keeps a dead letter (the ids' time in the inbox's own store). */
  constructor(factory: string, idempotency: { store?: IdempotencyStore } | undefined, retentionMs: number) {
    if (idempotency !== undefined && (typeof idempotency !== 'object' || idempotency === null)) throw new TypeError(`${factory} idempotency must be an object: { store }`);
    const store = idempotency?.store;
    if (store !== undefined) {
      for (const method of ['claim', 'complete', 'release'] as const) {
        if (typeof (store as Partial<IdempotencyStore> | null)?.[method] !== 'function') throw new TypeError(`${factory} idempotency.store must implement ${method}()`);
      }
      this.#stores.set(store, retentionMs);
    }
    this.#factory = factory;
    this.#store = store;
  }

  /** Throws once the inbox is closed. */
  checkOpen(): void {
    if (this.#closed !== undefined) throw new Error(`${this.#factory}: the inbox is closed, so it starts no worker`);
  }

  /** A worker's options, with the inbox's store as its default. */
  optionsOf(options: WorkOptions | undefined): WorkOptions | undefined {
    if (this.#store === undefined || options?.idempotency?.store !== undefined) return options;
    if (options !== undefined && (typeof options !== 'object' || options === null)) return options;
    return { ...options, idempotency: { ...options?.idempotency, store: this.#store } };
  }

  /** Remembers a runner's store (for consumers the runtime runs, with nothing to close). */
  watch(runner: JobRunner): void {
    this.#stores.set(runner.store, Math.max(this.#stores.get(runner.store) ?? 0, runner.ttlMs));
  }

  /** A started worker: closed once however often it is asked, and by `close()` if still running. */
  async add(runner: JobRunner, engine: EngineStop): Promise<InboxWorker> {
    let closing: Promise<void> | undefined;
    const worker: InboxWorker = {
      close: (options) => {
        closing ??= runner.close(options, engine).finally(() => this.#running.delete(worker));
        return closing;
      },
    };
    if (this.#closed !== undefined) {
      // The inbox closed while this worker was starting.
      await worker.close();
      this.checkOpen();
    }
    this.watch(runner);
    this.#running.add(worker);
    return worker;
  }

  /**
   * Whether the job in `data` was processed: its claim is completed in one of the stores. `false`
   * when that is not known (no store, data that is not a job, a store that failed): the worker's
   * own claim still skips it when it runs.
   */
  async processed(data: unknown): Promise<boolean> {
    if (this.#stores.size === 0) return false;
    let job;
    try {
      job = readJob(data);
    } catch {
      return false;
    }
    for (const [store, ttlMs] of this.#stores) {
      try {
        if (await processedIn(store, job, ttlMs)) return true;
      } catch {
        // Not known from this store: listed (or retried), and the worker's claim decides.
      }
    }
    return false;
  }

  /** The dead letters whose handler never succeeded, in their order. */
  async unprocessed(letters: DeadLetter[]): Promise<DeadLetter[]> {
    if (this.#stores.size === 0) return letters;
    const done = new Array<boolean>(letters.length).fill(false);
    let next = 0;
    const lane = async () => {
      while (next < letters.length) {
        const index = next++;
        done[index] = await this.processed(letters[index]!.job);
      }
    };
    await Promise.all(Array.from({ length: Math.min(PROBES_AT_ONCE, letters.length) }, lane));
    return letters.filter((_, index) => !done[index]);
  }

  /** Closes the workers still running; once. */
  close(): Promise<void> {
    this.#closed ??= Promise.all([...this.#running].map((worker) => worker.close())).then(() => undefined);
    return this.#closed;
  }
}

import type { Logger } from '../app/logger.ts';

export interface FetchWatchOptions {
  shards: number;
  /** jobs of the shard waiting to be fetched (BullMQ's wait and prioritized lists) */
  waiting(shard: number): Promise<number>;
  /** replaces the shard's fetchers with new ones on new connections */
  restart(shard: number): Promise<void>;
  log: Logger;
  /** how often the shards are looked at */
  checkMs?: number;
  /** how long jobs may wait in a shard whose fetchers start none and run none before they are replaced */
  stuckMs?: number;
}

const CHECK_MS = 2000;
const STUCK_MS = 6000;

/**
 * BullMQ workers can stop fetching after a Redis Cluster master fails over (taskforcesh/bullmq#648, #3088): the queue
 * takes jobs and nobody takes them out, with no error. Its maintainers' advice is to replace such a worker. This
 * watch does that per queue shard: a shard whose jobs have waited `stuckMs` while none of its fetchers started a job
 * and none is running one gets fresh fetchers (again each `stuckMs` while that lasts). A shard that is merely busy
 * always has a job running, so it is left alone; a queue that is empty is not stuck.
 */
export class FetchWatch {
  readonly #o: Required<FetchWatchOptions>;
  /** per shard: jobs its fetchers run now, when they last started one, since when jobs have waited unfetched */
  readonly #shards: { running: number; startedAt: number; waitingSince: number | null }[];
  #timer: NodeJS.Timeout | null = null;
  #checking = false;

  constructor(o: FetchWatchOptions) {
    this.#o = { checkMs: CHECK_MS, stuckMs: STUCK_MS, ...o };
    this.#shards = Array.from({ length: o.shards }, () => ({ running: 0, startedAt: Date.now(), waitingSince: null }));
  }

  /** A fetcher of `shard` started a job; the returned function says it ended. */
  started(shard: number): () => void {
    const s = this.#shards[shard];
    s.running++;
    s.startedAt = Date.now();
    s.waitingSince = null;
    let ended = false;
    return () => {
      if (!ended) s.running--;
      ended = true;
    };
  }

  start(): void {
    this.#timer = setInterval(() => void this.#check(), this.#o.checkMs);
    this.#timer.unref();
  }

  async #check(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      for (let shard = 0; shard < this.#shards.length; shard++) {
        const s = this.#shards[shard];
        if (s.running > 0) continue;
        const waiting = await this.#o.waiting(shard).catch(() => 0); // Redis away: the outage log tells it
        const now = Date.now();
        if (waiting === 0) {
          s.waitingSince = null;
          continue;
        }
        s.waitingSince ??= now;
        if (now - s.waitingSince < this.#o.stuckMs || now - s.startedAt < this.#o.stuckMs) continue;
        this.#o.log.warn({ shard, waiting, waitedMs: now - s.waitingSince }, "a queue shard's jobs wait and its fetchers take none: they are replaced");
        s.waitingSince = null;
        s.startedAt = now;
        await this.#o
          .restart(shard)
          .catch((err: Error) => this.#o.log.error({ shard, err: err.message }, 'the fetchers of a queue shard could not be replaced'));
      }
    } finally {
      this.#checking = false;
    }
  }

  close(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}

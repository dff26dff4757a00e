import type { Job } from 'bullmq';
import type { Logger } from '../app/logger.ts';
import { metrics } from '../app/metrics.ts';
import type { OutageLog } from '../app/outage-log.ts';
import { isTransient, transientDelayMs } from './failures.ts';
import type { DeviceBatchJob } from '../connectivity/device-jobs.ts';
import type { LocalTaker } from './queue.ts';

export interface LocalRunsOptions {
  /** requests run at once, at most; a batch that would pass it goes through the queue for any worker to fetch */
  room: number;
  /** how long a job taken locally stays out of other workers' reach; renewed while it runs (LOCAL_HANDOFF_CLAIM_MS) */
  claimMs: number;
  /** whether this worker takes batches now (not closing, its monitoring core answers) */
  accepting(): boolean;
  /** runs the batch's items and waits for their writes to reach the disk */
  run(jobId: string, batch: DeviceBatchJob): Promise<void>;
  /** the worker's store outage line, shared with the jobs it fetches */
  outage: OutageLog;
  log: Logger;
}

/**
 * LOCAL_HANDOFF: the batches the gateway beside this worker queued, run without a fetch. Each stays queued durably
 * (a delayed job, its claim renewed while it runs, so no other worker takes it) and is removed once stored; one that
 * fails is handed to the queue: due again at once, or after a delay while a store is away.
 */
export class LocalRuns implements LocalTaker {
  readonly #o: LocalRunsOptions;
  #items = 0;
  readonly #running = new Set<Promise<void>>();

  constructor(o: LocalRunsOptions) {
    this.#o = o;
  }

  claim(items: number): ReturnType<LocalTaker['claim']> {
    if (!this.#o.accepting() || this.#items + items > this.#o.room) return null;
    this.#items += items;
    let done = false;
    const release = () => {
      if (!done) this.#items -= items;
      done = true;
    };
    return {
      start: (job: Job<DeviceBatchJob, void>) => {
        const run = this.#run(job).finally(() => {
          release();
          this.#running.delete(run);
        });
        this.#running.add(run);
      },
      cancel: release,
    };
  }

  /** Resolves once every batch taken has run. */
  async idle(): Promise<void> {
    await Promise.all(this.#running);
  }

  async #run(job: Job<DeviceBatchJob, void>): Promise<void> {
    const { claimMs, log, outage } = this.#o;
    const renew = setInterval(() => {
      job.changeDelay(claimMs).catch((err: Error) => log.warn({ jobId: job.id, err: err.message }, 'the claim on a job taken locally could not be renewed'));
    }, claimMs / 3);
    let failure: unknown = null;
    try {
      await this.#o.run(job.id as string, job.data);
    } catch (err) {
      failure = err;
    } finally {
      clearInterval(renew);
    }
    if (failure === null) {
      outage.up();
      metrics.jobAttempts.inc({ outcome: 'completed' });
      // a job that stays (Redis away) runs again after the claim: its writes are idempotent
      await job
        .remove()
        .catch((err: Error) => log.warn({ jobId: job.id, err: err.message }, 'a job run locally could not be removed; it runs again after its claim'));
      return;
    }
    // the queue takes it over; its attempts count from there
    if (isTransient(failure)) {
      outage.down(failure);
      metrics.jobAttempts.inc({ outcome: 'delayed' });
      await job.changeDelay(transientDelayMs(1)).catch(() => undefined);
    } else {
      metrics.jobAttempts.inc({ outcome: 'retried' });
      log.warn({ jobId: job.id, err: (failure as Error).message }, 'device job failed; it will be retried');
      await job.promote().catch(() => undefined);
    }
  }
}

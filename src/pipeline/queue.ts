import { Queue, type DefaultJobOptions, type Job } from 'bullmq';
import type { AppContext } from '../app/context.ts';
import { newHashId } from '../app/hash-id.ts';
import { metrics } from '../app/metrics.ts';
import { bullmqErrorLogger, createRedis, type Redis } from '../app/redis.ts';
import type { DeviceBatchItem, DeviceBatchJob, DeviceEventJob, DeviceJob, DeviceJobResult } from './jobs.ts';

export const JOB_NAME = 'device-batch';

/**
 * Attempts count failures that would repeat (a value the store refuses, a bug): after the last one the job
 * is failed for good and kept in the failed set until an operator retries it (`npm run admin -- retry-failed`).
 * A store that is unavailable costs no attempt: the worker delays the job until it is back (src/pipeline/failures.ts).
 */
export const JOB_OPTIONS: DefaultJobOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 200 },
  removeOnComplete: true, // the activity log in PostgreSQL is the record of what ran
  removeOnFail: false,
};

/** Where workers publish the answers for the requests a gateway is holding. */
export const answerChannel = (gatewayId: string) => `gridgate:answers:${gatewayId}`;

export interface PublishedAnswer { itemId: string; result: DeviceJobResult }

export type WaitOutcome = { state: 'completed'; result: DeviceJobResult } | { state: 'pending' };

/** The gateways of this process by id: a worker beside them hands answers over in memory instead of through Redis. */
const localGateways = new Map<string, (answers: PublishedAnswer[]) => void>();

/**
 * Gives answers to the gateway `gatewayId` when it runs in this process (role `all`, or gateway and
 * worker together) and returns true; false means it is elsewhere and the answers go over Redis pub/sub.
 */
export function deliverLocally(gatewayId: string, answers: PublishedAnswer[]): boolean {
  const deliver = localGateways.get(gatewayId);
  if (!deliver) return false;
  deliver(answers);
  return true;
}

/**
 * A worker beside the gateway (same service, same queue) runs the batches its gateway queues without fetching them:
 * the gateway queues each batch durably as a job delayed by LOCAL_HANDOFF_CLAIM_MS, hands it over in memory, and the worker
 * removes the job once what it stored is on disk. While the worker runs it, the delay is renewed, so no other worker
 * takes it; if this process dies, the job becomes due after the delay and any worker runs it (its writes are
 * idempotent). A run that fails hands the job back to the queue (due at once, or after a delay while a store is away),
 * which retries it as any other job. This saves the fetch and finish round trips of BullMQ per batch.
 */
export interface LocalTaker {
  /** reserves room for `items` requests, or null: the job goes through the queue for any worker to fetch */
  claim(items: number): { start(job: Job<DeviceBatchJob, void>): void; cancel(): void } | null;
}

const localTakers = new WeakMap<object, LocalTaker>();

/** The worker of `owner` (the service's context) takes its gateway's batches locally; null stops that. */
export function setLocalTaker(owner: object, taker: LocalTaker | null): void {
  if (taker) localTakers.set(owner, taker);
  else localTakers.delete(owner);
}

const BATCH_MAX_ITEMS = 64;
const MAX_ADDS_IN_FLIGHT = 1;

/**
 * The gateway's side of the queue. Device requests that arrive together are queued as one
 * durable BullMQ job (a queue-level group commit: BullMQ's per-job cost is paid once per batch,
 * not once per report). Each request's answer comes back on its own over Redis pub/sub as soon
 * as the worker has stored what that request produced; a request not answered within the bound
 * stays queued and is processed anyway.
 */
export class DeviceQueue {
  readonly queue: Queue<DeviceBatchJob, void>;
  readonly gatewayId = newHashId(12);
  private readonly subscriber: Redis;
  private readonly waiters = new Map<string, (o: WaitOutcome) => void>();
  private pending: { itemId: string; job: DeviceJob; queued: { resolve(): void; reject(err: unknown): void } }[] = [];
  private timer: NodeJS.Timeout | null = null;
  private addsInFlight = 0;
  /** when the first of `pending` arrived (performance.now()) */
  private pendingSince = 0;
  private readonly ctx: AppContext;

  constructor(ctx: AppContext) {
    this.ctx = ctx;
    this.queue = new Queue(ctx.config.queueName, {
      connection: createRedis(ctx.config.redisUrl, ctx.log),
      defaultJobOptions: JOB_OPTIONS,
    });
    this.queue.on('error', bullmqErrorLogger(ctx.log, 'device queue error'));
    this.subscriber = createRedis(ctx.config.redisUrl, ctx.log);
    this.subscriber.on('message', (_channel: string, message: string) => this.answered(JSON.parse(message) as PublishedAnswer[]));
  }

  private answered(answers: PublishedAnswer[]): void {
    for (const answer of answers) this.waiters.get(answer.itemId)?.({ state: 'completed', result: answer.result });
  }

  async ready(): Promise<void> {
    await this.queue.waitUntilReady();
    await this.subscriber.subscribe(answerChannel(this.gatewayId));
    localGateways.set(this.gatewayId, (answers) => this.answered(answers));
  }

  /** Queues the job durably; resolves with its result, or `pending` when not answered within `waitMs`. Rejects when it could not be queued. */
  async addAndWait(job: DeviceJob, waitMs: number): Promise<WaitOutcome> {
    const itemId = newHashId(16);
    const outcome = new Promise<WaitOutcome>((resolve) => {
      const timer = setTimeout(() => finish({ state: 'pending' }), waitMs);
      const finish = (o: WaitOutcome) => {
        clearTimeout(timer);
        this.waiters.delete(itemId);
        resolve(o);
      };
      this.waiters.set(itemId, finish);
    });
    try {
      await new Promise<void>((resolve, reject) => {
        if (this.pending.length === 0) this.pendingSince = performance.now();
        this.pending.push({ itemId, job, queued: { resolve, reject } });
        if (this.pending.length >= BATCH_MAX_ITEMS) this.flush();
        else if (!this.timer && this.addsInFlight < MAX_ADDS_IN_FLIGHT) this.timer = setTimeout(() => this.flush(), this.ctx.config.queueBatchDelayMs);
      });
    } catch (err) {
      this.waiters.get(itemId)?.({ state: 'pending' });
      throw err;
    }
    return outcome;
  }

  private flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const batch = this.pending.splice(0, BATCH_MAX_ITEMS);
    if (batch.length === 0) return;
    if (this.pending.length > 0) this.pendingSince = performance.now();
    const data: DeviceBatchJob = { gatewayId: this.gatewayId, items: batch.map((b) => ({ itemId: b.itemId, job: b.job })) };
    metrics.queuedBatches.inc();
    metrics.queuedBatchItems.inc(batch.length);
    this.addsInFlight++;
    const local = localTakers.get(this.ctx)?.claim(batch.length) ?? null;
    const jobId = newHashId(16);
    this.queue.add(JOB_NAME, data, local ? { jobId, delay: this.ctx.config.localHandoffClaimMs } : { jobId }).then(
      (job) => {
        batch.forEach((b) => b.queued.resolve());
        local?.start(job);
      },
      (err) => {
        local?.cancel();
        batch.forEach((b) => b.queued.reject(err));
      },
    ).finally(() => {
      this.addsInFlight--;
      // while adds were in flight, requests gathered for the next batch: the busier, the larger; it still gathers
      // for QUEUE_BATCH_DELAY_MS from its first request, so a fast add does not cut batches short under load
      if (this.pending.length > 0 && !this.timer) {
        const left = this.pendingSince + this.ctx.config.queueBatchDelayMs - performance.now();
        if (left <= 0) this.flush();
        else this.timer = setTimeout(() => this.flush(), left);
      }
    });
  }

  async close(): Promise<void> {
    this.flush();
    localGateways.delete(this.gatewayId);
    for (const w of [...this.waiters.values()]) w({ state: 'pending' });
    await this.subscriber.quit().catch(() => this.subscriber.disconnect());
    await this.queue.close();
  }
}

/**
 * reportLate runs this long after the expected time: lastOnlineAt is written up to a second after a
 * contact (worker TOUCH_RESOLUTION_MS), and a contact just before the deadline must be seen.
 */
const REPORT_LATE_GRACE_MS = 1200;

/** When and how an event job is queued. */
export interface EventJobOptions {
  /** run no earlier than this many ms from now (a BullMQ delayed job, not a poll) */
  delayMs?: number;
  /** a fixed job id, so the job can be removed later (e.g. `commandDue-<commandHashId>`) */
  jobId?: string;
  /** a newer job with the same key replaces a still-delayed older one (one reportLate per device) */
  replaceKey?: string;
}

/**
 * Device events (command lifecycle, reportLate) go into the same queue as device requests, as
 * batches of one with no gateway waiting, so the same workers run them through the handler.
 */
export class DeviceEventQueue {
  readonly queue: Queue<DeviceBatchJob, void>;

  constructor(ctx: AppContext) {
    this.queue = new Queue(ctx.config.queueName, {
      connection: createRedis(ctx.config.redisUrl, ctx.log),
      defaultJobOptions: JOB_OPTIONS,
    });
    this.queue.on('error', bullmqErrorLogger(ctx.log, 'device event queue error'));
  }

  async add(jobs: { job: DeviceEventJob; opts?: EventJobOptions }[]): Promise<void> {
    if (jobs.length === 0) return;
    await this.queue.addBulk(jobs.map(({ job, opts }) => ({
      name: JOB_NAME,
      data: { gatewayId: '', items: [{ itemId: job.eventId, job }] },
      opts: {
        jobId: opts?.jobId ?? newHashId(16),
        ...(opts?.delayMs ? { delay: Math.max(0, Math.round(opts.delayMs)) } : {}),
        ...(opts?.replaceKey ? { deduplication: { id: opts.replaceKey, replace: true, keepLastIfActive: true } } : {}),
      },
    })));
  }

  /**
   * exec.expectNextReportBefore: a reportLate job at `before`, replacing the device's earlier one.
   * A cleared (null) or renewed expectation, or a contact in time, makes a job that still runs a no-op.
   */
  async expectReport(device: { hashId: string; environmentHashId: string }, before: string | null, setAt: Date): Promise<void> {
    if (before === null) return;
    await this.add([{
      job: {
        kind: 'event', eventId: newHashId(16), deviceHashId: device.hashId, environmentHashId: device.environmentHashId,
        event: { type: 'reportLate', before, setAt: setAt.toISOString() }, queuedAt: setAt.toISOString(),
      },
      opts: { delayMs: Math.max(1, Date.parse(before) - Date.now() + REPORT_LATE_GRACE_MS), replaceKey: `reportLate-${device.hashId}` },
    }]);
  }

  /**
   * Queues items of batch `jobId` again, each as a batch of its own (job id `<jobId>-<index>`, so a second
   * split of the same batch adds nothing): one item that keeps failing then fails alone.
   */
  async requeueAlone(jobId: string, gatewayId: string, items: { index: number; item: DeviceBatchItem }[]): Promise<void> {
    await this.queue.addBulk(items.map(({ index, item }) => ({
      name: JOB_NAME,
      data: { gatewayId, items: [{ ...item, idBase: item.idBase ?? `${jobId}:${index}` }] },
      opts: { jobId: `${jobId}-${index}` },
    })));
  }

  /** Removes a job not yet run (a deleted command's commandDue); a missing or running job is left alone. */
  async remove(jobId: string): Promise<void> {
    await this.queue.remove(jobId).catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

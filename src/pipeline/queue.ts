import { Queue, type DefaultJobOptions, type Job } from 'bullmq';
import { systemClock, type Clock, type ClockTimer } from '../app/clock.ts';
import type { AppContext } from '../app/context.ts';
import { newHashId } from '../app/hash-id.ts';
import { metrics } from '../app/metrics.ts';
import { bullmqErrorLogger, createRedis, type Redis, type RedisConfig } from '../app/redis.ts';
import { bullQueue, shardOf } from '../app/redis-keys.ts';
import type { DeviceBatchItem, DeviceBatchJob, DeviceEventJob, DeviceJob, DeviceJobResult } from '../connectivity/device-jobs.ts';

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
export const answerChannel = (config: { queueName: string }, gatewayId: string) => `gridgate:answers:${config.queueName}:${gatewayId}`;

export interface PublishedAnswer {
  itemId: string;
  result: DeviceJobResult;
}

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

/** A context's local handoff (`ctx.localHandoff`): the worker of this context that takes its gateway's batches, if any. */
export interface LocalHandoff {
  taker: LocalTaker | null;
}

declare module '../app/context.ts' {
  interface AppContext {
    /** the worker taking this context's device batches in memory (src/pipeline/queue.ts) */
    localHandoff: LocalHandoff;
  }
}

/** The local handoff of a new context (src/context.ts): no worker takes batches yet. */
export const createLocalHandoff = (): LocalHandoff => ({ taker: null });

/** The worker of this context takes its gateway's batches locally; null stops that. */
export function setLocalTaker(ctx: Pick<AppContext, 'localHandoff'>, taker: LocalTaker | null): void {
  ctx.localHandoff.taker = taker;
}

/** The device queue's shard `shard` (QUEUE_SHARDS): its BullMQ name and prefix. */
export const deviceQueueShard = (config: RedisConfig & { queueName: string }, shard: number) => bullQueue(config, config.queueName, shard);

/** The shard a device's jobs go to: all of them to one, so they stay in order. */
export const shardOfDevice = (config: AppContext['config'], deviceHashId: string) => shardOf(deviceHashId, config.queueShards);

/**
 * One BullMQ Queue per shard of the device queue (QUEUE_SHARDS), sharing one connection: on a Redis Cluster
 * each shard is a hash slot of its own, so the shards spread over the masters and one master is not the ceiling.
 */
function openShards(ctx: AppContext, onError: string): { queues: Queue<DeviceBatchJob, void>[]; close(): Promise<void> } {
  const connection = createRedis(ctx.config, ctx.log);
  const queues = Array.from({ length: ctx.config.queueShards }, (_, shard) => {
    const { name, prefix } = deviceQueueShard(ctx.config, shard);
    const queue = new Queue<DeviceBatchJob, void>(name, { connection, prefix, defaultJobOptions: JOB_OPTIONS });
    queue.on('error', bullmqErrorLogger(ctx.log, onError));
    return queue;
  });
  return {
    queues,
    async close() {
      await Promise.all(queues.map((q) => q.close()));
      // a connection handed to BullMQ stays open after close()
      await connection.quit().catch(() => connection.disconnect());
    },
  };
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
  /** one per shard (QUEUE_SHARDS); the first is the only one by default */
  readonly queues: Queue<DeviceBatchJob, void>[];
  readonly gatewayId = newHashId(12);
  private readonly shards: ReturnType<typeof openShards>;
  private readonly subscriber: Redis;
  private readonly waiters = new Map<string, (o: WaitOutcome) => void>();
  /** what each shard gathers for its next batch: a batch holds the jobs of one shard only */
  private readonly batching: ShardBatch[];
  private readonly ctx: AppContext;
  /** times the batches and the wait for an answer */
  private readonly clock: Clock;

  constructor(ctx: AppContext, opts: { clock?: Clock } = {}) {
    this.ctx = ctx;
    this.clock = opts.clock ?? systemClock;
    this.shards = openShards(ctx, 'device queue error');
    this.queues = this.shards.queues;
    this.batching = this.queues.map(() => ({ pending: [], timer: null, addsInFlight: 0, pendingSince: 0 }));
    this.subscriber = createRedis(ctx.config, ctx.log);
    this.subscriber.on('message', (_channel: string, message: string) => this.answered(JSON.parse(message) as PublishedAnswer[]));
  }

  /** The first shard's queue (the only one unless QUEUE_SHARDS is set). */
  get queue(): Queue<DeviceBatchJob, void> {
    return this.queues[0];
  }

  private answered(answers: PublishedAnswer[]): void {
    for (const answer of answers) this.waiters.get(answer.itemId)?.({ state: 'completed', result: answer.result });
  }

  async ready(): Promise<void> {
    await Promise.all(this.queues.map((q) => q.waitUntilReady()));
    await this.subscriber.subscribe(answerChannel(this.ctx.config, this.gatewayId));
    localGateways.set(this.gatewayId, (answers) => this.answered(answers));
  }

  /** Queues the job durably; resolves with its result, or `pending` when not answered within `waitMs`. Rejects when it could not be queued. */
  async addAndWait(job: DeviceJob, waitMs: number): Promise<WaitOutcome> {
    const itemId = newHashId(16);
    const outcome = new Promise<WaitOutcome>((resolve) => {
      const timer = this.clock.setTimeout(() => finish({ state: 'pending' }), waitMs);
      const finish = (o: WaitOutcome) => {
        this.clock.clearTimeout(timer);
        this.waiters.delete(itemId);
        resolve(o);
      };
      this.waiters.set(itemId, finish);
    });
    const shard = shardOfDevice(this.ctx.config, job.deviceHashId);
    const b = this.batching[shard];
    try {
      await new Promise<void>((resolve, reject) => {
        if (b.pending.length === 0) b.pendingSince = this.clock.now();
        b.pending.push({ itemId, job, queued: { resolve, reject } });
        if (b.pending.length >= BATCH_MAX_ITEMS) this.flush(shard);
        else if (!b.timer && b.addsInFlight < MAX_ADDS_IN_FLIGHT) b.timer = this.clock.setTimeout(() => this.flush(shard), this.ctx.config.queueBatchDelayMs);
      });
    } catch (err) {
      this.waiters.get(itemId)?.({ state: 'pending' });
      throw err;
    }
    return outcome;
  }

  private flush(shard: number): void {
    const b = this.batching[shard];
    if (b.timer) {
      this.clock.clearTimeout(b.timer);
      b.timer = null;
    }
    const batch = b.pending.splice(0, BATCH_MAX_ITEMS);
    if (batch.length === 0) return;
    if (b.pending.length > 0) b.pendingSince = this.clock.now();
    const data: DeviceBatchJob = { gatewayId: this.gatewayId, items: batch.map((p) => ({ itemId: p.itemId, job: p.job })) };
    metrics.queuedBatches.inc();
    metrics.queuedBatchItems.inc(batch.length);
    b.addsInFlight++;
    const local = this.ctx.localHandoff.taker?.claim(batch.length) ?? null;
    const jobId = newHashId(16);
    this.queues[shard]
      .add(JOB_NAME, data, local ? { jobId, delay: this.ctx.config.localHandoffClaimMs } : { jobId })
      .then(
        (job) => {
          batch.forEach((p) => p.queued.resolve());
          local?.start(job);
        },
        (err) => {
          local?.cancel();
          batch.forEach((p) => p.queued.reject(err));
        },
      )
      .finally(() => {
        b.addsInFlight--;
        // while adds were in flight, requests gathered for the next batch: the busier, the larger; it still gathers
        // for QUEUE_BATCH_DELAY_MS from its first request, so a fast add does not cut batches short under load
        if (b.pending.length > 0 && !b.timer) {
          const left = b.pendingSince + this.ctx.config.queueBatchDelayMs - this.clock.now();
          if (left <= 0) this.flush(shard);
          else b.timer = this.clock.setTimeout(() => this.flush(shard), left);
        }
      });
  }

  async close(): Promise<void> {
    this.batching.forEach((_, shard) => this.flush(shard));
    localGateways.delete(this.gatewayId);
    for (const w of [...this.waiters.values()]) w({ state: 'pending' });
    await this.subscriber.quit().catch(() => this.subscriber.disconnect());
    await this.shards.close();
  }
}

/** The requests a gateway gathers for the next batch of one shard. */
interface ShardBatch {
  pending: { itemId: string; job: DeviceJob; queued: { resolve(): void; reject(err: unknown): void } }[];
  timer: ClockTimer | null;
  addsInFlight: number;
  /** when the first of `pending` arrived (the queue's clock) */
  pendingSince: number;
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
  /** one per shard (QUEUE_SHARDS), as the gateway's */
  readonly queues: Queue<DeviceBatchJob, void>[];
  private readonly shards: ReturnType<typeof openShards>;
  private readonly config: AppContext['config'];

  constructor(ctx: AppContext) {
    this.config = ctx.config;
    this.shards = openShards(ctx, 'device event queue error');
    this.queues = this.shards.queues;
  }

  /** The first shard's queue (the only one unless QUEUE_SHARDS is set). */
  get queue(): Queue<DeviceBatchJob, void> {
    return this.queues[0];
  }

  /** Adds BullMQ jobs each to the shard of its device, one addBulk per shard. */
  private async addToShards(jobs: { deviceHashId: string; job: Parameters<Queue<DeviceBatchJob, void>['addBulk']>[0][number] }[]): Promise<void> {
    const byShard = new Map<number, (typeof jobs)[number]['job'][]>();
    for (const { deviceHashId, job } of jobs) {
      const shard = shardOfDevice(this.config, deviceHashId);
      const list = byShard.get(shard);
      if (list) list.push(job);
      else byShard.set(shard, [job]);
    }
    await Promise.all([...byShard].map(([shard, list]) => this.queues[shard].addBulk(list)));
  }

  async add(jobs: { job: DeviceEventJob; opts?: EventJobOptions }[]): Promise<void> {
    if (jobs.length === 0) return;
    await this.addToShards(
      jobs.map(({ job, opts }) => ({
        deviceHashId: job.deviceHashId,
        job: {
          name: JOB_NAME,
          data: { gatewayId: '', items: [{ itemId: job.eventId, job }] },
          opts: {
            jobId: opts?.jobId ?? newHashId(16),
            ...(opts?.delayMs ? { delay: Math.max(0, Math.round(opts.delayMs)) } : {}),
            ...(opts?.replaceKey ? { deduplication: { id: opts.replaceKey, replace: true, keepLastIfActive: true } } : {}),
          },
        },
      })),
    );
  }

  /**
   * exec.expectNextReportBefore: a reportLate job at `before`, replacing the device's earlier one.
   * A cleared (null) or renewed expectation, or a contact in time, makes a job that still runs a no-op.
   */
  async expectReport(device: { hashId: string; environmentHashId: string }, before: string | null, setAt: Date): Promise<void> {
    if (before === null) return;
    await this.add([
      {
        job: {
          kind: 'event',
          eventId: newHashId(16),
          deviceHashId: device.hashId,
          environmentHashId: device.environmentHashId,
          event: { type: 'reportLate', before, setAt: setAt.toISOString() },
          queuedAt: setAt.toISOString(),
        },
        opts: { delayMs: Math.max(1, Date.parse(before) - Date.now() + REPORT_LATE_GRACE_MS), replaceKey: `reportLate-${device.hashId}` },
      },
    ]);
  }

  /**
   * Queues items of batch `jobId` again, each as a batch of its own (job id `<jobId>-<index>`, so a second
   * split of the same batch adds nothing): one item that keeps failing then fails alone.
   */
  async requeueAlone(jobId: string, gatewayId: string, items: { index: number; item: DeviceBatchItem }[]): Promise<void> {
    await this.addToShards(
      items.map(({ index, item }) => ({
        deviceHashId: item.job.deviceHashId,
        job: {
          name: JOB_NAME,
          data: { gatewayId, items: [{ ...item, idBase: item.idBase ?? `${jobId}:${index}` }] },
          opts: { jobId: `${jobId}-${index}` },
        },
      })),
    );
  }

  /** Removes a job not yet run (a deleted command's commandDue) from whichever shard holds it; a missing or running job is left alone. */
  async remove(jobId: string): Promise<void> {
    await Promise.all(this.queues.map((q) => q.remove(jobId).catch(() => undefined)));
  }

  async close(): Promise<void> {
    await this.shards.close();
  }
}

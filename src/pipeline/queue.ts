import { Queue, QueueEvents } from 'bullmq';
import type { AppContext } from '../app/context.ts';
import { newHashId } from '../app/hash-id.ts';
import { createRedis } from '../app/redis.ts';
import type { DeviceJob, DeviceJobResult } from './jobs.ts';

export const JOB_NAME = 'device';

export type WaitOutcome = { state: 'completed'; result: DeviceJobResult } | { state: 'failed'; reason: string } | { state: 'pending' };

/**
 * The gateway's side of the queue: add a job durably, then wait (bounded) for its result.
 * One QueueEvents stream per process serves every waiting request.
 */
export class DeviceQueue {
  readonly queue: Queue<DeviceJob, DeviceJobResult>;
  private readonly events: QueueEvents;
  private readonly waiters = new Map<string, (o: WaitOutcome) => void>();

  constructor(ctx: AppContext) {
    this.queue = new Queue(ctx.config.queueName, {
      connection: createRedis(ctx.config.redisUrl),
      defaultJobOptions: {
        attempts: 3,
        backoff: { type: 'exponential', delay: 200 },
        removeOnComplete: { age: 300, count: 10_000 },
        removeOnFail: { age: 7 * 24 * 3600 },
      },
    });
    this.events = new QueueEvents(ctx.config.queueName, { connection: createRedis(ctx.config.redisUrl) });
    this.events.on('completed', ({ jobId, returnvalue }) => {
      this.waiters.get(jobId)?.({ state: 'completed', result: (typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue) as DeviceJobResult });
    });
    this.events.on('failed', ({ jobId, failedReason }) => {
      this.waiters.get(jobId)?.({ state: 'failed', reason: failedReason });
    });
  }

  async ready(): Promise<void> {
    await Promise.all([this.queue.waitUntilReady(), this.events.waitUntilReady()]);
  }

  /** Queues the job; resolves with its result, or `pending` when it is not done within `waitMs` (it stays queued). */
  async addAndWait(job: DeviceJob, waitMs: number): Promise<WaitOutcome> {
    const jobId = newHashId(16);
    const outcome = new Promise<WaitOutcome>((resolve) => {
      const timer = setTimeout(() => finish({ state: 'pending' }), waitMs);
      const finish = (o: WaitOutcome) => {
        clearTimeout(timer);
        this.waiters.delete(jobId);
        resolve(o);
      };
      this.waiters.set(jobId, finish);
    });
    try {
      await this.queue.add(JOB_NAME, job, { jobId });
    } catch (err) {
      this.waiters.get(jobId)?.({ state: 'pending' });
      throw err;
    }
    return outcome;
  }

  async close(): Promise<void> {
    for (const w of [...this.waiters.values()]) w({ state: 'pending' });
    await this.events.close();
    await this.queue.close();
  }
}

import { Queue } from 'bullmq';
import type { Logger } from '../app/logger.ts';
import { createRedis, type RedisConfig } from '../app/redis.ts';
import type { DeviceBatchJob } from '../connectivity/device-jobs.ts';
import { deviceQueueShard } from './queue.ts';

const PAGE = 500;

/**
 * Puts every job of the device queue (each of its QUEUE_SHARDS shards) that failed for good back into its queue,
 * with its attempts counted from zero again (what it stores is stored once: its ids derive from the job). Returns how many.
 */
export async function retryFailedJobs(config: RedisConfig & { queueName: string; queueShards: number }, log: Logger): Promise<number> {
  const redis = createRedis(config, log);
  const queues = Array.from({ length: config.queueShards }, (_, shard) => {
    const { name, prefix } = deviceQueueShard(config, shard);
    return new Queue<DeviceBatchJob, void>(name, { connection: redis, prefix });
  });
  let retried = 0;
  try {
    for (const queue of queues) {
      for (;;) {
        // each retried job leaves the failed set: the first page is always the next one
        const jobs = (await queue.getFailed(0, PAGE - 1)).filter((j) => j !== undefined);
        if (jobs.length === 0) break;
        for (const job of jobs) {
          await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
          retried++;
        }
      }
    }
  } finally {
    await Promise.all(queues.map((q) => q.close()));
    // a connection handed to BullMQ stays open after close(): the CLI would never exit
    await redis.quit();
  }
  return retried;
}

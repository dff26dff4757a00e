import { Queue } from 'bullmq';
import type { Logger } from '../app/logger.ts';
import { createRedis } from '../app/redis.ts';
import type { DeviceBatchJob } from './jobs.ts';

const PAGE = 500;

/**
 * Puts every job of `queueName` that failed for good back into the queue, with its attempts counted from
 * zero again (what it stores is stored once: its ids derive from the job). Returns how many.
 */
export async function retryFailedJobs(redisUrl: string, queueName: string, log: Logger): Promise<number> {
  const redis = createRedis(redisUrl, log);
  const queue = new Queue<DeviceBatchJob, void>(queueName, { connection: redis });
  let retried = 0;
  try {
    for (;;) {
      // each retried job leaves the failed set: the first page is always the next one
      const jobs = (await queue.getFailed(0, PAGE - 1)).filter((j) => j !== undefined);
      if (jobs.length === 0) break;
      for (const job of jobs) {
        await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
        retried++;
      }
    }
  } finally {
    await queue.close();
    // a connection handed to BullMQ stays open after close(): the CLI would never exit
    await redis.quit();
  }
  return retried;
}

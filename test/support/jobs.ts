import { Queue, type JobType } from 'bullmq';
import type { AppContext } from '../../src/app/context.ts';
import { deviceQueueShard } from '../../src/pipeline/queue.ts';

/** A Queue for each shard of the context's device queue (QUEUE_SHARDS), on its Redis connection. */
export function deviceQueues(ctx: AppContext): Queue[] {
  return Array.from({ length: ctx.config.queueShards }, (_, shard) => {
    const { name, prefix } = deviceQueueShard(ctx.config, shard);
    return new Queue(name, { connection: ctx.redis, prefix });
  });
}

/**
 * Queued jobs plus the handler runs of device `deviceHashId`, counted once the queue has settled (bounded at 5 s): a
 * job stays active, or delayed when a gateway's own worker took it, until its writes are flushed, a moment after its
 * device was answered. Equal counts before and after
 * a request mean it queued nothing and ran nothing.
 */
export async function settledJobCount(ctx: AppContext, deviceHashId: string): Promise<number> {
  const queues = deviceQueues(ctx);
  const count = async () => {
    const total = { completed: 0, failed: 0, active: 0, waiting: 0, delayed: 0, prioritized: 0 };
    for (const queue of queues) {
      const counts = await queue.getJobCounts(...(Object.keys(total) as JobType[]));
      for (const state of Object.keys(total) as (keyof typeof total)[]) total[state] += counts[state] ?? 0;
    }
    return total;
  };
  let counts = await count();
  // a job a gateway's own worker ran stays queued (delayed: its claim) until the run is stored, and is then removed: with
  // its activity already counted, counting it too would count one run twice for a moment
  for (let i = 0; i < 250 && counts.active + counts.waiting + counts.prioritized + counts.delayed > 0; i++) {
    await new Promise((r) => setTimeout(r, 20));
    counts = await count();
  }
  const activities = await ctx.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1',
    [deviceHashId],
  );
  return Object.values(counts).reduce((a, b) => a + b, 0) + activities.rows[0].n;
}

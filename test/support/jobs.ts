import { Queue } from 'bullmq';
import type { AppContext } from '../../src/app/context.ts';

/**
 * Queued jobs plus the handler runs of device `deviceHashId`, counted once the queue has settled: a job stays
 * active until its writes are flushed, a moment after its device was answered. Equal counts before and after
 * a request mean it queued nothing and ran nothing.
 */
export async function settledJobCount(ctx: AppContext, deviceHashId: string): Promise<number> {
  const queue = new Queue(ctx.config.queueName, { connection: ctx.redis });
  const count = () => queue.getJobCounts('completed', 'failed', 'active', 'waiting', 'delayed', 'prioritized');
  let counts = await count();
  // a batch the worker beside the gateway took is a delayed job until its writes are on disk, while its activity may
  // already show: waiting for the delayed ones too keeps a request from being counted twice (bounded: 5 s)
  for (let i = 0; i < 250 && counts.active + counts.waiting + counts.prioritized + counts.delayed > 0; i++) {
    await new Promise((r) => setTimeout(r, 20));
    counts = await count();
  }
  const activities = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1', [deviceHashId]);
  return Object.values(counts).reduce((a, b) => a + b, 0) + activities.rows[0].n;
}

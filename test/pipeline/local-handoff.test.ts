/**
 * LOCAL_HANDOFF: the worker beside the gateway runs the batches that gateway queues without fetching them. Each batch
 * is still queued durably (a delayed job, out of other workers' reach while it runs) and leaves the queue once stored;
 * no worker fetches it (BullMQ sends no `active` event). With LOCAL_HANDOFF off, the workers fetch every batch.
 * (A crash of such a process is in store-outage.test.ts: its batches run elsewhere after their claim.)
 */
import { Queue, QueueEvents } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import { startService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient } from '../support/provision.ts';
import { reportingDevices, reportUntil } from '../support/report-world.ts';

async function runReports(handoff: 'on' | 'off') {
  const ctx = await testContext({ LOCAL_HANDOFF: handoff, QUEUE_NAME: `handoff-${handoff}-${process.pid}-${Date.now()}` });
  const service = await startService(ctx, ['all']);
  const events = new QueueEvents(ctx.config.queueName, { connection: { url: ctx.config.redisUrl } as never });
  const queue = new Queue(ctx.config.queueName, { connection: { url: ctx.config.redisUrl } as never });
  await events.waitUntilReady();
  const seen = { active: 0, added: 0, delayed: 0, removed: 0 };
  events.on('active', () => {
    seen.active++;
  });
  events.on('added', () => {
    seen.added++;
  });
  events.on('delayed', () => {
    seen.delayed++;
  });
  events.on('removed', () => {
    seen.removed++;
  });
  try {
    const api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
    const devices = await reportingDevices(api, 3);
    const outcome = await reportUntil(service.https!.port(), devices, new Promise((r) => setTimeout(r, 1500)));
    // every report was answered by its handler (200), none left waiting
    const { rows } = await ctx.db.query<{ n: string }>(
      'SELECT count(*) AS n FROM condition_report r JOIN environment e ON e.id = r.environment_id WHERE e.hash_id = $1',
      [api.environmentHashId],
    );
    // the jobs leave the queue once what they stored is on disk
    let counts: Record<string, number> = {};
    for (let i = 0; i < 50; i++) {
      counts = await queue.getJobCounts('active', 'waiting', 'delayed', 'failed');
      if (Object.values(counts).every((n) => n === 0)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 200)); // the last events arrive
    return { outcome, stored: Number(rows[0].n), counts, seen };
  } finally {
    await events.close();
    await queue.close();
    await service.stop();
    await closeContext(ctx);
  }
}

describe('LOCAL_HANDOFF', () => {
  it('on: every batch is queued (delayed, claimed) and removed once stored; no worker fetches one; every report stored', async () => {
    const { outcome, stored, counts, seen } = await runReports('on');
    expect(outcome.byStatus.get(200)).toBe(outcome.accepted.length);
    expect(stored).toBe(outcome.accepted.length);
    expect(counts).toEqual({ active: 0, waiting: 0, delayed: 0, failed: 0 });
    expect(seen.active).toBe(0);
    expect(seen.delayed).toBeGreaterThan(0);
    expect(seen.removed).toBe(seen.delayed);
  }, 60_000);

  it('off: the workers fetch every batch from the queue', async () => {
    const { outcome, stored, counts, seen } = await runReports('off');
    expect(stored).toBe(outcome.accepted.length);
    expect(counts).toEqual({ active: 0, waiting: 0, delayed: 0, failed: 0 });
    expect(seen.active).toBeGreaterThan(0);
    expect(seen.delayed).toBe(0);
  }, 60_000);
});

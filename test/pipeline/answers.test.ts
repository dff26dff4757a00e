import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import { ManualClock } from '../../src/app/clock.ts';
import type { AppContext } from '../../src/app/context.ts';
import type { DeviceJobResult, DeviceRequestJob } from '../../src/connectivity/device-jobs.ts';
import { answerChannel, deliverLocally, DeviceQueue } from '../../src/pipeline/queue.ts';
import { testContext } from '../helpers.ts';

let ctx: AppContext;
beforeAll(async () => {
  ctx = await testContext();
});
afterAll(async () => {
  await closeContext(ctx);
});

const job = (n: number): DeviceRequestJob => ({
  kind: 'incomingRequest',
  deviceHashId: `d${n}`,
  environmentHashId: 'e',
  receivedAt: new Date().toISOString(),
  webRequest: {
    url: { protocol: 'https', host: 'h', path: '/', query: {} },
    method: 'POST',
    headers: {},
    body: { type: 'string', data: String(n) },
    ip: '127.0.0.1',
  } as never,
});
const result = (n: number): DeviceJobResult => ({
  answer: { statusCode: 200, headers: { 'x-n': String(n) }, body: { type: 'json', data: { n } } },
  activityHashId: `a${n}`,
  failed: false,
});

/** The item ids of the queued batch jobs, in the order the requests were added. */
async function queuedItemIds(queue: DeviceQueue, count: number): Promise<string[]> {
  for (let i = 0; i < 100; i++) {
    const jobs = await queue.queue.getJobs(['waiting', 'prioritized', 'active']);
    const ids = jobs.flatMap((j) => j.data.items.map((it) => ({ id: it.itemId, n: Number((it.job as DeviceRequestJob).deviceHashId.slice(1)) })));
    if (ids.length >= count) return ids.sort((a, b) => a.n - b.n).map((x) => x.id);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('the requests were not queued');
}

describe('answers from the worker to the gateway holding the request', () => {
  it('reach a gateway of this process in memory, and one elsewhere over Redis pub/sub; a closed gateway takes none', async () => {
    const queue = new DeviceQueue(ctx);
    await queue.ready();
    const waits = [queue.addAndWait(job(0), 10_000), queue.addAndWait(job(1), 10_000)];
    const [local, remote] = await queuedItemIds(queue, 2);

    expect(deliverLocally(queue.gatewayId, [{ itemId: local, result: result(0) }])).toBe(true);
    expect(await waits[0]).toEqual({ state: 'completed', result: result(0) });
    // a gateway of another process: the worker publishes on the gateway's channel
    expect(deliverLocally('other-gateway', [{ itemId: remote, result: result(1) }])).toBe(false);
    await ctx.redis.publish(answerChannel(ctx.config, queue.gatewayId), JSON.stringify([{ itemId: remote, result: result(1) }]));
    expect(await waits[1]).toEqual({ state: 'completed', result: result(1) });

    await queue.queue.obliterate({ force: true });
    await queue.close();
    expect(deliverLocally(queue.gatewayId, [{ itemId: local, result: result(0) }])).toBe(false);
  });
});

describe('batches of device requests', () => {
  it('gather for QUEUE_BATCH_DELAY_MS from their first request, also while the previous batch is being queued', async () => {
    const clock = new ManualClock();
    const batchCtx = { ...ctx, config: { ...ctx.config, queueBatchDelayMs: 200, queueName: `batches-${process.pid}-${Date.now()}` } };
    const queue = new DeviceQueue(batchCtx, { clock });
    await queue.ready();
    // each add of a job waits for `gate` once opened: the second request arrives while the first job is being queued
    const jobs: string[][] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const add = queue.queue.add.bind(queue.queue);
    queue.queue.add = (async (name: string, data: { items: { job: DeviceRequestJob }[] }, opts: never) => {
      jobs.push(data.items.map((i) => i.job.deviceHashId));
      await gate;
      return add(name, data as never, opts);
    }) as never;
    void queue.addAndWait(job(1), 5_000);
    clock.advance(199);
    expect(jobs).toEqual([]);
    clock.advance(1); // t = 200: the first batch is queued, and its add waits
    expect(jobs).toEqual([['d1']]);
    clock.advance(50);
    void queue.addAndWait(job(2), 5_000); // t = 250, while d1's add is in flight: no timer yet
    clock.advance(50);
    open(); // t = 300: the first add completes; d2 gathers until 200 ms from its arrival, not from now
    await expect.poll(() => clock.nextAt, { timeout: 10_000 }).toBe(450);
    void queue.addAndWait(job(3), 5_000);
    clock.advance(149);
    expect(jobs).toEqual([['d1']]);
    clock.advance(1); // t = 450
    expect(jobs).toEqual([['d1'], ['d2', 'd3']]);

    await queue.queue.obliterate({ force: true });
    await queue.close();
  });
});

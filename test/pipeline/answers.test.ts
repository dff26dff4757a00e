import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/app/bootstrap.ts';
import type { AppContext } from '../../src/app/context.ts';
import type { DeviceJobResult, DeviceRequestJob } from '../../src/pipeline/jobs.ts';
import { answerChannel, deliverLocally, DeviceQueue } from '../../src/pipeline/queue.ts';
import { testContext } from '../helpers.ts';

let ctx: AppContext;
beforeAll(async () => { ctx = await testContext(); });
afterAll(async () => { await closeContext(ctx); });

const job = (n: number): DeviceRequestJob => ({
  kind: 'incomingRequest', deviceHashId: `d${n}`, environmentHashId: 'e', receivedAt: new Date().toISOString(),
  webRequest: { url: { protocol: 'https', host: 'h', path: '/', query: {} }, method: 'POST', headers: {}, body: { type: 'string', data: String(n) }, ip: '127.0.0.1' } as never,
});
const result = (n: number): DeviceJobResult => ({ answer: { statusCode: 200, headers: { 'x-n': String(n) }, body: { type: 'json', data: { n } } }, activityHashId: `a${n}`, failed: false });

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
    await ctx.redis.publish(answerChannel(queue.gatewayId), JSON.stringify([{ itemId: remote, result: result(1) }]));
    expect(await waits[1]).toEqual({ state: 'completed', result: result(1) });

    await queue.queue.obliterate({ force: true });
    await queue.close();
    expect(deliverLocally(queue.gatewayId, [{ itemId: local, result: result(0) }])).toBe(false);
  });
});

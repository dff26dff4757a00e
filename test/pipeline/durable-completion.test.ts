/**
 * The device's answer does not wait for the disk; the queued job does. Reports and activities commit deferred
 * (synchronous_commit off), the device is answered, and the job leaves the queue only once Db.flushed() resolves.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { coapClient, report, runsLogging, startCoapWorld, storedAt, type CoapWorld } from '../coap/support.ts';

let world: CoapWorld;
let releaseFlush: () => void = () => undefined;
let flushHeld = true;
let flushCalls = 0;
let queue: Queue;
beforeAll(async () => {
  // one batch processed at a time: a job waiting for its flush must not hold that slot
  world = await startCoapWorld({ WORKER_CONCURRENCY: '1' }, undefined, (ctx) => {
    const real = ctx.db.flushed.bind(ctx.db);
    // the disk flush is held until the test lets it go
    const held = new Promise<void>((resolve) => {
      releaseFlush = resolve;
    });
    ctx.db = {
      ...ctx.db,
      flushed: async () => {
        flushCalls++;
        if (flushHeld) await held;
        await real();
      },
    };
  });
  queue = new Queue(world.ctx.config.queueName, { connection: { url: world.ctx.config.redisUrl } as never });
});
afterAll(async () => {
  releaseFlush();
  await queue?.close();
  await world?.close();
});

// a job still in the queue: active when a worker fetched it, delayed when the worker beside the gateway took it (LOCAL_HANDOFF)
const inQueue = async () => {
  const c = await queue.getJobCounts('active', 'delayed');
  return c.active + c.delayed;
};

it('a CoAP report is answered and readable while its flush is held, the next one too (the waiting job holds no worker slot); the jobs complete only after the flush', async () => {
  const r = report(3.5);
  const res = await coapClient('coap-client-openssl', world, '/report', ['-m', 'post', '-t', '50', '-e', r.body]);
  expect(JSON.parse(res.stdout)).toEqual({ ok: true, device: world.device.identity, m: r.m });
  // committed (visible to every session) though not yet known to be on disk
  expect(await storedAt(world, r.t)).toEqual([3500]);
  expect(await runsLogging(world.api, `m=${r.m}`)).toHaveLength(1);
  expect(flushCalls).toBeGreaterThan(0);
  expect(await inQueue()).toBe(1);

  // the next report is processed and answered while the first job still waits for its flush
  const r2 = report(4.5);
  const res2 = await coapClient('coap-client-gnutls', world, '/report', ['-m', 'post', '-t', '50', '-e', r2.body]);
  expect(JSON.parse(res2.stdout)).toEqual({ ok: true, device: world.device.identity, m: r2.m });
  expect(await storedAt(world, r2.t)).toEqual([4500]);
  expect(await inQueue()).toBe(2);

  flushHeld = false;
  releaseFlush();
  for (let i = 0; i < 100 && (await inQueue()) > 0; i++) await new Promise((r2) => setTimeout(r2, 20));
  expect(await queue.getJobCounts('active', 'waiting', 'delayed', 'failed')).toEqual({ active: 0, waiting: 0, delayed: 0, failed: 0 });
});

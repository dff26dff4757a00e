/** Stream leases in Redis on a clock the test moves: a stream whose process died stops counting once its lease ran out. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/app/clock.ts';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { LEASE_MS, leaseStream, releaseStream, takeStreamLease } from '../../src/connectivity/live/leases.ts';
import { testContext } from '../helpers.ts';

let ctx: AppContext;
beforeAll(async () => {
  ctx = await testContext();
});
afterAll(async () => {
  await closeContext(ctx);
});

describe('live stream leases', () => {
  it('an environment holds at most its streams; a lease not renewed runs out after LEASE_MS, a renewed one does not', async () => {
    const clock = new ManualClock(Date.now());
    const leases = { redis: ctx.redis, config: { ...ctx.config, liveLogStreamsPerEnvironment: 2 }, clock };
    const env = `lease-env-${process.pid}-${Date.now()}`;
    await takeStreamLease(leases, env, 'died');
    await takeStreamLease(leases, env, 'alive');
    await expect(takeStreamLease(leases, env, 'third')).rejects.toMatchObject({ status: 429 });
    clock.advance(LEASE_MS / 3);
    expect(await leaseStream(leases, env, 'alive')).toBe(true); // a keepalive renews; 'died' sends none
    clock.advance(LEASE_MS - LEASE_MS / 3 - 1);
    expect(await leaseStream(leases, env, 'third')).toBe(false); // 'died' still counts a millisecond before its end
    clock.advance(1);
    expect(await leaseStream(leases, env, 'third')).toBe(true);
    expect(await leaseStream(leases, env, 'fourth')).toBe(false); // 'alive' renewed: it still counts
    await releaseStream(leases, env, 'alive');
    expect(await leaseStream(leases, env, 'fourth')).toBe(true);
    await releaseStream(leases, env, 'third');
    await releaseStream(leases, env, 'fourth');
  });
});

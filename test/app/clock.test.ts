/** The kernel's manual clock, and a TTL cache on it: time moves only when the test moves it. */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/app/clock.ts';
import { TtlCache } from '../../src/app/ttl-cache.ts';

describe('ManualClock', () => {
  it('fires the timers that fall due, in order of their time (then of their setting), a timer set by a timer included', () => {
    const clock = new ManualClock(100);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push('b@30'), 30);
    clock.setTimeout(() => fired.push('a@10'), 10);
    clock.setTimeout(() => {
      fired.push('c@30');
      clock.setTimeout(() => fired.push(`d@${clock.now() - 100}`), 5);
    }, 30);
    const cleared = clock.setTimeout(() => fired.push('never'), 20);
    clock.clearTimeout(cleared);
    expect(clock.nextAt).toBe(110);
    clock.advance(29);
    expect(fired).toEqual(['a@10']);
    expect(clock.now()).toBe(129);
    clock.advance(100);
    expect(fired).toEqual(['a@10', 'b@30', 'c@30', 'd@35']);
    expect(clock.now()).toBe(229);
    expect(clock.pending).toBe(0);
  });
});

describe('TtlCache on a manual clock', () => {
  it('serves a load for ttlMs, then loads again', async () => {
    const clock = new ManualClock();
    const cache = new TtlCache<number>(1000, 10, clock);
    let loads = 0;
    const load = async () => ++loads;
    expect(await cache.get('k', load)).toBe(1);
    clock.advance(999);
    expect(await cache.get('k', load)).toBe(1);
    clock.advance(1);
    expect(await cache.get('k', load)).toBe(2);
  });
});

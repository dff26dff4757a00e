/** The group commit's gathering window on a manual clock: items that arrive within maxDelayMs are flushed together. */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/app/clock.ts';
import { Batcher } from '../../src/app/batcher.ts';

describe('Batcher on a manual clock', () => {
  it('flushes what arrived within maxDelayMs of the first item, exactly then, and the next item starts a new window', async () => {
    const clock = new ManualClock();
    const flushes: string[][] = [];
    const batcher = new Batcher<string>(
      async (items) => {
        flushes.push(items);
      },
      { maxDelayMs: 50, clock },
    );
    const a = batcher.add('a');
    clock.advance(30);
    const b = batcher.add('b');
    clock.advance(19);
    expect(flushes).toEqual([]);
    clock.advance(1);
    expect(flushes).toEqual([['a', 'b']]);
    await Promise.all([a, b]);
    const c = batcher.add('c');
    clock.advance(49);
    expect(flushes).toHaveLength(1);
    clock.advance(1);
    await c;
    expect(flushes).toEqual([['a', 'b'], ['c']]);
  });
});

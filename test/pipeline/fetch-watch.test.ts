import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/app/logger.ts';
import { FetchWatch } from '../../src/pipeline/fetch-watch.ts';
import { waitFor } from '../support/until.ts';

const log = createLogger('silent');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const watches: FetchWatch[] = [];
afterEach(() => {
  for (const w of watches.splice(0)) w.close();
});

/** A watch over two shards with `waiting` jobs each, checking every 20 ms, stuck after `stuckMs`; the shards it replaced. */
function watch(waiting: number[], stuckMs = 200) {
  const restarted: number[] = [];
  const w = new FetchWatch({
    shards: 2,
    log,
    checkMs: 20,
    stuckMs,
    waiting: async (shard) => waiting[shard],
    restart: async (shard) => {
      restarted.push(shard);
    },
  });
  watches.push(w);
  w.start();
  return { w, restarted };
}

describe('FetchWatch', () => {
  it('replaces the fetchers of a shard whose jobs wait while none is started or running, at most once per stuckMs', async () => {
    const { restarted } = watch([3, 0], 400);
    const since = Date.now();
    await waitFor(() => restarted.length > 0, 5000, 5);
    expect(Date.now() - since).toBeGreaterThanOrEqual(400);
    expect(restarted).toEqual([0]);
    // not again before another stuckMs
    await sleep(100);
    expect(restarted).toEqual([0]);
  });

  it('leaves a shard alone while one of its jobs runs, however long others wait', async () => {
    const { w, restarted } = watch([3, 3]);
    const ended = [w.started(0), w.started(1)];
    await sleep(500);
    expect(restarted).toEqual([]);
    // once they end, the jobs still waiting make the shards stuck
    ended.forEach((end) => end());
    await waitFor(() => new Set(restarted).size === 2, 5000, 5);
  });

  it('leaves a shard alone whose fetchers keep starting jobs, and one that is empty', async () => {
    const { w, restarted } = watch([5, 0]);
    for (let i = 0; i < 25; i++) {
      w.started(0)();
      await sleep(20);
    }
    expect(restarted).toEqual([]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { testContext } from '../helpers.ts';
import { fuzz, startFuzzApi, type FuzzApi } from '../support/fuzz.ts';

// No input reaches a 500. A fixed seed and a bounded count keep this quick and repeatable;
// bench/fuzz.ts runs the same property longer with a fresh seed.
const SEED = 13;
const RUNS = 300;

let ctx: AppContext;
let api: FuzzApi;
beforeAll(async () => {
  ctx = await testContext();
  api = await startFuzzApi(ctx);
});
afterAll(async () => {
  await api?.close();
  if (ctx) await closeContext(ctx);
});

describe('REST API fuzz', () => {
  it(`answers ${RUNS} generated requests over every route's body, query and path without a 5xx, each error keyed`, async () => {
    expect(api.routes.length).toBeGreaterThan(40);
    expect(api.pool.length).toBeGreaterThanOrEqual(8);
    const outcome = await fuzz(api, { seed: SEED, numRuns: RUNS });
    expect(outcome.failures).toEqual([]);
    expect(outcome.requests).toBe(RUNS);
    // the generated requests reach handlers, not only the validation layer
    const answered = Object.entries(outcome.byStatus)
      .filter(([status]) => Number(status) < 300)
      .reduce((n, [, count]) => n + count, 0);
    expect(answered).toBeGreaterThan(RUNS / 20);
    const health = await api.app.inject({ method: 'GET', url: '/quantity/quantities', headers: api.headers });
    expect(health.statusCode).toBe(200);
  }, 120_000);
});

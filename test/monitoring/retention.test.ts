import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneExpired } from '../../src/monitoring/retention/prune.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { pinWithHistory } from './fixtures.ts';

// measurementsExpirationDays: older measurements on an environment's pins are pruned.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const ages = async (c: ApiClient, pinHashId: string) => {
  const r = await c.request<{ rows: { report: { pinObservations: { measurement: { significand: number } }[] } }[] }>(
    'GET',
    `/measurement/?pinHashIds=${pinHashId}&rowsPerPage=100`,
  );
  return r.body.rows.map((row) => row.report.pinObservations[0].measurement.significand).sort((a, b) => a - b);
};

describe('retention', () => {
  it('prunes what is older than measurementsExpirationDays, per environment, in batches', async () => {
    const short = await api.login('monitoring', ['READ', 'STATIC', 'ENVIRONMENT_ADMIN']);
    const long = await api.login('monitoring', ['READ', 'STATIC']);
    expect((await short.request('PUT', '/environment/', { measurementsExpirationDays: 30 })).status).toBe(200);
    const a = await pinWithHistory(api.ctx.db, short, [1, 10, 29, 31, 40, 400]);
    const b = await pinWithHistory(api.ctx.db, long, [1, 31, 400]);
    const pruned = await pruneExpired(api.ctx.db, 2);
    expect(pruned.measurements).toBeGreaterThanOrEqual(3);
    expect(await ages(short, a)).toEqual([1, 10, 29]);
    // the other environment keeps its default of 3650 days
    expect(await ages(long, b)).toEqual([1, 31, 400]);
    expect((await pruneExpired(api.ctx.db)).measurements).toBe(0);
    // the charts' hourly rollup goes with the measurements
    const hours = async (pinHashId: string) =>
      (
        await api.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM measurement_hourly h JOIN pin p ON p.id = h.pin_id WHERE p.hash_id = $1', [
          pinHashId,
        ])
      ).rows[0].n;
    expect(await hours(a)).toBe(3);
    expect(await hours(b)).toBe(3);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneExpired } from '../../src/monitoring/retention/prune.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addPin, addPinGroup } from './fixtures.ts';

// measurementsExpirationDays: older measurements on an environment's pins are pruned.

let api: TestApi;
beforeAll(async () => { api = await startTestApi(); });
afterAll(async () => { await api.close(); });

const DAY = 86_400_000;

/** A pin group with one pin holding one report and measurement per age in days (stored as the ingest would). */
async function pinWithHistory(c: ApiClient, ages: number[]) {
  const pg = await addPinGroup(c);
  const pin = await addPin(c, pg.hashId, 'p');
  const { rows: [ids] } = await api.ctx.db.query<{ env: number; pg: number; pin: number }>(
    'SELECT p.environment_id AS env, p.pin_group_id AS pg, p.id AS pin FROM pin p WHERE p.hash_id = $1', [pin.hashId]);
  const { rows: [q] } = await api.ctx.db.query<{ id: number }>(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude) VALUES (md5(random()::text), $1, '"V"', 'V', '#000000', 'V', 0) RETURNING id`, [ids.env]);
  for (const age of ages) {
    const at = new Date(Date.now() - age * DAY);
    const { rows: [r] } = await api.ctx.db.query<{ id: number }>(
      `INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id) VALUES (md5(random()::text), $1, $2, $3) RETURNING id`, [ids.env, at, ids.pg]);
    await api.ctx.db.query(
      `INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
       VALUES (md5(random()::text), $1, $2, $3, $4, 0, 0, $5, 0, $6)`, [r.id, ids.env, q.id, ids.pin, at, age]);
  }
  return pin.hashId;
}

const ages = async (c: ApiClient, pinHashId: string) => {
  const r = await c.request<{ rows: { report: { pinObservations: { measurement: { significand: number } }[] } }[] }>('GET', `/measurement/?pinHashIds=${pinHashId}&rowsPerPage=100`);
  return r.body.rows.map((row) => row.report.pinObservations[0].measurement.significand).sort((a, b) => a - b);
};

describe('retention', () => {
  it('prunes what is older than measurementsExpirationDays, per environment, in batches', async () => {
    const short = await api.login('monitoring', ['READ', 'STATIC', 'ENVIRONMENT_ADMIN']);
    const long = await api.login('monitoring', ['READ', 'STATIC']);
    expect((await short.request('PUT', '/environment/', { measurementsExpirationDays: 30 })).status).toBe(200);
    const a = await pinWithHistory(short, [1, 10, 29, 31, 40, 400]);
    const b = await pinWithHistory(long, [1, 31, 400]);
    const pruned = await pruneExpired(api.ctx.db, 2);
    expect(pruned.measurements).toBeGreaterThanOrEqual(3);
    expect(await ages(short, a)).toEqual([1, 10, 29]);
    // the other environment keeps its default of 3650 days
    expect(await ages(long, b)).toEqual([1, 31, 400]);
    expect((await pruneExpired(api.ctx.db)).measurements).toBe(0);
  });
});

import qs from 'qs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../src/app/context.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { pinWithHistory } from '../monitoring/fixtures.ts';
import { startStandby, type PgStandby } from '../support/pg-standby.ts';
import { startPrivatePostgres, type PrivatePostgres } from '../support/private-postgres.ts';

// DATABASE_READ_URL: measurement find, chart series and analytics read from a streaming replica.

let primary: PrivatePostgres;
let standby: PgStandby;
let ctx: AppContext;
let api: TestApi;

beforeAll(async () => {
  primary = await startPrivatePostgres();
  // the copy is made before the schema: the migrations reach it as streamed WAL
  standby = await startStandby(primary);
  ctx = await testContext({ DATABASE_URL: primary.url, DATABASE_READ_URL: standby.url });
  api = await startTestApi(ctx);
}, 120_000);
afterAll(async () => {
  await api?.close();
  standby?.destroy();
  primary?.destroy();
});

/** What each read-heavy operation answers for the pin: measurement find rows, chart series points, analytics count. */
async function reads(c: ApiClient, pinHashId: string, quantityHashId: string): Promise<number[]> {
  const day = 24 * 3600 * 1000;
  const [startAt, endAt] = [new Date(Date.now() - 30 * day).toISOString(), new Date(Date.now() + day).toISOString()];
  const found = await c.request<{ rows: unknown[] }>('GET', `/measurement/?pinHashIds=${pinHashId}&includePinsWithoutReports=false&rowsPerPage=100`);
  const chart = await c.request<{ series: { measurements: unknown[] }[] }>(
    'GET',
    `/chart/?startAt=${startAt}&endAt=${endAt}&series[0][pinHashId]=${pinHashId}&series[0][quantityHashId]=${quantityHashId}`,
  );
  const analytics = await c.request<{ rows: number[][] }>('GET', `/analytics/?${qs.stringify({ source: 'measurement', columns: [{ type: 'count' }] })}`);
  for (const r of [found, chart, analytics]) expect(r.status).toBe(200);
  return [found.body.rows.length, chart.body.series[0].measurements.length, analytics.body.rows[0][0]];
}

describe('a read replica (DATABASE_READ_URL)', () => {
  it('is what the read pool talks to, and the primary what the rest does', async () => {
    expect((await ctx.db.read.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')).rows[0].r).toBe(true);
    expect((await ctx.db.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')).rows[0].r).toBe(false);
  });

  it('serves measurement find, chart series and analytics: what it has replayed, the rest once replay catches up', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pin = await pinWithHistory(ctx.db, c, [1, 2]);
    const {
      rows: [ids],
    } = await ctx.db.query<{ env: number; pg: number; pin: number; q: number; qHash: string }>(
      `SELECT p.environment_id AS env, p.pin_group_id AS pg, p.id AS pin, q.id AS q, q.hash_id AS "qHash"
         FROM pin p JOIN measurement m ON m.pin_id = p.id JOIN quantity q ON q.id = m.quantity_id WHERE p.hash_id = $1 LIMIT 1`,
      [pin],
    );
    await standby.caughtUp();
    expect(await reads(c, pin, ids.qHash)).toEqual([2, 2, 2]);

    // a replica behind the primary: a report written now is not read yet
    await standby.pauseReplay();
    const at = new Date(Date.now() - 3600_000);
    const {
      rows: [r],
    } = await ctx.db.query<{ id: number }>(
      'INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id) VALUES (md5(random()::text), $1, $2, $3) RETURNING id',
      [ids.env, at, ids.pg],
    );
    await ctx.db.query(
      `INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
       VALUES (md5(random()::text), $1, $2, $3, $4, 0, 0, $5, 0, 7)`,
      [r.id, ids.env, ids.q, ids.pin, at],
    );
    expect((await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM measurement WHERE pin_id = $1', [ids.pin])).rows[0].n).toBe(3);
    expect(await reads(c, pin, ids.qHash)).toEqual([2, 2, 2]);

    await standby.resumeReplay();
    await standby.caughtUp();
    expect(await reads(c, pin, ids.qHash)).toEqual([3, 3, 3]);
  });

  it('keeps environments apart on the replica too', async () => {
    const a = await api.login('monitoring', ['READ', 'STATIC']);
    const b = await api.login('monitoring', ['READ', 'STATIC']);
    const pin = await pinWithHistory(ctx.db, a, [1]);
    await standby.caughtUp();
    const found = await b.request<{ rows: unknown[] }>('GET', `/measurement/?pinHashIds=${pin}`);
    expect(found.status).toBe(200);
    expect(found.body.rows).toEqual([]);
    const counted = await b.request<{ rows: number[][] }>('GET', `/analytics/?${qs.stringify({ source: 'measurement', columns: [{ type: 'count' }] })}`);
    expect(counted.body.rows).toEqual([[0]]);
  });
});

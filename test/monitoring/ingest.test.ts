import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportIngestRoutes } from '../../src/monitoring/reports/routes.ts';
import { startTestApi, type TestApi } from '../helpers.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(undefined, reportIngestRoutes);
});
afterAll(async () => {
  await api.close();
});

const post = (body: string, token = api.ctx.keys.internalToken) =>
  api.app.inject({
    method: 'POST',
    url: '/internal/condition-reports',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    payload: body,
  });

describe('monitoring core intake', () => {
  it('stores a batch once however often it is pushed, and only on quantities of the same environment', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const qa = (await a.request<{ hashId: string }>('POST', '/quantity/', { name: 'V', unit: 'V', defaultOrderOfMagnitude: 0 })).body.hashId;
    const qb = (await b.request<{ hashId: string }>('POST', '/quantity/', { name: 'V', unit: 'V', defaultOrderOfMagnitude: 0 })).body.hashId;
    const report = (hashId: string, quantityHashId: string) => ({
      hashId,
      environmentHashId: a.environmentHashId,
      deviceHashId: 'none',
      reportTypeHashId: 'none',
      generatedAt: '2026-11-01T00:00:00.000Z',
      fields: {},
      payload: '{}',
      measurements: [
        {
          hashId: `${hashId}m`,
          channelIndex: 0,
          channelMeasurementIndex: 0,
          quantityHashId,
          generatedAt: '2026-11-01T00:00:00.000Z',
          orderOfMagnitude: -1,
          significand: 215,
        },
      ],
    });
    const id = `r${Date.now()}`;
    const body = JSON.stringify({ reports: [report(id, qa), report(`${id}x`, qb)] });
    const first = await post(body);
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ stored: 1 });
    expect((await post(body)).json()).toEqual({ stored: 0 });
    const rows = await api.ctx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM measurement m JOIN condition_report r ON r.id = m.report_id WHERE r.hash_id = ANY($1)',
      [[id, `${id}x`]],
    );
    expect(rows.rows[0].n).toBe(1);
  });

  it('refuses a wrong token and a malformed batch', async () => {
    expect((await post('{"reports":[]}', 'wrong')).statusCode).toBe(401);
    const bad = await post('{"reports":[{"hashId":"x","generatedAt":"not a date","environmentHashId":"e"}]}');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().key).toBe('parameter_error');
    expect((await post('[1,2]')).statusCode).toBe(400);
  });
});

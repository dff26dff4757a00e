import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportIngestRoutes } from '../../src/monitoring/reports/routes.ts';
import { isOwnApi, MonitoringCoreClient } from '../../src/pipeline/monitoring-client.ts';
import type { ConditionReportIn } from '../../src/monitoring/reports/store.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';

let api: TestApi;
let url: string;
let a: ApiClient;
let b: ApiClient;
let qa: string;
let qb: string;
beforeAll(async () => {
  api = await startTestApi(undefined, reportIngestRoutes);
  url = await api.app.listen({ port: 0, host: '127.0.0.1' });
  a = await api.login('connectivity');
  b = await api.login('connectivity');
  qa = (await a.request<{ hashId: string }>('POST', '/quantity/', { name: 'V', unit: 'V', defaultOrderOfMagnitude: 0 })).body.hashId;
  qb = (await b.request<{ hashId: string }>('POST', '/quantity/', { name: 'V', unit: 'V', defaultOrderOfMagnitude: 0 })).body.hashId;
});
afterAll(async () => {
  await api.close();
});

const report = (hashId: string, environmentHashId: string, quantityHashId: string, significand: number): ConditionReportIn => ({
  hashId,
  environmentHashId,
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
      significand,
    },
  ],
});

const storedOf = async (hashIds: string[]) =>
  (
    await api.ctx.db.query<{ hash_id: string; significand: number }>(
      'SELECT r.hash_id, m.significand FROM condition_report r JOIN measurement m ON m.report_id = r.id WHERE r.hash_id = ANY($1) ORDER BY r.hash_id',
      [hashIds],
    )
  ).rows;

describe("the worker's monitoring core client", () => {
  it.each(['http', 'local'] as const)('stores each report once however often it is pushed (%s), only on quantities of its own environment', async (kind) => {
    const client = new MonitoringCoreClient(kind === 'http' ? { url, token: api.ctx.keys.internalToken } : { db: api.ctx.db });
    expect(client.local).toBe(kind === 'local');
    const id = `${kind}${Date.now()}`;
    // a report of A naming B's quantity keeps no measurement
    const reports = [report(id, a.environmentHashId, qa, 215), report(`${id}x`, a.environmentHashId, qb, 7)];
    await Promise.all(reports.map((r) => client.push(r)));
    await Promise.all(reports.map((r) => client.push({ ...r, measurements: r.measurements.map((m) => ({ ...m, significand: 999 })) })));
    await client.close();
    expect(await storedOf([id, `${id}x`])).toEqual([{ hash_id: id, significand: 215 }]);
  });

  it('fails the push when the HTTP intake refuses the batch', async () => {
    const client = new MonitoringCoreClient({ url, token: 'wrong' });
    await expect(client.push(report(`bad${Date.now()}`, a.environmentHashId, qa, 1))).rejects.toThrow(/answered 401/);
    await client.close();
  });

  it('recognises the API of this process only on a loopback address and its own port', () => {
    expect(isOwnApi('http://127.0.0.1:8080', 8080)).toBe(true);
    expect(isOwnApi('http://localhost:8080/', 8080)).toBe(true);
    expect(isOwnApi('http://[::1]:8080', 8080)).toBe(true);
    expect(isOwnApi('http://127.0.0.1:8081', 8080)).toBe(false);
    expect(isOwnApi('http://monitoring.internal:8080', 8080)).toBe(false);
    expect(isOwnApi('https://127.0.0.1:8080', 8080)).toBe(false);
    expect(isOwnApi('http://127.0.0.1', 80)).toBe(true);
    expect(isOwnApi('not a url', 8080)).toBe(false);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup, pinWithHistory } from './fixtures.ts';

// measurement find: paging under every sort, filters, limits. (Values arriving from devices: customer-e2e.test.ts.)

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Row {
  report: { hashId: string; generatedAt: string; pinObservations: { measurement: { significand: number; pinHashId: string } }[] } | null;
  pin: { hashId: string; name: string };
  pinGroup: { name: string };
}

async function walk(c: ApiClient, query: string, rowsPerPage: number): Promise<Row[]> {
  const out: Row[] = [];
  let offset: string | null = null;
  do {
    const r: { status: number; body: { rows: Row[]; nextPageOffset: string | null } } = await c.request(
      'GET',
      `/measurement/?${query}&rowsPerPage=${rowsPerPage}${offset ? `&offset=${offset}` : ''}`,
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.rows.length).toBeLessThanOrEqual(rowsPerPage);
    out.push(...r.body.rows);
    offset = r.body.nextPageOffset;
  } while (offset);
  return out;
}

describe('measurement find', () => {
  it('pages every (report, pin) row once under each sort and direction; filters by pin group, pin and time', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const north = (await addPinGroup(c, 'north')).hashId;
    const south = (await addPinGroup(c, 'south')).hashId;
    const a = await pinWithHistory(api.ctx.db, c, [1, 2, 3, 4, 5], north, 'alpha');
    const b = await pinWithHistory(api.ctx.db, c, [1.5, 2.5, 3.5], north, 'bravo');
    const s = await pinWithHistory(api.ctx.db, c, [2, 6], south, 'charlie');
    const key = (r: Row) => `${r.pin.hashId}:${r.report!.pinObservations[0].measurement.significand}`;
    const all = [...[1, 2, 3, 4, 5].map((v) => `${a}:${v}`), ...[1.5, 2.5, 3.5].map((v) => `${b}:${Math.round(v)}`), `${s}:2`, `${s}:6`];
    for (const sortBy of ['pinName', 'generatedAt', 'pinGroupName', 'edgeName']) {
      for (const descending of [true, false]) {
        const rows = await walk(c, `sortBy=${sortBy}&descending=${descending}`, 3);
        expect(rows.map(key).sort(), `${sortBy} ${descending}`).toEqual([...all].sort());
        if (sortBy === 'generatedAt') {
          const times = rows.map((r) => r.report!.generatedAt);
          expect(times).toEqual([...times].sort((x, y) => (descending ? y.localeCompare(x) : x.localeCompare(y))));
        }
        if (sortBy === 'pinName') {
          const names = rows.map((r) => r.pin.name);
          expect(names).toEqual([...names].sort((x, y) => (descending ? y.localeCompare(x) : x.localeCompare(y))));
        }
      }
    }
    expect((await walk(c, `pinGroupHashIds[0]=${south}`, 10)).map(key).sort()).toEqual([`${s}:2`, `${s}:6`]);
    expect((await walk(c, `pinHashIds[0]=${b}&sortBy=generatedAt`, 1)).map((r) => r.pin.hashId)).toEqual([b, b, b]);
    const since = new Date(Date.now() - 3.2 * 86_400_000).toISOString();
    const before = new Date(Date.now() - 1.2 * 86_400_000).toISOString();
    expect((await walk(c, `pinHashIds[0]=${a}&since=${since}&before=${before}&sortBy=generatedAt&descending=false`, 10)).map(key)).toEqual([
      `${a}:3`,
      `${a}:2`,
    ]);
    // another environment's pin names nothing here
    const other = await api.login('monitoring', ['READ']);
    expect(await walk(other, `pinHashIds[0]=${a}`, 10)).toEqual([]);
    expect(await walk(other, '', 10)).toEqual([]);
  });

  it('includePinsWithoutReports (default true): pins the filters name without a report in the range get one row with report null; false leaves them out', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const north = (await addPinGroup(c, 'north')).hashId;
    const a = await pinWithHistory(api.ctx.db, c, [1, 2, 3], north, 'alpha');
    const quiet = (await addPin(c, north, 'bravo')).hashId;
    const idle = (await addPin(c, (await addPinGroup(c, 'south')).hashId, 'charlie')).hashId;
    const key = (r: Row) => `${r.pin.hashId}:${r.report ? r.report.pinObservations[0].measurement.significand : 'none'}`;
    const withReports = [1, 2, 3].map((v) => `${a}:${v}`);
    for (const sortBy of ['pinName', 'generatedAt', 'pinGroupName', 'edgeName']) {
      for (const descending of [true, false]) {
        const rows = await walk(c, `sortBy=${sortBy}&descending=${descending}`, 2);
        expect(rows.map(key).sort(), `${sortBy} ${descending}`).toEqual([...withReports, `${quiet}:none`, `${idle}:none`].sort());
        const empty = rows.find((r) => r.pin.hashId === quiet)!;
        expect(empty).toEqual({
          report: null,
          pinGroup: { hashId: north, name: 'north' },
          pin: { hashId: quiet, name: 'bravo', fields: { id: 'bravo' } },
          edge: null,
        });
        if (sortBy === 'pinName')
          expect(rows.map((r) => r.pin.name)).toEqual(rows.map((r) => r.pin.name).sort((x, y) => (descending ? y.localeCompare(x) : x.localeCompare(y))));
        // sorted by time, the rows without a time come last
        if (sortBy === 'generatedAt') expect(rows.slice(3).map((r) => r.report)).toEqual([null, null]);
        const without = await walk(c, `sortBy=${sortBy}&descending=${descending}&includePinsWithoutReports=false`, 2);
        expect(without.map(key).sort()).toEqual([...withReports].sort());
      }
    }
    // in a range without reports, the pin with history has none either; filters by pin group and pin name the pins
    const since = new Date(Date.now() - 10 * 86_400_000).toISOString();
    const before = new Date(Date.now() - 5 * 86_400_000).toISOString();
    expect((await walk(c, `since=${since}&before=${before}&pinGroupHashIds[0]=${north}`, 10)).map(key).sort()).toEqual([`${a}:none`, `${quiet}:none`].sort());
    expect((await walk(c, `pinHashIds[0]=${idle}`, 10)).map(key)).toEqual([`${idle}:none`]);
    expect((await walk(c, 'search=charl', 10)).map(key)).toEqual([`${idle}:none`]);
    expect((await walk(c, 'search=alph&sortBy=generatedAt', 2)).map(key)).toEqual([3, 2, 1].map((v) => `${a}:${v}`).reverse());
    expect(await walk(c, `since=${since}&before=${before}&includePinsWithoutReports=false`, 10)).toEqual([]);
    // another environment gets no rows of these pins
    const other = await api.login('monitoring', ['READ']);
    expect(await walk(other, `pinHashIds[0]=${quiet}`, 10)).toEqual([]);
    expect(await walk(other, '', 10)).toEqual([]);
  });

  it('sorted by time, reports whose measurements are all on deleted pins neither end nor shorten the walk', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pg = (await addPinGroup(c, 'g')).hashId;
    const kept = await pinWithHistory(api.ctx.db, c, [1, 2, 3, 4, 5], pg, 'kept');
    const gone = await pinWithHistory(api.ctx.db, c, [1.1, 1.2, 1.3, 1.4, 1.5, 1.6], pg, 'gone');
    expect((await c.request('DELETE', `/graph/pin/${gone}`)).status).toBe(204);
    for (const descending of [true, false]) {
      const rows = await walk(c, `sortBy=generatedAt&descending=${descending}&includePinsWithoutReports=false`, 1);
      expect(rows.map((r) => `${r.pin.hashId}:${r.report!.pinObservations[0].measurement.significand}`)).toEqual(
        (descending ? [1, 2, 3, 4, 5] : [5, 4, 3, 2, 1]).map((v) => `${kept}:${v}`),
      );
    }
  });

  it('answers limits with parameter_errors naming the field', async () => {
    const c = await api.login('monitoring', ['READ']);
    const many = (name: string, n: number) => Array.from({ length: n }, (_, i) => `${name}[${i}]=x${i}`).join('&');
    expectParameterError(await c.request('GET', `/measurement/?${many('pinGroupHashIds', 51)}`), 'pinGroupHashIds', '50');
    expectParameterError(await c.request('GET', `/measurement/?${many('pinHashIds', 51)}`), 'pinHashIds', '50');
    expectParameterError(await c.request('GET', `/measurement/?${many('quantityHashIds', 65)}`), 'quantityHashIds', '64');
    expectParameterError(await c.request('GET', `/measurement/?${many('reportTypeHashIds', 21)}`), 'reportTypeHashIds', '20');
    expectParameterError(await c.request('GET', '/measurement/?rowsPerPage=501'), 'rowsPerPage', '500');
    expectParameterError(await c.request('GET', '/measurement/?sortBy=colour'), 'sortBy');
    expectParameterError(await c.request('GET', '/measurement/?since=yesterday'), 'since');
    expectParameterError(await c.request('GET', '/measurement/?offset=bm9wZQ'), 'offset');
  });
});

describe('pin-group performance', () => {
  it('counts reports and measurements per bucket of the period around asOf', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pg = await addPinGroup(c, 'perf');
    await pinWithHistory(api.ctx.db, c, [0.01, 0.02, 1.01], pg.hashId, 'p');
    const asOf = new Date().toISOString();
    const r = await c.request<
      { startAt: string; endAt: string; reports: { expected: number; received: number }; measurements: { good: number; serious: number; critical: number } }[]
    >('GET', `/graph/pin-group/${pg.hashId}/performance?asOf=${asOf}&interval=year`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toHaveLength(12);
    expect(r.body[0].startAt).toBe(`${asOf.slice(0, 4)}-01-01T00:00:00.000Z`);
    // counted over ten years, so the test does not depend on the day it runs
    const years = (await c.request<typeof r.body>('GET', `/graph/pin-group/${pg.hashId}/performance?asOf=${asOf}&interval=years`)).body;
    expect(years).toHaveLength(10);
    expect(years.reduce((a, b) => a + b.reports.received, 0)).toBe(3);
    expect(years.reduce((a, b) => a + b.measurements.good, 0)).toBe(3);
    expect(years[9].endAt).toBe(`${Number(asOf.slice(0, 4)) + 1}-01-01T00:00:00.000Z`);
    const days = await c.request<unknown[]>('GET', `/graph/pin-group/${pg.hashId}/performance?asOf=${asOf}&interval=isoweek`);
    expect(days.body).toHaveLength(7);
    expect((await c.request<unknown[]>('GET', `/graph/pin-group/${pg.hashId}/performance?asOf=${asOf}&interval=day`)).body).toHaveLength(24);
    expectParameterError(await c.request('GET', `/graph/pin-group/${pg.hashId}/performance?asOf=${asOf}&interval=decade`), 'interval');
    expectParameterError(await c.request('GET', `/graph/pin-group/${pg.hashId}/performance`), 'asOf');
    const other = await api.login('monitoring', ['READ']);
    expect((await other.request('GET', `/graph/pin-group/${pg.hashId}/performance?asOf=${asOf}`)).status).toBe(404);
  });
});

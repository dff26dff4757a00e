import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { EVENT_HANDLER, PARSER, expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPinGroup } from './fixtures.ts';
import { ok } from './linked-device.ts';

// Measurement filters over the REST interface: shapes, what a filter may name, rights, tenants, limits.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

// SENSORS: claiming devices
const RIGHTS = ['READ', 'STATIC', 'SENSORS', 'REPORTS', 'ENVIRONMENT_ADMIN'];
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const FIELDS = { pinGroup: [], pin: [], measurement: [{ key: 'remark', name: 'Remark', type: 'string' }] };

interface Filter {
  hashId: string;
  name: string;
  description: string;
  period: unknown;
  includePinsWithoutReports: boolean;
  createdAt: string;
  updatedAt: string;
  deletedAt: null;
}
interface FilterGet {
  measurementFilter: Filter;
  reportTypes: { hashId: string; name: string; fieldConfigurations: unknown; type: string; deletedAt: null }[];
  grid: { hashId: string; typeKey: string; name: string; fields: unknown; deletedAt: null } | null;
  pinGroups: { hashId: string; name: string }[];
  quantities: { hashId: string; name: unknown; unit: string | null }[];
  fieldKeys: string[];
  pinFieldKeys: string[];
  edgeFieldKeys: string[];
}

/** A customer that claimed a device of a supplier: the supplier's report type and quantity reach it through that device. */
async function customerOfSupplier(rights = RIGHTS) {
  const supplier = await api.login('connectivity');
  const customer = await api.login('monitoring', rights);
  const supplierQuantity = ok(await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V' })).hashId;
  const reportType = ok(
    await supplier.request<{ hashId: string }>('POST', '/supplier-report-type/', { name: 'Hourly', fieldConfigurations: FIELDS, parser: PARSER }),
  ).hashId;
  const deviceTypeHashId = ok(
    await supplier.request<{ hashId: string }>('POST', '/device-type/', {
      name: 'logger',
      eventHandler: EVENT_HANDLER,
      fieldConfigurations: [],
      pinGroupFieldConfigurations: [],
      channels: [],
      commandTypeHashIds: [],
    }),
  ).hashId;
  const device = ok(
    await supplier.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: `mf-${reportType}`,
      deviceTypeHashId,
      psk: '00'.repeat(16),
      pskIdentity: `mf-${reportType}`,
    }),
  ).hashId;
  const token = ok(await supplier.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [device] }))
    .claimTokens[0].claimToken;
  ok(await customer.request('POST', '/device/claim', { claimTokens: [token] }));
  const ownQuantity = ok(await customer.request<{ hashId: string }>('POST', '/quantity/', { name: 'Depth', unit: 'm' })).hashId;
  return { supplier, customer, reportType, supplierQuantity, ownQuantity };
}

async function addFilter(c: ApiClient, body: Record<string, unknown>): Promise<string> {
  const r = await c.request<{ hashId: string }>('POST', '/measurement-filter/', body);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(Object.keys(r.body)).toEqual(['hashId']);
  return r.body.hashId;
}

const minimal = (quantityHashId: string) => ({
  name: 'North',
  description: '',
  period: 'lastMonth',
  reportTypeHashIds: [],
  quantityHashIds: [quantityHashId],
  fieldKeys: [],
});

describe('measurement filters', () => {
  it('add and get answer the filter with what it names, in the order it names them', async () => {
    const { customer: c, reportType, supplierQuantity, ownQuantity } = await customerOfSupplier();
    const [a, b] = [await addPinGroup(c, 'A'), await addPinGroup(c, 'B')];
    const grid = ok(
      await c.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'Route north' }, pinGroupHashIds: [a.hashId] }),
    ).hashId;
    const hashId = await addFilter(c, {
      name: 'North',
      description: 'Temperatures in the North',
      period: { since: '2026-01-01T00:00:00+01:00', before: '2026-07-01T00:00:00Z' },
      includePinsWithoutReports: false,
      reportTypeHashIds: [reportType],
      gridHashId: grid,
      pinGroupHashIds: [b.hashId, a.hashId],
      quantityHashIds: [ownQuantity, supplierQuantity],
      fieldKeys: ['remark'],
      pinFieldKeys: ['id'],
      edgeFieldKeys: ['id', 'material'],
    });
    const got = ok(await c.request<FilterGet>('GET', `/measurement-filter/${hashId}`));
    expect(got).toEqual({
      measurementFilter: {
        hashId,
        name: 'North',
        description: 'Temperatures in the North',
        period: { since: '2025-12-31T23:00:00.000Z', before: '2026-07-01T00:00:00.000Z' },
        includePinsWithoutReports: false,
        createdAt: expect.stringMatching(ISO),
        updatedAt: expect.stringMatching(ISO),
        deletedAt: null,
      },
      reportTypes: [{ hashId: reportType, name: 'Hourly', fieldConfigurations: FIELDS, type: 'device', deletedAt: null }],
      grid: { hashId: grid, typeKey: 'pinGroup', name: 'Route north', fields: { id: 'Route north' }, deletedAt: null },
      pinGroups: [
        expect.objectContaining({ hashId: b.hashId, name: 'B', deletedAt: null }),
        expect.objectContaining({ hashId: a.hashId, name: 'A', deletedAt: null }),
      ],
      quantities: [
        expect.objectContaining({ hashId: ownQuantity, name: 'Depth', unit: 'm' }),
        expect.objectContaining({ hashId: supplierQuantity, name: 'Voltage', unit: 'V' }),
      ],
      fieldKeys: ['remark'],
      pinFieldKeys: ['id'],
      edgeFieldKeys: ['id', 'material'],
    });
  });

  it('answers at Api-Version 5 and 8 in their shapes: a translated quantity name is plain text before 7, a missing unit is "-" before 8', async () => {
    const { customer: c, supplier, reportType } = await customerOfSupplier();
    const translated = ok(await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: { en: 'Current', nl: 'Stroom' }, unit: null })).hashId;
    const hashId = await addFilter(c, { ...minimal(translated), reportTypeHashIds: [reportType] });
    const at = (v: number) => c.request<FilterGet>('GET', `/measurement-filter/${hashId}`, undefined, { 'api-version': String(v) });
    expect(ok(await at(5)).quantities.map((q) => [q.name, q.unit])).toEqual([['Current', '-']]);
    expect(ok(await at(8)).quantities.map((q) => [q.name, q.unit])).toEqual([[{ en: 'Current', nl: 'Stroom' }, null]]);
    expect(ok(await at(5)).reportTypes.map((t) => t.name)).toEqual(['Hourly']);
  });

  it('optional members take the SDK defaults: every pin shown, no grid, no pin groups, no pin or edge fields', async () => {
    const { customer: c, ownQuantity } = await customerOfSupplier();
    const hashId = await addFilter(c, minimal(ownQuantity));
    const got = ok(await c.request<FilterGet>('GET', `/measurement-filter/${hashId}`));
    expect(got.measurementFilter).toMatchObject({ period: 'lastMonth', includePinsWithoutReports: true, description: '' });
    expect(got).toMatchObject({ reportTypes: [], grid: null, pinGroups: [], fieldKeys: [], pinFieldKeys: [], edgeFieldKeys: [] });
  });

  it('find answers the filters (default sort hashId, also name and updatedAt), update changes only what is given, delete removes', async () => {
    const { customer: c, ownQuantity, supplierQuantity } = await customerOfSupplier();
    const first = await addFilter(c, { ...minimal(ownQuantity), name: 'b' });
    const second = await addFilter(c, { ...minimal(ownQuantity), name: 'a', period: 'lastYear' });
    const rows = await findAll<{ measurementFilter: Filter }>(c, '/measurement-filter/', 1);
    expect(rows.map((r) => r.measurementFilter.hashId)).toEqual([first, second].sort().reverse());
    expect(rows.find((r) => r.measurementFilter.hashId === second)).toEqual({
      measurementFilter: {
        hashId: second,
        name: 'a',
        description: '',
        period: 'lastYear',
        includePinsWithoutReports: true,
        createdAt: expect.stringMatching(ISO),
        updatedAt: expect.stringMatching(ISO),
        deletedAt: null,
      },
    });
    expect((await findAll<{ measurementFilter: Filter }>(c, '/measurement-filter/?sortBy=name&descending=false')).map((r) => r.measurementFilter.name)).toEqual(
      ['a', 'b'],
    );
    expect(
      (await c.request('POST', `/measurement-filter/${first}`, { name: 'c', period: { before: '2026-02-01T00:00:00Z' }, quantityHashIds: [supplierQuantity] }))
        .status,
    ).toBe(204);
    const got = ok(await c.request<FilterGet>('GET', `/measurement-filter/${first}`));
    expect(got.measurementFilter).toMatchObject({
      name: 'c',
      period: { before: '2026-02-01T00:00:00.000Z' },
      description: '',
      includePinsWithoutReports: true,
    });
    expect(got.quantities.map((q) => q.hashId)).toEqual([supplierQuantity]);
    expect((await findAll<{ measurementFilter: Filter }>(c, '/measurement-filter/?sortBy=updatedAt')).map((r) => r.measurementFilter.hashId)).toEqual([
      first,
      second,
    ]);
    expect((await c.request('DELETE', `/measurement-filter/${first}`)).status).toBe(204);
    expect((await c.request('GET', `/measurement-filter/${first}`)).status).toBe(404);
    expect((await c.request('POST', `/measurement-filter/${first}`, { name: 'd' })).status).toBe(404);
    expect((await c.request('DELETE', `/measurement-filter/${first}`)).status).toBe(404);
    expect((await findAll<{ measurementFilter: Filter }>(c, '/measurement-filter/')).map((r) => r.measurementFilter.hashId)).toEqual([second]);
  });

  it('a pin group or grid deleted later drops out of the filter', async () => {
    const { customer: c, ownQuantity } = await customerOfSupplier();
    const [a, b] = [await addPinGroup(c, 'A'), await addPinGroup(c, 'B')];
    const grid = ok(await c.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'Route' }, pinGroupHashIds: [a.hashId] })).hashId;
    const hashId = await addFilter(c, { ...minimal(ownQuantity), gridHashId: grid, pinGroupHashIds: [a.hashId, b.hashId] });
    expect((await c.request('DELETE', `/graph/pin-group/${a.hashId}`)).status).toBe(204);
    expect((await c.request('DELETE', `/graph/grid/${grid}`)).status).toBe(204);
    const got = ok(await c.request<FilterGet>('GET', `/measurement-filter/${hashId}`));
    expect([got.grid, got.pinGroups.map((p) => p.hashId)]).toEqual([null, [b.hashId]]);
  });

  it('changing a filter needs REPORTS, reading it READ; a connectivity environment has none', async () => {
    const { customer: owner, ownQuantity } = await customerOfSupplier();
    const hashId = await addFilter(owner, minimal(ownQuantity));
    const readOnly = await api.login('monitoring', ['READ', 'ENVIRONMENT_ADMIN']);
    const readOnlyQuantity = ok(await readOnly.request<{ hashId: string }>('POST', '/quantity/', { name: 'Depth', unit: 'm' })).hashId;
    const reportsOnly = await api.login('monitoring', ['REPORTS']);
    // rights are checked before the filter is looked up
    for (const r of [
      await readOnly.request<ErrorBody>('POST', '/measurement-filter/', minimal(readOnlyQuantity)),
      await readOnly.request<ErrorBody>('POST', `/measurement-filter/${hashId}`, { name: 'x' }),
      await readOnly.request<ErrorBody>('DELETE', `/measurement-filter/${hashId}`),
    ])
      expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    for (const r of [
      await reportsOnly.request<ErrorBody>('GET', '/measurement-filter/'),
      await reportsOnly.request<ErrorBody>('GET', `/measurement-filter/${hashId}`),
    ]) {
      expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    }
    const supplier = await api.login('connectivity');
    const r = await supplier.request<ErrorBody>('GET', '/measurement-filter/');
    expect([r.status, r.body.key]).toEqual([403, 'right_error']);
  });

  it("another environment's filter is not found nor listed, and its pin groups, grids, quantities and unclaimed report types cannot be named", async () => {
    const mine = await customerOfSupplier();
    const theirs = await customerOfSupplier();
    const c = mine.customer;
    const filter = await addFilter(theirs.customer, minimal(theirs.ownQuantity));
    expect((await c.request('GET', `/measurement-filter/${filter}`)).status).toBe(404);
    expect((await c.request('POST', `/measurement-filter/${filter}`, { name: 'stolen' })).status).toBe(404);
    expect((await c.request('DELETE', `/measurement-filter/${filter}`)).status).toBe(404);
    expect(await findAll(c, '/measurement-filter/')).toEqual([]);
    const pg = await addPinGroup(theirs.customer);
    const grid = ok(
      await theirs.customer.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'Theirs' }, pinGroupHashIds: [pg.hashId] }),
    ).hashId;
    const base = minimal(mine.ownQuantity);
    expectParameterError(await c.request('POST', '/measurement-filter/', { ...base, pinGroupHashIds: [pg.hashId] }), 'pinGroupHashIds[0]', pg.hashId);
    expectParameterError(await c.request('POST', '/measurement-filter/', { ...base, gridHashId: grid }), 'gridHashId', grid);
    expectParameterError(
      await c.request('POST', '/measurement-filter/', { ...base, quantityHashIds: [mine.ownQuantity, theirs.ownQuantity] }),
      'quantityHashIds[1]',
      theirs.ownQuantity,
    );
    expectParameterError(await c.request('POST', '/measurement-filter/', { ...base, quantityHashIds: [theirs.supplierQuantity] }), 'quantityHashIds[0]');
    expectParameterError(
      await c.request('POST', '/measurement-filter/', { ...base, reportTypeHashIds: [mine.reportType, theirs.reportType] }),
      'reportTypeHashIds[1]',
      theirs.reportType,
    );
    const own = await addFilter(c, base);
    expectParameterError(await c.request('POST', `/measurement-filter/${own}`, { pinGroupHashIds: [pg.hashId] }), 'pinGroupHashIds[0]');
    expect((await theirs.customer.request<FilterGet>('GET', `/measurement-filter/${filter}`)).body.measurementFilter.name).toBe('North');
  });

  it('limits are parameter_errors naming the field', async () => {
    const { customer: c, ownQuantity } = await customerOfSupplier();
    const base = minimal(ownQuantity);
    const add = (body: Record<string, unknown>) => c.request('POST', '/measurement-filter/', { ...base, ...body });
    expectParameterError(await add({ name: 'x'.repeat(101) }), 'name', '100');
    expectParameterError(await add({ name: '' }), 'name');
    expectParameterError(await add({ description: 'x'.repeat(256) }), 'description', '255');
    expectParameterError(await add({ period: 'lastWeek' }), 'period');
    expectParameterError(await add({ period: { since: 'yesterday' } }), 'period');
    expectParameterError(await add({ quantityHashIds: [] }), 'quantityHashIds');
    expectParameterError(await add({ quantityHashIds: Array.from({ length: 65 }, (_, i) => `q${i}`) }), 'quantityHashIds', '64');
    expectParameterError(await add({ reportTypeHashIds: Array.from({ length: 21 }, (_, i) => `r${i}`) }), 'reportTypeHashIds', '20');
    expectParameterError(await add({ pinGroupHashIds: [] }), 'pinGroupHashIds');
    expectParameterError(await add({ pinGroupHashIds: Array.from({ length: 51 }, (_, i) => `p${i}`) }), 'pinGroupHashIds', '50');
    expectParameterError(await add({ fieldKeys: Array.from({ length: 21 }, (_, i) => `f${i}`) }), 'fieldKeys', '20');
    for (const field of ['name', 'description', 'period', 'reportTypeHashIds', 'quantityHashIds', 'fieldKeys']) {
      const body: Record<string, unknown> = { ...base };
      delete body[field];
      expectParameterError(await c.request('POST', '/measurement-filter/', body), field);
    }
    const hashId = await addFilter(c, base);
    expectParameterError(await c.request('POST', `/measurement-filter/${hashId}`, { quantityHashIds: [] }), 'quantityHashIds');
    expectParameterError(await c.request('POST', `/measurement-filter/${hashId}`, { name: 'x'.repeat(101) }), 'name');
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { field, findAll, PARSER, expectParameterError, type ErrorBody } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface ReportType {
  hashId: string;
  name: string;
  fieldConfigurations: Record<string, unknown[]>;
  deletedAt: string | null;
}

const body = (more: Record<string, unknown> = {}) => ({
  name: 'Temperature',
  fieldConfigurations: { pinGroup: [field('site')], pin: [], measurement: [field('quality', 'integer')] },
  parser: PARSER,
  ...more,
});

async function add(c: ApiClient, more: Record<string, unknown> = {}): Promise<string> {
  const r = await c.request<{ hashId: string }>('POST', '/supplier-report-type/', body(more));
  expect(r.status).toBe(200);
  return r.body.hashId;
}

describe('supplier report types', () => {
  it('adds, gets with its parser, finds, updates and deletes', async () => {
    const c = await api.login('connectivity');
    const r = await c.request<{ hashId: string }>('POST', '/supplier-report-type/', body());
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ hashId: expect.stringMatching(/^[a-z0-9]+$/) });
    const hashId = r.body.hashId;
    const reportType = { hashId, name: 'Temperature', fieldConfigurations: body().fieldConfigurations, deletedAt: null };
    const get = await c.request('GET', `/supplier-report-type/${hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({ reportType, parser: PARSER });
    const find = await c.request('GET', '/supplier-report-type/');
    expect(find.body).toEqual({ nextPageOffset: null, rows: [{ reportType }] });

    const newParser = PARSER.replace('* 100', '* 1000');
    const update = await c.request('POST', `/supplier-report-type/${hashId}`, {
      name: 'Temperature v2',
      parser: newParser,
      fieldConfigurations: { pin: [{ fieldConfiguration: field('depth', 'number') }] },
    });
    expect(update.status).toBe(204);
    const after = await c.request<{ reportType: ReportType; parser: string }>('GET', `/supplier-report-type/${hashId}`);
    expect(after.body).toEqual({
      reportType: { ...reportType, name: 'Temperature v2', fieldConfigurations: { ...body().fieldConfigurations, pin: [field('depth', 'number')] } },
      parser: newParser,
    });
    const stored = await api.ctx.db.query<{ parser_hash: string }>('SELECT parser_hash FROM report_type WHERE hash_id = $1', [hashId]);
    expect(stored.rows[0].parser_hash).toMatch(/^[0-9a-f]{16,}$/);

    expect((await c.request('DELETE', `/supplier-report-type/${hashId}`)).status).toBe(204);
    expect((await c.request('GET', `/supplier-report-type/${hashId}`)).status).toBe(404);
    expect((await c.request('POST', `/supplier-report-type/${hashId}`, { name: 'x' })).status).toBe(404);
    expect((await c.request('DELETE', `/supplier-report-type/${hashId}`)).status).toBe(404);
    expect((await c.request<{ rows: unknown[] }>('GET', '/supplier-report-type/')).body.rows).toEqual([]);
  });

  it('compiles the parser on add and update and reports a syntax error with line and column', async () => {
    const c = await api.login('connectivity');
    const broken = 'function handle(args: { payload: string }) {\n  return {\n    generatedAt: new Date(),,\n  };\n}\n';
    const r = await c.request<ErrorBody>('POST', '/supplier-report-type/', body({ parser: broken }));
    expect(r.status).toBe(400);
    expect(r.body.key).toBe('parameter_error');
    expect(r.body.message).toMatch(/^parser: line 3, column \d+: /);
    expect(r.body.details).toEqual({ field: 'parser', line: 3, column: expect.any(Number) });
    const noHandle = await c.request<ErrorBody>('POST', '/supplier-report-type/', body({ parser: 'const x = 1;\n' }));
    expect(noHandle.status).toBe(400);
    expect(noHandle.body.message).toContain('parser');

    const hashId = await add(c);
    const update = await c.request<ErrorBody>('POST', `/supplier-report-type/${hashId}`, { parser: broken, name: 'not applied' });
    expect(update.status).toBe(400);
    expect(update.body.details).toMatchObject({ field: 'parser', line: 3 });
    expect((await c.request<{ reportType: ReportType; parser: string }>('GET', `/supplier-report-type/${hashId}`)).body).toMatchObject({
      reportType: { name: 'Temperature' },
      parser: PARSER,
    });
  });

  it('enforces the limits, naming the field', async () => {
    const c = await api.login('connectivity');
    await expectParameterError(await c.request('POST', '/supplier-report-type/', body({ parser: 'x'.repeat(1_000_001) })), 'parser', '1000000');
    const many = Array.from({ length: 51 }, (_, i) => field(`f${i}`));
    await expectParameterError(
      await c.request('POST', '/supplier-report-type/', body({ fieldConfigurations: { pinGroup: [], pin: many, measurement: [] } })),
      'fieldConfigurations.pin',
      '50',
    );
    await expectParameterError(
      await c.request('POST', '/supplier-report-type/', body({ fieldConfigurations: { pinGroup: [], pin: [] } })),
      'measurement',
      'required',
    );
    await expectParameterError(
      await c.request('POST', '/supplier-report-type/', body({ fieldConfigurations: { pinGroup: [field('a'), field('a')], pin: [], measurement: [] } })),
      'pinGroup',
      'twice',
    );
    await expectParameterError(await c.request('POST', '/supplier-report-type/', body({ name: undefined })), 'name', 'required');
    const hashId = await add(c);
    await expectParameterError(await c.request('POST', `/supplier-report-type/${hashId}`, { parser: 'x'.repeat(1_000_001) }), 'parser');
    await expectParameterError(
      await c.request('POST', `/supplier-report-type/${hashId}`, { fieldConfigurations: { measurement: many } }),
      'fieldConfigurations.measurement',
      '50',
    );
  });

  it('pages through every report type once (keyset)', async () => {
    const c = await api.login('connectivity');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await add(c, { name: `Report ${i}` }));
    const rows = await findAll<{ reportType: ReportType }>(c, '/supplier-report-type/');
    expect(rows.map((r) => r.reportType.hashId)).toEqual([...ids].sort().reverse());
    const byName = await findAll<{ reportType: ReportType }>(c, '/supplier-report-type/?sortBy=name&descending=false', 3);
    expect(byName.map((r) => r.reportType.name)).toEqual(ids.map((_, i) => `Report ${i}`));
    const search = await c.request<{ rows: { reportType: ReportType }[] }>('GET', '/supplier-report-type/?search=port%203');
    expect(search.body.rows.map((r) => r.reportType.hashId)).toEqual([ids[3]]);
  });

  it("keeps environments apart: B cannot see or touch A's report type", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const hashId = await add(a);
    expect((await b.request<ErrorBody>('GET', `/supplier-report-type/${hashId}`)).body).toMatchObject({ key: 'not_found_error' });
    expect((await b.request('POST', `/supplier-report-type/${hashId}`, { name: 'stolen' })).status).toBe(404);
    expect((await b.request('DELETE', `/supplier-report-type/${hashId}`)).status).toBe(404);
    expect((await b.request<{ rows: unknown[] }>('GET', '/supplier-report-type/')).body.rows).toEqual([]);
    expect((await a.request<{ reportType: ReportType }>('GET', `/supplier-report-type/${hashId}`)).body.reportType.name).toBe('Temperature');
  });
});

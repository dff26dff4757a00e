import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';

// Import requests: the CSV template of the chosen pin groups and report types, the upload checked
// line by line and imported all or nothing, find and delete; rights and tenants.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const RIGHTS = ['READ', 'STATIC', 'IMPORT', 'USERS'];
const HEADER = 'pinGroupHashId,pinGroupName,pinHashId,pinName,reportTypeHashId,reportTypeName,generatedAt,quantityHashId,orderOfMagnitude,significand';
interface File {
  hashId: string;
  url: string;
  name: string;
  mimeType: string;
  bytes: number;
  md5: string;
  crc32: string;
  signature: string;
  expiresAt: null;
}
interface ImportRow {
  importRequest: {
    hashId: string;
    name: string;
    state: string;
    errors: string[] | null;
    userHashId: string;
    processedAt: string | null;
    createdAt: string;
    updatedAt: string;
  };
  createdByUserName: string;
}

const idOf = async (table: string, hashId: string) =>
  (await api.ctx.db.query<{ id: number }>(`SELECT id FROM ${table} WHERE hash_id = $1`, [hashId])).rows[0].id;

/** A report type and a quantity of the environment, stored as their own routes store them. */
async function reportTypeAndQuantity(c: ApiClient, name = 'Inspection') {
  const env = await idOf('environment', c.environmentHashId);
  const {
    rows: [t],
  } = await api.ctx.db.query<{ hash_id: string }>(
    "INSERT INTO report_type (hash_id, environment_id, name, name_text, field_configurations, parser, parser_hash) VALUES (md5(random()::text), $1, to_jsonb($2::text), $2, '{}', '', '') RETURNING hash_id",
    [env, name],
  );
  const {
    rows: [q],
  } = await api.ctx.db.query<{ hash_id: string }>(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude) VALUES (md5(random()::text), $1, '"Potential"', 'Potential', '#000000', 'V', 0) RETURNING hash_id`,
    [env],
  );
  return { reportType: t.hash_id, quantity: q.hash_id };
}

async function world() {
  const c = await api.login('monitoring', RIGHTS);
  const [a, b] = [await addPinGroup(c, 'Station A'), await addPinGroup(c, 'Station B')];
  const [a1, a2, b1] = [await addPin(c, a.hashId, 'a1'), await addPin(c, a.hashId, 'a2'), await addPin(c, b.hashId, 'b1')];
  const grid = (await c.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'route' }, pinGroupHashIds: [b.hashId, a.hashId] })).body
    .hashId;
  return { c, a: a.hashId, b: b.hashId, a1: a1.hashId, a2: a2.hashId, b1: b1.hashId, grid, ...(await reportTypeAndQuantity(c)) };
}

const csvUrl = (text: string, type = 'text/csv') => `data:${type};base64,${Buffer.from(text).toString('base64')}`;
const decode = (url: string) => Buffer.from(url.slice(url.indexOf(',') + 1), 'base64');
const upload = (c: ApiClient, lines: string[], name = 'Q2 inspections') =>
  c.request<ImportRow & ErrorBody>('POST', '/import/', { name, dataUrl: csvUrl(`${[HEADER, ...lines].join('\r\n')}\r\n`) });

async function measurementsOf(c: ApiClient) {
  const { rows } = await api.ctx.db.query(
    `SELECT p.hash_id AS pin, m.generated_at AS at, m.order_of_magnitude AS magnitude, m.significand, rt.hash_id AS "reportType", r.id AS report
       FROM measurement m JOIN pin p ON p.id = m.pin_id JOIN condition_report r ON r.id = m.report_id JOIN report_type rt ON rt.id = r.report_type_id
       JOIN environment e ON e.id = m.environment_id WHERE e.hash_id = $1 ORDER BY m.generated_at, p.id`,
    [c.environmentHashId],
  );
  return rows;
}

describe('import-request generate-template', () => {
  it("lists each pin of the chosen pin groups, then of the grid's, per report type, with the columns to fill empty", async () => {
    const w = await world();
    const second = await reportTypeAndQuantity(w.c, 'Survey');
    const r = await w.c.request<File>('POST', '/import/template', {
      pinGroupHashIds: [w.a],
      pinGroupGridHashIds: [w.grid],
      reportTypeHashIds: [w.reportType, second.reportType],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const content = decode(r.body.url);
    expect(r.body).toMatchObject({
      name: 'import-template.csv',
      mimeType: 'text/csv',
      bytes: content.length,
      md5: createHash('md5').update(content).digest('hex'),
      expiresAt: null,
    });
    expect(r.body.url.startsWith('data:text/csv;base64,')).toBe(true);
    const line = (pg: string, pgName: string, pin: string, pinName: string, t: string, tName: string) => `${pg},${pgName},${pin},${pinName},${t},${tName},,,,`;
    expect(content.toString('utf8').split('\r\n')).toEqual([
      HEADER,
      line(w.a, 'Station A', w.a1, 'a1', w.reportType, 'Inspection'),
      line(w.a, 'Station A', w.a1, 'a1', second.reportType, 'Survey'),
      line(w.a, 'Station A', w.a2, 'a2', w.reportType, 'Inspection'),
      line(w.a, 'Station A', w.a2, 'a2', second.reportType, 'Survey'),
      // the grid's pin groups in its order, A only once
      line(w.b, 'Station B', w.b1, 'b1', w.reportType, 'Inspection'),
      line(w.b, 'Station B', w.b1, 'b1', second.reportType, 'Survey'),
      '',
    ]);
  });

  it('writes names a spreadsheet would run as formulas as text, and a filled template with them imports', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const hyperlink = '=HYPERLINK("http://evil.test/?x","open")';
    const cmd = "+cmd|' /C calc'!A0";
    const pg = await addPinGroup(c, hyperlink);
    const pin = await addPin(c, pg.hashId, cmd);
    const { reportType, quantity } = await reportTypeAndQuantity(c, '@SUM(A1)');
    const r = await c.request<File>('POST', '/import/template', { pinGroupHashIds: [pg.hashId], pinGroupGridHashIds: [], reportTypeHashIds: [reportType] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const [header, line] = decode(r.body.url).toString('utf8').split('\r\n');
    expect(header).toBe(HEADER);
    // a quote before each, and the cell quoted: the spreadsheet shows the text and runs nothing
    expect(line).toBe(`${pg.hashId},"'=HYPERLINK(""http://evil.test/?x"",""open"")",${pin.hashId},"'+cmd|' /C calc'!A0",${reportType},"'@SUM(A1)",,,,`);
    // filled in and uploaded as it came, negative numbers included
    const filled = line.replace(/,,,,$/, `,2026-10-01T10:00:00Z,${quantity},-3,-870`);
    const imported = await upload(c, [filled]);
    expect(imported.body.importRequest, JSON.stringify(imported.body)).toMatchObject({ state: 'success', errors: null });
    expect((await measurementsOf(c)).map((m) => [m.pin, m.magnitude, m.significand, m.reportType])).toEqual([[pin.hashId, -3, -870, reportType]]);
  });

  it('limits and references: 200 pin groups, 10 grids, 1 to 5 report types, each of this environment', async () => {
    const w = await world();
    const other = await world();
    const body = { pinGroupHashIds: [w.a], pinGroupGridHashIds: [], reportTypeHashIds: [w.reportType] };
    const n = (k: number) => Array.from({ length: k }, (_, i) => `x${i}`);
    expectParameterError(await w.c.request('POST', '/import/template', { ...body, pinGroupHashIds: n(201) }), 'pinGroupHashIds');
    expectParameterError(await w.c.request('POST', '/import/template', { ...body, pinGroupGridHashIds: n(11) }), 'pinGroupGridHashIds');
    expectParameterError(await w.c.request('POST', '/import/template', { ...body, reportTypeHashIds: [] }), 'reportTypeHashIds');
    // a type the environment did not make itself (a supplier's, or none at all) is named with what an import takes
    expectParameterError(
      await w.c.request('POST', '/import/template', { ...body, reportTypeHashIds: ['nosuchtype'] }),
      'reportTypeHashIds[0] nosuchtype',
      'POST /report-type/',
      "not a supplier's device report type",
    );
    expectParameterError(await w.c.request('POST', '/import/template', { ...body, reportTypeHashIds: n(6) }), 'reportTypeHashIds');
    expectParameterError(await w.c.request('POST', '/import/template', { ...body, pinGroupHashIds: [w.a, other.a] }), 'pinGroupHashIds[1]');
    expectParameterError(await w.c.request('POST', '/import/template', { ...body, pinGroupGridHashIds: [other.grid] }), 'pinGroupGridHashIds[0]');
    expectParameterError(await w.c.request('POST', '/import/template', { ...body, reportTypeHashIds: [other.reportType] }), 'reportTypeHashIds[0]');
  });
});

describe('import-request add', () => {
  it('imports every line, one report per pin group, report type and time, and answers the request as success', async () => {
    const w = await world();
    const r = await upload(w.c, [
      `${w.a},Station A,${w.a1},a1,${w.reportType},Inspection,2026-10-01T10:00:00Z,${w.quantity},-3,1250`,
      `${w.a},Station A,${w.a2},a2,${w.reportType},Inspection,2026-10-01T10:00:00Z,${w.quantity},-3,-870`,
      `${w.b},"Station B, north",${w.b1},b1,${w.reportType},Inspection,2026-10-02T08:30:00+02:00,${w.quantity},0,7`,
    ]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.importRequest).toMatchObject({ name: 'Q2 inspections', state: 'success', errors: null, processedAt: expect.any(String) });
    expect(r.body.createdByUserName).toBe('machine account');
    const stored = await measurementsOf(w.c);
    expect(stored.map((m) => [m.pin, (m.at as Date).toISOString(), m.magnitude, m.significand, m.reportType])).toEqual([
      [w.a1, '2026-10-01T10:00:00.000Z', -3, 1250, w.reportType],
      [w.a2, '2026-10-01T10:00:00.000Z', -3, -870, w.reportType],
      [w.b1, '2026-10-02T06:30:00.000Z', 0, 7, w.reportType],
    ]);
    expect(new Set(stored.map((m) => m.report)).size).toBe(2);
    // measurement find shows them as it shows a device's
    const find = await w.c.request<{
      rows: { report: { reportTypeHashId: string; pinObservations: { measurement: { significand: number; pinHashId: string } }[] } }[];
    }>('GET', `/measurement/?pinGroupHashIds[0]=${w.a}&sortBy=generatedAt&rowsPerPage=100`);
    expect(
      find.body.rows
        .flatMap((r) => r.report.pinObservations.map((o) => [r.report.reportTypeHashId, o.measurement.pinHashId, o.measurement.significand]))
        .sort(),
    ).toEqual(
      [
        [w.reportType, w.a1, 1250],
        [w.reportType, w.a2, -870],
      ].sort(),
    );
  });

  it('names every failing line (line, column, reason) and imports none of the file', async () => {
    const w = await world();
    const other = await world();
    const good = `${w.a},,${w.a1},,${w.reportType},,2026-10-01T10:00:00Z,${w.quantity},0,1`;
    const r = await upload(w.c, [
      good,
      `${w.a},,${w.a1},,${w.reportType},,2026-10-01T10:00:00Z,${w.quantity},0,1.5`,
      `${w.a},,${w.b1},,${w.reportType},,2026-10-01T10:00:00Z,${w.quantity},0,1`,
      `${w.a},,${other.a1},,${other.reportType},,yesterday,${other.quantity},200,1`,
      good,
    ]);
    expect(r.status).toBe(200);
    expect(r.body.importRequest.state).toBe('invalid');
    expect(r.body.importRequest.errors).toEqual([
      'line 3, significand: "1.5" is not an integer from -2147483648 to 2147483647',
      `line 4, pinHashId: ${w.b1} is not a pin of pin group ${w.a}`,
      'line 5, generatedAt: "yesterday" is not an ISO 8601 time',
      'line 5, orderOfMagnitude: "200" is not an integer from -128 to 127',
    ]);
    expect(await measurementsOf(w.c)).toEqual([]);
    expect(await measurementsOf(other.c)).toEqual([]);
    const foreign = await upload(w.c, [`${other.a},,${other.a1},,${other.reportType},,2026-10-01T10:00:00Z,${other.quantity},0,1`]);
    expect(foreign.body.importRequest.errors).toEqual([
      `line 2, pinGroupHashId: ${other.a} is not a pin group of this environment`,
      `line 2, pinHashId: ${other.a1} is not a pin of this environment`,
      `line 2, reportTypeHashId: ${other.reportType} is not a report type of this environment: an import takes the report types the environment made itself (POST /report-type/, type "human"), not a supplier's device report type`,
      `line 2, quantityHashId: ${other.quantity} is not a quantity of this environment`,
    ]);
    const header = await w.c.request<ImportRow>('POST', '/import/', { name: 'x', dataUrl: csvUrl('pinGroupHashId,pinHashId\r\nx,y\r\n') });
    expect(header.body.importRequest.errors).toEqual([
      'line 1: the header lacks the columns pinGroupName, pinName, reportTypeHashId, reportTypeName, generatedAt, quantityHashId, orderOfMagnitude, significand',
    ]);
  });

  it('limits: a base64 CSV data URL of at most 10,000 lines, a name of 1 to 255 characters; refused ones are not stored', async () => {
    const w = await world();
    expectParameterError(await w.c.request('POST', '/import/', { name: 'x', dataUrl: 'not a data url' }), 'dataUrl');
    expectParameterError(
      await w.c.request('POST', '/import/', { name: 'x', dataUrl: csvUrl(HEADER, 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet') }),
      'dataUrl',
      'CSV',
    );
    const line = `${w.a},,${w.a1},,${w.reportType},,2026-10-01T10:00:00Z,${w.quantity},0,1`;
    expectParameterError(
      await upload(
        w.c,
        Array.from({ length: 10_001 }, () => line),
      ),
      'dataUrl',
      '10000',
    );
    expectParameterError(await upload(w.c, [line], 'n'.repeat(256)), 'name');
    expectParameterError(await w.c.request('POST', '/import/', { dataUrl: csvUrl(HEADER) }), 'name');
    expect(await findAll(w.c, '/import/')).toEqual([]);
    expect(await measurementsOf(w.c)).toEqual([]);
  });
});

describe('import-request find and delete', () => {
  it("finds the environment's requests (sorted, paged), delete takes one out of the list; rights and tenants", async () => {
    const w = await world();
    const line = `${w.a},,${w.a1},,${w.reportType},,2026-10-01T10:00:00Z,${w.quantity},0,1`;
    const ids = [];
    for (const name of ['bravo', 'alpha', 'charlie']) ids.push((await upload(w.c, [line], name)).body.importRequest.hashId);
    const rows = await findAll<ImportRow>(w.c, '/import/?sortBy=name&descending=false');
    expect(rows.map((r) => [r.importRequest.name, r.importRequest.state, r.createdByUserName])).toEqual([
      ['alpha', 'success', 'machine account'],
      ['bravo', 'success', 'machine account'],
      ['charlie', 'success', 'machine account'],
    ]);
    const other = await world();
    expect(await findAll(other.c, '/import/')).toEqual([]);
    expect((await other.c.request('DELETE', `/import/${ids[0]}`)).status).toBe(404);
    const noImport = await api.login('monitoring', ['READ', 'STATIC', 'USERS']);
    const noUsers = await api.login('monitoring', ['READ', 'IMPORT']);
    for (const r of [
      await noImport.request<ErrorBody>('POST', '/import/template', { pinGroupHashIds: [], pinGroupGridHashIds: [], reportTypeHashIds: ['x'] }),
      await noImport.request<ErrorBody>('POST', '/import/', { name: 'x', dataUrl: csvUrl(HEADER) }),
      await noImport.request<ErrorBody>('DELETE', `/import/${ids[0]}`),
      await noUsers.request<ErrorBody>('GET', '/import/'),
    ])
      expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    // find asks for USERS, as the SDK's import-request find names it (add, template and delete: IMPORT)
    expect((await noImport.request<{ rows: unknown[] }>('GET', '/import/')).status).toBe(200);
    const supplier = await api.login('connectivity');
    expect((await supplier.request<{ rows: unknown[] }>('GET', '/import/')).body.rows).toEqual([]);
    expect((await supplier.request<ErrorBody>('POST', '/import/', { name: 'x', dataUrl: csvUrl(HEADER) })).status).toBe(403);
    expect((await w.c.request('DELETE', `/import/${ids[0]}`)).status).toBe(204);
    expect((await w.c.request('DELETE', `/import/${ids[0]}`)).status).toBe(404);
    expect((await findAll<ImportRow>(w.c, '/import/')).map((r) => r.importRequest.hashId).sort()).toEqual([ids[1], ids[2]].sort());
    // the reports it imported stay
    expect(await measurementsOf(w.c)).toHaveLength(3);
  });
});

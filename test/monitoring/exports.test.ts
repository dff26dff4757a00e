import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import qs from 'qs';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { until } from '../support/until.ts';
import { addPin, addPinGroup, pinWithHistory } from './fixtures.ts';
import { exportDir, startExportWorker, type ExportWorker } from '../../src/monitoring/exports/queue.ts';

// Exports over the REST interface: queued, written by the export worker, downloaded by a signed link that
// only names its own environment's export and expires; the CSV holds exactly what was asked.

let api: TestApi;
let worker: ExportWorker;
beforeAll(async () => {
  api = await startTestApi();
  worker = startExportWorker(api.ctx);
});
afterAll(async () => {
  await worker.close();
  await api.close();
});

const RIGHTS = ['READ', 'STATIC', 'REPORTS', 'EXPORT'];
const DAY = 86_400_000;
interface ExportRequest {
  hashId: string;
  content: Record<string, unknown>;
  delimiter: string;
  rowDelimiter: string;
  status: string;
  downloadUrl?: string;
  progress: number;
  createdAt: string;
}

async function addExport(c: ApiClient, content: Record<string, unknown>, delimiter = ',', rowDelimiter = '\n'): Promise<string> {
  const r = await c.request<{ hashId: string }>('POST', '/settings/export', { content, delimiter, rowDelimiter });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(Object.keys(r.body)).toEqual(['hashId']);
  return r.body.hashId;
}

const exportOf = async (c: ApiClient, hashId: string) =>
  (await findAll<{ exportRequest: ExportRequest }>(c, '/settings/export', 100)).map((r) => r.exportRequest).find((e) => e.hashId === hashId);

async function available(c: ApiClient, hashId: string): Promise<ExportRequest> {
  return (await until(
    () => exportOf(c, hashId),
    (e) => e?.status === 'available',
    `export ${hashId} available`,
  ))!;
}

async function download(url: string): Promise<{ status: number; body: string; type?: string }> {
  const u = new URL(url);
  const r = await api.app.inject({ method: 'GET', url: `${u.pathname}${u.search}` });
  return { status: r.statusCode, body: r.body, type: r.headers['content-type'] as string | undefined };
}

/** The CSV's lines split into values (the tests' values hold no quotes or delimiters unless said). */
const linesOf = (csv: string, rowDelimiter = '\n', delimiter = ',') =>
  csv
    .split(rowDelimiter)
    .filter((l) => l !== '')
    .map((l) => l.split(delimiter));

describe('exports', () => {
  it("an export's CSV holds exactly the measurements of its period (from included, to not)", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pinHashId = await pinWithHistory(api.ctx.db, c, [1, 2, 3, 5, 8, 13]);
    const { rows: times } = await api.ctx.db.query<{ at: Date; significand: number }>(
      'SELECT m.generated_at AS at, m.significand FROM measurement m JOIN pin p ON p.id = m.pin_id WHERE p.hash_id = $1 ORDER BY 1',
      [pinHashId],
    );
    // from: exactly the 8-day-old measurement; to: exactly the 2-day-old one
    const from = times.find((t) => t.significand === 8)!.at.toISOString();
    const to = times.find((t) => t.significand === 2)!.at.toISOString();
    const hashId = await addExport(c, { type: 'all', staticOnly: false, gridHashId: null, from, to });
    const done = await available(c, hashId);
    expect(done).toMatchObject({
      hashId,
      content: { type: 'all', staticOnly: false, gridHashId: null, from, to },
      delimiter: ',',
      rowDelimiter: '\n',
      progress: 1,
    });
    const file = await download(done.downloadUrl!);
    expect(file.status).toBe(200);
    expect(file.type).toBe('text/csv; charset=utf-8');
    const [header, ...rows] = linesOf(file.body);
    expect(header).toEqual(['generatedAt', 'pinGroupHashId', 'pinGroupName', 'pinHashId', 'pinName', 'quantityHashId', 'quantityName', 'unit', 'value']);
    expect(rows.map((r) => [r[0], r[3], r[8]])).toEqual(
      times.filter((t) => t.significand >= 3 && t.significand <= 8).map((t) => [t.at.toISOString(), pinHashId, String(t.significand)]),
    );
  });

  it('writes the delimiters asked for, quoting values that hold them; static data is a row per pin', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pg = await addPinGroup(c, 'north; "old" side');
    const pins = [await addPin(c, pg.hashId, 'a'), await addPin(c, pg.hashId, 'b')];
    const hashId = await addExport(
      c,
      { type: 'all', staticOnly: true, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' },
      ';',
      '\r\n',
    );
    const file = await download((await available(c, hashId)).downloadUrl!);
    const lines = file.body.split('\r\n');
    expect(lines[0]).toBe('pinGroupHashId;pinGroupName;pinGroupFields;pinGroupGeometry;pinHashId;pinName;pinFields');
    expect(lines.slice(1, 3).map((l) => l.split(';').slice(0, 2).concat(l.split(';').slice(-3, -1)))).toEqual(
      pins.map((p) => [pg.hashId, '"north', p.hashId, p.name]),
    );
    expect(lines[1]).toContain(`;"north; ""old"" side";`);
    expect(lines[3]).toBe('');
    expect(file.body).not.toMatch(/[^\r]\n/);
  });

  it('a chart exports its series of its period; a measurement filter its pins and period', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pinA = await pinWithHistory(api.ctx.db, c, [1, 2, 3]);
    await pinWithHistory(api.ctx.db, c, [1, 2, 3]);
    const {
      rows: [q],
    } = await api.ctx.db.query<{ hash_id: string }>(
      'SELECT q.hash_id FROM measurement m JOIN pin p ON p.id = m.pin_id JOIN quantity q ON q.id = m.quantity_id WHERE p.hash_id = $1 LIMIT 1',
      [pinA],
    );
    const from = new Date(Date.now() - 2.5 * DAY).toISOString();
    const to = new Date().toISOString();
    const chart = await addExport(c, { type: 'chart', from, to, series: [{ pinHashId: pinA, quantityHashId: q.hash_id }], title: 'Rectifier' });
    const rows = linesOf((await download((await available(c, chart)).downloadUrl!)).body).slice(1);
    expect(rows.map((r) => [r[3], r[8]])).toEqual([
      [pinA, '2'],
      [pinA, '1'],
    ]);

    const filter = await c.request<{ hashId: string }>('POST', '/measurement-filter/', {
      name: 'last month',
      description: '',
      period: 'lastMonth',
      reportTypeHashIds: [],
      quantityHashIds: [q.hash_id],
      fieldKeys: [],
    });
    expect(filter.status, JSON.stringify(filter.body)).toBe(200);
    const byFilter = await addExport(c, { type: 'measurementFilter', measurementFilterHashId: filter.body.hashId });
    const done = await available(c, byFilter);
    expect(done.content).toMatchObject({ type: 'measurementFilter', name: 'last month', description: '' });
    // pin A's three measurements: the other pin measures a quantity of its own
    expect(
      linesOf((await download(done.downloadUrl!)).body)
        .slice(1)
        .map((r) => [r[3], r[8]]),
    ).toEqual([
      [pinA, '3'],
      [pinA, '2'],
      [pinA, '1'],
    ]);
  });

  it('an analytics query exports its whole result, in its columns', async () => {
    const c = await api.login('monitoring', RIGHTS);
    for (const name of ['x', 'y', 'z']) await addPinGroup(c, name);
    const query = { source: 'pinGroup', columns: [{ field: 'pinGroup.fields.id', name: 'Name' }], sort: [{ columnIndex: 0, descending: false }] };
    const hashId = await addExport(c, { type: 'analyticsQuery', query, dashboardId: 'd1', widgetName: 'Locations' });
    const body = (await download((await available(c, hashId)).downloadUrl!)).body;
    expect(linesOf(body)).toEqual([['Name'], ['x'], ['y'], ['z']]);
  });

  it('the download link works for its own export only, unaltered and unexpired', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const other = await api.login('monitoring', RIGHTS);
    const hashId = await addExport(c, { type: 'all', staticOnly: true, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' });
    const url = new URL((await available(c, hashId)).downloadUrl!);
    expect((await download(url.toString())).status).toBe(200);
    const altered = (name: string, value: string) => {
      const u = new URL(url);
      u.searchParams.set(name, value);
      return u.toString();
    };
    expect((await download(altered('environment', other.environmentHashId))).status).toBe(404);
    expect((await download(altered('expires', String(Number(url.searchParams.get('expires')) + 1)))).status).toBe(404);
    expect((await download(altered('signature', '0'.repeat(64)))).status).toBe(404);
    // another environment's export under this link's signature
    const theirs = await addExport(other, { type: 'all', staticOnly: true, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' });
    await available(other, theirs);
    expect((await download(url.toString().replace(hashId, theirs))).status).toBe(404);
    // expired: the link and the file are gone, the request shows deleted
    await api.ctx.db.query("UPDATE export_request SET expires_at = now() - interval '1 second' WHERE hash_id = $1", [hashId]);
    expect((await download(url.toString())).status).toBe(404);
    const { sweepExpiredExports } = await import('../../src/monitoring/exports/queue.ts');
    expect(await sweepExpiredExports(api.ctx)).toBeGreaterThanOrEqual(1);
    expect((await exportOf(c, hashId))?.status).toBe('deleted');
  });

  it('an export a worker did not finish is written when a worker starts again', async () => {
    const c = await api.login('monitoring', RIGHTS);
    await pinWithHistory(api.ctx.db, c, [1]);
    const {
      rows: [env],
    } = await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId]);
    // as a worker that died mid-export left it: creating, and no job in the queue
    await api.ctx.db.query(
      `INSERT INTO export_request (hash_id, environment_id, content, scope, delimiter, row_delimiter, status, progress)
       VALUES ('unfinished1', $1, '{"type":"all","staticOnly":false,"gridHashId":null}', '{"kind":"measurements","from":null,"to":null}', ',', E'\\n', 'creating', 0.4)`,
      [env.id],
    );
    const second = startExportWorker(api.ctx);
    try {
      const done = await available(c, 'unfinished1');
      expect(linesOf((await download(done.downloadUrl!)).body).length).toBe(2);
    } finally {
      await second.close();
    }
  });

  it("needs EXPORT, in a monitoring environment; another environment's objects and exports are not reachable", async () => {
    const without = await api.login('monitoring', ['READ']);
    const r = await without.request<ErrorBody>('POST', '/settings/export', {
      content: { type: 'all', staticOnly: true, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2021-01-01T00:00:00Z' },
      delimiter: ',',
      rowDelimiter: '\n',
    });
    expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    expect((await without.request<ErrorBody>('GET', '/settings/export')).status).toBe(403);
    expect((await (await api.login('connectivity')).request<ErrorBody>('GET', '/settings/export')).body.key).toBe('right_error');

    const a = await api.login('monitoring', RIGHTS);
    const b = await api.login('monitoring', RIGHTS);
    const pinA = await pinWithHistory(api.ctx.db, a, [1]);
    const mine = await addExport(a, { type: 'all', staticOnly: true, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' });
    expect(await findAll(b, '/settings/export')).toEqual([]);
    expect((await findAll<{ exportRequest: ExportRequest }>(a, '/settings/export')).map((x) => x.exportRequest.hashId)).toEqual([mine]);
    const {
      rows: [q],
    } = await api.ctx.db.query<{ hash_id: string }>(
      'SELECT q.hash_id FROM measurement m JOIN pin p ON p.id = m.pin_id JOIN quantity q ON q.id = m.quantity_id WHERE p.hash_id = $1 LIMIT 1',
      [pinA],
    );
    const filter = await a.request<{ hashId: string }>('POST', '/measurement-filter/', {
      name: 'f',
      description: '',
      period: 'lastMonth',
      reportTypeHashIds: [],
      quantityHashIds: [q.hash_id],
      fieldKeys: [],
    });
    expect(filter.status).toBe(200);
    expectParameterError(
      await b.request('POST', '/settings/export', {
        content: { type: 'measurementFilter', measurementFilterHashId: filter.body.hashId },
        delimiter: ',',
        rowDelimiter: '\n',
      }),
      'content.measurementFilterHashId',
    );
    expectParameterError(
      await b.request('POST', '/settings/export', {
        content: { type: 'chart', from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z', series: [{ pinHashId: pinA, quantityHashId: 'q0' }], title: 't' },
        delimiter: ',',
        rowDelimiter: '\n',
      }),
      'content.series[0].pinHashId',
    );
  });

  it('limits are parameter errors naming the field', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const all = { type: 'all', staticOnly: false, gridHashId: null, from: '2021-01-01T00:00:00Z', to: '2020-01-01T00:00:00Z' };
    expectParameterError(await c.request('POST', '/settings/export', { content: all, delimiter: ',', rowDelimiter: '\n' }), 'content.to');
    expectParameterError(
      await c.request('POST', '/settings/export', { content: { ...all, to: '2022-01-01T00:00:00Z' }, delimiter: '|', rowDelimiter: '\n' }),
      'delimiter',
    );
    expectParameterError(
      await c.request('POST', '/settings/export', {
        content: { ...all, to: '2022-01-01T00:00:00Z', gridHashId: 'nogrid' },
        delimiter: ',',
        rowDelimiter: '\n',
      }),
      'content.gridHashId',
    );
    // the content's kinds are alternatives: a chart of 41 series fits none of them
    const series = Array.from({ length: 41 }, () => ({ pinHashId: 'p', quantityHashId: 'q' }));
    expectParameterError(
      await c.request('POST', '/settings/export', {
        content: { type: 'chart', from: all.to, to: all.from, series, title: 't' },
        delimiter: ',',
        rowDelimiter: '\n',
      }),
      'content',
    );
    const fortySeries = series.slice(1);
    expectParameterError(
      await c.request('POST', '/settings/export', {
        content: { type: 'chart', from: all.from, to: all.to, series: fortySeries, title: 't' },
        delimiter: ',',
        rowDelimiter: '\n',
      }),
      'content.to',
    );
    expectParameterError(
      await c.request('POST', '/settings/export', {
        content: { type: 'analyticsQuery', query: { source: 'nothing', columns: [] }, dashboardId: 'd', widgetName: 'w' },
        delimiter: ',',
        rowDelimiter: '\n',
      }),
    );
    expectParameterError(await c.request('GET', '/settings/export?sortBy=hashId'), 'sortBy');
  });
});

/** The CSV's records, each a list of its cells' values (RFC 4180: quotes taken off, doubled quotes made one). */
function cellsOf(csv: string, delimiter = ','): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < csv.length; i++) {
    const ch = csv[i];
    if (quoted) {
      if (ch === '"' && csv[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === delimiter) {
      record.push(cell);
      cell = '';
    } else if (ch === '\n') {
      record.push(cell);
      records.push(record);
      record = [];
      cell = '';
    } else if (ch !== '\r') cell += ch;
  }
  return records;
}

/** A measurement on the pin of the quantity, in a report of its own, stored as the ingest would (a supplier's quantity too). */
async function measure(pinHashId: string, quantityHashId: string, significand: number, orderOfMagnitude: number, at: Date, reportTypeId: number | null = null) {
  const {
    rows: [p],
  } = await api.ctx.db.query<{ env: number; pg: number; pin: number }>(
    'SELECT environment_id AS env, pin_group_id AS pg, id AS pin FROM pin WHERE hash_id = $1',
    [pinHashId],
  );
  const {
    rows: [r],
  } = await api.ctx.db.query<{ id: number }>(
    'INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id, report_type_id) VALUES (md5(random()::text), $1, $2, $3, $4) RETURNING id',
    [p.env, at, p.pg, reportTypeId],
  );
  await api.ctx.db.query(
    `INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
     SELECT md5(random()::text), $1, $2, q.id, $3, 0, 0, $4, $5, $6 FROM quantity q WHERE q.hash_id = $7`,
    [r.id, p.env, p.pin, at, orderOfMagnitude, significand, quantityHashId],
  );
}

/** A quantity of the client's environment, stored as its route stores it. */
async function ownQuantity(c: ApiClient, name: string, unit: string): Promise<string> {
  const {
    rows: [q],
  } = await api.ctx.db.query<{ hash_id: string }>(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude)
     SELECT md5(random()::text), id, to_jsonb($2::text), $2, '#000000', $3, 0 FROM environment WHERE hash_id = $1 RETURNING hash_id`,
    [c.environmentHashId, name, unit],
  );
  return q.hash_id;
}

/** A spreadsheet runs a cell starting with one of these as a formula (OWASP CSV injection). */
const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^[+-]?\d+(\.\d+)?$/;

describe('exports: cells a spreadsheet would run as formulas', () => {
  const HYPERLINK = '=HYPERLINK("http://evil.test/?x","open")';
  const CMD = "+cmd|' /C calc'!A0";

  it('are written as text (a quote before them), in static, measurement and analytics exports; numbers stay numbers', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pg = await addPinGroup(c, HYPERLINK);
    const pin = await addPin(c, pg.hashId, CMD);
    const q = await ownQuantity(c, '@SUM(A1)', '=1+1');
    const at = new Date(Date.now() - DAY);
    await measure(pin.hashId, q, -35, -1, at);

    const staticCsv = (
      await download(
        (await available(c, await addExport(c, { type: 'all', staticOnly: true, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' })))
          .downloadUrl!,
      )
    ).body;
    const [, staticRow] = cellsOf(staticCsv);
    expect([staticRow[1], staticRow[5]]).toEqual([`'${HYPERLINK}`, `'${CMD}`]);
    // quoted as well: the cell is one, whatever the spreadsheet does with quotes
    expect(staticCsv).toContain(`,"'=HYPERLINK(""http://evil.test/?x"",""open"")",`);

    const measurementCsv = (
      await download(
        (await available(c, await addExport(c, { type: 'all', staticOnly: false, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' })))
          .downloadUrl!,
      )
    ).body;
    const [, row] = cellsOf(measurementCsv);
    expect(row).toEqual([at.toISOString(), pg.hashId, `'${HYPERLINK}`, pin.hashId, `'${CMD}`, q, "'@SUM(A1)", "'=1+1", '-3.5']);
    // the negative value is a bare number, not text
    expect(measurementCsv.trimEnd().endsWith(',-3.5')).toBe(true);

    const query = { source: 'pinGroup', columns: [{ field: 'pinGroup.fields.id', name: '-name' }] };
    const analyticsCsv = (
      await download((await available(c, await addExport(c, { type: 'analyticsQuery', query, dashboardId: 'd', widgetName: 'w' }))).downloadUrl!)
    ).body;
    expect(cellsOf(analyticsCsv)).toEqual([["'-name"], [`'${HYPERLINK}`]]);

    for (const csv of [staticCsv, measurementCsv, analyticsCsv]) {
      for (const cell of cellsOf(csv).flat()) if (!PLAIN_NUMBER.test(cell)) expect(cell, cell).not.toMatch(FORMULA_START);
    }
  });

  it("a supplier's quantity renamed to a formula reaches a customer's export as text", async () => {
    const customer = await api.login('monitoring', RIGHTS);
    const supplier = await api.login('connectivity');
    const added = await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: 'Potential', unit: 'V' });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    const pin = await addPin(customer, (await addPinGroup(customer, 'station')).hashId, 'p');
    // the customer claimed and linked the supplier's device: its reports carry the supplier's quantity onto the pin
    await measure(pin.hashId, added.body.hashId, 7, 0, new Date(Date.now() - DAY));
    const renamed = await supplier.request('POST', `/quantity/${added.body.hashId}`, { name: '=HYPERLINK("http://evil.test/?y","x")', unit: '-2+3' });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(204);
    const csv = (
      await download(
        (
          await available(
            customer,
            await addExport(customer, { type: 'all', staticOnly: false, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' }),
          )
        ).downloadUrl!,
      )
    ).body;
    expect(cellsOf(csv)[1].slice(5)).toEqual([added.body.hashId, '\'=HYPERLINK("http://evil.test/?y","x")', "'-2+3", '7']);
  });
});

describe('exports: scope', () => {
  it("a chart export answers another environment's quantity exactly as one that does not exist; a quantity measured on the pin is the environment's to export", async () => {
    const a = await api.login('monitoring', RIGHTS);
    const b = await api.login('monitoring', RIGHTS);
    const pinB = await pinWithHistory(api.ctx.db, b, [1]);
    const quantityOfA = await ownQuantity(a, 'Secret', 'V');
    const chart = (quantityHashId: string) =>
      b.request<ErrorBody>('POST', '/settings/export', {
        content: { type: 'chart', from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z', series: [{ pinHashId: pinB, quantityHashId }], title: 't' },
        delimiter: ',',
        rowDelimiter: '\n',
      });
    const theirs = await chart(quantityOfA);
    const none = await chart('nosuchquantity');
    expectParameterError(theirs, 'content.series[0].quantityHashId');
    expect([theirs.status, theirs.body.key, theirs.body.message.replace(quantityOfA, 'Q')]).toEqual([
      none.status,
      none.body.key,
      none.body.message.replace('nosuchquantity', 'Q'),
    ]);
    expect(await findAll(b, '/settings/export')).toEqual([]);

    // a supplier's quantity the pin's measurements carry (a claimed device's) is one b may chart, so export
    const supplier = await api.login('connectivity');
    const supplied = (await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: 'Current', unit: 'A' })).body.hashId;
    await measure(pinB, supplied, 12, 0, new Date(Date.now() - DAY));
    const hashId = await addExport(b, {
      type: 'chart',
      from: '2020-01-01T00:00:00Z',
      to: '2030-01-01T00:00:00Z',
      series: [{ pinHashId: pinB, quantityHashId: supplied }],
      title: 't',
    });
    expect(
      linesOf((await download((await available(b, hashId)).downloadUrl!)).body)
        .slice(1)
        .map((r) => [r[5], r[8]]),
    ).toEqual([[supplied, '12']]);
  });

  it("a measurement filter's export holds the measurements measurement find gives for the filter's criteria, report types included", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pg = await addPinGroup(c, 'station');
    const pins = [await addPin(c, pg.hashId, 'a'), await addPin(c, pg.hashId, 'b')];
    const q = await ownQuantity(c, 'Potential', 'V');
    const { rows: types } = await api.ctx.db.query<{ id: number; hash_id: string }>(
      `INSERT INTO report_type (hash_id, environment_id, name, name_text, field_configurations, parser, parser_hash)
       SELECT md5(random()::text || n), e.id, to_jsonb(n), n, '{}', '', '' FROM environment e, unnest(ARRAY['Inspection', 'Survey']) n WHERE e.hash_id = $1 RETURNING id, hash_id`,
      [c.environmentHashId],
    );
    const [inspection, survey] = types;
    // three inspections (two of pin a, one of pin b) and one survey
    await measure(pins[0].hashId, q, 1, 0, new Date(Date.now() - 3 * DAY), inspection.id);
    await measure(pins[0].hashId, q, 2, 0, new Date(Date.now() - 2 * DAY), inspection.id);
    await measure(pins[1].hashId, q, 3, 0, new Date(Date.now() - 2 * DAY), inspection.id);
    await measure(pins[1].hashId, q, 4, 0, new Date(Date.now() - DAY), survey.id);
    const filter = await c.request<{ hashId: string }>('POST', '/measurement-filter/', {
      name: 'inspections',
      description: '',
      period: 'lastMonth',
      reportTypeHashIds: [inspection.hash_id],
      quantityHashIds: [q],
      fieldKeys: [],
    });
    expect(filter.status, JSON.stringify(filter.body)).toBe(200);
    const exported = linesOf(
      (await download((await available(c, await addExport(c, { type: 'measurementFilter', measurementFilterHashId: filter.body.hashId }))).downloadUrl!)).body,
    )
      .slice(1)
      .map((r) => [r[3], r[0], r[8]]);

    const since = new Date(Date.now() - 30 * DAY).toISOString();
    const found = await c.request<{
      rows: { report: { pinObservations: { measurement: { pinHashId: string; generatedAt: string; significand: number } }[] } | null }[];
    }>(
      'GET',
      `/measurement/?reportTypeHashIds[0]=${inspection.hash_id}&quantityHashIds[0]=${q}&since=${since}&includePinsWithoutReports=false&rowsPerPage=100`,
    );
    expect(found.status, JSON.stringify(found.body)).toBe(200);
    const byFind = found.body.rows.flatMap((r) =>
      r.report!.pinObservations.map((o) => [o.measurement.pinHashId, o.measurement.generatedAt, String(o.measurement.significand)]),
    );
    expect(byFind).toHaveLength(3);
    expect([...exported].sort()).toEqual([...byFind].sort());
  });
});

describe("exports: an analytics query's statement timeout", () => {
  // a service whose analytics statements may run 1 ms (ANALYTICS_STATEMENT_TIMEOUT_MS), with its own export worker,
  // and an environment with 100,000 measurements: aggregating them takes far longer than that
  let strict: TestApi;
  let strictWorker: ExportWorker;
  let c: ApiClient;
  beforeAll(async () => {
    strict = await startTestApi(await testContext({ ANALYTICS_STATEMENT_TIMEOUT_MS: '1' }));
    strictWorker = startExportWorker(strict.ctx);
    c = await strict.login('monitoring', RIGHTS);
    const pin = await addPin(c, (await addPinGroup(c, 'big')).hashId, 'big');
    const q = await ownQuantity(c, 'V', 'V');
    await strict.ctx.db.query(
      `WITH p AS (SELECT id, environment_id, pin_group_id FROM pin WHERE hash_id = $1),
            r AS (INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id) SELECT 'big-' || $1, environment_id, now(), pin_group_id FROM p RETURNING id)
       INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
       SELECT 'x' || $1 || i, r.id, p.environment_id, q.id, p.id, 0, i, timestamptz '2024-01-01' + make_interval(mins => i), 0, i
         FROM p, r, quantity q, generate_series(1, 100000) i WHERE q.hash_id = $2`,
      [pin.hashId, q],
    );
  }, 120_000);
  afterAll(async () => {
    await strictWorker?.close();
    // the other test files share this database: they must not plan with this environment's bulk
    await strict?.ctx.db.query('DELETE FROM measurement WHERE environment_id = (SELECT id FROM environment WHERE hash_id = $1)', [c.environmentHashId]);
    await strict?.close();
  });

  it('an export of a query that runs out of it fails for good, saying so, as GET /analytics/ answers analytics_query_too_broad', async () => {
    const query = {
      source: 'measurement',
      columns: [
        { type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'hour' },
        { type: 'mean', field: 'measurement.value' },
      ],
    };
    const analytics = await c.request<ErrorBody>('GET', `/analytics/?${qs.stringify(query)}`);
    expect(analytics.body.key).toBe('analytics_query_too_broad');
    const r = await c.request<{ hashId: string }>('POST', '/settings/export', {
      content: { type: 'analyticsQuery', query, dashboardId: 'd', widgetName: 'w' },
      delimiter: ',',
      rowDelimiter: '\n',
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const failed = await until(
      async () => (await findAll<{ exportRequest: ExportRequest & { error?: string } }>(c, '/settings/export', 100))[0].exportRequest,
      (e) => e.status !== 'waiting' && e.status !== 'creating',
      'the export to end',
    );
    // the SDK's statuses: nothing to download, as an expired export; the reason beside it
    expect(failed).toMatchObject({ hashId: r.body.hashId, status: 'deleted', error: expect.stringContaining('1 ms') });
    expect(failed.downloadUrl).toBeUndefined();
    // and no part of a file is left on disk
    expect(await readdir(path.join(exportDir(strict.ctx), c.environmentHashId)).catch(() => [])).toEqual([]);
  });
});

describe('exports: fair across environments', () => {
  it("one environment's many exports do not hold back another's: each environment's next export waits its turn", async () => {
    const m = await api.login('monitoring', RIGHTS);
    const n = await api.login('monitoring', RIGHTS);
    await pinWithHistory(api.ctx.db, m, [1, 2, 3]);
    await pinWithHistory(api.ctx.db, n, [1]);
    const all = { type: 'all', staticOnly: false, gridHashId: null, from: '2020-01-01T00:00:00Z', to: '2030-01-01T00:00:00Z' };
    // all of them asked for while no worker runs, so the order the worker takes them in does not depend on how fast it is
    await worker.close();
    const many: string[] = [];
    for (let i = 0; i < 30; i++) many.push(await addExport(m, all));
    const one = await addExport(n, all);
    worker = startExportWorker(api.ctx);
    await available(n, one);
    for (const hashId of many) await available(m, hashId);
    // the order the worker (one export at a time) finished them in: each is marked available by a statement of its own
    const { rows } = await api.ctx.db.query<{ hash_id: string }>(
      `SELECT x.hash_id FROM export_request x JOIN environment e ON e.id = x.environment_id WHERE e.hash_id = ANY($1) ORDER BY x.updated_at, x.id`,
      [[m.environmentHashId, n.environmentHashId]],
    );
    const order = rows.map((r) => r.hash_id);
    expect(order).toHaveLength(31);
    // first in, first out would finish n's after all 30 of m's; in turns, right after m's first
    expect(order.indexOf(one)).toBe(1);
    expect(order.filter((h) => h !== one)).toEqual(many);
  });
});

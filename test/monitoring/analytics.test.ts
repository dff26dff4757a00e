import qs from 'qs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/app/db.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';

// analytics results against hand-computed answers on a small planted data set; hostile queries;
// limits; the statement timeout; panels and the default panel setting; tenant isolation.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

type Page = { nextPageOffset: string | null; rows: unknown[][] };
type Query = Record<string, unknown>;

/** GET /analytics/ with the query in bracket notation, as the SDK's axios sends it. */
const results = (c: ApiClient, q: Query) => c.request<Page & { key?: string; message?: string }>('GET', `/analytics/?${qs.stringify(q)}`);

async function rowsOf(c: ApiClient, q: Query): Promise<unknown[][]> {
  const r = await results(c, q);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.rows;
}

/** Stores measurements of `pinHashId` (one report each) at fixed instants, as the ingest would. */
async function plant(db: Queryable, pinHashId: string, quantityId: number, values: [string, number, number?][]): Promise<void> {
  const {
    rows: [p],
  } = await db.query<{ env: number; pg: number; id: number }>('SELECT environment_id AS env, pin_group_id AS pg, id FROM pin WHERE hash_id = $1', [pinHashId]);
  for (const [at, significand, orderOfMagnitude = 0] of values) {
    const {
      rows: [r],
    } = await db.query<{ id: number }>(
      'INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id) VALUES (md5(random()::text), $1, $2, $3) RETURNING id',
      [p.env, at, p.pg],
    );
    await db.query(
      `INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
       VALUES (md5(random()::text), $1, $2, $3, $4, 0, 0, $5, $6, $7)`,
      [r.id, p.env, quantityId, p.id, at, orderOfMagnitude, significand],
    );
  }
}

async function quantity(db: Queryable, c: ApiClient, name: string): Promise<number> {
  const {
    rows: [q],
  } = await db.query<{ id: number }>(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude)
     SELECT md5(random()::text), id, to_jsonb($2::text), $2, '#000000', 'V', 0 FROM environment WHERE hash_id = $1 RETURNING id`,
    [c.environmentHashId, name],
  );
  return q.id;
}

/**
 * Environment A: pin groups north (pins n1, n2) and south (pin s1), one edge; quantity V.
 *   n1: 2025-01-01 10:00 = 10, 2025-01-01 15:00 = 20, 2025-01-02 09:00 = 30
 *   n2: 2025-01-01 11:00 = 5,  2025-01-03 12:00 = 7
 *   s1: 2025-01-02 08:00 = 1.5 (1500 x 10^-3), 2025-01-02 20:00 = 2.5 (2500 x 10^-3)
 * Environment B: pin group other (pin b1) with 1,000 on each of the same days: never in A's answers.
 */
let a: ApiClient;
let b: ApiClient;
let gridHashId: string;
beforeAll(async () => {
  const db = api.ctx.db;
  a = await api.login('monitoring', ['READ', 'STATIC', 'REPORTS']);
  b = await api.login('monitoring', ['READ', 'STATIC', 'REPORTS']);
  const north = (await addPinGroup(a, 'north')).hashId;
  const south = (await addPinGroup(a, 'south')).hashId;
  const v = await quantity(db, a, 'V');
  await plant(db, (await addPin(a, north, 'n1')).hashId, v, [
    ['2025-01-01T10:00:00Z', 10],
    ['2025-01-01T15:00:00Z', 20],
    ['2025-01-02T09:00:00Z', 30],
  ]);
  await plant(db, (await addPin(a, north, 'n2')).hashId, v, [
    ['2025-01-01T11:00:00Z', 5],
    ['2025-01-03T12:00:00Z', 7],
  ]);
  await plant(db, (await addPin(a, south, 's1')).hashId, v, [
    ['2025-01-02T08:00:00Z', 1500, -3],
    ['2025-01-02T20:00:00Z', 2500, -3],
  ]);
  const edge = await a.request('POST', '/graph/edge', {
    geometry: {
      type: 'LineString',
      coordinates: [
        [5, 52],
        [5.1, 52.1],
      ],
    },
    fields: { id: 'cable' },
  });
  expect(edge.status).toBe(200);
  const grid = await a.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'just north' }, pinGroupHashIds: [north] });
  expect(grid.status, JSON.stringify(grid.body)).toBe(200);
  gridHashId = grid.body.hashId;
  const other = (await addPinGroup(b, 'other')).hashId;
  await plant(db, (await addPin(b, other, 'b1')).hashId, await quantity(db, b, 'V'), [
    ['2025-01-01T10:00:00Z', 1000],
    ['2025-01-02T10:00:00Z', 1000],
    ['2025-01-03T10:00:00Z', 1000],
  ]);
});

const day = (d: string) => `2025-01-0${d}T00:00:00.000Z`;
const m = 'measurement';

describe('analytics results: example queries against hand-computed answers', () => {
  const examples: [string, Query, unknown[][]][] = [
    [
      'count per day',
      {
        source: m,
        columns: [{ type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'day' }, { type: 'count' }],
        sort: [{ columnIndex: 0, descending: false }],
      },
      [
        [day('1'), 3],
        [day('2'), 3],
        [day('3'), 1],
      ],
    ],
    [
      'mean per pin',
      { source: m, columns: [{ field: 'pin.fields.id' }, { type: 'mean', field: 'measurement.value' }] },
      [
        ['n1', 20],
        ['n2', 6],
        ['s1', 2],
      ],
    ],
    [
      'sum, min, max per pin group',
      {
        source: m,
        columns: [
          { field: 'pinGroup.fields.id' },
          { type: 'sum', field: 'measurement.value' },
          { type: 'min', field: 'measurement.value' },
          { type: 'max', field: 'measurement.value' },
        ],
      },
      [
        ['north', 72, 5, 30],
        ['south', 4, 1.5, 2.5],
      ],
    ],
    [
      'latest value per pin group (limitBy)',
      {
        source: m,
        columns: [{ field: 'pinGroup.fields.id' }, { field: 'measurement.value' }, { field: 'measurement.generatedAt' }],
        limitBy: { limitedTo: 1, per: [{ columnIndex: 0 }], sortedBy: [{ columnIndex: 2, descending: true }] },
      },
      [
        ['north', 7, '2025-01-03T12:00:00.000Z'],
        ['south', 2.5, '2025-01-02T20:00:00.000Z'],
      ],
    ],
    [
      'filtered by field values',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: {
          type: 'and',
          restrictions: [
            { left: 'pinGroup.fields.id', comparison: '=', right: { value: 'north' } },
            { left: 'measurement.value', comparison: '>', right: { value: 6 } },
          ],
        },
      },
      [[4]],
    ],
    [
      'or of like and <=',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: {
          type: 'or',
          restrictions: [
            { left: 'pin.fields.id', comparison: 'like', right: { value: 's%' } },
            { left: 'measurement.value', comparison: '<=', right: { value: 5 } },
          ],
        },
      },
      [[3]],
    ],
    [
      'notLike, <> and isNotNull',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: {
          type: 'and',
          restrictions: [
            { left: 'pin.fields.id', comparison: 'notLike', right: { value: 's%' } },
            { left: 'measurement.value', comparison: '<>', right: { value: 10 } },
            { left: 'pin.hashId', comparison: 'isNotNull' },
          ],
        },
      },
      [[4]],
    ],
    [
      'time range on generatedAt',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: {
          type: 'and',
          restrictions: [
            { left: 'measurement.generatedAt', comparison: '>=', right: { value: '2025-01-02T00:00:00Z' } },
            { left: 'measurement.generatedAt', comparison: '<', right: { value: '2025-01-03T00:00:00Z' } },
          ],
        },
      },
      [[3]],
    ],
    [
      'day of the week (1 = Monday; 2025-01-01 is a Wednesday)',
      { source: m, columns: [{ type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'dayOfTheWeek' }, { type: 'count' }] },
      [
        [3, 3],
        [4, 3],
        [5, 1],
      ],
    ],
    [
      'hour of the day, filtered to the afternoon',
      {
        source: m,
        columns: [{ type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'hourOfTheDay' }, { type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 0, comparison: '>=', right: { value: 12 } }] },
      },
      [
        [12, 1],
        [15, 1],
        [20, 1],
      ],
    ],
    [
      'month of the year, and month',
      {
        source: m,
        columns: [
          { type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'monthOfTheYear' },
          { type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'month' },
          { type: 'count' },
        ],
      },
      [[1, '2025-01-01T00:00:00.000Z', 7]],
    ],
    [
      'week (ISO, from Monday) and year',
      {
        source: m,
        columns: [
          { type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'week' },
          { type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'year' },
          { type: 'count' },
        ],
      },
      [['2024-12-30T00:00:00.000Z', '2025-01-01T00:00:00.000Z', 7]],
    ],
    [
      'count per hour on one day',
      {
        source: m,
        columns: [{ type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'hour' }, { type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 'pin.fields.id', comparison: '=', right: { value: 'n1' } }] },
        sort: [{ columnIndex: 0, descending: true }],
      },
      [
        ['2025-01-02T09:00:00.000Z', 1],
        ['2025-01-01T15:00:00.000Z', 1],
        ['2025-01-01T10:00:00.000Z', 1],
      ],
    ],
    [
      'share of all rows per pin group',
      { source: m, columns: [{ field: 'pinGroup.fields.id' }, { type: 'share' }] },
      [
        ['north', (100 * 5) / 7],
        ['south', (100 * 2) / 7],
      ],
    ],
    [
      "share of a group's rows meeting a condition, and a conditional count",
      {
        source: m,
        columns: [
          { field: 'pinGroup.fields.id' },
          { type: 'share', condition: { type: 'and', restrictions: [{ left: 'measurement.value', comparison: '>', right: { value: 6 } }] } },
          { type: 'count', condition: { type: 'and', restrictions: [{ left: 'measurement.value', comparison: '<', right: { value: 2 } }] } },
        ],
      },
      [
        ['north', 80, 0],
        ['south', 0, 1],
      ],
    ],
    [
      'filter on an aggregated column (result rows)',
      {
        source: m,
        columns: [{ field: 'pin.fields.id' }, { type: 'count' }],
        filter: {
          type: 'and',
          restrictions: [
            { left: 1, comparison: '>', right: { value: 2 } },
            { left: 'measurement.value', comparison: '>', right: { value: 0 } },
          ],
        },
      },
      [['n1', 3]],
    ],
    [
      'sorted by an aggregate, descending',
      { source: m, columns: [{ field: 'pin.fields.id' }, { type: 'max', field: 'measurement.value' }], sort: [{ columnIndex: 1, descending: true }] },
      [
        ['n1', 30],
        ['n2', 7],
        ['s1', 2.5],
      ],
    ],
    [
      'significand and order of magnitude',
      {
        source: m,
        columns: [{ field: 'measurement.significand' }, { field: 'measurement.orderOfMagnitude' }],
        filter: { type: 'and', restrictions: [{ left: 'pin.fields.id', comparison: '=', right: { value: 's1' } }] },
      },
      [
        [1500, -3],
        [2500, -3],
      ],
    ],
    [
      'pins per pin group (source pin)',
      { source: 'pin', columns: [{ field: 'pinGroup.fields.id' }, { type: 'count' }] },
      [
        ['north', 2],
        ['south', 1],
      ],
    ],
    [
      'pin groups (source pinGroup)',
      { source: 'pinGroup', columns: [{ field: 'pinGroup.fields.id' }, { field: 'pinGroup.latitude' }, { field: 'pinGroup.level' }] },
      [
        ['north', 52.1, 0],
        ['south', 52.1, 0],
      ],
    ],
    ['edges (source edge)', { source: 'edge', columns: [{ field: 'edge.fields.id' }, { field: 'edge.mapLayer' }] }, [['cable', 'default']]],
    [
      'reports per pin group and day (source report)',
      {
        source: 'report',
        columns: [{ field: 'pinGroup.fields.id' }, { type: 'timeGroup', field: 'report.generatedAt', granularity: 'day' }, { type: 'count' }],
      },
      [
        ['north', day('1'), 3],
        ['north', day('2'), 1],
        ['north', day('3'), 1],
        ['south', day('2'), 2],
      ],
    ],
    ['claimed devices (source device): none', { source: 'device', columns: [{ type: 'count' }] }, [[0]]],
    ['quantity of measurements', { source: m, columns: [{ field: 'quantity.name' }, { type: 'count' }] }, [['V', 7]]],
    [
      'a calculation of a field, aggregated per pin',
      { source: m, columns: [{ field: 'pin.fields.id' }, { type: 'max', field: { expression: '(measurement.value - 1) * 2' } }] },
      [
        ['n1', 58],
        ['n2', 12],
        ['s1', 3],
      ],
    ],
    [
      'a calculation with functions, a remainder and a time in seconds',
      {
        source: m,
        columns: [
          { field: { expression: 'round(sqrt(measurement.value * 10)) + 7 % 4' } },
          { field: { expression: '[measurement.generatedAt] - 1735689600' } },
        ],
        filter: { type: 'and', restrictions: [{ left: 'pin.fields.id', comparison: '=', right: { value: 'n1' } }] },
        sort: [{ columnIndex: 0, descending: false }],
      },
      [
        [13, 36000],
        [17, 54000],
        [20, 118800],
      ],
    ],
    [
      'a calculation without a value is null: division by zero, the root of a negative',
      {
        source: m,
        columns: [
          { type: 'any', field: { expression: 'measurement.value / (measurement.value - measurement.value)' } },
          { type: 'any', field: { expression: 'sqrt(-measurement.value)' } },
        ],
      },
      [[null, null]],
    ],
    [
      'a filter on a calculation',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: { expression: '-measurement.value * 10' }, comparison: '<=', right: { value: -100 } }] },
      },
      [[3]],
    ],
    [
      'any, with a number hint on a text form field',
      {
        source: 'pin',
        columns: [
          { type: 'any', field: 'pin.fields.id' },
          { type: 'max', field: 'pin.fields.id', dataTypeHint: 'number' },
        ],
      },
      [['n1', null]],
    ],
  ];
  it.each(examples)('%s', async (_name, query, expected) => {
    const rows = await rowsOf(a, query);
    expect(rows.length).toBe(expected.length);
    rows.forEach((row, i) =>
      row.forEach((cell, j) => {
        const want = expected[i][j];
        if (typeof want === 'number' && !Number.isInteger(want)) expect(cell).toBeCloseTo(want, 9);
        else expect(cell, `row ${i} cell ${j}`).toEqual(want);
      }),
    );
  });

  it('inGrid (SDK 17.37): measurements of the pin groups of a grid', async () => {
    const inGrid = (left: string, value: string) => ({
      source: m,
      columns: [{ type: 'count' }],
      filter: { type: 'and', restrictions: [{ left, comparison: 'inGrid', right: { value } }] },
    });
    expect(await rowsOf(a, inGrid('pinGroup.hashId', gridHashId))).toEqual([[5]]);
    expect(await rowsOf(a, inGrid('pin.hashId', gridHashId))).toEqual([[0]]);
    expect(await rowsOf(b, inGrid('pinGroup.hashId', gridHashId))).toEqual([[0]]);
    expectParameterError(await results(a, inGrid('measurement.hashId', gridHashId)), 'filter.restrictions[0].left');
  });

  it('pages with sealed offsets: every row once, an offset of another query is refused', async () => {
    const q = { source: m, columns: [{ field: 'pin.fields.id' }, { field: 'measurement.value' }], rowsPerPage: 3 };
    const seen: unknown[][] = [];
    let offset: string | null = null;
    let pages = 0;
    do {
      const r = await results(a, { ...q, ...(offset ? { offset } : {}) });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.rows.length).toBeLessThanOrEqual(3);
      seen.push(...r.body.rows);
      offset = r.body.nextPageOffset;
      pages++;
    } while (offset);
    expect(pages).toBe(3);
    expect(seen.map((row) => `${row[0]}:${row[1]}`)).toEqual(['n1:10', 'n1:20', 'n1:30', 'n2:5', 'n2:7', 's1:1.5', 's1:2.5']);
    const first = await results(a, q);
    const other = await results(a, { ...q, columns: [{ field: 'pin.fields.id' }], offset: first.body.nextPageOffset });
    expectParameterError(other, 'offset');
    expectParameterError(await results(a, { ...q, offset: 'bm90IGFuIG9mZnNldA' }), 'offset');
  });

  it("tenant isolation: environment B's measurements never appear in A's results, nor A's in B's", async () => {
    expect(await rowsOf(a, { source: m, columns: [{ type: 'count' }, { type: 'max', field: 'measurement.value' }] })).toEqual([[7, 30]]);
    expect(await rowsOf(b, { source: m, columns: [{ field: 'pin.fields.id' }, { type: 'count' }] })).toEqual([['b1', 3]]);
    expect(await rowsOf(b, { source: 'pinGroup', columns: [{ field: 'pinGroup.fields.id' }] })).toEqual([['other']]);
    expect(await rowsOf(b, { source: 'edge', columns: [{ type: 'count' }] })).toEqual([[0]]);
    expect(await rowsOf(b, { source: 'report', columns: [{ type: 'count' }] })).toEqual([[3]]);
  });
});

describe('analytics results: quantity thresholds and missed reports', () => {
  it("a quantity's default thresholds are numbers: measurements below their quantity's low threshold", async () => {
    const db = api.ctx.db;
    const {
      rows: [q],
    } = await db.query<{ id: number }>(
      `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude, default_low_threshold, default_critically_high_threshold)
       SELECT md5(random()::text), id, '"T"', 'T', '#000000', 'K', 0, '{"orderOfMagnitude": -1, "significand": 65}', '{"orderOfMagnitude": 1, "significand": 2}'
         FROM environment WHERE hash_id = $1 RETURNING id`,
      [b.environmentHashId],
    );
    const other = (await addPinGroup(b, 'thresholds')).hashId;
    await plant(db, (await addPin(b, other, 't1')).hashId, q.id, [
      ['2025-02-01T10:00:00Z', 6],
      ['2025-02-01T11:00:00Z', 7],
      ['2025-02-01T12:00:00Z', 21],
    ]);
    const byQuantity = { type: 'and', restrictions: [{ left: 'quantity.name', comparison: '=', right: { value: 'T' } }] };
    expect(
      await rowsOf(b, {
        source: m,
        columns: [
          { type: 'any', field: 'quantity.defaultLowThresholdValue' },
          { type: 'any', field: 'quantity.defaultHighThresholdValue' },
          { type: 'any', field: 'quantity.defaultCriticallyHighThresholdValue' },
        ],
        filter: byQuantity,
      }),
    ).toEqual([[6.5, null, 20]]);
    const outside = (comparison: string, field: string) => ({
      source: m,
      columns: [{ field: 'measurement.value' }],
      filter: { type: 'and', restrictions: [byQuantity.restrictions[0], { left: 'measurement.value', comparison, right: { field } }] },
    });
    expect(await rowsOf(b, outside('<', 'quantity.defaultLowThresholdValue'))).toEqual([[6]]);
    expect(await rowsOf(b, outside('>', 'quantity.defaultCriticallyHighThresholdValue'))).toEqual([[21]]);
  });

  it("a pin's own thresholds (measurementThreshold) as numbers, as a source and beside its measurements", async () => {
    const t = await api.login('monitoring', ['READ', 'STATIC', 'THRESHOLDS', 'ENVIRONMENT_ADMIN']);
    const quantityHashId = (await t.request<{ hashId: string }>('POST', '/quantity/', { name: 'P', unit: 'Pa' })).body.hashId;
    const group = (await addPinGroup(t, 'thresholded')).hashId;
    const pin = await addPin(t, group, 'p1');
    await addPin(t, group, 'p2');
    const set = await t.request('POST', '/measurement-threshold/thresholds', {
      pinHashId: pin.hashId,
      quantityHashId,
      thresholds: { criticallyLow: null, low: { orderOfMagnitude: 0, significand: 2 }, high: { orderOfMagnitude: 2, significand: 15 }, criticallyHigh: null },
    });
    expect(set.status, JSON.stringify(set.body)).toBeLessThan(300);
    const {
      rows: [q],
    } = await api.ctx.db.query<{ id: number }>('SELECT id FROM quantity WHERE hash_id = $1', [quantityHashId]);
    await plant(api.ctx.db, pin.hashId, q.id, [
      ['2025-03-01T10:00:00Z', 1],
      ['2025-03-01T11:00:00Z', 3],
      ['2025-03-01T12:00:00Z', 1600],
    ]);
    expect(
      await rowsOf(t, {
        source: 'measurementThreshold',
        columns: [
          { field: 'pin.name' },
          { field: 'measurementThreshold.lowValue' },
          { field: 'measurementThreshold.highValue' },
          { field: 'measurementThreshold.criticallyLowValue' },
        ],
      }),
    ).toEqual([['p1', 2, 1500, null]]);
    const outside = {
      type: 'or',
      restrictions: [
        { left: 'measurement.value', comparison: '<', right: { field: 'measurementThreshold.lowValue' } },
        { left: 'measurement.value', comparison: '>', right: { field: 'measurementThreshold.highValue' } },
      ],
    };
    expect(await rowsOf(t, { source: m, columns: [{ field: 'measurement.value' }], filter: outside, sort: [{ columnIndex: 0, descending: false }] })).toEqual([
      [1],
      [1600],
    ]);
  });

  it("device.missedReports counts the reports a claimed device missed since its nextReportBefore; another environment's device is not seen", async () => {
    const db = api.ctx.db;
    const supplier = await api.login('connectivity', ['ENVIRONMENT_ADMIN']);
    const {
      rows: [t],
    } = await db.query<{ id: number }>(
      `INSERT INTO device_type (hash_id, environment_id, name, name_text, event_handler, event_handler_hash, subscription_hash_id)
       SELECT md5(random()::text), id, '"t"', 't', '', '', md5(random()::text) FROM environment WHERE hash_id = $1 RETURNING id`,
      [supplier.environmentHashId],
    );
    // reported an hour before its nextReportBefore, which passed 2.5 hours ago: 1 + 2 hour-long gaps missed
    const device = (identifier: string, env: string, lastOnline: string, nextBefore: string | null) =>
      db.query(
        `INSERT INTO device (hash_id, environment_id, device_type_id, supplier_device_identifier, last_online_at, next_report_before, claimed_environment_id)
       SELECT md5(random()::text), s.id, $2, $3, now() - $4::interval, now() - $5::interval, c.id FROM environment s, environment c WHERE s.hash_id = $1 AND c.hash_id = $6`,
        [supplier.environmentHashId, t.id, identifier, lastOnline, nextBefore, env],
      );
    await device('late', a.environmentHashId, '3.5 hours', '2.5 hours');
    await device('on time', a.environmentHashId, '10 minutes', '-50 minutes');
    await device('never reported', a.environmentHashId, '0', null);
    await device('in b', b.environmentHashId, '100 hours', '99 hours');
    expect(
      await rowsOf(a, { source: 'device', columns: [{ field: 'device.missedReports' }, { type: 'count' }], sort: [{ columnIndex: 0, descending: false }] }),
    ).toEqual([
      [0, 2],
      [3, 1],
    ]);
  });
});

describe("analytics results: the issue source, and objects' level from their open issues", () => {
  it("counts issues per level and pin group, open ones only by closedAt; B's issue never in A's answer", async () => {
    const ia = await api.login('monitoring', ['READ', 'STATIC', 'ISSUES']);
    const ib = await api.login('monitoring', ['READ', 'STATIC', 'ISSUES']);
    const east = (await addPinGroup(ia, 'east')).hashId;
    const west = (await addPinGroup(ia, 'west')).hashId;
    const add = async (c: ApiClient, pinGroupHashId: string, title: string, level: number) => {
      const r = await c.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId, title, level, comment: '' });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.hashId;
    };
    await add(ia, east, 'leak', 2);
    await add(ia, east, 'paint', 1);
    const closed = await add(ia, west, 'fence', 1);
    expect((await ia.request('POST', `/issue/${closed}`, { closed: true })).status).toBe(204);
    await add(ib, (await addPinGroup(ib, 'elsewhere')).hashId, 'not yours', 2);

    expect(
      await rowsOf(ia, { source: 'issue', columns: [{ field: 'issue.level' }, { type: 'count' }], sort: [{ columnIndex: 0, descending: false }] }),
    ).toEqual([
      [1, 2],
      [2, 1],
    ]);
    expect(
      await rowsOf(ia, {
        source: 'issue',
        columns: [{ field: 'pinGroup.fields.id' }, { type: 'count' }, { type: 'max', field: 'issue.level' }],
        filter: { type: 'and', restrictions: [{ left: 'issue.closedAt', comparison: 'isNull' }] },
        sort: [{ columnIndex: 0, descending: false }],
      }),
    ).toEqual([['east', 2, 2]]);
    // the pin group's level is the highest of its open issues: east 2, west 0 (its one issue is closed)
    expect(
      await rowsOf(ia, {
        source: 'pinGroup',
        columns: [{ field: 'pinGroup.fields.id' }, { field: 'pinGroup.level' }],
        sort: [{ columnIndex: 0, descending: false }],
      }),
    ).toEqual([
      ['east', 2],
      ['west', 0],
    ]);
    expect(await rowsOf(ib, { source: 'issue', columns: [{ field: 'issue.title' }] })).toEqual([['not yours']]);
  });
});

describe('analytics results: what the SDK allows but this service does not answer, and limits', () => {
  const cases: [string, Query, string][] = [
    ['an SDK table without a source here', { source: 'performanceMonth', columns: [{ type: 'count' }] }, 'source performanceMonth'],
    ['a name that is no analytics table', { source: 'pinGroups', columns: [{ type: 'count' }] }, 'source'],
    ['a field of an SDK table not kept', { source: 'pinGroup', columns: [{ field: 'performanceMonth.hashId' }] }, 'columns[0].field'],
    ['a table out of reach of the source', { source: 'edge', columns: [{ field: 'measurement.value' }] }, 'columns[0].field'],
    ['an unknown field', { source: m, columns: [{ field: 'measurement.nope' }] }, 'columns[0].field'],
    ['a calculation naming no field', { source: m, columns: [{ field: { expression: 'value * 2' } }] }, 'columns[0].field.expression'],
    ['a calculation of a text', { source: m, columns: [{ field: { expression: 'pin.hashId * 2' } }] }, 'columns[0].field.expression'],
    ['a calculation with an unknown function', { source: m, columns: [{ field: { expression: 'pg_sleep(10)' } }] }, 'columns[0].field.expression'],
    ['a calculation with SQL in it', { source: m, columns: [{ field: { expression: 'measurement.value; DROP TABLE pin' } }] }, 'columns[0].field.expression'],
    ['a calculation missing a parenthesis', { source: m, columns: [{ field: { expression: '(measurement.value * 2' } }] }, 'columns[0].field.expression'],
    [
      'a calculation nested too deep',
      { source: m, columns: [{ field: { expression: `${'('.repeat(21)}1${')'.repeat(21)}` } }] },
      'columns[0].field.expression',
    ],
    [
      'a calculation of too many operands',
      { source: m, columns: [{ field: { expression: Array.from({ length: 101 }, () => '1').join('+') } }] },
      'columns[0].field.expression',
    ],
    [
      "a calculation in a filter naming another table's unknown field",
      { source: m, columns: [{ type: 'count' }], filter: { type: 'and', restrictions: [{ left: { expression: 'pin.nope + 1' }, comparison: 'isNull' }] } },
      'filter.restrictions[0].left.expression',
    ],
    ['mean of a text', { source: m, columns: [{ type: 'mean', field: 'pin.hashId' }] }, 'columns[0].field'],
    ['time group of a text', { source: m, columns: [{ type: 'timeGroup', field: 'pin.hashId', granularity: 'day' }] }, 'columns[0].field'],
    [
      'an unknown granularity',
      { source: m, columns: [{ type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'fortnight' }] },
      'columns[0].granularity',
    ],
    [
      'an unknown comparison',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 'pin.hashId', comparison: 'between', right: { value: 'x' } }] },
      },
      'filter.restrictions[0].comparison',
    ],
    [
      'a text value for a number',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 'measurement.value', comparison: '=', right: { value: 'ten' } }] },
      },
      'filter.restrictions[0].right.value',
    ],
    [
      'a bad date',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 'measurement.generatedAt', comparison: '>', right: { value: 'yesterday' } }] },
      },
      'filter.restrictions[0].right.value',
    ],
    [
      'an unknown named range',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 'measurement.generatedAt', comparison: 'isNamedRange', right: { value: 'someday' } }] },
      },
      'right.value',
    ],
    ['a column index out of range', { source: m, columns: [{ type: 'count' }], sort: [{ columnIndex: 3, descending: false }] }, 'sort[0].columnIndex'],
    [
      'a filter on a column that does not exist',
      { source: m, columns: [{ type: 'count' }], filter: { type: 'and', restrictions: [{ left: 5, comparison: 'isNull' }] } },
      'filter.restrictions[0].left',
    ],
    [
      'an "or" of a field and an aggregate',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: {
          type: 'or',
          restrictions: [
            { left: 0, comparison: '>', right: { value: 1 } },
            { left: 'pin.hashId', comparison: 'isNull' },
          ],
        },
      },
      'filter',
    ],
    ['too many columns', { source: m, columns: Array.from({ length: 21 }, () => ({ type: 'count' })) }, 'columns'],
    ['rowsPerPage above 100', { source: m, columns: [{ type: 'count' }], rowsPerPage: 101 }, 'rowsPerPage'],
    ['limitedTo above 10000', { source: m, columns: [{ type: 'count' }], limitBy: { limitedTo: 10001 } }, 'limitBy.limitedTo'],
    [
      'a value over 1000 characters',
      {
        source: m,
        columns: [{ type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 'pin.hashId', comparison: '=', right: { value: 'x'.repeat(1001) } }] },
      },
      'value',
    ],
  ];
  it.each(cases)('%s', async (_name, query, field) => {
    expectParameterError(await results(a, query), field);
  });

  it('nesting deeper than 5 conditions is refused naming the filter', async () => {
    let filter: Query = { type: 'and', restrictions: [{ left: 'pin.hashId', comparison: 'isNull' }] };
    for (let i = 0; i < 5; i++) filter = { type: 'and', restrictions: [filter] };
    expectParameterError(await results(a, { source: m, columns: [{ type: 'count' }], filter }), 'filter');
  });
});

describe('hostile queries: 400, never a 500, never SQL in an answer, nothing executed', () => {
  const inject = "x'); DROP TABLE pin; --";
  const hostile: Query[] = [
    { source: `measurement; ${inject}`, columns: [{ type: 'count' }] },
    { source: '__proto__', columns: [{ type: 'count' }] },
    { source: 'constructor', columns: [{ type: 'count' }] },
    { source: m, columns: [{ field: '__proto__' }] },
    { source: m, columns: [{ field: 'pin.__proto__' }] },
    { source: m, columns: [{ field: 'pin.constructor' }] },
    { source: m, columns: [{ field: '__proto__.hashId' }] },
    { source: m, columns: [{ field: `pin.hashId ${inject}` }] },
    { source: m, columns: [{ field: 'pin.hasOwnProperty' }] },
    { source: m, columns: [{ field: 'pinGroup.__proto__.x' }] },
    { source: m, columns: [{ type: 'timeGroup', field: 'measurement.generatedAt', granularity: "day', now()) --" }] },
    { source: m, columns: [{ type: 'timeGroup', field: 'measurement.generatedAt', granularity: '__proto__' }] },
    {
      source: m,
      columns: [{ type: 'count' }],
      filter: { type: 'and', restrictions: [{ left: 'pin.hashId', comparison: `= 'x' OR 1=1 --`, right: { value: 'x' } }] },
    },
    {
      source: m,
      columns: [{ type: 'count' }],
      filter: { type: 'and', restrictions: [{ left: 'pin.hashId', comparison: '__proto__', right: { value: 'x' } }] },
    },
    {
      source: m,
      columns: [{ type: 'count' }],
      filter: { type: 'and', restrictions: [{ left: 'measurement.value', comparison: '=', right: { value: `1; ${inject}` } }] },
    },
    {
      source: m,
      columns: [{ type: 'count' }],
      filter: { type: 'and', restrictions: [{ left: 'measurement.value', comparison: '=', right: { value: '1e999' } }] },
    },
    {
      source: m,
      columns: [{ type: 'count' }],
      filter: { type: 'and', restrictions: [{ left: 'measurement.generatedAt', comparison: 'isNamedRange', right: { value: '__proto__' } }] },
    },
    {
      source: m,
      columns: [{ type: 'count' }],
      filter: { type: 'and', restrictions: [{ left: 'measurement.generatedAt', comparison: '=', right: { value: '99999-01-01T00:00:00Z' } }] },
    },
    {
      source: m,
      columns: [{ type: 'count' }],
      filter: { type: 'and', restrictions: [{ left: 'pin.hashId', comparison: '=', right: { field: `pin.name ${inject}` } }] },
    },
    { source: m, columns: [{ type: 'count' }], filter: { type: `and ${inject}`, restrictions: [] } },
    { source: m, columns: [{ type: 'count' }], sort: [{ columnIndex: `0 ${inject}`, descending: false }] },
    { source: m, columns: [{ type: 'count' }], sort: [{ columnIndex: 1e30, descending: false }] },
    { source: m, columns: [{ type: 'count' }], limitBy: { limitedTo: 1e30 } },
    { source: m, columns: [{ type: 'count' }], limitBy: { limitedTo: 1, per: [{ columnIndex: -1 }] } },
    { source: m, columns: [{ type: 'count' }], rowsPerPage: 1e12 },
    { source: m, columns: [{ type: `count(*) FROM pin; ${inject}` }] },
    { source: m, columns: [{ type: 'sum', field: 'measurement.value', dataTypeHint: `number; ${inject}` }] },
    { source: m, columns: [{ field: 'pin.fields.id\u0000' }] },
    { source: m, columns: [{ type: 'count' }], filter: { type: 'and', restrictions: [{ left: 'pin.hashId', comparison: '=', right: { value: 'a\u0000b' } }] } },
  ];
  it.each(hostile.map((q, i) => [i, q] as const))('hostile query %i', async (_i, query) => {
    const r = await results(a, query);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.key).toBe('parameter_error');
    expect(r.body.message).not.toMatch(/SELECT|FROM measurement|\$\d+::/);
  });

  it('deep nesting far past the schema is a 400', async () => {
    let filter: Query = { type: 'and', restrictions: [{ left: 'pin.hashId', comparison: 'isNull' }] };
    for (let i = 0; i < 40; i++) filter = { type: 'and', restrictions: [filter] };
    const r = await results(a, { source: m, columns: [{ type: 'count' }], filter });
    expect(r.status).toBe(400);
  });

  it('values and form-field keys travel as parameters: injection text is only data', async () => {
    // an injection string as a compared text value and as a form-field key: valid queries that match nothing
    expect(
      await rowsOf(a, {
        source: m,
        columns: [{ type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 'pin.fields.id', comparison: '=', right: { value: inject } }] },
      }),
    ).toEqual([[0]]);
    expect(await rowsOf(a, { source: 'pin', columns: [{ field: `pin.fields.${inject}` }, { type: 'count' }] })).toEqual([[null, 3]]);
    expect(
      await rowsOf(a, {
        source: m,
        columns: [{ type: 'count' }],
        filter: { type: 'and', restrictions: [{ left: 'measurement.value', comparison: '<', right: { value: 1e308 } }] },
      }),
    ).toEqual([[7]]);
    // and nothing was executed: the tables are all there
    expect(await rowsOf(a, { source: 'pin', columns: [{ type: 'count' }] })).toEqual([[3]]);
  });
});

describe('analytics panels', () => {
  const card = (title: string) => ({
    title,
    subtitle: '',
    query: { source: m, columns: [{ type: 'count' }] },
    visualisation: { type: 'line', colors: ['#202f0c'], xAxisColumnIndex: null, forceOrdinal: false, yMin: null, yMax: 10 },
  });

  it('add, find, get, update, delete; deleting the default panel clears the setting', async () => {
    const added = await a.request<{ hashId: string }>('POST', '/analytics/panel', {
      title: 'Condition',
      layout: [
        { x: 0, y: 0, width: 3, height: 4 },
        { x: 3, y: 0, width: 3, height: 4 },
      ],
      cards: [card('count'), card('again')],
    });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    const { hashId } = added.body;
    const v8 = { 'api-version': '8' };
    const got = await a.request<{ panel: unknown }>('GET', `/analytics/panel/${hashId}`, undefined, v8);
    expect(got.body.panel).toEqual({
      hashId,
      title: 'Condition',
      layout: [
        { x: 0, y: 0, width: 3, height: 4 },
        { x: 3, y: 0, width: 3, height: 4 },
      ],
      cards: [card('count'), card('again')],
    });
    const found = await a.request<{ rows: { panel: { hashId: string } }[] }>('GET', '/analytics/panel?search=Condition');
    expect(found.body.rows.map((r) => r.panel.hashId)).toContain(hashId);

    expect((await a.request('POST', `/analytics/${hashId}`, { title: 'Renamed', cards: [card('one')] })).status).toBe(204);
    const updated = await a.request<{ panel: { title: string; cards: unknown[]; layout: unknown[] } }>('GET', `/analytics/panel/${hashId}`, undefined, v8);
    expect(updated.body.panel).toMatchObject({ title: 'Renamed', cards: [card('one')], layout: [{ x: 0 }, { x: 3 }] });

    // the default panel: set, answered by environment get and login, cleared by deleting the panel
    const settings = () => a.request<{ userEnvironmentSettings: unknown }>('GET', `/environment/${a.environmentHashId}`);
    expect((await settings()).body.userEnvironmentSettings).toEqual({ notificationLevel: 0, defaultAnalyticsPanelHashId: null });
    expect((await a.request('POST', '/settings/user-environment-settings', { defaultAnalyticsPanelHashId: hashId })).status).toBe(204);
    expect((await settings()).body.userEnvironmentSettings).toEqual({ notificationLevel: 0, defaultAnalyticsPanelHashId: hashId });
    expect((await a.request('POST', '/settings/user-environment-settings', { notificationLevel: null })).status).toBe(204);
    expect((await settings()).body.userEnvironmentSettings).toEqual({ notificationLevel: null, defaultAnalyticsPanelHashId: hashId });
    const envFind = await a.request<{ rows: { userEnvironmentSettings: unknown }[] }>('GET', '/environment/');
    expect(envFind.body.rows[0].userEnvironmentSettings).toEqual({ notificationLevel: null, defaultAnalyticsPanelHashId: hashId });

    expect((await a.request('DELETE', `/analytics/panel/${hashId}`)).status).toBe(204);
    expect((await a.request('GET', `/analytics/panel/${hashId}`)).status).toBe(404);
    expect((await settings()).body.userEnvironmentSettings).toEqual({ notificationLevel: null, defaultAnalyticsPanelHashId: null });
    expectParameterError(
      await a.request('POST', '/settings/user-environment-settings', { defaultAnalyticsPanelHashId: hashId }),
      'defaultAnalyticsPanelHashId',
    );
  });

  it("login answers the account's own settings", async () => {
    const { createEnvironment, createMachineAccount } = await import('../../src/accounts/store.ts');
    const env = await createEnvironment(api.ctx.db, 'monitoring', 'login settings');
    const made = await createMachineAccount(api.ctx.db, env.hashId, ['READ', 'REPORTS']);
    const login = async () =>
      (
        await api.app.inject({ method: 'POST', url: '/authentication/machine-login', headers: { 'api-version': '8' }, payload: { assertion: made.assertion } })
      ).json() as { jwt: string; userEnvironmentSettings: unknown };
    const { jwt } = await login();
    const headers = { 'api-version': '8', 'environment-hash-id': env.hashId, authorization: `Bearer ${jwt}` };
    const panel = (await api.app.inject({ method: 'POST', url: '/analytics/panel', headers, payload: { title: 'Home', cards: [] } })).json() as {
      hashId: string;
    };
    await api.app.inject({
      method: 'POST',
      url: '/settings/user-environment-settings',
      headers,
      payload: { notificationLevel: 2, defaultAnalyticsPanelHashId: panel.hashId },
    });
    expect((await login()).userEnvironmentSettings).toEqual({ notificationLevel: 2, defaultAnalyticsPanelHashId: panel.hashId });
    const settings = await api.app.inject({ method: 'GET', url: '/settings/', headers: { 'api-version': '8', authorization: `Bearer ${jwt}` } });
    expect(settings.json()).toMatchObject({
      environment: { hashId: env.hashId },
      environmentRights: ['READ', 'REPORTS'],
      userEnvironmentSettings: { notificationLevel: 2, defaultAnalyticsPanelHashId: panel.hashId },
      user: { name: 'machine account' },
    });
  });

  it('a table carrying chart members (SDK 17.37) is stored as a table; line charts lose yMin and yMax for Api-Version 5', async () => {
    const table = { ...card('t'), visualisation: { type: 'table', colors: ['#000000'], xAxisColumnIndex: null, forceOrdinal: false } };
    const { hashId } = (await a.request<{ hashId: string }>('POST', '/analytics/panel', { title: 'Old SDK', cards: [table, card('line')] })).body;
    const v8 = await a.request<{ panel: { cards: { visualisation: unknown }[] } }>('GET', `/analytics/panel/${hashId}`, undefined, { 'api-version': '8' });
    expect(v8.body.panel.cards.map((c) => c.visualisation)).toEqual([{ type: 'table' }, card('line').visualisation]);
    const v5 = await a.request<{ panel: { cards: { visualisation: unknown }[] } }>('GET', `/analytics/panel/${hashId}`);
    expect(v5.body.panel.cards[1].visualisation).toEqual({ type: 'line', colors: ['#202f0c'], xAxisColumnIndex: null, forceOrdinal: false });
  });

  it("limits: title, overlapping layout, cards, a card's visualisation", async () => {
    expectParameterError(await a.request('POST', '/analytics/panel', { title: 'x'.repeat(101), cards: [] }), 'title');
    expectParameterError(
      await a.request('POST', '/analytics/panel', {
        title: 't',
        layout: [
          { x: 0, y: 0, width: 3, height: 4 },
          { x: 2, y: 3, width: 2, height: 4 },
        ],
        cards: [],
      }),
      'layout[1]',
      'layout[0]',
    );
    expectParameterError(await a.request('POST', '/analytics/panel', { title: 't', layout: [{ x: 6, y: 0, width: 2, height: 4 }], cards: [] }), 'layout.0.x');
    expectParameterError(await a.request('POST', '/analytics/panel', { title: 't', cards: Array.from({ length: 51 }, () => card('c')) }), 'cards');
    expectParameterError(
      await a.request('POST', '/analytics/panel', { title: 't', cards: [{ ...card('c'), visualisation: { type: 'pie' } }] }),
      'cards.0.visualisation',
    );
    expectParameterError(
      await a.request('POST', '/analytics/panel', { title: 't', cards: [{ ...card('c'), query: { source: m, columns: [] } }] }),
      'cards.0.query.columns',
    );
  });

  it("tenant isolation: B's panel cannot be read, changed, deleted or made A's default", async () => {
    const theirs = (await b.request<{ hashId: string }>('POST', '/analytics/panel', { title: 'B only', cards: [card('b')] })).body.hashId;
    expect((await a.request('GET', `/analytics/panel/${theirs}`)).status).toBe(404);
    expect((await a.request('POST', `/analytics/${theirs}`, { title: 'taken' })).status).toBe(404);
    expect((await a.request('DELETE', `/analytics/panel/${theirs}`)).status).toBe(404);
    expectParameterError(
      await a.request('POST', '/settings/user-environment-settings', { defaultAnalyticsPanelHashId: theirs }),
      'defaultAnalyticsPanelHashId',
    );
    const found = await a.request<{ rows: { panel: { hashId: string } }[] }>('GET', '/analytics/panel?rowsPerPage=100');
    expect(found.body.rows.map((r) => r.panel.hashId)).not.toContain(theirs);
    expect((await b.request<{ panel: { title: string } }>('GET', `/analytics/panel/${theirs}`)).body.panel.title).toBe('B only');
  });
});

describe('bounds: the statement timeout and the number of queries at once', () => {
  // one environment with 300,000 measurements, read by two services on the same database: one whose
  // analytics statements may run 1 ms, one with the defaults (10 s, 2 at once)
  let strict: TestApi;
  let c: ApiClient;
  let other: ApiClient;
  beforeAll(async () => {
    strict = await startTestApi(await testContext({ ANALYTICS_STATEMENT_TIMEOUT_MS: '1' }));
    c = await strict.login('monitoring', ['READ', 'STATIC']);
    const pin = await addPin(c, (await addPinGroup(c, 'big')).hashId, 'big');
    const q = await quantity(strict.ctx.db, c, 'V');
    await strict.ctx.db.query(
      `WITH p AS (SELECT id, environment_id, pin_group_id FROM pin WHERE hash_id = $1),
            r AS (INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id) SELECT 'big-' || $1, environment_id, now(), pin_group_id FROM p RETURNING id)
       INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
       SELECT 'm' || i, r.id, p.environment_id, $2, p.id, 0, i, timestamptz '2024-01-01' + make_interval(mins => i), 0, i
         FROM p, r, generate_series(1, 300000) i`,
      [pin.hashId, q],
    );
    await strict.ctx.db.query('ANALYZE measurement');
    // the same account through the service with the default bounds
    const token = c.token;
    other = {
      ...c,
      request: async (method, url, body, headers) => {
        const r = await api.app.inject({
          method: method as 'GET',
          url,
          headers: { 'api-version': '5', 'environment-hash-id': c.environmentHashId, authorization: `Bearer ${token}`, ...headers },
          ...(body === undefined ? {} : { payload: body as object }),
        });
        return { status: r.statusCode, body: (r.body ? r.json() : null) as never };
      },
    };
  }, 120_000);
  afterAll(async () => {
    // the other test files share this database: their planners must not keep statistics of 300,000
    // measurements of one report and one pin (measurement find planned a scan of the table per report)
    await strict?.ctx.db.query('DELETE FROM measurement WHERE environment_id = (SELECT id FROM environment WHERE hash_id = $1)', [c.environmentHashId]);
    await strict?.ctx.db.query('ANALYZE measurement');
    await strict?.close();
  });

  const broad = {
    source: m,
    columns: [
      { type: 'timeGroup', field: 'measurement.generatedAt', granularity: 'hour' },
      { type: 'mean', field: 'measurement.value' },
      { field: 'pin.fields.id' },
    ],
  };
  const active = async () =>
    (
      await api.ctx.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND state = 'active' AND query LIKE '%AS c0%' AND pid <> pg_backend_pid()",
      )
    ).rows[0].n;

  it('cancels a query that runs too long and answers analytics_query_too_broad; the database is free afterwards', async () => {
    const r = await results(c, broad);
    expect(r.status).toBe(400);
    expect(r.body.key).toBe('analytics_query_too_broad');
    expect(await active()).toBe(0);
  });

  it('computes at most 2 queries at once per process; the others wait and are answered', async () => {
    let most = 0;
    let done = false;
    const sampler = (async () => {
      while (!done) {
        most = Math.max(most, await active());
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const answers = await Promise.all(Array.from({ length: 5 }, () => results(other, broad)));
    done = true;
    await sampler;
    for (const r of answers) expect(r.status, JSON.stringify(r.body).slice(0, 200)).toBe(200);
    expect(answers[0].body.rows.length).toBe(20);
    expect(most).toBeGreaterThanOrEqual(1);
    expect(most).toBeLessThanOrEqual(2);
  });
});

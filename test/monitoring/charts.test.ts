import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, expectParameterError, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';

// Charts: series of a pin's measurements (raw, or reduced to min/max buckets over long ranges) and
// chart panels (automatic from the linked device type and the measured quantities, manual as saved).

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Measurement {
  hashId: string;
  generatedAt: string;
  reportHashId: string;
  pinHashId: string;
  significand: number;
  orderOfMagnitude: number;
  channelIndex: number;
  channelMeasurementIndex: number;
  performance: number;
}
interface Series {
  pinHashId: string;
  quantityHashId: string;
  measurements: Measurement[];
  reduction: null | {
    kind: string;
    pointCount: number;
    bucketCount: number;
    bucketSeconds: number;
    buckets: { startAt: string; count: number; mean: number }[];
  };
}
interface ChartSeries {
  quantity: { hashId: string; name: unknown };
  pin: { hashId: string; pinGroupHashId: string };
  pinGroup: { hashId: string };
  color: string | null;
  pinThreshold: unknown;
}
interface Chart {
  title: string | null;
  series: ChartSeries[];
}
interface Panel {
  lastMode: string;
  charts: { automatic: Chart[]; manual: Chart[] };
}

const ok = <T>(r: { status: number; body: unknown }): T => {
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as T;
};

async function idOf(table: 'pin' | 'pin_group', hashId: string): Promise<number> {
  return (await api.ctx.db.query<{ id: number }>(`SELECT id FROM ${table} WHERE hash_id = $1`, [hashId])).rows[0].id;
}

/** A quantity of the client's environment, straight in the table; returns its id and hashId. */
async function ownQuantity(c: ApiClient, name: string): Promise<{ id: number; hashId: string }> {
  const hashId = `q${randomBytes(5).toString('hex')}`;
  const {
    rows: [q],
  } = await api.ctx.db.query<{ id: number }>(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude)
     SELECT $1, id, $2, $3, '#000000', 'V', 0 FROM environment WHERE hash_id = $4 RETURNING id`,
    [hashId, JSON.stringify(name), name, c.environmentHashId],
  );
  return { id: q.id, hashId };
}

/**
 * Measurements of `quantityId` on a pin, one report each, stored as the ingest stores them:
 * `count` values `stepSeconds` apart from `from`, significand 100 + i % 50, except the planted ones.
 */
async function measure(
  pinHashId: string,
  quantityId: number,
  from: string,
  count: number,
  stepSeconds: number,
  planted: Record<number, number> = {},
): Promise<void> {
  const pinId = await idOf('pin', pinHashId);
  const {
    rows: [p],
  } = await api.ctx.db.query<{ env: number; pg: number }>('SELECT environment_id AS env, pin_group_id AS pg FROM pin WHERE id = $1', [pinId]);
  const tag = randomBytes(4).toString('hex');
  await api.ctx.db.query(
    `WITH r AS (
       INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id)
       SELECT 'r' || $6 || '_' || i, $1, $3::timestamptz + make_interval(secs => i * $5), $2 FROM generate_series(0, $4 - 1) i
       RETURNING id, generated_at, hash_id)
     INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
     SELECT 'm' || substr(r.hash_id, 2), r.id, $1, $7, $8, 0, 0, r.generated_at, -3,
            COALESCE(($9::jsonb ->> (split_part(r.hash_id, '_', 2)))::int, 100 + split_part(r.hash_id, '_', 2)::int % 50)
       FROM r`,
    [p.env, p.pg, from, count, stepSeconds, tag, quantityId, pinId, JSON.stringify(planted)],
  );
}

const seriesUrl = (startAt: string, endAt: string, series: { pinHashId: string; quantityHashId: string }[], extra = '') =>
  `/chart/?startAt=${startAt}&endAt=${endAt}${series.map((s, i) => `&series[${i}][pinHashId]=${s.pinHashId}&series[${i}][quantityHashId]=${s.quantityHashId}`).join('')}${extra}`;

describe('chart series', () => {
  it('reduces a year to at most 500 min/max buckets of whole hours and keeps the planted spike; a short range is raw', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pg = await addPinGroup(c);
    const pin = await addPin(c, pg.hashId, 'anode');
    const q = await ownQuantity(c, 'Potential');
    // hourly through 2025: 8,760 values with a dip at hour 7,000; the spike arrives later, in an hour that already has a value
    await measure(pin.hashId, q.id, '2025-01-01T00:00:00Z', 8760, 3600, { 7000: -55_555 });
    const spikeAt = new Date(Date.UTC(2025, 0, 1) + 5000 * 3600_000 + 20 * 60_000).toISOString();
    await measure(pin.hashId, q.id, spikeAt, 1, 60, { 0: 999_999 });
    // in the first, partial hour of the range (read from the measurements, not the rollup), and just before the range
    await measure(pin.hashId, q.id, '2025-01-01T00:45:00Z', 1, 60, { 0: -77_777 });
    await measure(pin.hashId, q.id, '2025-01-01T00:15:00Z', 1, 60, { 0: -88_888 });
    const ref = { pinHashId: pin.hashId, quantityHashId: q.hashId };

    const year = ok<{ series: Series[] }>(await c.request('GET', seriesUrl('2025-01-01T00:30:00Z', '2026-01-01T00:00:00Z', [ref])));
    expect(year.series).toHaveLength(1);
    const s = year.series[0];
    expect(s).toMatchObject(ref);
    const r = s.reduction!;
    expect(r).toMatchObject({ kind: 'minMax', pointCount: 8759 + 2 });
    expect(r.bucketSeconds % 3600).toBe(0);
    expect(r.bucketCount).toBeLessThanOrEqual(500);
    expect(r.bucketCount).toBe(Math.ceil((8760 * 3600) / r.bucketSeconds));
    expect(r.buckets.reduce((a, b) => a + b.count, 0)).toBe(8761);
    expect(s.measurements.length).toBeLessThanOrEqual(2 * r.bucketCount);
    expect(s.measurements.length).toBeGreaterThan(r.bucketCount);
    const spike = s.measurements.find((m) => m.significand === 999_999);
    expect(spike).toMatchObject({
      generatedAt: spikeAt,
      pinHashId: pin.hashId,
      orderOfMagnitude: -3,
      channelIndex: 0,
      channelMeasurementIndex: 0,
      performance: -1,
    });
    expect(spike!.reportHashId).toMatch(/^r/);
    expect(s.measurements.some((m) => m.significand === -55_555)).toBe(true);
    expect(s.measurements.some((m) => m.significand === -77_777)).toBe(true);
    expect(s.measurements.some((m) => m.significand === -88_888)).toBe(false);
    const times = s.measurements.map((m) => m.generatedAt);
    expect(times).toEqual([...times].sort());
    // the spike's bucket has the highest mean
    const spikeBucket = r.buckets.find((b) => b.startAt <= spikeAt && Date.parse(b.startAt) + r.bucketSeconds * 1000 > Date.parse(spikeAt))!;
    expect(Math.max(...r.buckets.map((b) => b.mean))).toBe(spikeBucket.mean);

    // highResolution takes up to 10,000 raw points: the year is raw
    const high = ok<{ series: Series[] }>(await c.request('GET', seriesUrl('2025-01-01T00:00:00Z', '2026-01-01T00:00:00Z', [ref], '&highResolution=true')));
    expect(high.series[0].reduction).toBeNull();
    expect(high.series[0].measurements).toHaveLength(8763);

    // a day is raw: every value, in time order, endAt excluded
    const day = ok<{ series: Series[] }>(await c.request('GET', seriesUrl('2025-03-01T00:00:00Z', '2025-03-02T00:00:00Z', [ref, ref])));
    expect(day.series).toHaveLength(2);
    expect(day.series[0].reduction).toBeNull();
    expect(day.series[0].measurements).toHaveLength(24);
    expect(day.series[0].measurements[0].generatedAt).toBe('2025-03-01T00:00:00.000Z');
    expect(day.series[0].measurements[23].generatedAt).toBe('2025-03-01T23:00:00.000Z');
    expect(Object.keys(day.series[0].measurements[0]).sort()).toEqual([
      'channelIndex',
      'channelMeasurementIndex',
      'generatedAt',
      'hashId',
      'orderOfMagnitude',
      'performance',
      'pinHashId',
      'reportHashId',
      'significand',
    ]);
    // no series asked (axios leaves an empty list out): none answered
    expect(ok<{ series: Series[] }>(await c.request('GET', '/chart/?startAt=2025-03-01T00:00:00Z&endAt=2025-03-02T00:00:00Z'))).toEqual({ series: [] });
  });

  it('reduces a range of buckets shorter than an hour from the measurements themselves', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pin = await addPin(c, (await addPinGroup(c)).hashId, 'p');
    const q = await ownQuantity(c, 'Current');
    // a value a minute for 50 hours, a spike at minute 2,000
    await measure(pin.hashId, q.id, '2025-06-01T00:00:00Z', 3000, 60, { 2000: 123_456 });
    const s = ok<{ series: Series[] }>(
      await c.request('GET', seriesUrl('2025-06-01T00:00:00Z', '2025-06-03T02:00:00Z', [{ pinHashId: pin.hashId, quantityHashId: q.hashId }])),
    ).series[0];
    expect(s.reduction).toMatchObject({ kind: 'minMax', pointCount: 3000, bucketCount: 500, bucketSeconds: 360 });
    expect(s.measurements.find((m) => m.significand === 123_456)?.generatedAt).toBe(new Date(Date.UTC(2025, 5, 1) + 2000 * 60_000).toISOString());
    expect(s.measurements.length).toBeLessThanOrEqual(1000);
  });

  it("another environment's pin or quantity is a parameter_error, never data; limits", async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pin = await addPin(c, (await addPinGroup(c)).hashId, 'p');
    const q = await ownQuantity(c, 'V');
    await measure(pin.hashId, q.id, '2025-01-01T00:00:00Z', 10, 60);
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const otherPin = await addPin(other, (await addPinGroup(other)).hashId, 'p');
    const otherQ = await ownQuantity(other, 'V');
    const range = ['2025-01-01T00:00:00Z', '2025-01-02T00:00:00Z'] as const;
    expectParameterError(await other.request('GET', seriesUrl(...range, [{ pinHashId: pin.hashId, quantityHashId: q.hashId }])), 'series[0].pinHashId');
    // its own pin with the foreign quantity: the quantity is neither its own nor measured there
    expectParameterError(
      await other.request(
        'GET',
        seriesUrl(...range, [
          { pinHashId: otherPin.hashId, quantityHashId: otherQ.hashId },
          { pinHashId: otherPin.hashId, quantityHashId: q.hashId },
        ]),
      ),
      'series[1].quantityHashId',
    );
    expectParameterError(await c.request('GET', seriesUrl(...range, [{ pinHashId: pin.hashId, quantityHashId: 'nope' }])), 'series[0].quantityHashId');
    // the owner reads it
    expect(
      ok<{ series: Series[] }>(await c.request('GET', seriesUrl(...range, [{ pinHashId: pin.hashId, quantityHashId: q.hashId }]))).series[0].measurements,
    ).toHaveLength(10);
    const many = Array.from({ length: 41 }, () => ({ pinHashId: pin.hashId, quantityHashId: q.hashId }));
    expectParameterError(await c.request('GET', seriesUrl(...range, many)), 'series', '40');
    expectParameterError(await c.request('GET', seriesUrl(range[1], range[0], [])), 'endAt');
    expectParameterError(await c.request('GET', seriesUrl('yesterday', range[1], [])), 'startAt');
    expectParameterError(await c.request('GET', `/chart/?endAt=${range[1]}`), 'startAt');
  });
});

/** A supplier with quantities Voltage and Current and a two-channel device type charting them; a customer that claimed a device of it and linked it to a new pin group. */
async function linkedDevice() {
  const supplier = await api.login('connectivity');
  const voltage = ok<{ hashId: string }>(await supplier.request('POST', '/quantity/', { name: 'Voltage', unit: 'V' })).hashId;
  const current = ok<{ hashId: string }>(await supplier.request('POST', '/quantity/', { name: 'Current', unit: 'A', color: '#123456' })).hashId;
  const type = await addDeviceType(supplier, {
    channels: [
      { name: 'Red wire', defaultPinName: 'Red', pinFieldConfigurations: [] },
      {
        name: 'Black wire',
        defaultPinName: 'Black',
        pinFieldConfigurations: [],
        charts: [{ title: { en: 'Current', nl: 'Stroom' }, series: [{ quantityHashId: current, color: '#00ff00' }] }],
      },
    ],
    charts: [
      {
        title: 'Both',
        series: [
          { channelIndex: 0, quantityHashId: voltage, color: '#ff0000' },
          { channelIndex: 1, quantityHashId: current },
        ],
      },
    ],
  });
  const id = `chart-${randomBytes(5).toString('hex')}`;
  const device = ok<{ hashId: string }>(
    await supplier.request('POST', '/device/psk', { supplierDeviceIdentifier: id, deviceTypeHashId: type, psk: 'ab'.repeat(16), pskIdentity: id }),
  ).hashId;
  const token = ok<{ claimTokens: { claimToken: string }[] }>(await supplier.request('POST', '/device/claim-tokens', { deviceHashIds: [device] }))
    .claimTokens[0].claimToken;
  const customer = await api.login('monitoring', ['READ', 'STATIC', 'SENSORS', 'REPORTS', 'THRESHOLDS']);
  ok(await customer.request('POST', '/device/claim', { claimTokens: [token] }));
  const pg = await addPinGroup(customer, 'Rectifier');
  const link = ok<{ device: { hashId: string } }>(await customer.request('POST', `/device/${device}/link`, { pinGroupHashId: pg.hashId, channelMapping: [] }));
  expect(link.device.hashId).toBe(device);
  const get = ok<{ channelMapping: { channel: number; pinHashId: string }[] }>(await customer.request('GET', `/graph/pin-group/${pg.hashId}`));
  const [red, black] = get.channelMapping.map((m) => m.pinHashId);
  const { rows } = await api.ctx.db.query<{ id: number; hash_id: string }>('SELECT id, hash_id FROM quantity WHERE hash_id = ANY($1)', [[voltage, current]]);
  const ids = new Map(rows.map((r) => [r.hash_id, r.id]));
  return {
    supplier,
    customer,
    pg: pg.hashId,
    red,
    black,
    voltage: { hashId: voltage, id: ids.get(voltage)! },
    current: { hashId: current, id: ids.get(current)! },
  };
}

const summary = (charts: Chart[]) => charts.map((c) => ({ title: c.title, series: c.series.map((s) => `${s.pin.hashId}:${s.quantity.hashId}:${s.color}`) }));

describe('chart panel', () => {
  it("automatic: the linked device type's charts on the mapped pins, then a chart per further measured quantity", async () => {
    const { customer: c, pg, red, black, voltage, current } = await linkedDevice();
    const temperature = await ownQuantity(c, 'Temperature');
    await measure(red, voltage.id, '2026-01-01T00:00:00Z', 3, 60);
    await measure(black, temperature.id, '2026-01-01T00:00:00Z', 3, 60);
    await measure(red, temperature.id, '2026-01-01T00:00:00Z', 3, 60);

    const panel = ok<Panel>(await c.request('GET', `/chart/panel?pinGroupHashId=${pg}`));
    expect(panel.lastMode).toBe('automatic');
    expect(panel.charts.manual).toEqual([]);
    expect(summary(panel.charts.automatic)).toEqual([
      { title: 'Both', series: [`${red}:${voltage.hashId}:#ff0000`, `${black}:${current.hashId}:null`] },
      { title: 'Current', series: [`${black}:${current.hashId}:#00ff00`] },
      // voltage on red is already shown by the device type's chart
      { title: 'Temperature', series: [`${red}:${temperature.hashId}:null`, `${black}:${temperature.hashId}:null`] },
    ]);
    const first = panel.charts.automatic[0].series[0];
    expect(first.pinGroup).toMatchObject({ hashId: pg, deviceLinkHashId: expect.any(String), level: 0, deletedAt: null });
    expect(first.pin).toMatchObject({ hashId: red, pinGroupHashId: pg, name: 'Red', level: 0, deletedAt: null });
    expect(first.quantity).toMatchObject({ hashId: voltage.hashId, name: 'Voltage', unit: 'V' });
    expect(first.pinThreshold).toBeNull();

    // a pin's panel: only its series
    const pinPanel = ok<Panel>(await c.request('GET', `/chart/panel?pinHashId=${black}`));
    expect(summary(pinPanel.charts.automatic)).toEqual([
      { title: 'Both', series: [`${black}:${current.hashId}:null`] },
      { title: 'Current', series: [`${black}:${current.hashId}:#00ff00`] },
      { title: 'Temperature', series: [`${black}:${temperature.hashId}:null`] },
    ]);

    // a pin grid's panel: a chart per measured quantity, pins in grid order
    const grid = ok<{ hashId: string }>(await c.request('POST', '/graph/pin-grid', { fields: { id: 'g' }, pinHashIds: [black, red] })).hashId;
    expect(summary(ok<Panel>(await c.request('GET', `/chart/panel?gridHashId=${grid}`)).charts.automatic)).toEqual([
      { title: 'Temperature', series: [`${black}:${temperature.hashId}:null`, `${red}:${temperature.hashId}:null`] },
      { title: 'Voltage', series: [`${red}:${voltage.hashId}:null`] },
    ]);
    // an edge's panel: the pins on it
    const edge = ok<{ hashId: string }>(
      await c.request('POST', '/graph/edge', {
        geometry: {
          type: 'LineString',
          coordinates: [
            [5, 52],
            [5.1, 52.1],
          ],
        },
        fields: { id: 'e' },
      }),
    ).hashId;
    ok(await c.request('POST', `/graph/pin/${red}`, { edgeHashId: edge }));
    expect(summary(ok<Panel>(await c.request('GET', `/chart/panel?edgeHashId=${edge}`)).charts.automatic)).toEqual([
      { title: 'Temperature', series: [`${red}:${temperature.hashId}:null`] },
      { title: 'Voltage', series: [`${red}:${voltage.hashId}:null`] },
    ]);

    // names of older Api-Versions are plain strings (the quantity inside a chart included)
    const v6 = await c.request<Panel>('GET', `/chart/panel?pinGroupHashId=${pg}`, undefined, { 'api-version': '6' });
    expect(v6.body.charts.automatic[0].series[0].quantity.name).toBe('Voltage');
  });

  it("a series shows its pin's own measurement threshold; a pin with only its quantity's defaults shows null", async () => {
    const { customer: c, pg, red, black, voltage, current } = await linkedDevice();
    const pair = (significand: number) => ({ orderOfMagnitude: 0, significand });
    const limits = { criticallyLow: pair(1), low: pair(2), high: pair(8), criticallyHigh: pair(9) };
    const set = await c.request<{ hashId: string }>('POST', '/measurement-threshold/thresholds', {
      pinHashId: red,
      quantityHashId: voltage.hashId,
      thresholds: limits,
    });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    const manual = [
      {
        title: 'T',
        series: [
          { pinHashId: red, quantityHashId: voltage.hashId },
          { pinHashId: black, quantityHashId: current.hashId },
        ],
      },
    ];
    expect((await c.request('POST', `/chart/panel?pinGroupHashId=${pg}`, { lastMode: 'manual', manualCharts: manual })).status).toBe(204);
    const [red1, black1] = ok<Panel>(await c.request('GET', `/chart/panel?pinGroupHashId=${pg}`)).charts.manual[0].series;
    expect(red1.pinThreshold).toEqual({ hashId: set.body.hashId, pinHashId: red, ...limits });
    expect(black1.pinThreshold).toBeNull();

    // each measurement's performance is its level against those limits; without any limit it is -1
    // (values 0.5, 5, 8.5, 9.5 and 8 as significands x 10^-3)
    await measure(red, voltage.id, '2026-03-01T00:00:00Z', 5, 60, { 0: 500, 1: 5000, 2: 8500, 3: 9500, 4: 8000 });
    await measure(black, current.id, '2026-03-01T00:00:00Z', 2, 60);
    const url = seriesUrl('2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z', [
      { pinHashId: red, quantityHashId: voltage.hashId },
      { pinHashId: black, quantityHashId: current.hashId },
    ]);
    const [redSeries, blackSeries] = ok<{ series: Series[] }>(await c.request('GET', url)).series;
    expect(redSeries.measurements.map((m) => m.performance)).toEqual([2, 0, 1, 2, 0]);
    expect(blackSeries.measurements.map((m) => m.performance)).toEqual([-1, -1]);
    type FindRow = { report: { pinObservations: { measurement: { performance: number } }[] } | null };
    const found = ok<{ rows: FindRow[] }>(
      await c.request(
        'GET',
        `/measurement/?pinHashIds[0]=${red}&sortBy=generatedAt&descending=false&includePinsWithoutReports=false&since=2026-03-01T00:00:00Z`,
      ),
    );
    expect(found.rows.flatMap((r) => r.report!.pinObservations.map((o) => o.measurement.performance))).toEqual([2, 0, 1, 2, 0]);
  });

  it('manual charts are saved and read back; lastMode switches; members left out keep their value', async () => {
    const { customer: c, pg, red, black, voltage, current } = await linkedDevice();
    const own = await ownQuantity(c, 'Own');
    const manual = [
      {
        title: 'Mine',
        series: [
          { pinHashId: red, quantityHashId: voltage.hashId, color: '#ff0000' },
          { pinHashId: black, quantityHashId: own.hashId },
        ],
      },
      { title: null, series: [{ pinHashId: black, quantityHashId: current.hashId, color: null }] },
    ];
    expect((await c.request('POST', `/chart/panel?pinGroupHashId=${pg}`, { lastMode: 'manual', manualCharts: manual })).status).toBe(204);
    const saved = ok<Panel>(await c.request('GET', `/chart/panel?pinGroupHashId=${pg}`));
    expect(saved.lastMode).toBe('manual');
    expect(summary(saved.charts.manual)).toEqual([
      { title: 'Mine', series: [`${red}:${voltage.hashId}:#ff0000`, `${black}:${own.hashId}:null`] },
      { title: null, series: [`${black}:${current.hashId}:null`] },
    ]);
    expect(saved.charts.manual[0].series[1].pinGroup.hashId).toBe(pg);
    // the automatic charts are still there
    expect(saved.charts.automatic.map((x) => x.title)).toEqual(['Both', 'Current']);

    expect((await c.request('POST', `/chart/panel?pinGroupHashId=${pg}`, { lastMode: 'automatic' })).status).toBe(204);
    const switched = ok<Panel>(await c.request('GET', `/chart/panel?pinGroupHashId=${pg}`));
    expect(switched.lastMode).toBe('automatic');
    expect(summary(switched.charts.manual)).toEqual(summary(saved.charts.manual));
    expect((await c.request('POST', `/chart/panel?pinGroupHashId=${pg}`, { manualCharts: [] })).status).toBe(204);
    expect(ok<Panel>(await c.request('GET', `/chart/panel?pinGroupHashId=${pg}`))).toMatchObject({ lastMode: 'automatic', charts: { manual: [] } });

    // a panel of a pin is its own
    expect((await c.request('POST', `/chart/panel?pinHashId=${red}`, { manualCharts: manual.slice(0, 1) })).status).toBe(204);
    expect(ok<Panel>(await c.request('GET', `/chart/panel?pinHashId=${red}`)).charts.manual).toHaveLength(1);
    expect(ok<Panel>(await c.request('GET', `/chart/panel?pinHashId=${black}`)).charts.manual).toHaveLength(0);
    // a deleted pin drops out of the saved charts
    expect((await c.request('POST', `/chart/panel?pinHashId=${red}`, { manualCharts: manual })).status).toBe(204);
    expect((await c.request('DELETE', `/graph/pin/${black}`)).status).toBe(204);
    expect(summary(ok<Panel>(await c.request('GET', `/chart/panel?pinHashId=${red}`)).charts.manual)).toEqual([
      { title: 'Mine', series: [`${red}:${voltage.hashId}:#ff0000`] },
      { title: null, series: [] },
    ]);
  });

  it("refuses another environment's objects and whatever breaks a limit", async () => {
    const { customer: c, pg, red, voltage } = await linkedDevice();
    const other = await api.login('monitoring', ['READ', 'STATIC', 'REPORTS']);
    const otherPg = await addPinGroup(other);
    const otherPin = await addPin(other, otherPg.hashId, 'x');
    const otherQ = await ownQuantity(other, 'X');
    // the panel of another environment's pin group, pin, grid or edge does not exist here
    for (const q of [`pinGroupHashId=${pg}`, `pinHashId=${red}`, 'gridHashId=nope', 'edgeHashId=nope']) {
      expect((await other.request<ErrorBody>('GET', `/chart/panel?${q}`)).body.key).toBe('not_found_error');
      expect((await other.request<ErrorBody>('POST', `/chart/panel?${q}`, { lastMode: 'manual' })).status).toBe(404);
    }
    expectParameterError(await c.request('GET', `/chart/panel?pinGroupHashId=${pg}&pinHashId=${red}`), 'exactly one');
    expectParameterError(await c.request('GET', '/chart/panel'), 'exactly one');
    const update = (manualCharts: unknown) => c.request('POST', `/chart/panel?pinGroupHashId=${pg}`, { lastMode: 'manual', manualCharts });
    expectParameterError(
      await update([{ title: 't', series: [{ pinHashId: otherPin.hashId, quantityHashId: voltage.hashId }] }]),
      'manualCharts[0].series[0].pinHashId',
    );
    expectParameterError(
      await update([
        { title: 't', series: [] },
        { title: 't', series: [{ pinHashId: red, quantityHashId: otherQ.hashId }] },
      ]),
      'manualCharts[1].series[0].quantityHashId',
    );
    expectParameterError(await update(Array.from({ length: 21 }, () => ({ title: 't', series: [] }))), 'manualCharts', '20');
    expectParameterError(
      await update([{ title: 't', series: Array.from({ length: 41 }, () => ({ pinHashId: red, quantityHashId: voltage.hashId })) }]),
      'manualCharts.0.series',
      '40',
    );
    expectParameterError(await update([{ series: [] }]), 'title');
    expectParameterError(await c.request('POST', `/chart/panel?pinGroupHashId=${pg}`, { lastMode: 'sometimes' }), 'lastMode');
    // nothing of the refused updates was saved
    expect(ok<Panel>(await c.request('GET', `/chart/panel?pinGroupHashId=${pg}`))).toMatchObject({ lastMode: 'automatic', charts: { manual: [] } });
  });
});

describe('chart panels', () => {
  it('gets and updates the panels of several pin groups and pins in one call, all or nothing', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC', 'REPORTS']);
    const q = await ownQuantity(c, 'Level');
    const groups = [await addPinGroup(c), await addPinGroup(c), await addPinGroup(c)].map((g) => g.hashId);
    const pins = [await addPin(c, groups[0], 'a'), await addPin(c, groups[1], 'b')].map((p) => p.hashId);
    await measure(pins[1], q.id, '2026-01-01T00:00:00Z', 2, 60);
    const chart = (pin: string, title: string) => ({ manualCharts: [{ title, series: [{ pinHashId: pin, quantityHashId: q.hashId }] }] });
    expect(
      (
        await c.request('POST', '/chart/panels', {
          pinGroups: [
            { hashId: groups[2], panel: { lastMode: 'manual', ...chart(pins[0], 'g2') } },
            { hashId: groups[0], panel: chart(pins[1], 'g0') },
          ],
          pins: [{ hashId: pins[1], panel: { lastMode: 'manual' } }],
        })
      ).status,
    ).toBe(204);
    const got = ok<{ pinGroups: { hashId: string; panel: Panel }[]; pins: { hashId: string; panel: Panel }[] }>(
      await c.request(
        'GET',
        `/chart/panels?pinGroupHashIds[0]=${groups[0]}&pinGroupHashIds[1]=${groups[1]}&pinGroupHashIds[2]=${groups[2]}&pinHashIds[0]=${pins[1]}&pinHashIds[1]=${pins[0]}`,
      ),
    );
    expect(got.pinGroups.map((p) => [p.hashId, p.panel.lastMode, p.panel.charts.manual.map((x) => x.title)])).toEqual([
      [groups[0], 'automatic', ['g0']],
      [groups[1], 'automatic', []],
      [groups[2], 'manual', ['g2']],
    ]);
    expect(got.pins.map((p) => [p.hashId, p.panel.lastMode])).toEqual([
      [pins[1], 'manual'],
      [pins[0], 'automatic'],
    ]);
    // pin group 1's pin measures Level: its automatic chart
    expect(summary(got.pinGroups[1].panel.charts.automatic)).toEqual([{ title: 'Level', series: [`${pins[1]}:${q.hashId}:null`] }]);
    expect(summary(got.pins[0].panel.charts.automatic)).toEqual([{ title: 'Level', series: [`${pins[1]}:${q.hashId}:null`] }]);
    // nothing asked: nothing answered
    expect(ok(await c.request('GET', '/chart/panels'))).toEqual({});

    // one bad item refuses the whole update
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const foreign = (await addPinGroup(other)).hashId;
    expectParameterError(
      await c.request('POST', '/chart/panels', {
        pinGroups: [
          { hashId: groups[1], panel: { lastMode: 'manual' } },
          { hashId: foreign, panel: { lastMode: 'manual' } },
        ],
      }),
      'pinGroups[1].hashId',
    );
    expectParameterError(
      await c.request('POST', '/chart/panels', {
        pinGroups: [
          { hashId: groups[1], panel: { lastMode: 'manual' } },
          { hashId: groups[1], panel: {} },
        ],
      }),
      'pinGroups[1].hashId',
      'twice',
    );
    expectParameterError(
      await c.request('POST', '/chart/panels', {
        pins: [
          { hashId: pins[0], panel: { lastMode: 'manual' } },
          { hashId: pins[1], panel: chart('nope', 'x') },
        ],
      }),
      'pins[1].panel.manualCharts[0].series[0].pinHashId',
    );
    expect(
      ok<{ pinGroups: { panel: Panel }[]; pins: { panel: Panel }[] }>(
        await c.request('GET', `/chart/panels?pinGroupHashIds[0]=${groups[1]}&pinHashIds[0]=${pins[0]}`),
      ),
    ).toMatchObject({ pinGroups: [{ panel: { lastMode: 'automatic' } }], pins: [{ panel: { lastMode: 'automatic' } }] });
    // another environment's pin group is named, never answered
    expectParameterError(await other.request('GET', `/chart/panels?pinGroupHashIds[0]=${groups[0]}`), 'pinGroupHashIds[0]');
    expectParameterError(
      await c.request('GET', `/chart/panels?${Array.from({ length: 101 }, (_, i) => `pinHashIds[${i}]=${pins[0]}`).join('&')}`),
      'pinHashIds',
      '100',
    );
    expectParameterError(
      await c.request('POST', '/chart/panels', { pins: Array.from({ length: 101 }, () => ({ hashId: pins[0], panel: {} })) }),
      'pins',
      '100',
    );
  });
});

interface Observations {
  moreMeasurementsAvailable: boolean;
  lowerbound: string | null;
  upperbound: string | null;
  observations: { measurement: Measurement; quantity: { hashId: string; name: unknown; unit: string | null } }[];
}

describe("pin and edge measurements (SDK 17's graph getPinMeasurements and getEdgeMeasurements)", () => {
  it("a range with few measurements answers each, by generatedAt, with its quantity, its pin and the range's first and last time", async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pin = await addPin(c, (await addPinGroup(c)).hashId, 'anode');
    const [volt, amp] = [await ownQuantity(c, 'Potential'), await ownQuantity(c, 'Current')];
    await measure(pin.hashId, volt.id, '2026-03-01T10:00:00Z', 3, 3600);
    await measure(pin.hashId, amp.id, '2026-03-01T10:30:00Z', 2, 3600);
    // outside [from, to): the hour before and the end itself
    await measure(pin.hashId, volt.id, '2026-03-01T09:00:00Z', 1, 60);
    await measure(pin.hashId, volt.id, '2026-03-01T13:00:00Z', 1, 60);

    const got = ok<Observations>(await c.request('GET', `/graph/pin/${pin.hashId}/measurements?from=2026-03-01T10:00:00Z&to=2026-03-01T13:00:00Z`));
    expect(got.moreMeasurementsAvailable).toBe(false);
    expect([got.lowerbound, got.upperbound]).toEqual(['2026-03-01T10:00:00.000Z', '2026-03-01T12:00:00.000Z']);
    expect(got.observations.map((o) => [o.measurement.generatedAt.slice(11, 16), o.quantity.hashId])).toEqual([
      ['10:00', volt.hashId],
      ['10:30', amp.hashId],
      ['11:00', volt.hashId],
      ['11:30', amp.hashId],
      ['12:00', volt.hashId],
    ]);
    expect(got.observations[0].measurement).toEqual({
      hashId: expect.any(String),
      generatedAt: '2026-03-01T10:00:00.000Z',
      channelIndex: 0,
      channelMeasurementIndex: 0,
      reportHashId: expect.any(String),
      pinHashId: pin.hashId,
      orderOfMagnitude: -3,
      significand: 100,
      performance: -1,
    });
    // quantities in the shapes of the request's Api-Version: a plain-text name up to 6
    expect(got.observations[0].quantity).toMatchObject({ hashId: volt.hashId, name: 'Potential', unit: 'V' });

    const none = ok<Observations>(await c.request('GET', `/graph/pin/${pin.hashId}/measurements?from=2020-01-01T00:00:00Z&to=2020-02-01T00:00:00Z`));
    expect(none).toEqual({ moreMeasurementsAvailable: false, lowerbound: null, upperbound: null, observations: [] });
  });

  it("a range with more than 310 answers at most 310, each series' lowest and highest per time bucket, so a spike stays", async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pin = await addPin(c, (await addPinGroup(c)).hashId, 'anode');
    const [volt, amp] = [await ownQuantity(c, 'Potential'), await ownQuantity(c, 'Current')];
    await measure(pin.hashId, volt.id, '2026-01-01T00:00:00Z', 2000, 600, { 1234: 999_999 });
    await measure(pin.hashId, amp.id, '2026-01-01T00:00:00Z', 500, 2400, { 17: -55_555 });

    const got = ok<Observations>(await c.request('GET', `/graph/pin/${pin.hashId}/measurements?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z`));
    expect(got.moreMeasurementsAvailable).toBe(true);
    expect(got.observations.length).toBeLessThanOrEqual(310);
    expect(got.observations.length).toBeGreaterThan(200);
    const values = got.observations.map((o) => o.measurement.significand);
    expect(values).toContain(999_999);
    expect(values).toContain(-55_555);
    expect(new Set(got.observations.map((o) => o.quantity.hashId))).toEqual(new Set([volt.hashId, amp.hashId]));
    const times = got.observations.map((o) => o.measurement.generatedAt);
    expect(times).toEqual([...times].sort());
    expect([got.lowerbound, got.upperbound]).toEqual(['2026-01-01T00:00:00.000Z', new Date(Date.UTC(2026, 0, 1) + 1999 * 600_000).toISOString()]);
  });

  it('an edge answers the measurements of the pins on it', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pg = (await addPinGroup(c)).hashId;
    const [on, alsoOn, off] = [await addPin(c, pg, 'a'), await addPin(c, pg, 'b'), await addPin(c, pg, 'c')];
    const edge = ok<{ hashId: string }>(
      await c.request('POST', '/graph/edge', {
        geometry: {
          type: 'LineString',
          coordinates: [
            [5, 52],
            [5.1, 52.1],
          ],
        },
        fields: { id: 'e' },
      }),
    ).hashId;
    for (const p of [on, alsoOn]) ok(await c.request('POST', `/graph/pin/${p.hashId}`, { edgeHashId: edge }));
    const q = await ownQuantity(c, 'Potential');
    await measure(on.hashId, q.id, '2026-03-01T10:00:00Z', 1, 60);
    await measure(alsoOn.hashId, q.id, '2026-03-01T11:00:00Z', 1, 60);
    await measure(off.hashId, q.id, '2026-03-01T10:30:00Z', 1, 60);

    const got = ok<Observations>(await c.request('GET', `/graph/edge/${edge}/measurements?from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z`));
    expect(got.observations.map((o) => o.measurement.pinHashId)).toEqual([on.hashId, alsoOn.hashId]);
    expect(got.moreMeasurementsAvailable).toBe(false);
  });

  it("another environment's pin or edge is not found; a range that ends before it starts is a parameter_error", async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const pin = await addPin(c, (await addPinGroup(c)).hashId, 'anode');
    const edge = ok<{ hashId: string }>(
      await c.request('POST', '/graph/edge', {
        geometry: {
          type: 'LineString',
          coordinates: [
            [5, 52],
            [5.1, 52.1],
          ],
        },
        fields: { id: 'e' },
      }),
    ).hashId;
    const range = 'from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z';
    for (const url of [`/graph/pin/${pin.hashId}/measurements?${range}`, `/graph/edge/${edge}/measurements?${range}`]) {
      const r = await other.request<ErrorBody>('GET', url);
      expect([r.status, r.body.key]).toEqual([404, 'not_found_error']);
    }
    expectParameterError(await c.request('GET', `/graph/pin/${pin.hashId}/measurements?from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z`), 'to');
    expectParameterError(await c.request('GET', `/graph/pin/${pin.hashId}/measurements?from=2026-03-02T00:00:00Z`), 'to');
  });
});

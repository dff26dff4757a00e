import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, expectParameterError } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';
import { ok } from './linked-device.ts';

// quantity merge (POST /quantity/:sourceQuantityHashId/merge): what refers to the source quantity moves
// to the target in one transaction and the source is deleted.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const RIGHTS = ['READ', 'STATIC', 'THRESHOLDS', 'REPORTS', 'ENVIRONMENT_ADMIN'];
const pair = (significand: number) => ({ orderOfMagnitude: 0, significand });
const HOUR = '2026-10-01T10:00:00Z';

const quantity = async (c: ApiClient, name: string) => ok(await c.request<{ hashId: string }>('POST', '/quantity/', { name, unit: 'V' })).hashId;
const merge = (c: ApiClient, source: string, target: string) =>
  c.request<{ hashId: string }>('POST', `/quantity/${source}/merge`, { targetQuantityHashId: target });

/** Measurements of `quantityHashId` on the pin within one hour, stored as the ingest stores them (the rollup trigger runs). */
async function measure(pinHashId: string, quantityHashId: string, values: number[]): Promise<void> {
  await api.ctx.db.query(
    `WITH r AS (INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id)
                SELECT md5(random()::text), p.environment_id, $4, p.pin_group_id FROM pin p WHERE p.hash_id = $1 RETURNING id, environment_id)
     INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
     SELECT md5(random()::text), r.id, r.environment_id, q.id, p.id, 0, 0, $4::timestamptz + v.n * interval '1 minute', 0, v.s
       FROM r, pin p, quantity q, unnest($3::int[]) WITH ORDINALITY AS v(s, n) WHERE p.hash_id = $1 AND q.hash_id = $2`,
    [pinHashId, quantityHashId, values, HOUR],
  );
}

const measurementsOf = async (quantityHashId: string) =>
  (
    await api.ctx.db.query<{ significand: number }>(
      'SELECT m.significand FROM measurement m JOIN quantity q ON q.id = m.quantity_id WHERE q.hash_id = $1 ORDER BY m.significand',
      [quantityHashId],
    )
  ).rows.map((r) => r.significand);
const hourlyOf = async (quantityHashId: string) =>
  (
    await api.ctx.db.query(
      'SELECT h.count, h.sum, h.low_value, h.high_value FROM measurement_hourly h JOIN quantity q ON q.id = h.quantity_id WHERE q.hash_id = $1',
      [quantityHashId],
    )
  ).rows;

async function pinIn(c: ApiClient): Promise<{ pinGroupHashId: string; pinHashId: string }> {
  const pinGroupHashId = (await addPinGroup(c)).hashId;
  return { pinGroupHashId, pinHashId: (await addPin(c, pinGroupHashId, 'pipe')).hashId };
}

describe('quantity merge', () => {
  it("moves the measurements and their hourly rollup to the target, deletes the source and answers the target's hashId", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const { pinHashId } = await pinIn(c);
    const [source, target] = [await quantity(c, 'Volt'), await quantity(c, 'Voltage')];
    await measure(pinHashId, source, [1, 9]);
    await measure(pinHashId, target, [5]);
    const r = await merge(c, source, target);
    expect([r.status, r.body]).toEqual([200, { hashId: target }]);
    expect(await measurementsOf(target)).toEqual([1, 5, 9]);
    expect(await measurementsOf(source)).toEqual([]);
    expect(await hourlyOf(target)).toEqual([{ count: 3, sum: 15, low_value: 1, high_value: 9 }]);
    expect(await hourlyOf(source)).toEqual([]);
    expect((await c.request('GET', `/quantity/${source}`)).status).toBe(404);
    const shown = ok(await c.request<{ rows: { quantity: { hashId: string } }[] }>('GET', `/graph/pin-quantities/${pinHashId}`));
    expect(shown.rows.map((row) => row.quantity.hashId)).toEqual([target]);
  });

  it("moves pin thresholds; a pin with a threshold for both keeps the target's", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const [one, both] = [await pinIn(c), await pinIn(c)];
    const [source, target] = [await quantity(c, 'Volt'), await quantity(c, 'Voltage')];
    const set = async (pinHashId: string, quantityHashId: string, high: number) =>
      ok(
        await c.request<{ hashId: string }>('POST', '/measurement-threshold/thresholds', {
          pinHashId,
          quantityHashId,
          thresholds: { criticallyLow: null, low: null, high: pair(high), criticallyHigh: null },
        }),
      ).hashId;
    const moved = await set(one.pinHashId, source, 10);
    await set(both.pinHashId, source, 20);
    const kept = await set(both.pinHashId, target, 30);
    ok(await merge(c, source, target));
    const thresholds = async (pinHashId: string) =>
      ok(
        await c.request<{ rows: { quantity: { hashId: string }; pinThreshold: { hashId: string; high: unknown } | null }[] }>(
          'GET',
          `/graph/pin-quantities/${pinHashId}`,
        ),
      ).rows.map((row) => [row.quantity.hashId, row.pinThreshold?.hashId, row.pinThreshold?.high]);
    expect(await thresholds(one.pinHashId)).toEqual([[target, moved, pair(10)]]);
    expect(await thresholds(both.pinHashId)).toEqual([[target, kept, pair(30)]]);
  });

  it("moves issues' quantities and threshold causes; an open source issue beside an open target issue on the pin is closed", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const [lone, both] = [await pinIn(c), await pinIn(c)];
    const [source, target] = [await quantity(c, 'Volt'), await quantity(c, 'Voltage')];
    const ids = async (hashId: string, table: 'pin' | 'quantity') =>
      (await api.ctx.db.query<{ id: string }>(`SELECT id FROM ${table} WHERE hash_id = $1`, [hashId])).rows[0].id;
    const [s, t] = [await ids(source, 'quantity'), await ids(target, 'quantity')];
    const issue = async (p: { pinGroupHashId: string; pinHashId: string }, q: string) =>
      (
        await api.ctx.db.query<{ hash_id: string }>(
          `INSERT INTO issue (hash_id, environment_id, pin_group_id, pin_ids, title, level, automation, quantity_ids, cause)
       SELECT md5(random()::text), pg.environment_id, pg.id, ARRAY[p.id], 'too high', 1, '{"type": "thresholds"}', ARRAY[$3::bigint], concat('threshold:', p.id, ':', $3::bigint)
         FROM pin_group pg JOIN pin p ON p.pin_group_id = pg.id WHERE p.hash_id = $1 AND pg.hash_id = $2 RETURNING hash_id`,
          [p.pinHashId, p.pinGroupHashId, q],
        )
      ).rows[0].hash_id;
    const [loneIssue, sourceIssue, targetIssue] = [await issue(lone, s), await issue(both, s), await issue(both, t)];
    ok(await merge(c, source, target));
    const get = async (hashId: string) =>
      ok(await c.request<{ issue: { closedAt: string | null }; automation: { quantities: { hashId: string }[] } }>('GET', `/issue/${hashId}`));
    for (const h of [loneIssue, sourceIssue, targetIssue]) expect((await get(h)).automation.quantities.map((q) => q.hashId)).toEqual([target]);
    expect([(await get(loneIssue)).issue.closedAt, (await get(sourceIssue)).issue.closedAt === null, (await get(targetIssue)).issue.closedAt]).toEqual([
      null,
      false,
      null,
    ]);
    const cause = async (hashId: string) => (await api.ctx.db.query<{ cause: string }>('SELECT cause FROM issue WHERE hash_id = $1', [hashId])).rows[0].cause;
    expect(await cause(loneIssue)).toBe(`threshold:${await ids(lone.pinHashId, 'pin')}:${t}`);
  });

  it('moves manual chart series to the target', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const { pinGroupHashId, pinHashId } = await pinIn(c);
    const [source, target] = [await quantity(c, 'Volt'), await quantity(c, 'Voltage')];
    const manualCharts = [{ title: 'volts', series: [{ quantityHashId: source, pinHashId, color: '#ff0000' }] }];
    expect((await c.request('POST', `/chart/panel?pinGroupHashId=${pinGroupHashId}`, { lastMode: 'manual', manualCharts })).status).toBe(204);
    ok(await merge(c, source, target));
    const panel = ok(
      await c.request<{ charts: { manual: { title: string; series: { quantity: { hashId: string }; color: string }[] }[] } }>(
        'GET',
        `/chart/panel?pinGroupHashId=${pinGroupHashId}`,
      ),
    );
    expect(panel.charts.manual.map((chart) => [chart.title, chart.series.map((x) => [x.quantity.hashId, x.color])])).toEqual([
      ['volts', [[target, '#ff0000']]],
    ]);
  });

  it('replaces the source in measurement filters, each quantity once', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const [source, other, target] = [await quantity(c, 'Volt'), await quantity(c, 'Ampere'), await quantity(c, 'Voltage')];
    const filter = ok(
      await c.request<{ hashId: string }>('POST', '/measurement-filter/', {
        name: 'volts',
        description: '',
        period: 'lastMonth',
        reportTypeHashIds: [],
        quantityHashIds: [source, other, target],
        fieldKeys: [],
      }),
    ).hashId;
    ok(await merge(c, source, target));
    const got = ok(await c.request<{ quantities: { hashId: string }[] }>('GET', `/measurement-filter/${filter}`));
    expect(got.quantities.map((q) => q.hashId)).toEqual([target, other]);
  });

  it("in a connectivity environment moves the device types' charts and channel charts to the target", async () => {
    const supplier = await api.login('connectivity');
    const [source, target] = [await quantity(supplier, 'Volt'), await quantity(supplier, 'Voltage')];
    const deviceType = await addDeviceType(supplier, {
      channels: [{ name: 'Red wire', pinFieldConfigurations: [], charts: [{ title: 'red', series: [{ quantityHashId: source }] }] }],
      charts: [{ title: 'all', series: [{ channelIndex: 0, quantityHashId: source, color: '#00ff00' }] }],
    });
    ok(await merge(supplier, source, target));
    const got = ok(
      await supplier.request<{
        deviceType: { charts: { series: { quantityHashId: string }[] }[]; channels: { charts: { series: { quantityHashId: string }[] }[] }[] };
        chartQuantities: { hashId: string }[];
      }>('GET', `/device-type/${deviceType}`),
    );
    expect(got.deviceType.charts[0].series[0]).toEqual({ channelIndex: 0, quantityHashId: target, color: '#00ff00' });
    expect(got.deviceType.channels[0].charts[0].series[0].quantityHashId).toBe(target);
    expect(got.chartQuantities.map((q) => q.hashId)).toEqual([target]);
  });

  it('is one transaction: a failure on the way leaves the measurements and both quantities as they were', async () => {
    const supplier = await api.login('connectivity');
    const [source, target] = [await quantity(supplier, 'Volt'), await quantity(supplier, 'Voltage')];
    const deviceType = await addDeviceType(supplier, { charts: [{ title: 'all', series: [{ channelIndex: 0, quantityHashId: source }] }] });
    const customer = await api.login('monitoring', RIGHTS);
    const { pinHashId } = await pinIn(customer);
    await measure(pinHashId, source, [7]);
    // the device type's rewrite comes after the measurements moved: make it fail, for this device type only
    const fn = `fail_merge_${deviceType}`;
    await api.ctx.db.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$`);
    await api.ctx.db.query(`CREATE TRIGGER ${fn} BEFORE UPDATE ON device_type FOR EACH ROW WHEN (OLD.hash_id = '${deviceType}') EXECUTE FUNCTION ${fn}()`);
    try {
      const r = await merge(supplier, source, target);
      expect([r.status, (r.body as unknown as { key: string }).key]).toEqual([500, 'server_error']);
    } finally {
      await api.ctx.db.query(`DROP TRIGGER ${fn} ON device_type`);
      await api.ctx.db.query(`DROP FUNCTION ${fn}()`);
    }
    expect(await measurementsOf(source)).toEqual([7]);
    expect(await hourlyOf(source)).toEqual([{ count: 1, sum: 7, low_value: 7, high_value: 7 }]);
    expect((await supplier.request('GET', `/quantity/${source}`)).status).toBe(200);
  });

  it('refuses a merge into itself and a missing target, naming targetQuantityHashId', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const q = await quantity(c, 'Volt');
    expectParameterError(await merge(c, q, q), 'targetQuantityHashId');
    expectParameterError(await c.request('POST', `/quantity/${q}/merge`, {}), 'targetQuantityHashId');
    expect((await c.request('GET', `/quantity/${q}`)).status).toBe(200);
  });

  it("answers 404 for another environment's quantity, as source or target, and a deleted one; nothing moves", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const stranger = await api.login('monitoring', RIGHTS);
    const { pinHashId } = await pinIn(stranger);
    const [mine, theirs, gone] = [await quantity(c, 'Volt'), await quantity(stranger, 'Voltage'), await quantity(c, 'Gone')];
    await measure(pinHashId, theirs, [3]);
    expect((await c.request('DELETE', `/quantity/${gone}`)).status).toBe(204);
    for (const [s, t] of [
      [mine, theirs],
      [theirs, mine],
      [gone, mine],
      [mine, gone],
    ]) {
      const r = await merge(c, s, t);
      expect([r.status, (r.body as unknown as { key: string }).key]).toEqual([404, 'not_found_error']);
    }
    expect(await measurementsOf(theirs)).toEqual([3]);
    expect((await stranger.request('GET', `/quantity/${theirs}`)).status).toBe(200);
  });

  it('needs ENVIRONMENT_ADMIN', async () => {
    const admin = await api.login('monitoring', RIGHTS);
    const [source, target] = [await quantity(admin, 'Volt'), await quantity(admin, 'Voltage')];
    const r = await api.login('monitoring', ['READ', 'STATIC']).then((c) => merge(c, source, target));
    expect([r.status, (r.body as unknown as { key: string }).key]).toEqual([403, 'right_error']);
  });
});

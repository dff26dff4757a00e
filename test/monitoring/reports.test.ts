import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';

// Manual report types and reports of a monitoring environment: a report entered by hand lands like a
// device's (measurement find, the charts' rollup, thresholds and issues); the SDK's limits; tenant isolation.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const RIGHTS = ['READ', 'STATIC', 'REPORTS', 'ENVIRONMENT_ADMIN'];
const ok = <T>(r: { status: number; body: T }): T => {
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
};

const FORM = { pinGroup: [{ key: 'inspector', name: 'Inspector', type: 'string' }], pin: [], measurement: [] };
const TEMPERATURE = { name: 'Temperature', unit: 'K', defaultHighThreshold: { orderOfMagnitude: 0, significand: 300 } };

interface Place {
  c: ApiClient;
  pinGroupHashId: string;
  pinHashId: string;
  otherPinHashId: string;
  reportTypeHashId: string;
  quantityHashId: string;
}

/** A monitoring environment with a pin group of two pins and a manual report type offering Temperature (high threshold 300 K). */
async function place(): Promise<Place> {
  const c = await api.login('monitoring', RIGHTS);
  const pinGroupHashId = (await addPinGroup(c, 'station')).hashId;
  const pinHashId = (await addPin(c, pinGroupHashId, 'inlet')).hashId;
  const elsewhere = (await addPinGroup(c, 'elsewhere')).hashId;
  const otherPinHashId = (await addPin(c, elsewhere, 'far')).hashId;
  const { hashId: reportTypeHashId } = ok(
    await c.request<{ hashId: string }>('POST', '/report-type/', { name: 'Inspection', fieldConfigurations: FORM, quantities: [TEMPERATURE] }),
  );
  const got = ok(await c.request<{ quantities: { hashId: string }[] }>('GET', `/report-type/${reportTypeHashId}`));
  return { c, pinGroupHashId, pinHashId, otherPinHashId, reportTypeHashId, quantityHashId: got.quantities[0].hashId };
}

const measurement = (p: Place, significand: number, generatedAt: string, extra: Record<string, unknown> = {}) => ({
  pinHashId: p.pinHashId,
  quantityHashId: p.quantityHashId,
  generatedAt,
  orderOfMagnitude: 0,
  significand,
  ...extra,
});

async function addReport(p: Place, measurements: unknown[], fields: Record<string, unknown> = { inspector: 'Ann' }): Promise<string> {
  return ok(
    await p.c.request<{ hashId: string }>('POST', '/report/', { reportTypeHashId: p.reportTypeHashId, pinGroupHashId: p.pinGroupHashId, measurements, fields }),
  ).hashId;
}

type MeasurementRow = {
  report: { hashId: string; pinObservations: { measurement: { significand: number; channelIndex: number | null }; quantityHashId: string }[] } | null;
};
const measurementRows = async (p: Place) =>
  ok(await p.c.request<{ rows: MeasurementRow[] }>('GET', `/measurement/?pinHashIds[0]=${p.pinHashId}&sortBy=generatedAt&includePinsWithoutReports=false`))
    .rows;

async function hourly(p: Place): Promise<{ count: number; sum: number }[]> {
  const { rows } = await api.ctx.db.query<{ count: number; sum: number }>(
    'SELECT h.count, h.sum FROM measurement_hourly h JOIN pin p ON p.id = h.pin_id WHERE p.hash_id = $1 ORDER BY h.hour',
    [p.pinHashId],
  );
  return rows;
}

describe('report types', () => {
  it('add, get, find, update and delete a manual report type with its quantities', async () => {
    const p = await place();
    const existing = ok(await p.c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Pressure', unit: 'Pa' })).hashId;
    const got = ok(
      await p.c.request<{ reportType: Record<string, unknown>; quantities: { hashId: string; name: string; unit: string; defaultHighThreshold: unknown }[] }>(
        'GET',
        `/report-type/${p.reportTypeHashId}`,
      ),
    );
    expect(got.reportType).toEqual({ hashId: p.reportTypeHashId, name: 'Inspection', fieldConfigurations: FORM, type: 'human', deletedAt: null });
    expect(got.quantities).toMatchObject([{ name: 'Temperature', unit: 'K', defaultHighThreshold: { orderOfMagnitude: 0, significand: 300 } }]);

    expect(
      (
        await p.c.request('POST', `/report-type/${p.reportTypeHashId}`, {
          name: 'Inspection 2',
          quantities: [{ hashId: existing }, { hashId: p.quantityHashId }],
          fieldConfigurations: { pin: [{ existingKey: undefined, fieldConfiguration: { key: 'note', name: 'Note', type: 'string' } }] },
        })
      ).status,
    ).toBe(204);
    const updated = ok(
      await p.c.request<{
        reportType: { name: string; fieldConfigurations: { pinGroup: unknown[]; pin: { key: string }[] } };
        quantities: { hashId: string }[];
      }>('GET', `/report-type/${p.reportTypeHashId}`),
    );
    expect(updated.reportType.name).toBe('Inspection 2');
    expect(updated.reportType.fieldConfigurations.pinGroup).toEqual(FORM.pinGroup);
    expect(updated.reportType.fieldConfigurations.pin.map((c) => c.key)).toEqual(['note']);
    expect(updated.quantities.map((q) => q.hashId)).toEqual([existing, p.quantityHashId]);

    // the quantity knows the forms that offer it, and quantity find narrows to a form's quantities
    const quantity = ok(await p.c.request<{ reportTypes: { hashId: string }[] }>('GET', `/quantity/${existing}`));
    expect(quantity.reportTypes.map((t) => t.hashId)).toEqual([p.reportTypeHashId]);
    ok(await p.c.request('POST', '/quantity/', { name: 'Not in the form' }));
    const own = ok(
      await p.c.request<{ rows: { quantity: { hashId: string } }[] }>('GET', `/quantity/quantities?environmentReportTypeHashIds[0]=${p.reportTypeHashId}`),
    );
    expect(own.rows.map((r) => r.quantity.hashId).sort()).toEqual([existing, p.quantityHashId].sort());
    const found = ok(await p.c.request<{ rows: { reportType: { hashId: string; type: string } }[] }>('GET', '/report-type/?type=human&sortBy=name'));
    expect(found.rows.map((r) => r.reportType.hashId)).toEqual([p.reportTypeHashId]);
    expect(ok(await p.c.request<{ rows: unknown[] }>('GET', '/report-type/?type=device')).rows).toEqual([]);

    expect((await p.c.request('DELETE', `/report-type/${p.reportTypeHashId}`)).status).toBe(204);
    expect((await p.c.request('GET', `/report-type/${p.reportTypeHashId}`)).status).toBe(404);
    expect(ok(await p.c.request<{ rows: unknown[] }>('GET', '/report-type/')).rows).toEqual([]);
    // a deleted type takes no new reports
    expectParameterError(
      await p.c.request('POST', '/report/', { reportTypeHashId: p.reportTypeHashId, pinGroupHashId: p.pinGroupHashId, measurements: [] }),
      'reportTypeHashId',
    );
  });

  it("find and get include the device report types of the suppliers whose devices the environment claimed; another supplier's are not found", async () => {
    const p = await place();
    const db = api.ctx.db;
    /** A supplier with a device report type; `claimedBy`: the environment that claimed one of its devices. */
    const supplier = async (name: string, claimedBy: string | null) => {
      const s = await api.login('connectivity', ['ENVIRONMENT_ADMIN']);
      const {
        rows: [rt],
      } = await db.query<{ hash_id: string }>(
        `INSERT INTO report_type (hash_id, environment_id, name, name_text, field_configurations, parser, parser_hash)
         SELECT md5(random()::text), id, to_jsonb($2::text), $2, '{"pinGroup": [], "pin": [], "measurement": []}', 'x', 'x' FROM environment WHERE hash_id = $1 RETURNING hash_id`,
        [s.environmentHashId, name],
      );
      await db.query(
        `WITH t AS (INSERT INTO device_type (hash_id, environment_id, name, name_text, event_handler, event_handler_hash, subscription_hash_id)
                    SELECT md5(random()::text), id, '"t"', 't', '', '', md5(random()::text) FROM environment WHERE hash_id = $1 RETURNING id, environment_id)
         INSERT INTO device (hash_id, environment_id, device_type_id, supplier_device_identifier, claimed_environment_id)
         SELECT md5(random()::text), t.environment_id, t.id, 'd1', (SELECT id FROM environment WHERE hash_id = $2) FROM t`,
        [s.environmentHashId, claimedBy],
      );
      return rt.hash_id;
    };
    const claimed = await supplier('Supplier parser', p.c.environmentHashId);
    const other = await supplier('Not claimed', null);
    const found = ok(await p.c.request<{ rows: { reportType: { hashId: string; type: string } }[] }>('GET', '/report-type/'));
    expect(found.rows.map((r) => [r.reportType.hashId, r.reportType.type]).sort()).toEqual(
      [
        [claimed, 'device'],
        [p.reportTypeHashId, 'human'],
      ].sort(),
    );
    expect(
      ok(await p.c.request<{ rows: { reportType: { hashId: string } }[] }>('GET', '/report-type/?type=device')).rows.map((r) => r.reportType.hashId),
    ).toEqual([claimed]);
    expect(ok(await p.c.request('GET', `/report-type/${claimed}`))).toEqual({
      reportType: {
        hashId: claimed,
        name: 'Supplier parser',
        type: 'device',
        fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
        deletedAt: null,
      },
      quantities: [],
    });
    expect((await p.c.request('GET', `/report-type/${other}`)).status).toBe(404);
    // the supplier's type is the supplier's: not changed here, nor used for a manual report
    expect((await p.c.request('POST', `/report-type/${claimed}`, { name: 'mine' })).status).toBe(404);
    expect((await p.c.request('DELETE', `/report-type/${claimed}`)).status).toBe(404);
    expectParameterError(
      await p.c.request('POST', '/report/', { reportTypeHashId: claimed, pinGroupHashId: p.pinGroupHashId, measurements: [] }),
      'reportTypeHashId',
    );
  });

  it("limits of the SDK's schema and what it cannot state, each a parameter_error naming the member", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const add = (body: Record<string, unknown>) =>
      c.request('POST', '/report-type/', { name: 'x', fieldConfigurations: { pinGroup: [], pin: [], measurement: [] }, quantities: [], ...body });
    expectParameterError(await add({ name: '' }), 'name');
    expectParameterError(await add({ name: 'n'.repeat(256) }), 'name');
    expectParameterError(await add({ fieldConfigurations: { pinGroup: [], pin: [] } }), 'measurement');
    expectParameterError(
      await add({ fieldConfigurations: { pinGroup: [{ key: 'a' }, { key: 'a' }], pin: [], measurement: [] } }),
      'fieldConfigurations.pinGroup',
    );
    expectParameterError(
      await add({ fieldConfigurations: { pinGroup: Array.from({ length: 51 }, (_, i) => ({ key: `k${i}` })), pin: [], measurement: [] } }),
      'pinGroup',
    );
    expectParameterError(await add({ quantities: Array.from({ length: 101 }, () => ({ name: 'q' })) }), 'quantities');
    expectParameterError(await add({ quantities: [{ name: 'q', defaultOrderOfMagnitude: 128 }] }), 'quantities');
    expectParameterError(await add({ quantities: [{ hashId: 'nope' }] }), 'quantities[0].hashId');
    const q = ok(await c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Q' })).hashId;
    expectParameterError(await add({ quantities: [{ hashId: q }, { hashId: q }] }), 'quantities[1]');
    // nothing of a refused add stays: the new quantity of the first item is rolled back
    expectParameterError(await add({ quantities: [{ name: 'rolled back' }, { hashId: 'nope' }] }), 'quantities[1].hashId');
    const names = ok(await c.request<{ rows: { name: string }[] }>('GET', '/quantity/quantities')).rows.map((r) => r.name);
    expect(names).not.toContain('rolled back');
  });
});

describe('manual reports', () => {
  it("a manual report shows in measurement find, the charts' rollup, report get and report find", async () => {
    const p = await place();
    const hashId = await addReport(p, [measurement(p, 290, '2026-03-01T10:15:00Z'), measurement(p, 295, '2026-03-01T10:45:00Z')]);
    const rows = await measurementRows(p);
    expect(rows).toHaveLength(1);
    expect(rows[0].report!.hashId).toBe(hashId);
    expect(rows[0].report!.pinObservations.map((o) => [o.measurement.significand, o.measurement.channelIndex, o.quantityHashId]).sort()).toEqual([
      [290, null, p.quantityHashId],
      [295, null, p.quantityHashId],
    ]);
    expect(await hourly(p)).toEqual([{ count: 2, sum: 585 }]);

    const got = ok(await p.c.request<Record<string, unknown>>('GET', `/report/${hashId}`));
    expect(got).toMatchObject({
      hashId,
      deviceType: null,
      deviceHashId: null,
      fields: { inspector: 'Ann' },
      pinGroupHashId: p.pinGroupHashId,
      userName: expect.any(String),
      generatedAt: '2026-03-01T10:45:00.000Z',
      type: { hashId: p.reportTypeHashId, type: 'human', name: 'Inspection' },
      quantities: [{ hashId: p.quantityHashId }],
    });
    expect((got.observations as { measurement: { performance: number } }[]).map((o) => o.measurement.performance)).toEqual([0, 0]);

    const found = ok(
      await p.c.request<{ rows: { report: Record<string, unknown>; pinGroup: { hashId: string }; reportTypeName: string }[] }>(
        'GET',
        `/report/?pinGroupHashId=${p.pinGroupHashId}`,
      ),
    );
    expect(found.rows).toEqual([
      {
        report: { hashId, deviceHashId: null, reportTypeHashId: p.reportTypeHashId, reportTypeType: 'human', generatedAt: '2026-03-01T10:45:00.000Z' },
        pinGroup: expect.objectContaining({ hashId: p.pinGroupHashId }),
        reportTypeName: 'Inspection',
      },
    ]);
    expect(ok(await p.c.request<{ rows: unknown[] }>('GET', '/report/?mapLayers[0]=elsewhere')).rows).toEqual([]);
  });

  it("a manual measurement above its quantity's threshold raises a threshold issue on the pin group; one not to compare does not", async () => {
    const p = await place();
    await addReport(p, [measurement(p, 310, '2026-03-02T10:00:00Z', { doNotCompareToThresholds: true })]);
    const none = ok(await p.c.request<{ rows: unknown[] }>('GET', '/issue/'));
    expect(none.rows).toEqual([]);
    const hashId = await addReport(p, [measurement(p, 320, '2026-03-02T11:00:00Z')]);
    const issues = ok(await p.c.request<{ rows: { issue: { title: string; level: number; pinGroupHashId?: string } }[] }>('GET', '/issue/')).rows;
    expect(issues).toHaveLength(1);
    expect(issues[0].issue).toMatchObject({ level: 1, title: 'Temperature too high on inlet' });
    const got = ok(await p.c.request<{ observations: { measurement: { performance: number } }[] }>('GET', `/report/${hashId}`));
    expect(got.observations[0].measurement.performance).toBe(1);
    // measurement find: 320 is above the threshold (1), 310 was entered as not to compare (-1)
    const shown = (await measurementRows(p)).flatMap((r) =>
      r.report!.pinObservations.map((o) => [o.measurement.significand, (o.measurement as { performance?: number }).performance]),
    );
    expect(shown.sort()).toEqual([
      [310, -1],
      [320, 1],
    ]);
  });

  it('update changes, adds and removes measurements and the fields; delete removes the report; the rollup follows both', async () => {
    const p = await place();
    const hashId = await addReport(p, [measurement(p, 1, '2026-03-03T10:10:00Z'), measurement(p, 2, '2026-03-03T10:20:00Z')]);
    const got = ok(await p.c.request<{ observations: { measurement: { hashId: string; significand: number } }[] }>('GET', `/report/${hashId}`));
    const first = got.observations.find((o) => o.measurement.significand === 1)!.measurement.hashId;
    const answer = ok(
      await p.c.request<{ fields: Record<string, unknown> }>('POST', `/report/${hashId}`, {
        fields: [{ key: 'inspector', value: 'Bob' }],
        measurements: [
          { measurementHashId: first, generatedAt: '2026-03-03T11:10:00Z', orderOfMagnitude: 0, significand: 10 },
          measurement(p, 5, '2026-03-03T11:30:00Z'),
        ],
      }),
    );
    expect(answer).toEqual({ fields: { inspector: 'Bob' } });
    const rows = await measurementRows(p);
    expect(rows[0].report!.pinObservations.map((o) => o.measurement.significand).sort((a, b) => a - b)).toEqual([5, 10]);
    // 10:00 is empty now; 11:00 holds the moved 10 and the new 5
    expect(await hourly(p)).toEqual([{ count: 2, sum: 15 }]);
    const after = ok(await p.c.request<{ generatedAt: string; fields: unknown }>('GET', `/report/${hashId}`));
    expect(after).toMatchObject({ generatedAt: '2026-03-03T11:30:00.000Z', fields: { inspector: 'Bob' } });

    expect((await p.c.request('DELETE', `/report/${hashId}`)).status).toBe(204);
    expect(await measurementRows(p)).toEqual([]);
    expect(await hourly(p)).toEqual([]);
    expect((await p.c.request('GET', `/report/${hashId}`)).status).toBe(404);
  });

  it('limits and references, each a parameter_error naming the member; nothing of a refused report is stored', async () => {
    const p = await place();
    const add = (body: Record<string, unknown>) =>
      p.c.request('POST', '/report/', { reportTypeHashId: p.reportTypeHashId, pinGroupHashId: p.pinGroupHashId, measurements: [], ...body });
    expectParameterError(await add({ measurements: Array.from({ length: 1001 }, () => measurement(p, 1, '2026-03-04T10:00:00Z')) }), 'measurements');
    expectParameterError(await add({ measurements: [measurement(p, 2 ** 31, '2026-03-04T10:00:00Z')] }), 'significand');
    expectParameterError(await add({ measurements: [measurement(p, 1, '2026-03-04T10:00:00Z', { orderOfMagnitude: -129 })] }), 'orderOfMagnitude');
    expectParameterError(await add({ measurements: [measurement(p, 1, 'yesterday')] }), 'generatedAt');
    expectParameterError(
      await add({ measurements: [measurement(p, 1, '2026-03-04T10:00:00Z', { pinHashId: p.otherPinHashId })] }),
      'measurements[0].pinHashId',
    );
    const foreignQuantity = ok(await p.c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Not in the form' })).hashId;
    expectParameterError(
      await add({ measurements: [measurement(p, 1, '2026-03-04T10:00:00Z', { quantityHashId: foreignQuantity })] }),
      'measurements[0].quantityHashId',
    );
    expectParameterError(await add({ fields: { colour: 'red' } }), 'fields.colour');
    expectParameterError(await add({ reportTypeHashId: undefined }), 'reportTypeHashId');
    expectParameterError(await add({ unknown: 1 }), 'unknown');
    expect(await measurementRows(p)).toEqual([]);
    expect(ok(await p.c.request<{ rows: unknown[] }>('GET', '/report/')).rows).toEqual([]);
  });

  it("a device's report is read like a manual one but is not changed or deleted through these routes", async () => {
    const p = await place();
    const db = api.ctx.db;
    const {
      rows: [r],
    } = await db.query<{ hash_id: string }>(
      `INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id)
       SELECT md5(random()::text), pg.environment_id, '2026-03-05T10:00:00Z', pg.id FROM pin_group pg WHERE pg.hash_id = $1 RETURNING hash_id`,
      [p.pinGroupHashId],
    );
    expect(
      ok(await p.c.request<{ rows: { report: { hashId: string; reportTypeType: string } }[] }>('GET', '/report/')).rows.map((x) => x.report),
    ).toMatchObject([{ hashId: r.hash_id, reportTypeType: 'device' }]);
    expectParameterError(await p.c.request('DELETE', `/report/${r.hash_id}`), 'device');
    expectParameterError(await p.c.request('POST', `/report/${r.hash_id}`, { fields: {} }), 'device');
  });
});

describe('tenant isolation', () => {
  it("another environment's report type and report are not found, and cannot be named in a report", async () => {
    const a = await place();
    const b = await place();
    const hashId = await addReport(a, [measurement(a, 1, '2026-03-06T10:00:00Z')]);
    for (const [method, url, body] of [
      ['GET', `/report-type/${a.reportTypeHashId}`],
      ['POST', `/report-type/${a.reportTypeHashId}`, { name: 'mine' }],
      ['DELETE', `/report-type/${a.reportTypeHashId}`],
      ['GET', `/report/${hashId}`],
      ['POST', `/report/${hashId}`, { fields: {} }],
      ['DELETE', `/report/${hashId}`],
    ] as [string, string, unknown?][]) {
      const r = await b.c.request<{ key: string }>(method, url, body);
      expect({ method, url, status: r.status, key: r.body.key }).toEqual({ method, url, status: 404, key: 'not_found_error' });
    }
    const add = (body: Record<string, unknown>) =>
      b.c.request('POST', '/report/', { reportTypeHashId: b.reportTypeHashId, pinGroupHashId: b.pinGroupHashId, measurements: [], ...body });
    expectParameterError(await add({ reportTypeHashId: a.reportTypeHashId }), 'reportTypeHashId');
    expectParameterError(await add({ pinGroupHashId: a.pinGroupHashId }), 'pinGroupHashId');
    expectParameterError(
      await add({ measurements: [measurement(a, 1, '2026-03-06T10:00:00Z', { pinHashId: a.pinHashId, quantityHashId: b.quantityHashId })] }),
      'measurements[0].pinHashId',
    );
    expectParameterError(
      await b.c.request('POST', '/report-type/', { name: 'x', fieldConfigurations: FORM, quantities: [{ hashId: a.quantityHashId }] }),
      'quantities[0].hashId',
    );
    expect(ok(await b.c.request<{ rows: unknown[] }>('GET', '/report/')).rows).toEqual([]);
    expect(ok(await b.c.request<{ rows: { reportType: { hashId: string } }[] }>('GET', '/report-type/')).rows.map((r) => r.reportType.hashId)).toEqual([
      b.reportTypeHashId,
    ]);
    // A's report is untouched
    expect(ok(await a.c.request<{ fields: unknown }>('GET', `/report/${hashId}`)).fields).toEqual({ inspector: 'Ann' });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';
import { ok } from './linked-device.ts';

// graph get-pin-quantities: the quantities measured on a pin or given a threshold there, each with the
// pin's own threshold.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const RIGHTS = ['READ', 'STATIC', 'THRESHOLDS', 'ENVIRONMENT_ADMIN'];
const pair = (significand: number) => ({ orderOfMagnitude: 0, significand });
const LIMITS = { criticallyLow: pair(1), low: pair(2), high: null, criticallyHigh: pair(9) };

async function quantity(c: ApiClient, name: string, unit: string | null = 'V'): Promise<string> {
  return ok(await c.request<{ hashId: string }>('POST', '/quantity/', { name, unit, color: '#00ff00', defaultLowThreshold: pair(0) })).hashId;
}

/** A measurement of `quantityHashId` on the pin, stored as the ingest stores one. */
async function measure(pinHashId: string, quantityHashId: string, significand = 5): Promise<void> {
  await api.ctx.db.query(
    `WITH r AS (INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id)
                SELECT md5(random()::text), p.environment_id, now(), p.pin_group_id FROM pin p WHERE p.hash_id = $1 RETURNING id, environment_id)
     INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
     SELECT md5(random()::text), r.id, r.environment_id, q.id, p.id, 0, 0, now(), 0, $3 FROM r, pin p, quantity q WHERE p.hash_id = $1 AND q.hash_id = $2`,
    [pinHashId, quantityHashId, significand],
  );
}

const quantityShape = (hashId: string, name: string, unit: string | null) => ({
  hashId,
  name,
  color: '#00ff00',
  unit,
  defaultOrderOfMagnitude: 0,
  defaultCriticallyLowThreshold: null,
  defaultLowThreshold: pair(0),
  defaultHighThreshold: null,
  defaultCriticallyHighThreshold: null,
  disableSiPrefixes: false,
});

describe('pin quantities', () => {
  it("answers the measured quantities and those with a pin threshold, by name, each with the pin's own threshold or null", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pin = (await addPin(c, (await addPinGroup(c)).hashId, 'pipe')).hashId;
    const other = (await addPin(c, (await addPinGroup(c)).hashId, 'other')).hashId;
    const volts = await quantity(c, 'Voltage');
    const amps = await quantity(c, 'Current', 'A');
    const temp = await quantity(c, 'Temperature', 'K');
    const elsewhere = await quantity(c, 'Pressure', 'Pa');
    await measure(pin, volts);
    await measure(pin, volts);
    await measure(pin, amps);
    await measure(other, elsewhere);
    const t = ok(
      await c.request<{ hashId: string }>('POST', '/measurement-threshold/thresholds', { pinHashId: pin, quantityHashId: temp, thresholds: LIMITS }),
    ).hashId;
    const r = await c.request('GET', `/graph/pin-quantities/${pin}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      rows: [
        { quantity: quantityShape(amps, 'Current', 'A'), pinThreshold: null },
        { quantity: quantityShape(temp, 'Temperature', 'K'), pinThreshold: { hashId: t, pinHashId: pin, ...LIMITS } },
        { quantity: quantityShape(volts, 'Voltage', 'V'), pinThreshold: null },
      ],
    });
  });

  it('answers a pin without quantities with no rows, and a quantity without unit as "-" before Api-Version 8', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pin = (await addPin(c, (await addPinGroup(c)).hashId, 'pipe')).hashId;
    expect(ok(await c.request('GET', `/graph/pin-quantities/${pin}`))).toEqual({ rows: [] });
    await measure(pin, await quantity(c, 'Count', null));
    const v5 = ok(await c.request<{ rows: { quantity: { unit: string | null } }[] }>('GET', `/graph/pin-quantities/${pin}`));
    expect(v5.rows.map((row) => row.quantity.unit)).toEqual(['-']);
    const v8 = ok(await c.request<{ rows: { quantity: { unit: string | null } }[] }>('GET', `/graph/pin-quantities/${pin}`, undefined, { 'api-version': '8' }));
    expect(v8.rows.map((row) => row.quantity.unit)).toEqual([null]);
  });

  it('leaves out a deleted quantity', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pin = (await addPin(c, (await addPinGroup(c)).hashId, 'pipe')).hashId;
    const gone = await quantity(c, 'Gone');
    await measure(pin, gone);
    expect((await c.request('DELETE', `/quantity/${gone}`)).status).toBe(204);
    expect(ok(await c.request('GET', `/graph/pin-quantities/${pin}`))).toEqual({ rows: [] });
  });

  it('needs READ in a monitoring environment and is not available in a connectivity environment', async () => {
    const owner = await api.login('monitoring', RIGHTS);
    const pin = (await addPin(owner, (await addPinGroup(owner)).hashId, 'pipe')).hashId;
    const noRead = await api.login('monitoring', ['STATIC']);
    expect((await noRead.request<{ key: string }>('GET', `/graph/pin-quantities/${pin}`)).body.key).toBe('right_error');
    const supplier = await api.login('connectivity');
    const r = await supplier.request<{ key: string }>('GET', `/graph/pin-quantities/${pin}`);
    expect([r.status, r.body.key]).toEqual([403, 'right_error']);
  });

  it("answers 404 for another environment's pin, and a parameter_error naming pinHashId for a malformed one", async () => {
    const owner = await api.login('monitoring', RIGHTS);
    const pin = (await addPin(owner, (await addPinGroup(owner)).hashId, 'pipe')).hashId;
    const stranger = await api.login('monitoring', RIGHTS);
    const r = await stranger.request<{ key: string }>('GET', `/graph/pin-quantities/${pin}`);
    expect([r.status, r.body.key]).toEqual([404, 'not_found_error']);
    expectParameterError(await stranger.request('GET', '/graph/pin-quantities/not-a-hash-id'), 'pinHashId');
  });
});

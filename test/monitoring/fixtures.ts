import { expect } from 'vitest';
import type { Queryable } from '../../src/app/db.ts';
import type { ApiClient } from '../helpers.ts';

export interface PinGroupAnswer {
  hashId: string;
  pinGroup: {
    hashId: string;
    name: string;
    fields: Record<string, unknown>;
    deviceFields: Record<string, unknown>;
    deviceLinkHashId: string | null;
    mapLayer: string;
    mostRecentMeasurementAt: string | null;
    geometry: unknown;
    symbolKey: string;
  };
}
export interface PinAnswer {
  pin: { hashId: string; name: string; pinGroupHashId: string; fields: Record<string, unknown>; deviceFields: Record<string, unknown> };
  grids: unknown[];
}

let n = 0;
/** A pin group at a point, named by the default first field `id`. */
export async function addPinGroup(c: ApiClient, name = `location ${++n}`, extra: Record<string, unknown> = {}): Promise<PinGroupAnswer> {
  const r = await c.request<PinGroupAnswer>('POST', '/graph/pin-group', {
    symbolKey: 'cp-rectifier',
    geometry: { type: 'Point', coordinates: [5.1, 52.1] },
    fields: { id: name },
    ...extra,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

export async function addPin(c: ApiClient, pinGroupHashId: string, name: string): Promise<PinAnswer['pin']> {
  const r = await c.request<PinAnswer>('POST', `/graph/pin-group/${pinGroupHashId}/pin`, { fields: { id: name } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.pin;
}

const DAY = 86_400_000;

/** A pin group with one pin holding one report and measurement per age in days (stored as the ingest would). */
export async function pinWithHistory(db: Queryable, c: ApiClient, ages: number[], pinGroupHashId?: string, pinName = 'p') {
  const pg = pinGroupHashId ?? (await addPinGroup(c)).hashId;
  const pin = await addPin(c, pg, pinName);
  const {
    rows: [ids],
  } = await db.query<{ env: number; pg: number; pin: number }>(
    'SELECT p.environment_id AS env, p.pin_group_id AS pg, p.id AS pin FROM pin p WHERE p.hash_id = $1',
    [pin.hashId],
  );
  const {
    rows: [q],
  } = await db.query<{ id: number }>(
    `INSERT INTO quantity (hash_id, environment_id, name, name_text, color, unit, default_order_of_magnitude) VALUES (md5(random()::text), $1, '"V"', 'V', '#000000', 'V', 0) RETURNING id`,
    [ids.env],
  );
  for (const age of ages) {
    const at = new Date(Date.now() - age * DAY);
    const {
      rows: [r],
    } = await db.query<{ id: number }>(
      `INSERT INTO condition_report (hash_id, environment_id, generated_at, pin_group_id) VALUES (md5(random()::text), $1, $2, $3) RETURNING id`,
      [ids.env, at, ids.pg],
    );
    await db.query(
      `INSERT INTO measurement (hash_id, report_id, environment_id, quantity_id, pin_id, channel_index, channel_measurement_index, generated_at, order_of_magnitude, significand)
       VALUES (md5(random()::text), $1, $2, $3, $4, 0, 0, $5, 0, $6)`,
      [r.id, ids.env, q.id, ids.pin, at, Math.round(age)],
    );
  }
  return pin.hashId;
}

import { expect } from 'vitest';
import type { ApiClient } from '../helpers.ts';

export interface PinGroupAnswer {
  hashId: string;
  pinGroup: { hashId: string; name: string; fields: Record<string, unknown>; deviceFields: Record<string, unknown>; deviceLinkHashId: string | null; mapLayer: string; mostRecentMeasurementAt: string | null; geometry: unknown; symbolKey: string };
}
export interface PinAnswer { pin: { hashId: string; name: string; pinGroupHashId: string; fields: Record<string, unknown>; deviceFields: Record<string, unknown> }; grids: unknown[] }

let n = 0;
/** A pin group at a point, named by the default first field `id`. */
export async function addPinGroup(c: ApiClient, name = `location ${++n}`, extra: Record<string, unknown> = {}): Promise<PinGroupAnswer> {
  const r = await c.request<PinGroupAnswer>('POST', '/graph/pin-group', { symbolKey: 'cp-rectifier', geometry: { type: 'Point', coordinates: [5.1, 52.1] }, fields: { id: name }, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

export async function addPin(c: ApiClient, pinGroupHashId: string, name: string): Promise<PinAnswer['pin']> {
  const r = await c.request<PinAnswer>('POST', `/graph/pin-group/${pinGroupHashId}/pin`, { fields: { id: name } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.pin;
}

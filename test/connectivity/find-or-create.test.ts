import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateDevice } from '../../src/connectivity/devices/find-or-create.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, field } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface DeviceBody {
  device: { hashId: string; supplierDeviceIdentifier: string; deviceTypeHashId: string; fields: Record<string, unknown> };
}

const countDevices = async (c: ApiClient, identifier: string) => {
  const { rows } = await api.ctx.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM device d JOIN environment e ON e.id = d.environment_id WHERE e.hash_id = $1 AND d.supplier_device_identifier = $2',
    [c.environmentHashId, identifier],
  );
  return rows[0].n;
};

describe('findOrCreateDevice', () => {
  it("creates a device with the type's default fields, then finds the same device", async () => {
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c, { fieldConfigurations: [field('serial', 'string', { defaultValue: 'none' })], identifierFieldKey: 'serial' });
    const first = await findOrCreateDevice(api.ctx, {
      environmentHashId: c.environmentHashId,
      deviceTypeHashId: typeHashId,
      supplierDeviceIdentifier: 'eui-0004a30b001c0530',
    });
    expect(first).toMatchObject({ created: true, environmentHashId: c.environmentHashId, deviceTypeHashId: typeHashId });
    const get = await c.request<DeviceBody>('GET', `/device/${first.hashId}`);
    expect(get.status).toBe(200);
    expect(get.body.device).toMatchObject({
      hashId: first.hashId,
      supplierDeviceIdentifier: 'eui-0004a30b001c0530',
      deviceTypeHashId: typeHashId,
      fields: { serial: 'none' },
    });

    // by environment id this time: same device, not created again
    const second = await findOrCreateDevice(api.ctx, {
      environmentId: first.environmentId,
      deviceTypeHashId: typeHashId,
      supplierDeviceIdentifier: 'eui-0004a30b001c0530',
    });
    expect(second).toEqual({ ...first, created: false });
    // both given (a caller that has just loaded the environment): no lookup, same answer
    expect(
      await findOrCreateDevice(api.ctx, {
        environmentId: first.environmentId,
        environmentHashId: first.environmentHashId,
        deviceTypeHashId: typeHashId,
        supplierDeviceIdentifier: 'eui-0004a30b001c0530',
      }),
    ).toEqual(second);
    expect(await countDevices(c, 'eui-0004a30b001c0530')).toBe(1);
  });

  it("keeps an existing device's own type when another type is asked for", async () => {
    const c = await api.login('connectivity');
    const a = await addDeviceType(c);
    const b = await addDeviceType(c);
    const made = await findOrCreateDevice(api.ctx, { environmentHashId: c.environmentHashId, deviceTypeHashId: a, supplierDeviceIdentifier: 'x1' });
    const again = await findOrCreateDevice(api.ctx, { environmentHashId: c.environmentHashId, deviceTypeHashId: b, supplierDeviceIdentifier: 'x1' });
    expect(again).toEqual({ ...made, created: false, deviceTypeHashId: a });
  });

  it('creates one device when many calls race for the same identifier', async () => {
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c);
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        findOrCreateDevice(api.ctx, { environmentHashId: c.environmentHashId, deviceTypeHashId: typeHashId, supplierDeviceIdentifier: 'race-1' }),
      ),
    );
    expect(new Set(results.map((r) => r.hashId)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await countDevices(c, 'race-1')).toBe(1);
  });

  it('refuses a device type of another environment, a deleted one and an unknown one, creating nothing', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const typeOfB = await addDeviceType(b);
    await expect(
      findOrCreateDevice(api.ctx, { environmentHashId: a.environmentHashId, deviceTypeHashId: typeOfB, supplierDeviceIdentifier: 'd1' }),
    ).rejects.toMatchObject({ key: 'parameter_error', message: expect.stringContaining(`deviceTypeHashId ${typeOfB}`) });
    expect(await countDevices(a, 'd1')).toBe(0);
    expect(await countDevices(b, 'd1')).toBe(0);

    const typeOfA = await addDeviceType(a);
    expect((await a.request('DELETE', `/device-type/${typeOfA}`)).status).toBe(204);
    await expect(
      findOrCreateDevice(api.ctx, { environmentHashId: a.environmentHashId, deviceTypeHashId: typeOfA, supplierDeviceIdentifier: 'd1' }),
    ).rejects.toMatchObject({ key: 'parameter_error', message: expect.stringContaining('deviceTypeHashId') });
    await expect(
      findOrCreateDevice(api.ctx, { environmentHashId: a.environmentHashId, deviceTypeHashId: 'nosuchtype', supplierDeviceIdentifier: 'd1' }),
    ).rejects.toMatchObject({ key: 'parameter_error' });
    expect(await countDevices(a, 'd1')).toBe(0);
  });

  it('does not find a device of another environment with the same identifier', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const typeOfA = await addDeviceType(a);
    const typeOfB = await addDeviceType(b);
    const inA = await findOrCreateDevice(api.ctx, { environmentHashId: a.environmentHashId, deviceTypeHashId: typeOfA, supplierDeviceIdentifier: 'shared-id' });
    const inB = await findOrCreateDevice(api.ctx, { environmentHashId: b.environmentHashId, deviceTypeHashId: typeOfB, supplierDeviceIdentifier: 'shared-id' });
    expect(inB.created).toBe(true);
    expect(inB.hashId).not.toBe(inA.hashId);
    expect((await b.request('GET', `/device/${inA.hashId}`)).status).toBe(404);
  });

  it('refuses an existing device whose type was deleted', async () => {
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c);
    await findOrCreateDevice(api.ctx, { environmentHashId: c.environmentHashId, deviceTypeHashId: typeHashId, supplierDeviceIdentifier: 'cut-off' });
    expect((await c.request('DELETE', `/device-type/${typeHashId}`)).status).toBe(204);
    await expect(
      findOrCreateDevice(api.ctx, { environmentHashId: c.environmentHashId, deviceTypeHashId: typeHashId, supplierDeviceIdentifier: 'cut-off' }),
    ).rejects.toMatchObject({ key: 'parameter_error', message: expect.stringContaining('was deleted') });
  });

  it('refuses a monitoring environment, and identifiers that are empty or too long', async () => {
    const m = await api.login('monitoring');
    await expect(
      findOrCreateDevice(api.ctx, { environmentHashId: m.environmentHashId, deviceTypeHashId: 'x', supplierDeviceIdentifier: 'y' }),
    ).rejects.toMatchObject({ key: 'not_found_error' });
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c);
    for (const bad of ['', 'x'.repeat(256)]) {
      await expect(
        findOrCreateDevice(api.ctx, { environmentHashId: c.environmentHashId, deviceTypeHashId: typeHashId, supplierDeviceIdentifier: bad }),
      ).rejects.toMatchObject({ key: 'parameter_error', message: expect.stringContaining('supplierDeviceIdentifier') });
    }
  });
});

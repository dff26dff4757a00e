import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, expectParameterError, field, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup, type PinAnswer, type PinGroupAnswer } from './fixtures.ts';

// Claim, link, unlink, unclaim: a supplier's device between supplier and customer.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface DeviceRow {
  device: { hashId: string };
  deviceType: { hashId: string };
  environmentName: string | null;
  environmentHashId: string | null;
  pinGroup: PinGroupAnswer['pinGroup'] | null;
}
interface PinGroupGet {
  pinGroup: PinGroupAnswer['pinGroup'];
  pins: { pin: PinAnswer['pin'] }[];
  device: { hashId: string } | null;
  deviceType: { hashId: string } | null;
  channelMapping: { channel: number; pinHashId: string }[] | null;
}

/** A supplier with a three-channel device type and `n` devices, each with a claim token. */
async function supplierDevices(n: number) {
  const supplier = await api.login('connectivity');
  const type = await addDeviceType(supplier, {
    pinGroupFieldConfigurations: [field('installedBy', 'string', { defaultValue: 'supplier' })],
    channels: [
      { name: 'Red wire', defaultPinName: 'Red', pinFieldConfigurations: [field('gain', 'number', { defaultValue: 1 })] },
      { name: 'Black wire', defaultPinName: { en: 'Black', nl: 'Zwart' }, pinFieldConfigurations: [] },
      { name: 'Reference', pinFieldConfigurations: [] },
    ],
  });
  const devices: { hashId: string; token: string }[] = [];
  for (let i = 0; i < n; i++) {
    const id = `link-${randomBytes(5).toString('hex')}`;
    const r = await supplier.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: id,
      deviceTypeHashId: type,
      psk: 'ab'.repeat(16),
      pskIdentity: id,
    });
    const t = await supplier.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [r.body.hashId] });
    devices.push({ hashId: r.body.hashId, token: t.body.claimTokens[0].claimToken });
  }
  return { supplier, type, devices };
}

const customer = () => api.login('monitoring', ['READ', 'STATIC', 'SENSORS']);

async function claimAll(c: ApiClient, tokens: string[]) {
  const r = await c.request<{ devices: { hashId: string }[] }>('POST', '/device/claim', { claimTokens: tokens });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.devices;
}

describe('claim', () => {
  it('moves the devices into the environment, all or nothing; tokens die; the supplier sees who claimed, not the graph', async () => {
    const { supplier, devices } = await supplierDevices(2);
    const c = await customer();
    // one bad token claims nothing
    expectParameterError(await c.request('POST', '/device/claim', { claimTokens: [devices[0].token, 'not-a-token'] }), 'claimTokens[1]');
    expect(await findAll(c, '/device/')).toEqual([]);
    const claimed = await claimAll(c, [devices[1].token, devices[0].token]);
    expect(claimed.map((d) => d.hashId)).toEqual([devices[1].hashId, devices[0].hashId]);
    // a used token is spent, also for another customer
    const other = await customer();
    expectParameterError(await other.request('POST', '/device/claim', { claimTokens: [devices[0].token] }), 'claimTokens[0]');
    const rows = await findAll<DeviceRow>(c, '/device/');
    expect(rows.map((r) => r.device.hashId).sort()).toEqual(devices.map((d) => d.hashId).sort());
    expect(rows[0]).toMatchObject({ environmentHashId: c.environmentHashId, pinGroup: null });
    const seen = await supplier.request<DeviceRow>('GET', `/device/${devices[0].hashId}`);
    expect(seen.body).toMatchObject({ environmentHashId: c.environmentHashId, pinGroup: null });
    expect(await findAll(other, '/device/')).toEqual([]);
    expect((await other.request('GET', `/device/${devices[0].hashId}`)).status).toBe(404);
  });

  it('limits: 1 to 30 claim tokens, 1 to 30 hashIds to unclaim', async () => {
    const c = await customer();
    expectParameterError(await c.request('POST', '/device/claim', { claimTokens: [] }), 'claimTokens');
    expectParameterError(await c.request('POST', '/device/claim', { claimTokens: Array.from({ length: 31 }, (_, i) => `t${i}`) }), 'claimTokens', '30');
    expectParameterError(await c.request('POST', '/device/unclaim', { hashIds: [] }), 'hashIds');
    expectParameterError(await c.request('POST', '/device/unclaim', { hashIds: Array.from({ length: 31 }, (_, i) => `h${i}`) }), 'hashIds', '30');
  });
});

describe('link, unlink, unclaim', () => {
  it('links channels to pins (unnamed channels get a pin named by defaultPinName), deviceFields follow the device type', async () => {
    const {
      supplier,
      type,
      devices: [d],
    } = await supplierDevices(1);
    const c = await customer();
    await claimAll(c, [d.token]);
    const pg = await addPinGroup(c, 'Rectifier 7');
    const red = await addPin(c, pg.hashId, 'My red port');
    const link = await c.request<{ device: { hashId: string }; deviceType: { hashId: string }; measurementCycle: null; nextReportBefore: null } & ErrorBody>(
      'POST',
      `/device/${d.hashId}/link`,
      { pinGroupHashId: pg.hashId, channelMapping: [{ channel: 0, pinHashId: red.hashId, deviceFields: { gain: 2.5 } }] },
    );
    expect(link.status, JSON.stringify(link.body)).toBe(200);
    expect(link.body).toMatchObject({ device: { hashId: d.hashId }, deviceType: { hashId: type }, measurementCycle: null, nextReportBefore: null });

    const get = await c.request<PinGroupGet>('GET', `/graph/pin-group/${pg.hashId}`);
    expect(get.body.device?.hashId).toBe(d.hashId);
    expect(get.body.deviceType?.hashId).toBe(type);
    expect(get.body.pinGroup.deviceLinkHashId).toMatch(/^[a-z0-9]+$/);
    expect(get.body.pinGroup.deviceFields).toEqual({ installedBy: 'supplier' });
    const pins = new Map(get.body.pins.map((p) => [p.pin.hashId, p.pin]));
    expect(get.body.channelMapping?.map((m) => m.channel)).toEqual([0, 1, 2]);
    const [m0, m1, m2] = get.body.channelMapping!;
    expect(m0.pinHashId).toBe(red.hashId);
    expect(pins.get(m0.pinHashId)!.deviceFields).toEqual({ gain: 2.5 });
    expect(pins.get(m1.pinHashId)!.name).toBe('Black');
    expect(pins.get(m1.pinHashId)!.fields).toEqual({ id: 'Black' });
    expect(pins.get(m2.pinHashId)!.name).toBe('Reference');

    const row = await c.request<DeviceRow>('GET', `/device/${d.hashId}`);
    expect(row.body.pinGroup?.hashId).toBe(pg.hashId);
    expect((await findAll<{ device: { hashId: string } | null }>(c, '/graph/pin-group'))[0].device?.hashId).toBe(d.hashId);
    // the supplier sees nothing of the customer's graph
    expect((await supplier.request<DeviceRow>('GET', `/device/${d.hashId}`)).body.pinGroup).toBeNull();
    // pin group deviceFields now follow the device type
    const upd = await c.request<{ pinGroup: PinGroupAnswer['pinGroup'] }>('POST', `/graph/pin-group/${pg.hashId}`, {
      deviceFields: [{ key: 'installedBy', value: 'customer' }],
    });
    expect(upd.body.pinGroup.deviceFields).toEqual({ installedBy: 'customer' });
    expectParameterError(await c.request('POST', `/graph/pin-group/${pg.hashId}`, { deviceFields: { nope: 1 } }), 'deviceFields.nope');

    // linked twice, or a second device on the pin group: refused
    expect((await c.request<ErrorBody>('POST', `/device/${d.hashId}/link`, { pinGroupHashId: pg.hashId, channelMapping: [] })).body.key).toBe('conflict_error');

    // posted empty as a form, as the SDK's client sends it
    expect((await c.request('POST', `/device/${d.hashId}/unlink`, undefined, { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(204);
    const after = await c.request<PinGroupGet>('GET', `/graph/pin-group/${pg.hashId}`);
    expect(after.body).toMatchObject({ device: null, deviceType: null, channelMapping: null });
    expect(after.body.pinGroup).toMatchObject({ deviceLinkHashId: null, deviceFields: {} });
    expect(after.body.pins).toHaveLength(3);
    expect((await c.request<ErrorBody>('POST', `/device/${d.hashId}/unlink`)).body.key).toBe('conflict_error');

    // linked again, then unclaimed: the link goes with it and the device is back with its supplier
    expect(
      (await c.request('POST', `/device/${d.hashId}/link`, { pinGroupHashId: pg.hashId, channelMapping: [{ channel: 0, pinHashId: red.hashId }] })).status,
    ).toBe(200);
    expect((await c.request('POST', '/device/unclaim', { hashIds: [d.hashId] })).status).toBe(204);
    expect(await findAll(c, '/device/')).toEqual([]);
    expect((await c.request('GET', `/device/${d.hashId}`)).status).toBe(404);
    expect((await c.request<PinGroupGet>('GET', `/graph/pin-group/${pg.hashId}`)).body.device).toBeNull();
    expect((await supplier.request<DeviceRow>('GET', `/device/${d.hashId}`)).body.environmentHashId).toBeNull();
  });

  it('link limits and checks are parameter_errors naming the field; nothing is linked', async () => {
    const {
      devices: [d],
    } = await supplierDevices(1);
    const c = await customer();
    await claimAll(c, [d.token]);
    const pg = await addPinGroup(c);
    const p = await addPin(c, pg.hashId, 'p');
    const otherPg = await addPinGroup(c);
    const foreign = await addPin(c, otherPg.hashId, 'f');
    const link = (channelMapping: unknown) => c.request<ErrorBody>('POST', `/device/${d.hashId}/link`, { pinGroupHashId: pg.hashId, channelMapping });
    expectParameterError(await link(Array.from({ length: 61 }, (_, i) => ({ channel: i, pinHashId: p.hashId }))), 'channelMapping', '60');
    expectParameterError(await link([{ channel: 3, pinHashId: p.hashId }]), 'channelMapping[0].channel');
    expectParameterError(await link([{ channel: -1, pinHashId: p.hashId }]), 'channelMapping.0.channel');
    expectParameterError(
      await link([
        { channel: 0, pinHashId: p.hashId },
        { channel: 0, pinHashId: p.hashId },
      ]),
      'channelMapping[1].channel',
    );
    expectParameterError(
      await link([
        { channel: 0, pinHashId: p.hashId },
        { channel: 1, pinHashId: p.hashId },
      ]),
      'channelMapping[1].pinHashId',
    );
    expectParameterError(await link([{ channel: 0, pinHashId: foreign.hashId }]), 'channelMapping[0].pinHashId');
    expectParameterError(await link([{ channel: 0, pinHashId: p.hashId, deviceFields: { gain: 'loud' } }]), 'channelMapping[0].deviceFields.gain');
    expect((await c.request<ErrorBody>('POST', `/device/${d.hashId}/link`, { pinGroupHashId: 'nopegroup', channelMapping: [] })).status).toBe(404);
    expect((await c.request<PinGroupGet>('GET', `/graph/pin-group/${pg.hashId}`)).body).toMatchObject({ device: null, pins: [{ pin: { hashId: p.hashId } }] });
  });

  it('getClaimToken by the customer: only for its own unlinked devices; link kills the token; a token hands the device on', async () => {
    const {
      devices: [d],
    } = await supplierDevices(1);
    const a = await customer();
    const b = await customer();
    await claimAll(a, [d.token]);
    const tokens = (c: ApiClient, deviceHashIds: unknown) =>
      c.request<{ claimTokens: { deviceHashId: string; claimToken: string }[] } & ErrorBody>('POST', '/device/claim-tokens', { deviceHashIds });
    expect((await tokens(b, [d.hashId])).status).toBe(404);
    expectParameterError(
      await tokens(
        a,
        Array.from({ length: 31 }, () => d.hashId),
      ),
      'deviceHashIds',
      '30',
    );
    const first = await tokens(a, [d.hashId]);
    expect(first.status).toBe(200);
    const pg = await addPinGroup(a);
    expect((await a.request('POST', `/device/${d.hashId}/link`, { pinGroupHashId: pg.hashId, channelMapping: [] })).status).toBe(200);
    // linked: refused, and the token given before the link is dead
    expect((await tokens(a, [d.hashId])).body.key).toBe('conflict_error');
    expectParameterError(await b.request('POST', '/device/claim', { claimTokens: [first.body.claimTokens[0].claimToken] }), 'claimTokens[0]');
    expect((await a.request('POST', `/device/${d.hashId}/unlink`)).status).toBe(204);
    const second = await tokens(a, [d.hashId]);
    expect(second.status).toBe(200);
    await claimAll(b, [second.body.claimTokens[0].claimToken]);
    expect((await b.request('GET', `/device/${d.hashId}`)).status).toBe(200);
    expect((await a.request('GET', `/device/${d.hashId}`)).status).toBe(404);
  });

  it('deleting a pin group unlinks its device first', async () => {
    const {
      devices: [d],
    } = await supplierDevices(1);
    const c = await customer();
    await claimAll(c, [d.token]);
    const pg = await addPinGroup(c);
    expect((await c.request('POST', `/device/${d.hashId}/link`, { pinGroupHashId: pg.hashId, channelMapping: [] })).status).toBe(200);
    expect((await c.request('DELETE', `/graph/pin-group/${pg.hashId}`)).status).toBe(204);
    expect((await c.request<DeviceRow>('GET', `/device/${d.hashId}`)).body.pinGroup).toBeNull();
    const again = await addPinGroup(c);
    expect((await c.request('POST', `/device/${d.hashId}/link`, { pinGroupHashId: again.hashId, channelMapping: [] })).status).toBe(200);
  });

  it('isolates tenants: another customer cannot link, unlink or unclaim the device, nor link its own device to a foreign pin group', async () => {
    const {
      devices: [d, e],
    } = await supplierDevices(2);
    const a = await customer();
    const b = await customer();
    await claimAll(a, [d.token]);
    await claimAll(b, [e.token]);
    const pgA = await addPinGroup(a);
    const pgB = await addPinGroup(b);
    expect((await b.request('POST', `/device/${d.hashId}/link`, { pinGroupHashId: pgB.hashId, channelMapping: [] })).status).toBe(404);
    expect((await b.request('POST', `/device/${e.hashId}/link`, { pinGroupHashId: pgA.hashId, channelMapping: [] })).status).toBe(404);
    expect((await a.request('POST', `/device/${d.hashId}/link`, { pinGroupHashId: pgA.hashId, channelMapping: [] })).status).toBe(200);
    expect((await b.request('POST', `/device/${d.hashId}/unlink`)).status).toBe(404);
    expect((await b.request('POST', '/device/unclaim', { hashIds: [d.hashId, e.hashId] })).status).toBe(404);
    // b's own device stayed claimed: the refused unclaim changed nothing
    expect((await b.request('GET', `/device/${e.hashId}`)).status).toBe(200);
    expect((await a.request<DeviceRow>('GET', `/device/${d.hashId}`)).body.pinGroup?.hashId).toBe(pgA.hashId);
  });
});

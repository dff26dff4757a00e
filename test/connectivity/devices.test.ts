import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lookupPskCredential } from '../../src/connectivity/devices/credentials.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, field, findAll, expectParameterError, type ErrorBody } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Device {
  hashId: string;
  supplierHashId: string;
  supplierDeviceIdentifier: string;
  deviceTypeHashId: string;
  fields: Record<string, unknown>;
  measurementCycle: unknown;
  nextReportBefore: string | null;
  lastOnlineAt: string | null;
  validated: boolean;
  userFacingIdentifier: string;
}
interface DeviceRow {
  device: Device;
  deviceType: { hashId: string };
  environmentName: string | null;
  environmentHashId: string | null;
  pinGroup: null;
}

let counter = 0;
/** A deployment-unique identity: the identity space is shared by every environment and test run. */
const identity = () => `id-${process.pid}-${Date.now()}-${counter++}`;
const PSK = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';

async function addDevice(c: ApiClient, deviceTypeHashId: string, more: Record<string, unknown> = {}) {
  return c.request<{ hashId: string } & ErrorBody>('POST', '/device/psk', {
    supplierDeviceIdentifier: `dev-${counter++}`,
    deviceTypeHashId,
    psk: PSK,
    pskIdentity: identity(),
    ...more,
  });
}

describe('devices', () => {
  it('adds with a PSK, gets, finds, updates and deletes; the key is sealed and never answered', async () => {
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c, {
      identifierFieldKey: 'serial',
      fieldConfigurations: [field('serial', 'string', { defaultValue: 'unset' }), field('depth', 'number')],
    });
    const pskIdentity = identity();
    const psk = 'DEADBEEF00112233445566778899aabb';
    const add = await c.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: 'imei-1',
      deviceTypeHashId: typeHashId,
      psk,
      pskIdentity,
    });
    expect(add.status).toBe(200);
    expect(add.body).toEqual({ hashId: expect.stringMatching(/^[a-z0-9]+$/) });
    const hashId = add.body.hashId;

    const expected: Device = {
      hashId,
      supplierHashId: c.environmentHashId,
      supplierDeviceIdentifier: 'imei-1',
      deviceTypeHashId: typeHashId,
      fields: { serial: 'unset' },
      measurementCycle: null,
      nextReportBefore: null,
      lastOnlineAt: null,
      validated: true,
      userFacingIdentifier: 'unset',
    };
    const get = await c.request<DeviceRow>('GET', `/device/${hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({
      device: expected,
      deviceType: expect.objectContaining({ hashId: typeHashId }),
      environmentName: null,
      environmentHashId: null,
      pinGroup: null,
    });

    const find = await c.request<{ nextPageOffset: string | null; rows: DeviceRow[] }>('GET', '/device/');
    expect(find.body).toEqual({ nextPageOffset: null, rows: [get.body] });

    const update = await c.request<{ device: Device }>('POST', `/device/${hashId}`, { fields: { serial: 'SN-42', depth: 1.5 } });
    expect(update.status).toBe(200);
    expect(update.body).toEqual({ device: { ...expected, fields: { serial: 'SN-42', depth: 1.5 }, userFacingIdentifier: 'SN-42' } });
    const partial = await c.request<{ device: Device }>('POST', `/device/${hashId}`, { fields: [{ key: 'depth', value: 2 }] });
    expect(partial.body.device.fields).toEqual({ serial: 'SN-42', depth: 2 });
    expect((await c.request<DeviceRow>('GET', `/device/${hashId}`)).body.device.userFacingIdentifier).toBe('SN-42');

    // the key is stored sealed and opens only with the server key and its own identity
    const stored = await api.ctx.db.query<{ psk_sealed: Buffer }>('SELECT psk_sealed FROM device WHERE hash_id = $1', [hashId]);
    expect(stored.rows[0].psk_sealed.toString('hex')).not.toContain(psk.toLowerCase());
    expect((await lookupPskCredential(api.ctx, pskIdentity))?.key.toString('hex')).toBe(psk.toLowerCase());

    const answers = [add, get, find, update, partial, await c.request('GET', `/device/?search=imei`)].map((r) => JSON.stringify(r.body).toLowerCase());
    for (const text of answers) {
      expect(text).not.toContain(psk.toLowerCase());
      expect(text).not.toContain(Buffer.from(psk, 'hex').toString('base64').toLowerCase());
      expect(text).not.toContain('psk');
    }

    expect((await c.request('POST', '/device/delete', { hashIds: [hashId] })).status).toBe(204);
    expect((await c.request('GET', `/device/${hashId}`)).status).toBe(404);
    expect(await lookupPskCredential(api.ctx, pskIdentity)).toBeNull();
    expect((await c.request<{ rows: unknown[] }>('GET', '/device/')).body.rows).toEqual([]);
  });

  it('validates psk, pskIdentity and the other members, naming the field', async () => {
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c);
    await expectParameterError(await addDevice(c, typeHashId, { psk: 'ab'.repeat(256) + 'a' }), 'psk', '512');
    await expectParameterError(await addDevice(c, typeHashId, { psk: 'ab'.repeat(257) }), 'psk', '512');
    await expectParameterError(await addDevice(c, typeHashId, { psk: 'abc' }), 'psk');
    await expectParameterError(await addDevice(c, typeHashId, { psk: 'zz11' }), 'psk');
    await expectParameterError(await addDevice(c, typeHashId, { psk: '' }), 'psk');
    await expectParameterError(await addDevice(c, typeHashId, { pskIdentity: 'i'.repeat(256) }), 'pskIdentity', '255');
    await expectParameterError(await addDevice(c, typeHashId, { pskIdentity: '' }), 'pskIdentity');
    await expectParameterError(await addDevice(c, typeHashId, { psk: undefined }), 'psk', 'required');
    // the limits themselves are allowed: 256 key bytes, a 255-character identity, a 1-byte key
    expect((await addDevice(c, typeHashId, { psk: 'ab'.repeat(256), pskIdentity: `${identity()}-`.padEnd(255, 'x') })).status).toBe(200);
    expect((await addDevice(c, typeHashId, { psk: '0F' })).status).toBe(200);
    expect((await addDevice(c, 'nosuchtype')).status).toBe(404);
  });

  it('keeps pskIdentity unique across the deployment and supplierDeviceIdentifier per environment', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const typeA = await addDeviceType(a);
    const typeB = await addDeviceType(b);
    const shared = identity();
    expect((await addDevice(a, typeA, { pskIdentity: shared, supplierDeviceIdentifier: 'same' })).status).toBe(200);
    const dupIdentity = await addDevice(b, typeB, { pskIdentity: shared });
    expect(dupIdentity.status).toBe(409);
    expect(dupIdentity.body).toMatchObject({ key: 'conflict_error', message: expect.stringContaining('pskIdentity') });
    const dupIdentifier = await addDevice(a, typeA, { supplierDeviceIdentifier: 'same' });
    expect(dupIdentifier.status).toBe(409);
    expect(dupIdentifier.body).toMatchObject({ key: 'conflict_error', message: expect.stringContaining('supplierDeviceIdentifier') });
    expect((await addDevice(b, typeB, { supplierDeviceIdentifier: 'same' })).status).toBe(200);
  });

  it('refuses a deleted device type, and a device type of another environment', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const typeA = await addDeviceType(a);
    expect((await addDevice(b, typeA)).status).toBe(404);
    expect((await a.request('DELETE', `/device-type/${typeA}`)).status).toBe(204);
    expect((await addDevice(a, typeA)).status).toBe(404);
  });

  it("checks fields against the device type's field configurations", async () => {
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c, {
      fieldConfigurations: [
        field('serial'),
        field('depth', 'number'),
        field('count', 'integer'),
        field('active', 'boolean'),
        field('code', 'string', { regex: '^[A-Z]{3}$' }),
        field('mode', 'string', { inputType: 'select', valueOptions: [{ text: 'A', value: 'a' }] }),
        field('must', 'string', { allowNull: false }),
      ],
    });
    const { body } = await addDevice(c, typeHashId);
    const url = `/device/${body.hashId}`;
    await expectParameterError(await c.request('POST', url, { fields: { unknownKey: 1 } }), 'unknownKey');
    await expectParameterError(await c.request('POST', url, { fields: { depth: 'deep' } }), 'depth', 'number');
    await expectParameterError(await c.request('POST', url, { fields: { count: 1.5 } }), 'count', 'integer');
    await expectParameterError(await c.request('POST', url, { fields: { active: 'yes' } }), 'active', 'boolean');
    await expectParameterError(await c.request('POST', url, { fields: { serial: 7 } }), 'serial', 'string');
    await expectParameterError(await c.request('POST', url, { fields: { code: 'abc' } }), 'code');
    await expectParameterError(await c.request('POST', url, { fields: { mode: 'b' } }), 'mode', 'valueOptions');
    await expectParameterError(await c.request('POST', url, { fields: { must: null } }), 'must', 'null');
    await expectParameterError(await c.request('POST', url, { fields: [{ key: 'nope', value: 1 }] }), 'nope');
    await expectParameterError(await c.request('POST', url, {}), 'fields', 'required');
    const ok = await c.request<{ device: Device }>('POST', url, {
      fields: { serial: null, depth: 3, count: 2, active: true, code: 'ABC', mode: 'a', must: 'x' },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.device.fields).toEqual({ serial: null, depth: 3, count: 2, active: true, code: 'ABC', mode: 'a', must: 'x' });
    // a refused update changed nothing
    expect((await c.request('POST', url, { fields: [{ key: 'depth', value: 'x' }] })).status).toBe(400);
    expect((await c.request<DeviceRow>('GET', url)).body.device.fields.depth).toBe(3);
  });

  it('follows the identifier field when the device type changes it', async () => {
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c);
    const { body } = await addDevice(c, typeHashId);
    expect((await c.request<DeviceRow>('GET', `/device/${body.hashId}`)).body.device.userFacingIdentifier).toBe(body.hashId);
    await c.request('POST', `/device/${body.hashId}`, { fields: { serial: 'SN-7' } });
    expect((await c.request('POST', `/device-type/${typeHashId}`, { identifierFieldKey: 'serial' })).status).toBe(204);
    expect((await c.request<DeviceRow>('GET', `/device/${body.hashId}`)).body.device.userFacingIdentifier).toBe('SN-7');
    const search = await c.request<{ rows: DeviceRow[] }>('GET', '/device/?search=SN-7');
    expect(search.body.rows.map((r) => r.device.hashId)).toEqual([body.hashId]);
  });

  it('pages through every device once and searches hashId, supplierDeviceIdentifier and userFacingIdentifier', async () => {
    const c = await api.login('connectivity');
    const typeHashId = await addDeviceType(c, { identifierFieldKey: 'serial' });
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await addDevice(c, typeHashId, { supplierDeviceIdentifier: `sdi-${i}` })).body.hashId);
    const all = await findAll<DeviceRow>(c, '/device/');
    expect(all.map((r) => r.device.hashId)).toEqual([...ids].sort().reverse());
    const bySdi = await findAll<DeviceRow>(c, '/device/?sortBy=supplierDeviceIdentifier&descending=false', 3);
    expect(bySdi.map((r) => r.device.supplierDeviceIdentifier)).toEqual(ids.map((_, i) => `sdi-${i}`));
    await c.request('POST', `/device/${ids[2]}`, { fields: { serial: 'needle' } });
    const search = (q: string) =>
      c.request<{ rows: DeviceRow[] }>('GET', `/device/?search=${encodeURIComponent(q)}`).then((r) => r.body.rows.map((x) => x.device.hashId));
    expect(await search('sdi-4')).toEqual([ids[4]]);
    expect(await search(ids[5])).toEqual([ids[5]]);
    expect(await search('needl')).toEqual([ids[2]]);
  });

  it('deletes 1..30 devices all or nothing', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const typeA = await addDeviceType(a);
    const typeB = await addDeviceType(b);
    const mine = [(await addDevice(a, typeA)).body.hashId, (await addDevice(a, typeA)).body.hashId];
    const theirs = (await addDevice(b, typeB)).body.hashId;
    await expectParameterError(await a.request('POST', '/device/delete', { hashIds: Array.from({ length: 31 }, (_, i) => `h${i}`) }), 'hashIds', '30');
    await expectParameterError(await a.request('POST', '/device/delete', { hashIds: [] }), 'hashIds');
    const mixed = await a.request<ErrorBody>('POST', '/device/delete', { hashIds: [...mine, theirs] });
    expect(mixed.status).toBe(404);
    expect(mixed.body.key).toBe('not_found_error');
    expect((await a.request<{ rows: unknown[] }>('GET', '/device/')).body.rows).toHaveLength(2);
    expect((await b.request('GET', `/device/${theirs}`)).status).toBe(200);
    expect((await a.request('POST', '/device/delete', { hashIds: [...mine, mine[0]] })).status).toBe(204);
    expect((await a.request<{ rows: unknown[] }>('GET', '/device/')).body.rows).toHaveLength(0);
  });

  it("keeps environments apart: B cannot see or touch A's device", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const typeA = await addDeviceType(a);
    const { body } = await addDevice(a, typeA, { supplierDeviceIdentifier: 'a-secret' });
    expect((await b.request<ErrorBody>('GET', `/device/${body.hashId}`)).body).toMatchObject({ key: 'not_found_error' });
    expect((await b.request('POST', `/device/${body.hashId}`, { fields: {} })).status).toBe(404);
    expect((await b.request('POST', '/device/delete', { hashIds: [body.hashId] })).status).toBe(404);
    expect((await b.request<{ rows: unknown[] }>('GET', '/device/')).body.rows).toEqual([]);
    expect((await b.request<{ rows: unknown[] }>('GET', '/device/?search=a-secret')).body.rows).toEqual([]);
    expect((await a.request('GET', `/device/${body.hashId}`)).status).toBe(200);
  });
});

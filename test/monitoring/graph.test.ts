import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup, type PinAnswer, type PinGroupAnswer } from './fixtures.ts';

// Pin groups (locations) and pins (ports): fields from the environment's field configurations.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface PinGroupGet {
  pinGroup: PinGroupAnswer['pinGroup'];
  pins: { pin: PinAnswer['pin']; grids: unknown[] }[];
  edges: unknown[];
  device: unknown;
  deviceType: unknown;
  channelMapping: unknown;
  measurementCycle: unknown;
  thresholds: unknown[];
  nextReportBefore: unknown;
  photo: string | null;
  grids: unknown[];
}

describe('pin groups', () => {
  it('add / get / find / update / delete with the environment field configuration; the name is the first field', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC', 'ENVIRONMENT_ADMIN']);
    const configs = {
      pinGroups: [
        { key: 'name', name: 'Name', type: 'string' },
        { key: 'depth', name: 'Depth', type: 'number', defaultValue: 1.5 },
        {
          key: 'kind',
          name: 'Kind',
          type: 'string',
          valueOptions: [
            { value: 'a', text: 'A' },
            { value: 'b', text: 'B' },
          ],
        },
      ],
      edges: [{ key: 'id', name: 'Name' }],
      grids: [{ key: 'id', name: 'Name' }],
      nodes: [{ key: 'id', name: 'Name' }],
      pins: [{ key: 'label', name: 'Label', type: 'string' }],
    };
    expect(
      (
        await c.request('PUT', '/environment/', {
          fieldConfigurations: configs,
          mapLayers: [
            { name: 'Main', key: 'main' },
            { name: 'Other', key: 'other' },
          ],
        })
      ).status,
    ).toBe(200);
    const added = await c.request<PinGroupAnswer>('POST', '/graph/pin-group', {
      symbolKey: 'valve',
      geometry: { type: 'Point', coordinates: [4.9, 52.37] },
      fields: { name: 'Valve 12', kind: 'a' },
      photo: 'data:image/png;base64,AAAA',
    });
    expect(added.status).toBe(200);
    expect(added.body.pinGroup).toMatchObject({
      hashId: added.body.hashId,
      name: 'Valve 12',
      fields: { name: 'Valve 12', depth: 1.5, kind: 'a' },
      mapLayer: 'main',
      deviceLinkHashId: null,
      mostRecentMeasurementAt: null,
      deviceFields: {},
      level: 0,
      deletedAt: null,
      symbolKey: 'valve',
    });
    const pin = await c.request<PinAnswer>('POST', `/graph/pin-group/${added.body.hashId}/pin`, { fields: { label: 'Red' }, typeKey: 'anode' });
    expect(pin.status).toBe(200);
    expect(pin.body).toEqual({
      pin: {
        hashId: pin.body.pin.hashId,
        pinGroupHashId: added.body.hashId,
        name: 'Red',
        fields: { label: 'Red' },
        deviceFields: {},
        level: 0,
        typeKey: 'anode',
        edgeHashId: null,
        nodeHashId: null,
        deletedAt: null,
      },
      grids: [],
    });

    const get = await c.request<PinGroupGet>('GET', `/graph/pin-group/${added.body.hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toMatchObject({
      pinGroup: added.body.pinGroup,
      edges: [],
      device: null,
      deviceType: null,
      channelMapping: null,
      measurementCycle: null,
      thresholds: [],
      nextReportBefore: null,
      photo: 'data:image/png;base64,AAAA',
      grids: [],
    });
    expect(get.body.pins.map((p) => p.pin.hashId)).toEqual([pin.body.pin.hashId]);
    // the bounding box follows the pin groups
    const env = await c.request<{ environment: { boundingBox: unknown } }>('GET', `/environment/${c.environmentHashId}`);
    expect(env.body.environment.boundingBox).toEqual({
      type: 'LineString',
      coordinates: [
        [4.9, 52.37],
        [4.9, 52.37],
      ],
    });

    const upd = await c.request<{ pinGroup: PinGroupAnswer['pinGroup']; grids: unknown[] }>('POST', `/graph/pin-group/${added.body.hashId}`, {
      fields: [{ key: 'name', value: 'Valve 13' }],
      mapLayer: 'other',
      geometry: null,
      photo: null,
    });
    expect(upd.status).toBe(200);
    expect(upd.body.pinGroup).toMatchObject({ name: 'Valve 13', fields: { name: 'Valve 13', depth: 1.5, kind: 'a' }, mapLayer: 'other', geometry: null });
    expect((await c.request<PinGroupGet>('GET', `/graph/pin-group/${added.body.hashId}`)).body.photo).toBeNull();

    const pinUpd = await c.request<PinAnswer>('POST', `/graph/pin/${pin.body.pin.hashId}`, { fields: { label: 'Black' } });
    expect(pinUpd.body.pin.name).toBe('Black');
    const pinGet = await c.request<{ pin: PinAnswer['pin']; edges: unknown[]; thresholds: unknown[] }>('GET', `/graph/pin/${pin.body.pin.hashId}`);
    expect(pinGet.body).toEqual({ pin: pinUpd.body.pin, edges: [], thresholds: [] });

    const found = await findAll<{ pinGroup: { hashId: string }; device: unknown }>(c, '/graph/pin-group?search=valve');
    expect(found).toEqual([{ pinGroup: upd.body.pinGroup, device: null }]);
    const pins = await findAll<{ pin: { hashId: string }; pinGroup: { name: string } }>(c, '/graph/pin');
    expect(pins).toEqual([{ pin: pinUpd.body.pin, pinGroup: { name: 'Valve 13' } }]);

    expect((await c.request('DELETE', `/graph/pin/${pin.body.pin.hashId}`)).status).toBe(204);
    expect((await c.request('GET', `/graph/pin/${pin.body.pin.hashId}`)).status).toBe(404);
    expect((await c.request('DELETE', `/graph/pin-group/${added.body.hashId}`)).status).toBe(204);
    expect((await c.request<ErrorBody>('GET', `/graph/pin-group/${added.body.hashId}`)).body.key).toBe('not_found_error');
    expect((await c.request('DELETE', `/graph/pin-group/${added.body.hashId}`)).status).toBe(404);
  });

  it('finds page by keyset and sort by name', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    for (const name of ['charlie', 'alpha', 'bravo', 'delta', 'echo']) await addPinGroup(c, name);
    const rows = await findAll<{ pinGroup: { name: string } }>(c, '/graph/pin-group?sortBy=name&descending=false', 2);
    expect(rows.map((r) => r.pinGroup.name)).toEqual(['alpha', 'bravo', 'charlie', 'delta', 'echo']);
  });

  it('fields, geometry, map layers and list limits are parameter_errors naming the field', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const add = (body: Record<string, unknown>) =>
      c.request<ErrorBody>('POST', '/graph/pin-group', { symbolKey: 's', geometry: null, fields: { id: 'x' }, ...body });
    expectParameterError(await add({ fields: { colour: 'red' } }), 'fields.colour');
    expectParameterError(await add({ fields: { id: 12 } }), 'fields.id', 'string');
    expectParameterError(await add({ geometry: { type: 'Point', coordinates: [181, 0] } }), 'geometry');
    expectParameterError(
      await add({
        geometry: {
          type: 'LineString',
          coordinates: [
            [1, 2],
            [3, 4],
          ],
        },
      }),
      'geometry',
    );
    expectParameterError(await add({ mapLayer: 'nowhere' }), 'mapLayer');
    expectParameterError(await add({ gridHashIds: Array.from({ length: 31 }, (_, i) => `g${i}`) }), 'gridHashIds', '30');
    expectParameterError(await add({ symbolKey: undefined }), 'symbolKey');
    const pg = await addPinGroup(c);
    expectParameterError(await c.request('POST', `/graph/pin-group/${pg.hashId}`, { deviceFields: { a: 1 } }), 'deviceFields');
    expectParameterError(await c.request('POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: { id: 'p', extra: 1 } }), 'fields.extra');
    expectParameterError(
      await c.request('POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: { id: 'p' }, pinGridsHashIds: Array.from({ length: 31 }, (_, i) => `g${i}`) }),
      'pinGridsHashIds',
      '30',
    );
    const pin = await addPin(c, pg.hashId, 'p');
    expectParameterError(
      await c.request('POST', `/graph/pin/${pin.hashId}`, { pinGridsHashIds: Array.from({ length: 31 }, (_, i) => `g${i}`) }),
      'pinGridsHashIds',
      '30',
    );
    // nothing was added by the refused requests
    expect(await findAll<unknown>(c, '/graph/pin-group')).toHaveLength(1);
    expect(await findAll<unknown>(c, '/graph/pin')).toHaveLength(1);
  });

  it('isolates tenants: another monitoring environment sees and touches nothing, a supplier has no graph', async () => {
    const a = await api.login('monitoring', ['READ', 'STATIC']);
    const b = await api.login('monitoring', ['READ', 'STATIC']);
    const pg = await addPinGroup(a, 'mine');
    const pin = await addPin(a, pg.hashId, 'port');
    for (const [method, url, body] of [
      ['GET', `/graph/pin-group/${pg.hashId}`],
      ['POST', `/graph/pin-group/${pg.hashId}`, { symbolKey: 'x' }],
      ['DELETE', `/graph/pin-group/${pg.hashId}`],
      ['POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: { id: 'x' } }],
      ['GET', `/graph/pin/${pin.hashId}`],
      ['POST', `/graph/pin/${pin.hashId}`, { fields: { id: 'x' } }],
      ['DELETE', `/graph/pin/${pin.hashId}`],
    ] as [string, string, unknown?][]) {
      const r = await b.request<ErrorBody>(method, url, body);
      expect(r.status, `${method} ${url}`).toBe(404);
    }
    expect(await findAll(b, '/graph/pin-group')).toEqual([]);
    expect(await findAll(b, '/graph/pin')).toEqual([]);
    // a's token with b's environment header reaches nothing either
    expect((await a.request('GET', `/graph/pin-group/${pg.hashId}`, undefined, { 'environment-hash-id': b.environmentHashId })).status).toBe(404);
    const supplier = await api.login('connectivity');
    expect((await supplier.request<ErrorBody>('GET', '/graph/pin-group')).body.key).toBe('right_error');
    expect((await a.request<PinGroupGet>('GET', `/graph/pin-group/${pg.hashId}`)).body.pins).toHaveLength(1);
  });
});

describe('names', () => {
  it('every graph object needs its first field (its name) on add and keeps it on update', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    expectParameterError(await c.request('POST', '/graph/pin-group', { symbolKey: 's', geometry: null, fields: {} }), 'fields.id', 'name');
    expectParameterError(await c.request('POST', '/graph/pin-group', { symbolKey: 's', geometry: null, fields: { id: '' } }), 'fields.id');
    const pg = await addPinGroup(c);
    expectParameterError(await c.request('POST', `/graph/pin-group/${pg.hashId}`, { fields: [{ key: 'id', value: null }] }), 'fields.id');
    expectParameterError(await c.request('POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: {} }), 'fields.id');
    expectParameterError(
      await c.request('POST', '/graph/edge', {
        geometry: {
          type: 'LineString',
          coordinates: [
            [1, 1],
            [2, 2],
          ],
        },
        fields: {},
      }),
      'fields.id',
    );
    expectParameterError(await c.request('POST', '/graph/node', { geometry: { type: 'Point', coordinates: [1, 1] }, fields: {} }), 'fields.id');
    expectParameterError(await c.request('POST', '/graph/pin-grid', { fields: {} }), 'fields.id');
    const edge = await c.request<{ edge: { node1HashId: string } }>('POST', '/graph/edge', {
      geometry: {
        type: 'LineString',
        coordinates: [
          [1, 1],
          [2, 2],
        ],
      },
      fields: { id: 'Main' },
      nodeHashIds: [null, null],
    });
    expect((await c.request<{ node: { name: string } }>('GET', `/graph/node/${edge.body.edge.node1HashId}`)).body.node.name).toBe('Main start');
  });
});

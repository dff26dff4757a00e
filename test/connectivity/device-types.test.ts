import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lookupPskCredential } from '../../src/connectivity/devices/credentials.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addCommandType, addDeviceType, deviceTypeBody, field, findAll, expectParameterError, type ErrorBody } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface DeviceTypeGet {
  deviceType: Record<string, unknown> & { hashId: string; channels: unknown[] };
  eventHandler: string;
  commandTypes: unknown[];
  subscriptionHashId: string;
  chartQuantities: { hashId: string; name: string }[];
}

async function addQuantity(c: ApiClient, name: string): Promise<string> {
  const r = await c.request<{ hashId: string }>('POST', '/quantity/', { name, unit: 'V', defaultOrderOfMagnitude: -3 });
  expect(r.status).toBe(200);
  return r.body.hashId;
}

describe('device types', () => {
  it('adds, gets with chart quantities, finds, updates and deletes', async () => {
    const c = await api.login('connectivity');
    const volt = await addQuantity(c, 'Potential');
    const amp = await addQuantity(c, 'Current');
    const c1 = await addCommandType(c, { name: 'Cycle' });
    const c2 = await addCommandType(c, { name: 'Reboot' });
    const add = await c.request<{ hashId: string; subscriptionHashId: string }>(
      'POST',
      '/device-type/',
      deviceTypeBody({
        channels: [
          {
            name: 'Red wire',
            pinFieldConfigurations: [field('depth', 'number')],
            defaultPinName: 'Anode',
            charts: [{ title: 'Red', series: [{ quantityHashId: amp, color: null }] }],
          },
        ],
        charts: [{ title: 'Potentials', series: [{ channelIndex: 0, quantityHashId: volt, color: '#ff00ff' }] }],
        commandTypeHashIds: [c1, c2],
        measurementCycleCommandTypeHashId: c1,
        identifierFieldKey: 'serial',
      }),
    );
    expect(add.status).toBe(200);
    expect(add.body).toEqual({ hashId: expect.stringMatching(/^[a-z0-9]+$/), subscriptionHashId: expect.stringMatching(/^[a-z0-9]+$/) });

    const get = await c.request<DeviceTypeGet>('GET', `/device-type/${add.body.hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({
      deviceType: {
        hashId: add.body.hashId,
        name: 'Cathodic protection device',
        fieldConfigurations: deviceTypeBody().fieldConfigurations,
        pinGroupFieldConfigurations: [],
        channels: [
          {
            name: 'Red wire',
            pinFieldConfigurations: [field('depth', 'number')],
            defaultPinName: 'Anode',
            charts: [{ title: 'Red', series: [{ quantityHashId: amp, color: null }] }],
          },
        ],
        charts: [{ title: 'Potentials', series: [{ channelIndex: 0, quantityHashId: volt, color: '#ff00ff' }] }],
        commandTypeHashIds: [c1, c2],
        measurementCycleCommandTypeHashId: c1,
        identifierFieldKey: 'serial',
      },
      eventHandler: deviceTypeBody().eventHandler,
      commandTypes: [
        {
          hashId: c1,
          name: 'Cycle',
          start: 'optional',
          end: 'disabled',
          fieldConfigurations: [field('interval', 'integer')],
          channelSelect: 'off',
          environmentAccess: 'full',
        },
        {
          hashId: c2,
          name: 'Reboot',
          start: 'optional',
          end: 'disabled',
          fieldConfigurations: [field('interval', 'integer')],
          channelSelect: 'off',
          environmentAccess: 'full',
        },
      ],
      subscriptionHashId: add.body.subscriptionHashId,
      chartQuantities: expect.any(Array),
    });
    expect(get.body.chartQuantities.map((q) => q.name).sort()).toEqual(['Current', 'Potential']);

    const find = await c.request<{ nextPageOffset: string | null; rows: { deviceType: { hashId: string } }[] }>('GET', '/device-type/');
    expect(find.status).toBe(200);
    expect(find.body).toEqual({ nextPageOffset: null, rows: [{ deviceType: get.body.deviceType }] });

    const update = await c.request('POST', `/device-type/${add.body.hashId}`, {
      name: { en: 'Renamed', nl: 'Hernoemd' },
      channels: [
        { name: 'Red wire', pinFieldConfigurations: [] },
        { name: 'Blue wire', pinFieldConfigurations: [{ fieldConfiguration: field('x') }] },
      ],
      measurementCycleCommandTypeHashId: null,
      shimmable: false,
    });
    expect(update.status).toBe(204);
    expect(update.body).toBeNull();
    // translated names are answered from Api-Version 7 (test/http/sdk-compat.test.ts)
    const after = await c.request<DeviceTypeGet>('GET', `/device-type/${add.body.hashId}`, undefined, { 'api-version': '7' });
    expect(after.body.deviceType).toMatchObject({
      name: { en: 'Renamed', nl: 'Hernoemd' },
      channels: [
        { name: 'Red wire', pinFieldConfigurations: [] },
        { name: 'Blue wire', pinFieldConfigurations: [field('x')] },
      ],
      measurementCycleCommandTypeHashId: null,
      commandTypeHashIds: [c1, c2],
    });
    expect(after.body.chartQuantities.map((q) => q.hashId)).toEqual([volt]);

    const del = await c.request('DELETE', `/device-type/${add.body.hashId}`);
    expect(del.status).toBe(204);
    expect((await c.request('GET', `/device-type/${add.body.hashId}`)).status).toBe(404);
    expect((await c.request('POST', `/device-type/${add.body.hashId}`, { name: 'x' })).status).toBe(404);
    expect((await c.request('DELETE', `/device-type/${add.body.hashId}`)).status).toBe(404);
    expect((await c.request<{ rows: unknown[] }>('GET', '/device-type/')).body.rows).toEqual([]);
  });

  it('pages through every device type once (keyset) and searches by name', async () => {
    const c = await api.login('connectivity');
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await addDeviceType(c, { name: `Type ${i}` }));
    const byHashId = await findAll<{ deviceType: { hashId: string } }>(c, '/device-type/');
    expect(byHashId.map((r) => r.deviceType.hashId)).toEqual([...ids].sort().reverse());
    const byName = await findAll<{ deviceType: { name: string } }>(c, '/device-type/?sortBy=name&descending=false', 3);
    expect(byName.map((r) => r.deviceType.name)).toEqual(ids.map((_, i) => `Type ${i}`));
    const search = await c.request<{ rows: { deviceType: { name: string } }[] }>('GET', '/device-type/?search=ype%204');
    expect(search.body.rows.map((r) => r.deviceType.name)).toEqual(['Type 4']);
  });

  it('enforces every limit of the seed, naming the field', async () => {
    const c = await api.login('connectivity');
    const many = <T>(n: number, make: (i: number) => T) => Array.from({ length: n }, (_, i) => make(i));
    const channel = (i: number) => ({ name: `ch${i}`, pinFieldConfigurations: [] });
    const chart = { title: null, series: [] };
    const commandTypes = await Promise.all(many(60, (i) => addCommandType(c, { name: `Command ${i}` })));
    await expectParameterError(await c.request('POST', '/device-type/', deviceTypeBody({ eventHandler: 'x'.repeat(1_000_001) })), 'eventHandler', '1000000');
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ fieldConfigurations: many(51, (i) => field(`f${i}`)) })),
      'fieldConfigurations',
      '50',
    );
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ pinGroupFieldConfigurations: many(51, (i) => field(`f${i}`)) })),
      'pinGroupFieldConfigurations',
      '50',
    );
    await expectParameterError(await c.request('POST', '/device-type/', deviceTypeBody({ channels: many(61, channel) })), 'channels', '60');
    await expectParameterError(await c.request('POST', '/device-type/', deviceTypeBody({ charts: many(6, () => chart) })), 'charts', '5');
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ commandTypeHashIds: many(61, (i) => `c${i}`) })),
      'commandTypeHashIds',
      '60',
    );
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ channels: [{ name: 'a', pinFieldConfigurations: many(51, (i) => field(`f${i}`)) }] })),
      'channels.0.pinFieldConfigurations',
      '50',
    );
    // the limits themselves are allowed
    const full = await c.request(
      'POST',
      '/device-type/',
      deviceTypeBody({
        fieldConfigurations: many(50, (i) => field(`f${i}`)),
        pinGroupFieldConfigurations: many(50, (i) => field(`f${i}`)),
        channels: many(60, channel),
        charts: many(5, () => chart),
        commandTypeHashIds: commandTypes,
      }),
    );
    expect(full.status).toBe(200);
    // limits hold on update too
    const hashId = await addDeviceType(c);
    await expectParameterError(await c.request('POST', `/device-type/${hashId}`, { channels: many(61, channel) }), 'channels', '60');
    await expectParameterError(await c.request('POST', `/device-type/${hashId}`, { charts: many(6, () => chart) }), 'charts', '5');
    await expectParameterError(await c.request('POST', `/device-type/${hashId}`, { eventHandler: 'x'.repeat(1_000_001) }), 'eventHandler');
    await expectParameterError(
      await c.request('POST', `/device-type/${hashId}`, { fieldConfigurations: many(51, (i) => field(`f${i}`)) }),
      'fieldConfigurations',
      '50',
    );
    await expectParameterError(await c.request('POST', `/device-type/${hashId}`, { commandTypeHashIds: many(61, (i) => `c${i}`) }), 'commandTypeHashIds', '60');
    await expectParameterError(await c.request('POST', '/device-type/', { ...deviceTypeBody(), name: undefined }), 'name', 'required');
  });

  it('refuses to shrink channels and checks the rules across members', async () => {
    const c = await api.login('connectivity');
    const c1 = await addCommandType(c);
    const c9 = await addCommandType(c);
    const hashId = await addDeviceType(c, { commandTypeHashIds: [c1] });
    await expectParameterError(
      await c.request('POST', `/device-type/${hashId}`, { channels: [{ name: 'only one', pinFieldConfigurations: [] }] }),
      'channels cannot be removed',
    );
    await expectParameterError(
      await c.request('POST', `/device-type/${hashId}`, { measurementCycleCommandTypeHashId: c9 }),
      'measurementCycleCommandTypeHashId',
      'commandTypeHashIds',
    );
    expect((await c.request('POST', `/device-type/${hashId}`, { measurementCycleCommandTypeHashId: c1 })).status).toBe(204);
    // removing the command type the cycle refers to is refused, clearing both is fine
    await expectParameterError(await c.request('POST', `/device-type/${hashId}`, { commandTypeHashIds: [] }), 'measurementCycleCommandTypeHashId');
    expect((await c.request('POST', `/device-type/${hashId}`, { commandTypeHashIds: [], measurementCycleCommandTypeHashId: null })).status).toBe(204);
    await expectParameterError(await c.request('POST', `/device-type/${hashId}`, { identifierFieldKey: 'nope' }), 'identifierFieldKey', 'fieldConfigurations');
    expect((await c.request('POST', `/device-type/${hashId}`, { identifierFieldKey: 'serial' })).status).toBe(204);
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ measurementCycleCommandTypeHashId: c1 })),
      'measurementCycleCommandTypeHashId',
    );
    await expectParameterError(await c.request('POST', '/device-type/', deviceTypeBody({ identifierFieldKey: 'nope' })), 'identifierFieldKey');
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ fieldConfigurations: [field('a'), field('a')] })),
      'fieldConfigurations',
      'twice',
    );
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ charts: [{ title: null, series: [{ channelIndex: 5, quantityHashId: 'q' }] }] })),
      'charts[0].series[0].channelIndex',
    );
    await expectParameterError(
      await c.request('POST', '/device-type/', deviceTypeBody({ charts: [{ title: null, series: [{ channelIndex: 0, quantityHashId: 'nosuchquantity' }] }] })),
      'quantityHashId',
      'nosuchquantity',
    );
    // nothing was half-applied by the refused updates
    const get = await c.request<DeviceTypeGet>('GET', `/device-type/${hashId}`);
    expect(get.body.deviceType).toMatchObject({
      channels: [{ name: 'Red wire' }, { name: 'Black wire' }],
      identifierFieldKey: 'serial',
      commandTypeHashIds: [],
    });
  });

  it('compiles the eventHandler on add and update and reports a syntax error with line and column', async () => {
    const c = await api.login('connectivity');
    const broken = 'function handle(args: Arguments) {\n  const x = 1;\n  const y = ;\n}\n';
    const add = await c.request<ErrorBody>('POST', '/device-type/', deviceTypeBody({ eventHandler: broken }));
    expect(add.status).toBe(400);
    expect(add.body.key).toBe('parameter_error');
    expect(add.body.message).toMatch(/^eventHandler: line 3, column \d+: /);
    expect(add.body.details).toEqual({ field: 'eventHandler', line: 3, column: expect.any(Number) });

    const hashId = await addDeviceType(c);
    const update = await c.request<ErrorBody>('POST', `/device-type/${hashId}`, { eventHandler: broken, name: 'not applied' });
    expect(update.status).toBe(400);
    expect(update.body.details).toMatchObject({ field: 'eventHandler', line: 3 });
    const get = await c.request<DeviceTypeGet>('GET', `/device-type/${hashId}`);
    expect(get.body.deviceType.name).toBe('Cathodic protection device');

    const valid = 'type Args = { n: number };\nfunction handle(args: Args): void {\n  void args;\n}\n';
    expect((await c.request('POST', `/device-type/${hashId}`, { eventHandler: valid })).status).toBe(204);
    const stored = await api.ctx.db.query<{ event_handler: string; event_handler_hash: string }>(
      'SELECT event_handler, event_handler_hash FROM device_type WHERE hash_id = $1',
      [hashId],
    );
    expect(stored.rows[0].event_handler).toBe(valid);
    expect(stored.rows[0].event_handler_hash).toMatch(/^[0-9a-f]{16,}$/);
  });

  it('takes the devices of a deleted type off the gateway, cached credentials included', async () => {
    const c = await api.login('connectivity');
    const hashId = await addDeviceType(c);
    const identity = `dt-del-${Date.now()}-${Math.random()}`;
    const add = await c.request('POST', '/device/psk', { supplierDeviceIdentifier: 'd1', deviceTypeHashId: hashId, psk: '00112233', pskIdentity: identity });
    expect(add.status).toBe(200);
    const credential = await lookupPskCredential(api.ctx, identity);
    expect(credential?.key.toString('hex')).toBe('00112233');
    expect(await api.ctx.redis.get(`${api.ctx.config.queueName}:psk:${identity}`)).not.toBeNull();
    expect((await c.request('DELETE', `/device-type/${hashId}`)).status).toBe(204);
    expect(await lookupPskCredential(api.ctx, identity)).toBeNull();
  });

  it("keeps environments apart: B cannot see or touch A's device type", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const hashId = await addDeviceType(a);
    expect((await b.request<ErrorBody>('GET', `/device-type/${hashId}`)).body).toMatchObject({ key: 'not_found_error' });
    expect((await b.request('POST', `/device-type/${hashId}`, { name: 'stolen' })).status).toBe(404);
    expect((await b.request('DELETE', `/device-type/${hashId}`)).status).toBe(404);
    expect((await b.request<{ rows: unknown[] }>('GET', '/device-type/')).body.rows).toEqual([]);
    // a chart may not point at another environment's quantity
    const quantity = await addQuantity(a, 'A only');
    await expectParameterError(
      await b.request('POST', '/device-type/', deviceTypeBody({ charts: [{ title: null, series: [{ channelIndex: 0, quantityHashId: quantity }] }] })),
      quantity,
    );
    const get = await a.request<DeviceTypeGet>('GET', `/device-type/${hashId}`);
    expect(get.body.deviceType.name).toBe('Cathodic protection device');
  });
});

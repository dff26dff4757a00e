// What the original platform's public SDK sends and requires, encoded here as plain requests and the
// shapes its Joi models demand (the SDK itself is no dependency of these tests): 17.37.0 speaks
// Api-Version 5, 18.3.1 speaks 8, and each version in between has its own model shapes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCertificates } from '../../src/pki/files.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { addCommandType, addDeviceType, findAll } from '../connectivity/fixtures.ts';
import { opensslCsr, tempDir } from '../pki/support.ts';

let api: TestApi;
let c: ApiClient;

beforeAll(async () => {
  const ctx = await testContext({ CERTS_DIR: tempDir() });
  await ensureCertificates(ctx.config);
  api = await startTestApi(ctx);
  c = await api.login('connectivity');
});
afterAll(async () => api?.close());

const at = (version: number) => ({ 'api-version': String(version) });
const translated = { en: 'Temperature', nl: 'Temperatuur' };

describe("the SDK's requests", () => {
  it('accepts Api-Version 4 to 8 on an operation, 9 is not yet a version', async () => {
    for (const v of [4, 5, 6, 7, 8]) expect((await c.request('GET', '/device-type/', undefined, at(v))).status).toBe(200);
    expect((await c.request<{ key: string }>('GET', '/device-type/', undefined, at(9))).body.key).toBe('api_version_error');
  });

  it('takes Environment-Hash-Id as supplier:<hashId> (changeEnvironment(id, "supplier")) for a connectivity environment only', async () => {
    const supplier = await c.request('GET', '/device-type/', undefined, { 'environment-hash-id': `supplier:${c.environmentHashId}` });
    expect(supplier.status).toBe(200);
    const other = await api.login('connectivity');
    expect((await c.request('GET', '/device-type/', undefined, { 'environment-hash-id': `supplier:${other.environmentHashId}` })).status).toBe(404);
    const monitoring = await api.login('monitoring');
    expect(
      (await monitoring.request('GET', '/quantity/quantities', undefined, { 'environment-hash-id': `supplier:${monitoring.environmentHashId}` })).status,
    ).toBe(404);
    expect((await monitoring.request('GET', '/quantity/quantities')).status).toBe(200);
  });

  it('reads a bare query key (how the SDK sends a null filter) as no filter, on command find and the other finds', async () => {
    const own = await api.login('connectivity');
    const type = await addCommandType(own);
    const deviceTypeHashId = await addDeviceType(own, { commandTypeHashIds: [type] });
    const device = await own.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: 'bare-1',
      deviceTypeHashId,
      psk: '0011',
      pskIdentity: `bare-${own.environmentHashId}`,
    });
    const add = await own.request('POST', '/command/', {
      objectType: 'device',
      objectHashIds: [device.body.hashId],
      commandTypeHashId: type,
      fields: { interval: 5 },
      email: [],
    });
    expect(add.status).toBe(204);
    // the query string SDK 17.37.0 and 18.3.1 send for command find({})
    const sdkQuery = 'sortBy=hashId&descending=true&rowsPerPage=10&search=&pinGroupHashId&edgeHashId&gridHashId&mapLayers';
    const found = await own.request<{ rows: { command: { deviceHashId: string } }[] }>('GET', `/command/?${sdkQuery}`);
    expect(found.status).toBe(200);
    expect(found.body.rows.map((r) => r.command.deviceHashId)).toEqual([device.body.hashId]);
    for (const url of [
      '/device/?forCommandTypeHashId',
      '/device-type/?offset&updatedAfter',
      '/command-type/?search&offset',
      '/quantity/quantities?excludeHashIds',
      '/supplier-activity/?deviceHashId&offset',
      '/supplier-report-type/?offset',
      '/supplier-webhook/?updatedAfter',
      '/supplier-certificate/?offset',
    ]) {
      expect((await own.request('GET', url)).status, url).toBe(200);
    }
  });

  it('filters device find by forCommandTypeHashId (devices whose type takes that command type)', async () => {
    const own = await api.login('connectivity');
    const commandType = await addCommandType(own);
    const withIt = await addDeviceType(own, { commandTypeHashIds: [commandType] });
    const without = await addDeviceType(own);
    const add = async (type: string, id: string) =>
      (
        await own.request<{ hashId: string }>('POST', '/device/psk', {
          supplierDeviceIdentifier: id,
          deviceTypeHashId: type,
          psk: '0011',
          pskIdentity: `${id}-${own.environmentHashId}`,
        })
      ).body.hashId;
    const a = await add(withIt, 'for-a');
    await add(without, 'for-b');
    const rows = await findAll<{ device: { hashId: string } }>(own, `/device/?forCommandTypeHashId=${commandType}`);
    expect(rows.map((r) => r.device.hashId)).toEqual([a]);
    expect(await findAll(own, '/device/?forCommandTypeHashId')).toHaveLength(2);
  });

  it("adds a supplier certificate without a name (no SDK since 2020 sends one): named after the CSR subject's CN", async () => {
    const { csrPem } = await opensslCsr(tempDir(), 'unnamed', '/O=Acme/CN=Acme sensors CA');
    const identifier = 'function handle(args: { certificate: Certificate }) { return { deviceTypeHashId: "x", deviceIdentifier: "y" }; }';
    const added = await c.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', { csr: csrPem, identifier });
    expect(added.status).toBe(200);
    const got = await c.request<{ certificate: { name: string } }>('GET', `/supplier-certificate/${added.body.hashId}`);
    expect(got.body.certificate.name).toBe('Acme sensors CA');
    const rows = await findAll<{ certificate: { hashId: string; name: string } }>(c, '/supplier-certificate/');
    expect(rows.find((r) => r.certificate.hashId === added.body.hashId)?.certificate.name).toBe('Acme sensors CA');
  });

  it('adds a quantity with only a name (unit and defaultOrderOfMagnitude default as in the SDK) and keeps the unit limit', async () => {
    const added = await c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Count' });
    expect(added.status).toBe(200);
    const got = await c.request<{ quantity: Record<string, unknown> }>('GET', `/quantity/${added.body.hashId}`, undefined, at(8));
    expect(got.body.quantity).toMatchObject({ unit: null, defaultOrderOfMagnitude: 0 });
    // the SDK sends unit null (its default at 8)
    expect((await c.request('POST', '/quantity/', { name: 'Ratio', unit: null, defaultOrderOfMagnitude: 0 }, at(8))).status).toBe(200);
    const long = await c.request<{ key: string; message: string }>('POST', '/quantity/', { name: 'x', unit: 'abcdefghijk' });
    expect(long.status).toBe(400);
    expect(long.body.message).toContain('unit');
    // the SDK's link of device quantities: an empty list only, until monitoring environments link supplier quantities
    expect((await c.request('POST', '/quantity/', { name: 'Linked', deviceQuantityHashIds: [] })).status).toBe(200);
    const linked = await c.request<{ key: string; message: string }>('POST', '/quantity/', { name: 'Linked', deviceQuantityHashIds: ['abc'] });
    expect(linked.body.key).toBe('parameter_error');
    expect(linked.body.message).toContain('deviceQuantityHashIds');
    // and update back to no unit
    const withUnit = await c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Volt', unit: 'V' });
    expect((await c.request('POST', `/quantity/${withUnit.body.hashId}`, { unit: null })).status).toBe(204);
    expect((await c.request<{ quantity: { unit: unknown } }>('GET', `/quantity/${withUnit.body.hashId}`, undefined, at(8))).body.quantity.unit).toBeNull();
  });

  it('accepts the quantity find filters the SDK sends (includeDeleted, excludeHashIds)', async () => {
    const own = await api.login('connectivity');
    const keep = await own.request<{ hashId: string }>('POST', '/quantity/', { name: 'Keep', unit: 'V' });
    const gone = await own.request<{ hashId: string }>('POST', '/quantity/', { name: 'Gone', unit: 'V' });
    await own.request('DELETE', `/quantity/${gone.body.hashId}`);
    const hashIds = async (query: string) =>
      (await own.request<{ rows: { quantity: { hashId: string } }[] }>('GET', `/quantity/quantities?${query}`)).body.rows.map((r) => r.quantity.hashId).sort();
    expect(await hashIds('includeDeleted=false&deviceQuantityMode=false')).toEqual([keep.body.hashId]);
    expect(await hashIds('includeDeleted=true')).toEqual([keep.body.hashId, gone.body.hashId].sort());
    expect(await hashIds(`includeDeleted=true&excludeHashIds[0]=${keep.body.hashId}`)).toEqual([gone.body.hashId]);
  });
});

describe("the SDK's answers", () => {
  it('environment find rows carry userEnvironmentSettings, like environment get', async () => {
    const list = await c.request<{ rows: Record<string, unknown>[] }>('GET', '/environment/');
    expect(list.body.rows[0]).toEqual({
      environment: expect.objectContaining({ hashId: c.environmentHashId }),
      environmentRights: ['ENVIRONMENT_ADMIN'],
      userEnvironmentSettings: { notificationLevel: 0, defaultAnalyticsPanelHashId: null },
    });
  });

  it('supplier find / get show the connectivity environment', async () => {
    const got = await c.request<{ supplier: Record<string, unknown>; supplierRights: string[] }>('GET', `/supplier/${c.environmentHashId}`, undefined, at(5));
    expect(got.body).toEqual({
      supplier: { hashId: c.environmentHashId, name: 'test connectivity', enforceTwoFactorAuthentication: false, theme: null, createdAt: expect.any(String) },
      supplierRights: ['ENVIRONMENT_ADMIN'],
    });
    const find = await c.request<{ rows: { supplier: { hashId: string } }[] }>('GET', '/supplier/?rowsPerPage=10&search=');
    expect(find.body.rows.map((r) => r.supplier.hashId)).toEqual([c.environmentHashId]);
    const other = await api.login('connectivity');
    expect((await c.request('GET', `/supplier/${other.environmentHashId}`)).status).toBe(404);
  });

  it('quantity get carries reportTypes and linkedSupplierQuantities', async () => {
    const added = await c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: -3 });
    const got = await c.request<Record<string, unknown>>('GET', `/quantity/${added.body.hashId}`);
    expect(got.body).toEqual({ reportTypes: [], quantity: expect.objectContaining({ hashId: added.body.hashId, unit: 'V' }), linkedSupplierQuantities: [] });
  });

  it('answers names as plain text up to 6 and as translations from 7; a missing unit as "-" before 8', async () => {
    const q = await c.request<{ hashId: string }>('POST', '/quantity/', { name: translated }, at(8));
    const quantityAt = async (v: number) =>
      (await c.request<{ quantity: { name: unknown; unit: unknown } }>('GET', `/quantity/${q.body.hashId}`, undefined, at(v))).body.quantity;
    expect(await quantityAt(8)).toMatchObject({ name: translated, unit: null });
    expect(await quantityAt(7)).toMatchObject({ name: translated, unit: '-' });
    expect(await quantityAt(6)).toMatchObject({ name: 'Temperature', unit: '-' });
    expect(await quantityAt(4)).toMatchObject({ name: 'Temperature', unit: '-' });
    const rows = (await c.request<{ rows: { quantity: { hashId: string; name: unknown } }[] }>('GET', '/quantity/quantities?rowsPerPage=100', undefined, at(5)))
      .body.rows;
    expect(rows.find((r) => r.quantity.hashId === q.body.hashId)?.quantity.name).toBe('Temperature');

    const commandType = await addCommandType(c, { name: { en: 'Cycle', nl: 'Cyclus' } });
    const deviceType = await addDeviceType(c, {
      name: { en: 'Thermometer', nl: 'Thermometer NL' },
      commandTypeHashIds: [commandType],
      channels: [
        {
          name: { en: 'Red wire', nl: 'Rode draad' },
          defaultPinName: { en: 'Anode' },
          pinFieldConfigurations: [],
          charts: [{ title: { en: 'Chart' }, series: [{ quantityHashId: q.body.hashId }] }],
        },
      ],
    });
    const type6 = await c.request<{
      deviceType: Record<string, unknown>;
      commandTypes: { name: unknown }[];
      chartQuantities: { name: unknown; unit: unknown }[];
    }>('GET', `/device-type/${deviceType}`, undefined, at(6));
    expect(type6.body.deviceType).toMatchObject({
      name: 'Thermometer',
      channels: [{ name: 'Red wire', defaultPinName: 'Anode', charts: [{ title: 'Chart' }] }],
    });
    expect(type6.body.commandTypes.map((t) => t.name)).toEqual(['Cycle']);
    expect(type6.body.chartQuantities.map((t) => [t.name, t.unit])).toEqual([['Temperature', '-']]);
    const type7 = await c.request<{ deviceType: Record<string, unknown> }>('GET', `/device-type/${deviceType}`, undefined, at(7));
    expect(type7.body.deviceType).toMatchObject({
      name: { en: 'Thermometer', nl: 'Thermometer NL' },
      channels: [{ name: { en: 'Red wire', nl: 'Rode draad' } }],
    });
    expect((await c.request<{ commandType: { name: unknown } }>('GET', `/command-type/${commandType}`, undefined, at(5))).body.commandType.name).toBe('Cycle');
    expect((await c.request<{ commandType: { name: unknown } }>('GET', `/command-type/${commandType}`, undefined, at(7))).body.commandType.name).toEqual({
      en: 'Cycle',
      nl: 'Cyclus',
    });

    // nested: a device find row's deviceType, a command find row's commandType
    const device = await c.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: 'names-1',
      deviceTypeHashId: deviceType,
      psk: '0011',
      pskIdentity: `names-${c.environmentHashId}`,
    });
    const devices = await c.request<{ rows: { device: { hashId: string }; deviceType: { name: unknown } }[] }>(
      'GET',
      '/device/?rowsPerPage=100',
      undefined,
      at(5),
    );
    expect(devices.body.rows.find((r) => r.device.hashId === device.body.hashId)?.deviceType.name).toBe('Thermometer');
    await c.request('POST', '/command/', {
      objectType: 'device',
      objectHashIds: [device.body.hashId],
      commandTypeHashId: commandType,
      fields: { interval: 1 },
      email: [],
    });
    const commands = await c.request<{ rows: { commandType: { name: unknown } }[] }>('GET', `/command/?deviceHashId=${device.body.hashId}`, undefined, at(6));
    expect(commands.body.rows.map((r) => r.commandType.name)).toEqual(['Cycle']);
  });

  it('takes a supplier report type name as translations (as SDK 18.x sends it), plain text up to 6, and sorts by its English text', async () => {
    const own = await api.login('connectivity');
    const body = (name: unknown) => ({
      name,
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      parser: 'function handle(args: { payload: string }, exec: Exec) { return { generatedAt: new Date(), measurements: [] }; }',
    });
    const b = await own.request<{ hashId: string }>('POST', '/supplier-report-type/', body({ en: 'B report', nl: 'B rapport' }), at(8));
    expect(b.status).toBe(200);
    const a = await own.request<{ hashId: string }>('POST', '/supplier-report-type/', body('A report'), at(5));
    const get = async (v: number) =>
      (await own.request<{ reportType: { name: unknown } }>('GET', `/supplier-report-type/${b.body.hashId}`, undefined, at(v))).body.reportType.name;
    expect(await get(7)).toEqual({ en: 'B report', nl: 'B rapport' });
    expect(await get(6)).toBe('B report');
    const sorted = (
      await own.request<{ rows: { reportType: { hashId: string } }[] }>('GET', '/supplier-report-type/?sortBy=name&descending=false')
    ).body.rows.map((r) => r.reportType.hashId);
    expect(sorted).toEqual([a.body.hashId, b.body.hashId]);
    expect((await own.request('POST', `/supplier-report-type/${a.body.hashId}`, { name: { en: 'C report' } }, at(8))).status).toBe(204);
    expect(
      (await own.request<{ reportType: { name: unknown } }>('GET', `/supplier-report-type/${a.body.hashId}`, undefined, at(8))).body.reportType.name,
    ).toEqual({ en: 'C report' });
    expect((await own.request<{ rows: unknown[] }>('GET', '/supplier-report-type/?search=C%20rep')).body.rows).toHaveLength(1);
  });

  it('takes a pluralised translation (en: {singular, plural}), answered as its singular up to 6', async () => {
    const name = { en: { singular: 'Count', plural: 'Counts' }, nl: 'Aantal' };
    const added = await c.request<{ hashId: string }>('POST', '/quantity/', { name }, at(8));
    expect(added.status).toBe(200);
    expect((await c.request<{ quantity: { name: unknown } }>('GET', `/quantity/${added.body.hashId}`, undefined, at(8))).body.quantity.name).toEqual(name);
    expect((await c.request<{ quantity: { name: unknown } }>('GET', `/quantity/${added.body.hashId}`, undefined, at(6))).body.quantity.name).toBe('Count');
  });

  it('renames a quantity with a plain string (its name is stored as JSON)', async () => {
    const added = await c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Old', unit: 'V' });
    expect((await c.request('POST', `/quantity/${added.body.hashId}`, { name: 'New' })).status).toBe(204);
    expect((await c.request<{ quantity: { name: unknown } }>('GET', `/quantity/${added.body.hashId}`)).body.quantity.name).toBe('New');
  });

  it('answers a hashId field configuration (SDK 18.x only) as a string text field before 8, and charts on every channel', async () => {
    const picker = { key: 'place', name: 'Place', type: 'hashId', inputType: 'pinGroupHashId' };
    const type = await addDeviceType(c, { fieldConfigurations: [picker], channels: [{ name: 'Bare', pinFieldConfigurations: [picker] }] });
    const get = async (v: number) =>
      (
        await c.request<{ deviceType: { fieldConfigurations: unknown[]; channels: { pinFieldConfigurations: unknown[]; charts: unknown }[] } }>(
          'GET',
          `/device-type/${type}`,
          undefined,
          at(v),
        )
      ).body.deviceType;
    const v8 = await get(8);
    expect(v8.fieldConfigurations).toEqual([picker]);
    expect(v8.channels[0].charts).toEqual([]);
    const v5 = await get(5);
    expect(v5.fieldConfigurations).toEqual([{ ...picker, type: 'string', inputType: 'text' }]);
    expect(v5.channels[0].pinFieldConfigurations).toEqual([{ ...picker, type: 'string', inputType: 'text' }]);
    const rows = (
      await c.request<{ rows: { deviceType: { hashId: string; fieldConfigurations: { type: string }[] } }[] }>(
        'GET',
        '/device-type/?rowsPerPage=100',
        undefined,
        at(7),
      )
    ).body.rows;
    expect(rows.find((r) => r.deviceType.hashId === type)?.deviceType.fieldConfigurations[0].type).toBe('string');
  });

  it('answers field configuration texts up to 6 as the translations of those releases ({en, nl} both) or plain text', async () => {
    const configurations = [
      { key: 'a', name: { en: 'Depth', nl: 'Diepte' }, type: 'number', suffix: { en: 'm' } },
      {
        key: 'b',
        name: { en: { singular: 'Pipe', plural: 'Pipes' } },
        type: 'string',
        inputType: 'select',
        valueOptions: [
          { text: { en: 'Steel' }, value: 's' },
          { text: 'Iron', value: 'i' },
        ],
      },
    ];
    const type = await addCommandType(c, { fieldConfigurations: configurations });
    const at6 = (await c.request<{ commandType: { fieldConfigurations: unknown[] } }>('GET', `/command-type/${type}`, undefined, at(6))).body.commandType
      .fieldConfigurations;
    expect(at6).toEqual([
      { key: 'a', name: { en: 'Depth', nl: 'Diepte' }, type: 'number', suffix: 'm' },
      {
        key: 'b',
        name: 'Pipe',
        type: 'string',
        inputType: 'select',
        valueOptions: [
          { text: 'Steel', value: 's' },
          { text: 'Iron', value: 'i' },
        ],
      },
    ]);
    const at7 = (await c.request<{ commandType: { fieldConfigurations: unknown[] } }>('GET', `/command-type/${type}`, undefined, at(7))).body.commandType
      .fieldConfigurations;
    expect(at7).toEqual(configurations);
  });

  it("answers command deleteMulti refusals with failureReason (the SDK's member)", async () => {
    const multi = await c.request<Record<string, unknown>[]>('DELETE', '/command/', { hashIds: ['nosuchcommand'] });
    expect(multi.status).toBe(200);
    expect(multi.body).toEqual([{ hashId: 'nosuchcommand', deleted: false, failureReason: expect.stringContaining('not found') }]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addCommandType, addDeviceType, expectParameterError } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';
import { ok } from './linked-device.ts';

// suggestions find (GET /suggestions/): distinct values of one field containing the search text, in
// order, paged by the last value of the previous page.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const suggest = (c: ApiClient, query: string) => c.request<{ results: string[] }>('GET', `/suggestions/?${query}`);
const results = async (c: ApiClient, query: string) => ok(await suggest(c, query)).results;

describe('suggestions', () => {
  it('answers the distinct names containing the search, case-insensitively, in order', async () => {
    const c = await api.login('monitoring');
    for (const name of ['north pump', 'south pump', 'North pump', 'north pump', 'valve']) await addPinGroup(c, name);
    const found = await results(c, 'type=pinGroup.name&search=PUMP');
    expect([...found].sort()).toEqual(['North pump', 'north pump', 'south pump']);
    expect(found).toHaveLength(3);
    expect(await results(c, 'type=pinGroup.name&search=')).toHaveLength(4);
    // % and _ are plain characters in the search
    expect(await results(c, 'type=pinGroup.name&search=%25')).toEqual([]);
  });

  it('pages with rowsPerPage and offset, the last value of the previous page', async () => {
    const c = await api.login('monitoring');
    const pg = (await addPinGroup(c, 'station')).hashId;
    for (const name of ['p1', 'p2', 'p3', 'p4', 'p5']) await addPin(c, pg, name);
    const first = await results(c, 'type=pin.name&search=p&rowsPerPage=2');
    expect(first).toEqual(['p1', 'p2']);
    expect(await results(c, `type=pin.name&search=p&rowsPerPage=2&offset=${first[1]}`)).toEqual(['p3', 'p4']);
    expect(await results(c, 'type=pin.name&search=p&rowsPerPage=2&offset=p4')).toEqual(['p5']);
  });

  it('suggests each field of its type: quantity names in the locale and units, edges, grids, issue titles, users, the environment', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC', 'ISSUES', 'ENVIRONMENT_ADMIN']);
    ok(await c.request('POST', '/quantity/', { name: { en: 'Temperature', nl: 'Temperatuur' }, unit: 'K' }));
    ok(await c.request('POST', '/quantity/', { name: 'Count', unit: null }));
    ok(
      await c.request('POST', '/graph/edge', {
        geometry: {
          type: 'LineString',
          coordinates: [
            [5, 52],
            [5.1, 52.1],
          ],
        },
        fields: { id: 'main line' },
      }),
    );
    const pg = await addPinGroup(c, 'station');
    ok(await c.request('POST', '/graph/pin-group-grid', { fields: { id: 'route north' }, pinGroupHashIds: [pg.hashId] }));
    ok(await c.request('POST', '/graph/pin-grid', { fields: { id: 'pipes east' }, pinHashIds: [(await addPin(c, pg.hashId, 'p')).hashId] }));
    ok(await c.request('POST', '/issue/', { pinGroupHashId: pg.hashId, title: 'leaking valve', level: 1, pinHashIds: [], comment: '' }));
    expect(await results(c, 'type=quantity.name&search=temp')).toEqual(['Temperature']);
    expect(await results(c, 'type=quantity.name&search=temp&locale=nl')).toEqual(['Temperatuur']);
    expect(await results(c, 'type=quantity.unit&search=')).toEqual(['K']);
    expect(await results(c, 'type=edge.name&search=line')).toEqual(['main line']);
    expect(await results(c, 'type=pinGroupGrid.name&search=')).toEqual(['route north']);
    expect(await results(c, 'type=pinGrid.name&search=')).toEqual(['pipes east']);
    // SDK 17.37.0's type for both kinds
    expect(await results(c, 'type=grid.name&search=')).toEqual(['pipes east', 'route north']);
    expect(await results(c, 'type=issue.title&search=valve')).toEqual(['leaking valve']);
    expect(await results(c, 'type=user.name&search=')).toHaveLength(1);
    expect(await results(c, 'type=environment.name&search=')).toEqual(['test monitoring']);
    expect(await results(c, 'type=clientReportType.name&search=')).toEqual([]);
  });

  it('in a connectivity environment suggests its device type, command type and quantity names', async () => {
    const supplier = await api.login('connectivity');
    await addDeviceType(supplier, { name: 'logger v2' });
    await addCommandType(supplier, { name: 'reboot now' });
    ok(await supplier.request('POST', '/quantity/', { name: 'Pressure', unit: 'Pa' }));
    expect(await results(supplier, 'type=deviceType.name&search=logger')).toEqual(['logger v2']);
    expect(await results(supplier, 'type=commandType.name&search=reboot')).toEqual(['reboot now']);
    expect(await results(supplier, 'type=quantity.name&search=')).toEqual(['Pressure']);
    expect(await results(supplier, 'type=pinGroup.name&search=')).toEqual([]);
  });

  it('in a monitoring environment suggests the device type and quantity names of the devices it claimed', async () => {
    const supplier = await api.login('connectivity');
    const deviceTypeHashId = await addDeviceType(supplier, { name: 'claimed logger' });
    await addDeviceType(supplier, { name: 'unclaimed logger' });
    ok(await supplier.request('POST', '/quantity/', { name: 'Flow', unit: 'l' }));
    const device = ok(
      await supplier.request<{ hashId: string }>('POST', '/device/psk', {
        supplierDeviceIdentifier: `s-${Date.now()}`,
        deviceTypeHashId,
        psk: '00112233445566778899aabbccddeeff',
        pskIdentity: `sugg-${Date.now()}-${Math.random()}`,
      }),
    ).hashId;
    const token = ok(await supplier.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [device] }))
      .claimTokens[0].claimToken;
    const customer = await api.login('monitoring');
    expect(await results(customer, 'type=deviceType.name&search=logger')).toEqual([]);
    ok(await customer.request('POST', '/device/claim', { claimTokens: [token] }));
    expect(await results(customer, 'type=deviceType.name&search=logger')).toEqual(['claimed logger']);
    expect(await results(customer, 'type=quantity.name&search=')).toEqual(['Flow']);
  });

  it("never suggests another environment's values", async () => {
    const c = await api.login('monitoring');
    const stranger = await api.login('monitoring');
    await addPinGroup(stranger, 'secret site');
    ok(await stranger.request('POST', '/quantity/', { name: 'Secret quantity', unit: 'S' }));
    expect(await results(c, 'type=pinGroup.name&search=secret')).toEqual([]);
    expect(await results(c, 'type=quantity.name&search=secret')).toEqual([]);
    expect(await results(c, 'type=quantity.unit&search=')).toEqual([]);
  });

  it('refuses a missing or unknown type, a search over 255 characters, and rowsPerPage beyond 1..500, naming the field', async () => {
    const c = await api.login('monitoring');
    expectParameterError(await suggest(c, 'search=a'), 'type');
    expectParameterError(await suggest(c, 'type=device.name&search=a'), 'type', 'pinGroup.name');
    expectParameterError(await suggest(c, `type=pin.name&search=${'a'.repeat(256)}`), 'search', '255');
    expectParameterError(await suggest(c, 'type=pin.name&search=a&rowsPerPage=501'), 'rowsPerPage');
    expectParameterError(await suggest(c, 'type=pin.name&search=a&rowsPerPage=0'), 'rowsPerPage');
    expectParameterError(await suggest(c, 'type=pin.name&search=a&locale=de'), 'locale');
  });

  it('needs READ in a monitoring environment', async () => {
    const noRead = await api.login('monitoring', ['STATIC']);
    const r = await suggest(noRead, 'type=pin.name&search=');
    expect([r.status, (r.body as unknown as { key: string }).key]).toEqual([403, 'right_error']);
  });
});

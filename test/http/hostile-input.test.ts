import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { addDeviceType, EVENT_HANDLER, expectParameterError, field, type ErrorBody } from '../connectivity/fixtures.ts';

// Inputs an attacker or a careless supplier sends, each once answered 500 server_error.
// Each must be a 400 parameter_error naming the field, and the service keeps answering.

let api: TestApi;
let c: ApiClient;
beforeAll(async () => {
  api = await startTestApi();
  c = await api.login('connectivity');
});
afterAll(async () => {
  await api.close();
});

/** The service still answers an ordinary request. */
async function healthy(): Promise<void> {
  expect((await c.request('GET', '/quantity/quantities')).status).toBe(200);
}

const rawOffset = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const nested = (depth: number, leaf = '1') => '['.repeat(depth) + leaf + ']'.repeat(depth);

describe('text PostgreSQL cannot store', () => {
  it('refuses NUL characters in names, identifiers, pskIdentity and search, naming the field', async () => {
    expectParameterError(await c.request('POST', '/quantity/', { name: 'Temp\u0000', unit: 'K', defaultOrderOfMagnitude: 0 }), 'name', 'NUL');
    expectParameterError(await c.request('POST', '/quantity/', { name: { en: 'T', nl: 'x\u0000' }, unit: 'K', defaultOrderOfMagnitude: 0 }), 'name.nl', 'NUL');
    const deviceTypeHashId = await addDeviceType(c);
    expectParameterError(
      await c.request('POST', '/device/psk', { supplierDeviceIdentifier: 'dev\u0000', deviceTypeHashId, psk: 'abcd', pskIdentity: 'id-1' }),
      'supplierDeviceIdentifier',
      'NUL',
    );
    expectParameterError(
      await c.request('POST', '/device/psk', { supplierDeviceIdentifier: 'dev', deviceTypeHashId, psk: 'abcd', pskIdentity: 'id\u0000' }),
      'pskIdentity',
      'NUL',
    );
    expectParameterError(await c.request('GET', '/device/?search=a%00b'), 'search', 'NUL');
    expectParameterError(await c.request('POST', '/device-type/', { name: 'x', 'bad\u0000key': 1 }), 'member name', 'NUL');
    await healthy();
  });

  it('refuses lone UTF-16 surrogates in names, keeps well-formed pairs', async () => {
    expectParameterError(await c.request('POST', '/quantity/', { name: 'Temp\ud800', unit: 'K', defaultOrderOfMagnitude: 0 }), 'name', 'surrogate');
    expectParameterError(await c.request('POST', '/device-type/', { name: '\udc00', eventHandler: '' }), 'name', 'surrogate');
    const ok = await c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Temp \ud83c\udf21', unit: 'K', defaultOrderOfMagnitude: 0 });
    expect(ok.status).toBe(200);
    expect((await c.request<{ quantity: { name: string } }>('GET', `/quantity/${ok.body.hashId}`)).body.quantity.name).toBe('Temp \ud83c\udf21');
  });

  it('stores a quantity name given as a plain string on update', async () => {
    const add = await c.request<{ hashId: string }>('POST', '/quantity/', { name: { en: 'Voltage' }, unit: 'V', defaultOrderOfMagnitude: 0 });
    expect((await c.request('POST', `/quantity/${add.body.hashId}`, { name: 'Spanning' })).status).toBe(204);
    expect((await c.request<{ quantity: { name: string } }>('GET', `/quantity/${add.body.hashId}`)).body.quantity.name).toBe('Spanning');
  });
});

describe('find queries', () => {
  it('takes sortBy from the allow-list only: prototype members are refused', async () => {
    for (const sortBy of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      expectParameterError(await c.request('GET', `/device/?sortBy=${sortBy}`), 'sortBy', 'hashId');
      expectParameterError(await c.request('GET', `/supplier-activity/?sortBy=${sortBy}`), 'sortBy');
    }
    await healthy();
  });

  it('refuses offsets it did not make: wrong types, forged, altered, or of another sortBy', async () => {
    for (const forged of [['x', 1.5], ['x', 1e30], ['notadate', 1], ['u6kmjuwdgq', 10], 'garbage']) {
      const offset = typeof forged === 'string' ? forged : rawOffset(forged);
      expectParameterError(await c.request('GET', `/supplier-activity/?sortBy=createdAt&offset=${offset}`), 'offset');
      expectParameterError(await c.request('GET', `/device-type/?offset=${offset}`), 'offset');
    }
    for (let i = 0; i < 3; i++) await addDeviceType(c, { name: `paged ${i}` });
    type Page = { nextPageOffset: string; rows: { deviceType: { hashId: string } }[] };
    const first = await c.request<Page>('GET', '/device-type/?rowsPerPage=1&sortBy=name');
    const offset = first.body.nextPageOffset;
    // opaque: the row id inside is not readable
    expect(Buffer.from(offset, 'base64url').toString('latin1')).not.toMatch(/\[.*,\s*\d+\]/);
    const next = await c.request<Page>('GET', `/device-type/?rowsPerPage=1&sortBy=name&offset=${offset}`);
    expect(next.status).toBe(200);
    expect(next.body.rows[0].deviceType.hashId).not.toBe(first.body.rows[0].deviceType.hashId);
    const altered = Buffer.from(offset, 'base64url');
    altered[altered.length - 1] ^= 1;
    expectParameterError(await c.request('GET', `/device-type/?rowsPerPage=1&sortBy=name&offset=${altered.toString('base64url')}`), 'offset');
    expectParameterError(await c.request('GET', `/device-type/?rowsPerPage=1&sortBy=hashId&offset=${offset}`), 'offset');
    expectParameterError(await c.request('GET', `/command-type/?rowsPerPage=1&sortBy=name&offset=${offset}`), 'offset');
    await healthy();
  });

  it('refuses an updatedAfter of year 0000', async () => {
    expectParameterError(await c.request('GET', '/device-type/?updatedAfter=0000-01-01T00:00:00Z'), 'updatedAfter');
    expect((await c.request('GET', '/device-type/?updatedAfter=0001-01-01T00:00:00Z')).status).toBe(200);
  });
});

describe('paths', () => {
  it("answers a path parameter over 100 characters with a keyed 400, not the router's bare 414", async () => {
    const long = await c.request<ErrorBody>('GET', `/quantity/${'x'.repeat(200)}`);
    expectParameterError(long, 'path parameter', '100');
  });
});

describe('nesting', () => {
  it('refuses JSON nested deeper than JSON_MAX_DEPTH in device fields and a defaultValue, naming the limit', async () => {
    // a field whose configuration names no checked type takes any JSON value
    const deviceTypeHashId = await addDeviceType(c, { fieldConfigurations: [field('serial', 'json')] });
    const device = await c.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: 'deep-1',
      deviceTypeHashId,
      psk: 'abcd',
      pskIdentity: `deep-${Date.now()}`,
    });
    expect(device.status).toBe(200);
    const json = { 'content-type': 'application/json' };
    const deepFields = await c.request<ErrorBody>('POST', `/device/${device.body.hashId}`, `{"fields":{"serial":${nested(5000)}}}`, json);
    expectParameterError(deepFields, 'fields.serial', '32', 'JSON_MAX_DEPTH');
    const deepDefault = await c.request<ErrorBody>(
      'POST',
      '/device-type/',
      `{"name":"deep","eventHandler":${JSON.stringify(EVENT_HANDLER)},"fieldConfigurations":[{"key":"a","type":"string","defaultValue":${nested(5000)}}],"pinGroupFieldConfigurations":[],"channels":[],"commandTypeHashIds":[]}`,
      json,
    );
    expectParameterError(deepDefault, 'fieldConfigurations.0.defaultValue', 'nested deeper');
    // nesting within the limit is stored
    expect((await c.request('POST', `/device/${device.body.hashId}`, { fields: { serial: JSON.parse(nested(20)) } })).status).toBe(200);
    await healthy();
  });
});

describe('user regular expressions', () => {
  it('checks a field against (a+)+$ in linear time, and refuses patterns RE2 cannot compile, naming the field', async () => {
    const deviceTypeHashId = await addDeviceType(c, { fieldConfigurations: [field('serial', 'string', { regex: '(a+)+$' })] });
    const device = await c.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: 're-1',
      deviceTypeHashId,
      psk: 'abcd',
      pskIdentity: `re-${Date.now()}`,
    });
    // a backtracking engine takes ~2^40 steps on this: the test would time out
    const evil = await c.request('POST', `/device/${device.body.hashId}`, { fields: { serial: `${'a'.repeat(40)}!` } });
    expectParameterError(evil, 'fields.serial', 'does not match');
    expect((await c.request('POST', `/device/${device.body.hashId}`, { fields: { serial: 'aaaa' } })).status).toBe(200);
    await healthy();

    for (const regex of ['(?=a)b', '(a)\\1', '(?<!x)y']) {
      const refused = await c.request('POST', '/device-type/', { ...deviceTypeBodyWith(regex) });
      expectParameterError(refused, 'fieldConfigurations.0.regex', 'RE2');
    }
  });
});

const deviceTypeBodyWith = (regex: string) => ({
  name: 'regex',
  eventHandler: '',
  fieldConfigurations: [field('serial', 'string', { regex })],
  pinGroupFieldConfigurations: [],
  channels: [],
  commandTypeHashIds: [],
});

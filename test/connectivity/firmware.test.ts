import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { closeContext } from '../../src/context.ts';
import { addDeviceType, expectParameterError, findAll, type ErrorBody } from './fixtures.ts';

const LIMIT = 3000;
let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(await testContext({ FIRMWARE_MAX_BYTES: String(LIMIT) }));
});
afterAll(async () => {
  await api.close();
  await closeContext(api.ctx);
});

interface Firmware {
  hashId: string;
  deviceTypeHashId: string;
  version: string;
  size: number;
  sha256: string;
  createdAt: string;
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function addFirmware(c: ApiClient, deviceTypeHashId: string, version: string, image: Buffer = randomBytes(100)): Promise<string> {
  const r = await c.request<{ hashId: string }>('POST', '/firmware/', { deviceTypeHashId, version, data: image.toString('base64') });
  if (r.status !== 200) throw new Error(`firmware add failed: ${JSON.stringify(r.body)}`);
  return r.body.hashId;
}

describe('firmware images', () => {
  it('adds (SHA-256 computed), gets, finds by device type and deletes with the bytes', async () => {
    const c = await api.login('connectivity');
    const typeA = await addDeviceType(c);
    const typeB = await addDeviceType(c);
    const image = randomBytes(2500);
    const r = await c.request<{ hashId: string; size: number; sha256: string }>('POST', '/firmware/', {
      deviceTypeHashId: typeA,
      version: '1.0.0',
      data: image.toString('base64'),
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ hashId: expect.stringMatching(/^[a-z0-9]+$/), size: 2500, sha256: sha256(image) });
    const hashId = r.body.hashId;

    const get = await c.request<{ firmware: Firmware }>('GET', `/firmware/${hashId}`);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({
      firmware: { hashId, deviceTypeHashId: typeA, version: '1.0.0', size: 2500, sha256: sha256(image), createdAt: expect.any(String) },
    });
    const stored = await api.ctx.db.query<{ data: Buffer }>('SELECT data FROM firmware WHERE hash_id = $1', [hashId]);
    expect(stored.rows[0].data.equals(image)).toBe(true);

    const second = await addFirmware(c, typeA, '1.1.0');
    const other = await addFirmware(c, typeB, '1.0.0');
    const all = await findAll<{ firmware: Firmware }>(c, '/firmware/');
    expect(all.map((row) => row.firmware.hashId).sort()).toEqual([hashId, second, other].sort());
    const ofA = await findAll<{ firmware: Firmware }>(c, `/firmware/?deviceTypeHashId=${typeA}`);
    expect(ofA.map((row) => row.firmware.hashId).sort()).toEqual([hashId, second].sort());
    const byVersion = await c.request<{ rows: { firmware: Firmware }[] }>('GET', `/firmware/?deviceTypeHashId=${typeA}&sortBy=version&descending=false`);
    expect(byVersion.body.rows.map((row) => row.firmware.version)).toEqual(['1.0.0', '1.1.0']);
    const search = await c.request<{ rows: { firmware: Firmware }[] }>('GET', '/firmware/?search=1.1');
    expect(search.body.rows.map((row) => row.firmware.hashId)).toEqual([second]);

    expect((await c.request('DELETE', `/firmware/${hashId}`)).status).toBe(204);
    expect((await c.request('GET', `/firmware/${hashId}`)).status).toBe(404);
    expect((await c.request('DELETE', `/firmware/${hashId}`)).status).toBe(404);
    expect((await api.ctx.db.query('SELECT 1 FROM firmware WHERE hash_id = $1', [hashId])).rows).toEqual([]);
    // the version is free again once its image is deleted
    expect(await addFirmware(c, typeA, '1.0.0')).toMatch(/^[a-z0-9]+$/);
  });

  it('keeps versions unique per device type (409), not across types', async () => {
    const c = await api.login('connectivity');
    const typeA = await addDeviceType(c);
    const typeB = await addDeviceType(c);
    await addFirmware(c, typeA, 'v7');
    const again = await c.request<ErrorBody>('POST', '/firmware/', { deviceTypeHashId: typeA, version: 'v7', data: randomBytes(10).toString('base64') });
    expect(again.status).toBe(409);
    expect(again.body.key).toBe('conflict_error');
    expect(again.body.message).toContain('v7');
    expect(await addFirmware(c, typeB, 'v7')).toMatch(/^[a-z0-9]+$/);
  });

  it('enforces the limits, naming the field (FIRMWARE_MAX_BYTES on the decoded image)', async () => {
    const c = await api.login('connectivity');
    const type = await addDeviceType(c);
    const body = (o: Record<string, unknown>) => ({ deviceTypeHashId: type, version: '1', data: randomBytes(10).toString('base64'), ...o });
    // the limit itself is allowed, one byte more is not
    expect((await c.request('POST', '/firmware/', body({ data: randomBytes(LIMIT).toString('base64'), version: 'max' }))).status).toBe(200);
    expectParameterError(await c.request('POST', '/firmware/', body({ data: randomBytes(LIMIT + 1).toString('base64') })), 'data', String(LIMIT));
    // far beyond the route's body limit: 413, still naming data and the limit
    const huge = await c.request<ErrorBody>('POST', '/firmware/', body({ data: randomBytes(LIMIT + 70_000).toString('base64') }));
    expect(huge.status).toBe(413);
    expect(huge.body).toEqual({ key: 'parameter_error', message: `data is larger than the firmware size limit of ${LIMIT} bytes` });
    expectParameterError(await c.request('POST', '/firmware/', body({ data: '' })), 'data', 'empty');
    expectParameterError(await c.request('POST', '/firmware/', body({ data: 'not base64!' })), 'data', 'base64');
    expectParameterError(await c.request('POST', '/firmware/', body({ data: 'abc' })), 'data', 'base64');
    expectParameterError(await c.request('POST', '/firmware/', body({ version: '' })), 'version');
    expectParameterError(await c.request('POST', '/firmware/', body({ version: 'x'.repeat(101) })), 'version', '100');
    expectParameterError(await c.request('POST', '/firmware/', { deviceTypeHashId: type, data: 'AAAA' }), 'version', 'required');
    expectParameterError(await c.request('POST', '/firmware/', { version: '1', data: 'AAAA' }), 'deviceTypeHashId', 'required');
    expectParameterError(await c.request('POST', '/firmware/', body({ url: 'x' })), 'url', 'not allowed');
    expectParameterError(await c.request('GET', '/firmware/?rowsPerPage=101'), 'rowsPerPage', '100');
    const unknownType = await c.request<ErrorBody>('POST', '/firmware/', body({ deviceTypeHashId: 'nosuchtype' }));
    expect(unknownType.status).toBe(404);
    expect(unknownType.body.key).toBe('not_found_error');
    expect((await c.request<{ rows: unknown[] }>('GET', '/firmware/')).body.rows).toHaveLength(1);
  });

  it('is a connectivity operation: a monitoring environment gets right_error', async () => {
    const monitoring = await api.login('monitoring');
    expect((await monitoring.request<ErrorBody>('GET', '/firmware/')).body.key).toBe('right_error');
    expect((await monitoring.request('POST', '/firmware/', { deviceTypeHashId: 'abc', version: '1', data: 'AAAA' })).status).toBe(403);
  });

  it('keeps tenants apart: another environment sees, finds, deletes and targets nothing of it', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const typeA = await addDeviceType(a);
    const fw = await addFirmware(a, typeA, '2.0');
    expect((await b.request('GET', `/firmware/${fw}`)).status).toBe(404);
    expect((await b.request('DELETE', `/firmware/${fw}`)).status).toBe(404);
    expect((await b.request<{ rows: unknown[] }>('GET', '/firmware/')).body.rows).toEqual([]);
    expect((await b.request<{ rows: unknown[] }>('GET', `/firmware/?deviceTypeHashId=${typeA}`)).body.rows).toEqual([]);
    expect((await b.request('POST', '/firmware/', { deviceTypeHashId: typeA, version: '9', data: 'AAAA' })).status).toBe(404);
    // A's token with B's environment header is refused too
    expect((await a.request('GET', `/firmware/${fw}`, undefined, { 'environment-hash-id': b.environmentHashId })).status).toBe(404);
    expect((await a.request('GET', `/firmware/${fw}`)).status).toBe(200);
  });
});

describe("firmware images above the API's general body limit", () => {
  it('accepts an image whose base64 body exceeds 16 MiB when FIRMWARE_MAX_BYTES allows it', async () => {
    const big = await startTestApi(await testContext({ FIRMWARE_MAX_BYTES: String(13 * 1024 * 1024) }));
    try {
      const c = await big.login('connectivity');
      const type = await addDeviceType(c);
      const image = randomBytes(13 * 1024 * 1024);
      const r = await c.request<{ sha256: string; size: number }>('POST', '/firmware/', {
        deviceTypeHashId: type,
        version: 'big',
        data: image.toString('base64'),
      });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ size: image.length, sha256: sha256(image) });
    } finally {
      await big.close();
      await closeContext(big.ctx);
    }
  });
});

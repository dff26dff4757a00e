import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { findAll, expectParameterError, type ErrorBody } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface CounterKey {
  hashId: string;
  name: string;
}
const BASE = '/device-connectivity-counter-key/';

async function add(c: ApiClient, name = 'Messages received'): Promise<string> {
  const r = await c.request<{ hashId: string }>('POST', BASE, { name });
  expect(r.status).toBe(200);
  return r.body.hashId;
}

describe('device connectivity counter keys', () => {
  it('adds, gets, finds, updates and deletes', async () => {
    const c = await api.login('connectivity');
    const r = await c.request<{ hashId: string }>('POST', BASE, { name: 'Messages received' });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ hashId: expect.stringMatching(/^[a-z0-9]+$/) });
    const hashId = r.body.hashId;
    expect((await c.request('GET', `${BASE}${hashId}`)).body).toEqual({ hashId, name: 'Messages received' });
    expect((await c.request('GET', BASE)).body).toEqual({ nextPageOffset: null, rows: [{ hashId, name: 'Messages received' }] });

    const update = await c.request('POST', `${BASE}${hashId}`, { name: 'Uplinks' });
    expect(update.status).toBe(204);
    expect(update.body).toBeNull();
    expect((await c.request('GET', `${BASE}${hashId}`)).body).toEqual({ hashId, name: 'Uplinks' });
    expect((await c.request('POST', `${BASE}${hashId}`, {})).status).toBe(204);
    expect((await c.request('GET', `${BASE}${hashId}`)).body).toEqual({ hashId, name: 'Uplinks' });

    expect((await c.request('DELETE', `${BASE}${hashId}`)).status).toBe(204);
    expect((await c.request('GET', `${BASE}${hashId}`)).status).toBe(404);
    expect((await c.request('POST', `${BASE}${hashId}`, { name: 'x' })).status).toBe(404);
    expect((await c.request('DELETE', `${BASE}${hashId}`)).status).toBe(404);
    expect((await c.request<{ rows: unknown[] }>('GET', BASE)).body.rows).toEqual([]);
  });

  it('enforces the limits, naming the field', async () => {
    const c = await api.login('connectivity');
    await expectParameterError(await c.request('POST', BASE, {}), 'name', 'required');
    await expectParameterError(await c.request('POST', BASE, { name: '' }), 'name');
    await expectParameterError(await c.request('POST', BASE, { name: 'x'.repeat(256) }), 'name', '255');
    await expectParameterError(await c.request('POST', BASE, { name: 'a', extra: 1 }), 'extra', 'not allowed');
    expect((await c.request('POST', BASE, { name: 'x'.repeat(255) })).status).toBe(200);
    const hashId = await add(c);
    await expectParameterError(await c.request('POST', `${BASE}${hashId}`, { name: 'x'.repeat(256) }), 'name', '255');
    await expectParameterError(await c.request('POST', `${BASE}${hashId}`, { name: '' }), 'name');
    expect((await c.request<CounterKey>('GET', `${BASE}${hashId}`)).body.name).toBe('Messages received');
  });

  it('pages through every key once (keyset) and searches by name', async () => {
    const c = await api.login('connectivity');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await add(c, `Counter ${i}`));
    const rows = await findAll<CounterKey>(c, BASE);
    expect(rows.map((r) => r.hashId)).toEqual([...ids].sort().reverse());
    const byName = await findAll<CounterKey>(c, `${BASE}?sortBy=name&descending=false`, 3);
    expect(byName.map((r) => r.name)).toEqual(ids.map((_, i) => `Counter ${i}`));
    const search = await c.request<{ rows: CounterKey[] }>('GET', `${BASE}?search=nter%203`);
    expect(search.body.rows.map((r) => r.hashId)).toEqual([ids[3]]);
  });

  it("keeps environments apart: B cannot see or touch A's key", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const hashId = await add(a);
    expect((await b.request<ErrorBody>('GET', `${BASE}${hashId}`)).body).toMatchObject({ key: 'not_found_error' });
    expect((await b.request('POST', `${BASE}${hashId}`, { name: 'stolen' })).status).toBe(404);
    expect((await b.request('DELETE', `${BASE}${hashId}`)).status).toBe(404);
    expect((await b.request<{ rows: unknown[] }>('GET', BASE)).body.rows).toEqual([]);
    expect((await a.request('GET', `${BASE}${hashId}`)).body).toEqual({ hashId, name: 'Messages received' });
  });
});

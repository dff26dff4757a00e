import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeMachineAccount } from '../../src/accounts/store.ts';
import { startTestApi, type TestApi } from '../helpers.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

describe('REST core', () => {
  it('rejects a missing, non-integer, outdated or future Api-Version', async () => {
    const send = (v?: string) =>
      api.app.inject({ method: 'POST', url: '/authentication/machine-login', headers: v ? { 'api-version': v } : {}, payload: { assertion: 'x:y' } });
    expect((await send()).json()).toMatchObject({ key: 'api_version_error' });
    expect((await send('abc')).statusCode).toBe(400);
    const old = await send('3');
    expect(old.statusCode).toBe(403);
    expect(old.json().key).toBe('outdated_client_error');
    expect((await send('9')).json().key).toBe('api_version_error');
    for (const v of ['4', '5', '6', '7', '8']) expect((await send(v)).json().key).toBe('authentication_error');
  });

  it('logs a machine account in and refuses a wrong assertion', async () => {
    const client = await api.login('connectivity');
    expect(client.token.split('.')).toHaveLength(3);
    const bad = await api.app.inject({
      method: 'POST',
      url: '/authentication/machine-login',
      headers: { 'api-version': '5' },
      payload: { assertion: 'nope:nope' },
    });
    expect(bad.statusCode).toBe(401);
    expect(bad.json()).toEqual({ key: 'authentication_error', message: expect.any(String) });
  });

  it('returns the environment of the account and 404 for another one', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const own = await a.request('GET', `/environment/${a.environmentHashId}`);
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ environment: { hashId: a.environmentHashId }, environmentRights: ['ENVIRONMENT_ADMIN'] });
    expect((await a.request('GET', `/environment/${b.environmentHashId}`)).status).toBe(404);
    const list = await a.request<{ rows: unknown[] }>('GET', '/environment/');
    expect(list.body.rows).toHaveLength(1);
  });

  it('needs a token and the own Environment-Hash-Id', async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const noToken = await api.app.inject({
      method: 'GET',
      url: '/quantity/quantities',
      headers: { 'api-version': '5', 'environment-hash-id': a.environmentHashId },
    });
    expect(noToken.statusCode).toBe(401);
    const otherEnv = await a.request('GET', '/quantity/quantities', undefined, { 'environment-hash-id': b.environmentHashId });
    expect(otherEnv.status).toBe(404);
    const garbageToken = await a.request('GET', '/quantity/quantities', undefined, { authorization: 'Bearer abc.def.ghi' });
    expect(garbageToken.status).toBe(401);
  });

  it('stops accepting the tokens of a revoked account at once', async () => {
    const a = await api.login('connectivity');
    expect((await a.request('GET', '/quantity/quantities')).status).toBe(200);
    const payload = JSON.parse(Buffer.from(a.token.split('.')[1], 'base64url').toString()) as { sub: string };
    expect(await revokeMachineAccount(api.ctx.db, payload.sub)).toBe(true);
    const after = await a.request<{ key: string }>('GET', '/quantity/quantities');
    expect(after.status).toBe(401);
    expect(after.body.key).toBe('authentication_error');
  });

  it('parses bracket-notation queries as qs does', async () => {
    const a = await api.login('connectivity');
    const bad = await a.request<{ key: string; message: string }>('GET', '/quantity/quantities?rowsPerPage[0]=1&rowsPerPage[1]=2');
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('rowsPerPage');
  });

  it('checks rights per operation', async () => {
    const readOnly = await api.login('monitoring', ['READ']);
    const add = await readOnly.request('POST', '/quantity/', { name: 'T', unit: 'K', defaultOrderOfMagnitude: 0 });
    expect(add.status).toBe(403);
    expect(add.body).toMatchObject({ key: 'right_error' });
    expect((await readOnly.request('GET', '/quantity/quantities')).status).toBe(200);
  });

  it('serves an OpenAPI document and answers unknown paths with a keyed 404', async () => {
    const doc = await api.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(doc.json().paths['/authentication/machine-login']).toBeDefined();
    const missing = await api.app.inject({ method: 'GET', url: '/nothing-here', headers: { 'api-version': '5' } });
    expect(missing.json()).toMatchObject({ key: 'not_found_error' });
  });
});

describe('quantities', () => {
  it('adds, finds with keyset paging, gets, updates and deletes', async () => {
    const c = await api.login('connectivity');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await c.request<{ hashId: string }>('POST', '/quantity/', { name: `Quantity ${i}`, unit: 'V', defaultOrderOfMagnitude: -3 });
      expect(r.status).toBe(200);
      ids.push(r.body.hashId);
    }
    const seen: string[] = [];
    let offset: string | null = null;
    do {
      const q: string = `/quantity/quantities?rowsPerPage=2&sortBy=name&descending=false${offset ? `&offset=${offset}` : ''}`;
      const page = await c.request<{ nextPageOffset: string | null; rows: { quantity: { hashId: string; name: string } }[] }>('GET', q);
      expect(page.status).toBe(200);
      expect(page.body.rows.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.rows.map((r) => r.quantity.name));
      offset = page.body.nextPageOffset;
    } while (offset);
    expect(seen).toEqual(['Quantity 0', 'Quantity 1', 'Quantity 2', 'Quantity 3', 'Quantity 4']);
    const search = await c.request<{ rows: unknown[] }>('GET', '/quantity/quantities?search=tity%203');
    expect(search.body.rows).toHaveLength(1);

    expect((await c.request('POST', `/quantity/${ids[0]}`, { unit: 'mV' })).status).toBe(204);
    expect((await c.request<{ quantity: { unit: string } }>('GET', `/quantity/${ids[0]}`)).body.quantity.unit).toBe('mV');
    expect((await c.request('DELETE', `/quantity/${ids[0]}`)).status).toBe(204);
    expect((await c.request('GET', `/quantity/${ids[0]}`)).status).toBe(404);
  });

  it('names the field in a parameter_error', async () => {
    const c = await api.login('connectivity');
    const r = await c.request<{ key: string; message: string }>('POST', '/quantity/', { name: 'x', unit: 'V', defaultOrderOfMagnitude: 300 });
    expect(r.status).toBe(400);
    expect(r.body.key).toBe('parameter_error');
    expect(r.body.message).toContain('defaultOrderOfMagnitude');
    const missing = await c.request<{ message: string }>('POST', '/quantity/', { unit: 'V' });
    expect(missing.body.message).toContain('name');
    const long = await c.request<{ message: string }>('POST', '/quantity/', { name: 'x', unit: 'abcdefghijk' });
    expect(long.body.message).toContain('unit');
  });

  it("keeps environments apart: B cannot see or touch A's quantity", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const { body } = await a.request<{ hashId: string }>('POST', '/quantity/', { name: 'secret', unit: 'V', defaultOrderOfMagnitude: 0 });
    expect((await b.request('GET', `/quantity/${body.hashId}`)).status).toBe(404);
    expect((await b.request('POST', `/quantity/${body.hashId}`, { unit: 'x' })).status).toBe(404);
    expect((await b.request('DELETE', `/quantity/${body.hashId}`)).status).toBe(404);
    expect((await b.request<{ rows: unknown[] }>('GET', '/quantity/quantities')).body.rows).toHaveLength(0);
    expect((await a.request('GET', `/quantity/${body.hashId}`)).status).toBe(200);
  });
});

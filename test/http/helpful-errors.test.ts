import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';

// What a newcomer with curl meets: a request that is nearly right is either taken or answered with what to change.

let api: TestApi;
let c: ApiClient;
beforeAll(async () => {
  api = await startTestApi();
  c = await api.login('connectivity');
});
afterAll(async () => {
  await api.close();
});

const headers = () => ({ 'api-version': '5', authorization: `Bearer ${c.token}`, 'environment-hash-id': c.environmentHashId });

describe('requests that are nearly right', () => {
  it("a missing Environment-Hash-Id is named, with the account's own environment to send", async () => {
    const r = await api.app.inject({ method: 'GET', url: '/device-type/', headers: { 'api-version': '5', authorization: `Bearer ${c.token}` } });
    expect(r.statusCode).toBe(400);
    expect(r.json()).toEqual({ key: 'parameter_error', message: expect.stringContaining('Environment-Hash-Id is required') });
    expect(r.json().message).toContain(`supplier:${c.environmentHashId}`);
  });

  it('a DELETE or GET with Content-Type: application/json and no body is taken as having none', async () => {
    const added = await c.request<{ hashId: string }>('POST', '/quantity/', { name: 'Depth', unit: 'm' });
    expect(added.status).toBe(200);
    const get = await api.app.inject({ method: 'GET', url: `/quantity/${added.body.hashId}`, headers: { ...headers(), 'content-type': 'application/json' } });
    expect(get.statusCode, get.body).toBe(200);
    const del = await api.app.inject({
      method: 'DELETE',
      url: `/quantity/${added.body.hashId}`,
      headers: { ...headers(), 'content-type': 'application/json' },
    });
    expect(del.statusCode, del.body).toBe(204);
  });

  it("a path without the trailing slash of the SDK's path finds the same operation", async () => {
    const add = await api.app.inject({ method: 'POST', url: '/quantity', headers: headers(), payload: { name: 'Flow', unit: 'l/s' } });
    expect(add.statusCode, add.body).toBe(200);
    const find = await api.app.inject({ method: 'GET', url: '/quantity/quantities/', headers: headers() });
    expect(find.statusCode, find.body).toBe(200);
  });

  it('a body that is not declared JSON names the header to send', async () => {
    for (const [type, named] of [
      [undefined, 'none was sent'],
      ['application/x-www-form-urlencoded', 'not application/x-www-form-urlencoded'],
    ] as const) {
      const r = await api.app.inject({
        method: 'POST',
        url: '/quantity/',
        headers: { ...headers(), ...(type ? { 'content-type': type } : {}) },
        payload: '{"name":"Flow","unit":"l/s"}',
      });
      expect(r.statusCode).toBe(400);
      expect(r.json()).toEqual({ key: 'parameter_error', message: expect.stringContaining('Content-Type: application/json') });
      expect(r.json().message).toContain(named);
    }
  });

  it('a POST with a JSON Content-Type and no body says the body is missing, not how the parser failed', async () => {
    const r = await api.app.inject({ method: 'POST', url: '/quantity/', headers: { ...headers(), 'content-type': 'application/json' } });
    expect(r.statusCode).toBe(400);
    expect(r.json().key).toBe('parameter_error');
    expect(r.json().message).not.toContain('Body cannot be empty');
  });
});

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MONITORING_RIGHTS } from '../../src/accounts/store.ts';
import { closeContext } from '../../src/context.ts';
import { lookupPskCredential } from '../../src/connectivity/devices/credentials.ts';
import { addDeviceType, expectParameterError, type ErrorBody } from '../connectivity/fixtures.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';

// environment add and supplier add (any account; an admin machine account of the new environment in
// the answer; ENVIRONMENT_ADD_LIMIT per customer), supplier update and delete (ENVIRONMENT_ADMIN).

const LIMIT = 3;
let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(await testContext({ ENVIRONMENT_ADD_LIMIT: String(LIMIT) }));
});
afterAll(async () => {
  await api.close();
  await closeContext(api.ctx);
});

interface Added {
  machineAccount: { hashId: string; assertion: string };
}
interface EnvironmentAdded extends Added {
  environment: { hashId: string; type: string; name: string };
  environmentRights: string[];
  userEnvironmentSettings: unknown;
}
interface SupplierAdded extends Added {
  supplier: { hashId: string; name: string; enforceTwoFactorAuthentication: boolean; theme: unknown; createdAt: string };
  supplierRights: string[];
}

/** A client of the environment `hashId` logged in with `assertion`. */
async function loginWith(assertion: string, hashId: string): Promise<ApiClient> {
  const r = await api.app.inject({ method: 'POST', url: '/authentication/machine-login', headers: { 'api-version': '5' }, payload: { assertion } });
  expect(r.statusCode, r.body).toBe(200);
  const token = (r.json() as { jwt: string }).jwt;
  return {
    environmentHashId: hashId,
    token,
    async request(method, url, body, headers) {
      const res = await api.app.inject({
        method: method as 'GET',
        url,
        headers: { 'api-version': '5', 'environment-hash-id': hashId, authorization: `Bearer ${token}`, ...headers },
        ...(body === undefined ? {} : { payload: body as object }),
      });
      return { status: res.statusCode, body: (res.body ? res.json() : null) as never };
    },
  };
}

async function addEnvironment(c: ApiClient, name: string): Promise<EnvironmentAdded> {
  const r = await c.request<EnvironmentAdded>('POST', '/environment/', { name });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

async function addSupplier(c: ApiClient, name: string): Promise<SupplierAdded> {
  const r = await c.request<SupplierAdded>('POST', '/supplier/', { name });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

const THEME = {
  light: { primary: '#ff0000', secondary: '#00ff00', accent: '#0000ff', error: '#f00', warning: '#ff0', info: '#0ff', success: '#0f0', neutral: '#777777' },
};

describe('environment add', () => {
  it('makes a monitoring environment with an admin account the caller logs in with; the caller stays where it was', async () => {
    const c = await api.login('monitoring', ['READ']);
    const added = await addEnvironment(c, 'Pipelines north');
    expect(added).toMatchObject({
      environment: { type: 'monitoring', name: 'Pipelines north', locale: 'en', measurementsExpirationDays: 3650 },
      environmentRights: MONITORING_RIGHTS,
      userEnvironmentSettings: { notificationLevel: 0, defaultAnalyticsPanelHashId: null },
      machineAccount: { hashId: expect.any(String), assertion: expect.stringMatching(/^[a-z0-9]+:/) },
    });
    const hashId = added.environment.hashId;
    expect(hashId).not.toBe(c.environmentHashId);
    const admin = await loginWith(added.machineAccount.assertion, hashId);
    const get = await admin.request<{ environment: { hashId: string; name: string }; environmentRights: string[] }>('GET', `/environment/${hashId}`);
    expect([get.status, get.body.environment.name, get.body.environmentRights]).toEqual([200, 'Pipelines north', added.environmentRights]);
    expect((await admin.request('POST', '/graph/pin-group', { symbolKey: 's', geometry: null, fields: { id: 'p' } })).status).toBe(200);
    // the caller's token does not reach the new environment, nor the new one the caller's
    expect((await c.request('GET', '/graph/pin-group', undefined, { 'environment-hash-id': hashId })).status).toBe(404);
    expect((await admin.request('GET', '/graph/pin-group', undefined, { 'environment-hash-id': c.environmentHashId })).status).toBe(404);
    expect((await c.request<{ rows: unknown[] }>('GET', '/graph/pin-group')).body.rows).toEqual([]);
  });

  it('any account may add one (connectivity, or without rights); the name is 1 to 255 characters', async () => {
    const supplier = await api.login('connectivity');
    expect((await addEnvironment(supplier, 'from a supplier')).environment.type).toBe('monitoring');
    const c = await api.login('monitoring', ['READ']);
    await api.ctx.db.query("UPDATE machine_account SET rights = '{}' FROM environment e WHERE e.id = environment_id AND e.hash_id = $1", [c.environmentHashId]);
    expect((await c.request<ErrorBody>('GET', '/graph/pin-group')).status).toBe(403);
    expect((await addEnvironment(c, 'x'.repeat(255))).environment.name).toBe('x'.repeat(255));
    for (const body of [{}, { name: '' }, { name: 'x'.repeat(256) }]) expectParameterError(await c.request('POST', '/environment/', body), 'name');
    expect((await api.app.inject({ method: 'POST', url: '/environment/', headers: { 'api-version': '5' }, payload: { name: 'x' } })).statusCode).toBe(401);
  });

  it(`counts every add of one customer, through the environments it added too, against ENVIRONMENT_ADD_LIMIT (${LIMIT}); a delete frees a place`, async () => {
    const c = await api.login('monitoring', ['READ']);
    const first = await addEnvironment(c, 'one');
    const second = await addSupplier(c, 'two');
    const child = await loginWith(first.machineAccount.assertion, first.environment.hashId);
    await addEnvironment(child, 'three, from one');
    for (const [who, url] of [
      [c, '/environment/'],
      [c, '/supplier/'],
      [child, '/supplier/'],
    ] as const) {
      const r = await who.request<ErrorBody>('POST', url, { name: 'too many' });
      expectParameterError(r, 'ENVIRONMENT_ADD_LIMIT');
    }
    const { rows } = await api.ctx.db.query("SELECT count(*)::int AS n FROM environment WHERE name = 'too many'");
    expect(rows).toEqual([{ n: 0 }]);
    // another customer has its own count
    await addEnvironment(await api.login('monitoring', ['READ']), 'elsewhere');
    const supplier = await loginWith(second.machineAccount.assertion, second.supplier.hashId);
    expect((await supplier.request('DELETE', '/supplier/')).status).toBe(204);
    await addSupplier(c, 'four');
  });

  it('adds running at once never pass the limit', async () => {
    const c = await api.login('monitoring', ['READ']);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => c.request('POST', '/environment/', { name: `race ${i}` })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 400, 400, 400]);
  });
});

describe('supplier add, update and delete', () => {
  it('supplier add answers the supplier, its rights and an admin account; find and get show it to that account only', async () => {
    const c = await api.login('monitoring', ['READ']);
    const added = await addSupplier(c, 'Loggers Inc');
    expect(added).toMatchObject({
      supplier: { name: 'Loggers Inc', enforceTwoFactorAuthentication: false, theme: null, createdAt: expect.any(String) },
      supplierRights: ['ENVIRONMENT_ADMIN'],
    });
    const s = await loginWith(added.machineAccount.assertion, added.supplier.hashId);
    expect((await s.request<{ rows: { supplier: { hashId: string } }[] }>('GET', '/supplier/')).body.rows.map((r) => r.supplier.hashId)).toEqual([
      added.supplier.hashId,
    ]);
    expect((await c.request<{ rows: unknown[] }>('GET', '/supplier/')).body.rows).toEqual([]);
    expect((await c.request('GET', `/supplier/${added.supplier.hashId}`)).status).toBe(404);
    // it is a working connectivity environment
    await addDeviceType(s);
  });

  it('supplier update sets name, enforceTwoFactorAuthentication and theme (null clears it); ENVIRONMENT_ADMIN of a connectivity environment only', async () => {
    const s = await api.login('connectivity');
    expect((await s.request('PUT', '/supplier/', { name: 'Renamed', theme: THEME })).status).toBe(204);
    const get = async () => (await s.request<{ supplier: Record<string, unknown> }>('GET', `/supplier/${s.environmentHashId}`)).body.supplier;
    expect(await get()).toMatchObject({ name: 'Renamed', enforceTwoFactorAuthentication: false, theme: THEME });
    expect((await s.request('PUT', '/supplier/', { theme: null })).status).toBe(204);
    expect(await get()).toMatchObject({ name: 'Renamed', enforceTwoFactorAuthentication: false, theme: null });
    expectParameterError(await s.request('PUT', '/supplier/', { name: 'x'.repeat(256) }), 'name');
    expectParameterError(await s.request('PUT', '/supplier/', { theme: { light: { ...THEME.light, primary: 'red' } } }), 'primary');
    expectParameterError(await s.request('PUT', '/supplier/', { owner: 'me' }), 'owner');
    const monitoring = await api.login('monitoring');
    for (const [m, u] of [
      ['PUT', '/supplier/'],
      ['DELETE', '/supplier/'],
    ] as const) {
      const r = await monitoring.request<ErrorBody>(m, u, m === 'PUT' ? { name: 'x' } : undefined);
      expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    }
    const weak = await api.login('connectivity');
    await api.ctx.db.query("UPDATE machine_account SET rights = '{}' FROM environment e WHERE e.id = environment_id AND e.hash_id = $1", [
      weak.environmentHashId,
    ]);
    for (const [m, u] of [
      ['PUT', '/supplier/'],
      ['DELETE', '/supplier/'],
    ] as const) {
      const r = await weak.request<ErrorBody>(m, u, m === 'PUT' ? { name: 'x' } : undefined);
      expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    }
    // another supplier's hashId in the header: that supplier does not exist for this account
    for (const [m, u] of [
      ['PUT', '/supplier/'],
      ['DELETE', '/supplier/'],
    ] as const) {
      expect((await s.request(m, u, m === 'PUT' ? { name: 'stolen' } : undefined, { 'environment-hash-id': weak.environmentHashId })).status).toBe(404);
    }
    expect((await weak.request<{ supplier: { name: string } }>('GET', `/supplier/${weak.environmentHashId}`)).body.supplier.name).not.toBe('stolen');
    // s has no second factor: once the environment enforces one, s reaches only the routes that set one up
    // (the setting read back by an account with a second factor: test/accounts/two-factor.test.ts)
    expect((await s.request('PUT', '/supplier/', { enforceTwoFactorAuthentication: true })).status).toBe(204);
    const locked = await s.request<ErrorBody>('GET', `/supplier/${s.environmentHashId}`);
    expect([locked.status, locked.body.key]).toEqual([403, 'right_error']);
    expect(locked.body.message).toContain('two-factor authentication');
  });

  it('supplier delete is refused while a device is claimed; afterwards no account, device or token reaches it', async () => {
    const s = await api.login('connectivity');
    const type = await addDeviceType(s);
    const id = `sup-${randomBytes(5).toString('hex')}`;
    const device = (
      await s.request<{ hashId: string }>('POST', '/device/psk', {
        supplierDeviceIdentifier: id,
        deviceTypeHashId: type,
        psk: 'ab'.repeat(16),
        pskIdentity: id,
      })
    ).body.hashId;
    const token = (await s.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [device] })).body.claimTokens[0]
      .claimToken;
    const customer = await api.login('monitoring', ['READ', 'SENSORS']);
    expect((await customer.request('POST', '/device/claim', { claimTokens: [token] })).status).toBe(200);
    expect(await lookupPskCredential(api.ctx, id)).not.toBeNull();
    const refused = await s.request<ErrorBody>('DELETE', '/supplier/');
    expect([refused.status, refused.body.key]).toEqual([409, 'conflict_error']);
    expect(refused.body.message).toContain(device);
    expect((await s.request('GET', '/device/')).status).toBe(200);
    expect((await customer.request('POST', '/device/unclaim', { hashIds: [device] })).status).toBe(204);
    expect((await s.request('DELETE', '/supplier/')).status).toBe(204);
    const gone = await s.request<ErrorBody>('GET', '/device/');
    expect(gone.status).toBe(401);
    expect(await lookupPskCredential(api.ctx, id)).toBeNull();
  });
});

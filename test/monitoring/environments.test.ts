import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';
import { expectParameterError, type ErrorBody } from '../connectivity/fixtures.ts';

// Monitoring environments: the admin CLI makes them and their accounts; get / update / delete through the API.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const MAIN = path.resolve(import.meta.dirname, '../../src/main.ts');

interface Env {
  hashId: string;
  name: string;
  mapLayers: { key: string }[];
  fieldConfigurations: Record<string, { key: string }[]>;
  measurementsExpirationDays: number;
  locale: string;
  theme: unknown;
  boundingBox: unknown;
  enforceTwoFactorAuthentication: boolean;
  expiresAt: unknown;
  defaultGraphRange: string;
  createdAt: string;
}
interface GetAnswer {
  environment: Env;
  environmentRights: string[];
  userEnvironmentSettings: { notificationLevel: number | null; defaultAnalyticsPanelHashId: string | null };
}

const fc = (key: string) => [{ key, name: key, type: 'string' }];
const allConfigs = {
  pinGroups: fc('pgName'),
  edges: fc('edgeName'),
  grids: fc('gridName'),
  nodes: fc('nodeName'),
  pins: [{ existingKey: 'id', fieldConfiguration: { key: 'pinName', name: 'Pin', type: 'string' } }],
};
const colors = {
  primary: '#112233',
  secondary: '#445566',
  accent: '#778899',
  error: '#ff0000',
  warning: '#ffaa00',
  info: '#0000ff',
  success: '#00ff00',
  neutral: '#888',
};

describe('monitoring environments', () => {
  it('the admin CLI makes a monitoring environment and a machine account with any subset of the monitoring rights; it logs in', async () => {
    const run = (...args: string[]) => {
      const out = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'admin', ...args], {
        env: { PATH: process.env.PATH, SECRET_KEY: '11'.repeat(32), DATABASE_URL: process.env.DATABASE_URL },
        encoding: 'utf8',
      });
      return { status: out.status, json: out.stdout ? (JSON.parse(out.stdout) as Record<string, string>) : null, stderr: out.stderr };
    };
    const env = run('create-environment', '--type', 'monitoring', '--name', 'Water utility');
    expect(env.status).toBe(0);
    expect(env.json).toMatchObject({ type: 'monitoring', name: 'Water utility' });
    const account = run('create-machine-account', '--environment', env.json!.hashId, '--rights', 'READ,EXPORT,THRESHOLDS,AUDIT_TRAIL,ISSUES,USERS,REPORTS');
    expect(account.status).toBe(0);
    const login = await api.app.inject({
      method: 'POST',
      url: '/authentication/machine-login',
      headers: { 'api-version': '5' },
      payload: { assertion: account.json!.assertion },
    });
    expect(login.statusCode).toBe(200);
    expect(login.json().environmentRights).toEqual(['READ', 'EXPORT', 'THRESHOLDS', 'AUDIT_TRAIL', 'ISSUES', 'USERS', 'REPORTS']);
    expect(login.json().environment.type).toBe('monitoring');
    // a connectivity right is not a monitoring right
    expect(run('create-machine-account', '--environment', env.json!.hashId, '--rights', 'READ,FLY').status).not.toBe(0);
  });

  it('get answers every member with its default and userEnvironmentSettings', async () => {
    const c = await api.login('monitoring', ['READ']);
    const r = await c.request<GetAnswer>('GET', `/environment/${c.environmentHashId}`);
    expect(r.status).toBe(200);
    expect(r.body.userEnvironmentSettings).toEqual({ notificationLevel: 0, defaultAnalyticsPanelHashId: null });
    const e = r.body.environment;
    expect(e).toMatchObject({
      hashId: c.environmentHashId,
      boundingBox: null,
      locale: 'en',
      measurementsExpirationDays: 3650,
      enforceTwoFactorAuthentication: false,
      theme: null,
      expiresAt: null,
    });
    expect(e.mapLayers.length).toBeGreaterThanOrEqual(1);
    for (const kind of ['pinGroups', 'edges', 'grids', 'nodes', 'pins']) expect(e.fieldConfigurations[kind].length).toBeGreaterThanOrEqual(1);
    const found = await c.request<{ rows: GetAnswer[] }>('GET', '/environment/');
    expect(found.body.rows).toEqual([
      { environment: e, environmentRights: ['READ'], userEnvironmentSettings: { notificationLevel: 0, defaultAnalyticsPanelHashId: null } },
    ]);
  });

  it('update (PUT /environment/) stores every member and answers the environment; get shows it', async () => {
    const c = await api.login('monitoring', ['ENVIRONMENT_ADMIN', 'READ']);
    const body = {
      name: 'Gas network north',
      mapLayers: [
        { name: 'Base', key: 'base' },
        { name: 'Aerial', key: 'aerial', namedStyle: 'pdok-luchtfoto' },
      ],
      fieldConfigurations: allConfigs,
      locale: 'nl',
      defaultGraphRange: '30d',
      measurementsExpirationDays: 365,
      enforceTwoFactorAuthentication: false,
      theme: { light: colors, dark: colors },
      allowAutoCloseThresholdIssues: true,
      measurementsRetentionPolicyRange: null,
    };
    const r = await c.request<{ environment: Env }>('PUT', '/environment/', body);
    expect(r.status).toBe(200);
    expect(r.body.environment).toMatchObject({
      name: 'Gas network north',
      locale: 'nl',
      defaultGraphRange: '30d',
      measurementsExpirationDays: 365,
      enforceTwoFactorAuthentication: false,
      theme: { light: colors },
    });
    expect(r.body.environment.mapLayers.map((l) => l.key)).toEqual(['base', 'aerial']);
    expect(r.body.environment.fieldConfigurations.pins[0].key).toBe('pinName');
    const g = await c.request<GetAnswer>('GET', `/environment/${c.environmentHashId}`);
    expect(g.body.environment).toEqual(r.body.environment);
    // a partial update keeps the rest; theme null clears
    const p = await c.request<{ environment: Env }>('PUT', '/environment/', { theme: null });
    expect(p.body.environment).toMatchObject({ name: 'Gas network north', theme: null, measurementsExpirationDays: 365 });
    // enforcing two-factor authentication is stored too, and from then on holds for this account, which has no second factor
    const enforced = await c.request<{ environment: Env }>('PUT', '/environment/', { enforceTwoFactorAuthentication: true });
    expect(enforced.body.environment).toMatchObject({ enforceTwoFactorAuthentication: true });
    expect((await c.request('GET', `/environment/${c.environmentHashId}`)).status).toBe(403);
  });

  it('answers each limit with a parameter_error naming the field; nothing is half-applied', async () => {
    const c = await api.login('monitoring', ['ENVIRONMENT_ADMIN']);
    const put = (body: unknown) => c.request<ErrorBody>('PUT', '/environment/', body);
    expectParameterError(await put({ mapLayers: [] }), 'mapLayers');
    expectParameterError(await put({ mapLayers: Array.from({ length: 31 }, (_, i) => ({ name: `l${i}`, key: `l${i}` })) }), 'mapLayers', '30');
    expectParameterError(
      await put({
        mapLayers: [
          { name: 'a', key: 'x' },
          { name: 'b', key: 'x' },
        ],
      }),
      'mapLayers[1].key',
    );
    expectParameterError(await put({ measurementsExpirationDays: 0 }), 'measurementsExpirationDays');
    expectParameterError(await put({ measurementsExpirationDays: 10000 }), 'measurementsExpirationDays', '9999');
    expectParameterError(await put({ measurementsExpirationDays: 1.5 }), 'measurementsExpirationDays');
    expectParameterError(await put({ fieldConfigurations: { ...allConfigs, pins: [] } }), 'fieldConfigurations.pins');
    expectParameterError(await put({ fieldConfigurations: { ...allConfigs, edges: [...fc('a'), ...fc('a')] } }), 'fieldConfigurations.edges', 'twice');
    expectParameterError(await put({ locale: 'de' }), 'locale');
    expectParameterError(await put({ theme: { light: { ...colors, primary: 'red' } } }), 'theme.light.primary');
    expectParameterError(await put({ name: 'x'.repeat(256) }), 'name');
    expectParameterError(await put({ colour: 'blue' }), 'colour');
    expectParameterError(await put({ name: 'kept?', measurementsExpirationDays: 0 }), 'measurementsExpirationDays');
    const g = await c.request<GetAnswer>('GET', `/environment/${c.environmentHashId}`);
    expect(g.body.environment.name).not.toBe('kept?');
  });

  it('delete: afterwards no account reaches the environment, by token or by login', async () => {
    const admin = await api.login('monitoring', ['ENVIRONMENT_ADMIN', 'READ']);
    const hashId = admin.environmentHashId;
    const row = (await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [hashId])).rows[0];
    const { createMachineAccount } = await import('../../src/accounts/store.ts');
    const reader = await createMachineAccount(api.ctx.db, hashId, ['READ']);
    expect((await admin.request('DELETE', '/environment/')).status).toBe(204);
    expect((await admin.request<ErrorBody>('GET', `/environment/${hashId}`)).status).toBe(401);
    expect((await admin.request<ErrorBody>('GET', '/graph/pin-group')).status).toBe(401);
    const login = await api.app.inject({
      method: 'POST',
      url: '/authentication/machine-login',
      headers: { 'api-version': '5' },
      payload: { assertion: reader.assertion },
    });
    expect(login.statusCode).toBe(401);
    expect(row.id).toBeGreaterThan(0);
  });

  it('update and delete are monitoring operations needing ENVIRONMENT_ADMIN', async () => {
    const reader = await api.login('monitoring', ['READ', 'STATIC', 'SENSORS']);
    expect((await reader.request<ErrorBody>('PUT', '/environment/', { name: 'x' })).body.key).toBe('right_error');
    expect((await reader.request<ErrorBody>('DELETE', '/environment/')).body.key).toBe('right_error');
    const supplier = await api.login('connectivity');
    expect((await supplier.request<ErrorBody>('PUT', '/environment/', { name: 'x' })).status).toBe(403);
    expect((await supplier.request<ErrorBody>('DELETE', '/environment/')).status).toBe(403);
    expect((await supplier.request<GetAnswer>('GET', `/environment/${supplier.environmentHashId}`)).status).toBe(200);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { admin as adminCli, MAIN } from '../support/service-process.ts';
import { expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface User {
  hashId: string;
  email: string | null;
  name: string;
  timezone: string;
  locale: string;
  phone: null;
  company: null;
  rights: string[];
  twoFactorAuthenticationEnabled: boolean;
}
interface UserAnswer {
  user: User;
  rights: string[];
  userEnvironmentSettings: { notificationLevel: number | null; defaultAnalyticsPanelHashId: string | null };
}

async function machineLogin(assertion: string): Promise<{ status: number; jwt: string; user: User }> {
  const r = await api.app.inject({ method: 'POST', url: '/authentication/machine-login', headers: { 'api-version': '8' }, payload: { assertion } });
  const body = r.json() as { jwt: string; user: User };
  return { status: r.statusCode, jwt: body.jwt, user: body.user };
}

/** A second machine account of `client`'s environment holding `rights`, logged in. */
async function colleague(client: ApiClient, rights: string[], email?: string): Promise<ApiClient & { hashId: string; assertion: string }> {
  const made = await createMachineAccount(api.ctx.db, client.environmentHashId, rights, 'colleague', email);
  const { jwt } = await machineLogin(made.assertion);
  return {
    hashId: made.hashId,
    assertion: made.assertion,
    environmentHashId: client.environmentHashId,
    token: jwt,
    async request(method, url, body, headers) {
      const r = await api.app.inject({
        method: method as 'GET',
        url,
        headers: { 'api-version': '5', 'environment-hash-id': client.environmentHashId, authorization: `Bearer ${jwt}`, ...headers },
        ...(body === undefined ? {} : { payload: body as object }),
      });
      return { status: r.statusCode, body: (r.body ? r.json() : null) as never };
    },
  };
}

const admin = () => api.login('monitoring', ['READ', 'USERS', 'ENVIRONMENT_ADMIN']);
let counter = 0;
const person = (more: Record<string, unknown> = {}) => ({ name: 'Ada Lovelace', email: `ada${++counter}@example.com`, rights: ['READ'], ...more });

describe('users of an environment', () => {
  it('adds a person with their address, language, zone and notification level; get answers the SDK user at Api-Version 5 and 8', async () => {
    const c = await admin();
    const add = await c.request<{ hashId: string }>(
      'POST',
      '/user/',
      person({ email: 'ada@example.com', locale: 'nl', timezone: 'Europe/Amsterdam', userEnvironmentSettings: { notificationLevel: 2 } }),
    );
    expect(add.status).toBe(200);
    const expected = {
      user: {
        hashId: add.body.hashId,
        email: 'ada@example.com',
        name: 'Ada Lovelace',
        timezone: 'Europe/Amsterdam',
        locale: 'nl',
        phone: null,
        company: null,
        rights: ['READ'],
        twoFactorAuthenticationEnabled: false,
      },
      rights: ['READ'],
      userEnvironmentSettings: { notificationLevel: 2, defaultAnalyticsPanelHashId: null },
    };
    expect((await c.request('GET', `/user/${add.body.hashId}`)).body).toEqual(expected);
    expect((await c.request('GET', `/user/${add.body.hashId}`, undefined, { 'api-version': '8' })).body).toEqual(expected);
  });

  it('finds the machine accounts beside the people, by name unless sorted otherwise, searching names and addresses', async () => {
    const c = await admin();
    const mailed = await colleague(c, ['READ'], 'ops@example.com');
    await c.request('POST', '/user/', person({ name: 'Bea', email: 'bea@example.com' }));
    await c.request('POST', '/user/', person({ name: 'Cas', email: 'cas@example.com' }));
    const rows = await findAll<UserAnswer>(c, '/user/?descending=false');
    expect(rows.map((r) => [r.user.name, r.user.email])).toEqual([
      ['Bea', 'bea@example.com'],
      ['Cas', 'cas@example.com'],
      ['colleague', 'ops@example.com'],
      ['machine account', null],
    ]);
    expect(rows.find((r) => r.user.hashId === mailed.hashId)?.userEnvironmentSettings).toEqual({ notificationLevel: 0, defaultAnalyticsPanelHashId: null });
    const byEmail = await findAll<UserAnswer>(c, '/user/?sortBy=email&descending=true');
    expect(byEmail.map((r) => r.user.email)).toEqual(['ops@example.com', 'cas@example.com', 'bea@example.com', null]);
    const search = await findAll<UserAnswer>(c, '/user/?search=OPS@');
    expect(search.map((r) => r.user.hashId)).toEqual([mailed.hashId]);
  });

  it('shows a machine account the operator gave an address with that address, in its login too', async () => {
    const c = await admin();
    const mailed = await colleague(c, ['READ'], 'robot@example.com');
    expect((await machineLogin(mailed.assertion)).user.email).toBe('robot@example.com');
    expect((await c.request<UserAnswer>('GET', `/user/${mailed.hashId}`)).body.user.email).toBe('robot@example.com');
  });

  it('the admin CLI gives a machine account an address (--email) and refuses one that is not', async () => {
    const env = { DATABASE_URL: process.env.DATABASE_URL!, DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'gridgate-cli-')) };
    const environment = await createEnvironment(api.ctx.db, 'monitoring', 'CLI');
    const made = adminCli(env, 'create-machine-account', '--environment', environment.hashId, '--rights', 'READ', '--email', 'cli@example.com');
    expect((await machineLogin(made.assertion)).user.email).toBe('cli@example.com');
    const bad = spawnSync(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        MAIN,
        'admin',
        'create-machine-account',
        '--environment',
        environment.hashId,
        '--rights',
        'READ',
        '--email',
        'nobody',
      ],
      { env: { PATH: process.env.PATH, SECRET_KEY: '33'.repeat(32), ...env }, encoding: 'utf8', timeout: 60_000 },
    );
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain('email');
    // two CLI processes, each loading the service's TypeScript: seconds apiece on a loaded machine
  }, 150_000);

  it("updates rights (the SDK's update), name, address, zone and notification level; members left out keep their value", async () => {
    const c = await admin();
    const { hashId } = (await c.request<{ hashId: string }>('POST', '/user/', person({ timezone: 'Europe/London' }))).body;
    expect((await c.request('POST', `/user/${hashId}`, { rights: ['READ', 'ISSUES'] })).status).toBe(204);
    expect(
      (await c.request('POST', `/user/${hashId}`, { name: 'Ada King', email: 'countess@example.com', userEnvironmentSettings: { notificationLevel: null } }))
        .status,
    ).toBe(204);
    const got = (await c.request<UserAnswer>('GET', `/user/${hashId}`)).body;
    expect(got.user).toMatchObject({ name: 'Ada King', email: 'countess@example.com', timezone: 'Europe/London', rights: ['READ', 'ISSUES'] });
    expect(got.rights).toEqual(['READ', 'ISSUES']);
    expect(got.userEnvironmentSettings.notificationLevel).toBeNull();
  });

  it("clears a machine account's address with email null; a person keeps one (parameter_error naming email)", async () => {
    const c = await admin();
    const mailed = await colleague(c, ['READ'], 'robot@example.com');
    expect((await c.request('POST', `/user/${mailed.hashId}`, { email: null })).status).toBe(204);
    expect((await c.request<UserAnswer>('GET', `/user/${mailed.hashId}`)).body.user.email).toBeNull();
    const { hashId } = (await c.request<{ hashId: string }>('POST', '/user/', person({ email: 'kept@example.com' }))).body;
    expectParameterError(await c.request('POST', `/user/${hashId}`, { email: null }), 'email');
    expect((await c.request<UserAnswer>('GET', `/user/${hashId}`)).body.user.email).toBe('kept@example.com');
  });

  it('deletes a person: gone from get and find', async () => {
    const c = await admin();
    const { hashId } = (await c.request<{ hashId: string }>('POST', '/user/', person())).body;
    expect((await c.request('DELETE', `/user/${hashId}`)).status).toBe(204);
    expect((await c.request<ErrorBody>('GET', `/user/${hashId}`)).body.key).toBe('not_found_error');
    expect((await findAll<UserAnswer>(c, '/user/')).map((r) => r.user.hashId)).not.toContain(hashId);
    expect((await c.request('DELETE', `/user/${hashId}`)).status).toBe(404);
  });

  it('deleting a machine account revokes it: its token stops working', async () => {
    const c = await admin();
    const other = await colleague(c, ['READ']);
    expect((await other.request('GET', '/user/')).status).toBe(403);
    expect((await c.request('DELETE', `/user/${other.hashId}`)).status).toBe(204);
    expect((await other.request<ErrorBody>('GET', '/settings/')).body.key).toBe('authentication_error');
    expect((await machineLogin(other.assertion)).status).toBe(401);
  });

  it('refuses an account deleting itself (it would lock its caller out)', async () => {
    const c = await admin();
    const self = (await c.request<{ user: User }>('GET', '/settings/')).body.user.hashId;
    const r = await c.request<ErrorBody>('DELETE', `/user/${self}`);
    expect(r.status).toBe(409);
    expect(r.body.key).toBe('conflict_error');
    expect((await c.request('GET', '/user/')).status).toBe(200);
  });

  it('a person never logs in: no assertion works for them', async () => {
    const c = await admin();
    const { hashId } = (await c.request<{ hashId: string }>('POST', '/user/', person())).body;
    expect((await machineLogin(`${hashId}:`)).status).toBe(401);
    expect((await machineLogin(`${hashId}:anything`)).status).toBe(401);
  });

  it('refuses a second user with the same address in one environment (409), not in another', async () => {
    const c = await admin();
    expect((await c.request('POST', '/user/', person({ email: 'same@example.com' }))).status).toBe(200);
    const again = await c.request<ErrorBody>('POST', '/user/', person({ email: 'SAME@example.com' }));
    expect(again.status).toBe(409);
    expect(again.body.message).toContain('email');
    expect((await (await admin()).request('POST', '/user/', person({ email: 'same@example.com' }))).status).toBe(200);
  });

  it('answers bad input with a parameter_error naming the field', async () => {
    const c = await admin();
    expectParameterError(await c.request('POST', '/user/', person({ email: 'not an address' })), 'email');
    expectParameterError(await c.request('POST', '/user/', person({ rights: ['READ', 'GOD'] })), 'rights', 'GOD');
    expectParameterError(await c.request('POST', '/user/', person({ rights: [] })), 'rights');
    expectParameterError(await c.request('POST', '/user/', person({ timezone: 'Mars/Olympus' })), 'timezone');
    expectParameterError(await c.request('POST', '/user/', person({ name: 'x'.repeat(256) })), 'name');
    expectParameterError(await c.request('POST', '/user/', person({ locale: 'fr' })), 'locale');
    expectParameterError(await c.request('POST', '/user/', person({ userEnvironmentSettings: { notificationLevel: 3 } })), 'notificationLevel');
    expect(await findAll<UserAnswer>(c, '/user/')).toHaveLength(1);
  });

  it('a USERS account grants only rights it holds and leaves environment admins alone', async () => {
    const c = await admin();
    const manager = await colleague(c, ['READ', 'USERS']);
    const grab = await manager.request<ErrorBody>('POST', '/user/', person({ rights: ['READ', 'ENVIRONMENT_ADMIN'] }));
    expect(grab.status).toBe(403);
    expect(grab.body.key).toBe('right_error');
    expect((await manager.request('POST', `/user/${manager.hashId}`, { rights: ['READ', 'USERS', 'ENVIRONMENT_ADMIN'] })).status).toBe(403);
    const adminHashId = (await c.request<{ user: User }>('GET', '/settings/')).body.user.hashId;
    expect((await manager.request('POST', `/user/${adminHashId}`, { rights: ['READ'] })).status).toBe(403);
    expect((await manager.request('DELETE', `/user/${adminHashId}`)).status).toBe(403);
    expect((await manager.request('POST', '/user/', person({ rights: ['READ'] }))).status).toBe(200);
  });

  it('serves a connectivity environment to ENVIRONMENT_ADMIN, with its rights', async () => {
    const c = await api.login('connectivity');
    expectParameterError(await c.request('POST', '/user/', person({ rights: ['READ'] })), 'rights', 'ENVIRONMENT_ADMIN');
    const { hashId } = (await c.request<{ hashId: string }>('POST', '/user/', person({ rights: ['ENVIRONMENT_ADMIN'] }))).body;
    expect((await c.request<UserAnswer>('GET', `/user/${hashId}`)).body.rights).toEqual(['ENVIRONMENT_ADMIN']);
  });

  it('keeps tenants apart: an account of another environment neither sees nor touches these users', async () => {
    const a = await admin();
    const b = await admin();
    const { hashId } = (await a.request<{ hashId: string }>('POST', '/user/', person())).body;
    for (const [method, body] of [
      ['GET', undefined],
      ['POST', { rights: ['READ'] }],
      ['DELETE', undefined],
    ] as const) {
      const r = await b.request<ErrorBody>(method, `/user/${hashId}`, body);
      expect({ method, status: r.status, key: r.body.key }).toEqual({ method, status: 404, key: 'not_found_error' });
    }
    expect((await findAll<UserAnswer>(b, '/user/')).map((r) => r.user.hashId)).not.toContain(hashId);
    expect((await b.request('GET', '/user/', undefined, { 'environment-hash-id': a.environmentHashId })).status).toBe(404);
    expect((await a.request<UserAnswer>('GET', `/user/${hashId}`)).body.rights).toEqual(['READ']);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import { createEnvironment, createMachineAccount, loginSecretChecks } from '../../src/accounts/store.ts';
import { startTestApi, testContext, type TestApi } from '../helpers.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(await testContext({ LOGIN_FAILURES_PER_ADDRESS: '5', LOGIN_FAILURES_PER_ACCOUNT: '3', LOGIN_FAILURE_WINDOW_SECONDS: '60' }));
});
afterAll(async () => {
  await api.close();
  await closeContext(api.ctx);
});

function login(assertion: unknown, remoteAddress = '127.0.0.1') {
  return api.app.inject({ method: 'POST', url: '/authentication/machine-login', headers: { 'api-version': '5' }, payload: { assertion }, remoteAddress });
}

async function account(): Promise<{ hashId: string; assertion: string }> {
  const env = await createEnvironment(api.ctx.db, 'connectivity', 'login test');
  return createMachineAccount(api.ctx.db, env.hashId, ['ENVIRONMENT_ADMIN']);
}

const checks = async () => (await loginSecretChecks.get()).values[0]?.value ?? 0;

describe('machine login', () => {
  it('answers an assertion that is not a string, or not valid text, with 400 parameter_error naming it', async () => {
    for (const assertion of [5, true, ['a:b'], { a: 1 }, 'abc\u0000:def', 'abc:\ud800']) {
      const res = await login(assertion, '10.0.0.1');
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ key: 'parameter_error', message: expect.stringContaining('assertion') });
    }
  });

  it('runs the slow hash whether or not the account exists, so both answers take as long', async () => {
    const a = await account();
    const before = await checks();
    expect((await login(`${a.hashId}:wrong`, '10.0.0.2')).statusCode).toBe(401);
    expect(await checks()).toBe(before + 1);
    expect((await login('nosuchaccount:wrong', '10.0.0.2')).statusCode).toBe(401);
    expect(await checks()).toBe(before + 2);
    expect((await login('no-separator', '10.0.0.2')).statusCode).toBe(401);
    expect(await checks()).toBe(before + 3);
  });

  it('limits failed logins per account, from any address, with 429 rate_limit_error and Retry-After', async () => {
    const a = await account();
    for (let i = 0; i < 3; i++) expect((await login(`${a.hashId}:wrong`, `10.1.0.${i}`)).statusCode).toBe(401);
    const limited = await login(`${a.hashId}:wrong`, '10.1.0.9');
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ key: 'rate_limit_error', message: expect.stringContaining('account') });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // the right secret too: guessing stops for the window
    expect((await login(a.assertion, '10.1.0.10')).statusCode).toBe(429);
    // another account is not affected
    expect((await login((await account()).assertion, '10.1.0.11')).statusCode).toBe(200);
  });

  it('limits failed logins per source address, across accounts; successful logins do not count', async () => {
    const good = await account();
    for (let i = 0; i < 10; i++) expect((await login(good.assertion, '10.2.0.1')).statusCode).toBe(200);
    for (let i = 0; i < 5; i++) expect((await login(`guess${i}:wrong`, '10.2.0.1')).statusCode).toBe(401);
    const limited = await login('guess9:wrong', '10.2.0.1');
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ key: 'rate_limit_error', message: expect.stringContaining('address') });
    expect((await login(good.assertion, '10.2.0.2')).statusCode).toBe(200);
  });
});

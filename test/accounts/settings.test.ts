import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startMailWorker, type MailWorker } from '../../src/mail/queue.ts';
import { expectParameterError, type ErrorBody } from '../connectivity/fixtures.ts';
import { startTestApi, testContext, type TestApi } from '../helpers.ts';
import { until } from '../support/until.ts';
import { dropMailQueue, TestSmtp } from '../notifications/smtp.ts';

// settings update (the caller's own user) and settings feedback (stored, and mailed to the operator).

const smtp = new TestSmtp();
const OPERATOR = 'operator@example.com';
let ctx: AppContext;
let api: TestApi;
let worker: MailWorker | null;

beforeAll(async () => {
  await smtp.start();
  ctx = await testContext({ SMTP_URL: smtp.url(), FEEDBACK_MAIL_TO: `${OPERATOR}, second@example.com` });
  api = await startTestApi(ctx);
  worker = startMailWorker(ctx);
});

afterAll(async () => {
  await worker?.close();
  await dropMailQueue(ctx);
  await api.close();
  await closeContext(ctx);
  await smtp.stop();
});

interface User {
  hashId: string;
  name: string;
  locale: string;
  timezone: string;
  phone: string | null;
  company: string | null;
}
/** A logged-in monitoring account that holds no right at all. */
async function withoutRights() {
  const c = await api.login('monitoring', ['READ']);
  await ctx.db.query("UPDATE machine_account SET rights = '{}' FROM environment e WHERE e.id = environment_id AND e.hash_id = $1", [c.environmentHashId]);
  expect((await c.request('GET', '/graph/pin-group')).status).toBe(403);
  return c;
}
const me = async (c: Awaited<ReturnType<TestApi['login']>>) => (await c.request<{ user: User }>('GET', '/settings/')).body.user;

describe('settings update', () => {
  it("changes the caller's own name, locale, timezone, phone and company, as settings get and user get show them", async () => {
    const c = await api.login('monitoring', ['READ', 'USERS']);
    const before = await me(c);
    expect([before.phone, before.company]).toEqual([null, null]);
    expect(
      (await c.request('POST', '/settings/', { name: 'Jane Doe', locale: 'nl', timezone: 'Europe/Amsterdam', phone: '+31 6 1234 5678', company: 'Acme' }))
        .status,
    ).toBe(204);
    const after = await me(c);
    expect(after).toMatchObject({
      hashId: before.hashId,
      name: 'Jane Doe',
      locale: 'nl',
      timezone: 'Europe/Amsterdam',
      phone: '+31 6 1234 5678',
      company: 'Acme',
    });
    expect((await c.request<{ user: User }>('GET', `/user/${before.hashId}`)).body.user).toMatchObject({
      name: 'Jane Doe',
      phone: '+31 6 1234 5678',
      company: 'Acme',
    });
    const admin = await api.login('monitoring', ['USERS']);
    // another environment's user list does not hold it
    expect((await admin.request('GET', `/user/${before.hashId}`)).status).toBe(404);
    expect((await c.request('POST', '/settings/', { phone: null })).status).toBe(204);
    expect(await me(c)).toMatchObject({ name: 'Jane Doe', phone: null, company: 'Acme' });
  });

  it('a connectivity account and an account without rights change their own settings too', async () => {
    for (const c of [await api.login('connectivity'), await withoutRights()]) {
      expect((await c.request('POST', '/settings/', { company: 'Supplier BV' })).status).toBe(204);
      expect((await me(c)).company).toBe('Supplier BV');
    }
  });

  it('limits name (255), phone (64), company (255), locale, timezone; password is refused, nothing changed', async () => {
    const c = await api.login('monitoring', ['READ']);
    expectParameterError(await c.request('POST', '/settings/', { name: 'x'.repeat(256) }), 'name');
    expectParameterError(await c.request('POST', '/settings/', { name: '' }), 'name');
    expectParameterError(await c.request('POST', '/settings/', { phone: '1'.repeat(65) }), 'phone');
    expectParameterError(await c.request('POST', '/settings/', { company: 'c'.repeat(256) }), 'company');
    expectParameterError(await c.request('POST', '/settings/', { locale: 'de' }), 'locale');
    expectParameterError(await c.request('POST', '/settings/', { timezone: 'Mars/Olympus' }), 'timezone');
    expectParameterError(await c.request('POST', '/settings/', { name: 'New', password: 'correct horse battery' }), 'password');
    expectParameterError(await c.request('POST', '/settings/', { role: 'admin' }), 'role');
    expect((await me(c)).name).not.toBe('New');
  });

  it('needs a login', async () => {
    const r = await api.app.inject({ method: 'POST', url: '/settings/', headers: { 'api-version': '5' }, payload: { name: 'x' } });
    expect(r.statusCode).toBe(401);
  });
});

describe('settings feedback', () => {
  it("is stored with its author and environment and mailed to the operator's addresses", async () => {
    const c = await withoutRights();
    const text = `The map is slow on my phone ${Math.random()}`;
    expect((await c.request('POST', '/settings/feedback', { theme: 'Map', feedback: text })).status).toBe(204);
    const { rows } = await ctx.db.query<{ theme: string; feedback: string; env: string; account: string }>(
      `SELECT f.theme, f.feedback, e.hash_id AS env, a.hash_id AS account FROM feedback f JOIN environment e ON e.id = f.environment_id
         JOIN machine_account a ON a.id = f.account_id WHERE f.feedback = $1`,
      [text],
    );
    const user = await me(c);
    expect(rows).toEqual([{ theme: 'Map', feedback: text, env: c.environmentHashId, account: user.hashId }]);
    const [mail] = await until(
      async () => smtp.mails.filter((m) => m.text.includes(text)),
      (m) => m.length === 1,
      'the feedback mail',
    );
    expect(mail.to.sort()).toEqual([OPERATOR, 'second@example.com']);
    expect(mail.subject).toBe('Feedback: Map');
    expect(mail.text).toContain(`account ${user.hashId}`);
    expect(mail.text).toContain(c.environmentHashId);
    // the operator's mail is not one of the environment's notifications
    const admin = await api.login('monitoring');
    expect((await admin.request<{ rows: unknown[] }>('GET', '/notification')).body.rows).toEqual([]);
  });

  it('a connectivity account sends feedback too; theme may be left out or null', async () => {
    const c = await api.login('connectivity');
    for (const body of [{ feedback: 'one' }, { theme: null, feedback: 'two' }]) expect((await c.request('POST', '/settings/feedback', body)).status).toBe(204);
    const { rows } = await ctx.db.query(
      'SELECT theme, feedback FROM feedback f JOIN environment e ON e.id = f.environment_id WHERE e.hash_id = $1 ORDER BY f.id',
      [c.environmentHashId],
    );
    expect(rows).toEqual([
      { theme: null, feedback: 'one' },
      { theme: null, feedback: 'two' },
    ]);
  });

  it('limits feedback to 1 to 1000 characters and theme to 255; a refused one is not stored', async () => {
    const c = await withoutRights();
    expectParameterError(await c.request('POST', '/settings/feedback', { feedback: 'x'.repeat(1001) }), 'feedback');
    expectParameterError(await c.request('POST', '/settings/feedback', { feedback: '' }), 'feedback');
    expectParameterError(await c.request('POST', '/settings/feedback', {}), 'feedback');
    expectParameterError(await c.request('POST', '/settings/feedback', { theme: 't'.repeat(256), feedback: 'ok' }), 'theme');
    const r = await c.request<ErrorBody>('POST', '/settings/feedback', { feedback: 'x'.repeat(1000) });
    expect(r.status).toBe(204);
    const { rows } = await ctx.db.query('SELECT length(feedback) AS n FROM feedback f JOIN environment e ON e.id = f.environment_id WHERE e.hash_id = $1', [
      c.environmentHashId,
    ]);
    expect(rows).toEqual([{ n: 1000 }]);
  });
});

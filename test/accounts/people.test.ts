import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { passwordChecks } from '../../src/accounts/people/passwords.ts';
import { setSessionCookie } from '../../src/accounts/people/sessions.ts';
import { base32Decode, totp } from '../../src/accounts/two-factor/totp.ts';
import { startMailWorker, type MailWorker } from '../../src/mail/queue.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { dropMailQueue, TestSmtp, type ReceivedMail } from '../notifications/smtp.ts';
import { until } from '../support/until.ts';

// People sign in to the console: invited by mail (a real SMTP server), they choose a password, sign in, and their
// session cookie authenticates the API as their row of the environment it acts in.

// every sign-in and password set is a scrypt of 128 MiB by design (a few hundred ms, seconds on a loaded machine)
vi.setConfig({ testTimeout: 120_000 });

const PUBLIC_URL = 'https://console.example.com';
const HOST = 'console.test';
const PASSWORD = 'correct horse battery';
const smtp = new TestSmtp();
let ctx: AppContext;
let api: TestApi;
let worker: MailWorker | null;

beforeAll(async () => {
  await smtp.start();
  ctx = await testContext({
    SMTP_URL: smtp.url(),
    MAIL_RETRY_BASE_MS: '100',
    MAIL_RETRY_MAX_MS: '400',
    PUBLIC_URL,
    LOGIN_FAILURES_PER_ACCOUNT: '4',
    LOGIN_FAILURES_PER_ADDRESS: '1000',
    LOGIN_FAILURE_WINDOW_SECONDS: '60',
  });
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

interface Answer<T = Record<string, unknown>> {
  status: number;
  body: T;
  cookie: string | null;
  setCookie: string | undefined;
}
interface Options {
  cookie?: string | null;
  headers?: Record<string, string>;
  remoteAddress?: string;
  console?: boolean;
}

/** A request as the console sends it: Api-Version, its host, the cookie, and X-Gridgate-Console on changes unless `console: false`. */
async function send<T = Record<string, unknown>>(method: 'GET' | 'POST' | 'DELETE', url: string, body?: object, o: Options = {}): Promise<Answer<T>> {
  const r = await api.app.inject({
    method,
    url,
    remoteAddress: o.remoteAddress ?? '127.0.0.1',
    headers: {
      host: HOST,
      'api-version': '8',
      ...(o.cookie ? { cookie: `other=1; gridgate_session=${o.cookie}` } : {}),
      ...(method !== 'GET' && o.console !== false ? { 'x-gridgate-console': '1' } : {}),
      ...o.headers,
    },
    ...(body ? { payload: body } : {}),
  });
  const setCookie = r.headers['set-cookie'] as string | undefined;
  const cookie = setCookie ? (/gridgate_session=([^;]*)/.exec(setCookie)?.[1] ?? null) : null;
  return { status: r.statusCode, body: (r.body ? r.json() : null) as T, cookie, setCookie };
}

interface SessionView {
  user: { hashId: string; email: string; locale: string; twoFactorAuthenticationEnabled: boolean; rights: string[] };
  environment: { hashId: string; name: string; type: string; settings: Record<string, unknown> };
  environmentRights: string[];
  environments: { hashId: string; name: string; type: string }[];
  secondFactorSetupRequired: boolean;
  expiresAt: string;
}

const login = (email: string, password = PASSWORD, extra: { code?: string; environmentHashId?: string } = {}, remoteAddress?: string) =>
  send<{ session: SessionView; key?: string; message?: string }>('POST', '/authentication/person/login', { email, password, ...extra }, { remoteAddress });
const session = (cookie: string | null) => send<{ session: SessionView; key?: string }>('GET', '/authentication/person/session', undefined, { cookie });

// the local part's case is kept (and ignored at sign-in), the domain is stored in lower case
const newEmail = () => `Person.${randomBytes(4).toString('hex')}@example.com`;

/** A monitoring environment named `name` and an admin logged in to it (bearer token). */
async function environment(name: string): Promise<ApiClient> {
  const admin = await api.login('monitoring', ['READ', 'USERS', 'ENVIRONMENT_ADMIN']);
  await ctx.db.query('UPDATE environment SET name = $2 WHERE hash_id = $1', [admin.environmentHashId, name]);
  return admin;
}

async function addPerson(admin: ApiClient, email: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await admin.request<{ hashId: string }>('POST', '/user/', { name: 'A Person', email, rights: ['READ', 'USERS'], ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.hashId;
}

const mails = (to: string, n: number) =>
  until(
    async () => smtp.mails.filter((m) => m.to.some((t) => t.toLowerCase() === to.toLowerCase())),
    (m) => m.length >= n,
    `${n} mails to ${to}`,
  );
const tokenIn = (mail: ReceivedMail) => {
  const m = /\/#\/set-password\?token=([A-Za-z0-9_-]{43})/.exec(mail.text);
  if (!m) throw new Error(`no token link in ${mail.text}`);
  return m[1];
};
const setPassword = (token: string, password = PASSWORD) => send('POST', '/authentication/person/set-password', { token, password });

/** A person invited to `admin`'s environment who chose PASSWORD; their address. */
async function invited(admin: ApiClient): Promise<string> {
  const email = newEmail();
  await addPerson(admin, email);
  const [mail] = await mails(email, 1);
  expect((await setPassword(tokenIn(mail))).status).toBe(204);
  return email;
}

/** Now, moved on to the next 30 s step when the current one ends within 3 s. */
async function steadyNow(): Promise<number> {
  const left = 30 - ((Date.now() / 1000) % 30);
  if (left < 3) await new Promise((resolve) => setTimeout(resolve, left * 1000 + 100));
  return Date.now() / 1000;
}

/** Turns two-factor authentication on through the session; the key (the code of the step before now is used up). */
async function enableSecondFactor(cookie: string): Promise<Buffer> {
  const k = await send<{ secret: string }>('POST', '/two-factor-authentication/get-keyuri', { password: PASSWORD }, { cookie });
  expect(k.status, JSON.stringify(k.body)).toBe(200);
  const key = base32Decode(k.body.secret);
  const e = await send<{ jwt: null }>('POST', '/two-factor-authentication/enable', { code: totp(key, (await steadyNow()) - 30) }, { cookie });
  expect([e.status, e.body]).toEqual([200, { jwt: null }]);
  return key;
}

const wrongCode = (right: string) => String((Number(right) + 1) % 1_000_000).padStart(6, '0');

describe('people: invitation, password, sign-in', () => {
  it('mails an invitation whose link sets the password once; the person signs in and the cookie reaches the SDK routes', async () => {
    const admin = await environment(`Invite ${randomBytes(3).toString('hex')}`);
    const email = newEmail();
    const hashId = await addPerson(admin, email);
    const [mail] = await mails(email, 1);
    expect(mail.subject).toMatch(/^Invitation to Invite /);
    expect(mail.text).toContain(`${PUBLIC_URL}/#/set-password?token=`);
    const token = tokenIn(mail);
    // the invitation is no notification of the environment: its live link is nobody else's to read
    const shown = await admin.request<{ rows: { subject: string }[] }>('GET', '/notification');
    expect(shown.body.rows.map((r) => r.subject)).not.toContain(mail.subject);

    const short = await setPassword(token, 'too short');
    expect([short.status, short.body.key]).toEqual([400, 'parameter_error']);
    expect(short.body.message).toContain('password');
    expect((await setPassword(token)).status).toBe(204);
    const again = await setPassword(token, 'another long password');
    expect([again.status, again.body.key]).toEqual([401, 'authentication_error']);
    const { rows: stored } = await ctx.db.query<{ body: string }>("SELECT body FROM notification WHERE kind = 'invitation' AND $1 = ANY(recipients)", [email]);
    expect(stored[0].body).toContain('token=(used)');
    expect(stored[0].body).not.toContain(token);

    expect((await login(email, 'not the password!')).body).toMatchObject({ key: 'authentication_error' });
    const signedIn = await login(email.toUpperCase());
    expect(signedIn.status, JSON.stringify(signedIn.body)).toBe(200);
    // Secure: PUBLIC_URL is https (TLS ends in front of the API)
    expect(signedIn.setCookie).toMatch(/^gridgate_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Secure; Max-Age=43200$/);
    const view = signedIn.body.session;
    expect(view).toMatchObject({
      user: { hashId, email, locale: 'en', twoFactorAuthenticationEnabled: false, rights: ['READ', 'USERS'] },
      environment: { hashId: admin.environmentHashId, type: 'monitoring', settings: { locale: 'en', enforceTwoFactorAuthentication: false, theme: null } },
      environmentRights: ['READ', 'USERS'],
      environments: [{ hashId: admin.environmentHashId, name: view.environment.name, type: 'monitoring' }],
      secondFactorSetupRequired: false,
    });
    expect(Date.parse(view.expiresAt) - Date.now()).toBeGreaterThan(29 * 60_000);
    expect(Date.parse(view.expiresAt) - Date.now()).toBeLessThanOrEqual(30 * 60_000);

    const cookie = signedIn.cookie;
    expect((await session(cookie)).body.session.user.hashId).toBe(hashId);
    const env = await send<{ rows: { environment: { hashId: string } }[] }>('GET', '/environment/', undefined, {
      cookie,
      headers: { 'environment-hash-id': admin.environmentHashId },
    });
    expect([env.status, env.body.rows[0].environment.hashId]).toEqual([200, admin.environmentHashId]);
    const users = await send<{ rows: { user: { email: string } }[] }>('GET', '/user/', undefined, {
      cookie,
      headers: { 'environment-hash-id': admin.environmentHashId },
    });
    expect(users.body.rows.map((r) => r.user.email)).toContain(email);
    // no cookie, or a made-up one: not signed in
    expect((await session(null)).status).toBe(401);
    expect(
      (await send('GET', '/environment/', undefined, { cookie: 'x'.repeat(43), headers: { 'environment-hash-id': admin.environmentHashId } })).status,
    ).toBe(401);
  });

  it("mails in the user's locale, and a person with a password only word of the new environment, without a token", async () => {
    const a = await environment(`Alpha ${randomBytes(3).toString('hex')}`);
    const b = await environment(`Beta ${randomBytes(3).toString('hex')}`);
    const email = newEmail();
    await addPerson(a, email, { locale: 'nl' });
    const [invitation] = await mails(email, 1);
    expect(invitation.subject).toBe(
      `Uitnodiging voor ${(await ctx.db.query('SELECT name FROM environment WHERE hash_id = $1', [a.environmentHashId])).rows[0].name}`,
    );
    expect((await setPassword(tokenIn(invitation))).status).toBe(204);
    await addPerson(b, email.toLowerCase());
    const [, added] = await mails(email, 2);
    expect(added.subject).toMatch(/^You were added to Beta /);
    expect(added.text).not.toContain('token=');
    expect(added.text).toContain(`${PUBLIC_URL}/`);
  });
});

describe('people: the cookie on other routes', () => {
  it('a person of a connectivity environment: its type and settings in the session, the supplier routes through the cookie', async () => {
    const admin = await api.login('connectivity');
    const email = newEmail();
    await addPerson(admin, email, { rights: ['ENVIRONMENT_ADMIN'] });
    expect((await setPassword(tokenIn((await mails(email, 1))[0]))).status).toBe(204);
    const { body, cookie } = await login(email);
    expect(body.session.environment).toMatchObject({
      hashId: admin.environmentHashId,
      type: 'connectivity',
      settings: { theme: null, enforceTwoFactorAuthentication: false },
    });
    expect(body.session.environmentRights).toEqual(['ENVIRONMENT_ADMIN']);
    const found = await send<{ rows: unknown[] }>('GET', '/device-type/', undefined, {
      cookie,
      headers: { 'environment-hash-id': `supplier:${admin.environmentHashId}` },
    });
    expect([found.status, found.body.rows]).toEqual([200, []]);
    const added = await send<{ hashId: string }>(
      'POST',
      '/quantity/',
      { name: 'Temperature', unit: '°C', defaultOrderOfMagnitude: -1 },
      { cookie, headers: { 'environment-hash-id': admin.environmentHashId } },
    );
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    // the audit trail names the person's row as the author
    const { rows } = await ctx.db.query<{ user_hash_id: string }>("SELECT user_hash_id FROM audit_log WHERE object_hash_id = $1 AND action = 'create'", [
      added.body.hashId,
    ]);
    expect(rows.map((r) => r.user_hash_id)).toEqual([body.session.user.hashId]);
  });

  it('refuses a cookie-authenticated change without X-Gridgate-Console or from another origin (403 right_error); bearer tokens need neither', async () => {
    const admin = await environment(`Csrf ${randomBytes(3).toString('hex')}`);
    const email = await invited(admin);
    const { cookie } = await login(email);
    const headers = { 'environment-hash-id': admin.environmentHashId };
    const change = (o: Options) =>
      send('POST', '/settings/user-environment-settings', { notificationLevel: 1 }, { cookie, ...o, headers: { ...headers, ...o.headers } });
    const bare = await change({ console: false });
    expect([bare.status, bare.body.key, bare.body.message]).toEqual([403, 'right_error', expect.stringContaining('cross-site request refused')]);
    const foreign = await change({ headers: { origin: 'https://evil.example' } });
    expect([foreign.status, foreign.body.key]).toEqual([403, 'right_error']);
    expect((await change({ headers: { origin: `http://${HOST}:8080` } })).status).toBe(403);
    expect((await change({ headers: { origin: 'null' } })).status).toBe(403);
    expect((await change({ headers: { 'x-gridgate-console': 'yes' } })).status).toBe(403);
    // the console's own requests
    expect((await change({})).status).toBe(204);
    expect((await change({ headers: { origin: `http://${HOST}` } })).status).toBe(204);
    // behind a proxy that ends TLS the browser's origin is PUBLIC_URL's
    expect((await change({ headers: { origin: PUBLIC_URL } })).status).toBe(204);
    // reads need no header; the routes of the session itself follow the same rule
    expect((await send('GET', '/settings/', undefined, { cookie, headers: { ...headers, origin: 'https://evil.example' } })).status).toBe(200);
    expect((await send('POST', '/authentication/person/logout', undefined, { cookie, console: false })).status).toBe(403);
    expect((await send('POST', '/authentication/person/logout-everywhere', undefined, { cookie, headers: { origin: 'https://evil.example' } })).status).toBe(
      403,
    );
    expect((await session(cookie)).status).toBe(200);
    // a machine account's bearer token needs no console header
    expect((await admin.request('POST', '/settings/user-environment-settings', { notificationLevel: 1 })).status).toBe(204);
  });

  it('acts in one environment at a time: switch-environment moves it, Environment-Hash-Id of another is not found, and the last one is remembered', async () => {
    const a = await environment(`Alpha ${randomBytes(3).toString('hex')}`);
    const b = await environment(`Beta ${randomBytes(3).toString('hex')}`);
    const other = await environment(`Gamma ${randomBytes(3).toString('hex')}`);
    const email = await invited(a);
    const inB = await addPerson(b, email.toLowerCase());
    const first = await login(email);
    expect(first.body.session.environment.hashId).toBe(a.environmentHashId);
    expect(first.body.session.environments.map((e) => e.hashId)).toEqual([a.environmentHashId, b.environmentHashId]);
    const cookie = first.cookie;
    const envFind = (hashId: string) => send('GET', '/user/', undefined, { cookie, headers: { 'environment-hash-id': hashId } });
    expect((await envFind(a.environmentHashId)).status).toBe(200);
    expect((await envFind(b.environmentHashId)).status).toBe(404);

    const switched = await send<{ session: SessionView }>(
      'POST',
      '/authentication/person/switch-environment',
      { environmentHashId: b.environmentHashId },
      { cookie },
    );
    expect(switched.status, JSON.stringify(switched.body)).toBe(200);
    expect(switched.body.session.user.hashId).toBe(inB);
    expect(switched.body.session.environment.hashId).toBe(b.environmentHashId);
    expect((await envFind(b.environmentHashId)).status).toBe(200);
    expect((await envFind(a.environmentHashId)).status).toBe(404);
    expect((await session(cookie)).body.session.environment.hashId).toBe(b.environmentHashId);
    // an environment the person is no user of
    const foreign = await send('POST', '/authentication/person/switch-environment', { environmentHashId: other.environmentHashId }, { cookie });
    expect([foreign.status, foreign.body.key]).toEqual([404, 'not_found_error']);

    // the next sign-in starts where the person left; environmentHashId chooses
    expect((await login(email)).body.session.environment.hashId).toBe(b.environmentHashId);
    expect((await login(email, PASSWORD, { environmentHashId: a.environmentHashId })).body.session.environment.hashId).toBe(a.environmentHashId);
    expect((await login(email, PASSWORD, { environmentHashId: other.environmentHashId })).body.session.environment.hashId).toBe(a.environmentHashId);

    // the user deleted from B: a session acting there ends, one in A goes on
    const inA = await login(email, PASSWORD, { environmentHashId: a.environmentHashId });
    const again = await login(email, PASSWORD, { environmentHashId: b.environmentHashId });
    expect((await b.request('DELETE', `/user/${inB}`)).status).toBe(204);
    expect((await session(again.cookie)).status).toBe(401);
    expect((await session(inA.cookie)).body.session.environments.map((e) => e.hashId)).toEqual([a.environmentHashId]);
  });
});

describe('people: two-factor authentication', () => {
  it('enabling it through the session keeps the session; sign-in then needs the code (second_factor_required, wrong code), and so does a switch to that row', async () => {
    const a = await environment(`Alpha ${randomBytes(3).toString('hex')}`);
    const b = await environment(`Beta ${randomBytes(3).toString('hex')}`);
    const email = await invited(a);
    await addPerson(b, email);
    const { cookie } = await login(email, PASSWORD, { environmentHashId: b.environmentHashId });
    const key = await enableSecondFactor(cookie!);
    const still = await session(cookie);
    expect([still.status, still.body.session.user.twoFactorAuthenticationEnabled]).toEqual([200, true]);

    const without = await login(email, PASSWORD, { environmentHashId: b.environmentHashId });
    expect([without.status, without.body.key, without.cookie]).toEqual([401, 'second_factor_required', null]);
    const right = totp(key, await steadyNow());
    const wrong = await login(email, PASSWORD, { environmentHashId: b.environmentHashId, code: wrongCode(right) });
    expect([wrong.status, wrong.body.key]).toEqual([401, 'authentication_error']);
    // the code is not asked for a row without two-factor authentication
    const inA = await login(email, PASSWORD, { environmentHashId: a.environmentHashId });
    expect(inA.body.session.environment.hashId).toBe(a.environmentHashId);
    const switchToB = (code?: string) =>
      send('POST', '/authentication/person/switch-environment', { environmentHashId: b.environmentHashId, ...(code ? { code } : {}) }, { cookie: inA.cookie });
    expect((await switchToB()).body.key).toBe('second_factor_required');
    expect((await switchToB(wrongCode(right))).body.key).toBe('authentication_error');
    expect((await switchToB(right)).status).toBe(200);
    const withCode = await login(email, PASSWORD, { environmentHashId: b.environmentHashId, code: totp(key, Date.now() / 1000 + 30) });
    expect(withCode.status, JSON.stringify(withCode.body)).toBe(200);
  });

  it('an environment that enforces it: the session answers secondFactorSetupRequired and reaches only the setup routes until enabled', async () => {
    const admin = await environment(`Strict ${randomBytes(3).toString('hex')}`);
    const email = newEmail();
    await addPerson(admin, email);
    // the admin (a machine account without 2FA) is shut out too from now on
    const enforce = await admin.request('PUT', '/environment/', { enforceTwoFactorAuthentication: true });
    expect(enforce.status, JSON.stringify(enforce.body)).toBe(200);
    expect((await setPassword(tokenIn((await mails(email, 1))[0]))).status).toBe(204);
    const { cookie, body } = await login(email);
    expect(body.session.secondFactorSetupRequired).toBe(true);
    const headers = { 'environment-hash-id': admin.environmentHashId };
    const refused = await send('GET', '/environment/', undefined, { cookie, headers });
    expect([refused.status, refused.body.key]).toEqual([403, 'right_error']);
    await enableSecondFactor(cookie!);
    expect((await send('GET', '/environment/', undefined, { cookie, headers })).status).toBe(200);
    expect((await session(cookie)).body.session.secondFactorSetupRequired).toBe(false);
  });
});

describe('people: sessions end', () => {
  it('after SESSION_IDLE_MINUTES without a request and SESSION_ABSOLUTE_HOURS after the login; last_seen_at moves at most once a minute', async () => {
    const admin = await environment(`Idle ${randomBytes(3).toString('hex')}`);
    const email = await invited(admin);
    const idle = (await login(email)).cookie;
    const back = (column: string, interval: string) =>
      ctx.db.query(`UPDATE person_session SET ${column} = now() - $2::interval WHERE email = lower($1)`, [email, interval]);
    await back('last_seen_at', '29 minutes');
    expect((await session(idle)).status).toBe(200);
    const {
      rows: [touched],
    } = await ctx.db.query<{ idle: number }>('SELECT extract(epoch FROM now() - last_seen_at)::float8 AS idle FROM person_session WHERE email = lower($1)', [
      email,
    ]);
    expect(touched.idle).toBeLessThan(5);
    await back('last_seen_at', '30 seconds');
    expect((await session(idle)).status).toBe(200);
    const {
      rows: [kept],
    } = await ctx.db.query<{ idle: number }>('SELECT extract(epoch FROM now() - last_seen_at)::float8 AS idle FROM person_session WHERE email = lower($1)', [
      email,
    ]);
    expect(kept.idle).toBeGreaterThanOrEqual(30);
    await back('last_seen_at', '31 minutes');
    expect((await session(idle)).status).toBe(401);
    expect((await send('GET', '/environment/', undefined, { cookie: idle, headers: { 'environment-hash-id': admin.environmentHashId } })).status).toBe(401);
    expect((await ctx.db.query('SELECT 1 FROM person_session WHERE email = lower($1)', [email])).rows).toHaveLength(0);

    const old = (await login(email)).cookie;
    await back('created_at', '12 hours 1 minute');
    expect((await session(old)).status).toBe(401);
  });

  it('logout ends the session and clears the cookie; logout-everywhere ends every session of the person', async () => {
    const admin = await environment(`Logout ${randomBytes(3).toString('hex')}`);
    const email = await invited(admin);
    const one = (await login(email)).cookie;
    const out = await send('POST', '/authentication/person/logout', undefined, { cookie: one });
    expect(out.status).toBe(204);
    expect(out.setCookie).toMatch(/^gridgate_session=; Path=\/; HttpOnly; SameSite=Strict; Secure; Max-Age=0$/);
    expect((await session(one)).status).toBe(401);

    const [two, three] = [(await login(email)).cookie, (await login(email)).cookie];
    expect((await session(two)).status).toBe(200);
    expect((await session(three)).status).toBe(200);
    expect((await send('POST', '/authentication/person/logout-everywhere', undefined, { cookie: two })).status).toBe(204);
    expect((await session(two)).status).toBe(401);
    expect((await session(three)).status).toBe(401);
    expect((await send('POST', '/authentication/person/logout-everywhere', undefined, { cookie: three })).status).toBe(401);
  });
});

describe('people: a row changes', () => {
  it('a session acting as a row whose address changes ends (the session belongs to the old address)', async () => {
    const admin = await environment(`Moved ${randomBytes(3).toString('hex')}`);
    const email = await invited(admin);
    const { body, cookie } = await login(email);
    expect((await admin.request('POST', `/user/${body.session.user.hashId}`, { name: 'Renamed' })).status).toBe(204);
    expect((await session(cookie)).body.session.user).toMatchObject({ name: 'Renamed' });
    expect((await admin.request('POST', `/user/${body.session.user.hashId}`, { email: newEmail() })).status).toBe(204);
    expect((await session(cookie)).status).toBe(401);
    // nor can the old address sign in to that row any more
    expect((await login(email)).body.key).toBe('authentication_error');
  });
});

describe('people: password reset', () => {
  it('answers 204 for any address; a person gets a link good once that sets a new password and ends their sessions', async () => {
    const admin = await environment(`Reset ${randomBytes(3).toString('hex')}`);
    const email = await invited(admin);
    const before = (await login(email)).cookie;
    const nobody = newEmail();
    expect((await send('POST', '/authentication/person/password-reset', { email: nobody })).status).toBe(204);
    expect((await send('POST', '/authentication/person/password-reset', { email: email.toUpperCase() })).status).toBe(204);
    const [, reset] = await mails(email, 2);
    expect(reset.subject).toBe('Reset your password');
    expect(reset.text).toContain(`${PUBLIC_URL}/#/set-password?token=`);
    const token = tokenIn(reset);
    expect((await setPassword(token, 'a brand new password')).status).toBe(204);
    expect((await setPassword(token, 'a third new password')).body.key).toBe('authentication_error');
    expect((await session(before)).status).toBe(401);
    expect((await login(email)).status).toBe(401);
    expect((await login(email, 'a brand new password')).status).toBe(200);
    // an expired link
    expect((await send('POST', '/authentication/person/password-reset', { email })).status).toBe(204);
    const [, , late] = await mails(email, 3);
    await ctx.db.query("UPDATE person_token SET expires_at = now() - interval '1 second' WHERE email = lower($1) AND used_at IS NULL", [email]);
    expect((await setPassword(tokenIn(late), 'too late a password')).body.key).toBe('authentication_error');
    // nothing went to the address nobody has
    expect(smtp.mails.filter((m) => m.to.some((t) => t.toLowerCase() === nobody.toLowerCase()))).toHaveLength(0);
  });
});

describe('people: login limits and machine accounts', () => {
  it('limits failed sign-ins per person (429, the right password too); an unknown address costs the same scrypt', async () => {
    const admin = await environment(`Limits ${randomBytes(3).toString('hex')}`);
    const email = await invited(admin);
    const checks = async () => (await passwordChecks.get()).values[0]?.value ?? 0;
    const start = await checks();
    expect((await login(newEmail(), 'whatever it is', {}, '10.9.0.1')).body.key).toBe('authentication_error');
    expect(await checks()).toBe(start + 1);
    for (let i = 0; i < 4; i++) expect((await login(email, `wrong password ${i}`, {}, `10.9.1.${i}`)).status).toBe(401);
    const limited = await login(email.toUpperCase(), 'wrong again!', {}, '10.9.1.9');
    expect([limited.status, limited.body.key]).toEqual([429, 'rate_limit_error']);
    expect((await login(email, PASSWORD, {}, '10.9.1.10')).status).toBe(429);
  });

  it('a machine account logs in with its assertion as before; a person cannot use machine-login, and a bearer token wins over the cookie', async () => {
    const admin = await environment(`Machines ${randomBytes(3).toString('hex')}`);
    const email = await invited(admin);
    const {
      rows: [person],
    } = await ctx.db.query<{ hash_id: string }>('SELECT hash_id FROM machine_account WHERE lower(email) = lower($1)', [email]);
    const machine = await send('POST', '/authentication/machine-login', { assertion: `${person.hash_id}:${PASSWORD}` });
    expect([machine.status, machine.body.key]).toEqual([401, 'authentication_error']);
    const { cookie } = await login(email);
    // the admin's token with the person's cookie beside it: the admin's request
    const settings = await send<{ user: { hashId: string } }>('GET', '/settings/', undefined, { cookie, headers: { authorization: `Bearer ${admin.token}` } });
    expect(settings.body.user.hashId).not.toBe(person.hash_id);
    expect((await send('GET', '/settings/', undefined, { cookie, headers: { authorization: 'Bearer nonsense' } })).status).toBe(401);
    expect((await admin.request('GET', '/environment/')).status).toBe(200);
  });

  it('needs Api-Version like every route, is described in the OpenAPI document, and marks the cookie Secure over TLS', async () => {
    const r = await api.app.inject({ method: 'POST', url: '/authentication/person/login', payload: { email: newEmail(), password: PASSWORD } });
    expect([r.statusCode, r.json().key]).toEqual([400, 'api_version_error']);
    const paths = (await api.app.inject({ method: 'GET', url: '/openapi.json' })).json().paths as Record<string, Record<string, { description?: string }>>;
    for (const route of ['login', 'session', 'switch-environment', 'logout', 'logout-everywhere', 'set-password', 'password-reset']) {
      const operation = Object.values(paths[`/authentication/person/${route}`] ?? {})[0];
      expect(operation?.description, route).toBeTruthy();
    }
    const cookieOver = (protocol: string) => {
      let header = '';
      const reply = {
        header: (_name: string, value: string) => {
          header = value;
        },
      };
      setSessionCookie({ ...ctx, config: { ...ctx.config, publicUrl: 'http://localhost:8080' } }, { protocol } as never, reply as never, 't'.repeat(43));
      return header;
    };
    expect(cookieOver('https')).toBe(`gridgate_session=${'t'.repeat(43)}; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=43200`);
    expect(cookieOver('http')).toBe(`gridgate_session=${'t'.repeat(43)}; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200`);
  });
});

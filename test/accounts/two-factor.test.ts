import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { base32Decode, base32Encode, hotp, totp, type TotpHash } from '../../src/accounts/two-factor/totp.ts';
import { startTestApi, type TestApi } from '../helpers.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

describe('TOTP', () => {
  it('computes RFC 4226 appendix D HOTP values', () => {
    const key = Buffer.from('12345678901234567890');
    const expected = ['755224', '287082', '359152', '969429', '338314', '254676', '287922', '162583', '399871', '520489'];
    expect(expected.map((_, i) => hotp(key, BigInt(i)))).toEqual(expected);
  });

  it('computes RFC 6238 appendix B TOTP values (SHA-1, SHA-256, SHA-512; 8 digits)', () => {
    const seeds: Record<TotpHash, Buffer> = {
      sha1: Buffer.from('12345678901234567890'),
      sha256: Buffer.from('12345678901234567890123456789012'),
      sha512: Buffer.from('1234567890123456789012345678901234567890123456789012345678901234'),
    };
    const table: [number, string, string, string][] = [
      [59, '94287082', '46119246', '90693936'],
      [1111111109, '07081804', '68084774', '25091201'],
      [1111111111, '14050471', '67062674', '99943326'],
      [1234567890, '89005924', '91819424', '93441116'],
      [2000000000, '69279037', '90698825', '38618901'],
      [20000000000, '65353130', '77737706', '47863826'],
    ];
    for (const [time, sha1, sha256, sha512] of table) {
      expect([totp(seeds.sha1, time, 8, 'sha1'), totp(seeds.sha256, time, 8, 'sha256'), totp(seeds.sha512, time, 8, 'sha512')]).toEqual([sha1, sha256, sha512]);
    }
  });

  it('encodes and decodes RFC 4648 base32 test vectors', () => {
    const vectors: [string, string][] = [
      ['', ''],
      ['f', 'MY'],
      ['fo', 'MZXQ'],
      ['foo', 'MZXW6'],
      ['foob', 'MZXW6YQ'],
      ['fooba', 'MZXW6YTB'],
      ['foobar', 'MZXW6YTBOI'],
    ];
    for (const [plain, encoded] of vectors) {
      expect(base32Encode(Buffer.from(plain))).toBe(encoded);
      expect(base32Decode(`${encoded}======`.slice(0, Math.ceil(encoded.length / 8) * 8 || 0)).toString()).toBe(plain);
    }
  });
});

// --- the routes, as an account of either environment type uses them ---

interface Session {
  hashId: string;
  assertion: string;
  secret: string;
  token: string;
}

const headers = (token: string) => ({ 'api-version': '8', authorization: `Bearer ${token}` });

async function login(assertion: string, remoteAddress = '127.0.0.1') {
  const r = await api.app.inject({
    method: 'POST',
    url: '/authentication/machine-login',
    headers: { 'api-version': '8' },
    payload: { assertion },
    remoteAddress,
  });
  return { status: r.statusCode, body: r.json() as { jwt: string; user: { twoFactorAuthenticationEnabled: boolean }; key?: string; message?: string } };
}

async function call<T = Record<string, unknown>>(token: string, url: string, payload?: object, remoteAddress = '127.0.0.1') {
  const r = await api.app.inject({ method: payload ? 'POST' : 'GET', url, headers: headers(token), ...(payload ? { payload } : {}), remoteAddress });
  return { status: r.statusCode, body: (r.body ? r.json() : null) as T };
}

async function session(type: 'monitoring' | 'connectivity' = 'monitoring'): Promise<Session> {
  const env = await createEnvironment(api.ctx.db, type, '2fa test');
  const a = await createMachineAccount(api.ctx.db, env.hashId, type === 'monitoring' ? ['READ'] : ['ENVIRONMENT_ADMIN']);
  const l = await login(a.assertion);
  expect(l.status).toBe(200);
  return { hashId: a.hashId, assertion: a.assertion, secret: a.assertion.split(':')[1], token: l.body.jwt };
}

/** Now, moved on to the next 30 s step when the current one ends within 3 s, so codes computed for ±1 step stay in the window. */
async function steadyNow(): Promise<number> {
  const left = 30 - ((Date.now() / 1000) % 30);
  if (left < 3) await new Promise((resolve) => setTimeout(resolve, left * 1000 + 100));
  return Date.now() / 1000;
}

/** Turns 2FA on; answers the key and the token enable answered. */
async function enable(s: Session): Promise<{ key: Buffer; token: string }> {
  const k = await call<{ keyuri: string; secret: string }>(s.token, '/two-factor-authentication/get-keyuri', { password: s.secret });
  expect(k.status).toBe(200);
  const key = base32Decode(k.body.secret);
  const e = await call<{ jwt: string }>(s.token, '/two-factor-authentication/enable', { code: totp(key, await steadyNow()) });
  expect(e.status, JSON.stringify(e.body)).toBe(200);
  return { key, token: e.body.jwt };
}

describe('two-factor authentication', () => {
  it('get-keyuri answers an otpauth keyuri of a new 160-bit key; enable with its code switches it on', async () => {
    const s = await session();
    const k = await call<{ keyuri: string; secret: string }>(s.token, '/two-factor-authentication/get-keyuri', { password: s.secret });
    expect(k.status).toBe(200);
    expect(base32Decode(k.body.secret)).toHaveLength(20);
    const uri = new URL(k.body.keyuri);
    expect([
      uri.protocol,
      uri.host,
      uri.searchParams.get('secret'),
      uri.searchParams.get('algorithm'),
      uri.searchParams.get('digits'),
      uri.searchParams.get('period'),
    ]).toEqual(['otpauth:', 'totp', k.body.secret, 'SHA1', '6', '30']);
    expect((await call<{ user: { twoFactorAuthenticationEnabled: boolean } }>(s.token, '/settings/')).body.user.twoFactorAuthenticationEnabled).toBe(false);
    const e = await call<{ jwt: string }>(s.token, '/two-factor-authentication/enable', { code: totp(base32Decode(k.body.secret), await steadyNow()) });
    expect(e.status).toBe(200);
    expect((await call<{ user: { twoFactorAuthenticationEnabled: boolean } }>(e.body.jwt, '/settings/')).body.user.twoFactorAuthenticationEnabled).toBe(true);
    // once on, get-keyuri makes no new key
    expect((await call(e.body.jwt, '/two-factor-authentication/get-keyuri', { password: s.secret })).body).toEqual({ keyuri: null, secret: null });
  });

  it('refuses a wrong password and a wrong code with 400 parameter_error naming the field, and enable before get-keyuri', async () => {
    const s = await session('connectivity');
    const wrongPassword = await call(s.token, '/two-factor-authentication/get-keyuri', { password: 'not-the-secret' });
    expect([wrongPassword.status, wrongPassword.body.key]).toEqual([400, 'parameter_error']);
    expect(wrongPassword.body.message).toContain('password');
    const early = await call(s.token, '/two-factor-authentication/enable', { code: '123456' });
    expect([early.status, early.body.key]).toEqual([400, 'parameter_error']);
    expect(early.body.message).toContain('code');
    const k = await call<{ secret: string }>(s.token, '/two-factor-authentication/get-keyuri', { password: s.assertion });
    expect(k.status).toBe(200);
    const right = totp(base32Decode(k.body.secret), await steadyNow());
    const wrong = String((Number(right) + 1) % 1_000_000).padStart(6, '0');
    for (const code of [wrong, 'abcdef', '1234567']) {
      const r = await call(s.token, '/two-factor-authentication/enable', { code });
      expect([r.status, r.body.key, String(r.body.message).startsWith('code')]).toEqual([400, 'parameter_error', true]);
    }
    expect((await call(s.token, '/two-factor-authentication/enable', { code: 'x'.repeat(256) })).status).toBe(400);
    expect((await call(s.token, '/two-factor-authentication/enable', { code: right })).status).toBe(200);
  });

  it('keeps the key sealed at rest (AES-256-GCM, bound to the account)', async () => {
    const s = await session();
    const { key } = await enable(s);
    const { rows } = await api.ctx.db.query<{ secret: Buffer; pending_secret: Buffer | null }>(
      'SELECT tf.secret, tf.pending_secret FROM account_two_factor tf JOIN machine_account a ON a.id = tf.account_id WHERE a.hash_id = $1',
      [s.hashId],
    );
    expect(rows[0].pending_secret).toBeNull();
    expect(rows[0].secret).toHaveLength(12 + 16 + 20);
    expect(rows[0].secret.includes(key)).toBe(false);
    // copied into another account's row, the sealed key does not open (a fault of the store, never a login)
    const other = await session();
    await enable(other);
    await api.ctx.db.query(
      'UPDATE account_two_factor SET secret = $1, last_step = NULL WHERE account_id = (SELECT id FROM machine_account WHERE hash_id = $2)',
      [rows[0].secret, other.hashId],
    );
    const copied = await login(`${other.assertion}:${totp(key, Date.now() / 1000)}`);
    expect([copied.status, copied.body.key]).toEqual([500, 'server_error']);
  });

  it('once on, the tokens issued before stop working and a login needs a code, good once', async () => {
    const s = await session();
    const { key, token } = await enable(s);
    const before = await call(s.token, '/settings/');
    expect([before.status, before.body.key]).toEqual([401, 'authentication_error']);
    expect((await call(token, '/settings/')).status).toBe(200);

    const noCode = await login(s.assertion);
    expect([noCode.status, noCode.body.key]).toEqual([401, 'authentication_error']);
    expect(noCode.body.message).toContain('code');
    const now = await steadyNow();
    // enable used the current step's code: the same code again is a replay
    expect((await login(`${s.assertion}:${totp(key, now)}`)).status).toBe(401);
    const next = totp(key, now + 30);
    const ok = await login(`${s.assertion}:${next}`);
    expect(ok.status).toBe(200);
    expect(ok.body.user.twoFactorAuthenticationEnabled).toBe(true);
    expect((await call(ok.body.jwt, '/settings/')).status).toBe(200);
    // replayed, and an older step than the last one accepted
    expect((await login(`${s.assertion}:${next}`)).status).toBe(401);
    expect((await login(`${s.assertion}:${totp(key, now - 30)}`)).status).toBe(401);
    // two steps away is outside the window
    expect((await login(`${s.assertion}:${totp(key, now + 90)}`)).status).toBe(401);
    // the code does not stand in for the secret
    expect((await login(`${s.hashId}:wrong:${totp(key, now + 60)}`)).status).toBe(401);
  });

  it('counts wrong codes as failed logins (429 after the per-account limit)', async () => {
    const s = await session();
    const { key } = await enable(s);
    const wrong = String((Number(totp(key, Date.now() / 1000)) + 500_000) % 1_000_000).padStart(6, '0');
    const statuses: number[] = [];
    for (let i = 0; i < api.ctx.config.loginFailuresPerAccount + 1; i++) statuses.push((await login(`${s.assertion}:${wrong}`, `10.9.0.${i}`)).status);
    expect(statuses.at(-1)).toBe(429);
    expect(new Set(statuses.slice(0, -1))).toEqual(new Set([401]));
  });

  it('disable needs the secret followed by a fresh code; after it a login needs no code', async () => {
    const s = await session('connectivity');
    const { key, token } = await enable(s);
    const noCode = await call(token, '/two-factor-authentication/disable', { password: s.secret });
    expect([noCode.status, noCode.body.key, String(noCode.body.message).startsWith('password')]).toEqual([400, 'parameter_error', true]);
    const now = await steadyNow();
    const wrongSecret = await call(token, '/two-factor-authentication/disable', { password: `wrong:${totp(key, now + 30)}` });
    expect([wrongSecret.status, wrongSecret.body.key]).toEqual([400, 'parameter_error']);
    // enable's code again: a replay
    expect((await call(token, '/two-factor-authentication/disable', { password: `${s.secret}:${totp(key, now)}` })).status).toBe(400);
    expect((await call(token, '/two-factor-authentication/disable', { password: `${s.secret}:${totp(key, now + 30)}` })).status).toBe(204);
    const l = await login(s.assertion);
    expect([l.status, l.body.user.twoFactorAuthenticationEnabled]).toEqual([200, false]);
    // off already: the password alone is enough, and nothing changes
    expect((await call(l.body.jwt, '/two-factor-authentication/disable', { password: s.secret })).status).toBe(204);
  });

  it("is one account's own: another account's secret is refused, and its 2FA leaves others' logins alone", async () => {
    const a = await session();
    const b = await session();
    const r = await call(b.token, '/two-factor-authentication/get-keyuri', { password: a.secret });
    expect([r.status, r.body.key]).toEqual([400, 'parameter_error']);
    const r2 = await call(b.token, '/two-factor-authentication/get-keyuri', { password: a.assertion });
    expect(r2.status).toBe(400);
    await enable(a);
    expect((await login(b.assertion)).status).toBe(200);
    expect((await call(b.token, '/settings/')).status).toBe(200);
  });

  it('needs a token', async () => {
    const r = await api.app.inject({
      method: 'POST',
      url: '/two-factor-authentication/get-keyuri',
      headers: { 'api-version': '8' },
      payload: { password: 'x' },
    });
    expect(r.statusCode).toBe(401);
  });
});

/** A six-digit code that is none of the key's codes for the steps around `now` (a guess that is wrong whenever it is checked). */
function wrongCode(key: Buffer, now: number): string {
  const good = new Set([-60, -30, 0, 30, 60].map((d) => totp(key, now + d)));
  for (let n = 0; ; n++) {
    const code = String(n).padStart(6, '0');
    if (!good.has(code)) return code;
  }
}

describe('guessing at the two-factor routes', () => {
  // each guess from its own address: what is shown is the per-account limit, which no spread of addresses gets round
  const from = (i: number) => `10.38.${Math.floor(i / 200)}.${i % 200}`;

  it('disable: wrong codes with the right secret are limited like failed logins (429 rate_limit_error), and the right code is refused while limited', async () => {
    const s = await session();
    const { key, token } = await enable(s);
    const now = await steadyNow();
    const wrong = wrongCode(key, now);
    const limit = api.ctx.config.loginFailuresPerAccount;
    const statuses: number[] = [];
    for (let i = 0; i < limit; i++)
      statuses.push((await call(token, '/two-factor-authentication/disable', { password: `${s.secret}:${wrong}` }, from(i))).status);
    expect(new Set(statuses)).toEqual(new Set([400]));
    const over = await call(token, '/two-factor-authentication/disable', { password: `${s.secret}:${wrong}` }, from(limit));
    expect([over.status, over.body.key]).toEqual([429, 'rate_limit_error']);
    // enable used the current step's code; the next one is good and unused, and still refused
    const right = await call(token, '/two-factor-authentication/disable', { password: `${s.secret}:${totp(key, now + 30)}` }, from(limit + 1));
    expect([right.status, right.body.key]).toEqual([429, 'rate_limit_error']);
    expect((await call<{ user: { twoFactorAuthenticationEnabled: boolean } }>(token, '/settings/')).body.user.twoFactorAuthenticationEnabled).toBe(true);
    // one budget with machine-login: the guesses made here leave none for logins of the account either
    expect((await login(`${s.assertion}:${totp(key, now + 30)}`, from(limit + 2))).status).toBe(429);
  });

  it('disable: a wrong secret counts too', async () => {
    const s = await session();
    const { key, token } = await enable(s);
    const limit = api.ctx.config.loginFailuresPerAccount;
    for (let i = 0; i < limit; i++)
      expect((await call(token, '/two-factor-authentication/disable', { password: `wrong${i}:${totp(key, Date.now() / 1000)}` }, from(i))).status).toBe(400);
    const r = await call(token, '/two-factor-authentication/disable', { password: `wrong:${totp(key, Date.now() / 1000)}` }, from(limit));
    expect([r.status, r.body.key]).toEqual([429, 'rate_limit_error']);
  });

  it('get-keyuri (wrong secrets) and enable (wrong codes) draw on the same limit; then the right code cannot enable', async () => {
    const s = await session('connectivity');
    const limit = api.ctx.config.loginFailuresPerAccount;
    const half = Math.floor(limit / 2);
    for (let i = 0; i < half; i++)
      expect((await call(s.token, '/two-factor-authentication/get-keyuri', { password: `not-the-secret-${i}` }, from(i))).status).toBe(400);
    const k = await call<{ secret: string }>(s.token, '/two-factor-authentication/get-keyuri', { password: s.secret }, from(half));
    expect(k.status).toBe(200);
    const key = base32Decode(k.body.secret);
    const now = await steadyNow();
    for (let i = half; i < limit; i++)
      expect((await call(s.token, '/two-factor-authentication/enable', { code: wrongCode(key, now) }, from(i + 1))).status).toBe(400);
    const right = await call(s.token, '/two-factor-authentication/enable', { code: totp(key, now) }, from(limit + 1));
    expect([right.status, right.body.key]).toEqual([429, 'rate_limit_error']);
    expect((await call(s.token, '/two-factor-authentication/get-keyuri', { password: s.secret }, from(limit + 2))).status).toBe(429);
    expect((await call<{ user: { twoFactorAuthenticationEnabled: boolean } }>(s.token, '/settings/')).body.user.twoFactorAuthenticationEnabled).toBe(false);
  });

  it('a right secret or code gives its failure back: an account that keeps getting it right is never limited', async () => {
    const s = await session();
    const limit = api.ctx.config.loginFailuresPerAccount;
    for (let i = 0; i <= limit; i++) expect((await call(s.token, '/two-factor-authentication/get-keyuri', { password: s.secret }, from(i))).status).toBe(200);
  });
});

// --- an environment that enforces two-factor authentication ---

interface Member {
  hashId: string;
  assertion: string;
  secret: string;
  token: string;
}
interface LoginRefusal {
  key: string;
  message: string;
  details?: { jwt?: string };
}

/** A new environment of `type`, with an admin (every right of its type) logged in. */
async function team(type: 'monitoring' | 'connectivity') {
  const env = await createEnvironment(api.ctx.db, type, '2fa enforced');
  const join = async (rights: string[]): Promise<Member> => {
    const a = await createMachineAccount(api.ctx.db, env.hashId, rights);
    const l = await login(a.assertion);
    expect(l.status).toBe(200);
    return { hashId: a.hashId, assertion: a.assertion, secret: a.assertion.split(':')[1], token: l.body.jwt };
  };
  const admin = await join(type === 'monitoring' ? ['READ', 'USERS', 'ENVIRONMENT_ADMIN'] : ['ENVIRONMENT_ADMIN']);
  /** A request to the environment (its Environment-Hash-Id) with `token`. */
  const request = async <T = Record<string, unknown>>(token: string, method: 'GET' | 'PUT' | 'POST', url: string, payload?: object) => {
    const r = await api.app.inject({ method, url, headers: { ...headers(token), 'environment-hash-id': env.hashId }, ...(payload ? { payload } : {}) });
    return { status: r.statusCode, body: (r.body ? r.json() : null) as T };
  };
  return { env, admin, join, request };
}

/** A 403 right_error whose message tells the caller to set up two-factor authentication. */
function expectTwoFactorRequired(r: { status: number; body: unknown }) {
  const body = r.body as LoginRefusal;
  expect([r.status, body.key], JSON.stringify(body)).toEqual([403, 'right_error']);
  expect(body.message).toContain('two-factor authentication');
  expect(body.message).toContain('/two-factor-authentication/enable');
}

describe('enforceTwoFactorAuthentication', () => {
  it('monitoring: once on, an account without a second factor gets no working token; it can set one up and then works as before', async () => {
    const t = await team('monitoring');
    const reader = await t.join(['READ']);
    const secured = await t.join(['READ']);
    const { key: securedKey, token: securedToken } = await enable(secured);

    const put = await t.request<{ environment: { enforceTwoFactorAuthentication: boolean } }>(t.admin.token, 'PUT', '/environment/', {
      enforceTwoFactorAuthentication: true,
    });
    expect(put.status).toBe(200);
    expect(put.body.environment.enforceTwoFactorAuthentication).toBe(true);
    const got = await t.request<{ environment: { enforceTwoFactorAuthentication: boolean } }>(securedToken, 'GET', `/environment/${t.env.hashId}`);
    expect([got.status, got.body.environment.enforceTwoFactorAuthentication]).toEqual([200, true]);

    // tokens issued before: refused everywhere but the routes that set a second factor up
    expectTwoFactorRequired(await t.request(reader.token, 'GET', '/graph/pin-group'));
    expectTwoFactorRequired(await t.request(reader.token, 'GET', '/settings/'));
    expectTwoFactorRequired(await t.request(t.admin.token, 'PUT', '/environment/', { enforceTwoFactorAuthentication: false }));
    expect((await call(t.admin.token, '/two-factor-authentication/get-keyuri', { password: t.admin.secret })).status).toBe(200);

    // a login without a second factor: its secret is right, so it is told what to do, with a token for just that
    const refused = await login(reader.assertion);
    expectTwoFactorRequired(refused);
    const setupToken = (refused.body as LoginRefusal).details?.jwt ?? '';
    expectTwoFactorRequired(await t.request(setupToken, 'GET', '/graph/pin-group'));
    const { key, token } = await enable({ ...reader, token: setupToken });
    expect((await t.request(token, 'GET', '/graph/pin-group')).status).toBe(200);
    const now = await steadyNow();
    const next = await login(`${reader.assertion}:${totp(key, now + 30)}`);
    expect(next.status).toBe(200);
    expect((await t.request(next.body.jwt, 'GET', '/settings/')).status).toBe(200);

    // an account that had a second factor already is not touched: its token works, its login with a code too
    expect((await t.request(securedToken, 'GET', '/graph/pin-group')).status).toBe(200);
    expect((await login(`${secured.assertion}:${totp(securedKey, now + 30)}`)).status).toBe(200);
  });

  it('a wrong secret is still a 401 that says nothing of the environment', async () => {
    const t = await team('monitoring');
    expect((await t.request(t.admin.token, 'PUT', '/environment/', { enforceTwoFactorAuthentication: true })).status).toBe(200);
    const r = await login(`${t.admin.hashId}:wrong`);
    expect([r.status, r.body.key]).toEqual([401, 'authentication_error']);
    expect(r.body.message).not.toContain('two-factor');
  });

  it('connectivity (supplier update): the same, and switching it off lets accounts without a second factor in again', async () => {
    const t = await team('connectivity');
    const other = await t.join(['ENVIRONMENT_ADMIN']);
    const secured = await t.join(['ENVIRONMENT_ADMIN']);
    const { token: securedToken } = await enable(secured);
    expect((await t.request(t.admin.token, 'PUT', '/supplier/', { enforceTwoFactorAuthentication: true })).status).toBe(204);
    const got = await t.request<{ supplier: { enforceTwoFactorAuthentication: boolean } }>(securedToken, 'GET', `/supplier/${t.env.hashId}`);
    expect([got.status, got.body.supplier.enforceTwoFactorAuthentication]).toEqual([200, true]);
    expectTwoFactorRequired(await t.request(other.token, 'GET', '/device/'));
    expectTwoFactorRequired(await login(other.assertion));

    expect((await t.request(securedToken, 'GET', '/device/')).status).toBe(200);
    expect((await t.request(securedToken, 'PUT', '/supplier/', { enforceTwoFactorAuthentication: false })).status).toBe(204);
    expect((await t.request(other.token, 'GET', '/device/')).status).toBe(200);
    expect((await login(other.assertion)).status).toBe(200);
  });
});

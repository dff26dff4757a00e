// Signing in to the console in a real browser, by keyboard only: an invited person (the invitation read from a real
// SMTP server) sets a password from the mailed link, signs in, is made to set up the second factor their environment
// enforces, signs out, and signs in again with address, password and the authenticator's code; in en and in nl.
// Then a person of two environments switches between them, and a request from another origin with their cookie is refused.
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { base32Decode, totp } from '../../src/accounts/two-factor/totp.ts';
import { startMailWorker, type MailWorker } from '../../src/mail/queue.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { dropMailQueue, TestSmtp } from '../notifications/smtp.ts';
import { until } from '../support/until.ts';
import { axeFindings, consoleLink, launchBrowser, openConsole, screenshot } from './browser.ts';

// every sign-in is a scrypt of 128 MiB by design
vi.setConfig({ testTimeout: 180_000 });

const PASSWORD = 'keyboard only 2026';
const smtp = new TestSmtp();
let ctx: AppContext;
let api: TestApi;
let worker: MailWorker | null;
let browser: Browser;
let base: string;

beforeAll(async () => {
  await smtp.start();
  // PUBLIC_URL is set once the port is known: the invitation's link must open this very server
  const port = await new Promise<number>((resolve) => {
    const s = require_net()
      .createServer()
      .listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
  });
  base = `http://127.0.0.1:${port}`;
  ctx = await testContext({ SMTP_URL: smtp.url(), MAIL_RETRY_BASE_MS: '100', PUBLIC_URL: base });
  api = await startTestApi(ctx);
  await api.app.listen({ port, host: '127.0.0.1' });
  worker = startMailWorker(ctx);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await worker?.close();
  await dropMailQueue(ctx);
  await api?.close();
  await closeContext(ctx);
  await smtp.stop();
});

function require_net(): typeof import('node:net') {
  return process.getBuiltinModule('node:net');
}

/** An environment enforcing a second factor and a person invited to it (in `locale`); the person's address and the invitation's link. */
async function invite(admin: ApiClient, locale: 'en' | 'nl'): Promise<{ email: string; link: string }> {
  const email = `kb-${randomBytes(4).toString('hex')}@example.com`;
  const r = await admin.request('POST', '/user/', { name: 'Keyboard Person', email, rights: ['ENVIRONMENT_ADMIN'], locale });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const [mail] = await until(
    async () => smtp.to(email),
    (m) => m.length === 1,
    `the invitation to ${email}`,
  );
  return { email, link: consoleLink(mail.text) };
}

/** Types into whatever has the focus now, then presses Tab or Enter: the keyboard is the only way in. */
async function typeThen(page: Page, text: string, key: 'Tab' | 'Enter'): Promise<void> {
  await page.keyboard.type(text);
  await page.keyboard.press(key);
}

/** A poll that waits long enough for a sign-in's scrypt on a loaded machine. */
const slow = <T>(fn: () => Promise<T> | T) => expect.poll(fn, { timeout: 30_000 });

const focusedName = (page: Page) => page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.name ?? '');

/** A code of the authenticator, of a 30 s step that will not end in the next 3 s. */
async function code(key: Buffer): Promise<string> {
  const left = 30 - ((Date.now() / 1000) % 30);
  if (left < 3) await new Promise((r) => setTimeout(r, left * 1000 + 100));
  return totp(key, Date.now() / 1000);
}

describe('signing in by keyboard', () => {
  for (const [locale, words] of [
    ['en', { setTitle: 'Choose your password', signIn: 'Sign in', tfa: 'Set up two-factor authentication', types: 'Device types' }],
    ['nl', { setTitle: 'Kies je wachtwoord', signIn: 'Inloggen', tfa: 'Tweestapsverificatie instellen', types: 'Apparaattypes' }],
  ] as const) {
    it(`${locale}: invitation link → password → enforced second factor set up → sign out → sign in with the code`, async () => {
      const admin = await api.login('connectivity');
      const { email, link } = await invite(admin, locale);
      // enforced once the admin (a machine account without a second factor) has invited the person
      await ctx.db.query(`UPDATE environment SET settings = settings || '{"enforceTwoFactorAuthentication": true}' WHERE hash_id = $1`, [
        admin.environmentHashId,
      ]);
      expect(link.startsWith(`${base}/#/set-password?token=`)).toBe(true);
      const c = await openConsole(browser, base, { locale });
      const { page } = c;

      // the mailed link: the password page, its first field focused
      await page.goto(link);
      await slow(() => page.locator('h1').textContent()).toBe(words.setTitle);
      await slow(() => focusedName(page)).toBe('password');
      await typeThen(page, PASSWORD, 'Tab');
      await typeThen(page, PASSWORD, 'Enter');
      await page.getByRole('status').waitFor({ timeout: 30_000 });
      expect(await axeFindings(page)).toEqual([]);

      // sign in: address, Tab, password, Enter
      await page.goto(`${base}/#/`);
      await slow(() => page.locator('h1').textContent()).toBe(words.signIn);
      await slow(() => focusedName(page)).toBe('email');
      await typeThen(page, email, 'Tab');
      await typeThen(page, PASSWORD, 'Enter');

      // the environment enforces a second factor this person lacks: its set-up is the only page
      await slow(() => page.locator('h2').first().textContent()).toBe(words.tfa);
      expect(await axeFindings(page)).toEqual([]);
      await screenshot(page, `second-factor-setup-${locale}`);
      await page.keyboard.press('Tab');
      await slow(() => focusedName(page)).toBe('password');
      await typeThen(page, PASSWORD, 'Enter');
      const secret = await page.getByTestId('totp-secret').textContent();
      const key = base32Decode(secret!.trim());
      await slow(() => focusedName(page)).toBe('code');
      await typeThen(page, await code(key), 'Enter');
      // set up: the person's pages open
      await slow(() => page.locator('main h1').textContent()).toBe(words.types);

      // sign out (Tab to the button, Enter), then in again: now the code is asked for after the password
      await page.getByRole('button', { name: locale === 'en' ? 'Sign out' : 'Uitloggen' }).focus();
      await page.keyboard.press('Enter');
      await slow(() => page.locator('h1').textContent()).toBe(words.signIn);
      await typeThen(page, email, 'Tab');
      await typeThen(page, PASSWORD, 'Enter');
      await page.locator('input[name=code]').waitFor({ timeout: 30_000 });
      await slow(() => focusedName(page)).toBe('code');
      // a wrong code is refused with a message, and the person stays on the form
      await typeThen(page, String((Number(await code(key)) + 1) % 1_000_000).padStart(6, '0'), 'Enter');
      await page.getByRole('alert').waitFor({ timeout: 30_000 });
      await page.locator('input[name=code]').fill('');
      await page.locator('input[name=code]').focus();
      // the step after the one used at enabling: a code is good once
      await new Promise((r) => setTimeout(r, 30_000 - (Date.now() % 30_000) + 200));
      await typeThen(page, totp(key, Date.now() / 1000), 'Enter');
      await slow(() => page.locator('main h1').textContent()).toBe(words.types);
      expect(c.foreign).toEqual([]);
      expect(c.errors.filter((e) => !/40[13]/.test(e))).toEqual([]);
      await c.context.close();
    });
  }
});

describe('a person of two environments', () => {
  it("switches between them, lands on each one's pages, and a request of another origin with the cookie is refused", async () => {
    const supplier = await api.login('connectivity');
    const monitoring = await api.login('monitoring', ['READ', 'USERS', 'ENVIRONMENT_ADMIN']);
    await ctx.db.query('UPDATE environment SET name = $2 WHERE hash_id = $1', [supplier.environmentHashId, 'Acme supplier']);
    await ctx.db.query('UPDATE environment SET name = $2 WHERE hash_id = $1', [monitoring.environmentHashId, 'Waterworks <img src=x onerror=alert(1)>']);
    const email = `two-${randomBytes(4).toString('hex')}@example.com`;
    expect((await supplier.request('POST', '/user/', { name: 'Two Places', email, rights: ['ENVIRONMENT_ADMIN'] })).status).toBe(200);
    const [invitation] = await until(
      async () => smtp.to(email),
      (m) => m.length === 1,
      'the invitation',
    );
    expect((await monitoring.request('POST', '/user/', { name: 'Two Places', email, rights: ['READ'] })).status).toBe(200);
    const c = await openConsole(browser, base);
    const { page } = c;
    await page.goto(consoleLink(invitation.text));
    await page.locator('input[name=password]').fill(PASSWORD);
    await page.locator('input[name=repeat]').fill(PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('status').waitFor({ timeout: 30_000 });
    await page.goto(`${base}/#/`);
    await page.locator('input[name=email]').fill(email);
    await page.locator('input[name=password]').fill(PASSWORD);
    await page.keyboard.press('Enter');
    await slow(() => page.locator('.env-name').textContent()).toBe('Acme supplier');

    // switch: the select lists both; the monitoring environment's name shows as text, no element made of it
    const select = page.getByLabel('Environment');
    await select.selectOption(monitoring.environmentHashId);
    await slow(() => page.locator('.env-name').textContent()).toBe('Waterworks <img src=x onerror=alert(1)>');
    expect(await page.locator('header img[src=x]').count()).toBe(0);
    await slow(() => page.evaluate(() => location.hash)).toBe('#/map');
    expect(await axeFindings(page)).toEqual([]);

    // the cookie of this session, sent by a page of another origin: refused
    const cookie = (await c.context.cookies()).find((k) => k.name === 'gridgate_session')!;
    expect(cookie.httpOnly).toBe(true);
    expect(cookie.sameSite).toBe('Strict');
    const forged = await fetch(`${base}/user/`, {
      method: 'POST',
      headers: {
        cookie: `gridgate_session=${cookie.value}`,
        origin: 'http://evil.example',
        'x-gridgate-console': '1',
        'api-version': '8',
        'environment-hash-id': monitoring.environmentHashId,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: 'Intruder', email: 'intruder@example.com', rights: ['READ'] }),
    });
    expect(forged.status).toBe(403);
    // and one without the console's header (a plain cross-site form cannot add it)
    const form = await fetch(`${base}/user/`, {
      method: 'POST',
      headers: {
        cookie: `gridgate_session=${cookie.value}`,
        'api-version': '8',
        'environment-hash-id': monitoring.environmentHashId,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: 'Intruder', email: 'intruder@example.com', rights: ['READ'] }),
    });
    expect(form.status).toBe(403);
    expect(c.foreign).toEqual([]);
    await c.context.close();
  });
});

// The console's shell in a real browser, before anyone signs in: the sign-in page and the pages a mailed link
// opens, in both languages and both schemes, by keyboard, with no serious axe finding, no request to another host
// and no error in the page.
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';
import { axeFindings, launchBrowser, openConsole, screenshot } from './browser.ts';

let api: TestApi;
let browser: Browser;
let base: string;

beforeAll(async () => {
  api = await startTestApi();
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`;
  browser = await launchBrowser();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await api?.close();
});

describe('the console before sign-in', () => {
  for (const [locale, heading, scheme] of [
    ['en', 'Sign in', 'light'],
    ['nl', 'Inloggen', 'dark'],
  ] as const) {
    it(`shows the sign-in page in ${locale} (${scheme}) with nothing serious for axe and no foreign request`, async () => {
      const c = await openConsole(browser, base, { locale, colorScheme: scheme });
      await c.page.goto('/');
      await expect.poll(() => c.page.locator('h1').textContent()).toBe(heading);
      expect(await c.page.evaluate(() => document.documentElement.lang)).toBe(locale);
      expect(await c.page.evaluate(() => document.documentElement.dataset.scheme)).toBe(scheme);
      expect(await axeFindings(c.page)).toEqual([]);
      await screenshot(c.page, `sign-in-${scheme}`);
      await c.page.goto('/#/reset-password');
      await expect.poll(() => c.page.locator('h1').textContent()).toBe(locale === 'en' ? 'Reset your password' : 'Wachtwoord opnieuw instellen');
      expect(await axeFindings(c.page)).toEqual([]);
      expect(c.foreign).toEqual([]);
      expect(c.errors.filter((e) => !e.includes('401'))).toEqual([]);
      await c.context.close();
    }, 60_000);
  }

  it('is reached by keyboard: the first tab stops are the address, the password and the button', async () => {
    const c = await openConsole(browser, base);
    await c.page.goto('/');
    await c.page.locator('input[name=email]').waitFor();
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      order.push(await c.page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.name || document.activeElement?.textContent || ''));
      await c.page.keyboard.press('Tab');
    }
    expect(order).toEqual(['email', 'password', 'Sign in']);
    await c.context.close();
  }, 60_000);

  it('cannot be framed by another site', async () => {
    const res = await fetch(`${base}/`);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  });
});

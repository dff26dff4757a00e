// The console's browser tests' kit: Debian's Chromium driven by playwright-core against a started service; every
// request that leaves for another host is refused and recorded (the console must make none), and so is every
// error the page logs (a CSP violation included); axe-core judges each page; screenshots land where docs/console.md
// shows them when SCREENSHOTS=docs, else in .scratch/screenshots.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';
// @ts-expect-error a plain JavaScript module of the scripts (no declaration file)
import { buildConsole } from '../../scripts/build-console.mjs';
import { storeToken } from '../../src/accounts/people/tokens.ts';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Headless Chromium with software WebGL (SwiftShader), which the map needs. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--enable-unsafe-swiftshader', '--use-angle=swiftshader', '--ignore-gpu-blocklist', '--disable-dev-shm-usage'],
  });
}

export interface ConsolePage {
  page: Page;
  context: BrowserContext;
  /** requests the page tried to make to another origin (refused) */
  foreign: string[];
  /** errors the page logged or threw (CSP violations show here) */
  errors: string[];
}

/** A fresh browser context (cold cache, no cookies) on the service at `base`. */
export async function openConsole(
  browser: Browser,
  base: string,
  options: { locale?: 'en' | 'nl'; colorScheme?: 'light' | 'dark' } = {},
): Promise<ConsolePage> {
  const context = await browser.newContext({
    baseURL: base,
    locale: options.locale === 'nl' ? 'nl-NL' : 'en-GB',
    colorScheme: options.colorScheme ?? 'light',
    viewport: { width: 1280, height: 860 },
  });
  const origin = new URL(base).origin;
  const foreign: string[] = [];
  const errors: string[] = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('data:') || url.startsWith('blob:') || new URL(url).origin === origin) return route.continue();
    foreign.push(url);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
  });
  // the console's "Failed to load resource" names no address: the refused request itself is listed beside it
  page.on('response', (res) => {
    if (res.status() >= 400) errors.push(`response: ${res.status()} ${res.request().method()} ${new URL(res.url()).pathname}`);
  });
  return { page, context, foreign, errors };
}

const AXE = readFileSync(path.join(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8');

export interface AxeFinding {
  id: string;
  impact: string;
  help: string;
  nodes: string[];
}

/**
 * axe-core's serious and critical findings on the page as it is now (WCAG 2 A and AA rules). axe is evaluated
 * through the DevTools protocol: the page's CSP, rightly, lets no injected script tag run.
 */
export async function axeFindings(page: Page): Promise<AxeFinding[]> {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: { run(ctx: Document, o: unknown): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> };
      }
    ).axe;
    const r = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')) }));
  });
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** A PNG of the page: docs/console/<name>.png with SCREENSHOTS=docs (what docs/console.md shows), else .scratch/screenshots. */
export async function screenshot(page: Page, name: string): Promise<string> {
  const dir = process.env.SCREENSHOTS === 'docs' ? path.join(ROOT, 'docs/console') : path.join(ROOT, '.scratch/screenshots');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: false });
  return file;
}

/** The link in a mail's text that opens the console (an invitation or a password reset). */
export function consoleLink(text: string): string {
  const m = text.match(/https?:\/\/\S+#\/\S+/);
  if (!m) throw new Error(`no console link in: ${text}`);
  return m[0];
}

/** Errors the page logged, but the 401 of asking for the session before anyone signed in. */
export const pageErrors = (c: ConsolePage): string[] => c.errors.filter((e) => !/401/.test(e));

/** Signs `email` in through the sign-in form and waits for the signed-in frame (scrypt takes its time on a loaded machine). */
export async function signIn(c: ConsolePage, email: string, password: string): Promise<void> {
  await c.page.goto('/');
  await c.page.locator('input[name=email]').waitFor({ timeout: 30_000 });
  await c.page.locator('input[name=email]').fill(email);
  await c.page.locator('input[name=password]').fill(password);
  await c.page.locator('button[type=submit]').click();
  await c.page.locator('header.top nav').waitFor({ timeout: 90_000 });
}

/** The page in both schemes (the header's button switches them), axe-core in each, a screenshot of each: `<name>-light`, `<name>-dark`. */
export async function screenshotsInBothSchemes(page: Page, name: string): Promise<void> {
  await page.evaluate(() => scrollTo(0, 0));
  expect(await axeFindings(page)).toEqual([]);
  await screenshot(page, `${name}-light`);
  await page.getByRole('button', { name: 'Dark' }).click();
  await expect.poll(() => page.evaluate(() => document.documentElement.dataset.scheme)).toBe('dark');
  expect(await axeFindings(page)).toEqual([]);
  await screenshot(page, `${name}-dark`);
  await page.getByRole('button', { name: 'Light' }).click();
}

/** Builds dist/console when a source changed; another build of the same tree may hold Vite's lock: waits for it, then builds what is still stale. */
export async function buildConsoleOnce(): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      (buildConsole as (o: { quiet: boolean }) => boolean)({ quiet: true });
      return;
    } catch (err) {
      if (attempt === 6) throw err;
      await new Promise((r) => setTimeout(r, 10_000));
    }
  }
}

/** The answer's body, or an error naming its status and body when it is not a success. */
export async function ok<T>(r: Promise<{ status: number; body: T }>): Promise<T> {
  const answer = await r;
  if (answer.status >= 300) throw new Error(`${answer.status}: ${JSON.stringify(answer.body)}`);
  return answer.body;
}

/** The console built, the API (test/helpers.ts startTestApi) listening on a port of 127.0.0.1, and its origin. */
export async function startConsoleApi(): Promise<{ api: TestApi; base: string }> {
  await buildConsoleOnce();
  const api = await startTestApi();
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  return { api, base: `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}` };
}

/**
 * A person of `admin`'s environment with `rights`, who chose `password` (the invitation's token stored as its mail
 * would carry it); their email, `<prefix>.<random>@example.com`.
 */
export async function addPerson(
  api: TestApi,
  base: string,
  admin: ApiClient,
  person: { prefix: string; name: string; rights: string[]; password: string; locale?: 'en' | 'nl' },
): Promise<string> {
  const email = `${person.prefix}.${randomBytes(4).toString('hex')}@example.com`;
  await ok(admin.request('POST', '/user/', { name: person.name, email, rights: person.rights, locale: person.locale ?? 'en' }));
  const token = randomBytes(32).toString('base64url');
  await storeToken(api.ctx.db, token, email, 'invitation', null);
  const set = await fetch(`${base}/authentication/person/set-password`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '8', 'x-gridgate-console': '1' },
    body: JSON.stringify({ token, password: person.password }),
  });
  expect(set.status, await set.text()).toBeLessThan(300);
  return email;
}

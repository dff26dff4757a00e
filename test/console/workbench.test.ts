// The supplier's code workbench in a real browser against the whole service (API, gateway, worker, mail): a person
// invited by mail (a real SMTP server) chooses a password and signs in, creates a device type, types its event
// handler into the editor (Monaco, checked against the service's own typings as it is typed), tries it (a throw on a
// line is marked at that line), replays a change on stored device requests (sent over the HTTPS-PSK port) before
// saving it, and saves; the saved handler is what the API answers. Also in Dutch; axe finds nothing serious on any
// page, the page asks no other host and logs no error (a CSP violation would show).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
// @ts-expect-error a plain JavaScript module of the scripts (no declaration file)
import { buildConsole } from '../../scripts/build-console.mjs';
import { openDb, type Db } from '../../src/app/db.ts';
import { TestSmtp } from '../notifications/smtp.ts';
import { environmentClient, type RestClient } from '../support/provision.ts';
import { pskHttpRequest } from '../support/psk-client.ts';
import { freePort, killServiceProcesses, startProcess, type ServiceProcess } from '../support/service-process.ts';
import { until } from '../support/until.ts';
import { axeFindings, consoleLink, launchBrowser, openConsole, screenshot, type ConsolePage, pageErrors, signIn as signInAs } from './browser.ts';

const PASSWORD = 'a long enough password 42';
const DIST = path.resolve(import.meta.dirname, '../../dist/console');
const smtp = new TestSmtp();
let service: ServiceProcess;
let db: Db;
let machine: RestClient;
let browser: Browser;
let email: string;

/** The console built; another build running at the same time (another test file) is waited for. */
async function built(): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      (buildConsole as (o: { quiet: boolean }) => boolean)({ quiet: true });
      if (existsSync(path.join(DIST, 'index.html'))) return;
    } catch (err) {
      if (i > 30) throw err;
    }
    await new Promise((r) => setTimeout(r, 3000));
  }
}

beforeAll(async () => {
  await smtp.start();
  const DATABASE_URL = process.env.DATABASE_URL!;
  const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-workbench-'));
  // the service reads the built console once, at its start: a build elsewhere emptying dist/console then is started over
  for (let attempt = 0; ; attempt++) {
    await built();
    const apiPort = await freePort();
    service = await startProcess({
      DATABASE_URL,
      DATA_DIR,
      API_PORT: String(apiPort),
      SMTP_URL: smtp.url(),
      PUBLIC_URL: `http://127.0.0.1:${apiPort}`,
      MAIL_RETRY_BASE_MS: '100',
      DRY_RUN_BURST: '100',
      DRY_RUNS_PER_MINUTE: '600',
    });
    if ((await fetch(`${service.base}/`)).status === 200 || attempt >= 3) break;
    service.child.kill('SIGKILL');
    await service.exited;
  }
  db = await openDb({ databaseUrl: DATABASE_URL, dataDir: DATA_DIR, migrate: false });
  machine = await environmentClient(db, service.base, 'connectivity', 'Workbench supplier', ['ENVIRONMENT_ADMIN']);
  browser = await launchBrowser();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await db?.close();
  killServiceProcesses();
  await smtp.stop();
});

const HANDLER_V1 = `function handle(args: Arguments, exec: Exec): Result {
  if (args.event.type !== 'incomingRequest') return;
  exec.addLog('version 1');
  return { statusCode: 200, body: { version: 1 } };
}
`;
// answers differently: what the comparison before saving must show
const HANDLER_V2 = HANDLER_V1.replace("'version 1'", "'version 2'").replace('statusCode: 200, body: { version: 1 }', 'statusCode: 201, body: { version: 2 }');

/** Problems the editor lists below itself. */
const problems = (page: Page) => page.locator('.code-editor .problems li');
const errorsCount = async (page: Page) => Number(await page.locator('.code-editor').getAttribute('data-errors'));

/** The editor, loaded (Monaco, the typings, the TypeScript worker), focused with its text selected. */
async function editorReady(page: Page): Promise<void> {
  await page.locator('.code-host[data-ready="true"] .monaco-editor').waitFor({ timeout: 30_000 });
}

/** Focus in the editor (a click on its text, forced: a hover of Monaco's may lie over it, and the click would wait for it). */
async function focusEditor(page: Page): Promise<void> {
  await page.locator('.code-host').scrollIntoViewIfNeeded();
  await page.locator('.code-host .monaco-editor').click({ force: true, position: { x: 120, y: 12 } });
}

/** Replaces the editor's text by a paste (Monaco would auto-close and auto-indent text typed key by key). */
async function replaceCode(page: Page, text: string): Promise<void> {
  // the lines as shown (Monaco reuses line elements: their order is their top, not the DOM's)
  const shown = () =>
    page.evaluate(() =>
      [...document.querySelectorAll<HTMLElement>('.code-host .view-line')]
        .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
        .map((l) => l.textContent ?? '')
        .join('')
        .replace(/\s+/g, ''),
    );
  for (let attempt = 0; attempt < 3; attempt++) {
    await page.evaluate((t) => navigator.clipboard.writeText(t), text);
    await focusEditor(page);
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Control+V');
    try {
      await expect.poll(shown, { timeout: 5000 }).toBe(text.replace(/\s+/g, ''));
      return;
    } catch (err) {
      if (attempt === 2) throw err;
    }
  }
}

/** Goes to line `n` of the editor, at the start of its text. */
async function toLine(page: Page, n: number): Promise<void> {
  await focusEditor(page);
  await page.keyboard.press('Control+Home');
  for (let i = 1; i < n; i++) await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Home');
}

/** The sign-in form in the page's language (its heading), then the shared sign-in. */
async function signIn(c: ConsolePage, heading: string): Promise<void> {
  await c.page.goto('/');
  await expect.poll(() => c.page.locator('h1').textContent(), { timeout: 20_000 }).toBe(heading);
  await signInAs(c, email, PASSWORD);
}

/** A line on stderr when WORKBENCH_STEPS is set: where a long browser test is. */
let current: Page | null = null;
const step = (what: string) => {
  if (process.env.WORKBENCH_STEPS) {
    process.stderr.write(`workbench: ${what}\n`);
    void current?.screenshot({ path: path.resolve(import.meta.dirname, '../../.scratch/screenshots/workbench-step.png') }).catch(() => undefined);
  }
};

describe("the supplier's code workbench", () => {
  let deviceTypeHashId: string;

  it('invites a person by mail; the link sets the password in the browser', async () => {
    email = `supplier.${randomBytes(4).toString('hex')}@example.com`;
    const add = await machine.request('POST', '/user/', { name: 'Sam Supplier', email, rights: ['ENVIRONMENT_ADMIN'] });
    expect(add.status).toBe(200);
    const [mail] = await until(
      async () => smtp.to(email),
      (m) => m.length > 0,
      `an invitation to ${email}`,
    );
    const link = consoleLink(mail.text);
    expect(link.startsWith(service.base)).toBe(true);

    const c = await openConsole(browser, service.base);
    onTestFailed(async () => {
      await screenshot(c.page, 'workbench-failure').catch(() => undefined);
      process.stderr.write(`link ${link}; page errors: ${JSON.stringify(c.errors)}\n`);
    });
    await c.page.goto(link.slice(service.base.length));
    await expect.poll(() => c.page.locator('h1').textContent(), { timeout: 20_000 }).toBe('Choose your password');
    await c.page.locator('input[name=password]').fill(PASSWORD);
    await c.page.locator('input[name=repeat]').fill(PASSWORD);
    await c.page.locator('button[type=submit]').click();
    await c.page.getByRole('status').filter({ hasText: 'Your password is set' }).waitFor();
    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
    await c.context.close();
  }, 60_000);

  it("creates a device type, checks its handler while it is typed, marks a dry run's throw at its line, compares before saving and saves", async () => {
    const c = await openConsole(browser, service.base);
    const { page } = c;
    page.setDefaultTimeout(30_000);
    await c.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: service.base });
    current = page;
    onTestFailed(async () => {
      await screenshot(page, 'workbench-failure').catch(() => undefined);
      process.stderr.write(`page errors: ${JSON.stringify(c.errors)}\n`);
    });
    await signIn(c, 'Sign in');
    await expect.poll(() => page.locator('h1').textContent(), { timeout: 20_000 }).toBe('Device types');
    expect(await axeFindings(page)).toEqual([]);

    step('create: a name');
    // create: a name and the starter handler
    await page.getByRole('button', { name: 'New' }).click();
    await page.locator('form.create input[name=name]').fill('Thermometer');
    await page.getByRole('button', { name: 'Create' }).click();
    await expect.poll(() => page.locator('h1').textContent(), { timeout: 15_000 }).toBe('Thermometer');
    deviceTypeHashId = page.url().split('/device-types/')[1];
    expect(deviceTypeHashId).toMatch(/^[a-z0-9]+$/);
    await editorReady(page);
    // the starter compiles against the typings: no problem listed once TypeScript has looked
    await page.waitForTimeout(1500);
    expect(await problems(page).allTextContents()).toEqual([]);

    step('the handler, then a type error');
    // the handler, then a type error typed key by key: listed below the editor while typing
    await replaceCode(page, HANDLER_V1);
    step('replaced');
    await toLine(page, 3);
    step('at line 3');
    await page.keyboard.press('End');
    await page.keyboard.press('Enter');
    step('typing');
    await page.keyboard.type("const x: number = 'a';", { delay: 15 });
    await page.keyboard.press('Escape');
    step('typed');
    await expect
      .poll(() => problems(page).allTextContents(), { timeout: 20_000 })
      .toContainEqual(expect.stringContaining("Type 'string' is not assignable to type 'number'"));
    const typeError = problems(page).filter({ hasText: "Type 'string' is not assignable" });
    expect(await typeError.getAttribute('data-line')).toBe('4');
    expect(await typeError.getAttribute('data-source')).toBe('typescript');
    // completions from the typings: exec. offers what an event handler's Exec has (parseReport, not a parser's)
    await page.keyboard.press('Enter');
    await page.keyboard.type('exec.', { delay: 50 });
    const suggestions = page.locator('.suggest-widget.visible .monaco-list-row');
    await suggestions.filter({ hasText: 'parseReport' }).first().waitFor({ timeout: 20_000 });
    expect(await suggestions.filter({ hasText: 'addLog' }).count()).toBe(1);
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+Shift+K');
    step('fixed: the line gone');
    // fixed: the line gone, no error left
    await focusEditor(page);
    await toLine(page, 4);
    await page.keyboard.press('Control+Shift+K');
    await expect.poll(() => errorsCount(page), { timeout: 20_000 }).toBe(0);

    step('a dry run whose handler throws');
    // a dry run whose handler throws on line 3: the failure is marked at line 3
    await replaceCode(page, HANDLER_V1.replace("exec.addLog('version 1');", "if (args.device) throw new Error('boom');"));
    await page.getByRole('radio', { name: 'an event I type' }).check();
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    const runProblem = problems(page).filter({ hasText: 'boom' });
    await runProblem.waitFor({ timeout: 20_000 });
    expect(await runProblem.getAttribute('data-line')).toBe('3');
    expect(await runProblem.getAttribute('data-source')).toBe('run');
    expect(await page.locator('.run-error').textContent()).toMatch(/line 3, column \d+: .*boom/);
    // the problem list puts the cursor on it
    await runProblem.locator('button').click();
    expect(await page.evaluate(() => document.activeElement?.closest('.code-host') !== null)).toBe(true);

    step('fixed and tried again');
    // fixed and tried again: the answer the device would get
    await replaceCode(page, HANDLER_V1);
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expect.poll(() => page.locator('.result .run-outcome').getAttribute('data-failed'), { timeout: 20_000 }).toBe('false');
    expect(await page.locator('.result').textContent()).toContain('Status 200');
    expect(await page.locator('.result .log').textContent()).toContain('version 1');
    await expect.poll(() => problems(page).count(), { timeout: 20_000 }).toBe(0);
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    expect((await machine.request<{ eventHandler: string }>('GET', `/device-type/${deviceTypeHashId}`)).body.eventHandler).toBe(HANDLER_V1);

    step('stored requests:');
    // stored requests: a PSK device of this type sends three over the HTTPS device port
    const identity = `thermo-${randomBytes(4).toString('hex')}`;
    const key = randomBytes(16);
    const device = await machine.request('POST', '/device/psk', {
      supplierDeviceIdentifier: identity,
      deviceTypeHashId,
      psk: key.toString('hex'),
      pskIdentity: identity,
    });
    expect(device.status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const answer = await pskHttpRequest({ port: service.httpsPort, identity, key, path: `/t${i}`, body: JSON.stringify({ temperature: 20 + i }) });
      expect(answer?.status).toBe(200);
    }
    await until(
      () => machine.request<{ rows: unknown[] }>('GET', `/supplier-activity/?deviceTypeHashId=${deviceTypeHashId}`),
      (r) => r.body.rows.length >= 3,
      'three stored requests',
    );

    step('a change, tried');
    // a change, tried on a stored request, then reviewed against all of them
    await page.reload();
    await editorReady(page);
    await page.locator('#try-activity').waitFor();
    await replaceCode(page, HANDLER_V2);
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expect.poll(() => page.locator('.result').textContent(), { timeout: 20_000 }).toContain('Status 201');
    await page.getByRole('button', { name: 'Review changes' }).click();
    const compare = page.locator('section.compare');
    await compare.waitFor({ timeout: 30_000 });
    expect(await compare.locator('[data-summary=total] strong').textContent()).toBe('3');
    expect(await compare.locator('[data-summary=differing] strong').textContent()).toBe('3');
    expect(await compare.locator('[data-summary=newlyFailing] strong').textContent()).toBe('0');
    expect(await compare.locator('.compare-run[data-differs=true]').count()).toBe(3);
    const first = compare.locator('.compare-run').first();
    expect(await first.locator('summary').textContent()).toContain('answer');
    expect(await first.locator('.side').nth(0).textContent()).toContain('Status 200');
    expect(await first.locator('.side').nth(1).textContent()).toContain('Status 201');
    expect(await axeFindings(page)).toEqual([]);
    await compare.locator('h2').evaluate((h) => h.scrollIntoView({ block: 'start' }));
    await screenshot(page, 'device-type-compare');

    step('saved from the comparison');
    // saved from the comparison: the API answers the editor's text
    await compare.getByRole('button', { name: 'Save this handler' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    expect((await machine.request<{ eventHandler: string }>('GET', `/device-type/${deviceTypeHashId}`)).body.eventHandler).toBe(HANDLER_V2);

    step('the editor page, light and dark');
    // the editor page, light and dark, with nothing serious for axe
    await page.evaluate(() => window.scrollTo(0, 0));
    expect(await axeFindings(page)).toEqual([]);
    await screenshot(page, 'device-type-editor-light');
    await page.getByRole('button', { name: 'Dark' }).click();
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.scheme)).toBe('dark');
    await expect.poll(() => page.locator('.code-host .monaco-editor').getAttribute('class')).toMatch(/dark/);
    expect(await axeFindings(page)).toEqual([]);
    await screenshot(page, 'device-type-editor-dark');

    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
    await c.context.close();
  }, 240_000);

  it('reads in Dutch: sign-in, the device types and the editor', async () => {
    const c = await openConsole(browser, service.base, { locale: 'nl', colorScheme: 'dark' });
    const { page } = c;
    page.setDefaultTimeout(30_000);
    await signIn(c, 'Inloggen');
    await page.locator('header.top select').last().selectOption('nl');
    await expect.poll(() => page.locator('h1').textContent(), { timeout: 15_000 }).toBe('Apparaattypes');
    expect(await page.evaluate(() => document.documentElement.lang)).toBe('nl');
    await page.getByRole('link', { name: 'Thermometer' }).click();
    await expect.poll(() => page.locator('h1').textContent()).toBe('Thermometer');
    await editorReady(page);
    expect(await page.locator('#try-title').textContent()).toBe('Proberen');
    await page.getByRole('button', { name: 'Wijzigingen bekijken' }).waitFor();
    expect(await page.locator('.problems-title').textContent()).toBe('Problemen: 0');
    expect(await axeFindings(page)).toEqual([]);
    await screenshot(page, 'device-type-editor-nl-dark');
    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
    await c.context.close();
  }, 120_000);

  it("tries a report type's parser, a webhook's identifier and a certificate's identifier in the same editor", async () => {
    const parser = await machine.request('POST', '/supplier-report-type/', {
      name: 'Temperature',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      parser:
        'function handle(args: Arguments, exec: Exec): Result {\n  exec.addLog(args.payload);\n  return { generatedAt: new Date(), measurements: [] };\n}\n',
    });
    expect(parser.status).toBe(200);
    const c = await openConsole(browser, service.base);
    const { page } = c;
    page.setDefaultTimeout(30_000);
    await signIn(c, 'Sign in');
    await expect.poll(() => page.locator('h1').textContent(), { timeout: 20_000 }).toBe('Device types');

    await page.getByRole('link', { name: 'Report types' }).click();
    await expect.poll(() => page.locator('h1').textContent()).toBe('Report types');
    expect(await axeFindings(page)).toEqual([]);
    await page.getByRole('link', { name: 'Temperature' }).click();
    await editorReady(page);
    await page.locator('#try-payload').fill('{"t": 21}');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expect.poll(() => page.locator('.result .log').textContent(), { timeout: 20_000 }).toContain('{"t": 21}');
    expect(await axeFindings(page)).toEqual([]);
    await screenshot(page, 'report-type-editor-light');

    // a webhook made in the console: its URL shown, its identifier tried on a request body
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('button', { name: 'New' }).click();
    await page.locator('form.create input[name=name]').fill('Partner cloud');
    await page.locator('#starter-type').selectOption(deviceTypeHashId);
    await page.getByRole('button', { name: 'Create' }).click();
    await expect.poll(() => page.locator('h1').textContent(), { timeout: 15_000 }).toBe('Partner cloud');
    expect(await page.locator('.webhook-url dd code').textContent()).toMatch(/^https:\/\/.+\/webhook\//);
    await editorReady(page);
    await page.waitForTimeout(1500);
    expect(await problems(page).allTextContents()).toEqual([]);
    await page.locator('#try-body').fill('{"deviceId": "partner-7"}');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expect
      .poll(() => page.locator('.result').textContent(), { timeout: 20_000 })
      .toContain(`Identifies device partner-7 of device type ${deviceTypeHashId}`);
    await page.locator('#try-body').fill('{}');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    const thrown = problems(page).filter({ hasText: 'deviceId is missing' });
    await thrown.waitFor({ timeout: 20_000 });
    expect(await thrown.getAttribute('data-line')).toBe('8');
    expect(await axeFindings(page)).toEqual([]);
    await screenshot(page, 'webhook-editor-light');

    await page.getByRole('link', { name: 'Certificates' }).click();
    await expect.poll(() => page.locator('h1').textContent()).toBe('Certificates');
    expect(await axeFindings(page)).toEqual([]);
    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
    await c.context.close();
  }, 180_000);
});

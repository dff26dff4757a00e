// A supplier's devices in a real browser against the whole service (API, gateway, worker, mail): a person invited
// by mail (a real SMTP server) chooses a password and signs in; finds a PSK device in the devices list; opens its
// page (counters as charts, its live log); the device reports over TLS-PSK with openssl and the activity appears in
// the live log without a reload; a command sent from the console reaches the device in its next answer. The live
// log page; the people page in both environment types (invite, change rights, remove; the person's own alerts).
// axe finds nothing serious on any page, the page asks no other host and logs no error.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error a plain JavaScript module of the scripts (no declaration file)
import { buildConsole } from '../../scripts/build-console.mjs';
import { openDb, type Db } from '../../src/app/db.ts';
import { TestSmtp } from '../notifications/smtp.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { environmentClient, type RestClient } from '../support/provision.ts';
import { freePort, killServiceProcesses, startProcess, type ServiceProcess } from '../support/service-process.ts';
import { until } from '../support/until.ts';
import { axeFindings, consoleLink, launchBrowser, openConsole, type ConsolePage, pageErrors, screenshotsInBothSchemes, signIn as signInAs } from './browser.ts';

const PASSWORD = 'a long enough password 42';
const XSS = '<img src=x onerror=alert(1)>';
const smtp = new TestSmtp();
let service: ServiceProcess;
let db: Db;
let machine: RestClient;
let browser: Browser;
let email: string;
let device: { hashId: string; identity: string; key: string };
let deviceTypeHashId: string;
let commandTypeHashId: string;

// the handler a supplier writes: every answer carries the device's pending commands, which are then marked sent
const HANDLER = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  const event = args.event;
  if (event.type !== 'incomingRequest') return;
  const pending = args.scheduledCommands;
  pending.forEach((c) => exec.markCommandAsSent(c.command.hashId));
  exec.addLog('contact on ' + event.webRequest.url.path + ' with ' + pending.length + ' pending');
  return { statusCode: 200, body: { commands: pending.map((c) => ({ id: c.command.hashId, type: c.commandType.hashId, fields: c.command.fields })) } };
}`;

const ROOT = path.resolve(import.meta.dirname, '../..');

/** dist/console whole: its index.html and every asset it names (another build may be emptying it right now). */
function consoleComplete(): boolean {
  const index = path.join(ROOT, 'dist/console/index.html');
  if (!existsSync(index)) return false;
  const assets = [...readFileSync(index, 'utf8').matchAll(/(?:src|href)="\/(assets\/[^"]+)"/g)].map((m) => m[1]);
  return assets.length > 0 && assets.every((a) => existsSync(path.join(ROOT, 'dist/console', a)));
}

/**
 * The service, started once the console is built; it reads the console once at start, so a start while another
 * build emptied dist/console would serve "not built": then it is started again.
 */
async function startWithConsole(env: Record<string, string>): Promise<ServiceProcess> {
  for (let attempt = 0; ; attempt++) {
    for (let i = 0; !consoleComplete() || i === 0; i++) {
      try {
        (buildConsole as (o: { quiet: boolean }) => boolean)({ quiet: true });
      } catch {
        // another Vite build holds the project's lock: wait for it
      }
      if (i > 300) throw new Error('dist/console never became whole');
      if (!consoleComplete()) await new Promise((r) => setTimeout(r, 1000));
    }
    const apiPort = await freePort();
    const svc = await startProcess({ ...env, API_PORT: String(apiPort), PUBLIC_URL: `http://127.0.0.1:${apiPort}` });
    const index = await (await fetch(`${svc.base}/`)).text();
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(index)?.[1];
    if (script && (await fetch(`${svc.base}${script}`)).status === 200) return svc;
    if (attempt >= 3) throw new Error(`the service serves no console: ${index.slice(0, 200)}`);
    svc.child.kill('SIGKILL');
    await svc.exited;
  }
}

beforeAll(async () => {
  await smtp.start();
  const DATABASE_URL = process.env.DATABASE_URL!;
  const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-devices-'));
  service = await startWithConsole({ DATABASE_URL, DATA_DIR, SMTP_URL: smtp.url(), MAIL_RETRY_BASE_MS: '100' });
  db = await openDb({ databaseUrl: DATABASE_URL, dataDir: DATA_DIR, migrate: false });
  machine = await environmentClient(db, service.base, 'connectivity', 'Devices supplier', ['ENVIRONMENT_ADMIN']);

  const commandType = await machine.request('POST', '/command-type/', {
    name: 'Open valve',
    fieldConfigurations: [{ key: 'position', name: 'Position', type: 'integer' }],
  });
  expect(commandType.status).toBe(200);
  commandTypeHashId = commandType.body.hashId;
  const type = await machine.request('POST', '/device-type/', {
    name: 'Valve',
    eventHandler: HANDLER,
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [],
    commandTypeHashIds: [commandTypeHashId],
  });
  expect(type.status, JSON.stringify(type.body)).toBe(200);
  deviceTypeHashId = type.body.hashId;
  const identity = `valve-${randomBytes(4).toString('hex')}`;
  const key = randomBytes(16).toString('hex');
  const added = await machine.request('POST', '/device/psk', { supplierDeviceIdentifier: identity, deviceTypeHashId, psk: key, pskIdentity: identity });
  expect(added.status).toBe(200);
  device = { hashId: added.body.hashId, identity, key };
  const named = await machine.request('POST', '/device/psk', { supplierDeviceIdentifier: XSS, deviceTypeHashId, psk: key, pskIdentity: `xss-${identity}` });
  expect(named.status).toBe(200);
  browser = await launchBrowser();
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await db?.close();
  killServiceProcesses();
  await smtp.stop();
});

/** The device reports over TLS-PSK with openssl s_client; the handler's answer. */
async function report(
  pathname: string,
  body: object,
): Promise<{ status: number; body: { commands: { id: string; type: string; fields: Record<string, unknown> }[] } }> {
  const out = await opensslPsk({
    port: service.httpsPort,
    identity: device.identity,
    keyHex: device.key,
    input: httpRequestText('POST', pathname, JSON.stringify(body)),
  });
  const res = parseHttpResponse(out.stdout);
  return { status: res.status, body: JSON.parse(res.body) };
}

async function open(page: Page, hash: string, heading: string): Promise<void> {
  await page.goto(`/#${hash}`);
  await expect.poll(() => page.locator('main h1').textContent(), { timeout: 15_000 }).toBe(heading);
}

const signIn = (c: ConsolePage) => signInAs(c, email, PASSWORD);
const screenshots = screenshotsInBothSchemes;

describe("a supplier's devices in the console", () => {
  it('invites a person by mail; the link sets the password in the browser', async () => {
    email = `devices.${randomBytes(4).toString('hex')}@example.com`;
    const add = await machine.request('POST', '/user/', { name: 'Dana Devices', email, rights: ['ENVIRONMENT_ADMIN'] });
    expect(add.status).toBe(200);
    const [mail] = await until(
      async () => smtp.to(email),
      (m) => m.length > 0,
      `an invitation to ${email}`,
    );
    const link = consoleLink(mail.text);
    const c = await openConsole(browser, service.base);
    await c.page.goto(link.slice(service.base.length));
    await expect.poll(() => c.page.locator('h1').textContent()).toBe('Choose your password');
    await c.page.locator('input[name=password]').fill(PASSWORD);
    await c.page.locator('input[name=repeat]').fill(PASSWORD);
    await c.page.locator('button[type=submit]').click();
    await c.page.getByRole('status').filter({ hasText: 'Your password is set' }).waitFor({ timeout: 90_000 });
    await c.context.close();
  }, 120_000);

  it('finds the device, shows its page, its live activity without reload, and hands a command sent from the console to the device', async () => {
    // a contact before the page opens: the device was online, and the log is not empty on open
    expect((await report('/hello', { hello: 1 })).status).toBe(200);
    await until(
      async () => (await machine.request<{ device: { lastOnlineAt: string | null } }>('GET', `/device/${device.hashId}`)).body.device,
      (d) => d.lastOnlineAt !== null,
      'the device online',
    );

    const c = await openConsole(browser, service.base);
    const { page } = c;
    await signIn(c);
    await open(page, '/devices', 'Devices');
    // a device named as an attacker would: its name is text, no element
    await page.getByLabel('Search devices').fill('onerror');
    await page.getByRole('link', { name: XSS }).waitFor();
    expect(await page.locator('main img').count()).toBe(0);
    await page.getByLabel('Search devices').fill(device.identity.slice(0, 10));
    const link = page.getByRole('link', { name: device.identity });
    await link.waitFor();
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
    const row = page.locator('tbody tr', { has: link });
    expect(await row.locator('td').nth(1).textContent()).toBe('Valve');
    await expect.poll(async () => `${await row.locator('td').nth(2).textContent()} (${await page.locator('tbody').innerText()})`).toMatch(/^(.* ago|now) /);
    expect(await axeFindings(page)).toEqual([]);

    await link.click();
    await expect.poll(() => page.locator('main h1').textContent(), { timeout: 15_000 }).toBe(device.identity);
    // the counters as charts (uPlot), the contact counted; the credentials its request showed
    await page.locator('.time-chart canvas').first().waitFor();
    expect(Number(await page.locator('.totals tr[data-key=contacts] td').nth(1).textContent())).toBeGreaterThanOrEqual(1);
    await page.locator('#credentials-title').waitFor();
    await expect.poll(() => page.locator('section[aria-labelledby=credentials-title]').textContent()).toContain(device.identity);
    // the live log: connected, the earlier contact loaded on open
    await page.getByRole('status').filter({ hasText: 'Live:' }).waitFor();
    await expect.poll(() => page.locator('.live-entry').count()).toBeGreaterThan(0);
    expect(await axeFindings(page)).toEqual([]);

    // the device reports: its activity appears without a reload (the page's own marker survives)
    await page.evaluate(() => {
      (window as unknown as { marker: number }).marker = 42;
    });
    const reportBody = { volts: 3.3, seq: randomBytes(3).toString('hex') };
    const first = await report('/report', reportBody);
    expect(first.body.commands).toEqual([]);
    const entry = page.locator('.live-entry', { hasText: 'POST /report' }).first();
    await entry.waitFor({ timeout: 15_000 });
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
    await entry.locator('summary').click();
    await expect.poll(() => entry.textContent()).toContain(reportBody.seq);
    expect(await entry.textContent()).toContain('contact on /report with 0 pending');
    expect(await axeFindings(page)).toEqual([]);
    await screenshots(page, 'device');

    // a command from the console: pending until the device's next contact, which carries it in its answer
    await page.locator('#commands-title').scrollIntoViewIfNeeded();
    await page.getByLabel('Command type').selectOption(commandTypeHashId);
    await page.getByLabel('Position').fill('40');
    await page.getByRole('button', { name: 'Send command' }).click();
    await page.getByRole('status').filter({ hasText: 'Command added' }).waitFor();
    await expect.poll(() => page.getByRole('heading', { name: 'Pending (1)' }).count()).toBe(1);
    const pending = await machine.request<{ rows: { command: { hashId: string; sentAt: string | null } }[] }>('GET', `/command/?deviceHashId=${device.hashId}`);
    expect(pending.body.rows).toHaveLength(1);
    const commandHashId = pending.body.rows[0].command.hashId;

    const next = await report('/report', { volts: 3.2 });
    expect(next.status).toBe(200);
    expect(next.body.commands).toEqual([{ id: commandHashId, type: commandTypeHashId, fields: { position: 40 } }]);
    // the live log hears it, and the command moves to the sent list without a reload
    await expect.poll(() => page.getByRole('heading', { name: 'Sent (1)' }).count(), { timeout: 15_000 }).toBe(1);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);

    // the live log page: the environment's activities, newest first
    await open(page, '/live', 'Live log');
    await page.getByRole('status').filter({ hasText: 'Live:' }).waitFor();
    await expect.poll(() => page.locator('.live-entry').count()).toBeGreaterThanOrEqual(3);
    const seq = randomBytes(3).toString('hex');
    await report('/report', { seq });
    const newest = page.locator('.live-list > li').first();
    await expect.poll(() => newest.textContent(), { timeout: 15_000 }).toContain('POST /report');
    await newest.locator('summary').click();
    await expect.poll(() => newest.textContent()).toContain(seq);
    // paused: a new activity is held back until resumed
    await page.getByRole('button', { name: 'Pause' }).click();
    const held = randomBytes(3).toString('hex');
    await report(`/held-${held}`, {});
    await page.getByRole('button', { name: 'Resume (1 new)' }).waitFor({ timeout: 15_000 });
    expect(await page.locator('.live-entry', { hasText: `/held-${held}` }).count()).toBe(0);
    await page.getByRole('button', { name: 'Resume (1 new)' }).click();
    await page.locator('.live-entry', { hasText: `/held-${held}` }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    await screenshots(page, 'live-log');

    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
    await c.context.close();
  }, 240_000);

  it("shows the people of the environment and the person's own alert subscriptions", async () => {
    const c = await openConsole(browser, service.base);
    const { page } = c;
    await signIn(c);
    await open(page, '/people', 'People');
    await page.locator(`tr[data-user="${email}"]`).waitFor();
    // alerts: subscribe to the device type's failures, then unsubscribe
    await page.getByLabel('Kind of object').selectOption('deviceType');
    await page.getByLabel('Object', { exact: true }).selectOption(deviceTypeHashId);
    await page.getByRole('button', { name: 'Subscribe' }).click();
    await page.getByRole('button', { name: 'Unsubscribe: Valve' }).waitFor();
    const subs = await until(
      async () => {
        const res = await fetch(`${service.base}/subscription/`, {
          headers: { 'api-version': '8', 'environment-hash-id': `supplier:${machine.environmentHashId}`, cookie: await cookieOf(c) },
        });
        return (await res.json()) as { rows: unknown[] };
      },
      (r) => r.rows.length === 1,
      'the subscription',
    );
    expect(subs.rows).toHaveLength(1);
    expect(await axeFindings(page)).toEqual([]);
    await screenshots(page, 'people-connectivity');
    await page.getByRole('button', { name: 'Unsubscribe: Valve' }).click();
    await page.getByText('You have no subscriptions.').waitFor();
    // in Dutch
    await page.locator('header.top select:has(option[value=nl])').selectOption('nl');
    await expect.poll(() => page.locator('main h1').textContent()).toBe('Mensen');
    await page.getByText('Je hebt geen abonnementen.').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    await open(page, '/live', 'Live log');
    await page.getByRole('status').filter({ hasText: 'Live: nieuwe activiteiten' }).waitFor();
    await page.locator('header.top select:has(option[value=nl])').selectOption('en');
    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
    await c.context.close();
  }, 180_000);

  it('invites a second person, changes their rights and removes them in a monitoring environment', async () => {
    // the same person is a user of a monitoring environment too: they switch to it in the header
    const monitoring = await environmentClient(db, service.base, 'monitoring', 'Devices customer', ['READ', 'USERS', 'ENVIRONMENT_ADMIN']);
    expect((await monitoring.request('POST', '/user/', { name: 'Dana Devices', email, rights: ['READ', 'USERS', 'ENVIRONMENT_ADMIN'] })).status).toBe(200);
    const c = await openConsole(browser, service.base);
    const { page } = c;
    await signIn(c);
    await page.getByLabel('Environment').selectOption(monitoring.environmentHashId);
    await expect.poll(() => page.locator('header.top .env-name').textContent(), { timeout: 60_000 }).toBe('Devices customer');
    await open(page, '/people', 'People');

    const second = `second.${randomBytes(4).toString('hex')}@example.com`;
    const form = page.locator('form.invite');
    await form.getByLabel('Name').fill('Sam Second');
    await form.getByLabel('Email address').fill(second);
    await form.getByRole('checkbox', { name: /^Read/ }).check();
    await form.getByRole('button', { name: 'Send invitation' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Invitation sent to ${second}` })
      .waitFor();
    await until(
      async () => smtp.to(second),
      (m) => m.length > 0,
      `an invitation to ${second}`,
    );
    const row = page.locator(`tr[data-user="${second}"]`);
    await row.waitFor();
    expect(await axeFindings(page)).toEqual([]);

    // rights: Export added
    await row.getByRole('button', { name: 'Change rights: Sam Second' }).click();
    await row.getByRole('checkbox', { name: /^Export/ }).check();
    await row.getByRole('button', { name: 'Save rights' }).click();
    await page.getByRole('status').filter({ hasText: 'Rights of Sam Second saved.' }).waitFor();
    const users = await monitoring.request<{ rows: { user: { hashId: string; email: string | null }; rights: string[] }[] }>('GET', '/user/?rowsPerPage=100');
    const stored = users.body.rows.find((r) => r.user.email === second)!;
    expect(stored.rights.sort()).toEqual(['EXPORT', 'READ']);

    // the person's own issue mails: a level saved
    await page.getByLabel('Mail me about issues').selectOption('2');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page
      .getByRole('status')
      .getByText('Saved.', { exact: true })
      .or(page.getByText('Saved.', { exact: true }))
      .first()
      .waitFor();
    await screenshots(page, 'people-monitoring');

    // removed
    page.once('dialog', (d) => void d.accept());
    await row.getByRole('button', { name: 'Remove: Sam Second' }).click();
    await page.getByRole('status').filter({ hasText: 'Sam Second was removed.' }).waitFor();
    await expect.poll(() => row.count()).toBe(0);
    const after = await monitoring.request<{ rows: { user: { email: string | null } }[] }>('GET', '/user/?rowsPerPage=100');
    expect(after.body.rows.some((r) => r.user.email === second)).toBe(false);
    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
    await c.context.close();
  }, 180_000);
});

async function cookieOf(c: ConsolePage): Promise<string> {
  const cookies = await c.context.cookies();
  const session = cookies.find((k) => k.name === 'gridgate_session');
  return `gridgate_session=${session?.value ?? ''}`;
}

// Console rows of `npm run bench` (group `console`), measured in Debian's Chromium through playwright-core:
//   - the first load on a cold cache (a new browser context each time): from navigation to the sign-in form shown with
//     its button enabled (the shell is usable), and the bytes that crossed the wire (gzip, as the service sends them);
//   - the live log's delay: a person signed in with the live log open; a device sends a request over HTTPS TLS-PSK
//     and the time to its entry appearing in the page (a MutationObserver in the page stamps it) is measured, for
//     `requests` requests one after another. The service runs in 2 processes, api | gateway,worker, so each event
//     crosses Redis pub/sub from the worker to the API as it does in a deployment.
import tls from 'node:tls';
import type { Browser, Page } from 'playwright-core';
// @ts-expect-error a plain JavaScript module of the scripts (no declaration file)
import { buildConsole } from '../scripts/build-console.mjs';
import { consoleLink, launchBrowser } from '../test/console/browser.ts';
import { TestSmtp } from '../test/notifications/smtp.ts';
import { onResponses, postJson } from './http1.ts';
import { api, pct, provision, startBenchService, HTTPS_PORT, type BenchDevice } from './harness.ts';
import type { BenchRow } from './dtls.ts';

const PASSWORD = 'bench console password 42';

/** One cold load of `/`: ms from navigation start to the sign-in button usable, bytes received (headers and encoded bodies). */
async function coldLoad(browser: Browser, base: string): Promise<{ ms: number; bytes: number; requests: number }> {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const sizes: Promise<number>[] = [];
  page.on('requestfinished', (request) =>
    sizes.push(
      request.sizes().then(
        (s) => s.responseHeadersSize + s.responseBodySize,
        () => 0,
      ),
    ),
  );
  await page.goto('/');
  const handle = await page
    .waitForFunction(
      () => {
        const button = document.querySelector<HTMLButtonElement>('main form button[type=submit]');
        return button && !button.disabled && button.offsetParent !== null && document.querySelector('input[name=email]') ? performance.now() : null;
      },
      undefined,
      { polling: 'raf', timeout: 30_000 },
    )
    .catch(async (err: Error) => {
      throw new Error(`${err.message}; the page: ${(await page.content()).slice(0, 600)}`);
    });
  const ms = (await handle.jsonValue()) as number;
  // what the page asks for once it is usable (the session check) belongs to the load too
  await page.waitForLoadState('networkidle');
  const bytes = (await Promise.all(sizes)).reduce((a, b) => a + b, 0);
  await context.close();
  return { ms, bytes, requests: sizes.length };
}

/** A device's keep-alive TLS-PSK connection: send(path) resolves with the answer's status. */
async function deviceConnection(d: BenchDevice): Promise<{ send(path: string): Promise<number>; close(): void }> {
  const socket = tls.connect({
    host: '127.0.0.1',
    port: HTTPS_PORT,
    minVersion: 'TLSv1.2',
    maxVersion: 'TLSv1.2',
    ciphers: 'PSK-AES128-GCM-SHA256',
    checkServerIdentity: () => undefined,
    pskCallback: () => ({ psk: d.key, identity: d.identity }),
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  let waiting: ((status: number) => void) | null = null;
  onResponses(socket, (status) => {
    waiting?.(status);
    waiting = null;
  });
  return {
    send: (path) =>
      new Promise((resolve) => {
        waiting = resolve;
        postJson(socket, path, 'bench', JSON.stringify({ v: 1, t: Date.now() }));
      }),
    close: () => socket.end(),
  };
}

/** Signs `email` in and opens the live log; resolves once it says it is connected. */
async function openLiveLog(page: Page, email: string): Promise<void> {
  await page.goto('/');
  await page.locator('input[name=email]').fill(email);
  await page.locator('input[name=password]').fill(PASSWORD);
  await page.locator('main button[type=submit]').click();
  await page.locator('header.top nav').waitFor();
  await page.goto('/#/live');
  await page.locator('.live-status.live-connected').waitFor({ timeout: 15_000 });
  // the page stamps each entry of a request to /r/<n> when it is first in the DOM
  await page.evaluate(() => {
    const seen: Record<string, number> = {};
    (window as unknown as { seen: Record<string, number> }).seen = seen;
    new MutationObserver((records) => {
      for (const r of records) {
        for (const node of r.addedNodes) {
          if (!(node instanceof HTMLElement)) continue;
          for (const entry of node.matches('.live-entry') ? [node] : node.querySelectorAll('.live-entry')) {
            const m = /POST \/r\/(\d+)/.exec(entry.textContent ?? '');
            if (m && !(m[1] in seen)) seen[m[1]] = Date.now();
          }
        }
      }
    }).observe(document.querySelector('main')!, { subtree: true, childList: true });
  });
}

export async function consoleRows(opts: { loads: number; requests: number; intervalMs: number }): Promise<BenchRow[]> {
  (buildConsole as (o: { quiet: boolean }) => boolean)({ quiet: true });
  const smtp = new TestSmtp();
  await smtp.start();
  const svc = await startBenchService(['api', 'gateway,worker'], { SMTP_URL: smtp.url(), MAIL_RETRY_BASE_MS: '100' });
  const browser = await launchBrowser();
  const rows: BenchRow[] = [];
  try {
    // first loads, each on a cold cache
    const loads: { ms: number; bytes: number; requests: number }[] = [];
    for (let i = 0; i < opts.loads; i++) loads.push(await coldLoad(browser, svc.base));
    const times = loads.map((l) => l.ms).sort((a, b) => a - b);
    const kb = loads[0].bytes / 1024;
    rows.push({
      name: 'Console first load on a cold cache: navigation → sign-in form shown and enabled (Chromium, headless, same host)',
      value: Math.round(kb * 10) / 10,
      unit: 'KB transferred (gzip)',
      p50Ms: Math.round(pct(times, 50)),
      p99Ms: Math.round(pct(times, 99)),
      detail: `${opts.loads} loads, each in a new browser context; ${loads[0].requests} requests (the page, its script and style chunks, the session check)`,
      target: 'shell < 200 KB gzip; usable in ~1 s',
    });

    // the live log in the browser
    const { headers, devices } = await provision(svc, 1);
    const email = `bench.${Date.now()}@example.com`;
    await api(svc.base, headers, 'POST', '/user/', { name: 'Bench person', email, rights: ['ENVIRONMENT_ADMIN'] });
    let mail = smtp.to(email)[0];
    for (let i = 0; !mail && i < 200; i++) {
      await new Promise((r) => setTimeout(r, 50));
      mail = smtp.to(email)[0];
    }
    if (!mail) throw new Error(`no invitation mail to ${email}`);
    const token = new URL(consoleLink(mail.text).replace('#/', '')).searchParams.get('token');
    const set = await fetch(`${svc.base}/authentication/person/set-password`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'api-version': '8', 'x-gridgate-console': '1' },
      body: JSON.stringify({ token, password: PASSWORD }),
    });
    if (!set.ok) throw new Error(`set-password: ${set.status} ${await set.text()}`);
    const context = await browser.newContext({ baseURL: svc.base, viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    await openLiveLog(page, email);
    const device = await deviceConnection(devices[0]);
    const sentAt: number[] = [];
    let errors = 0;
    for (let i = 0; i < opts.requests; i++) {
      sentAt[i] = Date.now();
      if ((await device.send(`/r/${i}`)) !== 200) errors++;
      await new Promise((r) => setTimeout(r, Math.max(0, sentAt[i] + opts.intervalMs - Date.now())));
    }
    device.close();
    const deadline = Date.now() + 10_000;
    let seen: Record<string, number> = {};
    while (Date.now() < deadline) {
      seen = await page.evaluate(() => (window as unknown as { seen: Record<string, number> }).seen);
      if (Object.keys(seen).length >= opts.requests) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await context.close();
    const delays = sentAt
      .map((t, i) => (seen[i] === undefined ? null : seen[i] - t))
      .filter((d): d is number => d !== null)
      .sort((a, b) => a - b);
    rows.push({
      name: `Live log delay in the browser (device request sent over TLS-PSK → its entry in the page), ${Math.round(1000 / opts.intervalMs)} requests/s, 2 processes (api | gateway,worker)`,
      value: delays.length,
      unit: 'entries',
      p50Ms: pct(delays, 50),
      p99Ms: pct(delays, 99),
      errors: errors + (opts.requests - delays.length),
      detail: `${opts.requests} requests one after another from one keep-alive device; the page's MutationObserver stamps each entry`,
      target: 'p99 < 1 s',
    });
  } finally {
    await browser.close();
    await svc.stop();
    await smtp.stop();
  }
  return rows;
}

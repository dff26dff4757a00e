// The customer's view: the live issue stream (GET /issue/stream) against the whole service in one process, tenant
// isolated; and the customer's pages in a real browser against the whole service (API, worker, CoAP/DTLS port, mail):
// a customer invited by mail signs in, finds the pin group on the map (MapLibre's own query API counts the features at
// two zoom levels), claims a device and links it to the pin group, the device reports over CoAP/DTLS with libcoap's
// coap-client-openssl, the measurement appears on the pin group's chart without a reload, a threshold is crossed and
// the issue appears in the list and on the map while the page is open; the customer subscribes to it, comments and
// closes it, and an export of the period downloads holding the device's measurements.
// axe on every page, no foreign request, screenshots light and dark of the map, the pin group and the issues.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error a plain JavaScript module of the scripts (no declaration file)
import { buildConsole } from '../../scripts/build-console.mjs';
import { run, startCoapWorld, type CoapWorld } from '../coap/support.ts';
import { TestSmtp } from '../notifications/smtp.ts';
import { environmentClient, type RestClient } from '../support/provision.ts';
import { axeFindings, consoleLink, launchBrowser, openConsole, screenshot, type ConsolePage, signIn as signInAs } from './browser.ts';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { liveIssueChannel } from '../../src/monitoring/issues/stream.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { until, waitFor } from '../support/until.ts';
import { openEventStream } from '../support/sse.ts';

interface Tenant {
  environmentHashId: string;
  environmentId: number;
  jwt: string;
  request<T>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }>;
}

async function tenant(ctx: AppContext, base: string, name: string): Promise<Tenant> {
  const env = await createEnvironment(ctx.db, 'monitoring', name);
  const account = await createMachineAccount(ctx.db, env.hashId, ['READ', 'STATIC', 'ISSUES']);
  const login = await fetch(`${base}/authentication/machine-login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '8' },
    body: JSON.stringify({ assertion: account.assertion }),
  });
  const { jwt } = (await login.json()) as { jwt: string };
  return {
    environmentHashId: env.hashId,
    environmentId: Number(env.id),
    jwt,
    async request<T>(method: string, url: string, body?: unknown) {
      const res = await fetch(`${base}${url}`, {
        method,
        body: body === undefined ? undefined : JSON.stringify(body),
        headers: {
          'api-version': '8',
          'environment-hash-id': env.hashId,
          authorization: `Bearer ${jwt}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
    },
  };
}

/** How many points the pin group's first chart draws (null while it has none). */
const chartPoints = (page: Page) =>
  page
    .locator('figure.pg-chart')
    .first()
    .getAttribute('data-points')
    .catch(() => null);

/** An open event stream (test/support/sse.ts) as an EventSource opens it: the headers as query parameters. */
async function openStream(base: string, t: Tenant) {
  const stream = await openEventStream(`${base}/issue/stream?apiVersion=8&environmentHashId=${t.environmentHashId}`, { authorization: `Bearer ${t.jwt}` });
  return { ...stream, events: () => stream.events<{ kind: string; issue: { hashId: string; title: string; level: number } }>('issue') };
}

describe('GET /issue/stream', () => {
  let ctx: AppContext;
  let service: RunningService;
  let base: string;
  beforeAll(async () => {
    ctx = await testContext();
    service = await startService(ctx, ['all']);
    base = `http://127.0.0.1:${service.apiPort()}`;
  }, 60_000);
  afterAll(async () => {
    await service?.stop();
    await closeContext(ctx);
  });

  it("streams an environment's new issues, comments and closing as they happen; another environment's stream gets none of them", async () => {
    const a = await tenant(ctx, base, 'customer A');
    const b = await tenant(ctx, base, 'customer B');
    const pinGroupOf = async (t: Tenant) =>
      (await t.request<{ hashId: string }>('POST', '/graph/pin-group', { symbolKey: 'post', geometry: null, fields: { id: 'Post' } })).body.hashId;
    const [pgA, pgB] = [await pinGroupOf(a), await pinGroupOf(b)];
    const streamA = await openStream(base, a);
    const streamB = await openStream(base, b);
    expect(streamA.status).toBe(200);
    expect(streamA.contentType).toBe('text/event-stream; charset=utf-8');
    expect(streamB.status).toBe(200);

    const added = await a.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: pgA, title: 'Pole leans', level: 2, comment: '' });
    expect(added.status).toBe(200);
    await waitFor(() => streamA.events().length >= 1, 15_000);
    expect(streamA.events()[0]).toMatchObject({
      id: added.body.hashId,
      data: { kind: 'opened', issue: { hashId: added.body.hashId, title: 'Pole leans', level: 2 } },
    });

    expect((await a.request('POST', `/issue/${added.body.hashId}/comment`, { comment: 'On my way', closeIssue: true })).status).toBe(200);
    await waitFor(() => streamA.events().some((e) => e.data.kind === 'closed'), 15_000);
    expect(streamA.events().map((e) => e.data.kind)).toEqual(expect.arrayContaining(['opened', 'comment', 'closed']));

    // B's own issue reaches B; A's never did
    const addedB = await b.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: pgB, title: 'Flooded', level: 1, comment: '' });
    await waitFor(() => streamB.events().length >= 1, 15_000);
    expect(streamB.events().map((e) => e.id)).toEqual([addedB.body.hashId]);
    expect(streamA.events().every((e) => e.id === added.body.hashId)).toBe(true);

    // without credentials, nothing
    expect((await fetch(`${base}/issue/stream?apiVersion=8&environmentHashId=${a.environmentHashId}`)).status).toBe(401);
    streamA.close();
    streamB.close();
    // the channel is left once its last stream is gone
    await until(
      async () => Number(((await ctx.redis.pubsub('NUMSUB', liveIssueChannel(ctx.config, a.environmentId))) as [string, number])[1]),
      (n) => n === 0,
      'the channel left',
      10_000,
    );
  }, 60_000);
});

const PASSWORD = 'a long enough password 42';

describe('the customer in the browser', () => {
  const smtp = new TestSmtp();
  let world: CoapWorld;
  let customer: RestClient;
  let browser: Browser;
  let base: string;
  let email: string;
  const places: { hashId: string; name: string; lon: number; lat: number }[] = [];

  beforeAll(async () => {
    // another build under way (of another test or engineer) makes this one fail at once: wait for it
    for (let attempt = 0; ; attempt++) {
      try {
        (buildConsole as (o: { quiet: boolean }) => boolean)({ quiet: true });
        break;
      } catch (err) {
        if (attempt >= 8) throw err;
        await new Promise((r) => setTimeout(r, 15_000));
      }
    }
    await smtp.start();
    world = await startCoapWorld({ SMTP_URL: smtp.url(), MAIL_RETRY_BASE_MS: '100', COAP_PIGGYBACK_MS: '2000' });
    base = `http://127.0.0.1:${world.service.apiPort()}`;
    customer = await environmentClient(world.ctx.db, base, 'monitoring', 'Waterworks', [
      'READ',
      'STATIC',
      'SENSORS',
      'THRESHOLDS',
      'ISSUES',
      'EXPORT',
      'USERS',
      'ENVIRONMENT_ADMIN',
    ]);
    const env = await customer.request('PUT', '/environment/', {
      fieldConfigurations: {
        pinGroups: [
          { key: 'id', name: { en: 'Name', nl: 'Naam' }, type: 'string' },
          {
            key: 'kind',
            name: { en: 'Kind', nl: 'Soort' },
            type: 'string',
            valueOptions: [
              { value: 'pump', text: { en: 'Pump', nl: 'Pomp' } },
              { value: 'valve', text: { en: 'Valve', nl: 'Klep' } },
            ],
          },
          {
            key: 'depth',
            name: { en: 'Depth', nl: 'Diepte' },
            type: 'number',
            suffix: 'm',
            lowerbound: 0,
            upperbound: 100,
            hint: { en: 'Below ground level', nl: 'Onder maaiveld' },
            showIf: { key: 'kind', value: 'pump' },
          },
        ],
        ...Object.fromEntries(['edges', 'grids', 'nodes', 'pins'].map((k) => [k, [{ key: 'id', name: 'Name', type: 'string' }]])),
      },
    });
    expect(env.status, JSON.stringify(env.body)).toBe(200);
    // four pin groups within a few hundred metres, and one 5 km away
    const spots: [string, number, number][] = [
      ['Pump station North', 5.12, 52.09],
      ['Valve 12', 5.123, 52.091],
      ['Valve 13', 5.121, 52.0925],
      ['Reservoir', 5.1245, 52.089],
      ['Outfall', 5.19, 52.06],
    ];
    for (const [name, lon, lat] of spots) {
      const added = await customer.request('POST', '/graph/pin-group', {
        symbolKey: name.startsWith('Valve') ? 'valve' : 'pump',
        geometry: { type: 'Point', coordinates: [lon, lat] },
        fields: { id: name, kind: name.startsWith('Valve') ? 'valve' : 'pump', depth: 4 },
      });
      expect(added.status, JSON.stringify(added.body)).toBe(200);
      places.push({ hashId: added.body.hashId, name, lon, lat });
    }
    email = `customer.${randomBytes(4).toString('hex')}@example.com`;
    const user = await customer.request('POST', '/user/', { name: 'Casey Customer', email, rights: ['READ', 'STATIC', 'SENSORS', 'ISSUES', 'EXPORT'] });
    expect(user.status, JSON.stringify(user.body)).toBe(200);
    const [mail] = await until(
      async () => smtp.to(email),
      (m) => m.length > 0,
      `an invitation to ${email}`,
    );
    const token = new URL(consoleLink(mail.text).replace('#/', '')).searchParams.get('token');
    const set = await fetch(`${base}/authentication/person/set-password`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'api-version': '8', 'x-gridgate-console': '1' },
      body: JSON.stringify({ token, password: PASSWORD }),
    });
    expect(set.status, await set.clone().text()).toBeLessThan(300);
    browser = await launchBrowser();
  }, 360_000);

  afterAll(async () => {
    await browser?.close();
    await world?.close();
    await smtp.stop();
  });

  const errorsOf = new Map<Page, string[]>();
  async function signIn(c: ConsolePage): Promise<void> {
    errorsOf.set(c.page, c.errors);
    await signInAs(c, email, PASSWORD);
  }

  async function open(page: Page, hash: string, heading: string): Promise<void> {
    await page.evaluate((h) => {
      location.hash = h;
    }, hash);
    await expect.poll(() => page.locator('main h1').textContent(), { timeout: 15_000 }).toBe(heading);
  }

  /** Both schemes of the page as it is now, axe in each. */
  async function screenshots(page: Page, name: string): Promise<void> {
    expect(await axeFindings(page)).toEqual([]);
    await screenshot(page, `${name}-light`);
    await page.getByRole('button', { name: 'Dark' }).click();
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.scheme)).toBe('dark');
    await page.waitForTimeout(300);
    expect(await axeFindings(page)).toEqual([]);
    await screenshot(page, `${name}-dark`);
    await page.getByRole('button', { name: 'Light' }).click();
  }

  /** The distinct pin groups (hashIds) MapLibre drew, once the map has loaded its tiles (asked again by expect.poll while symbols are placed). */
  async function drawn(page: Page): Promise<string[]> {
    await expect
      .poll(
        () =>
          page.evaluate(() => {
            const map = (window as unknown as { __gridgateMap?: { loaded(): boolean; areTilesLoaded(): boolean } }).__gridgateMap;
            return Boolean(map && map.loaded() && map.areTilesLoaded());
          }),
        { timeout: 20_000, message: 'the map loaded its tiles' },
      )
      .toBe(true)
      .catch(async (err: unknown) => {
        throw new Error(`${String(err)}; page errors: ${JSON.stringify(errorsOf.get(page))}; map: ${await page.locator('.map-view').textContent()}`);
      });
    return page.evaluate(() => {
      const map = (window as unknown as { __gridgateMap: { queryRenderedFeatures(): { layer: { id: string }; properties: { hashId?: string } }[] } })
        .__gridgateMap;
      return [
        ...new Set(
          map
            .queryRenderedFeatures()
            .filter((f) => f.layer.id === 'pin-groups')
            .map((f) => f.properties.hashId ?? ''),
        ),
      ].sort();
    });
  }

  /** libcoap's coap-client-openssl reports v (volts) now, over CoAP/DTLS with the device's PSK. */
  async function report(v: number): Promise<void> {
    const body = JSON.stringify({ t: Date.now(), v, m: 'console' });
    const res = await run('coap-client-openssl', [
      '-B',
      '15',
      '-u',
      world.device.identity,
      '-k',
      world.device.key,
      '-m',
      'post',
      '-t',
      '50',
      '-e',
      body,
      `coaps://127.0.0.1:${world.coapsPort}/report`,
    ]);
    expect(res.stdout, res.stderr).toContain('"ok":true');
  }

  it('finds the pin group on the map, links a device, sees its measurement on the chart and its issue in the list while open, comments and closes it', async () => {
    const c = await openConsole(browser, base);
    const { page } = c;
    await signIn(c);
    const mapStarted = Date.now();
    await open(page, '/map', 'Map');

    // the map: MapLibre drew the environment's five pin groups from our tiles, fitted to its bounding box
    await expect.poll(() => drawn(page), { timeout: 20_000, interval: 50 }).toEqual(places.map((p) => p.hashId).sort());
    console.log(`map: first render with its pin groups ${Date.now() - mapStarted} ms after the page was asked for (MapLibre loaded on demand, cold cache)`);
    await page.waitForTimeout(200);
    await screenshots(page, 'map');
    // zoomed in on the far one: only it
    const outfall = places[4];
    await page.evaluate(
      ([lon, lat]) => (window as unknown as { __gridgateMap: { jumpTo(o: unknown): void } }).__gridgateMap.jumpTo({ center: [lon, lat], zoom: 15 }),
      [outfall.lon, outfall.lat],
    );
    await expect.poll(() => drawn(page), { timeout: 20_000 }).toEqual([outfall.hashId]);

    // back to the first pin group and click it on the map: its page opens
    const pump = places[0];
    await page.evaluate(
      ([lon, lat]) => (window as unknown as { __gridgateMap: { jumpTo(o: unknown): void } }).__gridgateMap.jumpTo({ center: [lon, lat], zoom: 17 }),
      [pump.lon, pump.lat],
    );
    await expect.poll(() => drawn(page), { timeout: 20_000 }).toContain(pump.hashId);
    const point = await page.evaluate(
      ([lon, lat]) => (window as unknown as { __gridgateMap: { project(l: number[]): { x: number; y: number } } }).__gridgateMap.project([lon, lat]),
      [pump.lon, pump.lat],
    );
    const box = (await page.locator('.map-canvas canvas').boundingBox())!;
    await page.mouse.click(box.x + point.x, box.y + point.y);
    await expect.poll(() => page.locator('main h1').textContent(), { timeout: 15_000 }).toBe('Pump station North');
    expect(await page.evaluate(() => location.hash)).toBe(`#/pin-groups/${pump.hashId}`);
    await page.getByText('No device is linked.').waitFor();

    // the fields by the field configuration: a select of valueOptions, a number with its suffix, shown while kind is pump
    await page.getByRole('button', { name: 'Edit' }).click();
    await page.getByLabel('Depth').fill('7.5');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    expect(
      (await customer.request<{ pinGroup: { fields: Record<string, unknown> } }>('GET', `/graph/pin-group/${pump.hashId}`)).body.pinGroup.fields,
    ).toMatchObject({ depth: 7.5, kind: 'pump' });

    // claim the device with its claim token and link it to the pin group (the link on its page preselects it)
    const token = (await world.api.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [world.device.hashId] }))
      .body.claimTokens[0].claimToken;
    await page.locator('main').getByRole('link', { name: 'Link a device' }).click();
    expect(await page.evaluate(() => location.hash)).toBe(`#/claim?pinGroupHashId=${pump.hashId}`);
    await expect.poll(() => page.locator('main h1').textContent(), { timeout: 15_000 }).toBe('Link a device');
    await page.getByLabel('Claim tokens').fill(token);
    await page.getByRole('button', { name: 'Claim', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Claimed:' }).waitFor();
    await page.getByRole('button', { name: `Link ${world.device.hashId}` }).click();
    await expect.poll(() => page.getByLabel('Pin group', { exact: true }).inputValue()).toBe(pump.hashId);
    await page.getByLabel('Channel Voltage').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    await page.getByRole('button', { name: 'Link device' }).click();
    await page.getByRole('status').filter({ hasText: 'is linked to Pump station North' }).waitFor();
    const linked = (
      await customer.request<{ pins: { pin: { hashId: string; name: string } }[]; device: { hashId: string } | null }>('GET', `/graph/pin-group/${pump.hashId}`)
    ).body;
    expect(linked.device?.hashId).toBe(world.device.hashId);
    const pin = linked.pins[0].pin;
    // a threshold on the new pin: above 5 V is serious
    const quantityHashId = (
      await world.ctx.db.query<{ hash_id: string }>('SELECT q.hash_id FROM quantity q JOIN environment e ON e.id = q.environment_id WHERE e.hash_id = $1', [
        world.api.environmentHashId,
      ])
    ).rows[0].hash_id;
    const th = await customer.request('POST', '/measurement-threshold/thresholds', {
      pinHashId: pin.hashId,
      quantityHashId,
      thresholds: { criticallyLow: null, low: null, high: { significand: 5, orderOfMagnitude: 0 }, criticallyHigh: null },
    });
    expect(th.status, JSON.stringify(th.body)).toBe(200);

    // the pin group's page is open when the device reports: the measurement shows on its chart without a reload
    await page.getByRole('link', { name: 'Pump station North' }).click();
    await expect.poll(() => page.locator('main h1').textContent(), { timeout: 15_000 }).toBe('Pump station North');
    await page.locator('.last-contact').waitFor();
    const marker = await page.evaluate(() => {
      (window as unknown as { __noReload: boolean }).__noReload = true;
      return true;
    });
    expect(marker).toBe(true);
    await report(3.25);
    await expect.poll(() => chartPoints(page), { timeout: 30_000 }).toBe('1');
    await expect.poll(() => page.locator('.latest-value').first().textContent(), { timeout: 20_000 }).toContain('3.25');
    expect(await page.evaluate(() => (window as unknown as { __noReload?: boolean }).__noReload)).toBe(true);
    await screenshots(page, 'pin-group');
    // zoom in: the chart route is asked for half the range (the service reduces it; no raw year)
    const asked = page.waitForRequest((r) => r.url().includes('/chart/?startAt='));
    await page.getByRole('button', { name: 'Zoom in' }).click();
    const zoomed = new URL((await asked).url());
    const span = Date.parse(zoomed.searchParams.get('endAt')!) - Date.parse(zoomed.searchParams.get('startAt')!);
    expect(Math.round(span / 86_400_000)).toBe(15);
    await page.getByRole('button', { name: 'Up to now' }).click();
    // a service slower than the chart's poll (4 s): each answer comes 6 s after it is asked for. The next read waits for
    // the last answer, so the new measurement still shows (a read every 4 s would cut off every answer)
    await page.route('**/chart/?*', async (route) => {
      const answer = await route.fetch().catch(() => null);
      await new Promise((r) => setTimeout(r, 6000));
      if (answer) await route.fulfill({ response: answer }).catch(() => undefined);
    });
    await report(3.5);
    await expect.poll(() => chartPoints(page), { timeout: 45_000 }).toBe('2');
    await page.unrouteAll({ behavior: 'ignoreErrors' });

    // the issue list is open when the threshold is crossed: the issue appears in the list and on the map
    await open(page, '/issues', 'Issues');
    await page.getByText('No open issue.').waitFor();
    await report(9);
    const item = page.locator('li[data-issue]').filter({ hasText: 'Pump station North' });
    await item.waitFor({ timeout: 30_000 });
    expect(await page.locator('.level-group[data-level="1"] li[data-issue]').count()).toBe(1);
    await expect
      .poll(() => drawn(page), { timeout: 20_000 })
      .toEqual([pump.hashId])
      .catch(async (err: unknown) => {
        const state = await page.evaluate(() => {
          const map = (
            window as unknown as {
              __gridgateMap: { querySourceFeatures(s: string, o: unknown): { properties: unknown }[]; getSource(s: string): { tiles?: string[] } };
            }
          ).__gridgateMap;
          return { source: map.querySourceFeatures('gridgate', { sourceLayer: 'pinGroups' }).map((f) => f.properties), tiles: map.getSource('gridgate').tiles };
        });
        throw new Error(`${String(err)}; map state ${JSON.stringify(state)}`);
      });
    expect(await page.evaluate(() => (window as unknown as { __noReload?: boolean }).__noReload)).toBe(true);
    await screenshots(page, 'issues');

    // the issue: subscribe to its mails, comment, and close it with a comment
    await item.getByRole('link').click();
    await expect.poll(() => page.locator('main h1').textContent(), { timeout: 15_000 }).toMatch(/Voltage too high on/);
    const issueHashId = page.url().split('/').pop()!;
    const subscriptions = async () =>
      (
        await world.ctx.db.query<{ email: string }>(
          `SELECT a.email FROM issue_subscription s JOIN issue i ON i.id = s.issue_id JOIN machine_account a ON a.id = s.account_id WHERE i.hash_id = $1`,
          [issueHashId],
        )
      ).rows.map((r) => r.email);
    // every person of the environment is subscribed to a new issue at their notification level (0 by default: every
    // issue); the box says so, and unticking and ticking it again is what the service keeps
    const mailMe = page.getByRole('checkbox', { name: 'Mail me about this issue' });
    await expect.poll(() => mailMe.isChecked(), { timeout: 10_000 }).toBe(true);
    expect(await subscriptions()).toContain(email);
    // (the box shows the service's answer, not the click: it changes once the subscription is stored)
    await mailMe.click();
    await expect.poll(() => mailMe.isChecked(), { timeout: 10_000 }).toBe(false);
    expect(await subscriptions()).not.toContain(email);
    await mailMe.click();
    await expect.poll(() => mailMe.isChecked(), { timeout: 10_000 }).toBe(true);
    expect(await subscriptions()).toContain(email);
    await page.getByLabel('Comment', { exact: true }).fill('Checked on site: a loose contact.');
    await page.getByRole('button', { name: 'Comment and close' }).click();
    await page.getByRole('status').filter({ hasText: 'The issue is closed.' }).waitFor();
    await page.locator('.comments').getByText('Checked on site: a loose contact.').waitFor();
    await expect.poll(() => page.locator('.issue-state').textContent()).not.toBe('open');
    expect(await axeFindings(page)).toEqual([]);
    await screenshots(page, 'issue');

    // an export of the period downloads and holds the device's measurements: 3.25 V and the 9 V of the issue
    await open(page, '/exports', 'Exports');
    await page.getByRole('button', { name: 'Request export' }).click();
    const download = page.getByRole('link', { name: 'Download CSV' });
    await download.waitFor({ timeout: 30_000 });
    const [file] = await Promise.all([page.waitForEvent('download'), download.click()]);
    const rows = (await readFile((await file.path())!, 'utf8')).trim().split('\n');
    expect(rows[0]).toContain('generatedAt');
    const ofPin = rows.filter((r) => r.includes(pin.hashId));
    expect(ofPin.some((r) => r.endsWith(',3.25'))).toBe(true);
    expect(ofPin.some((r) => r.endsWith(',9'))).toBe(true);

    // the same pages in Dutch
    await page.locator('header select').last().selectOption('nl');
    await open(page, '/issues', 'Meldingen');
    await page.getByText('Geen open melding.').first().waitFor();
    expect(await axeFindings(page)).toEqual([]);
    await open(page, `/pin-groups/${pump.hashId}`, 'Pump station North');
    await page.getByRole('heading', { name: 'Grafieken' }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    await open(page, '/claim', 'Apparaat koppelen');
    expect(await axeFindings(page)).toEqual([]);
    await open(page, '/map', 'Kaart');
    await page.locator('.map-canvas[data-loaded=true]').waitFor();
    expect(await axeFindings(page)).toEqual([]);

    expect(c.foreign).toEqual([]);
    expect(c.errors.filter((e) => !/401/.test(e))).toEqual([]);
    await c.context.close();
  }, 240_000);
});

// Map rows of `npm run bench` (group `map`), measured in Debian's Chromium through playwright-core against the service
// in one process:
//   (a) the map's first render over the city of bench/tiles.ts (its fill: --tile-pin-groups pin groups, 100,000 by
//       default): a signed-in person's new browser context (cold cache, the session cookie only) navigates to /#/map;
//       the time is the page's own clock at MapLibre's first `idle` (MapView.tsx marks it: every tile in view loaded
//       and drawn), checked to have drawn pin groups or their clusters; p50/p99 over `loads` contexts, and the phases
//       of the median load (the map chunk, MapLibre's load, the tiles) from the page's marks and resource timing;
//   (b) a pan across the city at zoom 14, west to east, a jump at a time, each waited for until idle: the tiles it
//       fetched and their time each (request start to response end, the browser's resource timing), p50/p99;
//   (c) on the measurement table (bench/measurements.ts: pin group pg1 holds a year of 5-minute values of two
//       quantities), the pin group's page opened in a new context until its chart shows points, then zoomed by a drag
//       across the chart until the narrower range's answer is drawn; p50/p99 of each.
// BENCH_MAP_TRACE=<file.json>: the first load of (a) is traced (Chromium's timeline: open it in DevTools' Performance panel).
import type { Browser, BrowserContext, Page } from 'playwright-core';
// @ts-expect-error a plain JavaScript module of the scripts (no declaration file)
import { buildConsole } from '../scripts/build-console.mjs';
import { createMachineAccount } from '../src/accounts/store.ts';
import type { Db } from '../src/app/db.ts';
import { refreshBoundingBox } from '../src/monitoring/environments/settings.ts';
import { consoleLink, launchBrowser } from '../test/console/browser.ts';
import { TestSmtp } from '../test/notifications/smtp.ts';
import type { BenchRow } from './dtls.ts';
import { pct, startBenchService } from './harness.ts';
import type { MeasurementTable } from './measurements.ts';
import { fill } from './tiles.ts';

const PASSWORD = 'bench map password 42';
const VIEWPORT = { width: 1280, height: 860 };
type StorageState = Awaited<ReturnType<BrowserContext['storageState']>>;

/** A person of the environment (invited by mail, password set) signed in once: the session cookie a new context starts with. */
async function signedInPerson(
  browser: Browser,
  base: string,
  db: Db,
  environmentHashId: string,
  smtp: TestSmtp,
  settings: Record<string, unknown> = {},
): Promise<StorageState> {
  const { assertion } = await createMachineAccount(db, environmentHashId, ['ENVIRONMENT_ADMIN', 'USERS']);
  const login = await fetch(`${base}/authentication/machine-login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '8' },
    body: JSON.stringify({ assertion }),
  });
  const { jwt } = (await login.json()) as { jwt: string };
  const call = async (method: string, url: string, body: unknown) => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: { 'content-type': 'application/json', 'api-version': '8', 'environment-hash-id': environmentHashId, authorization: `Bearer ${jwt}` },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
  };
  if (Object.keys(settings).length > 0) await call('PUT', '/environment/', settings);
  const email = `bench.map.${Date.now()}@example.com`;
  await call('POST', '/user/', { name: 'Bench map person', email, rights: ['READ', 'STATIC', 'SENSORS', 'ISSUES'] });
  let mail = smtp.to(email)[0];
  for (let i = 0; !mail && i < 600; i++) {
    await new Promise((r) => setTimeout(r, 50));
    mail = smtp.to(email)[0];
  }
  if (!mail) throw new Error(`no invitation mail to ${email}`);
  const token = new URL(consoleLink(mail.text).replace('#/', '')).searchParams.get('token');
  const set = await fetch(`${base}/authentication/person/set-password`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '8', 'x-gridgate-console': '1' },
    body: JSON.stringify({ token, password: PASSWORD }),
  });
  if (!set.ok) throw new Error(`set-password: ${set.status} ${await set.text()}`);
  const context = await browser.newContext({ baseURL: base, viewport: VIEWPORT });
  const page = await context.newPage();
  await page.goto('/');
  await page.locator('input[name=email]').fill(email);
  await page.locator('input[name=password]').fill(PASSWORD);
  await page.locator('main button[type=submit]').click();
  await page.locator('header.top nav').waitFor({ timeout: 90_000 });
  const state = await context.storageState();
  await context.close();
  return state;
}

/** A new context (cold cache) with the person's session, its resource timing buffer large enough for a pan. */
async function coldPage(browser: Browser, base: string, state: StorageState): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ baseURL: base, viewport: VIEWPORT, storageState: state });
  await context.addInitScript(() => performance.setResourceTimingBufferSize(100_000));
  return { context, page: await context.newPage() };
}

interface FirstRender {
  ms: number;
  features: number;
  phases: Record<string, number>;
  tiles: number;
  tileP99: number;
}

/**
 * The tiles MapLibre fetched (its workers fetch them: they are in the workers' resource timing, not the page's), as
 * [start, end] in the page's clock (ms since its navigation), those that started at `since` or later.
 */
async function tileTimings(page: Page, since = 0): Promise<[number, number][]> {
  const pageOrigin = await page.evaluate(() => performance.timeOrigin);
  const out: [number, number][] = [];
  for (const worker of page.workers()) {
    const { origin, entries } = await worker.evaluate(() => ({
      origin: performance.timeOrigin,
      entries: (performance.getEntriesByType('resource') as PerformanceResourceTiming[])
        .filter((r) => r.name.includes('/graph/tiles/'))
        .map((r) => [r.startTime, r.responseEnd] as [number, number]),
    }));
    for (const [a, b] of entries) if (a + origin - pageOrigin >= since) out.push([a + origin - pageOrigin, b + origin - pageOrigin]);
  }
  return out;
}

/** (a) once: /#/map in a new context until MapLibre's first idle. */
async function firstRender(browser: Browser, base: string, state: StorageState, keep?: (page: Page) => Promise<void>, trace?: string): Promise<FirstRender> {
  const { context, page } = await coldPage(browser, base, state);
  try {
    if (trace)
      await browser.startTracing(page, {
        path: trace,
        screenshots: false,
        categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8.execute', 'blink.user_timing', 'gpu', 'toplevel'],
      });
    await page.goto('/#/map');
    await page.waitForFunction(() => performance.getEntriesByName('gridgate:map-idle').length > 0, undefined, { polling: 50, timeout: 120_000 });
    if (trace) await browser.stopTracing();
    const seen = await page.evaluate(() => {
      const mark = (name: string) => Math.round(performance.getEntriesByName(name)[0]?.startTime ?? -1);
      const map = (window as unknown as { __gridgateMap: { queryRenderedFeatures(): { layer: { id: string } }[] } }).__gridgateMap;
      const features = map.queryRenderedFeatures().filter((f) => f.layer.id === 'pin-groups' || f.layer.id === 'clusters').length;
      const resources = performance.getEntriesByType('resource') as PerformanceResourceTiming[];
      const received = (re: RegExp) => Math.round(resources.find((r) => re.test(r.name))?.responseEnd ?? -1);
      const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
      return {
        ms: mark('gridgate:map-idle'),
        features,
        phases: {
          'page loaded': Math.round(nav.loadEventEnd),
          'map import asked': mark('gridgate:map-import'),
          'maplibre chunk received': received(/\/assets\/maplibre-[^/]*\.js/),
          'map imported': mark('gridgate:map-imported'),
          'map created': mark('gridgate:map-created'),
          'worker received': received(/maplibre-gl-worker/),
          'style loaded': mark('gridgate:map-load'),
          idle: mark('gridgate:map-idle'),
        } as Record<string, number>,
      };
    });
    if (seen.features === 0) throw new Error('the map went idle with no pin group drawn');
    const timings = await tileTimings(page);
    seen.phases['first tile asked'] = Math.round(Math.min(...timings.map(([a]) => a)));
    seen.phases['last tile received'] = Math.round(Math.max(...timings.map(([, b]) => b)));
    await keep?.(page);
    const tiles = timings.map(([a, b]) => b - a).sort((a, b) => a - b);
    return { ms: seen.ms, features: seen.features, phases: seen.phases, tiles: tiles.length, tileP99: pct(tiles, 99) };
  } finally {
    await context.close();
  }
}

/** (b): jumps across the city at zoom 14, west to east along its middle, each waited for until idle; the tiles fetched meanwhile. */
async function pan(page: Page, city: { west: number; east: number; south: number; north: number }): Promise<{ tiles: number[]; jumps: number; ms: number }> {
  for (const worker of page.workers()) await worker.evaluate(() => performance.setResourceTimingBufferSize(100_000));
  const { t0, jumps, ms } = await page.evaluate(async (c) => {
    const map = (window as unknown as { __gridgateMap: { jumpTo(o: unknown): void; once(e: string, f: () => void): void } }).__gridgateMap;
    const idle = () => new Promise<void>((r) => map.once('idle', r));
    const lat = (c.south + c.north) / 2;
    let ready = idle();
    map.jumpTo({ center: [c.west, lat], zoom: 14 });
    await ready;
    const start = performance.now();
    let n = 0;
    for (let lon = c.west + 0.02; lon <= c.east + 1e-9; lon += 0.02) {
      ready = idle();
      map.jumpTo({ center: [lon, lat], zoom: 14 });
      await ready;
      n++;
    }
    return { t0: start, jumps: n, ms: performance.now() - start };
  }, city);
  const tiles = (await tileTimings(page, t0)).map(([a, b]) => b - a);
  return { tiles, jumps, ms };
}

/** The city's rows: (a) and (b). */
export async function cityRows(browser: Browser, smtp: TestSmtp, opts: { pinGroups: number; loads: number }): Promise<BenchRow[]> {
  const svc = await startBenchService(['all'], { SMTP_URL: smtp.url(), MAIL_RETRY_BASE_MS: '100' });
  try {
    await fill(svc.db, opts.pinGroups);
    await refreshBoundingBox(svc.db, 1);
    const {
      rows: [box],
    } = await svc.db.query<{ b: { coordinates: [[number, number], [number, number]] } }>(`SELECT settings->'boundingBox' AS b FROM environment WHERE id = 1`);
    const [[west, south], [east, north]] = box.b.coordinates;
    const state = await signedInPerson(browser, svc.base, svc.db, 'benchtiles', smtp);
    const loads: FirstRender[] = [];
    let panned: { tiles: number[]; jumps: number; ms: number } | null = null;
    for (let i = 0; i < opts.loads; i++) {
      // the last load's page pans (after its first render is measured)
      loads.push(
        await firstRender(
          browser,
          svc.base,
          state,
          i === opts.loads - 1
            ? async (page) => {
                panned = await pan(page, { west, east, south, north });
              }
            : undefined,
          i === 0 ? process.env.BENCH_MAP_TRACE : undefined,
        ),
      );
    }
    const times = loads.map((l) => l.ms).sort((a, b) => a - b);
    const median = loads.slice().sort((a, b) => a.ms - b.ms)[Math.floor(loads.length / 2)];
    const rows: BenchRow[] = [
      {
        name: `map first render in the browser: /#/map in a new context (cold cache, signed in) → MapLibre idle with its pin groups drawn, city of ${opts.pinGroups.toLocaleString('en')} pin groups (bench/tiles.ts)`,
        value: Math.round(pct(times, 50)),
        unit: 'ms (p50)',
        p50Ms: Math.round(pct(times, 50)),
        p99Ms: Math.round(pct(times, 99)),
        target: 'about 1 s',
        detail:
          `${opts.loads} loads; the median's ${median.tiles} tiles (p99 ${Math.round(median.tileP99)} ms each), ${median.features} symbols and clusters drawn; its phases (ms from navigation): ` +
          Object.entries(median.phases)
            .map(([k, v]) => `${k} ${v}`)
            .join(', '),
      },
    ];
    const p = panned as { tiles: number[]; jumps: number; ms: number } | null;
    if (p) {
      const tiles = p.tiles.sort((a, b) => a - b);
      rows.push({
        name: `map pan across the city at zoom 14 in the browser (${p.jumps} jumps of 0.02° west to east, each until idle), ${opts.pinGroups.toLocaleString('en')} pin groups`,
        value: tiles.length,
        unit: 'tiles fetched',
        p50Ms: Math.round(pct(tiles, 50)),
        p99Ms: Math.round(pct(tiles, 99)),
        target: 'p99 per tile <= 250 ms',
        detail: `per tile: request start to response end (resource timing); the whole pan ${Math.round(p.ms)} ms`,
      });
    }
    return rows;
  } finally {
    await svc.stop();
  }
}

/** (c): the chart of pg1 (a year of 5-minute values) on the measurement table, opened and zoomed. */
export async function chartRows(
  browser: Browser,
  smtp: TestSmtp,
  table: { db: Db; databaseUrl: string; table: MeasurementTable },
  opts: { opens: number },
): Promise<BenchRow[]> {
  const svc = await startBenchService(['all'], { SMTP_URL: smtp.url(), MAIL_RETRY_BASE_MS: '100', DATABASE_URL: table.databaseUrl });
  // the table names pg1's pins p1_0 and p1_1, which the API's hashId pattern refuses: alphanumeric while the browser reads them
  await table.db.query(`UPDATE pin SET hash_id = replace(hash_id, '_', 'c') WHERE hash_id IN ('p1_0', 'p1_1')`);
  try {
    // two years back from now hold 2025, the table's year
    const state = await signedInPerson(browser, svc.base, table.db, 'benchenv', smtp, { defaultGraphRange: '2 years' });
    const opened: number[] = [];
    const zoomed: number[] = [];
    let points = 0;
    for (let i = 0; i < opts.opens; i++) {
      const { context, page } = await coldPage(browser, svc.base, state);
      try {
        await page.goto('/#/pin-groups/pg1');
        const drawn = await page
          .waitForFunction(
            () => {
              const n = Number(document.querySelector('figure.pg-chart')?.getAttribute('data-points') ?? 0);
              // uPlot (its chunk loaded on demand) has drawn the points
              return n > 0 && document.querySelector('figure.pg-chart .u-over') ? { at: performance.now(), n } : null;
            },
            undefined,
            { polling: 'raf', timeout: 60_000 },
          )
          .catch(async (err: Error) => {
            throw new Error(`${err.message}; the page: ${(await page.locator('main').textContent())?.slice(0, 800)}`);
          });
        const { at, n } = (await drawn.jsonValue()) as { at: number; n: number };
        opened.push(at);
        points = n;
        // drag across the first half of the plot (2025): the page asks GET /chart/ for that range and draws it
        // the chart is drawn again with each poll (every few seconds while it ends now): its box once it is there
        let over = await page.locator('figure.pg-chart .u-over').first().boundingBox();
        for (let tries = 0; !over && tries < 50; tries++) {
          await page.waitForTimeout(100);
          over = await page.locator('figure.pg-chart .u-over').first().boundingBox();
        }
        if (!over) throw new Error('the chart has no plot to drag across');
        const y = over.y + over.height / 2;
        const t0 = await page.evaluate(() => {
          const w = window as unknown as { __chartAnswered?: Promise<number> };
          const start = performance.now();
          w.__chartAnswered = new Promise((resolve) => {
            new PerformanceObserver((list, observer) => {
              // the zoomed range's answer (under a year), not the poll of the whole range
              const zoomedRange = (name: string) => {
                const q = new URL(name).searchParams;
                return Date.parse(q.get('endAt') ?? '') - Date.parse(q.get('startAt') ?? '') < 365 * 86_400_000;
              };
              const e = list.getEntries().find((r) => r.name.includes('/chart/?') && r.startTime >= start && zoomedRange(r.name));
              if (!e) return;
              observer.disconnect();
              // the answer is parsed and drawn in the frames after it arrived
              setTimeout(() => requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now()))), 0);
            }).observe({ type: 'resource' });
          });
          return start;
        });
        await page.mouse.move(over.x + over.width * 0.05, y);
        await page.mouse.down();
        await page.mouse.move(over.x + over.width * 0.5, y, { steps: 5 });
        await page.mouse.up();
        const done = await page.evaluate(() =>
          Promise.race([
            (window as unknown as { __chartAnswered: Promise<number> }).__chartAnswered,
            new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer for the zoomed range within 60 s')), 60_000)),
          ]),
        );
        zoomed.push(done - t0);
      } finally {
        await context.close();
      }
    }
    opened.sort((a, b) => a - b);
    zoomed.sort((a, b) => a - b);
    const size = `table of ${table.table.measurements.toLocaleString('en')} measurements (1,000 pins)`;
    return [
      {
        name: `pin group chart opened in the browser: /#/pin-groups/pg1 in a new context → its chart drawn (2 years holding a year of 5-minute values of 2 quantities, reduced by GET /chart/), ${size}`,
        value: Math.round(pct(opened, 50)),
        unit: 'ms (p50)',
        p50Ms: Math.round(pct(opened, 50)),
        p99Ms: Math.round(pct(opened, 99)),
        target: 'about 1 s',
        detail: `${opts.opens} opens, each a new context (cold cache, signed in); ${points} points drawn`,
      },
      {
        name: `pin group chart zoomed in the browser: a drag across half the chart → GET /chart/ for that range answered and drawn, ${size}`,
        value: Math.round(pct(zoomed, 50)),
        unit: 'ms (p50)',
        p50Ms: Math.round(pct(zoomed, 50)),
        p99Ms: Math.round(pct(zoomed, 99)),
        target: 'p99 < 500 ms',
        detail: `${opts.opens} zooms, one per open`,
      },
    ];
  } finally {
    await table.db.query(`UPDATE pin SET hash_id = replace(hash_id, 'c', '_') WHERE hash_id IN ('p1c0', 'p1c1')`);
    await svc.stop();
  }
}

/** The group's rows, handed to `sink` as each part ends (the city's before the measurement table is filled). */
export async function mapRows(opts: {
  pinGroups: number;
  loads: number;
  measurementTable: () => Promise<{ db: Db; databaseUrl: string; table: MeasurementTable }>;
  sink(rows: BenchRow[]): void;
}): Promise<void> {
  (buildConsole as (o: { quiet: boolean }) => boolean)({ quiet: true });
  const smtp = new TestSmtp();
  await smtp.start();
  const browser = await launchBrowser();
  try {
    opts.sink(await cityRows(browser, smtp, opts));
    opts.sink(await chartRows(browser, smtp, await opts.measurementTable(), { opens: opts.loads }));
  } finally {
    await browser.close();
    await smtp.stop();
  }
}

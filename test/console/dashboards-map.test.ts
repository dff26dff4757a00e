// A dashboard's map card in a real browser: a monitoring person signs in and opens a dashboard whose map card
// (the SDK's analyticsVisualisation `map`) answers three pin groups with their latitude and longitude. The card is a
// small MapLibre map (not a table): MapLibre's own query API counts its pin-group features, the rows stay readable
// under it, axe finds nothing serious, in en and nl; no request leaves for another host.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient, TestApi } from '../helpers.ts';
import {
  addPerson,
  axeFindings,
  launchBrowser,
  ok,
  openConsole,
  pageErrors,
  screenshotsInBothSchemes,
  startConsoleApi,
  type ConsolePage,
  signIn as signInAs,
} from './browser.ts';

const PASSWORD = 'correct horse battery staple';
const RIGHTS = ['READ', 'STATIC', 'REPORTS', 'USERS', 'ENVIRONMENT_ADMIN'];
const PLACES: [string, number, number][] = [
  ['Dam', 4.8932, 52.3731],
  ['Dom', 5.1214, 52.0907],
  ['Erasmus', 4.4818, 51.9095],
];

let api: TestApi;
let browser: Browser;
let base: string;
let admin: ApiClient;
let email: string;
const pinGroups: string[] = [];

beforeAll(async () => {
  ({ api, base } = await startConsoleApi());
  browser = await launchBrowser();

  admin = await api.login('monitoring', RIGHTS);
  for (const [name, lon, lat] of PLACES) {
    pinGroups.push(
      (
        await ok(
          admin.request<{ hashId: string }>('POST', '/graph/pin-group', {
            symbolKey: 'post',
            geometry: { type: 'Point', coordinates: [lon, lat] },
            fields: { id: name },
          }),
        )
      ).hashId,
    );
  }
  await ok(
    admin.request('POST', '/analytics/panel', {
      title: 'Places',
      layout: [{ x: 0, y: 0, width: 4, height: 4 }],
      cards: [
        {
          title: 'Where they are',
          query: {
            source: 'pinGroup',
            columns: [{ field: 'pinGroup.fields.id' }, { field: 'pinGroup.latitude' }, { field: 'pinGroup.longitude' }, { field: 'pinGroup.level' }],
            sort: [{ columnIndex: 0, descending: false }],
          },
          visualisation: { type: 'map', latitudeColumnIndex: 1, longitudeColumnIndex: 2, colorColumnIndex: 3, tooltipColumnIndex: 0, mapLayerKey: 'default' },
        },
      ],
    }),
  );

  // a person with the rights, who chose a password
  email = await addPerson(api, base, admin, { prefix: 'maps', name: 'Mercator', rights: RIGHTS, password: PASSWORD });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
});

async function open(page: Page, path: string, heading: string): Promise<void> {
  await page.evaluate((p) => {
    location.hash = p;
  }, path);
  await expect.poll(() => page.locator('main h1').textContent(), { timeout: 15_000 }).toBe(heading);
}

/** The pin groups the card's map draws once it has loaded its tiles: through MapLibre's query API, not pixels. */
const drawn = (page: Page) =>
  page.evaluate(() => {
    const map = (
      window as unknown as {
        __gridgateMap?: { loaded(): boolean; areTilesLoaded(): boolean; queryRenderedFeatures(): { layer: { id: string }; properties: { hashId?: string } }[] };
      }
    ).__gridgateMap;
    if (!map || !map.loaded() || !map.areTilesLoaded()) return null;
    return [
      ...new Set(
        map
          .queryRenderedFeatures()
          .filter((f) => f.layer.id === 'pin-groups')
          .map((f) => f.properties.hashId ?? ''),
      ),
    ].sort();
  });

/** What the map holds, for a failure's message. */
const mapState = (page: Page) =>
  page.evaluate(() => {
    const map = (
      window as unknown as {
        __gridgateMap?: {
          getCanvas(): HTMLCanvasElement;
          getZoom(): number;
          getCenter(): unknown;
          querySourceFeatures(s: string, o: unknown): { properties: unknown }[];
        };
      }
    ).__gridgateMap;
    if (!map) return 'no map';
    const canvas = map.getCanvas();
    return JSON.stringify({
      size: [canvas.width, canvas.height],
      zoom: map.getZoom(),
      center: map.getCenter(),
      source: map.querySourceFeatures('gridgate', { sourceLayer: 'pinGroups' }).map((f) => f.properties),
    });
  });

async function expectDrawn(page: Page, hashIds: string[]): Promise<void> {
  await expect
    .poll(() => drawn(page), { timeout: 30_000 })
    .toEqual([...hashIds].sort())
    .catch(async (err: unknown) => {
      throw new Error(`${String(err)}; map ${await mapState(page)}`);
    });
}

describe("a dashboard's map card", () => {
  let c: ConsolePage;
  beforeAll(async () => {
    c = await openConsole(browser, base);
    await signInAs(c, email, PASSWORD);
  }, 120_000);
  afterAll(async () => {
    await c?.context.close();
  });

  it('is a small map with a feature per pin group of its rows, the rows readable under it, in en and nl', async () => {
    const { page } = c;
    await open(page, '/dashboards', 'Dashboards');
    const card = page.locator('.card', { hasText: 'Where they are' });
    await card.locator('.map-card canvas.maplibregl-canvas').waitFor({ timeout: 30_000 });
    // a map, not a table in sight: the rows are folded away under it
    expect(await card.locator('table').isVisible()).toBe(false);
    expect(await card.locator('.map-card').getAttribute('data-places')).toBe('3');
    await expectDrawn(page, pinGroups);
    await card.locator('summary').click();
    await expect
      .poll(() => card.locator('table tbody tr').allTextContents())
      .toEqual([expect.stringContaining('Dam'), expect.stringContaining('Dom'), expect.stringContaining('Erasmus')]);
    await screenshotsInBothSchemes(page, 'dashboards-map');

    await page.locator('header select').last().selectOption('nl');
    await open(page, '/dashboards', 'Dashboards');
    await expect.poll(() => card.locator('figcaption').textContent(), { timeout: 15_000 }).toBe('Plaatsen in de rijen: 3');
    await expectDrawn(page, pinGroups);
    expect(await axeFindings(page)).toEqual([]);
    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
  }, 180_000);
});

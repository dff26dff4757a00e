// The base map a deployment may name (MAP_STYLE_URL), in a real browser: a local HTTP server this test starts serves a
// minimal MapLibre style (one background layer); the service is started with MAP_STYLE_URL pointing at it. The console
// learns it from GET /console/config, the map asks the style server for it and draws it under the environment's own
// layers (its pin groups still drawn, counted through MapLibre's query API), the console's CSP names the style's origin
// in connect-src and img-src (and only then), and no CSP violation is logged. Without MAP_STYLE_URL, no request leaves
// the service: the other console tests assert that (browser.ts records every foreign request).
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeToken } from '../../src/accounts/people/tokens.ts';
import { startTestApi, testContext, type TestApi } from '../helpers.ts';
import { buildConsoleOnce, launchBrowser, openConsole, pageErrors, signIn } from './browser.ts';

const PASSWORD = 'correct horse battery staple';
const RIGHTS = ['READ', 'STATIC', 'USERS', 'ENVIRONMENT_ADMIN'];
const STYLE = {
  version: 8,
  name: 'test base map',
  sources: {},
  layers: [{ id: 'test-base-background', type: 'background', paint: { 'background-color': '#2a6f97' } }],
};

let styleServer: Server;
let styleOrigin: string;
const styleRequests: string[] = [];
let api: TestApi;
let browser: Browser;
let base: string;
let email: string;
const pinGroups: string[] = [];

beforeAll(async () => {
  await buildConsoleOnce();
  styleServer = createServer((req, res) => {
    styleRequests.push(req.url ?? '');
    if (req.url !== '/style.json') return res.writeHead(404).end();
    // another origin than the console's: the browser reads it only with CORS
    res.writeHead(200, { 'content-type': 'application/json', 'access-control-allow-origin': '*' }).end(JSON.stringify(STYLE));
  });
  await new Promise<void>((resolve) => styleServer.listen(0, '127.0.0.1', resolve));
  styleOrigin = `http://127.0.0.1:${(styleServer.address() as AddressInfo).port}`;

  api = await startTestApi(await testContext({ MAP_STYLE_URL: `${styleOrigin}/style.json` }));
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`;
  browser = await launchBrowser();

  const admin = await api.login('monitoring', RIGHTS);
  for (const [name, lon, lat] of [
    ['Dam', 4.8932, 52.3731],
    ['Dom', 5.1214, 52.0907],
  ] as const) {
    const added = await admin.request<{ hashId: string }>('POST', '/graph/pin-group', {
      symbolKey: 'post',
      geometry: { type: 'Point', coordinates: [lon, lat] },
      fields: { id: name },
    });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    pinGroups.push(added.body.hashId);
  }
  // a person with the rights, who chose a password (the invitation's token stored as its mail would carry it)
  email = `basemap.${randomBytes(4).toString('hex')}@example.com`;
  const user = await admin.request('POST', '/user/', { name: 'Blaeu', email, rights: RIGHTS, locale: 'en' });
  expect(user.status, JSON.stringify(user.body)).toBe(200);
  const token = randomBytes(32).toString('base64url');
  await storeToken(api.ctx.db, token, email, 'invitation', null);
  const set = await fetch(`${base}/authentication/person/set-password`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '8', 'x-gridgate-console': '1' },
    body: JSON.stringify({ token, password: PASSWORD }),
  });
  expect(set.status, await set.text()).toBeLessThan(300);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await new Promise((r) => styleServer?.close(r));
});

describe('a base map named by MAP_STYLE_URL', () => {
  it("tells the console, allows only its origin in the CSP, and the map draws it under the environment's pin groups", async () => {
    const config = await fetch(`${base}/console/config`);
    expect(config.status).toBe(200);
    expect(await config.json()).toEqual({ mapStyleUrl: `${styleOrigin}/style.json` });
    const csp = (await fetch(`${base}/`)).headers.get('content-security-policy') ?? '';
    const directive = (name: string) => csp.split('; ').find((d) => d.startsWith(`${name} `));
    expect(directive('connect-src')).toBe(`connect-src 'self' ${styleOrigin}`);
    expect(directive('img-src')).toBe(`img-src 'self' data: blob: ${styleOrigin}`);
    expect(directive('script-src')).toBe("script-src 'self'");

    const c = await openConsole(browser, base);
    // the kit refuses every other origin; the style server is the one this deployment allows
    await c.context.route(`${styleOrigin}/**`, (route) => route.continue());
    await signIn(c, email, PASSWORD);
    await c.page.evaluate(() => {
      location.hash = '/map';
    });
    await expect.poll(() => styleRequests.filter((u) => u === '/style.json').length, { timeout: 30_000 }).toBeGreaterThan(0);
    await expect
      .poll(
        () =>
          c.page.evaluate(() => {
            const map = (
              window as unknown as {
                __gridgateMap?: {
                  loaded(): boolean;
                  areTilesLoaded(): boolean;
                  getStyle(): { layers: { id: string }[] };
                  queryRenderedFeatures(): { layer: { id: string }; properties: { hashId?: string } }[];
                };
              }
            ).__gridgateMap;
            if (!map || !map.loaded() || !map.areTilesLoaded()) return null;
            return {
              layers: map.getStyle().layers.map((l) => l.id),
              pinGroups: [
                ...new Set(
                  map
                    .queryRenderedFeatures()
                    .filter((f) => f.layer.id === 'pin-groups')
                    .map((f) => f.properties.hashId ?? ''),
                ),
              ].sort(),
            };
          }),
        { timeout: 60_000 },
      )
      .toMatchObject({ pinGroups: [...pinGroups].sort() });
    // the base map's layer first (beneath), the environment's after it
    const layers = await c.page.evaluate(() =>
      (window as unknown as { __gridgateMap: { getStyle(): { layers: { id: string }[] } } }).__gridgateMap.getStyle().layers.map((l) => l.id),
    );
    expect(layers[0]).toBe('test-base-background');
    expect(layers).toEqual(expect.arrayContaining(['edges', 'clusters', 'pin-groups']));
    expect(layers.indexOf('pin-groups')).toBeGreaterThan(0);
    // a pixel of the canvas away from the pins is the base map's colour (the frame's own background is not blue)
    const pixel = await c.page.evaluate(() => {
      const map = (window as unknown as { __gridgateMap: { getCanvas(): HTMLCanvasElement; triggerRepaint(): void; once(e: string, f: () => void): void } })
        .__gridgateMap;
      return new Promise<number[]>((resolve) => {
        map.once('render', () => {
          const canvas = map.getCanvas();
          const gl = (canvas.getContext('webgl2') ?? canvas.getContext('webgl')) as WebGLRenderingContext;
          const out = new Uint8Array(4);
          gl.readPixels(2, 2, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, out);
          resolve([...out]);
        });
        map.triggerRepaint();
      });
    });
    expect(pixel.slice(0, 3)).toEqual([0x2a, 0x6f, 0x97]);
    // the style server was the only other origin asked; nothing refused, no CSP violation
    expect(c.foreign).toEqual([]);
    expect(pageErrors(c)).toEqual([]);
    await c.context.close();
  }, 180_000);
});

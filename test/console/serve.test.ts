// The console as the service serves it at /: its page and assets, the headers that keep it from being framed or
// running foreign script, and the first load's size (the shell without the editor under 200 KB gzip).
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi();
}, 120_000);
afterAll(async () => api?.close());

const get = (url: string, headers: Record<string, string> = {}) => api.app.inject({ method: 'GET', url, headers });

describe('the console at /', () => {
  it('is served with a policy that allows no inline or foreign script and no framing', async () => {
    const res = await get('/');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    const csp = String(res.headers['content-security-policy']);
    const directive = (name: string) =>
      csp
        .split(';')
        .map((d) => d.trim())
        .find((d) => d.startsWith(`${name} `));
    expect(directive('script-src')).toBe("script-src 'self'");
    expect(directive('frame-ancestors')).toBe("frame-ancestors 'none'");
    expect(directive('connect-src')).toBe("connect-src 'self'");
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['cache-control']).toBe('no-cache');
    // no script or style in the page itself, and nothing from another host
    expect(res.body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(res.body).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it('serves the hashed assets gzipped and for good, and 404 for an unknown one', async () => {
    const page = (await get('/')).body;
    const assets = [...page.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const url of assets) {
      const plain = await get(url);
      const zipped = await get(url, { 'accept-encoding': 'gzip, br' });
      expect(plain.statusCode).toBe(200);
      expect(plain.headers['cache-control']).toContain('immutable');
      expect(zipped.headers['content-encoding']).toBe('gzip');
      expect(gunzipSync(zipped.rawPayload).equals(plain.rawPayload)).toBe(true);
    }
    const missing = await get('/assets/nothing-here.js');
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ key: 'not_found_error' });
  });

  it('loads its shell in under 200 KB gzip: the editor and the map are separate chunks', async () => {
    const page = (await get('/')).body;
    const first = [...page.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
    let bytes = Buffer.byteLength(page);
    for (const url of first) bytes += (await get(url, { 'accept-encoding': 'gzip' })).rawPayload.length;
    expect(bytes).toBeLessThan(200 * 1024);
    // Monaco's or MapLibre's code is not in the first load
    for (const url of first) {
      const body = (await get(url)).body;
      expect(body).not.toContain('monaco');
      expect(body).not.toContain('maplibre');
    }
  });

  it('leaves the API as it was: an API route still needs its Api-Version', async () => {
    const res = await get('/device-type/');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ key: 'api_version_error' });
  });
});

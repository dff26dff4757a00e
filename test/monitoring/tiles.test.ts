import { VectorTile, type VectorTileFeature } from '@mapbox/vector-tile';
import { PbfReader } from 'pbf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { TileCache } from '../../src/monitoring/tiles/cache.ts';
import { renderTile } from '../../src/monitoring/tiles/store.ts';
import { addPinGroup } from './fixtures.ts';

// Map tiles (graph/tiles/:z/:x/:y) read back with @mapbox/vector-tile: positions, properties, clipping, clustering, rights, tenants.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const EXTENT = 4096;

/** The tile and in-tile position of [lon, lat] at zoom z (Web Mercator, written out here apart from the service's). */
function locate(lon: number, lat: number, z: number) {
  const n = 2 ** z;
  const fx = ((lon + 180) / 360) * n;
  const latRad = (lat * Math.PI) / 180;
  const fy = ((1 - Math.log(Math.tan(latRad) + 1 / Math.cos(latRad)) / Math.PI) / 2) * n;
  const x = Math.floor(fx);
  const y = Math.floor(fy);
  return { z, x, y, at: (tx = x, ty = y) => [Math.round((fx - tx) * EXTENT), Math.round((fy - ty) * EXTENT)] };
}

async function tile(c: ApiClient, z: number, x: number, y: number, query = '', environmentHashId = c.environmentHashId) {
  const r = await api.app.inject({
    method: 'GET',
    url: `/graph/tiles/${z}/${x}/${y}${query}`,
    headers: { 'api-version': '8', 'environment-hash-id': environmentHashId, authorization: `Bearer ${c.token}` },
  });
  return { status: r.statusCode, type: r.headers['content-type'], retryAfter: r.headers['retry-after'], raw: r.rawPayload, json: () => r.json() as unknown };
}

async function decoded(c: ApiClient, z: number, x: number, y: number, query = '') {
  const r = await tile(c, z, x, y, query);
  expect(r.status).toBe(200);
  expect(r.type).toBe('application/vnd.mapbox-vector-tile');
  return new VectorTile(new PbfReader(r.raw));
}

const features = (t: VectorTile, layer: string): VectorTileFeature[] => {
  const l = t.layers[layer];
  if (!l) return [];
  expect(l.extent).toBe(EXTENT);
  return Array.from({ length: l.length }, (_, i) => l.feature(i));
};
const points = (f: VectorTileFeature) => f.loadGeometry().map((ring) => ring.map((p) => [p.x, p.y]));

const RIGHTS = ['READ', 'STATIC', 'ISSUES'];

describe('map tiles', () => {
  it('holds the pin groups of the tile as points with their properties, at their quantized positions', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pg = await addPinGroup(c, 'Dam square', { geometry: { type: 'Point', coordinates: [4.8932, 52.3731] } });
    await addPinGroup(c, 'Utrecht', { geometry: { type: 'Point', coordinates: [5.1214, 52.0907] } });
    const { z, x, y, at } = locate(4.8932, 52.3731, 15);
    const t = await decoded(c, z, x, y);
    const [f, ...rest] = features(t, 'pinGroups');
    expect(rest).toEqual([]);
    expect(f.type).toBe(1);
    expect(points(f)).toEqual([[at()]]);
    expect(f.properties).toEqual({ hashId: pg.hashId, name: 'Dam square', symbolKey: 'cp-rectifier', level: 0, mapLayer: 'default' });
    // far from every pin group: an empty tile
    expect((await tile(c, z, x + 100, y)).raw.length).toBe(0);
  });

  it('repeats a pin group near a tile edge in the neighbour tile, within the 64-unit buffer', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const z = 16;
    // 20 units (of 4096) east of the west edge of its tile
    const base = locate(4.9, 52.37, z);
    const lon = ((base.x + 20 / EXTENT) / 2 ** z) * 360 - 180;
    await addPinGroup(c, 'edge case', { geometry: { type: 'Point', coordinates: [lon, 52.37] } });
    const own = locate(lon, 52.37, z);
    expect(own.x).toBe(base.x);
    const [east] = features(await decoded(c, z, own.x, own.y), 'pinGroups');
    expect(points(east)).toEqual([[own.at()]]);
    const [west] = features(await decoded(c, z, own.x - 1, own.y), 'pinGroups');
    expect(points(west)).toEqual([[own.at(own.x - 1, own.y)]]);
    expect(points(west)[0][0][0]).toBe(EXTENT + 20);
    // beyond the buffer: not in the tile two to the west
    expect(features(await decoded(c, z, own.x - 2, own.y), 'pinGroups')).toEqual([]);
  });

  it('shows the level of the open issues of a pin group and of an edge', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pg = await addPinGroup(c, 'leaky', { geometry: { type: 'Point', coordinates: [4.9, 52.37] } });
    const edge = await c.request<{ hashId: string }>('POST', '/graph/edge', {
      geometry: {
        type: 'LineString',
        coordinates: [
          [4.899, 52.37],
          [4.901, 52.37],
        ],
      },
      fields: { id: 'pipe' },
      nodeHashIds: [null, null],
    });
    expect(edge.status).toBe(200);
    expect((await c.request('POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: { id: 'on pipe' }, edgeHashId: edge.body.hashId })).status).toBe(200);
    expect((await c.request('POST', '/issue/', { pinGroupHashId: pg.hashId, title: 'Leak', level: 2, comment: '' })).status).toBe(200);
    const { z, x, y } = locate(4.9, 52.37, 14);
    const t = await decoded(c, z, x, y);
    expect(features(t, 'pinGroups').map((f) => [f.properties.hashId, f.properties.level])).toEqual([[pg.hashId, 2]]);
    expect(features(t, 'edges').map((f) => [f.properties.hashId, f.properties.level])).toEqual([[edge.body.hashId, 2]]);
  });

  it('holds edges as lines clipped to the tile and its buffer, a line leaving and coming back as two parts', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const z = 14;
    const { x, y } = locate(4.9, 52.37, z);
    // in world coordinates of the tile: lon at tile unit u, lat at tile unit v
    const lonAt = (u: number) => ((x + u / EXTENT) / 2 ** z) * 360 - 180;
    const latAt = (v: number) => (Math.atan(Math.sinh(Math.PI * (1 - (2 * (y + v / EXTENT)) / 2 ** z))) * 180) / Math.PI;
    // west to east across the whole tile at v = 1000, then out to the south and back in at u = 3000
    const line = [
      [lonAt(-2000), latAt(1000)],
      [lonAt(1000), latAt(1000)],
      [lonAt(2000), latAt(1000)],
      [lonAt(2000), latAt(8000)],
      [lonAt(3000), latAt(8000)],
      [lonAt(3000), latAt(2000)],
    ];
    const add = await c.request<{ hashId: string }>('POST', '/graph/edge', {
      geometry: { type: 'LineString', coordinates: line },
      fields: { id: 'Main pipe' },
      nodeHashIds: [null, null],
    });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    const multi = await c.request<{ hashId: string }>('POST', '/graph/edge', {
      geometry: {
        type: 'MultiLineString',
        coordinates: [
          [
            [lonAt(100), latAt(100)],
            [lonAt(200), latAt(100)],
          ],
          [
            [lonAt(-9000), latAt(-9000)],
            [lonAt(-8000), latAt(-9000)],
          ],
        ],
      },
      fields: { id: 'Branches' },
    });
    expect(multi.status, JSON.stringify(multi.body)).toBe(200);
    const byHashId = new Map(features(await decoded(c, z, x, y), 'edges').map((f) => [f.properties.hashId, f]));
    const main = byHashId.get(add.body.hashId)!;
    expect(main.type).toBe(2);
    expect(main.properties).toEqual({ hashId: add.body.hashId, name: 'Main pipe', level: 0, mapLayer: 'default' });
    const near = (a: number[][][], b: number[][][]) => {
      expect(a.length).toBe(b.length);
      a.forEach((part, i) =>
        part.forEach(([u, v], j) => {
          expect(Math.abs(u - b[i][j][0])).toBeLessThanOrEqual(1);
          expect(Math.abs(v - b[i][j][1])).toBeLessThanOrEqual(1);
        }),
      );
    };
    near(points(main), [
      [
        [-64, 1000],
        [1000, 1000],
        [2000, 1000],
        [2000, 4160],
      ],
      [
        [3000, 4160],
        [3000, 2000],
      ],
    ]);
    // of the multi line, only the part in the tile
    near(points(byHashId.get(multi.body.hashId)!), [
      [
        [100, 100],
        [200, 100],
      ],
    ]);
  });

  it('clusters the pin groups of a tile past 2000, per cell, with their number and highest level', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const { rows } = await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId]);
    // 2,500 pin groups on a 50 × 50 grid around Amsterdam's centre (about 1 km square)
    await api.ctx.db.query(
      `INSERT INTO pin_group (hash_id, environment_id, name, symbol_key, geometry, map_layer)
       SELECT 'cl' || $2 || i, $1, 'p' || i, 'cp-pole', jsonb_build_object('type', 'Point', 'coordinates', jsonb_build_array(4.89 + (i % 50) * 0.0003, 52.37 + (i / 50) * 0.0002)), 'default'
         FROM generate_series(0, 2499) i`,
      [rows[0].id, String(rows[0].id)],
    );
    const lone = await addPinGroup(c, 'lone', { geometry: { type: 'Point', coordinates: [4.7, 52.4] } });
    const { z, x, y } = locate(4.89, 52.37, 10);
    expect(locate(4.7, 52.4, 10)).toMatchObject({ x, y });
    const shown = features(await decoded(c, z, x, y), 'pinGroups');
    const clusters = shown.filter((f) => f.properties.cluster === true);
    expect(clusters.length).toBeGreaterThan(0);
    expect(clusters.length).toBeLessThanOrEqual(16 * 16);
    expect(clusters.reduce((sum, f) => sum + Number(f.properties.pointCount), 0)).toBe(2500);
    expect(clusters.every((f) => f.properties.level === 0 && Number(f.properties.pointCount) > 1)).toBe(true);
    // a cell of one pin group shows the pin group
    expect(shown.filter((f) => !f.properties.cluster).map((f) => f.properties.hashId)).toEqual([lone.hashId]);
    // zoomed in, a part of the grid one by one
    const close = locate(4.9, 52.375, 17);
    const single = features(await decoded(c, close.z, close.x, close.y), 'pinGroups');
    expect(single.length).toBeGreaterThan(0);
    expect(single.every((f) => typeof f.properties.hashId === 'string' && f.properties.cluster === undefined)).toBe(true);
  });

  it('shows the map layers asked for (default: default)', async () => {
    const c = await api.login('monitoring', [...RIGHTS, 'ENVIRONMENT_ADMIN']);
    const { rows } = await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId]);
    const pg = await addPinGroup(c, 'cables', { geometry: { type: 'Point', coordinates: [4.9, 52.37] } });
    await api.ctx.db.query("UPDATE pin_group SET map_layer = 'cables' WHERE hash_id = $1 AND environment_id = $2", [pg.hashId, rows[0].id]);
    const { z, x, y } = locate(4.9, 52.37, 14);
    expect(features(await decoded(c, z, x, y), 'pinGroups')).toEqual([]);
    expect(features(await decoded(c, z, x, y, '?mapLayers=cables'), 'pinGroups').map((f) => f.properties.mapLayer)).toEqual(['cables']);
  });

  it('holds the nodes as points in layer nodes when the map layer nodes is asked for', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const node = await c.request<{ hashId: string }>('POST', '/graph/node', {
      geometry: { type: 'Point', coordinates: [4.91, 52.36] },
      fields: { id: 'Junction' },
    });
    expect(node.status).toBe(200);
    const { z, x, y, at } = locate(4.91, 52.36, 16);
    expect(features(await decoded(c, z, x, y), 'nodes')).toEqual([]);
    const [f, ...rest] = features(await decoded(c, z, x, y, '?mapLayers=default&mapLayers=nodes'), 'nodes');
    expect(rest).toEqual([]);
    expect([f.type, points(f), f.properties]).toEqual([1, [[at()]], { hashId: node.body.hashId, name: 'Junction' }]);
  });

  it("never holds another environment's pin groups or edges, at the same place", async () => {
    const mine = await api.login('monitoring', RIGHTS);
    const theirs = await api.login('monitoring', RIGHTS);
    const own = await addPinGroup(mine, 'mine', { geometry: { type: 'Point', coordinates: [4.95, 52.35] } });
    await addPinGroup(theirs, 'theirs', { geometry: { type: 'Point', coordinates: [4.95, 52.35] } });
    expect(
      (
        await theirs.request('POST', '/graph/edge', {
          geometry: {
            type: 'LineString',
            coordinates: [
              [4.94, 52.35],
              [4.96, 52.35],
            ],
          },
          fields: { id: 'their pipe' },
          nodeHashIds: [null, null],
        })
      ).status,
    ).toBe(200);
    const { z, x, y } = locate(4.95, 52.35, 14);
    const t = await decoded(mine, z, x, y);
    expect(features(t, 'pinGroups').map((f) => f.properties.hashId)).toEqual([own.hashId]);
    expect(features(t, 'edges')).toEqual([]);
    // their environment's hashId with my token: as if it did not exist
    const r = await tile(mine, z, x, y, '', theirs.environmentHashId);
    expect([r.status, (r.json() as { key: string }).key]).toEqual([404, 'not_found_error']);
  });

  it('needs READ in a monitoring environment', async () => {
    const c = await api.login('monitoring', ['STATIC']);
    const r = await tile(c, 1, 0, 0);
    expect([r.status, (r.json() as { key: string }).key]).toEqual([403, 'right_error']);
    const supplier = await api.login('connectivity');
    const s = await tile(supplier, 1, 0, 0);
    expect([s.status, (s.json() as { key: string }).key]).toEqual([403, 'right_error']);
  });

  it('refuses a tile that does not exist and too many map layers with 400 parameter_error naming the field', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const body = async (z: number | string, x: number | string, y: number | string, q = '') => {
      const r = await tile(c, z as number, x as number, y as number, q);
      return { status: r.status, body: r.json() };
    };
    expectParameterError(await body(25, 0, 0), 'z');
    expectParameterError(await body(2, 4, 0), 'x');
    expectParameterError(await body(2, 0, 4), 'y');
    expectParameterError(await body(2, 0, -1), 'y');
    expectParameterError(await body(2, 'a', 0), 'x');
    expectParameterError(await body(2, 0, 0, `?${Array.from({ length: 31 }, (_, i) => `mapLayers=l${i}`).join('&')}`), 'mapLayers');
    expect((await tile(c, 0, 0, 0)).status).toBe(200);
  });
});

describe('what one tile may cost', () => {
  /** `n` points zigzagging over the square of `size` degrees at [lon, lat]: a line as dense as an edge may be */
  const zigzag = (lon: number, lat: number, size: number, n: number, seed = 0) =>
    Array.from({ length: n }, (_, i) => [
      Number((lon + ((i * 37 + seed) % 100) * (size / 100)).toFixed(6)),
      Number((lat + Math.floor(i / 100) * (size / (n / 100))).toFixed(6)),
    ]);

  it('reads at most 100000 points of edges: past that, the edges with the worst open issue first, then the oldest', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const added: string[] = [];
    for (let i = 0; i < 11; i++) {
      const r = await c.request<{ hashId: string }>('POST', '/graph/edge', {
        geometry: { type: 'LineString', coordinates: zigzag(4.88, 52.36, 0.02, 10_000, i) },
        fields: { id: `pipe ${i}` },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      added.push(r.body.hashId);
    }
    // an open issue on a pin of the newest edge
    const pg = await addPinGroup(c, 'on the newest', { geometry: { type: 'Point', coordinates: [4.89, 52.37] } });
    expect((await c.request('POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: { id: 'p' }, edgeHashId: added[10] })).status).toBe(200);
    expect((await c.request('POST', '/issue/', { pinGroupHashId: pg.hashId, title: 'Leak', level: 2, comment: '' })).status).toBe(200);
    const { z, x, y } = locate(4.89, 52.37, 12);
    const drawn = features(await decoded(c, z, x, y), 'edges').map((f) => f.properties.hashId);
    // 11 edges of 10000 points: ten fit
    expect(drawn.sort()).toEqual([added[10], ...added.slice(0, 9)].sort());
  });

  it("queues one environment's cold tiles behind two at a time, refuses the excess with 429 and Retry-After, and answers another environment meanwhile", async () => {
    const heavy = await api.login('monitoring', RIGHTS);
    const other = await api.login('monitoring', RIGHTS);
    await addPinGroup(other, 'elsewhere', { geometry: { type: 'Point', coordinates: [4.9, 52.37] } });
    // lines of 10000 points at random over the world: each crosses every zoom-4 tile
    let seed = 1;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    for (let i = 0; i < 3; i++) {
      const coordinates = Array.from({ length: 10_000 }, () => [Number((-179 + random() * 358).toFixed(3)), Number((-80 + random() * 160).toFixed(3))]);
      expect((await heavy.request('POST', '/graph/edge', { geometry: { type: 'LineString', coordinates }, fields: { id: `spaghetti ${i}` } })).status).toBe(
        200,
      );
    }
    // 80 different tiles at once, none rendered yet: more than 2 drawn and 64 waiting
    const addresses = Array.from({ length: 80 }, (_, i) => ({ x: i % 16, y: Math.floor(i / 16) + 4 }));
    let heavyDone = 0;
    const burst = Promise.all(
      addresses.map(async ({ x, y }) => {
        const r = await tile(heavy, 4, x, y);
        heavyDone++;
        return r;
      }),
    );
    const answered = await other.request<{ rows: unknown[] }>('GET', '/graph/pin-group');
    const doneWhenAnswered = heavyDone;
    const answers = await burst;
    expect(answered.status).toBe(200);
    expect(answered.body.rows).toHaveLength(1);
    // the other environment was answered while the heavy one's tiles were still being drawn
    expect(doneWhenAnswered).toBeLessThan(answers.filter((r) => r.status === 200).length);
    const refused = answers.filter((r) => r.status !== 200);
    expect(refused.length).toBeGreaterThanOrEqual(80 - 66);
    for (const r of refused) expect([r.status, (r.json() as { key: string }).key, r.retryAfter]).toEqual([429, 'rate_limit_error', '1']);
    // asked again once the burst is over, a refused tile is drawn
    const { x, y } = addresses[answers.indexOf(refused[0])];
    expect(features(await decoded(heavy, 4, x, y), 'edges')).toHaveLength(3);
  });
});

describe('cached map tiles', () => {
  const tileOn = async (node: TestApi, c: ApiClient, z: number, x: number, y: number) => {
    const r = await node.app.inject({
      method: 'GET',
      url: `/graph/tiles/${z}/${x}/${y}`,
      headers: { 'api-version': '8', 'environment-hash-id': c.environmentHashId, authorization: `Bearer ${c.token}` },
    });
    expect(r.statusCode).toBe(200);
    return new VectorTile(new PbfReader(r.rawPayload));
  };
  const shown = (t: VectorTile) => features(t, 'pinGroups').map((f) => [f.properties.name, f.properties.level]);

  it('shows each write in the next tile, on every node, after the same tile was answered before it', async () => {
    // a second node of the fleet: its own process memory, the same database
    const other = await startTestApi(api.ctx);
    try {
      const c = await api.login('monitoring', RIGHTS);
      const pg = await addPinGroup(c, 'pump', { geometry: { type: 'Point', coordinates: [4.93, 52.33] } });
      const { z, x, y } = locate(4.93, 52.33, 15);
      for (const node of [api, other]) expect(shown(await tileOn(node, c, z, x, y))).toEqual([['pump', 0]]);

      const rename = await c.request('POST', `/graph/pin-group/${pg.hashId}`, { fields: { id: 'pump station' } });
      expect(rename.status, JSON.stringify(rename.body)).toBe(200);
      for (const node of [other, api]) expect(shown(await tileOn(node, c, z, x, y))).toEqual([['pump station', 0]]);

      const issue = await c.request<{ hashId: string }>('POST', '/issue/', { pinGroupHashId: pg.hashId, title: 'Leak', level: 2, comment: '' });
      expect(issue.status).toBe(200);
      for (const node of [api, other]) expect(shown(await tileOn(node, c, z, x, y))).toEqual([['pump station', 2]]);

      expect((await c.request('POST', `/issue/${issue.body.hashId}`, { closed: true })).status).toBe(204);
      for (const node of [other, api]) expect(shown(await tileOn(node, c, z, x, y))).toEqual([['pump station', 0]]);

      const pipe = await c.request<{ hashId: string }>('POST', '/graph/edge', {
        geometry: {
          type: 'LineString',
          coordinates: [
            [4.929, 52.33],
            [4.931, 52.33],
          ],
        },
        fields: { id: 'main' },
        nodeHashIds: [null, null],
      });
      expect(pipe.status).toBe(200);
      for (const node of [other, api]) expect(features(await tileOn(node, c, z, x, y), 'edges').map((f) => f.properties.name)).toEqual(['main']);

      // moved out of the tile
      expect((await c.request('POST', `/graph/pin-group/${pg.hashId}`, { geometry: { type: 'Point', coordinates: [4.5, 52.1] } })).status).toBe(200);
      for (const node of [api, other]) expect(shown(await tileOn(node, c, z, x, y))).toEqual([]);

      const gone = await addPinGroup(c, 'kiosk', { geometry: { type: 'Point', coordinates: [4.9301, 52.3301] } });
      for (const node of [other, api]) expect(shown(await tileOn(node, c, z, x, y))).toEqual([['kiosk', 0]]);
      expect((await c.request('DELETE', `/graph/pin-group/${gone.hashId}`)).status).toBe(204);
      for (const node of [api, other]) expect(shown(await tileOn(node, c, z, x, y))).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it("leaves the tile version out of the environment's audit log, where the write that changed it shows", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pg = await addPinGroup(c, 'logged', { geometry: { type: 'Point', coordinates: [4.92, 52.31] } });
    const { rows } = await api.ctx.db.query<{ object_type: string }>(
      'SELECT object_type FROM audit_log WHERE environment_id = (SELECT id FROM environment WHERE hash_id = $1) AND object_hash_id = $2',
      [c.environmentHashId, pg.hashId],
    );
    expect(rows.map((r) => r.object_type)).toContain('pinGroup');
    const { rows: versions } = await api.ctx.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM audit_log WHERE environment_id = (SELECT id FROM environment WHERE hash_id = $1) AND object_type = 'tileVersion'",
      [c.environmentHashId],
    );
    expect(versions[0].n).toBe(0);
  });

  it("answers each environment's tile from its own rendering, never another environment's at the same place", async () => {
    const mine = await api.login('monitoring', RIGHTS);
    const theirs = await api.login('monitoring', RIGHTS);
    await addPinGroup(mine, 'my valve', { geometry: { type: 'Point', coordinates: [4.96, 52.34] } });
    await addPinGroup(theirs, 'their valve', { geometry: { type: 'Point', coordinates: [4.96, 52.34] } });
    // as two environments whose graphs were written before tiles had versions (migration 058): the same, first, version
    await api.ctx.db.query('DELETE FROM tile_version WHERE environment_id IN (SELECT id FROM environment WHERE hash_id = ANY($1))', [
      [mine.environmentHashId, theirs.environmentHashId],
    ]);
    const { z, x, y } = locate(4.96, 52.34, 15);
    for (let round = 0; round < 2; round++) {
      expect(shown(await tileOn(api, mine, z, x, y))).toEqual([['my valve', 0]]);
      expect(shown(await tileOn(api, theirs, z, x, y))).toEqual([['their valve', 0]]);
    }
  });

  it('answers the same tile from the cache as rendered afresh, clustered and one by one', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const {
      rows: [{ id }],
    } = await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId]);
    await api.ctx.db.query(
      `INSERT INTO pin_group (hash_id, environment_id, name, symbol_key, geometry, map_layer)
       SELECT 'same' || $1::text || '_' || i, $1::bigint, 'p' || i, 'cp-pole', jsonb_build_object('type', 'Point', 'coordinates', jsonb_build_array(4.85 + (i % 60) * 0.0003, 52.38 + (i / 60) * 0.0002)), 'default'
         FROM generate_series(0, 2999) i`,
      [id],
    );
    expect(
      (
        await c.request('POST', '/graph/edge', {
          geometry: {
            type: 'LineString',
            coordinates: [
              [4.85, 52.38],
              [4.86, 52.385],
            ],
          },
          fields: { id: 'pipe' },
          nodeHashIds: [null, null],
        })
      ).status,
    ).toBe(200);
    for (const [z, lon, lat] of [
      [11, 4.85, 52.38],
      [16, 4.855, 52.383],
    ]) {
      const { x, y } = locate(lon, lat, z);
      const first = await tile(c, z, x, y);
      const again = await tile(c, z, x, y);
      const afresh = await renderTile(api.ctx.db, id, { z, x, y }, ['default']);
      expect(Buffer.from(again.raw)).toEqual(Buffer.from(first.raw));
      expect(Buffer.from(again.raw)).toEqual(afresh);
      const decode = (raw: Buffer) => {
        const t = new VectorTile(new PbfReader(raw));
        return ['pinGroups', 'edges'].map((l) => features(t, l).map((f) => [f.properties, points(f)]));
      };
      expect(decode(again.raw)).toEqual(decode(afresh));
      expect(decode(afresh)[0].some(([properties]) => (properties as { cluster?: boolean }).cluster === true)).toBe(z === 11);
    }
  });
});

describe('the cache of rendered tiles', () => {
  it("holds no more bytes than its bound, and drops an environment's tiles once its graph has changed", async () => {
    const c = await api.login('monitoring', RIGHTS);
    const pg = await addPinGroup(c, 'hydrant', { geometry: { type: 'Point', coordinates: [4.91, 52.35] } });
    const {
      rows: [{ id }],
    } = await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId]);
    const zooms = [10, 11, 12, 13, 14, 15, 16, 17, 18];
    const render = (cache: TileCache, z: number) => cache.tile(api.ctx.db, id, locate(4.91, 52.35, z), ['default']);

    const small = new TileCache(300);
    const sizes = [];
    for (const z of zooms) sizes.push((await render(small, z)).length);
    expect(Math.min(...sizes)).toBeGreaterThan(0);
    expect(sizes.reduce((a, b) => a + b, 0)).toBeGreaterThan(300);
    expect(small.size).toBeGreaterThan(0);
    expect(small.size).toBeLessThanOrEqual(300);

    const large = new TileCache();
    for (const z of zooms) await render(large, z);
    expect(large.size).toBe(sizes.reduce((a, b) => a + b, 0));
    expect((await c.request('POST', `/graph/pin-group/${pg.hashId}`, { fields: { id: 'fire hydrant' } })).status).toBe(200);
    const fresh = await render(large, 15);
    expect(large.size).toBe(fresh.length);
  });
});

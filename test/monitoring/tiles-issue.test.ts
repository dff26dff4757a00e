import { VectorTile } from '@mapbox/vector-tile';
import { PbfReader } from 'pbf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { until } from '../support/until.ts';
import { addPinGroup } from './fixtures.ts';

// The issues' map once missed a new issue (issue 40): could the tile route answer, after the issue's transaction
// committed, a tile drawn while it was being written? Driven deterministically: the issue is written and its
// transaction held open while one tile is answered (from the cache) and another is asked for, held by a lock on the
// tile versions until the commit; after the commit both tiles show the level. The cache keys a tile by the
// version read before the graph (src/monitoring/tiles/cache.ts): read after it, the tile drawn across the commit is
// kept under the new version with the old level, and this test fails.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** The tile of [lon, lat] at zoom z (Web Mercator). */
function locate(lon: number, lat: number, z: number) {
  const n = 2 ** z;
  const latRad = (lat * Math.PI) / 180;
  return { z, x: Math.floor(((lon + 180) / 360) * n), y: Math.floor(((1 - Math.log(Math.tan(latRad) + 1 / Math.cos(latRad)) / Math.PI) / 2) * n) };
}

async function levels(c: ApiClient, at: { z: number; x: number; y: number }): Promise<[unknown, unknown][]> {
  const r = await api.app.inject({
    method: 'GET',
    url: `/graph/tiles/${at.z}/${at.x}/${at.y}`,
    headers: { 'api-version': '8', 'environment-hash-id': c.environmentHashId, authorization: `Bearer ${c.token}` },
  });
  expect(r.statusCode).toBe(200);
  const layer = new VectorTile(new PbfReader(r.rawPayload)).layers.pinGroups;
  return Array.from({ length: layer?.length ?? 0 }, (_, i) => layer.feature(i).properties).map((p) => [p.name, p.level]);
}

describe("a map tile around an issue's transaction", () => {
  it('shows the issue in the first tile asked for after the commit, whether it was answered or drawn meanwhile', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC', 'ISSUES']);
    const pg = await addPinGroup(c, 'substation', { geometry: { type: 'Point', coordinates: [4.91, 52.36] } });
    const warm = locate(4.91, 52.36, 15);
    const cold = locate(4.91, 52.36, 13);
    expect(await levels(c, warm)).toEqual([['substation', 0]]);

    let drawnMeanwhile: Promise<[unknown, unknown][]> | undefined;
    await api.ctx.db.tx(async (client) => {
      await client.query(
        `INSERT INTO issue (hash_id, environment_id, pin_group_id, title, level, start_at)
         SELECT 'flake' || substr(md5(random()::text), 1, 8), environment_id, id, 'Voltage too high', 2, now() FROM pin_group WHERE hash_id = $1`,
        [pg.hashId],
      );
      // the issue is written, not committed: a tile answered now shows the graph before it
      expect(await levels(c, warm)).toEqual([['substation', 0]]);
      // a tile asked for now waits for the tile version until the commit
      await client.query('LOCK TABLE tile_version IN ACCESS EXCLUSIVE MODE');
      drawnMeanwhile = levels(c, cold);
      await until(
        async () =>
          (
            await api.ctx.db.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM tile_version%'",
            )
          ).rows[0].n,
        (n) => n > 0,
        'the tile waiting for its version',
      );
    });
    expect(await drawnMeanwhile).toEqual([['substation', 2]]);
    expect(await levels(c, warm)).toEqual([['substation', 2]]);
    expect(await levels(c, cold)).toEqual([['substation', 2]]);
  });
});

// Map tile rows: an environment with --tile-pin-groups pin groups (100,000 by default) spread over a
// city (Amsterdam's 14 × 13 km, uniformly at random), 1 % of them with an open issue, and 5,000 edges
// (short pipes of 3 points) among them, in a private database. Tiles are rendered the way
// GET /graph/tiles/:z/:x/:y runs them (src/monitoring/tiles/store.ts, encoding included), at zoom 15
// and 14 (pin groups one by one) and 12 (the whole city in a few tiles: clustered), each row over the
// tiles that cover the city's centre, in turn.
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Db } from '../src/app/db.ts';
import { renderTile, TILE_MAX_PIN_GROUPS } from '../src/monitoring/tiles/store.ts';
import type { BenchRow } from './dtls.ts';
import { pct } from './harness.ts';
import { benchDatabase } from './measurements.ts';

const CITY = { west: 4.80, east: 5.00, south: 52.30, north: 52.42 };
const EDGES = 5000;

const tileOf = (lon: number, lat: number, z: number) => {
  const n = 2 ** z;
  const r = (lat * Math.PI) / 180;
  return { x: Math.floor(((lon + 180) / 360) * n), y: Math.floor(((1 - Math.log(Math.tan(r) + 1 / Math.cos(r)) / Math.PI) / 2) * n) };
};

async function fill(db: Db, pinGroups: number): Promise<void> {
  await db.query(`INSERT INTO environment (hash_id, type, name) VALUES ('benchtiles', 'monitoring', 'bench')`);
  await db.query(`INSERT INTO pin_group (hash_id, environment_id, name, symbol_key, map_layer, geometry)
    SELECT 'pg' || g, 1, 'location ' || g, 'cp-pole', 'default',
           jsonb_build_object('type', 'Point', 'coordinates', jsonb_build_array(${CITY.west} + random() * ${CITY.east - CITY.west}, ${CITY.south} + random() * ${CITY.north - CITY.south}))
      FROM generate_series(0, ${pinGroups - 1}) g`);
  await db.query(`INSERT INTO issue (hash_id, environment_id, pin_group_id, title, level)
    SELECT 'is' || id, 1, id, 'leak', 1 + (id % 2) FROM pin_group WHERE id % 100 = 0`);
  await db.query(`INSERT INTO edge (hash_id, environment_id, name, map_layer, geometry)
    SELECT 'e' || i, 1, 'pipe ' || i, 'default', jsonb_build_object('type', 'LineString', 'coordinates', jsonb_build_array(
             jsonb_build_array(lon, lat), jsonb_build_array(lon + 0.002, lat + 0.001), jsonb_build_array(lon + 0.003, lat - 0.001)))
      FROM (SELECT i, ${CITY.west} + random() * ${CITY.east - CITY.west - 0.003} AS lon, ${CITY.south + 0.001} + random() * ${CITY.north - CITY.south - 0.002} AS lat
              FROM generate_series(0, ${EDGES - 1}) i) s`);
  await db.query('VACUUM ANALYZE pin_group');
  await db.query('ANALYZE edge, issue');
}

async function zoomRow(db: Db, z: number, pinGroups: number, rounds: number): Promise<BenchRow> {
  // the 3 × 3 tiles around the centre (at zoom 12: the tiles of the city)
  const centre = tileOf((CITY.west + CITY.east) / 2, (CITY.south + CITY.north) / 2, z);
  const tiles = [-1, 0, 1].flatMap((dx) => [-1, 0, 1].map((dy) => ({ z, x: centre.x + dx, y: centre.y + dy })));
  const latencies: number[] = [];
  let bytes = 0;
  for (const t of tiles) await renderTile(db, 1, t, ['default']);
  // the service's own CPU per tile (PostgreSQL's is apart): on a busy machine, wall time is mostly waiting for a core
  const cpu = process.cpuUsage();
  for (let round = 0; round < rounds; round++) {
    const t = tiles[round % tiles.length];
    const t0 = performance.now();
    const tile = await renderTile(db, 1, t, ['default']);
    latencies.push(performance.now() - t0);
    bytes += tile.length;
  }
  const { rows: [{ n }] } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pin_group WHERE environment_id = 1
      AND lon BETWEEN ${((centre.x / 2 ** z) * 360) - 180} AND ${(((centre.x + 1) / 2 ** z) * 360) - 180}
      AND lat BETWEEN ${(Math.atan(Math.sinh(Math.PI * (1 - (2 * (centre.y + 1)) / 2 ** z))) * 180) / Math.PI} AND ${(Math.atan(Math.sinh(Math.PI * (1 - (2 * centre.y) / 2 ** z))) * 180) / Math.PI}`);
  const used = process.cpuUsage(cpu);
  latencies.sort((a, b) => a - b);
  return {
    name: `map tile at zoom ${z} over a city of ${pinGroups.toLocaleString('en')} pin groups and ${EDGES.toLocaleString('en')} edges (${n.toLocaleString('en')} pin groups in the centre tile${n > TILE_MAX_PIN_GROUPS ? ', clustered' : ''})`,
    value: Number(pct(latencies, 50).toFixed(2)), unit: 'ms per tile (p50)',
    p50Ms: Number(pct(latencies, 50).toFixed(2)), p99Ms: Number(pct(latencies, 99).toFixed(2)),
    target: 'p99 <= 50 ms', detail: `${rounds} tiles over the 3 × 3 around the centre, ${Math.round(bytes / rounds).toLocaleString('en')} bytes each on average; query and encoding; `
      + `${((used.user + used.system) / 1000 / rounds).toFixed(1)} ms CPU of the service per tile; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores`,
  };
}

export async function tileRows(opts: { pinGroups: number; rounds: number }): Promise<BenchRow[]> {
  const db = await benchDatabase('gridgate_bench_tiles');
  try {
    await fill(db, opts.pinGroups);
    const rows: BenchRow[] = [];
    for (const z of [15, 14, 12]) rows.push(await zoomRow(db, z, opts.pinGroups, opts.rounds));
    return rows;
  } finally {
    await db.close();
  }
}

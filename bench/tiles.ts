// Map tile rows: an environment with --tile-pin-groups pin groups (100,000 by default) spread over a
// city (Amsterdam's 14 × 13 km, uniformly at random), 1 % of them with an open issue, and 5,000 edges
// (short pipes of 3 points) among them, in a private database. Tiles are asked for the way
// GET /graph/tiles/:z/:x/:y asks (src/monitoring/tiles/cache.ts: the environment's tile version, then the
// cached tile or a render with its encoding), at zoom 15 and 14 (pin groups one by one) and 12 (the whole city in
// a few tiles: clustered), each row over the tiles that cover the city's centre, in turn. Each round asks twice,
// alternating: cold (a pin group of the environment renamed just before, so the tile is rendered) and warm (the
// same tile again: from the cache). The service's CPU and the PostgreSQL backends' CPU (from /proc) are counted per
// kind; on a busy machine most of the wall time is waiting for a core.
// Then the city's tiles under another environment's load (issue 38): a second environment holds 10 edges of the most
// points an edge may have (10,000), scattered over the world so each crosses every zoom-4 tile; while it asks 12 cold
// zoom-4 tiles at once, the city asks its cold zoom-14 tiles one after another. The figures: the city's tile time, the
// heavy tiles' time, and the event loop's longest delay (what every other request of the process waited at most).
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { MAX_EDGE_POINTS } from '../src/monitoring/graph-schemas.ts';
import type { Db } from '../src/app/db.ts';
import { TileCache } from '../src/monitoring/tiles/cache.ts';
import { TILE_MAX_PIN_GROUPS } from '../src/monitoring/tiles/store.ts';
import type { BenchRow } from './dtls.ts';
import { pct } from './harness.ts';
import { benchDatabase } from './measurements.ts';

const CITY = { west: 4.8, east: 5.0, south: 52.3, north: 52.42 };
const EDGES = 5000;

const tileOf = (lon: number, lat: number, z: number) => {
  const n = 2 ** z;
  const r = (lat * Math.PI) / 180;
  return { x: Math.floor(((lon + 180) / 360) * n), y: Math.floor(((1 - Math.log(Math.tan(r) + 1 / Math.cos(r)) / Math.PI) / 2) * n) };
};

/** The city: environment 1 ('benchtiles') of a fresh bench database, `pinGroups` pin groups, 1 % with an issue, 5,000 edges (also bench/map.ts). */
export async function fill(db: Db, pinGroups: number): Promise<void> {
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

/** CPU seconds of each PostgreSQL backend serving `db` now (this bench's database has no other client), by pid. */
async function backendTicks(db: Db): Promise<Map<number, number>> {
  const { rows } = await db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  const ticks = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks.set(pid, (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {
      // the connection closed meanwhile
    }
  }
  return ticks;
}

/** CPU seconds the backends of `before` used since (those that are gone are left out). */
function backendSecondsSince(before: Map<number, number>): number {
  let sum = 0;
  for (const [pid, was] of before) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      sum += (Number(fields[11]) + Number(fields[12])) / 100 - was;
    } catch {
      // the connection closed meanwhile
    }
  }
  return sum;
}

type Kind = 'cold' | 'warm';

async function zoomRows(db: Db, z: number, pinGroups: number, rounds: number): Promise<BenchRow[]> {
  // the 3 × 3 tiles around the centre (at zoom 12: the tiles of the city)
  const centre = tileOf((CITY.west + CITY.east) / 2, (CITY.south + CITY.north) / 2, z);
  const tiles = [-1, 0, 1].flatMap((dx) => [-1, 0, 1].map((dy) => ({ z, x: centre.x + dx, y: centre.y + dy })));
  const cache = new TileCache();
  for (const t of tiles) await cache.tile(db, 1, t, ['default']);
  // every connection of the pool opened, its statements prepared
  await Promise.all(Array.from({ length: 12 }, () => cache.tile(db, 1, tiles[0], ['default'])));
  const seen = { cold: { latencies: [] as number[], cpu: 0, pg: 0, bytes: 0 }, warm: { latencies: [] as number[], cpu: 0, pg: 0, bytes: 0 } };
  const ask = async (kind: Kind, t: { z: number; x: number; y: number }) => {
    const pg0 = await backendTicks(db);
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    const tile = await cache.tile(db, 1, t, ['default']);
    const ms = performance.now() - t0;
    const used = process.cpuUsage(cpu);
    seen[kind].latencies.push(ms);
    seen[kind].cpu += (used.user + used.system) / 1000;
    seen[kind].pg += backendSecondsSince(pg0) * 1000;
    seen[kind].bytes += tile.length;
  };
  for (let round = 0; round < rounds; round++) {
    const t = tiles[round % tiles.length];
    // a write the tile shows (a pin group's name, far from the centre): the environment's tile version changes
    await db.query(`UPDATE pin_group SET name = 'renamed ' || $1::int WHERE hash_id = 'pg0'`, [round]);
    await ask('cold', t);
    await ask('warm', t);
  }
  const {
    rows: [{ n }],
  } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pin_group WHERE environment_id = 1
      AND lon BETWEEN ${(centre.x / 2 ** z) * 360 - 180} AND ${((centre.x + 1) / 2 ** z) * 360 - 180}
      AND lat BETWEEN ${(Math.atan(Math.sinh(Math.PI * (1 - (2 * (centre.y + 1)) / 2 ** z))) * 180) / Math.PI} AND ${(Math.atan(Math.sinh(Math.PI * (1 - (2 * centre.y) / 2 ** z))) * 180) / Math.PI}`);
  return (['cold', 'warm'] as const).map((kind) => {
    const { latencies, cpu, pg, bytes } = seen[kind];
    latencies.sort((a, b) => a - b);
    return {
      name: `map tile at zoom ${z}, ${kind === 'cold' ? 'cold (rendered: the first after a change)' : 'warm (cached)'}, over a city of ${pinGroups.toLocaleString('en')} pin groups and ${EDGES.toLocaleString('en')} edges (${n.toLocaleString('en')} pin groups in the centre tile${n > TILE_MAX_PIN_GROUPS ? ', clustered' : ''})`,
      value: Number(pct(latencies, 50).toFixed(2)),
      unit: 'ms per tile (p50)',
      p50Ms: Number(pct(latencies, 50).toFixed(2)),
      p99Ms: Number(pct(latencies, 99).toFixed(2)),
      target: 'p99 <= 50 ms',
      detail:
        `${rounds} tiles over the 3 × 3 around the centre, alternating cold and warm, ${Math.round(bytes / rounds).toLocaleString('en')} bytes each on average; ` +
        `${(cpu / rounds).toFixed(2)} ms CPU of the service and ${(pg / rounds).toFixed(2)} ms of PostgreSQL per tile; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores`,
    };
  });
}

const HEAVY_EDGES = 10;
const HEAVY_TILES = 12;

async function underLoadRows(db: Db, pinGroups: number, rounds: number): Promise<BenchRow[]> {
  await db.query(`INSERT INTO environment (hash_id, type, name) VALUES ('benchheavy', 'monitoring', 'heavy')`);
  // points at random over the world, 3 decimals (as a tenant would send them): every segment crosses tiles
  await db.query(`INSERT INTO edge (hash_id, environment_id, name, map_layer, geometry)
    SELECT 'heavy' || e, 2, 'spaghetti ' || e, 'default', jsonb_build_object('type', 'LineString', 'coordinates',
             -- (e >= 0: a subquery of each edge, drawn anew, not one drawn once for all)
             (SELECT jsonb_agg(jsonb_build_array(round((-179 + random() * 358)::numeric, 3), round((-80 + random() * 160)::numeric, 3))) FROM generate_series(1, ${MAX_EDGE_POINTS}) WHERE e >= 0))
      FROM generate_series(1, ${HEAVY_EDGES}) e`);
  const z = 14;
  const centre = tileOf((CITY.west + CITY.east) / 2, (CITY.south + CITY.north) / 2, z);
  const cityTiles = [-1, 0, 1].flatMap((dx) => [-1, 0, 1].map((dy) => ({ z, x: centre.x + dx, y: centre.y + dy })));
  const heavyTiles = Array.from({ length: HEAVY_TILES }, (_, i) => ({ z: 4, x: 2 + i, y: 6 + (i % 2) }));
  const cache = new TileCache();
  const city: number[] = [];
  const heavy: number[] = [];
  let refused = 0;
  let loopMaxMs = 0;
  for (let round = 0; round < rounds; round++) {
    // both environments changed: every tile of this round is cold
    await db.query(`UPDATE pin_group SET name = 'renamed ' || $1::int WHERE hash_id = 'pg0'`, [round]);
    await db.query(`UPDATE edge SET name = 'spaghetti ' || $1::int WHERE hash_id = 'heavy1'`, [round]);
    const loop = monitorEventLoopDelay({ resolution: 5 });
    loop.enable();
    let done = false;
    const burst = Promise.all(
      heavyTiles.map(async (t) => {
        const t0 = performance.now();
        try {
          await cache.tile(db, 2, t, ['default']);
          heavy.push(performance.now() - t0);
        } catch {
          refused++;
        }
      }),
    ).then(() => {
      done = true;
    });
    for (let i = 0; !done; i++) {
      const t0 = performance.now();
      await cache.tile(db, 1, cityTiles[i % cityTiles.length], ['default']);
      city.push(performance.now() - t0);
      // the next city tile cold as well
      await db.query(`UPDATE pin_group SET name = 'renamed ' || $1::int || '.' || $2::int WHERE hash_id = 'pg0'`, [round, i]);
    }
    await burst;
    loop.disable();
    loopMaxMs = Math.max(loopMaxMs, loop.max / 1e6);
  }
  city.sort((a, b) => a - b);
  heavy.sort((a, b) => a - b);
  return [
    {
      name: `map tile at zoom 14, cold, over the city while another environment draws ${HEAVY_TILES} cold zoom-4 tiles at once (${HEAVY_EDGES} edges of ${MAX_EDGE_POINTS.toLocaleString('en')} points over the world)`,
      value: Number(pct(city, 50).toFixed(2)),
      unit: 'ms per tile (p50)',
      p50Ms: Number(pct(city, 50).toFixed(2)),
      p99Ms: Number(pct(city, 99).toFixed(2)),
      target: "another environment's load does not hold the city's tile",
      detail:
        `${city.length} city tiles over ${rounds} rounds of the other environment's burst; its tiles p50 ${pct(heavy, 50).toFixed(0)} ms, max ${(heavy[heavy.length - 1] ?? 0).toFixed(0)} ms ` +
        `(${refused} refused with 429); the event loop's longest delay ${loopMaxMs.toFixed(0)} ms; ${pinGroups.toLocaleString('en')} pin groups in the city; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores`,
    },
  ];
}

export async function tileRows(opts: { pinGroups: number; rounds: number }): Promise<BenchRow[]> {
  const db = await benchDatabase('gridgate_bench_tiles');
  try {
    await fill(db, opts.pinGroups);
    const rows: BenchRow[] = [];
    for (const z of [15, 14, 12]) rows.push(...(await zoomRows(db, z, opts.pinGroups, opts.rounds)));
    rows.push(...(await underLoadRows(db, opts.pinGroups, Math.max(3, Math.round(opts.rounds / 50)))));
    return rows;
  } finally {
    await db.close();
  }
}

// What a map tile shows of an environment: its pin groups (points) and edges (lines) in the tile's
// area and buffer, on the map layers asked for. A tile holds at most TILE_MAX_PIN_GROUPS pin groups
// one by one; past that (a zoomed-out view of a dense area) they are clustered per cell of a
// 16 × 16 grid over the tile: one point per cell at its members' mean position, with their number
// and highest level. A cell of one pin group shows that pin group itself.
//
// What one tile may cost (issue 38: an edge of 500,000 points made each zoom-4 tile it crossed 6-20 s, most of it on
// the event loop, while other environments waited): its statements run on one connection, one after another, within
// TILE_STATEMENT_TIMEOUT_MS; it reads at most TILE_MAX_EDGE_POINTS points of edges; its drawing and encoding give the
// event loop back every WORK_PER_TURN points; and cache.ts lets two tiles of an environment be drawn at once.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { namedStatement, type Queryable, type TxQueryable } from '../../app/db.ts';
import { UnavailableError } from '../../app/errors.ts';
import { clipLine, project, projectLine, tileBox, type TileAddress } from './geometry.ts';
import { encodeTile, type Pause, type TileFeature } from './mvt.ts';

export const TILE_EXTENT = 4096;
/** tile units drawn beyond each edge, so symbols and lines crossing the edge are not cut off */
export const TILE_BUFFER = 64;
export const TILE_MAX_PIN_GROUPS = 2000;
/** cluster cells per tile side */
const CLUSTER_CELLS = 16;
/**
 * Points of edges one tile reads at most: ten edges of the most an edge may hold (MAX_EDGE_POINTS), or the
 * 5,000 pipes of 3 points of the bench city twenty times over. Past it the edges with the worst open issues
 * are drawn first, then the oldest; an edge stored with more points than this alone (before edges were limited)
 * is left out of every tile.
 */
export const TILE_MAX_EDGE_POINTS = 100_000;
/** PostgreSQL time a tile's statements may take; a normal tile takes milliseconds (bench/README.md) */
export const TILE_STATEMENT_TIMEOUT_MS = 5000;
/** points drawn or encoded between two turns of the event loop: about 5 ms of work on lines that cross the tile */
const WORK_PER_TURN = 5000;

// A tile's area is a rectangle of Web Mercator (migration 057's mx, my: 0..1 of the world, as geometry.ts projects):
// $2..$3 west to east, $4..$5 north to south, on the map layers $6. The statements are named: planning the clustered
// one cost as much as a zoomed-in tile's whole execution.
const IN_TILE = 'pg.environment_id = $1 AND pg.mx BETWEEN $2 AND $3 AND pg.my BETWEEN $4 AND $5 AND pg.map_layer = ANY($6)';

const PIN_GROUP_COLUMNS = `pg.hash_id, pg.name, pg.symbol_key, pg.map_layer, pg.lon, pg.lat, pgl.hash_id AS link_hash_id,
  (SELECT coalesce(max(oi.level), 0) FROM issue oi WHERE oi.pin_group_id = pg.id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL) AS level`;
const PIN_GROUP_FROM = 'pin_group pg LEFT JOIN device_link pgl ON pgl.pin_group_id = pg.id';
// the tile's pin groups one by one, none when it holds more than that: counted first from the index alone (an
// InitPlan, in the same round trip), so a clustered tile reads no row and no level here
const PIN_GROUPS = namedStatement(
  'tile-pin-groups',
  `SELECT ${PIN_GROUP_COLUMNS} FROM ${PIN_GROUP_FROM}
  WHERE ${IN_TILE} AND (SELECT count(*) FROM (SELECT 1 FROM pin_group pg WHERE ${IN_TILE} LIMIT ${TILE_MAX_PIN_GROUPS + 1}) s) <= ${TILE_MAX_PIN_GROUPS}`,
);
const PIN_GROUPS_BY_ID = namedStatement('tile-pin-groups-by-id', `SELECT ${PIN_GROUP_COLUMNS} FROM ${PIN_GROUP_FROM} WHERE pg.id = ANY($1)`);

// one row per cell of the CLUSTER_CELLS² grid over the tile ($7: cells per world side at this zoom, $8, $9: the
// tile's first cell), from the index alone; the level from the environment's open issues, hashed once
const CLUSTERS = namedStatement(
  'tile-clusters',
  `SELECT count(*)::int AS count, avg(pg.lon) AS lon, avg(pg.lat) AS lat, coalesce(max(lv.level), 0) AS level, min(pg.id) AS one_id
     FROM pin_group pg
     LEFT JOIN (SELECT pin_group_id, max(level) AS level FROM issue
                 WHERE environment_id = $1 AND closed_at IS NULL AND deleted_at IS NULL GROUP BY pin_group_id) lv ON lv.pin_group_id = pg.id
    WHERE ${IN_TILE}
    GROUP BY floor(pg.mx * $7 - $8), floor(pg.my * $7 - $9)`,
);

type PinGroupRow = {
  hash_id: string;
  name: string;
  symbol_key: string;
  map_layer: string;
  lon: number;
  lat: number;
  link_hash_id: string | null;
  level: number;
};

function pinGroupFeature(r: PinGroupRow, tile: TileAddress): TileFeature {
  return {
    type: 'point',
    geometry: [project([r.lon, r.lat], tile, TILE_EXTENT)],
    properties: { hashId: r.hash_id, name: r.name, symbolKey: r.symbol_key, level: r.level, mapLayer: r.map_layer, deviceLinkHashId: r.link_hash_id },
  };
}

async function pinGroupFeatures(db: Queryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<TileFeature[]> {
  const n = 2 ** tile.z;
  const b = TILE_BUFFER / TILE_EXTENT;
  const args = [environmentId, (tile.x - b) / n, (tile.x + 1 + b) / n, (tile.y - b) / n, (tile.y + 1 + b) / n, mapLayers];
  const { rows } = await db.query<PinGroupRow>(PIN_GROUPS, args);
  // none: too many, or an empty tile (whose clusters are none as well)
  if (rows.length > 0) return rows.map((r) => pinGroupFeature(r, tile));

  const cells = await db.query<{ count: number; lon: number; lat: number; level: number; one_id: number }>(CLUSTERS, [
    ...args,
    n * CLUSTER_CELLS,
    tile.x * CLUSTER_CELLS,
    tile.y * CLUSTER_CELLS,
  ]);
  const single = cells.rows.filter((c) => c.count === 1).map((c) => c.one_id);
  const singles = single.length === 0 ? [] : (await db.query<PinGroupRow>(PIN_GROUPS_BY_ID, [single])).rows;
  const clusters: TileFeature[] = cells.rows
    .filter((c) => c.count > 1)
    .map((c) => ({
      type: 'point',
      geometry: [project([c.lon, c.lat], tile, TILE_EXTENT)],
      properties: { cluster: true, pointCount: c.count, level: c.level },
    }));
  return [...singles.map((r) => pinGroupFeature(r, tile)), ...clusters];
}

type Line = [number, number][];
type EdgeRow = {
  hash_id: string;
  name: string;
  map_layer: string;
  geometry: { type: 'LineString'; coordinates: Line } | { type: 'MultiLineString'; coordinates: Line[] };
  level: number;
};

// an edge's level: the highest of the open issues on its pins (as the edge model has it). The edges of the tile are
// counted first (their points, from the stored JSON without sending it) and sent only while their points together
// stay within $7: worst level first, then the oldest.
const EDGES = namedStatement(
  'tile-edges',
  `WITH candidate AS (
       SELECT e.id,
              (SELECT coalesce(max(oi.level), 0) FROM pin ep JOIN issue oi ON oi.pin_group_id = ep.pin_group_id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL
                 AND (cardinality(oi.pin_ids) = 0 OR ep.id = ANY(oi.pin_ids)) WHERE ep.edge_id = e.id) AS level,
              CASE WHEN e.geometry ->> 'type' = 'MultiLineString'
                   THEN (SELECT sum(jsonb_array_length(l)) FROM jsonb_array_elements(e.geometry -> 'coordinates') l)
                   ELSE jsonb_array_length(e.geometry -> 'coordinates') END AS points
         FROM edge e
        WHERE e.environment_id = $1 AND e.bbox[1] <= $3 AND e.bbox[3] >= $2 AND e.bbox[2] <= $5 AND e.bbox[4] >= $4 AND e.map_layer = ANY($6)
     ), drawn AS (
       SELECT id, level, sum(points) OVER (ORDER BY level DESC, id) AS points_so_far FROM candidate WHERE points <= $7
     )
     SELECT e.hash_id, e.name, e.map_layer, e.geometry, d.level
       FROM drawn d JOIN edge e ON e.id = d.id
      WHERE d.points_so_far <= $7
      ORDER BY d.level DESC, d.id`,
);

async function edgeRows(db: Queryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<EdgeRow[]> {
  const box = tileBox(tile, TILE_EXTENT, TILE_BUFFER);
  const { rows } = await db.query<EdgeRow>(EDGES, [environmentId, box.west, box.east, box.south, box.north, mapLayers, TILE_MAX_EDGE_POINTS]);
  return rows;
}

/**
 * A line's parts in the tile and its buffer, clipped WORK_PER_TURN points at a time with a turn of the event loop
 * between (`pause`): a part that goes on across two slices is joined again, so the parts are clipLine's.
 */
async function clipInTurns(points: Line, pause: Pause): Promise<Line[]> {
  const parts: Line[] = [];
  for (let from = 0; from < points.length - 1; from += WORK_PER_TURN) {
    const slice = points.slice(from, from + WORK_PER_TURN + 1);
    const last = parts[parts.length - 1];
    let first = true;
    for (const part of clipLine(slice, -TILE_BUFFER, TILE_EXTENT + TILE_BUFFER)) {
      const end = last?.[last.length - 1];
      // the previous slice's last part, ending where this one starts (the slices share that point)
      if (first && from > 0 && end && end[0] === part[0][0] && end[1] === part[0][1] && end === points[from]) {
        for (const p of part.slice(1)) last.push(p);
      } else {
        parts.push(part);
      }
      first = false;
    }
    const waited = pause(slice.length);
    if (waited) await waited;
  }
  return parts;
}

async function edgeFeatures(rows: EdgeRow[], tile: TileAddress, pause: Pause): Promise<TileFeature[]> {
  const features: TileFeature[] = [];
  for (const r of rows) {
    const lines = r.geometry.type === 'LineString' ? [r.geometry.coordinates] : r.geometry.coordinates;
    const parts: Line[] = [];
    for (const line of lines) {
      const waited = pause(line.length);
      if (waited) await waited;
      for (const part of await clipInTurns(projectLine(line, tile, TILE_EXTENT), pause)) parts.push(part);
    }
    if (parts.length === 0) continue;
    features.push({ type: 'line', geometry: parts, properties: { hashId: r.hash_id, name: r.name, level: r.level, mapLayer: r.map_layer } });
  }
  return features;
}

/** A Pause that gives the event loop back once `every` units of work have been done since the last time. */
function turnsOf(every: number): Pause {
  let done = 0;
  return (work) => {
    done += work;
    if (done < every) return undefined;
    done = 0;
    return nextTurn();
  };
}

/** Nodes are the map layer `nodes` (the name no pin group's or edge's layer may have): shown when it is asked for. */
async function nodeFeatures(db: Queryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<TileFeature[]> {
  if (!mapLayers.includes(NODES_LAYER)) return [];
  const box = tileBox(tile, TILE_EXTENT, TILE_BUFFER);
  const { rows } = await db.query<{ hash_id: string; name: string; lon: number; lat: number }>(
    `SELECT hash_id, name, lon, lat FROM (
       SELECT hash_id, name, (geometry -> 'coordinates' ->> 0)::float8 AS lon, (geometry -> 'coordinates' ->> 1)::float8 AS lat FROM node WHERE environment_id = $1) n
      WHERE lon BETWEEN $2 AND $3 AND lat BETWEEN $4 AND $5`,
    [environmentId, box.west, box.east, box.south, box.north],
  );
  return rows.map((r) => ({ type: 'point', geometry: [project([r.lon, r.lat], tile, TILE_EXTENT)], properties: { hashId: r.hash_id, name: r.name } }));
}

const NODES_LAYER = 'nodes';

/** The tile's protobuf: layers `pinGroups` (points and clusters), `edges` (lines) and, when asked for, `nodes` (points). */
export async function renderTile(db: TxQueryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<Buffer> {
  // one connection, its statements in turn: a tile holds one of the pool's connections, never three
  const read = await db
    .tx(async (client) => {
      await client.query(`SET LOCAL statement_timeout = ${TILE_STATEMENT_TIMEOUT_MS}`);
      const pinGroups = await pinGroupFeatures(client, environmentId, tile, mapLayers);
      const edges = await edgeRows(client, environmentId, tile, mapLayers);
      const nodes = await nodeFeatures(client, environmentId, tile, mapLayers);
      return { pinGroups, edges, nodes };
    })
    .catch((err: unknown) => {
      // 57014: the statement timeout cancelled it
      if ((err as { code?: string }).code === '57014')
        throw new UnavailableError(
          `the map tile ${tile.z}/${tile.x}/${tile.y} took more than ${TILE_STATEMENT_TIMEOUT_MS} ms to read; ask again later, or zoom in`,
        );
      throw err;
    });
  const pause = turnsOf(WORK_PER_TURN);
  const edges = await edgeFeatures(read.edges, tile, pause);
  return encodeTile(
    [
      { name: 'edges', features: edges },
      { name: 'nodes', features: read.nodes },
      { name: 'pinGroups', features: read.pinGroups },
    ],
    TILE_EXTENT,
    pause,
  );
}

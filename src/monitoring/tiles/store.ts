// What a map tile shows of an environment: its pin groups (points) and edges (lines) in the tile's
// area and buffer, on the map layers asked for. A tile holds at most TILE_MAX_PIN_GROUPS pin groups
// one by one; past that (a zoomed-out view of a dense area) they are clustered per cell of a
// 16 × 16 grid over the tile: one point per cell at its members' mean position, with their number
// and highest level. A cell of one pin group shows that pin group itself.

import { namedStatement, type Queryable } from '../../app/db.ts';
import { clipLine, project, tileBox, type TileAddress } from './geometry.ts';
import { encodeTile, type TileFeature } from './mvt.ts';

export const TILE_EXTENT = 4096;
/** tile units drawn beyond each edge, so symbols and lines crossing the edge are not cut off */
export const TILE_BUFFER = 64;
export const TILE_MAX_PIN_GROUPS = 2000;
/** cluster cells per tile side */
const CLUSTER_CELLS = 16;

// A tile's area is a rectangle of Web Mercator (migration 057's mx, my: 0..1 of the world, as geometry.ts projects):
// $2..$3 west to east, $4..$5 north to south, on the map layers $6. The statements are named: planning the clustered
// one cost as much as a zoomed-in tile's whole execution.
const IN_TILE = 'pg.environment_id = $1 AND pg.mx BETWEEN $2 AND $3 AND pg.my BETWEEN $4 AND $5 AND pg.map_layer = ANY($6)';

const PIN_GROUP_COLUMNS = `pg.hash_id, pg.name, pg.symbol_key, pg.map_layer, pg.lon, pg.lat, pgl.hash_id AS link_hash_id,
  (SELECT coalesce(max(oi.level), 0) FROM issue oi WHERE oi.pin_group_id = pg.id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL) AS level`;
const PIN_GROUP_FROM = 'pin_group pg LEFT JOIN device_link pgl ON pgl.pin_group_id = pg.id';
// the tile's pin groups one by one, none when it holds more than that: counted first from the index alone (an
// InitPlan, in the same round trip), so a clustered tile reads no row and no level here
const PIN_GROUPS = namedStatement('tile-pin-groups', `SELECT ${PIN_GROUP_COLUMNS} FROM ${PIN_GROUP_FROM}
  WHERE ${IN_TILE} AND (SELECT count(*) FROM (SELECT 1 FROM pin_group pg WHERE ${IN_TILE} LIMIT ${TILE_MAX_PIN_GROUPS + 1}) s) <= ${TILE_MAX_PIN_GROUPS}`);
const PIN_GROUPS_BY_ID = namedStatement('tile-pin-groups-by-id', `SELECT ${PIN_GROUP_COLUMNS} FROM ${PIN_GROUP_FROM} WHERE pg.id = ANY($1)`);

// one row per cell of the CLUSTER_CELLS² grid over the tile ($7: cells per world side at this zoom, $8, $9: the
// tile's first cell), from the index alone; the level from the environment's open issues, hashed once
const CLUSTERS = namedStatement('tile-clusters',
  `SELECT count(*)::int AS count, avg(pg.lon) AS lon, avg(pg.lat) AS lat, coalesce(max(lv.level), 0) AS level, min(pg.id) AS one_id
     FROM pin_group pg
     LEFT JOIN (SELECT pin_group_id, max(level) AS level FROM issue
                 WHERE environment_id = $1 AND closed_at IS NULL AND deleted_at IS NULL GROUP BY pin_group_id) lv ON lv.pin_group_id = pg.id
    WHERE ${IN_TILE}
    GROUP BY floor(pg.mx * $7 - $8), floor(pg.my * $7 - $9)`);

type PinGroupRow = { hash_id: string; name: string; symbol_key: string; map_layer: string; lon: number; lat: number; link_hash_id: string | null; level: number };

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

  const cells = await db.query<{ count: number; lon: number; lat: number; level: number; one_id: number }>(
    CLUSTERS, [...args, n * CLUSTER_CELLS, tile.x * CLUSTER_CELLS, tile.y * CLUSTER_CELLS]);
  const single = cells.rows.filter((c) => c.count === 1).map((c) => c.one_id);
  const singles = single.length === 0 ? [] : (await db.query<PinGroupRow>(PIN_GROUPS_BY_ID, [single])).rows;
  const clusters: TileFeature[] = cells.rows.filter((c) => c.count > 1).map((c) => ({
    type: 'point',
    geometry: [project([c.lon, c.lat], tile, TILE_EXTENT)],
    properties: { cluster: true, pointCount: c.count, level: c.level },
  }));
  return [...singles.map((r) => pinGroupFeature(r, tile)), ...clusters];
}

type Line = [number, number][];
type EdgeRow = { hash_id: string; name: string; map_layer: string; geometry: { type: 'LineString'; coordinates: Line } | { type: 'MultiLineString'; coordinates: Line[] }; level: number };

// an edge's level: the highest of the open issues on its pins (as the edge model has it)
const EDGES = namedStatement('tile-edges', `SELECT e.hash_id, e.name, e.map_layer, e.geometry,
          (SELECT coalesce(max(oi.level), 0) FROM pin ep JOIN issue oi ON oi.pin_group_id = ep.pin_group_id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL
             AND (cardinality(oi.pin_ids) = 0 OR ep.id = ANY(oi.pin_ids)) WHERE ep.edge_id = e.id) AS level
     FROM edge e
    WHERE e.environment_id = $1 AND e.bbox[1] <= $3 AND e.bbox[3] >= $2 AND e.bbox[2] <= $5 AND e.bbox[4] >= $4 AND e.map_layer = ANY($6)`);

async function edgeFeatures(db: Queryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<TileFeature[]> {
  const box = tileBox(tile, TILE_EXTENT, TILE_BUFFER);
  const { rows } = await db.query<EdgeRow>(EDGES,
    [environmentId, box.west, box.east, box.south, box.north, mapLayers]);
  const features: TileFeature[] = [];
  for (const r of rows) {
    const lines = r.geometry.type === 'LineString' ? [r.geometry.coordinates] : r.geometry.coordinates;
    const parts = lines.flatMap((line) => clipLine(line.map((p) => project(p, tile, TILE_EXTENT)), -TILE_BUFFER, TILE_EXTENT + TILE_BUFFER));
    if (parts.length === 0) continue;
    features.push({ type: 'line', geometry: parts, properties: { hashId: r.hash_id, name: r.name, level: r.level, mapLayer: r.map_layer } });
  }
  return features;
}

/** Nodes are the map layer `nodes` (the name no pin group's or edge's layer may have): shown when it is asked for. */
async function nodeFeatures(db: Queryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<TileFeature[]> {
  if (!mapLayers.includes(NODES_LAYER)) return [];
  const box = tileBox(tile, TILE_EXTENT, TILE_BUFFER);
  const { rows } = await db.query<{ hash_id: string; name: string; lon: number; lat: number }>(
    `SELECT hash_id, name, lon, lat FROM (
       SELECT hash_id, name, (geometry -> 'coordinates' ->> 0)::float8 AS lon, (geometry -> 'coordinates' ->> 1)::float8 AS lat FROM node WHERE environment_id = $1) n
      WHERE lon BETWEEN $2 AND $3 AND lat BETWEEN $4 AND $5`,
    [environmentId, box.west, box.east, box.south, box.north]);
  return rows.map((r) => ({ type: 'point', geometry: [project([r.lon, r.lat], tile, TILE_EXTENT)], properties: { hashId: r.hash_id, name: r.name } }));
}

const NODES_LAYER = 'nodes';

/** The tile's protobuf: layers `pinGroups` (points and clusters), `edges` (lines) and, when asked for, `nodes` (points). */
export async function renderTile(db: Queryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<Buffer> {
  const [pinGroups, edges, nodes] = await Promise.all([
    pinGroupFeatures(db, environmentId, tile, mapLayers),
    edgeFeatures(db, environmentId, tile, mapLayers),
    nodeFeatures(db, environmentId, tile, mapLayers),
  ]);
  return encodeTile([{ name: 'edges', features: edges }, { name: 'nodes', features: nodes }, { name: 'pinGroups', features: pinGroups }], TILE_EXTENT);
}

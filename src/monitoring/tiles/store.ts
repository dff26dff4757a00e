// What a map tile shows of an environment: its pin groups (points) and edges (lines) in the tile's
// area and buffer, on the map layers asked for. A tile holds at most TILE_MAX_PIN_GROUPS pin groups
// one by one; past that (a zoomed-out view of a dense area) they are clustered per cell of a
// 16 × 16 grid over the tile: one point per cell at its members' mean position, with their number
// and highest level. A cell of one pin group shows that pin group itself.

import type { Queryable } from '../../app/db.ts';
import { clipLine, project, tileBox, type TileAddress } from './geometry.ts';
import { encodeTile, type TileFeature } from './mvt.ts';

export const TILE_EXTENT = 4096;
/** tile units drawn beyond each edge, so symbols and lines crossing the edge are not cut off */
export const TILE_BUFFER = 64;
export const TILE_MAX_PIN_GROUPS = 2000;
/** cluster cells per tile side */
const CLUSTER_CELLS = 16;

const LEVEL = `(SELECT coalesce(max(oi.level), 0) FROM issue oi WHERE oi.pin_group_id = pg.id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL)`;

const PIN_GROUP_COLUMNS = `pg.hash_id, pg.name, pg.symbol_key, pg.map_layer, pg.lon, pg.lat, pgl.hash_id AS link_hash_id, ${LEVEL} AS level`;
const PIN_GROUP_FROM = 'pin_group pg LEFT JOIN device_link pgl ON pgl.pin_group_id = pg.id';

type PinGroupRow = { hash_id: string; name: string; symbol_key: string; map_layer: string; lon: number; lat: number; link_hash_id: string | null; level: number };

function pinGroupFeature(r: PinGroupRow, tile: TileAddress): TileFeature {
  return {
    type: 'point',
    geometry: [project([r.lon, r.lat], tile, TILE_EXTENT)],
    properties: { hashId: r.hash_id, name: r.name, symbolKey: r.symbol_key, level: r.level, mapLayer: r.map_layer, deviceLinkHashId: r.link_hash_id },
  };
}

async function pinGroupFeatures(db: Queryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<TileFeature[]> {
  const box = tileBox(tile, TILE_EXTENT, TILE_BUFFER);
  const inBox = `pg.environment_id = $1 AND pg.lon IS NOT NULL AND pg.lon BETWEEN $2 AND $3 AND pg.lat BETWEEN $4 AND $5 AND pg.map_layer = ANY($6)`;
  const args = [environmentId, box.west, box.east, box.south, box.north, mapLayers];
  const { rows } = await db.query<PinGroupRow>(`SELECT ${PIN_GROUP_COLUMNS} FROM ${PIN_GROUP_FROM} WHERE ${inBox} LIMIT ${TILE_MAX_PIN_GROUPS + 1}`, args);
  if (rows.length <= TILE_MAX_PIN_GROUPS) return rows.map((r) => pinGroupFeature(r, tile));

  // the cell of a position, in SQL: Web Mercator as src/monitoring/tiles/geometry.ts projects it
  const n = 2 ** tile.z;
  const cellX = `floor((((pg.lon + 180) / 360) * ${n} - ${tile.x}) * ${CLUSTER_CELLS})`;
  const sinLat = `sin(radians(least(greatest(pg.lat, -85.0511287798066), 85.0511287798066)))`;
  const cellY = `floor(((0.5 - ln((1 + ${sinLat}) / (1 - ${sinLat})) / (4 * pi())) * ${n} - ${tile.y}) * ${CLUSTER_CELLS})`;
  const cells = await db.query<{ count: string; lon: number; lat: number; level: number; one_id: string }>(
    `SELECT count(*) AS count, avg(pg.lon) AS lon, avg(pg.lat) AS lat, coalesce(max(lv.level), 0) AS level, min(pg.id) AS one_id
       FROM pin_group pg
       LEFT JOIN (SELECT pin_group_id, max(level) AS level FROM issue
                   WHERE environment_id = $1 AND closed_at IS NULL AND deleted_at IS NULL GROUP BY pin_group_id) lv ON lv.pin_group_id = pg.id
      WHERE ${inBox}
      GROUP BY ${cellX}, ${cellY}`, args);
  const single = cells.rows.filter((c) => Number(c.count) === 1).map((c) => c.one_id);
  const singles = single.length === 0 ? [] : (await db.query<PinGroupRow>(`SELECT ${PIN_GROUP_COLUMNS} FROM ${PIN_GROUP_FROM} WHERE pg.id = ANY($1)`, [single])).rows;
  const clusters: TileFeature[] = cells.rows.filter((c) => Number(c.count) > 1).map((c) => ({
    type: 'point',
    geometry: [project([c.lon, c.lat], tile, TILE_EXTENT)],
    properties: { cluster: true, pointCount: Number(c.count), level: c.level },
  }));
  return [...singles.map((r) => pinGroupFeature(r, tile)), ...clusters];
}

type Line = [number, number][];
type EdgeRow = { hash_id: string; name: string; map_layer: string; geometry: { type: 'LineString'; coordinates: Line } | { type: 'MultiLineString'; coordinates: Line[] }; level: number };

async function edgeFeatures(db: Queryable, environmentId: number, tile: TileAddress, mapLayers: string[]): Promise<TileFeature[]> {
  const box = tileBox(tile, TILE_EXTENT, TILE_BUFFER);
  // an edge's level: the highest of the open issues on its pins (as the edge model has it)
  const { rows } = await db.query<EdgeRow>(
    `SELECT e.hash_id, e.name, e.map_layer, e.geometry,
            (SELECT coalesce(max(oi.level), 0) FROM pin ep JOIN issue oi ON oi.pin_group_id = ep.pin_group_id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL
               AND (cardinality(oi.pin_ids) = 0 OR ep.id = ANY(oi.pin_ids)) WHERE ep.edge_id = e.id) AS level
       FROM edge e
      WHERE e.environment_id = $1 AND e.bbox[1] <= $3 AND e.bbox[3] >= $2 AND e.bbox[2] <= $5 AND e.bbox[4] >= $4 AND e.map_layer = ANY($6)`,
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

import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { applyFieldsUpdate, nameFromFields, type Fields, type FieldsUpdate } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { EnvironmentRecord } from '../../accounts/store.ts';
import { fieldConfigurationsOf, mapLayerKeys } from '../../accounts/environments/view.ts';
import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT, toPinGroup } from '../pin-groups/view.ts';
import { PIN_SELECT, toPin } from '../pins/view.ts';
import { thresholdsShown } from '../thresholds/store.ts';
import { insertNode, nodeOf } from '../nodes/store.ts';
import { checkEdgeGeometry } from '../graph-schemas.ts';
import { EDGE_SELECT, toEdge } from './view.ts';

type Geometry = { type: 'LineString'; coordinates: [number, number][] } | { type: 'MultiLineString'; coordinates: [number, number][][] };
export interface EdgeAdd {
  geometry: Geometry;
  fields: Fields;
  mapLayer?: string;
  photo?: string;
  nodeHashIds?: (string | null)[];
  properties?: unknown;
}
export interface EdgeUpdate {
  geometry?: Geometry;
  fields?: FieldsUpdate;
  mapLayer?: string;
  photo?: string | null;
  nodeHashIds?: [string, string];
}

const OWNER = "the environment's edge field configuration";

function checkMapLayer(env: EnvironmentRecord, mapLayer: string): void {
  const keys = mapLayerKeys(env);
  if (!keys.includes(mapLayer)) throw new ParameterError(`mapLayer ${mapLayer} is not a map layer of the environment (its keys: ${keys.join(', ')})`);
}

async function loadRow(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(`SELECT ${EDGE_SELECT} FROM edge e WHERE e.environment_id = $1 AND e.hash_id = $2`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('edge', hashId);
  return rows[0];
}

/**
 * Joins the networks (grids of typeKey node) of an edge's two end nodes: every node of the second
 * end's network moves into the first end's, and the emptied grid goes. Runs under networksLock.
 */
async function joinNetworks(client: Queryable, ends: [number, number]): Promise<void> {
  const { rows } = await client.query<{ id: number; grid_id: number }>('SELECT id, grid_id FROM node WHERE id = ANY($1::bigint[])', [ends]);
  const gridOf = new Map(rows.map((r) => [r.id, r.grid_id]));
  const [keep, gone] = ends.map((id) => gridOf.get(id));
  if (keep === undefined || gone === undefined || keep === gone) return;
  await client.query('UPDATE node SET grid_id = $1, updated_at = now() WHERE grid_id = $2', [keep, gone]);
  await client.query("DELETE FROM grid WHERE id = $1 AND type_key = 'node'", [gone]);
}

/**
 * The environment's node networks change one edge at a time: edges joining networks that share one
 * would otherwise each lock grids the other moves or deletes (a deadlock, or a node put into a grid
 * just deleted). Held until the transaction ends.
 */
async function networksLock(client: Queryable, environmentId: number): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended('gridgate:node-networks:' || $1::text, 0))", [environmentId]);
}

/**
 * edge add. A LineString's `nodeHashIds` name the nodes at its first and last point (one given
 * node is both, as the SDK says); a null makes a node there, in the network of the other end's node
 * when that one exists. An edge between nodes of two networks joins them into the first end's network.
 */
export async function addEdge(db: Db, env: EnvironmentRecord, input: EdgeAdd) {
  checkEdgeGeometry(input.geometry);
  const configs = fieldConfigurationsOf(env).edges;
  const fields = applyFieldsUpdate(configs, {}, input.fields, OWNER);
  const mapLayer = input.mapLayer ?? mapLayerKeys(env)[0];
  checkMapLayer(env, mapLayer);
  if (input.nodeHashIds && input.geometry.type !== 'LineString') throw new ParameterError('nodeHashIds: only a LineString edge ends at nodes');
  const hashId = newHashId();
  await db.tx(async (client) => {
    const ends: (number | null)[] = [null, null];
    if (input.nodeHashIds && input.geometry.type === 'LineString') {
      await networksLock(client, env.id);
      const points = input.geometry.coordinates;
      const given = await Promise.all(input.nodeHashIds.map((h) => (h === null ? null : nodeOf(client, env.id, h))));
      const network = given.find((n) => n !== null)?.gridId ?? null;
      let made: number | null = null;
      for (const [i, node] of given.entries()) {
        if (node) {
          ends[i] = node.id;
          continue;
        }
        const at = { type: 'Point' as const, coordinates: i === 0 ? points[0] : points[points.length - 1] };
        // a node made for an edge is named after it
        const created = await insertNode(
          client,
          env,
          at,
          { [fieldConfigurationsOf(env).nodes[0].key]: `${nameFromFields(configs, fields)} ${i === 0 ? 'start' : 'end'}` },
          network ?? made,
        );
        ends[i] = created.id;
        if (made === null) made = (await client.query<{ grid_id: number }>('SELECT grid_id FROM node WHERE id = $1', [created.id])).rows[0].grid_id;
      }
      // one node given: the edge starts and ends there
      if (given.length === 1) ends[1] = ends[0];
      if (ends[0] !== null && ends[1] !== null && ends[0] !== ends[1]) await joinNetworks(client, [ends[0], ends[1]]);
    }
    await client.query(
      'INSERT INTO edge (hash_id, environment_id, name, fields, geometry, map_layer, photo, node1_id, node2_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
      [
        hashId,
        env.id,
        nameFromFields(configs, fields),
        JSON.stringify(fields),
        JSON.stringify(input.geometry),
        mapLayer,
        input.photo ?? null,
        ends[0],
        ends[1],
      ],
    );
  });
  return { hashId, edge: toEdge(await loadRow(db, env.id, hashId)) };
}

/**
 * edge update. `nodeHashIds` (a LineString's) re-ends the edge at those two nodes, joining their
 * networks as edge add does; a MultiLineString edge turned LineString without them gets two new
 * nodes at its ends, in one new network; a LineString turned MultiLineString ends at no node.
 */
export async function updateEdge(db: Db, env: EnvironmentRecord, hashId: string, update: EdgeUpdate) {
  if (update.mapLayer !== undefined) checkMapLayer(env, update.mapLayer);
  if (update.geometry) checkEdgeGeometry(update.geometry);
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number; fields: Fields; name: string; geometry: Geometry }>(
      'SELECT id, fields, name, geometry FROM edge WHERE environment_id = $1 AND hash_id = $2 FOR UPDATE',
      [env.id, hashId],
    );
    if (rows.length === 0) throw new NotFoundError('edge', hashId);
    const configs = fieldConfigurationsOf(env).edges;
    const fields = update.fields === undefined ? rows[0].fields : applyFieldsUpdate(configs, rows[0].fields, update.fields, OWNER);
    const geometry = update.geometry ?? rows[0].geometry;
    if (update.nodeHashIds && geometry.type !== 'LineString') throw new ParameterError('nodeHashIds: only a LineString edge ends at nodes');
    if (update.nodeHashIds) {
      await networksLock(client, env.id);
      const [start, end] = await Promise.all(update.nodeHashIds.map((h) => nodeOf(client, env.id, h)));
      await client.query('UPDATE edge SET node1_id = $2, node2_id = $3 WHERE id = $1', [rows[0].id, start.id, end.id]);
      if (start.id !== end.id) await joinNetworks(client, [start.id, end.id]);
    } else if (geometry.type === 'LineString' && rows[0].geometry.type === 'MultiLineString') {
      await networksLock(client, env.id);
      const points = geometry.coordinates;
      const nodeName = (end: string) => ({ [fieldConfigurationsOf(env).nodes[0].key]: `${nameFromFields(configs, fields)} ${end}` });
      const start = await insertNode(client, env, { type: 'Point', coordinates: points[0] }, nodeName('start'), null);
      const { gridId } = await nodeOf(client, env.id, start.hashId);
      const end = await insertNode(client, env, { type: 'Point', coordinates: points[points.length - 1] }, nodeName('end'), gridId);
      await client.query('UPDATE edge SET node1_id = $2, node2_id = $3 WHERE id = $1', [rows[0].id, start.id, end.id]);
    } else if (geometry.type === 'MultiLineString') {
      await client.query('UPDATE edge SET node1_id = NULL, node2_id = NULL WHERE id = $1', [rows[0].id]);
    }
    await client.query(
      `UPDATE edge SET fields = $2, name = $3, geometry = COALESCE($4, geometry), map_layer = COALESCE($5, map_layer),
              photo = CASE WHEN $6 THEN $7 ELSE photo END, updated_at = now() WHERE id = $1`,
      [
        rows[0].id,
        JSON.stringify(fields),
        nameFromFields(configs, fields),
        update.geometry ? JSON.stringify(update.geometry) : null,
        update.mapLayer ?? null,
        update.photo !== undefined,
        update.photo ?? null,
      ],
    );
  });
  return { edge: toEdge(await loadRow(db, env.id, hashId)) };
}

/** Pins on a deleted edge stay, on no edge. */
export async function deleteEdge(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await db.query('DELETE FROM edge WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (!rowCount) throw new NotFoundError('edge', hashId);
}

export async function getEdge(db: Queryable, environmentId: number, hashId: string) {
  const row = await loadRow(db, environmentId, hashId);
  const pins = await db.query(`SELECT ${PIN_SELECT} FROM pin p JOIN pin_group pg ON pg.id = p.pin_group_id WHERE p.edge_id = $1 ORDER BY p.id`, [row.e_id]);
  const groups = await db.query(
    `SELECT ${PIN_GROUP_SELECT}, d.next_report_before FROM pin_group pg ${PIN_GROUP_LINK_JOIN} LEFT JOIN device d ON d.id = pgl.device_id
      WHERE pg.id IN (SELECT pin_group_id FROM pin WHERE edge_id = $1) ORDER BY pg.id`,
    [row.e_id],
  );
  return {
    edge: toEdge(row),
    pins: pins.rows.map(toPin),
    pinGroups: groups.rows.map(toPinGroup),
    measurementCycles: [],
    nextReportBefore: groups.rows.map((r) => (r.next_report_before instanceof Date ? r.next_report_before.toISOString() : null)),
    thresholds: await thresholdsShown(db, 'p.edge_id = $1', [row.e_id]),
    photo: (row.e_photo as string | null) ?? null,
  };
}

export async function findEdges(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: 'edge e',
      select: EDGE_SELECT,
      idColumn: 'e.id',
      where: ['e.environment_id = $1'],
      params: [environmentId],
      sortable: { hashId: 'e.hash_id', name: 'e.name' },
      search: ['e.hash_id', 'e.name'],
      updatedColumn: 'e.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ edge: toEdge(r) })) };
}

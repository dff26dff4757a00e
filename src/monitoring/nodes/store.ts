import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { applyFieldsUpdate, defaultFields, nameFromFields, type Fields, type FieldsUpdate } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { EnvironmentRecord } from '../../accounts/store.ts';
import { EDGE_SELECT, toEdge } from '../edges/view.ts';
import { fieldConfigurationsOf } from '../../accounts/environments/view.ts';

type Point = { type: 'Point'; coordinates: [number, number] };
const OWNER = "the environment's node field configuration";
const SELECT = 'n.id, n.hash_id, n.geometry, n.name, n.fields, g.hash_id AS grid_hash_id';
const FROM = 'node n JOIN grid g ON g.id = n.grid_id';

const toNode = (r: Record<string, unknown>) => ({
  hashId: r.hash_id as string,
  geometry: r.geometry as Point,
  name: r.name as string,
  fields: r.fields as Fields,
  gridHashId: r.grid_hash_id as string,
  deletedAt: null,
});

/**
 * A new node, in the network (grid of typeKey node) `gridId`, or in a network of its own. An edge
 * that joins nodes of two networks merges them (edges/store.ts); deleting an edge or a node splits none.
 */
export async function insertNode(
  db: Queryable,
  env: EnvironmentRecord,
  geometry: Point,
  given: Fields,
  gridId: number | null,
): Promise<{ id: number; hashId: string }> {
  const configs = fieldConfigurationsOf(env).nodes;
  const fields = applyFieldsUpdate(configs, defaultFields(configs), given, OWNER);
  const name = nameFromFields(configs, fields);
  let grid = gridId;
  if (grid === null) {
    const gridConfigs = fieldConfigurationsOf(env).grids;
    const gridFields = { ...defaultFields(gridConfigs), [gridConfigs[0].key]: name };
    grid = (
      await db.query<{ id: number }>("INSERT INTO grid (hash_id, environment_id, type_key, name, fields) VALUES ($1, $2, 'node', $3, $4) RETURNING id", [
        newHashId(),
        env.id,
        name,
        JSON.stringify(gridFields),
      ])
    ).rows[0].id;
  }
  const hashId = newHashId();
  const { rows } = await db.query<{ id: number }>(
    'INSERT INTO node (hash_id, environment_id, grid_id, name, fields, geometry) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id',
    [hashId, env.id, grid, name, JSON.stringify(fields), JSON.stringify(geometry)],
  );
  return { id: rows[0].id, hashId };
}

/** The id and network of the environment's node `hashId`; another is a not_found_error. */
export async function nodeOf(db: Queryable, environmentId: number, hashId: string): Promise<{ id: number; gridId: number }> {
  const { rows } = await db.query<{ id: number; grid_id: number }>('SELECT id, grid_id FROM node WHERE environment_id = $1 AND hash_id = $2', [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new NotFoundError('node', hashId);
  return { id: rows[0].id, gridId: rows[0].grid_id };
}

async function loadRow(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(`SELECT ${SELECT} FROM ${FROM} WHERE n.environment_id = $1 AND n.hash_id = $2`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('node', hashId);
  return rows[0];
}

export async function addNode(db: Db, env: EnvironmentRecord, input: { geometry: Point; fields: Fields }) {
  const { hashId } = await db.tx((client) => insertNode(client, env, input.geometry, input.fields, null));
  return { hashId, node: toNode(await loadRow(db, env.id, hashId)) };
}

export async function getNode(db: Queryable, environmentId: number, hashId: string) {
  const row = await loadRow(db, environmentId, hashId);
  const edges = await db.query(`SELECT ${EDGE_SELECT} FROM edge e WHERE e.node1_id = $1 OR e.node2_id = $1 ORDER BY e.id`, [row.id]);
  return { node: toNode(row), edges: edges.rows.map(toEdge) };
}

export async function updateNode(db: Db, env: EnvironmentRecord, hashId: string, update: { geometry?: Point; fields?: FieldsUpdate }) {
  await db.tx(async (client) => {
    const row = await loadRow(client, env.id, hashId);
    const configs = fieldConfigurationsOf(env).nodes;
    const fields = update.fields === undefined ? (row.fields as Fields) : applyFieldsUpdate(configs, row.fields as Fields, update.fields, OWNER);
    await client.query('UPDATE node SET fields = $2, name = $3, geometry = COALESCE($4, geometry), updated_at = now() WHERE id = $1', [
      row.id,
      JSON.stringify(fields),
      nameFromFields(configs, fields),
      update.geometry ? JSON.stringify(update.geometry) : null,
    ]);
  });
  return { node: toNode(await loadRow(db, env.id, hashId)) };
}

/** Edges that ended at a deleted node stay, without that end. */
export async function deleteNode(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await db.query('DELETE FROM node WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (!rowCount) throw new NotFoundError('node', hashId);
}

export async function findNodes(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: FROM,
      select: SELECT,
      idColumn: 'n.id',
      where: ['n.environment_id = $1'],
      params: [environmentId],
      sortable: { hashId: 'n.hash_id', name: 'n.name' },
      search: ['n.hash_id', 'n.name'],
      updatedColumn: 'n.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ node: toNode(r) })) };
}

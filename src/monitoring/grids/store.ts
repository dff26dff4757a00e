import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { applyFieldsUpdate, defaultFields, nameFromFields, type Fields, type FieldsUpdate } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { EnvironmentRecord } from '../../accounts/store.ts';
import { fieldConfigurationsOf } from '../../accounts/environments/view.ts';
import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT, toPinGroup } from '../pin-groups/view.ts';
import { PIN_SELECT, toPin } from '../pins/view.ts';

/** A grid is an ordered set of pins (typeKey pin) or of pin groups (typeKey pinGroup). */
export type GridKind = 'pin' | 'pinGroup';
export interface Grid {
  hashId: string;
  typeKey: GridKind;
  name: string;
  fields: Fields;
  deletedAt: null;
}

const OWNER = "the environment's grid field configuration";
const MEMBER_COLUMN = { pin: 'pin_id', pinGroup: 'pin_group_id' } as const;
const MEMBER_TABLE = { pin: 'pin', pinGroup: 'pin_group' } as const;

export const toGrid = (r: Record<string, unknown>): Grid => ({
  hashId: r.hash_id as string,
  typeKey: r.type_key as GridKind,
  name: r.name as string,
  fields: r.fields as Fields,
  deletedAt: null,
});

/** The grids each of `memberIds` (pins or pin groups) belongs to. */
export async function gridsOf(db: Queryable, kind: GridKind, memberIds: number[]): Promise<Map<number, Grid[]>> {
  const out = new Map<number, Grid[]>(memberIds.map((id) => [id, []]));
  if (memberIds.length === 0) return out;
  const { rows } = await db.query(
    `SELECT m.${MEMBER_COLUMN[kind]} AS member_id, g.hash_id, g.type_key, g.name, g.fields FROM grid_member m JOIN grid g ON g.id = m.grid_id
      WHERE m.${MEMBER_COLUMN[kind]} = ANY($1) ORDER BY g.id`,
    [memberIds],
  );
  for (const r of rows) out.get(r.member_id as number)!.push(toGrid(r));
  return out;
}

/** The ids of `hashIds` (pins or pin groups of the environment) in order; an unknown or repeated one is a parameter_error naming `field[i]`. */
async function memberIdsOf(db: Queryable, environmentId: number, kind: GridKind, hashIds: string[], field: string): Promise<number[]> {
  const { rows } = await db.query<{ id: number; hash_id: string }>(
    `SELECT id, hash_id FROM ${MEMBER_TABLE[kind]} WHERE environment_id = $1 AND hash_id = ANY($2)`,
    [environmentId, hashIds],
  );
  const ids = new Map(rows.map((r) => [r.hash_id, r.id]));
  const seen = new Set<string>();
  return hashIds.map((h, i) => {
    if (!ids.has(h)) throw new ParameterError(`${field}[${i}] ${h} is not a ${kind === 'pin' ? 'pin' : 'pin group'} of this environment`);
    if (seen.has(h)) throw new ParameterError(`${field}[${i}] ${h} is listed twice`);
    seen.add(h);
    return ids.get(h)!;
  });
}

/** The grids of kind `kind` named by `hashIds`; one that is not such a grid of the environment is a parameter_error naming `field[i]`. */
async function gridIdsOf(db: Queryable, environmentId: number, kind: GridKind, hashIds: string[], field: string): Promise<number[]> {
  const { rows } = await db.query<{ id: number; hash_id: string }>(
    'SELECT id, hash_id FROM grid WHERE environment_id = $1 AND type_key = $2 AND hash_id = ANY($3)',
    [environmentId, kind, hashIds],
  );
  const ids = new Map(rows.map((r) => [r.hash_id, r.id]));
  return hashIds.map((h, i) => {
    if (!ids.has(h)) throw new ParameterError(`${field}[${i}] ${h} is not a ${kind === 'pin' ? 'pin grid' : 'pin group grid'} of this environment`);
    return ids.get(h)!;
  });
}

/** Replaces the grid's members by `memberIds`, in that order. */
async function setMembers(db: Queryable, gridId: number, kind: GridKind, memberIds: number[]): Promise<void> {
  await db.query('DELETE FROM grid_member WHERE grid_id = $1', [gridId]);
  await db.query(`INSERT INTO grid_member (grid_id, position, ${MEMBER_COLUMN[kind]}) SELECT $1, o, id FROM unnest($2::bigint[]) WITH ORDINALITY AS x(id, o)`, [
    gridId,
    memberIds,
  ]);
}

/** Appends the member at the end of each grid it is not yet in. */
async function appendTo(db: Queryable, kind: GridKind, memberId: number, gridIds: number[]): Promise<void> {
  if (gridIds.length === 0) return;
  await db.query(
    `INSERT INTO grid_member (grid_id, position, ${MEMBER_COLUMN[kind]})
     SELECT g, COALESCE((SELECT max(position) FROM grid_member WHERE grid_id = g), 0) + 1, $2 FROM unnest($1::bigint[]) AS g
     ON CONFLICT DO NOTHING`,
    [gridIds, memberId],
  );
}

/**
 * A pin group's grid memberships on add or update: appended to `gridHashIds`, and to the pin group
 * grid named `gridName` (made when there is none; when several share the name, the oldest).
 */
export async function joinPinGroupGrids(
  db: Queryable,
  env: EnvironmentRecord,
  pinGroupId: number,
  gridHashIds: string[] | undefined,
  gridName: string | undefined,
): Promise<void> {
  const ids = gridHashIds ? await gridIdsOf(db, env.id, 'pinGroup', gridHashIds, 'gridHashIds') : [];
  if (gridName !== undefined) {
    const { rows } = await db.query<{ id: number }>(
      "SELECT id FROM grid WHERE environment_id = $1 AND type_key = 'pinGroup' AND name = $2 ORDER BY id LIMIT 1",
      [env.id, gridName],
    );
    ids.push(rows[0]?.id ?? (await insertGrid(db, env, 'pinGroup', { [fieldConfigurationsOf(env).grids[0].key]: gridName }, undefined)).id);
  }
  await appendTo(db, 'pinGroup', pinGroupId, ids);
}

/** A pin's pin grid memberships: on add appended to `gridHashIds`; on update exactly those (left grids, joined at the end). */
export async function setPinGrids(db: Queryable, environmentId: number, pinId: number, gridHashIds: string[], replace: boolean): Promise<void> {
  const ids = await gridIdsOf(db, environmentId, 'pin', gridHashIds, 'pinGridsHashIds');
  if (replace) await db.query('DELETE FROM grid_member WHERE pin_id = $1 AND NOT (grid_id = ANY($2))', [pinId, ids]);
  await appendTo(db, 'pin', pinId, ids);
}

async function insertGrid(db: Queryable, env: EnvironmentRecord, kind: GridKind, given: Fields, photo: string | undefined) {
  const configs = fieldConfigurationsOf(env).grids;
  const fields = applyFieldsUpdate(configs, defaultFields(configs), given, OWNER);
  const hashId = newHashId();
  const { rows } = await db.query<{ id: number }>(
    'INSERT INTO grid (hash_id, environment_id, type_key, name, fields, photo) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id',
    [hashId, env.id, kind, nameFromFields(configs, fields), JSON.stringify(fields), photo ?? null],
  );
  return { id: rows[0].id, hashId };
}

export async function addGrid(db: Db, env: EnvironmentRecord, kind: GridKind, input: { fields: Fields; photo?: string; members?: string[] }, field: string) {
  const hashId = await db.tx(async (client) => {
    const memberIds = await memberIdsOf(client, env.id, kind, input.members ?? [], field);
    const grid = await insertGrid(client, env, kind, input.fields, input.photo);
    await setMembers(client, grid.id, kind, memberIds);
    return grid.hashId;
  });
  return { hashId, grid: (await loadGrid(db, env.id, kind, hashId)).grid };
}

async function loadGrid(db: Queryable, environmentId: number, kind: GridKind | null, hashId: string, lock = false) {
  const { rows } = await db.query(
    `SELECT id, hash_id, type_key, name, fields, photo FROM grid WHERE environment_id = $1 AND hash_id = $2 AND ($3::text IS NULL OR type_key = $3)${lock ? ' FOR UPDATE' : ''}`,
    [environmentId, hashId, kind],
  );
  if (rows.length === 0) throw new NotFoundError(kind === 'pin' ? 'pin grid' : kind === 'pinGroup' ? 'pin group grid' : 'grid', hashId);
  return { id: rows[0].id as number, grid: toGrid(rows[0]), photo: (rows[0].photo as string | null) ?? null };
}

async function pinsOf(db: Queryable, gridId: number) {
  const { rows } = await db.query(
    `SELECT ${PIN_SELECT} FROM grid_member m JOIN pin p ON p.id = m.pin_id JOIN pin_group pg ON pg.id = p.pin_group_id WHERE m.grid_id = $1 ORDER BY m.position`,
    [gridId],
  );
  return rows.map(toPin);
}

async function pinGroupsOf(db: Queryable, gridId: number) {
  const { rows } = await db.query(
    `SELECT ${PIN_GROUP_SELECT}, (SELECT max(r.generated_at) FROM condition_report r WHERE r.pin_group_id = pg.id) AS last_report
       FROM grid_member m JOIN pin_group pg ON pg.id = m.pin_group_id ${PIN_GROUP_LINK_JOIN} WHERE m.grid_id = $1 ORDER BY m.position`,
    [gridId],
  );
  return {
    pinGroups: rows.map(toPinGroup),
    lastReports: rows
      .filter((r) => r.last_report !== null)
      .map((r) => ({ pinGroupHashId: r.pg_hash_id as string, generatedAt: (r.last_report as Date).toISOString() })),
  };
}

export async function getPinGrid(db: Queryable, environmentId: number, hashId: string) {
  const g = await loadGrid(db, environmentId, 'pin', hashId);
  return { grid: g.grid, pins: await pinsOf(db, g.id), photo: g.photo };
}

/** `notificationLevel` is the account's subscription to new issues on the grid's pin groups (graph set-notification), else its default. */
export async function getPinGroupGrid(db: Queryable, environmentId: number, hashId: string, accountId?: number) {
  const g = await loadGrid(db, environmentId, 'pinGroup', hashId);
  const {
    rows: [n],
  } = await db.query<{ has_grid: boolean; grid_level: number | null; account_level: number | null }>(
    `SELECT EXISTS (SELECT 1 FROM grid_notification WHERE grid_id = $1 AND account_id = $2) AS has_grid,
            (SELECT level FROM grid_notification WHERE grid_id = $1 AND account_id = $2) AS grid_level,
            COALESCE((SELECT notification_level FROM user_environment_settings WHERE account_id = $2 AND environment_id = $3), 0) AS account_level`,
    [g.id, accountId ?? 0, environmentId],
  );
  const notificationLevel = n.has_grid ? n.grid_level : n.account_level;
  return { grid: g.grid, ...(await pinGroupsOf(db, g.id)), notificationLevel, photo: g.photo };
}

export async function updateGrid(
  db: Db,
  env: EnvironmentRecord,
  kind: GridKind,
  hashId: string,
  update: { fields?: FieldsUpdate; photo?: string | null; members?: string[] },
  field: string,
) {
  await db.tx(async (client) => {
    const g = await loadGrid(client, env.id, kind, hashId, true);
    const configs = fieldConfigurationsOf(env).grids;
    const fields = update.fields === undefined ? g.grid.fields : applyFieldsUpdate(configs, g.grid.fields, update.fields, OWNER);
    if (update.members !== undefined) await setMembers(client, g.id, kind, await memberIdsOf(client, env.id, kind, update.members, field));
    await client.query('UPDATE grid SET fields = $2, name = $3, photo = CASE WHEN $4 THEN $5 ELSE photo END, updated_at = now() WHERE id = $1', [
      g.id,
      JSON.stringify(fields),
      nameFromFields(configs, fields),
      update.photo !== undefined,
      update.photo ?? null,
    ]);
  });
  const g = await loadGrid(db, env.id, kind, hashId);
  return kind === 'pin' ? { grid: g.grid, pins: await pinsOf(db, g.id) } : { grid: g.grid, ...(await pinGroupsOf(db, g.id)) };
}

export async function deleteGrid(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await db.query('DELETE FROM grid WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (!rowCount) throw new NotFoundError('grid', hashId);
}

export async function findGrids(db: Queryable, environmentId: number, query: FindQuery & { type?: string }) {
  const where = ['g.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (query.type !== undefined) {
    params.push(query.type);
    where.push(`g.type_key = $${params.length}`);
  }
  const page = await findPage(
    db,
    {
      from: 'grid g',
      select: 'g.hash_id, g.type_key, g.name, g.fields',
      idColumn: 'g.id',
      where,
      params,
      sortable: { hashId: 'g.hash_id', name: 'g.name' },
      search: ['g.hash_id', 'g.name'],
      updatedColumn: 'g.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ grid: toGrid(r), notificationLevel: 0 })) };
}

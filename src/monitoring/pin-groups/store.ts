import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { applyFieldsUpdate, nameFromFields, type Fields, type FieldsUpdate } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { EnvironmentRecord } from '../../accounts/store.ts';
import { fieldConfigurationsOf, mapLayerKeys } from '../../accounts/environments/view.ts';
import { refreshBoundingBox } from '../environments/settings.ts';
import { EDGE_SELECT, toEdge } from '../edges/view.ts';
import { gridsOf, joinPinGroupGrids } from '../grids/store.ts';
import { linksOfPinGroups } from '../links/store.ts';
import { PIN_SELECT, toPin } from '../pins/view.ts';
import { thresholdsShown } from '../thresholds/store.ts';
import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT, toPinGroup } from './view.ts';

type Point = { type: 'Point'; coordinates: [number, number] } | null;

export interface PinGroupAdd {
  symbolKey: string;
  geometry: Point;
  fields: Fields;
  mapLayer?: string;
  photo?: string;
  gridHashIds?: string[];
  gridName?: string;
}

export interface PinGroupUpdate {
  symbolKey?: string;
  geometry?: Point;
  fields?: FieldsUpdate;
  mapLayer?: string;
  deviceFields?: FieldsUpdate;
  photo?: string | null;
  gridHashIds?: string[];
  gridName?: string;
  deviceTypeDashboardIndex?: number;
}

const OWNER = "the environment's pin group field configuration";
const FROM = `pin_group pg ${PIN_GROUP_LINK_JOIN}`;

function checkMapLayer(env: EnvironmentRecord, mapLayer: string): void {
  const keys = mapLayerKeys(env);
  if (!keys.includes(mapLayer)) throw new ParameterError(`mapLayer ${mapLayer} is not a map layer of the environment (its keys: ${keys.join(', ')})`);
}

async function loadRow(db: Queryable, environmentId: number, hashId: string, lock = false) {
  const { rows } = await db.query(
    `SELECT ${PIN_GROUP_SELECT} FROM ${FROM} WHERE pg.environment_id = $1 AND pg.hash_id = $2${lock ? ' FOR UPDATE OF pg' : ''}`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('pin group', hashId);
  return rows[0];
}

export async function addPinGroup(db: Db, env: EnvironmentRecord, input: PinGroupAdd) {
  const configs = fieldConfigurationsOf(env).pinGroups;
  const fields = applyFieldsUpdate(configs, {}, input.fields, OWNER);
  const mapLayer = input.mapLayer ?? mapLayerKeys(env)[0];
  checkMapLayer(env, mapLayer);
  const hashId = newHashId();
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number }>(
      `INSERT INTO pin_group (hash_id, environment_id, name, symbol_key, geometry, fields, map_layer, photo) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
      [
        hashId,
        env.id,
        nameFromFields(configs, fields),
        input.symbolKey,
        input.geometry === null ? null : JSON.stringify(input.geometry),
        JSON.stringify(fields),
        mapLayer,
        input.photo ?? null,
      ],
    );
    await joinPinGroupGrids(client, env, rows[0].id, input.gridHashIds, input.gridName);
    if (input.geometry) await refreshBoundingBox(client, env.id);
  });
  return { hashId, pinGroup: toPinGroup(await loadRow(db, env.id, hashId)) };
}

async function withGrids(db: Queryable, row: Record<string, unknown>) {
  return { pinGroup: toPinGroup(row), grids: (await gridsOf(db, 'pinGroup', [row.pg_id as number])).get(row.pg_id as number)! };
}

export async function updatePinGroup(db: Db, env: EnvironmentRecord, hashId: string, update: PinGroupUpdate) {
  if (update.mapLayer !== undefined) checkMapLayer(env, update.mapLayer);
  await db.tx(async (client) => {
    const row = await loadRow(client, env.id, hashId, true);
    const configs = fieldConfigurationsOf(env).pinGroups;
    const fields = update.fields === undefined ? (row.pg_fields as Fields) : applyFieldsUpdate(configs, row.pg_fields as Fields, update.fields, OWNER);
    let deviceFields = row.pg_device_fields as Fields;
    if (update.deviceFields !== undefined) {
      const link = (await linksOfPinGroups(client, [row.pg_id as number])).get(row.pg_id as number);
      if (!link) throw new ParameterError('deviceFields can only be set on a pin group with a linked device (they follow its device type)');
      deviceFields = applyFieldsUpdate(
        link.deviceType.pinGroupFieldConfigurations,
        deviceFields,
        update.deviceFields,
        "the linked device type's pinGroupFieldConfigurations",
        'deviceFields',
      );
    }
    await client.query(
      `UPDATE pin_group SET name = $2, fields = $3, device_fields = $4, symbol_key = COALESCE($5, symbol_key),
              geometry = CASE WHEN $6 THEN $7::jsonb ELSE geometry END, map_layer = COALESCE($8, map_layer),
              photo = CASE WHEN $9 THEN $10 ELSE photo END, updated_at = now() WHERE id = $1`,
      [
        row.pg_id,
        nameFromFields(configs, fields),
        JSON.stringify(fields),
        JSON.stringify(deviceFields),
        update.symbolKey ?? null,
        update.geometry !== undefined,
        update.geometry ? JSON.stringify(update.geometry) : null,
        update.mapLayer ?? null,
        update.photo !== undefined,
        update.photo ?? null,
      ],
    );
    await joinPinGroupGrids(client, env, row.pg_id as number, update.gridHashIds, update.gridName);
    if (update.geometry !== undefined) await refreshBoundingBox(client, env.id);
  });
  return withGrids(db, await loadRow(db, env.id, hashId));
}

/**
 * Deleting a pin group unlinks its device first (the link and its channels go with it); its pins go
 * too. Answers the hashIds of the device it unlinked (none or one).
 */
export async function deletePinGroup(db: Db, environmentId: number, hashId: string): Promise<string[]> {
  return db.tx(async (client) => {
    const { rows } = await client.query<{ deleted: number; devices: string[] }>(
      `WITH gone AS (DELETE FROM pin_group WHERE environment_id = $1 AND hash_id = $2 RETURNING id)
       SELECT (SELECT count(*) FROM gone)::int AS deleted,
              ARRAY(SELECT d.hash_id FROM device_link l JOIN device d ON d.id = l.device_id WHERE l.pin_group_id IN (SELECT id FROM gone)) AS devices`,
      [environmentId, hashId],
    );
    if (rows[0].deleted === 0) throw new NotFoundError('pin group', hashId);
    await refreshBoundingBox(client, environmentId);
    return rows[0].devices;
  });
}

export async function getPinGroup(db: Queryable, environmentId: number, hashId: string) {
  const row = await loadRow(db, environmentId, hashId);
  const id = row.pg_id as number;
  const [link, pins, grids] = await Promise.all([
    linksOfPinGroups(db, [id]).then((m) => m.get(id) ?? null),
    db.query(`SELECT ${PIN_SELECT} FROM pin p JOIN pin_group pg ON pg.id = p.pin_group_id WHERE p.pin_group_id = $1 ORDER BY p.id`, [id]),
    gridsOf(db, 'pinGroup', [id]),
  ]);
  const edges = await db.query(`SELECT ${EDGE_SELECT} FROM edge e WHERE e.id IN (SELECT edge_id FROM pin WHERE pin_group_id = $1) ORDER BY e.id`, [id]);
  const pinGrids = await gridsOf(
    db,
    'pin',
    pins.rows.map((r) => r.p_id as number),
  );
  return {
    pinGroup: toPinGroup(row),
    pins: pins.rows.map((r) => ({ pin: toPin(r), grids: pinGrids.get(r.p_id as number)! })),
    edges: edges.rows.map(toEdge),
    device: link?.device ?? null,
    deviceType: link?.deviceType ?? null,
    channelMapping: link?.channelMapping ?? null,
    measurementCycle: null,
    thresholds: await thresholdsShown(db, 'p.pin_group_id = $1', [id]),
    nextReportBefore: link?.device.nextReportBefore ?? null,
    photo: (row.pg_photo as string | null) ?? null,
    grids: grids.get(id)!,
  };
}

export interface PinGroupFindQuery extends FindQuery {
  includeDeleted?: boolean;
  forCommandTypeHashId?: string;
  forEdge?: string;
  forGrid?: string;
}

export async function findPinGroups(db: Queryable, environmentId: number, query: PinGroupFindQuery) {
  const where = ['pg.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (query.forEdge !== undefined) {
    params.push(query.forEdge);
    where.push(`pg.id IN (SELECT p.pin_group_id FROM pin p JOIN edge e ON e.id = p.edge_id WHERE e.environment_id = $1 AND e.hash_id = $${params.length})`);
  }
  if (query.forGrid !== undefined) {
    params.push(query.forGrid);
    where.push(
      `pg.id IN (SELECT m.pin_group_id FROM grid_member m JOIN grid g ON g.id = m.grid_id WHERE g.environment_id = $1 AND g.hash_id = $${params.length})`,
    );
  }
  if (query.forCommandTypeHashId !== undefined) {
    params.push(query.forCommandTypeHashId);
    where.push(
      `EXISTS (SELECT 1 FROM device d JOIN device_type t ON t.id = d.device_type_id WHERE d.id = pgl.device_id AND t.command_type_hash_ids ? $${params.length})`,
    );
  }
  const page = await findPage(
    db,
    {
      from: FROM,
      select: PIN_GROUP_SELECT,
      idColumn: 'pg.id',
      where,
      params,
      sortable: { hashId: 'pg.hash_id', name: 'pg.name' },
      search: ['pg.hash_id', 'pg.name'],
      updatedColumn: 'pg.updated_at',
    },
    query,
  );
  const links = await linksOfPinGroups(
    db,
    page.rows.map((r) => r.pg_id as number),
  );
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => ({ pinGroup: toPinGroup(r), device: links.get(r.pg_id as number)?.device ?? null })),
  };
}

/** The most pin groups one pin-groups update takes. */
export const MAX_BULK_PIN_GROUPS = 10_000;

export interface PinGroupsUpdate {
  hashIds: string[];
  mapLayer?: { key?: string; includeEdges?: boolean };
}

/**
 * graph update-pin-groups: moves the pin groups to the map layer `mapLayer.key`, with `includeEdges` also the
 * edges their pins lie on. All or nothing: a hashId that is not a pin group of the environment is a 404.
 */
export async function updatePinGroups(db: Db, env: EnvironmentRecord, update: PinGroupsUpdate): Promise<void> {
  const key = update.mapLayer?.key;
  if (key !== undefined && !mapLayerKeys(env).includes(key)) {
    throw new ParameterError(`mapLayer.key ${key} is not a map layer of the environment (its keys: ${mapLayerKeys(env).join(', ')})`);
  }
  const hashIds = [...new Set(update.hashIds)];
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number; hash_id: string }>(
      'SELECT id, hash_id FROM pin_group WHERE environment_id = $1 AND hash_id = ANY($2::text[]) ORDER BY id FOR UPDATE',
      [env.id, hashIds],
    );
    if (rows.length < hashIds.length) {
      const found = new Set(rows.map((r) => r.hash_id));
      throw new NotFoundError(
        'pin group',
        hashIds.find((h) => !found.has(h)),
      );
    }
    if (key === undefined) return;
    const ids = rows.map((r) => r.id);
    await client.query('UPDATE pin_group SET map_layer = $2, updated_at = now() WHERE id = ANY($1::bigint[]) AND map_layer IS DISTINCT FROM $2', [ids, key]);
    if (update.mapLayer?.includeEdges) {
      await client.query(
        `UPDATE edge SET map_layer = $3, updated_at = now()
          WHERE environment_id = $1 AND id IN (SELECT edge_id FROM pin WHERE pin_group_id = ANY($2::bigint[]) AND edge_id IS NOT NULL)
            AND map_layer IS DISTINCT FROM $3`,
        [env.id, ids, key],
      );
    }
  });
}

import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { applyFieldsUpdate, nameFromFields, type Fields, type FieldsUpdate } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { EnvironmentRecord } from '../../accounts/store.ts';
import { fieldConfigurationsOf } from '../../accounts/environments/view.ts';
import { EDGE_SELECT, toEdge } from '../edges/view.ts';
import { gridsOf, setPinGrids } from '../grids/store.ts';
import { thresholdsShown } from '../thresholds/store.ts';
import { PIN_SELECT, toPin } from './view.ts';

export interface PinAdd {
  fields: Fields;
  typeKey?: string | null;
  edgeHashId?: string | null;
  pinGridsHashIds?: string[] | null;
}
export interface PinUpdate {
  fields?: FieldsUpdate;
  edgeHashId?: string | null;
  pinGridsHashIds?: string[];
}

const OWNER = "the environment's pin field configuration";
const FROM = 'pin p JOIN pin_group pg ON pg.id = p.pin_group_id';

/** The id of the environment's edge `edgeHashId` (null for null); another is a parameter_error naming edgeHashId. */
async function edgeIdOf(db: Queryable, environmentId: number, edgeHashId: string | null): Promise<number | null> {
  if (edgeHashId === null) return null;
  const { rows } = await db.query<{ id: number }>('SELECT id FROM edge WHERE environment_id = $1 AND hash_id = $2', [environmentId, edgeHashId]);
  if (rows.length === 0) throw new ParameterError(`edgeHashId ${edgeHashId} is not an edge of this environment`);
  return rows[0].id;
}

async function withGrids(db: Queryable, row: Record<string, unknown>) {
  return { pin: toPin(row), grids: (await gridsOf(db, 'pin', [row.p_id as number])).get(row.p_id as number)! };
}

async function loadRow(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(`SELECT ${PIN_SELECT} FROM ${FROM} WHERE p.environment_id = $1 AND p.hash_id = $2`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('pin', hashId);
  return rows[0];
}

export async function addPin(db: Db, env: EnvironmentRecord, pinGroupHashId: string, input: PinAdd) {
  const edgeId = await edgeIdOf(db, env.id, input.edgeHashId ?? null);
  const configs = fieldConfigurationsOf(env).pins;
  const fields = applyFieldsUpdate(configs, {}, input.fields, OWNER);
  const hashId = newHashId();
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number }>(
      `INSERT INTO pin (hash_id, environment_id, pin_group_id, name, fields, type_key, edge_id)
       SELECT $1, $2, pg.id, $4, $5, $6, $7 FROM pin_group pg WHERE pg.environment_id = $2 AND pg.hash_id = $3 RETURNING id`,
      [hashId, env.id, pinGroupHashId, nameFromFields(configs, fields), JSON.stringify(fields), input.typeKey ?? null, edgeId],
    );
    if (rows.length === 0) throw new NotFoundError('pin group', pinGroupHashId);
    if (input.pinGridsHashIds) await setPinGrids(client, env.id, rows[0].id, input.pinGridsHashIds, false);
  });
  return withGrids(db, await loadRow(db, env.id, hashId));
}

export async function updatePin(db: Db, env: EnvironmentRecord, hashId: string, update: PinUpdate) {
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number; fields: Fields }>('SELECT id, fields FROM pin WHERE environment_id = $1 AND hash_id = $2 FOR UPDATE', [
      env.id,
      hashId,
    ]);
    if (rows.length === 0) throw new NotFoundError('pin', hashId);
    if (update.edgeHashId !== undefined)
      await client.query('UPDATE pin SET edge_id = $2, updated_at = now() WHERE id = $1', [rows[0].id, await edgeIdOf(client, env.id, update.edgeHashId)]);
    if (update.pinGridsHashIds !== undefined) await setPinGrids(client, env.id, rows[0].id, update.pinGridsHashIds, true);
    if (update.fields === undefined) return;
    const configs = fieldConfigurationsOf(env).pins;
    const fields = applyFieldsUpdate(configs, rows[0].fields, update.fields, OWNER);
    await client.query('UPDATE pin SET fields = $2, name = $3, updated_at = now() WHERE id = $1', [
      rows[0].id,
      JSON.stringify(fields),
      nameFromFields(configs, fields),
    ]);
  });
  return withGrids(db, await loadRow(db, env.id, hashId));
}

/**
 * A pin linked to a device channel leaves that channel unmapped: its later measurements land on no
 * pin. Answers the hashIds of the devices whose channel mapping changed.
 */
export async function deletePin(db: Queryable, environmentId: number, hashId: string): Promise<string[]> {
  const { rows } = await db.query<{ deleted: number; devices: string[] }>(
    `WITH gone AS (DELETE FROM pin WHERE environment_id = $1 AND hash_id = $2 RETURNING id)
     SELECT (SELECT count(*) FROM gone)::int AS deleted,
            ARRAY(SELECT d.hash_id FROM device_link_channel c JOIN device_link l ON l.id = c.link_id JOIN device d ON d.id = l.device_id
                   WHERE c.pin_id IN (SELECT id FROM gone)) AS devices`,
    [environmentId, hashId],
  );
  if (rows[0].deleted === 0) throw new NotFoundError('pin', hashId);
  return rows[0].devices;
}

export async function getPin(db: Queryable, environmentId: number, hashId: string) {
  const row = await loadRow(db, environmentId, hashId);
  const edges = await db.query(`SELECT ${EDGE_SELECT} FROM edge e JOIN pin p ON p.edge_id = e.id WHERE p.id = $1`, [row.p_id]);
  return { pin: toPin(row), edges: edges.rows.map(toEdge), thresholds: await thresholdsShown(db, 'p.id = $1', [row.p_id]) };
}

export async function findPins(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: FROM,
      select: PIN_SELECT,
      idColumn: 'p.id',
      where: ['p.environment_id = $1'],
      params: [environmentId],
      sortable: { hashId: 'p.hash_id', name: 'p.name' },
      search: ['p.hash_id', 'p.name'],
      updatedColumn: 'p.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ pin: toPin(r), pinGroup: { name: r.p_pin_group_name as string } })) };
}

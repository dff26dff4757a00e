import { softDelete, type Db, type Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { plainConfigurations, type FieldConfiguration, type UpdatableFieldConfiguration } from '../../app/fields.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { VISIBLE_REPORT_TYPE } from '../measurement-filters/store.ts';
import { addQuantity, QUANTITY_SELECT, toQuantity, type Quantity, type QuantityInput } from '../quantities/store.ts';
import { REPORT_TYPE_SELECT, toEnvironmentReportType, type EnvironmentReportType } from './view.ts';

const GROUPS = ['pinGroup', 'pin', 'measurement'] as const;
type Group = (typeof GROUPS)[number];

/** A quantity of the type's form: a new one (created in the environment) or an existing one by hashId. */
export type ReportTypeQuantity = QuantityInput | { hashId: string };

export interface ReportTypeAdd {
  name: string;
  fieldConfigurations: Record<Group, FieldConfiguration[]>;
  quantities: ReportTypeQuantity[];
}

export interface ReportTypeUpdate {
  name?: string;
  fieldConfigurations?: Partial<Record<Group, UpdatableFieldConfiguration[]>>;
  quantities?: ReportTypeQuantity[];
}

/** The color of a quantity made with a report type when none is given, as the SDK's report type add defaults it. */
const NEW_QUANTITY_COLOR = '#ff00ff';

/** The ids of the type's quantities, in order: new ones are added to the environment, existing ones must be its own. */
async function quantityIds(db: Queryable, environmentId: number, list: ReportTypeQuantity[]): Promise<number[]> {
  const ids: number[] = [];
  for (const [i, q] of list.entries()) {
    const hashId = 'hashId' in q ? q.hashId : await addQuantity(db, environmentId, { color: NEW_QUANTITY_COLOR, ...q });
    const { rows } = await db.query<{ id: string }>('SELECT id FROM quantity WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL', [
      environmentId,
      hashId,
    ]);
    if (rows.length === 0) throw new ParameterError(`quantities[${i}].hashId ${hashId} is not a quantity of this environment`);
    const id = Number(rows[0].id);
    if (ids.includes(id)) throw new ParameterError(`quantities[${i}]: quantity ${hashId} is named twice`);
    ids.push(id);
  }
  return ids;
}

async function setQuantities(db: Queryable, reportTypeId: number, ids: number[]): Promise<void> {
  await db.query('DELETE FROM report_type_quantity WHERE report_type_id = $1', [reportTypeId]);
  await db.query(
    'INSERT INTO report_type_quantity (report_type_id, quantity_id, position) SELECT $1, id, o FROM unnest($2::bigint[]) WITH ORDINALITY AS x(id, o)',
    [reportTypeId, ids],
  );
}

const configurationsOf = (given: Record<Group, UpdatableFieldConfiguration[]>) =>
  Object.fromEntries(GROUPS.map((g) => [g, plainConfigurations(`fieldConfigurations.${g}`, given[g])])) as Record<Group, FieldConfiguration[]>;

/** report-type add: a manual ('human') report type of the monitoring environment, with its form's quantities. */
export async function addReportType(db: Db, environmentId: number, input: ReportTypeAdd): Promise<string> {
  const configurations = configurationsOf(input.fieldConfigurations);
  const hashId = newHashId();
  await db.tx(async (client) => {
    const ids = await quantityIds(client, environmentId, input.quantities);
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO report_type (hash_id, environment_id, name, name_text, field_configurations, type) VALUES ($1, $2, $3, $4, $5, 'human') RETURNING id`,
      [hashId, environmentId, JSON.stringify(input.name), input.name, JSON.stringify(configurations)],
    );
    await setQuantities(client, Number(rows[0].id), ids);
  });
  return hashId;
}

/** The environment's manual report type `hashId` (deleted ones with `includeDeleted`: reports keep naming them) and its row id. */
export async function loadReportType(
  db: Queryable,
  environmentId: number,
  hashId: string,
  includeDeleted = false,
): Promise<{ id: number; reportType: EnvironmentReportType }> {
  const { rows } = await db.query(
    `SELECT rt.id, ${REPORT_TYPE_SELECT} FROM report_type rt WHERE rt.environment_id = $1 AND rt.hash_id = $2 AND rt.type = 'human'${includeDeleted ? '' : ' AND rt.deleted_at IS NULL'}`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('reportType', hashId);
  return { id: Number(rows[0].id), reportType: toEnvironmentReportType(rows[0]) };
}

/** The quantities of a manual report type's form, in order. */
export async function quantitiesOfReportType(db: Queryable, reportTypeId: number): Promise<Quantity[]> {
  const { rows } = await db.query(
    `SELECT ${QUANTITY_SELECT} FROM report_type_quantity x JOIN quantity q ON q.id = x.quantity_id WHERE x.report_type_id = $1 ORDER BY x.position`,
    [reportTypeId],
  );
  return rows.map(toQuantity);
}

/** The environment's manual report types whose form offers quantity `quantityHashId` (quantity get's reportTypes). */
export async function reportTypesOfQuantity(db: Queryable, environmentId: number, quantityHashId: string): Promise<EnvironmentReportType[]> {
  const { rows } = await db.query(
    `SELECT ${REPORT_TYPE_SELECT} FROM report_type rt JOIN report_type_quantity x ON x.report_type_id = rt.id JOIN quantity q ON q.id = x.quantity_id
      WHERE rt.environment_id = $1 AND rt.deleted_at IS NULL AND q.hash_id = $2 ORDER BY rt.id`,
    [environmentId, quantityHashId],
  );
  return rows.map(toEnvironmentReportType);
}

/** report-type get: a manual type of the environment with its quantities, or a device report type it receives (which has none). */
export async function getReportType(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(`SELECT rt.id, ${REPORT_TYPE_SELECT} FROM report_type rt WHERE rt.hash_id = $2 AND ${VISIBLE_REPORT_TYPE}`, [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new NotFoundError('reportType', hashId);
  const reportType = toEnvironmentReportType(rows[0]);
  return { reportType, quantities: reportType.type === 'human' ? await quantitiesOfReportType(db, Number(rows[0].id)) : [] };
}

export interface ReportTypeFindQuery extends FindQuery {
  type?: 'human' | 'device';
}

/** report-type find: the environment's manual report types and the device report types of the suppliers whose devices it claimed. */
export async function findReportTypes(db: Queryable, environmentId: number, query: ReportTypeFindQuery) {
  const where = [VISIBLE_REPORT_TYPE];
  const params: unknown[] = [environmentId];
  if (query.type) {
    params.push(query.type);
    where.push(`rt.type = $${params.length}`);
  }
  const page = await findPage(
    db,
    {
      from: 'report_type rt',
      select: REPORT_TYPE_SELECT,
      idColumn: 'rt.id',
      where,
      params,
      sortable: { hashId: 'rt.hash_id', name: 'rt.name_text' },
      search: ['rt.name_text', 'rt.hash_id'],
      updatedColumn: 'rt.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'hashId' },
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ reportType: toEnvironmentReportType(r) })) };
}

/** report-type update: a configuration group or the quantity list given replaces the one stored. */
export async function updateReportType(db: Db, environmentId: number, hashId: string, patch: ReportTypeUpdate): Promise<void> {
  await db.tx(async (client) => {
    const { id, reportType } = await loadReportType(client, environmentId, hashId);
    await client.query('SELECT 1 FROM report_type WHERE id = $1 FOR UPDATE', [id]);
    const configurations = { ...reportType.fieldConfigurations };
    for (const group of GROUPS) {
      const given = patch.fieldConfigurations?.[group];
      if (given) configurations[group] = plainConfigurations(`fieldConfigurations.${group}`, given);
    }
    const name = patch.name ?? reportType.name;
    await client.query('UPDATE report_type SET name = $2, name_text = $3, field_configurations = $4, updated_at = now() WHERE id = $1', [
      id,
      JSON.stringify(name),
      name,
      JSON.stringify(configurations),
    ]);
    if (patch.quantities) await setQuantities(client, id, await quantityIds(client, environmentId, patch.quantities));
  });
}

/** report-type delete: soft, so that the reports entered with it keep their type. */
export async function deleteReportType(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  await loadReportType(db, environmentId, hashId);
  await softDelete(db, 'report_type', 'reportType', environmentId, hashId);
}

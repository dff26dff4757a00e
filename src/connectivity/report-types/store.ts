import { softDelete, type Db, type Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { nameText, type Name } from '../../app/names.ts';
import { unwrapConfigurations, type FieldConfiguration, type UpdatableFieldConfiguration } from '../../app/fields.ts';
import type { SupplierCodeLimits } from '../../sandbox/limits.ts';
import { compileOnSave } from '../user-code.ts';

const GROUPS = ['pinGroup', 'pin', 'measurement'] as const;
type Group = (typeof GROUPS)[number];
type FieldConfigurations = Record<Group, FieldConfiguration[]>;

export interface ReportTypeInput {
  name: Name;
  fieldConfigurations: FieldConfigurations;
  parser: string;
}

export interface ReportTypePatch {
  name?: Name;
  fieldConfigurations?: Partial<Record<Group, UpdatableFieldConfiguration[]>>;
  parser?: string;
}

/** The SDK's supplierReportType (name is a plain string up to Api-Version 6). */
export interface ReportType {
  hashId: string;
  name: Name;
  fieldConfigurations: FieldConfigurations;
  deletedAt: string | null;
}

const SELECT = 'r.id, r.hash_id, r.name, r.field_configurations, r.deleted_at';

function toReportType(r: Record<string, unknown>): ReportType {
  return {
    hashId: r.hash_id as string,
    name: r.name as Name,
    fieldConfigurations: r.field_configurations as FieldConfigurations,
    deletedAt: r.deleted_at instanceof Date ? r.deleted_at.toISOString() : null,
  };
}

function checkKeys(configurations: FieldConfigurations): void {
  for (const group of GROUPS) {
    const seen = new Set<string>();
    for (const c of configurations[group]) {
      if (seen.has(c.key)) throw new ParameterError(`fieldConfigurations.${group}: key ${c.key} is used twice`);
      seen.add(c.key);
    }
  }
}

export async function addReportType(db: Queryable, environmentId: number, input: ReportTypeInput, limits: SupplierCodeLimits): Promise<string> {
  checkKeys(input.fieldConfigurations);
  const parserHash = await compileOnSave(limits, 'parser', input.parser, environmentId);
  const hashId = newHashId();
  await db.query(
    'INSERT INTO report_type (hash_id, environment_id, name, name_text, field_configurations, parser, parser_hash) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [hashId, environmentId, JSON.stringify(input.name), nameText(input.name), JSON.stringify(input.fieldConfigurations), input.parser, parserHash],
  );
  return hashId;
}

export async function getReportType(db: Queryable, environmentId: number, hashId: string): Promise<{ reportType: ReportType; parser: string }> {
  const { rows } = await db.query(`SELECT ${SELECT}, r.parser FROM report_type r WHERE r.environment_id = $1 AND r.hash_id = $2 AND r.deleted_at IS NULL`, [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new NotFoundError('reportType', hashId);
  return { reportType: toReportType(rows[0]), parser: rows[0].parser as string };
}

/** Report types by hashId as they are now, deleted ones included (activities name the types they ran under). */
export async function reportTypesByHashId(db: Queryable, environmentId: number, hashIds: string[]): Promise<Map<string, ReportType>> {
  if (hashIds.length === 0) return new Map();
  const { rows } = await db.query(`SELECT ${SELECT} FROM report_type r WHERE r.environment_id = $1 AND r.hash_id = ANY($2::text[])`, [environmentId, hashIds]);
  return new Map(rows.map((r) => [r.hash_id as string, toReportType(r)]));
}

export async function findReportTypes(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: 'report_type r',
      select: SELECT,
      idColumn: 'r.id',
      where: ['r.environment_id = $1', 'r.deleted_at IS NULL'],
      params: [environmentId],
      sortable: { hashId: 'r.hash_id', name: 'r.name_text' },
      search: ['r.name_text', 'r.hash_id'],
      updatedColumn: 'r.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ reportType: toReportType(r) })) };
}

export async function updateReportType(db: Db, environmentId: number, hashId: string, patch: ReportTypePatch, limits: SupplierCodeLimits): Promise<void> {
  await db.tx(async (client) => {
    const { rows } = await client.query(
      `SELECT ${SELECT}, r.parser FROM report_type r WHERE r.environment_id = $1 AND r.hash_id = $2 AND r.deleted_at IS NULL FOR UPDATE`,
      [environmentId, hashId],
    );
    if (rows.length === 0) throw new NotFoundError('reportType', hashId);
    const current = toReportType(rows[0]);
    const configurations = { ...current.fieldConfigurations };
    for (const group of GROUPS) {
      const given = patch.fieldConfigurations?.[group];
      if (given) configurations[group] = unwrapConfigurations(given);
    }
    checkKeys(configurations);
    const parserHash = patch.parser === undefined ? null : await compileOnSave(limits, 'parser', patch.parser, environmentId);
    await client.query(
      `UPDATE report_type SET name = $2, name_text = $6, field_configurations = $3, parser = COALESCE($4, parser), parser_hash = COALESCE($5, parser_hash), updated_at = now()
        WHERE id = $1`,
      [
        rows[0].id,
        JSON.stringify(patch.name ?? current.name),
        JSON.stringify(configurations),
        patch.parser ?? null,
        parserHash,
        nameText(patch.name ?? current.name),
      ],
    );
  });
}

/** Soft delete: condition reports keep referring to it. */
export async function deleteReportType(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  await softDelete(db, 'report_type', 'reportType', environmentId, hashId);
}

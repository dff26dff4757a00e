import type { Queryable } from '../../app/db.ts';
import { CLAIMED_SCOPE as CLAIMED_COMMAND_TYPES } from '../../connectivity/command-types/store.ts';
import { CLAIMED_DEVICE_TYPES } from '../../connectivity/device-types/store.ts';
import { VISIBLE_QUANTITY } from '../thresholds/store.ts';

// SDK 18 names pinGrid.name, pinGroupGrid.name and environment.name; 17.37.0 (Api-Version 5) grid.name, both kinds of grids
export const SUGGESTION_TYPES = [
  'clientReportType.name',
  'commandType.name',
  'deviceType.name',
  'edge.name',
  'pinGrid.name',
  'pinGroupGrid.name',
  'grid.name',
  'issue.title',
  'pinGroup.name',
  'pin.name',
  'quantity.name',
  'quantity.unit',
  'user.name',
  'environment.name',
] as const;
export type SuggestionType = (typeof SUGGESTION_TYPES)[number];

export interface SuggestionQuery {
  search?: string;
  type: SuggestionType;
  locale?: 'en' | 'nl';
  rowsPerPage?: number;
  offset?: string;
}

/** A stringOrTranslations column `x.name` (with its display text `x.name_text`) in the locale `$n` when it has one. */
const localised = (x: string) => (locale: string) => `CASE WHEN jsonb_typeof(${x}.name) = 'object' THEN coalesce(
  CASE jsonb_typeof(${x}.name -> ${locale}::text) WHEN 'string' THEN ${x}.name ->> ${locale}::text WHEN 'object' THEN ${x}.name -> ${locale}::text ->> 'singular' END,
  ${x}.name_text) ELSE ${x}.name_text END`;

/** `value`: the field as text, a function of the locale's placeholder when the field is translated. */
interface Source {
  value: string | ((locale: string) => string);
  from: string;
  where: string;
}

// Every source reads only what the caller's environment ($1) may read with its right READ (a monitoring
// environment also the types, command types and quantities of the devices it claimed). An object kind an
// environment type does not have (a connectivity environment's pins) simply has no rows there.
const SOURCES: Record<SuggestionType, Source | null> = {
  // the manual report types of a monitoring environment have no table in this service yet: nothing to suggest
  'clientReportType.name': null,
  'commandType.name': {
    value: localised('c'),
    from: 'command_type c',
    where: `(c.environment_id = $1 AND c.deleted_at IS NULL) OR (${CLAIMED_COMMAND_TYPES})`,
  },
  'deviceType.name': { value: localised('t'), from: 'device_type t', where: `(t.environment_id = $1 AND t.deleted_at IS NULL) OR (${CLAIMED_DEVICE_TYPES})` },
  'edge.name': { value: 'e.name', from: 'edge e', where: 'e.environment_id = $1' },
  'pinGrid.name': { value: 'g.name', from: 'grid g', where: "g.environment_id = $1 AND g.type_key = 'pin'" },
  'pinGroupGrid.name': { value: 'g.name', from: 'grid g', where: "g.environment_id = $1 AND g.type_key = 'pinGroup'" },
  'grid.name': { value: 'g.name', from: 'grid g', where: "g.environment_id = $1 AND g.type_key IN ('pin', 'pinGroup')" },
  'issue.title': { value: 'i.title', from: 'issue i', where: 'i.environment_id = $1 AND i.deleted_at IS NULL' },
  'pinGroup.name': { value: 'pg.name', from: 'pin_group pg', where: 'pg.environment_id = $1' },
  'pin.name': { value: 'p.name', from: 'pin p', where: 'p.environment_id = $1' },
  'quantity.name': { value: localised('q'), from: 'quantity q', where: VISIBLE_QUANTITY },
  'quantity.unit': { value: 'q.unit', from: 'quantity q', where: VISIBLE_QUANTITY },
  // the users of this service are its machine accounts
  'user.name': { value: 'a.name', from: 'machine_account a', where: 'a.environment_id = $1 AND a.revoked_at IS NULL' },
  'environment.name': { value: 'env.name', from: 'environment env', where: 'env.id = $1' },
};

/** `%` and `_` match themselves in the search text. */
const likePattern = (search: string) => `%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * suggestions find: the distinct values of one field that contain `search` (case-insensitively), in
 * ascending order, the page after `offset` (the last value of the previous page).
 */
export async function findSuggestions(db: Queryable, environmentId: number, query: SuggestionQuery): Promise<{ results: string[] }> {
  const source = SOURCES[query.type];
  if (!source) return { results: [] };
  const params: unknown[] = [environmentId, likePattern(query.search ?? ''), query.rowsPerPage ?? 50];
  let value = source.value;
  if (typeof value === 'function') {
    params.push(query.locale ?? 'en');
    value = value(`$${params.length}`);
  }
  let after = '';
  if (query.offset !== undefined) {
    params.push(query.offset);
    after = ` AND v > $${params.length}`;
  }
  const { rows } = await db.query<{ v: string }>(
    `SELECT DISTINCT v FROM (SELECT ${value} AS v FROM ${source.from} WHERE ${source.where}) x
      WHERE v IS NOT NULL AND v <> '' AND v ILIKE $2${after} ORDER BY v LIMIT $3`,
    params,
  );
  return { results: rows.map((r) => r.v) };
}

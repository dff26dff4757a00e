// What an export writes, resolved when it is requested: the SDK's content names objects by hashId and periods by
// name; the scope holds their ids and concrete instants, so the worker (perhaps much later, perhaps run again
// after a crash) writes exactly what was asked, scoped to the environment that asked.

import type { Queryable } from '../../app/db.ts';
import { ParameterError } from '../../app/errors.ts';
import { compileQuery } from '../analytics/compile.ts';
import type { AnalyticsQuery } from '../analytics/query.ts';
import { resolveSeries } from '../charts/series.ts';

/** The measurements of pins of the environment generated in [from, to), narrowed by pin group, pin, quantity, series or report type. */
export interface MeasurementScope {
  kind: 'measurements';
  from: string | null;
  to: string | null;
  pinGroupIds?: number[];
  pinIds?: number[];
  quantityIds?: number[];
  /** pin and quantity pairs (a chart's series) */
  series?: [number, number][];
  /** the types of the reports the measurements are in (a measurement filter's) */
  reportTypeIds?: number[];
}
/** The static data: every pin with its pin group (a grid's members only, when given). */
export interface StaticScope {
  kind: 'static';
  pinGroupIds?: number[];
  pinIds?: number[];
}
export interface AnalyticsScope {
  kind: 'analytics';
  query: AnalyticsQuery;
}
export type ExportScope = MeasurementScope | StaticScope | AnalyticsScope;

export type AddExportContent =
  | { type: 'all'; staticOnly: boolean; gridHashId: string | null; from: string; to: string }
  | { type: 'measurementFilter'; measurementFilterHashId: string }
  | { type: 'analyticsQuery'; query: AnalyticsQuery; dashboardId: string; widgetName: string }
  | { type: 'chart'; from: string; to: string; series: { pinHashId: string; quantityHashId: string }[]; highResolution?: boolean; title: string };

/** The request's content as the export request model shows it, and the scope the worker writes. */
export interface ResolvedContent {
  content: Record<string, unknown>;
  scope: ExportScope;
}

function period(from: string, to: string): { from: string; to: string } {
  if (Date.parse(from) >= Date.parse(to)) throw new ParameterError('content.to must be after content.from');
  return { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

/** The pin groups and pins a grid of the environment holds; parameter_error naming `field` when it is not one. */
async function gridMembers(db: Queryable, environmentId: number, gridHashId: string, field: string): Promise<{ pinGroupIds: number[]; pinIds: number[] }> {
  const { rows } = await db.query<{ found: boolean; pin_group_ids: number[]; pin_ids: number[] }>(
    `SELECT true AS found, coalesce(array_agg(m.pin_group_id) FILTER (WHERE m.pin_group_id IS NOT NULL), '{}') AS pin_group_ids,
            coalesce(array_agg(m.pin_id) FILTER (WHERE m.pin_id IS NOT NULL), '{}') AS pin_ids
       FROM grid g LEFT JOIN grid_member m ON m.grid_id = g.id
      WHERE g.environment_id = $1 AND g.hash_id = $2 GROUP BY g.id`,
    [environmentId, gridHashId],
  );
  if (rows.length === 0) throw new ParameterError(`${field} ${gridHashId} is not a grid of this environment`);
  return { pinGroupIds: rows[0].pin_group_ids.map(Number), pinIds: rows[0].pin_ids.map(Number) };
}

const NAMED_PERIODS: Record<string, string> = { lastMonth: '1 month', lastQuarter: '3 months', lastYear: '1 year' };

/** Checks `content` against the environment's objects and resolves it; every refusal is a parameter_error naming the member. */
export async function resolveContent(db: Queryable, environmentId: number, content: AddExportContent): Promise<ResolvedContent> {
  switch (content.type) {
    case 'all': {
      const { from, to } = period(content.from, content.to);
      const members = content.gridHashId === null ? {} : await gridMembers(db, environmentId, content.gridHashId, 'content.gridHashId');
      const shown = { type: 'all', staticOnly: content.staticOnly, gridHashId: content.gridHashId, from, to };
      return { content: shown, scope: content.staticOnly ? { kind: 'static', ...members } : { kind: 'measurements', from, to, ...members } };
    }
    case 'chart': {
      const { from, to } = period(content.from, content.to);
      // the chart's own rule for which pin and quantity an environment may read: another environment's quantity is
      // refused exactly as one that does not exist
      const series = (await resolveSeries(db, environmentId, content.series, (i) => `content.series[${i}]`)).map((s): [number, number] => [
        Number(s.pinId),
        Number(s.quantityId),
      ]);
      const shown = { type: 'chart', from, to, highResolution: content.highResolution ?? false, series: content.series, title: content.title };
      return { content: shown, scope: { kind: 'measurements', from, to, series } };
    }
    case 'measurementFilter': {
      const { rows } = await db.query<{
        name: string;
        description: string;
        period: unknown;
        pin_group_ids: number[];
        quantity_ids: number[];
        report_type_ids: number[];
        grid_hash_id: string | null;
      }>(
        `SELECT f.name, f.description, f.period, f.pin_group_ids, f.quantity_ids, f.report_type_ids, g.hash_id AS grid_hash_id
           FROM measurement_filter f LEFT JOIN grid g ON g.id = f.grid_id AND g.environment_id = f.environment_id
          WHERE f.environment_id = $1 AND f.hash_id = $2 AND f.deleted_at IS NULL`,
        [environmentId, content.measurementFilterHashId],
      );
      if (rows.length === 0)
        throw new ParameterError(`content.measurementFilterHashId ${content.measurementFilterHashId} is not a measurement filter of this environment`);
      const f = rows[0];
      let from: string | null = null;
      let to: string | null = null;
      if (typeof f.period === 'string') {
        const { rows: p } = await db.query<{ from: Date; to: Date }>('SELECT now() - $1::interval AS from, now() AS to', [
          NAMED_PERIODS[f.period] ?? '1 month',
        ]);
        [from, to] = [p[0].from.toISOString(), p[0].to.toISOString()];
      } else if (f.period && typeof f.period === 'object') {
        const p = f.period as { since?: string; before?: string };
        from = p.since ? new Date(p.since).toISOString() : null;
        to = p.before ? new Date(p.before).toISOString() : null;
      }
      const grid = f.grid_hash_id === null ? null : await gridMembers(db, environmentId, f.grid_hash_id, 'content.measurementFilterHashId');
      const scope: MeasurementScope = { kind: 'measurements', from, to };
      if (f.pin_group_ids.length > 0) scope.pinGroupIds = f.pin_group_ids.map(Number);
      if (f.quantity_ids.length > 0) scope.quantityIds = f.quantity_ids.map(Number);
      // every criterion measurement find takes from the filter: an export of it holds the rows find shows
      if (f.report_type_ids.length > 0) scope.reportTypeIds = f.report_type_ids.map(Number);
      if (grid) Object.assign(scope, { pinGroupIds: [...(scope.pinGroupIds ?? []), ...grid.pinGroupIds], pinIds: grid.pinIds });
      const shown = { type: 'measurementFilter', name: f.name, description: f.description, ...(from ? { from } : {}), ...(to ? { to } : {}) };
      return { content: shown, scope };
    }
    case 'analyticsQuery':
      // compiled once here so an invalid query is refused now, naming its member, not failed later in the worker
      compileQuery(content.query, environmentId, 0, 1);
      return {
        content: { type: 'analyticsQuery', query: content.query, dashboardId: content.dashboardId, widgetName: content.widgetName },
        scope: { kind: 'analytics', query: content.query },
      };
  }
}

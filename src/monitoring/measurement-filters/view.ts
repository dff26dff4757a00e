/** The MeasurementFilter model's columns of `measurement_filter f`. */
export const MEASUREMENT_FILTER_SELECT = `f.hash_id AS f_hash_id, f.name AS f_name, f.description AS f_description, f.period AS f_period,
  f.include_pins_without_reports AS f_include_pins_without_reports, f.created_at AS f_created_at, f.updated_at AS f_updated_at, f.deleted_at AS f_deleted_at`;

/** A named period, or an explicit one: since included, before not. */
export type Period = 'lastMonth' | 'lastQuarter' | 'lastYear' | { since?: string; before?: string };

export interface MeasurementFilter {
  hashId: string;
  name: string;
  description: string;
  period: Period;
  includePinsWithoutReports: boolean;
  createdAt: string;
  updatedAt: string;
  deletedAt: string | null;
}

const iso = (v: unknown): string | null => (v instanceof Date ? v.toISOString() : null);

export function toMeasurementFilter(r: Record<string, unknown>): MeasurementFilter {
  return {
    hashId: r.f_hash_id as string,
    name: r.f_name as string,
    description: r.f_description as string,
    period: r.f_period as Period,
    includePinsWithoutReports: r.f_include_pins_without_reports as boolean,
    createdAt: iso(r.f_created_at)!,
    updatedAt: iso(r.f_updated_at)!,
    deletedAt: iso(r.f_deleted_at),
  };
}

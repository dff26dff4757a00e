import type { FieldConfiguration } from '../../app/fields.ts';

/** The SDK's environmentReportType: a manual ('human') type of the monitoring environment or a supplier's device type. */
export interface EnvironmentReportType {
  hashId: string;
  /** plain text at every Api-Version (a device report type's translated name reads as its text) */
  name: string;
  fieldConfigurations: { pinGroup: FieldConfiguration[]; pin: FieldConfiguration[]; measurement: FieldConfiguration[] };
  type: 'human' | 'device';
  deletedAt: string | null;
}

/** The environmentReportType columns of `report_type rt`. */
export const REPORT_TYPE_SELECT =
  'rt.hash_id AS rt_hash_id, rt.name_text AS rt_name, rt.field_configurations AS rt_field_configurations, rt.type AS rt_type, rt.deleted_at AS rt_deleted_at';

export function toEnvironmentReportType(r: Record<string, unknown>): EnvironmentReportType {
  const c = (r.rt_field_configurations ?? {}) as Partial<EnvironmentReportType['fieldConfigurations']>;
  return {
    hashId: r.rt_hash_id as string,
    name: r.rt_name as string,
    fieldConfigurations: { pinGroup: c.pinGroup ?? [], pin: c.pin ?? [], measurement: c.measurement ?? [] },
    type: r.rt_type as 'human' | 'device',
    deletedAt: r.rt_deleted_at instanceof Date ? r.rt_deleted_at.toISOString() : null,
  };
}

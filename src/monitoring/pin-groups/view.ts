/** How a pin group row becomes the PinGroup model; selected as `pg`, its link (if any) as `pgl`. */
export const PIN_GROUP_SELECT = `pg.id AS pg_id, pg.hash_id AS pg_hash_id, pg.geometry AS pg_geometry, pg.name AS pg_name, pg.symbol_key AS pg_symbol_key,
  pg.device_fields AS pg_device_fields, pg.fields AS pg_fields, pg.map_layer AS pg_map_layer, pg.photo AS pg_photo,
  (SELECT max(r.generated_at) FROM condition_report r WHERE r.pin_group_id = pg.id) AS pg_most_recent_measurement_at, pgl.hash_id AS pg_link_hash_id,
  (SELECT coalesce(max(oi.level), 0) FROM issue oi WHERE oi.pin_group_id = pg.id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL) AS pg_level`;

/** The join that PIN_GROUP_SELECT needs after `pin_group pg`. */
export const PIN_GROUP_LINK_JOIN = 'LEFT JOIN device_link pgl ON pgl.pin_group_id = pg.id';

export interface PinGroup {
  hashId: string;
  geometry: { type: 'Point'; coordinates: [number, number] } | null;
  name: string;
  symbolKey: string;
  deviceFields: Record<string, unknown>;
  fields: Record<string, unknown>;
  deviceLinkHashId: string | null;
  level: number;
  mapLayer: string;
  mostRecentMeasurementAt: string | null;
  deletedAt: null;
}

export function toPinGroup(r: Record<string, unknown>): PinGroup {
  const at = r.pg_most_recent_measurement_at;
  return {
    hashId: r.pg_hash_id as string,
    geometry: (r.pg_geometry as PinGroup['geometry']) ?? null,
    name: r.pg_name as string,
    symbolKey: r.pg_symbol_key as string,
    deviceFields: r.pg_device_fields as Record<string, unknown>,
    fields: r.pg_fields as Record<string, unknown>,
    deviceLinkHashId: (r.pg_link_hash_id as string | null) ?? null,
    // the highest level of its open issues (0 without one)
    level: (r.pg_level as number | undefined) ?? 0,
    mapLayer: r.pg_map_layer as string,
    mostRecentMeasurementAt: at instanceof Date ? at.toISOString() : null,
    // deleted pin groups are removed, never shown
    deletedAt: null,
  };
}

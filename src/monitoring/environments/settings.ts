import type { Db } from '../../app/db.ts';
import { ParameterError } from '../../app/errors.ts';
import { plainConfigurations, type UpdatableFieldConfiguration } from '../../app/fields.ts';
import { patchEnvironment, type EnvironmentRecord } from '../../accounts/store.ts';
import type { ChangeBus } from '../../app/changes.ts';
import { GRAPH_KINDS, type GraphKind } from '../../accounts/environments/view.ts';

export interface EnvironmentUpdate {
  name?: string;
  mapLayers?: { name: string; key: string; style?: unknown; namedStyle?: string }[];
  fieldConfigurations?: Record<GraphKind, UpdatableFieldConfiguration[]>;
  [member: string]: unknown;
}

/** environment update: validates what a schema cannot state and stores the settings; returns the updated record. */
export async function updateEnvironment(
  db: Db,
  env: EnvironmentRecord,
  update: EnvironmentUpdate,
  changes: Pick<ChangeBus, 'publish'>,
): Promise<EnvironmentRecord> {
  const { name, fieldConfigurations, ...rest } = update;
  const patch: Record<string, unknown> = { ...rest };
  if (fieldConfigurations) {
    patch.fieldConfigurations = Object.fromEntries(GRAPH_KINDS.map((k) => [k, plainConfigurations(`fieldConfigurations.${k}`, fieldConfigurations[k])]));
  }
  if (update.mapLayers) {
    const keys = new Set<string>();
    update.mapLayers.forEach((l, i) => {
      if (keys.has(l.key)) throw new ParameterError(`mapLayers[${i}].key ${l.key} is used twice`);
      keys.add(l.key);
    });
  }
  const updated = await patchEnvironment(db, env, name, patch);
  // the report path keeps each pin's auto-close settings: they are read again
  await changes.publish('thresholds', { pinIds: [], quantityHashIds: [], all: true });
  return updated;
}

/**
 * environment delete: no account reaches the environment afterwards (every account's lookup
 * requires a live environment). Its devices go back to their suppliers, unlinked, so their
 * reports no longer land on its pins.
 */
export async function deleteEnvironment(db: Db, env: EnvironmentRecord): Promise<string[]> {
  return db.tx(async (client) => {
    await client.query('UPDATE environment SET deleted_at = now() WHERE id = $1', [env.id]);
    const { rows } = await client.query<{ hash_id: string }>(
      'WITH gone AS (DELETE FROM device_link WHERE environment_id = $1 RETURNING device_id) SELECT d.hash_id FROM device d WHERE d.id IN (SELECT device_id FROM gone)',
      [env.id],
    );
    await client.query('UPDATE device SET claimed_environment_id = NULL, claimed_at = NULL, updated_at = now() WHERE claimed_environment_id = $1', [env.id]);
    return rows.map((r) => r.hash_id);
  });
}

/** The rectangle around every pin group's point, as the Environment model's boundingBox (null without any). */
export async function refreshBoundingBox(db: Pick<Db, 'query'>, environmentId: number): Promise<void> {
  await db.query(
    `UPDATE environment e SET settings = e.settings || jsonb_build_object('boundingBox', b.box)
       FROM (SELECT CASE WHEN count(*) = 0 THEN 'null'::jsonb ELSE jsonb_build_object('type', 'LineString', 'coordinates', jsonb_build_array(
                      jsonb_build_array(min(x), min(y)), jsonb_build_array(max(x), max(y)))) END AS box
               FROM (SELECT (geometry->'coordinates'->>0)::float8 AS x, (geometry->'coordinates'->>1)::float8 AS y
                       FROM pin_group WHERE environment_id = $1 AND geometry IS NOT NULL) p) b
      WHERE e.id = $1`,
    [environmentId],
  );
}

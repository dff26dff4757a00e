/** How an edge row (`e`) becomes the Edge model. */
export const EDGE_SELECT = `e.id AS e_id, e.hash_id AS e_hash_id, e.name AS e_name, e.fields AS e_fields, e.geometry AS e_geometry, e.map_layer AS e_map_layer,
  e.photo AS e_photo, (SELECT hash_id FROM node WHERE id = e.node1_id) AS e_node1, (SELECT hash_id FROM node WHERE id = e.node2_id) AS e_node2, (SELECT max(r.generated_at) FROM condition_report r WHERE r.pin_group_id IN (SELECT pin_group_id FROM pin WHERE edge_id = e.id)) AS e_most_recent,
  (SELECT coalesce(max(oi.level), 0) FROM pin ep JOIN issue oi ON oi.pin_group_id = ep.pin_group_id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL
      AND (cardinality(oi.pin_ids) = 0 OR ep.id = ANY(oi.pin_ids)) WHERE ep.edge_id = e.id) AS e_level`;

export function toEdge(r: Record<string, unknown>) {
  const at = r.e_most_recent;
  return {
    hashId: r.e_hash_id as string,
    node1HashId: (r.e_node1 as string | null) ?? null,
    node2HashId: (r.e_node2 as string | null) ?? null,
    geometry: r.e_geometry,
    name: r.e_name as string,
    fields: r.e_fields as Record<string, unknown>,
    // the highest level of the open issues on its pins
    level: (r.e_level as number | undefined) ?? 0,
    mapLayer: r.e_map_layer as string,
    mostRecentMeasurementAt: at instanceof Date ? at.toISOString() : null,
    deletedAt: null,
  };
}

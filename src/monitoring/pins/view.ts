/** How a pin row (`p`, with its pin group as `pg`) becomes the Pin model. */
export const PIN_SELECT = `p.id AS p_id, p.hash_id AS p_hash_id, pg.hash_id AS p_pin_group_hash_id, pg.name AS p_pin_group_name, p.name AS p_name,
  p.fields AS p_fields, p.device_fields AS p_device_fields, p.type_key AS p_type_key,
  (SELECT e.hash_id FROM edge e WHERE e.id = p.edge_id) AS p_edge_hash_id,
  (SELECT coalesce(max(oi.level), 0) FROM issue oi WHERE oi.pin_group_id = p.pin_group_id AND oi.closed_at IS NULL AND oi.deleted_at IS NULL
      AND (cardinality(oi.pin_ids) = 0 OR p.id = ANY(oi.pin_ids))) AS p_level`;

export function toPin(r: Record<string, unknown>) {
  return {
    hashId: r.p_hash_id as string,
    pinGroupHashId: r.p_pin_group_hash_id as string,
    name: r.p_name as string,
    fields: r.p_fields as Record<string, unknown>,
    deviceFields: r.p_device_fields as Record<string, unknown>,
    // the highest level of the open issues on it (an issue naming no pins is on every pin of its pin group)
    level: (r.p_level as number | undefined) ?? 0,
    typeKey: (r.p_type_key as string | null) ?? null,
    edgeHashId: (r.p_edge_hash_id as string | null) ?? null,
    // no route places a pin on a node (pin add and update take an edge only), so none is on one
    nodeHashId: null,
    deletedAt: null,
  };
}

/** The Label model's columns of `label l`. */
export const LABEL_SELECT =
  'l.hash_id AS l_hash_id, l.name AS l_name, l.color AS l_color, l.created_at AS l_created_at, l.updated_at AS l_updated_at, l.deleted_at AS l_deleted_at';

export interface Label {
  hashId: string;
  name: string;
  color: string;
  createdAt: string;
  updatedAt: string;
  deletedAt: string | null;
}

const iso = (v: unknown): string | null => (v instanceof Date ? v.toISOString() : null);

export function toLabel(r: Record<string, unknown>): Label {
  return {
    hashId: r.l_hash_id as string,
    name: r.l_name as string,
    color: r.l_color as string,
    createdAt: iso(r.l_created_at)!,
    updatedAt: iso(r.l_updated_at)!,
    deletedAt: iso(r.l_deleted_at),
  };
}

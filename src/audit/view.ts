/** The Log model's columns of `audit_log a` and its author's name (`machine_account u`). */
export const LOG_SELECT =
  'a.hash_id AS a_hash_id, a.user_hash_id AS a_user_hash_id, a.object_type AS a_object_type, a.object_hash_id AS a_object_hash_id, ' +
  'a.action AS a_action, a.diff AS a_diff, a.created_at AS a_created_at, u.name AS u_name';

export interface Log {
  hashId: string;
  userHashId: string | null;
  objectType: string | null;
  objectHashId: string | null;
  subObjectType: string | null;
  subObjectHashId: string | null;
  action: string;
  diff: { old: unknown; new: unknown } | null;
  createdAt: string;
}

export function toLogRow(r: Record<string, unknown>): { log: Log; userName: string | null } {
  return {
    log: {
      hashId: r.a_hash_id as string,
      userHashId: r.a_user_hash_id as string | null,
      objectType: r.a_object_type as string,
      objectHashId: r.a_object_hash_id as string | null,
      subObjectType: null,
      subObjectHashId: null,
      action: r.a_action as string,
      diff: r.a_diff as Log['diff'],
      createdAt: (r.a_created_at as Date).toISOString(),
    },
    userName: r.u_name as string | null,
  };
}

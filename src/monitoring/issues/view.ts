import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT } from '../pin-groups/view.ts';

/** How an issue row (`i`, its creator `ua`, its assignee `aa`, its pin group `pg`) becomes the Issue model. */
export const ISSUE_SELECT = `i.id AS i_id, i.hash_id AS i_hash_id, ua.hash_id AS i_user_hash_id, ua.name AS i_user_name,
  aa.hash_id AS i_assigned_hash_id, aa.name AS i_assigned_name, i.title AS i_title, pg.hash_id AS i_pin_group_hash_id, i.level AS i_level,
  i.type_key AS i_type_key, i.start_at AS i_start_at, i.closed_at AS i_closed_at, i.created_at AS i_created_at, i.updated_at AS i_updated_at,
  i.pin_ids AS i_pin_ids, i.quantity_ids AS i_quantity_ids, i.automation AS i_automation, i.cause AS i_cause,
  i.last_value AS i_last_value, i.last_level AS i_last_level, i.last_measured_at AS i_last_measured_at,
  i.crossing_count AS i_crossing_count, i.measurement_count AS i_measurement_count`;

/** Issues with what ISSUE_SELECT and PIN_GROUP_SELECT need. */
export const ISSUE_FROM = `issue i JOIN pin_group pg ON pg.id = i.pin_group_id ${PIN_GROUP_LINK_JOIN}
  LEFT JOIN machine_account ua ON ua.id = i.account_id LEFT JOIN machine_account aa ON aa.id = i.assigned_account_id`;
export const ISSUE_AND_PIN_GROUP_SELECT = `${ISSUE_SELECT}, ${PIN_GROUP_SELECT}`;

const iso = (v: unknown): string | null => (v instanceof Date ? v.toISOString() : null);

export function toIssue(r: Record<string, unknown>) {
  const closedAt = iso(r.i_closed_at);
  return {
    hashId: r.i_hash_id as string,
    userHashId: (r.i_user_hash_id as string | null) ?? null,
    assignedUserHashId: (r.i_assigned_hash_id as string | null) ?? null,
    title: r.i_title as string,
    pinGroupHashId: r.i_pin_group_hash_id as string,
    level: r.i_level as 0 | 1 | 2,
    ...(r.i_type_key ? { typeKey: r.i_type_key as string } : {}),
    startAt: iso(r.i_start_at)!,
    endAt: closedAt,
    closedAt,
    createdAt: iso(r.i_created_at)!,
    updatedAt: iso(r.i_updated_at)!,
    deletedAt: null,
  };
}

/** How a comment row (`c`, its author `ca`) becomes `{comment, userName}`. */
export const COMMENT_SELECT = `c.hash_id AS c_hash_id, ca.hash_id AS c_user_hash_id, ca.name AS c_user_name, c.comment AS c_comment,
  c.created_at AS c_created_at, c.updated_at AS c_updated_at`;

export function toComment(r: Record<string, unknown>) {
  return {
    comment: {
      hashId: r.c_hash_id as string,
      userHashId: (r.c_user_hash_id as string | null) ?? null,
      comment: r.c_comment as string,
      createdAt: iso(r.c_created_at)!,
      updatedAt: iso(r.c_updated_at)!,
      deletedAt: null,
    },
    userName: (r.c_user_name as string | null) ?? null,
  };
}

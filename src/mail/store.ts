import type { Queryable } from '../app/db.ts';
import { findPage, type FindQuery } from '../app/find.ts';
import { newHashId } from '../app/hash-id.ts';

export type NotificationKind = 'issue' | 'issueDigest' | 'supplierAlert' | 'command' | 'feedback' | 'invitation' | 'passwordReset' | 'environmentAdded';
export type NotificationState = 'queued' | 'sent' | 'failed';

/** One mail to send: to whom, about what, for which environment and account (null: none, e.g. a command's free addresses). */
export interface OutgoingMail {
  environmentId: number | null;
  accountId: number | null;
  kind: NotificationKind;
  to: string[];
  subject: string;
  text: string;
}

export type StoredNotification = { id: number; hashId: string; recipients: string[]; subject: string; body: string; state: NotificationState };

/** Inserts the mails in one statement, in `state`; their hashIds in order. */
export async function insertNotifications(db: Queryable, mails: OutgoingMail[], state: NotificationState, reason: string | null = null): Promise<string[]> {
  const hashIds = mails.map(() => newHashId(12));
  await db.query(
    `INSERT INTO notification (hash_id, environment_id, account_id, kind, recipients, subject, body, state, reason)
     SELECT m.hash_id, m.environment_id, m.account_id, m.kind, ARRAY(SELECT jsonb_array_elements_text(m.recipients)), m.subject, m.body, $8, $9
       FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::jsonb[], $6::text[], $7::text[])
         AS m(hash_id, environment_id, account_id, kind, recipients, subject, body)`,
    [
      hashIds,
      mails.map((m) => m.environmentId),
      mails.map((m) => m.accountId),
      mails.map((m) => m.kind),
      mails.map((m) => JSON.stringify(m.to)),
      mails.map((m) => m.subject),
      mails.map((m) => m.text),
      state,
      reason,
    ],
  );
  return hashIds;
}

export async function loadNotification(db: Queryable, hashId: string): Promise<StoredNotification | null> {
  const { rows } = await db.query<StoredNotification>('SELECT id, hash_id AS "hashId", recipients, subject, body, state FROM notification WHERE hash_id = $1', [
    hashId,
  ]);
  return rows[0] ?? null;
}

/** Sent: `reason` names recipients the server refused while it took the others. */
export async function markSent(db: Queryable, id: number, reason: string | null): Promise<void> {
  await db.query(`UPDATE notification SET state = 'sent', reason = $2, sent_at = now(), attempts = attempts + 1, updated_at = now() WHERE id = $1`, [
    id,
    reason,
  ]);
}

export async function markFailed(db: Queryable, id: number, reason: string): Promise<void> {
  await db.query(`UPDATE notification SET state = 'failed', reason = $2, attempts = attempts + 1, updated_at = now() WHERE id = $1`, [id, reason]);
}

/** Still queued after a try that did not go through: the reason shows why it waits. */
export async function markRetrying(db: Queryable, id: number, reason: string): Promise<void> {
  await db.query('UPDATE notification SET reason = $2, attempts = attempts + 1, updated_at = now() WHERE id = $1', [id, reason]);
}

/** Mails queued in PostgreSQL, oldest first: queued again at start, in case their job never reached Redis. */
export async function queuedNotifications(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ hash_id: string }>(`SELECT hash_id FROM notification WHERE state = 'queued' ORDER BY id LIMIT $1`, [limit]);
  return rows.map((r) => r.hash_id);
}

export interface NotificationQuery extends FindQuery {
  state?: NotificationState;
}

const SELECT = `n.id, n.hash_id, n.kind, n.recipients, n.subject, n.body, n.state, n.reason, n.attempts, n.created_at, n.sent_at, n.updated_at, a.hash_id AS account_hash_id`;

/** The environment's notifications, newest first unless sorted otherwise. */
export async function findNotifications(db: Queryable, environmentId: number, query: NotificationQuery) {
  const where = ['n.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (query.state) {
    params.push(query.state);
    where.push(`n.state = $${params.length}`);
  }
  const page = await findPage<Record<string, unknown>>(
    db,
    {
      from: 'notification n LEFT JOIN machine_account a ON a.id = n.account_id',
      select: SELECT,
      idColumn: 'n.id',
      where,
      params,
      sortable: { createdAt: "date_trunc('milliseconds', n.created_at)", hashId: 'n.hash_id' },
      search: ['n.hash_id', 'n.subject', "array_to_string(n.recipients, ' ')"],
      updatedColumn: 'n.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'createdAt' },
  );
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => ({
      notification: {
        hashId: r.hash_id,
        kind: r.kind,
        userHashId: r.account_hash_id ?? null,
        to: r.recipients,
        subject: r.subject,
        body: r.body,
        state: r.state,
        reason: r.reason ?? null,
        attempts: r.attempts,
        createdAt: (r.created_at as Date).toISOString(),
        sentAt: r.sent_at ? (r.sent_at as Date).toISOString() : null,
        updatedAt: (r.updated_at as Date).toISOString(),
      },
    })),
  };
}

// Issue notifications. Triggers write what happens to issues into the outbox `issue_event` (migration 023);
// a worker takes its rows every ISSUE_SCAN_MS, in a transaction with FOR UPDATE SKIP LOCKED (several workers
// share the rows, none twice), and in that same transaction:
//  1. subscribes, for an issue that opens or rises, every account of the environment whose notificationLevel
//     covers the new level (level >= notificationLevel; null: none). The grid's level
//     (POST /graph/grid/{hashId}/notification) counts for pin groups of that grid, else the account's own
//     userEnvironmentSettings (no row: 0, every issue);
//  2. writes each subscriber with an address one mail per issue about what happened (the commenter is not
//     told of their own comment), in their locale and time zone;
//  3. the digest rule: a recipient gets at most one issue mail per NOTIFICATION_DIGEST_SECONDS. Mails due when
//     the last one is older than that go at once (several issues at once: one digest mail); inside the window
//     they wait in `issue_mail_pending` and go as one digest when the window ends.
// The mails are stored as notifications in the transaction and queued after it commits.

import type { AppContext } from '../app/context.ts';
import type { Queryable } from '../app/db.ts';
import { OutageLog } from '../app/outage-log.ts';
import type { Limits, ValuePair } from '../monitoring/thresholds/limits.ts';
import { digestMail, issueMail, type IssueEventFacts, type IssueEventKind, type IssueFacts, type MailText } from './issue-mail.ts';
import { publishIssueEvents } from '../monitoring/issues/stream.ts';
import { queueStored, storeMails } from '../mail/queue.ts';
import type { OutgoingMail } from '../mail/store.ts';

const ISSUE_SCAN_MS = 1000;
const EVENTS_PER_SCAN = 2000;

type EventRow = { id: number; issue_id: number; kind: IssueEventKind; level: number; comment_id: number | null; created_at: Date };
type Recipient = { issue_id: number; account_id: number; email: string; locale: string | null; timezone: string | null };

const TAKE_EVENTS = `DELETE FROM issue_event WHERE id IN (SELECT id FROM issue_event ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
  RETURNING id, issue_id, kind, level, comment_id, created_at`;

// the effective level of every account of the issue's environment: the most inclusive of the grids (of the
// issue's pin group) it set one for, else its own setting, else 0
const SUBSCRIBE = `INSERT INTO issue_subscription (issue_id, account_id)
  SELECT e.issue_id, a.id
    FROM unnest($1::bigint[], $2::smallint[]) AS e(issue_id, level)
    JOIN issue i ON i.id = e.issue_id AND i.deleted_at IS NULL
    JOIN machine_account a ON a.environment_id = i.environment_id AND a.revoked_at IS NULL
    LEFT JOIN user_environment_settings s ON s.account_id = a.id AND s.environment_id = i.environment_id
    LEFT JOIN LATERAL (SELECT count(*) AS grids, min(gn.level) AS level FROM grid_notification gn
                         JOIN grid_member gm ON gm.grid_id = gn.grid_id AND gm.pin_group_id = i.pin_group_id
                        WHERE gn.account_id = a.id) g ON true
   WHERE CASE WHEN g.grids > 0 THEN g.level WHEN s.account_id IS NULL THEN 0 ELSE s.notification_level END <= e.level
  ON CONFLICT DO NOTHING`;

const FACTS = `SELECT i.id, i.hash_id, i.environment_id, i.title, i.level, i.start_at, i.closed_at, i.last_value, i.last_measured_at,
       pg.name AS pin_group_name, ARRAY(SELECT p.name FROM pin p WHERE p.id = ANY(i.pin_ids) ORDER BY p.id) AS pin_names,
       q.name_text AS quantity_name, q.unit,
       CASE WHEN t.id IS NOT NULL THEN jsonb_build_object('criticallyLow', t.critically_low, 'low', t.low, 'high', t.high, 'criticallyHigh', t.critically_high)
            WHEN q.id IS NOT NULL THEN jsonb_build_object('criticallyLow', q.default_critically_low_threshold, 'low', q.default_low_threshold,
                                                          'high', q.default_high_threshold, 'criticallyHigh', q.default_critically_high_threshold) END AS limits
  FROM issue i JOIN pin_group pg ON pg.id = i.pin_group_id
  LEFT JOIN quantity q ON q.id = i.quantity_ids[1]
  LEFT JOIN pin_threshold t ON t.pin_id = i.pin_ids[1] AND t.quantity_id = q.id
 WHERE i.id = ANY($1) AND i.deleted_at IS NULL`;

// a recipient who chose no language reads the environment's
const RECIPIENTS = `SELECT s.issue_id, a.id AS account_id, a.email, COALESCE(a.locale, e.settings->>'locale') AS locale, a.timezone FROM issue_subscription s
  JOIN machine_account a ON a.id = s.account_id JOIN environment e ON e.id = a.environment_id
 WHERE s.issue_id = ANY($1) AND a.revoked_at IS NULL AND coalesce(a.email, '') <> ''`;

const COMMENTS = `SELECT c.id, c.comment, c.account_id, a.name AS author FROM issue_comment c LEFT JOIN machine_account a ON a.id = c.account_id
 WHERE c.id = ANY($1) AND c.deleted_at IS NULL`;

function factsOf(r: Record<string, unknown>): IssueFacts {
  return {
    hashId: r.hash_id as string,
    title: r.title as string,
    level: r.level as number,
    pinGroupName: r.pin_group_name as string,
    pinNames: r.pin_names as string[],
    quantityName: (r.quantity_name as string | null) ?? null,
    unit: (r.unit as string | null) ?? null,
    lastValue: (r.last_value as ValuePair | null) ?? null,
    lastMeasuredAt: (r.last_measured_at as Date | null) ?? null,
    limits: (r.limits as Limits | null) ?? null,
    startAt: r.start_at as Date,
    closedAt: (r.closed_at as Date | null) ?? null,
  };
}

interface Due {
  accountId: number;
  environmentId: number;
  email: string;
  locale: string | null;
  mail: MailText;
}

/** What one scan found for the recipients: mails per account, in event order. */
async function mailsOfEvents(db: Queryable, events: EventRow[]): Promise<Due[]> {
  const raised = events.filter((e) => e.kind === 'opened' || e.kind === 'raised');
  if (raised.length > 0) await db.query(SUBSCRIBE, [raised.map((e) => e.issue_id), raised.map((e) => e.level)]);
  const issueIds = [...new Set(events.map((e) => e.issue_id))];
  const facts = new Map<number, { env: number; facts: IssueFacts }>();
  for (const r of (await db.query(FACTS, [issueIds])).rows) facts.set(r.id as number, { env: r.environment_id as number, facts: factsOf(r) });
  const commentIds = events.flatMap((e) => (e.comment_id === null ? [] : [e.comment_id]));
  const comments = new Map<number, { text: string; author: string; accountId: number | null }>();
  if (commentIds.length > 0) {
    for (const c of (await db.query(COMMENTS, [commentIds])).rows) {
      comments.set(c.id as number, { text: c.comment as string, author: (c.author as string | null) ?? 'someone', accountId: c.account_id as number | null });
    }
  }
  const recipients = (await db.query<Recipient>(RECIPIENTS, [issueIds])).rows;
  const due: Due[] = [];
  for (const r of recipients) {
    const issue = facts.get(r.issue_id);
    if (!issue) continue;
    const told: IssueEventFacts[] = [];
    for (const e of events) {
      if (e.issue_id !== r.issue_id) continue;
      const comment = e.comment_id === null ? null : comments.get(e.comment_id);
      if (e.kind === 'comment' && (!comment || comment.accountId === r.account_id)) continue;
      told.push({ kind: e.kind, level: e.level, at: e.created_at, comment: comment ? { text: comment.text, author: comment.author } : null });
    }
    if (told.length > 0)
      due.push({ accountId: r.account_id, environmentId: issue.env, email: r.email, locale: r.locale, mail: issueMail(issue.facts, told, r) });
  }
  return due;
}

/** One scan: takes the events, subscribes, and mails or gathers for the digest (the rule above). */
export async function notifyIssues(ctx: AppContext): Promise<number> {
  const windowSeconds = ctx.config.notificationDigestSeconds;
  let taken: EventRow[] = [];
  const stored = await ctx.db.tx(async (client) => {
    const events = (await client.query<EventRow>(TAKE_EVENTS, [EVENTS_PER_SCAN])).rows.sort((a, b) => a.id - b.id);
    taken = events;
    const due = events.length > 0 ? await mailsOfEvents(client, events) : [];
    const out: OutgoingMail[] = [];
    const send = (accountId: number, environmentId: number, email: string, locale: string | null, parts: MailText[]) => {
      const m = digestMail(parts, locale);
      out.push({ environmentId, accountId, kind: parts.length > 1 ? 'issueDigest' : 'issue', to: [email], subject: m.subject, text: m.text });
    };
    const byAccount = new Map<number, Due[]>();
    for (const d of due) byAccount.set(d.accountId, [...(byAccount.get(d.accountId) ?? []), d]);
    if (windowSeconds === 0) {
      for (const d of due) send(d.accountId, d.environmentId, d.email, d.locale, [d.mail]);
    } else if (byAccount.size > 0) {
      // each recipient's row locked (in id order) so that two workers never both mail one recipient inside a window
      await client.query(`INSERT INTO issue_mail_recipient (account_id, last_mail_at) SELECT unnest($1::bigint[]), '-infinity' ON CONFLICT DO NOTHING`, [
        [...byAccount.keys()],
      ]);
      await client.query('SELECT 1 FROM issue_mail_recipient WHERE account_id = ANY($1) ORDER BY account_id FOR UPDATE', [[...byAccount.keys()]]);
      // who may be mailed now: no mail inside the window, nothing waiting for a digest
      const { rows } = await client.query<{ account_id: number }>(
        `SELECT a.id AS account_id FROM unnest($1::bigint[]) AS a(id)
           LEFT JOIN issue_mail_recipient r ON r.account_id = a.id
          WHERE (r.last_mail_at IS NULL OR r.last_mail_at <= now() - make_interval(secs => $2))
            AND NOT EXISTS (SELECT 1 FROM issue_mail_pending p WHERE p.account_id = a.id)`,
        [[...byAccount.keys()], windowSeconds],
      );
      const now = new Set(rows.map((r) => r.account_id));
      const waiting: Due[] = [];
      for (const [accountId, list] of byAccount) {
        if (now.has(accountId))
          send(
            accountId,
            list[0].environmentId,
            list[0].email,
            list[0].locale,
            list.map((d) => d.mail),
          );
        else waiting.push(...list);
      }
      if (waiting.length > 0) {
        await client.query(
          `INSERT INTO issue_mail_pending (account_id, environment_id, subject, body)
           SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[])`,
          [waiting.map((d) => d.accountId), waiting.map((d) => d.environmentId), waiting.map((d) => d.mail.subject), waiting.map((d) => d.mail.text)],
        );
      }
    }
    if (windowSeconds > 0) {
      // digests whose window has ended
      const { rows } = await client.query<{
        id: number;
        account_id: number;
        environment_id: number;
        email: string | null;
        locale: string | null;
        subject: string;
        body: string;
      }>(
        `DELETE FROM issue_mail_pending p USING machine_account a
          WHERE a.id = p.account_id AND p.id IN (
            SELECT p2.id FROM issue_mail_pending p2 LEFT JOIN issue_mail_recipient r ON r.account_id = p2.account_id
             WHERE r.last_mail_at IS NULL OR r.last_mail_at <= now() - make_interval(secs => $1)
             ORDER BY p2.id FOR UPDATE OF p2 SKIP LOCKED)
          RETURNING p.id, p.account_id, p.environment_id, a.email,
            COALESCE(a.locale, (SELECT e.settings->>'locale' FROM environment e WHERE e.id = a.environment_id)) AS locale, p.subject, p.body`,
        [windowSeconds],
      );
      const digests = new Map<number, { env: number; email: string | null; locale: string | null; parts: (MailText & { id: number })[] }>();
      for (const r of rows) {
        const d = digests.get(r.account_id) ?? { env: r.environment_id, email: r.email, locale: r.locale, parts: [] };
        d.parts.push({ id: r.id, subject: r.subject, text: r.body });
        digests.set(r.account_id, d);
      }
      for (const [accountId, d] of digests) {
        if (d.email)
          send(
            accountId,
            d.env,
            d.email,
            d.locale,
            d.parts.sort((a, b) => a.id - b.id),
          );
      }
    }
    if (out.length === 0) return [];
    await client.query(
      `INSERT INTO issue_mail_recipient (account_id, last_mail_at) SELECT unnest($1::bigint[]), now()
       ON CONFLICT (account_id) DO UPDATE SET last_mail_at = now()`,
      [[...new Set(out.map((m) => m.accountId))]],
    );
    return storeMails(ctx, client, out);
  });
  await queueStored(ctx, stored);
  // the console's live issue streams (GET /issue/stream), once the events are committed as taken
  await publishIssueEvents(ctx, taken);
  return stored.length;
}

/** Runs notifyIssues every ISSUE_SCAN_MS (a worker role's task; several workers share the events). */
export function startIssueNotifier(ctx: AppContext): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  // a scan a second: a store outage reads as one line when it begins and one when it ends, not one per scan
  const outage = new OutageLog(ctx.log, 'issue notifications could not be made; the scan is tried again every second', 'issue notifications are made again');
  const timer = setInterval(() => {
    running = running.then(async () => {
      if (stopped) return;
      await notifyIssues(ctx).then(
        () => outage.up(),
        (err: Error) => outage.down(err),
      );
    });
  }, ISSUE_SCAN_MS);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}

import type { Db, Queryable } from '../../app/db.ts';
import { ConflictError, NotFoundError, ParameterError, RightError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { Account } from '../../accounts/store.ts';
import { toPinGroup } from '../pin-groups/view.ts';
import { PIN_SELECT, toPin } from '../pins/view.ts';
import { QUANTITY_SELECT, toQuantity } from '../quantities/store.ts';
import type { ChangeBus } from '../../app/changes.ts';
import { VISIBLE_QUANTITY } from '../thresholds/store.ts';
import { labelIdsOf, labelsOfIssue, setIssueLabels } from '../labels/store.ts';
import { COMMENT_SELECT, ISSUE_AND_PIN_GROUP_SELECT, ISSUE_FROM, toComment, toIssue } from './view.ts';

type Automation = { type: 'missing' } | { type: 'thresholds'; quantityHashIds: string[] } | null;
type Link = { pinGroupHashId: string; pinHashId: string | null };

export interface IssueAdd {
  links?: Link[];
  assignedUserHashId?: string | null;
  pinGroupHashId?: string;
  pinHashIds?: string[];
  automation?: Automation;
  title: string;
  level: 0 | 1 | 2;
  typeKey?: string;
  comment: string;
  quantityHashIds?: string[];
  labelHashIds?: string[];
  startAt?: string;
  endAt?: string | null;
}

export interface IssueUpdate extends Partial<Omit<IssueAdd, 'comment'>> {
  pinHashId?: string | null;
  closed?: boolean;
}

export interface IssueFindQuery extends FindQuery {
  pinGroupHashId?: string | null;
  edgeHashId?: string | null;
  gridHashId?: string | null;
  labelHashId?: string | null;
  mapLayers?: string[] | null;
  /** not in the SDK: false only open issues, true only closed ones; absent, empty or null both */
  closed?: boolean | '' | null;
}

const OPEN = 'i.closed_at IS NULL AND i.deleted_at IS NULL';

async function loadIssue(db: Queryable, environmentId: number, hashId: string, lock = false) {
  const { rows } = await db.query<{ id: number; pin_group_id: number; pin_ids: (number | string)[]; cause: string | null; closed_at: Date | null }>(
    `SELECT id, pin_group_id, pin_ids, cause, closed_at FROM issue WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL${lock ? ' FOR UPDATE' : ''}`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('issue', hashId);
  return rows[0];
}

async function accountIdOf(db: Queryable, environmentId: number, hashId: string | null, field: string): Promise<number | null> {
  if (hashId === null) return null;
  const { rows } = await db.query<{ id: number }>('SELECT id FROM machine_account WHERE environment_id = $1 AND hash_id = $2 AND revoked_at IS NULL', [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new ParameterError(`${field} ${hashId} is not a user of this environment`);
  return rows[0].id;
}

async function pinGroupIdOf(db: Queryable, environmentId: number, hashId: string, field: string): Promise<number> {
  const { rows } = await db.query<{ id: number }>('SELECT id FROM pin_group WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (rows.length === 0) throw new ParameterError(`${field} ${hashId} is not a pin group of this environment`);
  return rows[0].id;
}

async function pinIdsOf(db: Queryable, pinGroupId: number, hashIds: string[], field: string): Promise<number[]> {
  if (hashIds.length === 0) return [];
  const { rows } = await db.query<{ id: number; hash_id: string }>('SELECT id, hash_id FROM pin WHERE pin_group_id = $1 AND hash_id = ANY($2)', [
    pinGroupId,
    hashIds,
  ]);
  const byHash = new Map(rows.map((r) => [r.hash_id, r.id]));
  return [
    ...new Set(
      hashIds.map((h, i) => {
        const id = byHash.get(h);
        if (id === undefined) throw new ParameterError(`${field}[${i}] ${h} is not a pin of the issue's pin group`);
        return id;
      }),
    ),
  ];
}

async function quantityIdsOf(db: Queryable, environmentId: number, hashIds: string[], field: string): Promise<number[]> {
  const out: number[] = [];
  for (const [i, h] of hashIds.entries()) {
    const { rows } = await db.query<{ id: number }>(`SELECT q.id FROM quantity q WHERE q.hash_id = $2 AND ${VISIBLE_QUANTITY}`, [environmentId, h]);
    if (rows.length === 0) throw new ParameterError(`${field}[${i}] ${h} is not a quantity this environment measures`);
    out.push(rows[0].id);
  }
  return out;
}

/** The pin group and pins an add or update names: `pinGroupHashId` and `pinHashIds`, or the deprecated `links` (all of one pin group). */
function placeOf(body: { links?: Link[]; pinGroupHashId?: string; pinHashIds?: string[]; pinHashId?: string | null }) {
  let pinGroupHashId = body.pinGroupHashId;
  let pinHashIds = body.pinHashIds;
  let field = 'pinHashIds';
  if (pinGroupHashId === undefined && body.links) {
    pinGroupHashId = body.links[0].pinGroupHashId;
    body.links.forEach((l, i) => {
      if (l.pinGroupHashId !== pinGroupHashId) throw new ParameterError(`links[${i}].pinGroupHashId must name the same pin group as links[0]`);
    });
    pinHashIds ??= body.links.some((l) => l.pinHashId === null) ? [] : body.links.map((l) => l.pinHashId as string);
    field = 'links';
  }
  if (pinHashIds === undefined && body.pinHashId !== undefined) pinHashIds = body.pinHashId === null ? [] : [body.pinHashId];
  return { pinGroupHashId, pinHashIds, field };
}

function automationOf(body: { automation?: Automation; quantityHashIds?: string[] }): {
  automation: Automation | undefined;
  quantityHashIds: string[] | undefined;
  field: string;
} {
  if (body.automation !== undefined) {
    return {
      automation: body.automation,
      quantityHashIds: body.automation?.type === 'thresholds' ? body.automation.quantityHashIds : [],
      field: 'automation.quantityHashIds',
    };
  }
  return { automation: undefined, quantityHashIds: body.quantityHashIds, field: 'quantityHashIds' };
}

async function addComment(db: Queryable, issueId: number, accountId: number | null, comment: string) {
  const { rows } = await db.query(
    `WITH c AS (INSERT INTO issue_comment (hash_id, issue_id, account_id, comment) VALUES ($1, $2, $3, $4) RETURNING *)
     SELECT ${COMMENT_SELECT} FROM c LEFT JOIN machine_account ca ON ca.id = c.account_id`,
    [newHashId(), issueId, accountId, comment],
  );
  return toComment(rows[0]);
}

/** issue add: a manual issue on a pin group (pins: none named means every pin); the author is subscribed to it. */
export async function addIssue(db: Db, account: Account, body: IssueAdd): Promise<{ hashId: string; mentionedUsers: never[] }> {
  const envId = account.environment.id;
  const place = placeOf(body);
  if (place.pinGroupHashId === undefined) throw new ParameterError('pinGroupHashId is required (or links)');
  const pinGroupId = await pinGroupIdOf(db, envId, place.pinGroupHashId, body.pinGroupHashId === undefined ? 'links[0].pinGroupHashId' : 'pinGroupHashId');
  const pinIds = await pinIdsOf(db, pinGroupId, place.pinHashIds ?? [], place.field);
  const auto = automationOf(body);
  const quantityIds = await quantityIdsOf(db, envId, auto.quantityHashIds ?? [], auto.field);
  const assigned = await accountIdOf(db, envId, body.assignedUserHashId ?? null, 'assignedUserHashId');
  const hashId = newHashId();
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number }>(
      `INSERT INTO issue (hash_id, environment_id, pin_group_id, pin_ids, account_id, assigned_account_id, title, level, type_key, automation, quantity_ids, start_at, closed_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, coalesce($12::timestamptz, now()), $13) RETURNING id`,
      [
        hashId,
        envId,
        pinGroupId,
        pinIds,
        account.id,
        assigned,
        body.title,
        body.level,
        body.typeKey ?? null,
        auto.automation ? JSON.stringify({ type: auto.automation.type }) : null,
        quantityIds,
        body.startAt ?? null,
        body.endAt ?? null,
      ],
    );
    await setIssueLabels(client, rows[0].id, await labelIdsOf(client, envId, body.labelHashIds ?? []));
    if (body.comment !== '') await addComment(client, rows[0].id, account.id, body.comment);
    await client.query('INSERT INTO issue_subscription (issue_id, account_id) VALUES ($1, $2)', [rows[0].id, account.id]);
  });
  return { hashId, mentionedUsers: [] };
}

/** issue update: what is given changes; `closed` closes or reopens (an automatic issue reopens only while no other is open for its cause). */
export async function updateIssue(db: Db, account: Account, hashId: string, body: IssueUpdate, changes: Pick<ChangeBus, 'publish'>): Promise<void> {
  const envId = account.environment.id;
  const pinIds = await db.tx(async (client) => {
    const issue = await loadIssue(client, envId, hashId, true);
    const sets: string[] = [];
    const params: unknown[] = [issue.id];
    const set = (column: string, value: unknown) => {
      params.push(value);
      sets.push(`${column} = $${params.length}`);
    };
    const place = placeOf(body);
    let pinGroupId = issue.pin_group_id;
    if (place.pinGroupHashId !== undefined) {
      pinGroupId = await pinGroupIdOf(client, envId, place.pinGroupHashId, body.pinGroupHashId === undefined ? 'links[0].pinGroupHashId' : 'pinGroupHashId');
      if (pinGroupId !== issue.pin_group_id) {
        set('pin_group_id', pinGroupId);
        // pins belong to a pin group: moved without new ones, the issue is on every pin of the new one
        if (place.pinHashIds === undefined) set('pin_ids', []);
      }
    }
    if (place.pinHashIds !== undefined) set('pin_ids', await pinIdsOf(client, pinGroupId, place.pinHashIds, place.field));
    const auto = automationOf(body);
    if (auto.automation !== undefined) set('automation', auto.automation ? JSON.stringify({ type: auto.automation.type }) : null);
    if (auto.quantityHashIds !== undefined) set('quantity_ids', await quantityIdsOf(client, envId, auto.quantityHashIds, auto.field));
    if (body.assignedUserHashId !== undefined) set('assigned_account_id', await accountIdOf(client, envId, body.assignedUserHashId, 'assignedUserHashId'));
    if (body.labelHashIds !== undefined) await setIssueLabels(client, issue.id, await labelIdsOf(client, envId, body.labelHashIds));
    if (body.title !== undefined) set('title', body.title);
    if (body.level !== undefined) set('level', body.level);
    if (body.typeKey !== undefined) set('type_key', body.typeKey);
    if (body.startAt !== undefined) set('start_at', body.startAt);
    const closed = body.closed ?? (body.endAt === undefined ? undefined : body.endAt !== null);
    if (closed === true && issue.closed_at === null) set('closed_at', body.endAt ?? new Date().toISOString());
    if (closed === false && issue.closed_at !== null) {
      if (issue.cause) {
        const other = await client.query(`SELECT 1 FROM issue i WHERE i.cause = $1 AND ${OPEN}`, [issue.cause]);
        if (other.rows.length > 0) throw new ConflictError('another issue with the same cause is open: this one cannot be reopened');
      }
      sets.push('closed_at = NULL');
    }
    // a change of labels alone is a change of the issue too: updatedAfter finds it
    if (sets.length > 0 || body.labelHashIds !== undefined)
      await client.query(`UPDATE issue SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE id = $1`, params);
    return issue.pin_ids.map(Number);
  });
  // the report path keeps open threshold issues per pin: a closed or reopened one is looked up again
  await changes.publish('thresholds', { pinIds, quantityHashIds: [] });
}

export async function deleteIssue(db: Queryable, environmentId: number, hashId: string, changes: Pick<ChangeBus, 'publish'>): Promise<void> {
  const { rows } = await db.query<{ pin_ids: (number | string)[] }>(
    'UPDATE issue SET deleted_at = now(), updated_at = now() WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL RETURNING pin_ids',
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('issue', hashId);
  await changes.publish('thresholds', { pinIds: rows[0].pin_ids.map(Number), quantityHashIds: [] });
}

const subscribed = (param: string) => `EXISTS (SELECT 1 FROM issue_subscription s WHERE s.issue_id = i.id AND s.account_id = ${param}) AS i_subscribed`;

/** issue find: the environment's issues, open and closed (or either, with `closed`), newest first by default. */
export async function findIssues(db: Queryable, account: Account, query: IssueFindQuery) {
  const where = ['i.environment_id = $1', 'i.deleted_at IS NULL'];
  const params: unknown[] = [account.environment.id, account.id];
  const add = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  if (query.pinGroupHashId) where.push(`pg.hash_id = ${add(query.pinGroupHashId)}`);
  if (query.edgeHashId)
    where.push(`EXISTS (SELECT 1 FROM pin ep JOIN edge e ON e.id = ep.edge_id WHERE ep.pin_group_id = pg.id AND e.hash_id = ${add(query.edgeHashId)})`);
  if (query.gridHashId)
    where.push(`EXISTS (SELECT 1 FROM grid_member gm JOIN grid g ON g.id = gm.grid_id WHERE gm.pin_group_id = pg.id AND g.hash_id = ${add(query.gridHashId)})`);
  if (query.labelHashId)
    where.push(`EXISTS (SELECT 1 FROM issue_label il JOIN label l ON l.id = il.label_id WHERE il.issue_id = i.id AND l.hash_id = ${add(query.labelHashId)})`);
  if (query.mapLayers) where.push(`pg.map_layer = ANY(${add(query.mapLayers)}::text[])`);
  if (query.closed === true) where.push('i.closed_at IS NOT NULL');
  if (query.closed === false) where.push('i.closed_at IS NULL');
  const page = await findPage(
    db,
    {
      from: ISSUE_FROM,
      select: `${ISSUE_AND_PIN_GROUP_SELECT}, ${subscribed('$2')}`,
      idColumn: 'i.id',
      where,
      params,
      sortable: { createdAt: 'i.created_at', level: 'i.level', hashId: 'i.hash_id' },
      search: ['i.title', 'i.hash_id', 'pg.name'],
      updatedColumn: 'i.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'createdAt' },
  );
  // the deprecated links, which SDK releases before Api-Version 8 require on every row: one query for the page's pins
  const pinIds = page.rows.flatMap((r) => (r.i_pin_ids as (number | string)[]).map(Number));
  const pins =
    pinIds.length === 0
      ? []
      : (await db.query(`SELECT ${PIN_SELECT} FROM pin p JOIN pin_group pg ON pg.id = p.pin_group_id WHERE p.id = ANY($1::bigint[]) ORDER BY p.id`, [pinIds]))
          .rows;
  const pinById = new Map(pins.map((p) => [Number(p.p_id), toPin(p)]));
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => {
      const pinGroup = toPinGroup(r);
      // in id order, as issue get answers them
      const issuePins = (r.i_pin_ids as (number | string)[])
        .map(Number)
        .sort((a, b) => a - b)
        .flatMap((id) => pinById.get(id) ?? []);
      return {
        issue: toIssue(r),
        userName: (r.i_user_name as string | null) ?? null,
        assignedUserName: (r.i_assigned_name as string | null) ?? null,
        pinGroup,
        subscribed: r.i_subscribed as boolean,
        links: issuePins.length === 0 ? [{ pinGroup, pin: null }] : issuePins.map((pin) => ({ pinGroup, pin })),
      };
    }),
  };
}

/** issue get: the issue with its pin group, pins, automation, comments and, for an automatic issue, what its trigger saw last. */
export async function getIssue(db: Queryable, account: Account, hashId: string) {
  const { rows } = await db.query(
    `SELECT ${ISSUE_AND_PIN_GROUP_SELECT}, ${subscribed('$3')} FROM ${ISSUE_FROM}
    WHERE i.environment_id = $1 AND i.hash_id = $2 AND i.deleted_at IS NULL`,
    [account.environment.id, hashId, account.id],
  );
  if (rows.length === 0) throw new NotFoundError('issue', hashId);
  const r = rows[0];
  const [pins, quantities, comments, labels] = await Promise.all([
    db.query(`SELECT ${PIN_SELECT} FROM pin p JOIN pin_group pg ON pg.id = p.pin_group_id WHERE p.id = ANY($1::bigint[]) ORDER BY p.id`, [r.i_pin_ids]),
    db.query(`SELECT ${QUANTITY_SELECT} FROM quantity q WHERE q.id = ANY($1::bigint[]) ORDER BY q.id`, [r.i_quantity_ids]),
    db.query(
      `SELECT ${COMMENT_SELECT} FROM issue_comment c LEFT JOIN machine_account ca ON ca.id = c.account_id
      WHERE c.issue_id = $1 AND c.deleted_at IS NULL ORDER BY c.id`,
      [r.i_id],
    ),
    labelsOfIssue(db, r.i_id as number),
  ]);
  const pinGroup = toPinGroup(r);
  const pinList = pins.rows.map(toPin);
  const quantityList = quantities.rows.map(toQuantity);
  const automation = r.i_automation as { type: 'missing' | 'thresholds' } | null;
  const cause = r.i_cause as string | null;
  return {
    issue: toIssue(r),
    userName: (r.i_user_name as string | null) ?? null,
    assignedUserName: (r.i_assigned_name as string | null) ?? null,
    quantities: quantityList,
    mentionedUsers: [],
    pinGroup,
    pins: pinList,
    automation:
      automation === null ? null : automation.type === 'missing' ? { type: 'missing' as const } : { type: 'thresholds' as const, quantities: quantityList },
    labels,
    comments: comments.rows.map(toComment),
    subscribed: r.i_subscribed as boolean,
    links: pinList.length === 0 ? [{ pinGroup, pin: null }] : pinList.map((pin) => ({ pinGroup, pin })),
    // not in the SDK's model: what opened an automatic issue and what its trigger saw last (null for a manual issue)
    trigger:
      cause === null
        ? null
        : {
            type: cause.startsWith('missing:') ? 'missing' : 'thresholds',
            lastValue: r.i_last_value ?? null,
            lastLevel: (r.i_last_level as number | null) ?? null,
            lastMeasuredAt: r.i_last_measured_at instanceof Date ? r.i_last_measured_at.toISOString() : null,
            crossingCount: r.i_crossing_count as number,
            measurementCount: r.i_measurement_count as number,
          },
  };
}

/** issue addComment: the comment, and the issue closed when asked (its comments are answered). */
export async function commentOnIssue(
  db: Db,
  account: Account,
  hashId: string,
  body: { comment: string; closeIssue?: boolean },
  changes: Pick<ChangeBus, 'publish'>,
) {
  const { comment, pinIds } = await db.tx(async (client) => {
    const issue = await loadIssue(client, account.environment.id, hashId, true);
    const c = await addComment(client, issue.id, account.id, body.comment);
    if (body.closeIssue && issue.closed_at === null) await client.query('UPDATE issue SET closed_at = now(), updated_at = now() WHERE id = $1', [issue.id]);
    return { comment: c, pinIds: issue.pin_ids.map(Number) };
  });
  if (body.closeIssue) await changes.publish('thresholds', { pinIds, quantityHashIds: [] });
  return { newComments: [comment], mentionedUsers: [] };
}

async function ownComment(db: Queryable, account: Account, hashId: string) {
  const { rows } = await db.query<{ id: number; account_id: number | null }>(
    `SELECT c.id, c.account_id FROM issue_comment c JOIN issue i ON i.id = c.issue_id
      WHERE i.environment_id = $1 AND c.hash_id = $2 AND c.deleted_at IS NULL AND i.deleted_at IS NULL`,
    [account.environment.id, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('issue comment', hashId);
  if (rows[0].account_id !== account.id) throw new RightError('only its author may change or delete a comment');
  return rows[0].id;
}

export async function updateComment(db: Queryable, account: Account, hashId: string, comment: string) {
  const id = await ownComment(db, account, hashId);
  const { rows } = await db.query(
    `WITH c AS (UPDATE issue_comment SET comment = $2, updated_at = now() WHERE id = $1 RETURNING *)
     SELECT ${COMMENT_SELECT} FROM c LEFT JOIN machine_account ca ON ca.id = c.account_id`,
    [id, comment],
  );
  return [{ ...toComment(rows[0]), mentionedUsers: [] }];
}

export async function deleteComment(db: Queryable, account: Account, hashId: string): Promise<void> {
  const id = await ownComment(db, account, hashId);
  await db.query('UPDATE issue_comment SET deleted_at = now(), updated_at = now() WHERE id = $1', [id]);
}

/** graph set-notification: the account's subscription to new issues on the pin groups of a grid (null: none). */
export async function setGridNotification(db: Queryable, account: Account, gridHashId: string, level: 0 | 1 | 2 | null): Promise<void> {
  const { rowCount } = await db.query(
    `INSERT INTO grid_notification (grid_id, account_id, level) SELECT g.id, $3, $4 FROM grid g WHERE g.environment_id = $1 AND g.hash_id = $2
     ON CONFLICT (grid_id, account_id) DO UPDATE SET level = EXCLUDED.level`,
    [account.environment.id, gridHashId, account.id, level],
  );
  if (!rowCount) throw new NotFoundError('grid', gridHashId);
}

export async function setSubscription(db: Queryable, account: Account, hashId: string, on: boolean): Promise<void> {
  const issue = await loadIssue(db, account.environment.id, hashId);
  if (on) await db.query('INSERT INTO issue_subscription (issue_id, account_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [issue.id, account.id]);
  else await db.query('DELETE FROM issue_subscription WHERE issue_id = $1 AND account_id = $2', [issue.id, account.id]);
}

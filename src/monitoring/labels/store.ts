import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { LABEL_SELECT, toLabel, type Label } from './view.ts';

export interface LabelInput {
  name: string;
  color: string;
}

export async function addLabel(db: Queryable, environmentId: number, input: LabelInput): Promise<string> {
  const hashId = newHashId();
  await db.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [hashId, environmentId, input.name, input.color]);
  return hashId;
}

export async function getLabel(db: Queryable, environmentId: number, hashId: string): Promise<Label> {
  const { rows } = await db.query(`SELECT ${LABEL_SELECT} FROM label l WHERE l.environment_id = $1 AND l.hash_id = $2 AND l.deleted_at IS NULL`, [
    environmentId,
    hashId,
  ]);
  if (rows.length === 0) throw new NotFoundError('label', hashId);
  return toLabel(rows[0]);
}

export async function findLabels(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: 'label l',
      select: LABEL_SELECT,
      idColumn: 'l.id',
      where: ['l.environment_id = $1', 'l.deleted_at IS NULL'],
      params: [environmentId],
      sortable: { name: 'l.name', hashId: 'l.hash_id' },
      search: ['l.name', 'l.hash_id'],
      updatedColumn: 'l.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'name' },
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ label: toLabel(r) })) };
}

export async function updateLabel(db: Queryable, environmentId: number, hashId: string, patch: Partial<LabelInput>): Promise<void> {
  const { rowCount } = await db.query(
    `UPDATE label SET name = coalesce($3, name), color = coalesce($4, color), updated_at = now()
      WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`,
    [environmentId, hashId, patch.name ?? null, patch.color ?? null],
  );
  if (!rowCount) throw new NotFoundError('label', hashId);
}

/** label delete: the label leaves every issue it tagged, and those issues count as changed (updatedAfter sees them). */
export async function deleteLabel(db: Db, environmentId: number, hashId: string): Promise<void> {
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number }>(
      'UPDATE label SET deleted_at = now(), updated_at = now() WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL RETURNING id',
      [environmentId, hashId],
    );
    if (rows.length === 0) throw new NotFoundError('label', hashId);
    await client.query(
      `WITH gone AS (DELETE FROM issue_label WHERE label_id = $1 RETURNING issue_id)
       UPDATE issue SET updated_at = now() WHERE id IN (SELECT issue_id FROM gone)`,
      [rows[0].id],
    );
  });
}

/**
 * The ids of the labels `hashIds` names, in order and without repeats; one that is not a label of the environment is a
 * parameter_error naming `labelHashIds[i]`. Call it in the transaction that tags the issue: the rows stay locked until
 * it ends, so a label deleted meanwhile either is refused here or removes the new tag when its delete goes on.
 */
export async function labelIdsOf(db: Queryable, environmentId: number, hashIds: string[]): Promise<number[]> {
  if (hashIds.length === 0) return [];
  const { rows } = await db.query<{ id: number; hash_id: string }>(
    'SELECT id, hash_id FROM label WHERE environment_id = $1 AND hash_id = ANY($2) AND deleted_at IS NULL FOR SHARE',
    [environmentId, hashIds],
  );
  const ids = new Map(rows.map((r) => [r.hash_id, Number(r.id)]));
  return [
    ...new Set(
      hashIds.map((h, i) => {
        const id = ids.get(h);
        if (id === undefined) throw new ParameterError(`labelHashIds[${i}] ${h} is not a label of this environment`);
        return id;
      }),
    ),
  ];
}

/** Replaces the issue's labels by `labelIds`, in that order. */
export async function setIssueLabels(db: Queryable, issueId: number, labelIds: number[]): Promise<void> {
  await db.query('DELETE FROM issue_label WHERE issue_id = $1', [issueId]);
  await db.query('INSERT INTO issue_label (issue_id, label_id, position) SELECT $1, id, o FROM unnest($2::bigint[]) WITH ORDINALITY AS x(id, o)', [
    issueId,
    labelIds,
  ]);
}

/** The labels of an issue, in the order they were given. */
export async function labelsOfIssue(db: Queryable, issueId: number): Promise<Label[]> {
  const { rows } = await db.query(`SELECT ${LABEL_SELECT} FROM issue_label il JOIN label l ON l.id = il.label_id WHERE il.issue_id = $1 ORDER BY il.position`, [
    issueId,
  ]);
  return rows.map(toLabel);
}

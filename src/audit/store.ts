import type { Queryable } from '../app/db.ts';
import { findPage, type FindQuery } from '../app/find.ts';
import { LOG_SELECT, toLogRow } from './view.ts';

export interface LogFindQuery extends FindQuery {
  objectType?: string;
  objectHashId?: string;
}

/** The environment's audit log, newest first by default; `objectType` / `objectHashId` narrow it to one object. */
export async function findLog(db: Queryable, environmentId: number, query: LogFindQuery) {
  const where = ['a.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (query.objectType !== undefined) {
    params.push(query.objectType);
    where.push(`a.object_type = $${params.length}`);
  }
  if (query.objectHashId !== undefined) {
    params.push(query.objectHashId);
    where.push(`a.object_hash_id = $${params.length}`);
  }
  const page = await findPage(
    db,
    {
      from: 'audit_log a LEFT JOIN machine_account u ON u.hash_id = a.user_hash_id',
      select: LOG_SELECT,
      idColumn: 'a.id',
      where,
      params,
      // the log's own order is its id: the hashId the SDK sorts by is random, so it sorts by when the row was written
      sortable: { hashId: 'a.id' },
      search: ['a.object_type', 'a.object_hash_id', 'a.action'],
      updatedColumn: 'a.created_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map(toLogRow) };
}

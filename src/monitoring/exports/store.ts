import type { Db, Queryable } from '../../app/db.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { CsvFormat } from './csv.ts';
import type { ExportScope, ResolvedContent } from './scope.ts';
import { EXPORT_REQUEST_SELECT, toExportRequest } from './view.ts';

export async function addExportRequest(db: Queryable, environmentId: number, resolved: ResolvedContent, format: CsvFormat): Promise<string> {
  const hashId = newHashId();
  await db.query('INSERT INTO export_request (hash_id, environment_id, content, scope, delimiter, row_delimiter) VALUES ($1, $2, $3, $4, $5, $6)', [
    hashId,
    environmentId,
    JSON.stringify(resolved.content),
    JSON.stringify(resolved.scope),
    format.delimiter,
    format.rowDelimiter,
  ]);
  return hashId;
}

export async function findExportRequests(db: Queryable, environmentId: number, query: FindQuery, link: (hashId: string, expiresAt: Date) => string) {
  const page = await findPage(
    db,
    {
      from: 'export_request x',
      select: EXPORT_REQUEST_SELECT,
      idColumn: 'x.id',
      where: ['x.environment_id = $1'],
      params: [environmentId],
      sortable: { createdAt: 'x.created_at' },
      search: ['x.hash_id'],
      updatedColumn: 'x.updated_at',
    },
    { ...query, sortBy: query.sortBy ?? 'createdAt' },
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ exportRequest: toExportRequest(r, link) })) };
}

/** What the worker needs of a request; null when it is gone or already written (a job run again). */
export interface ExportWork {
  id: number;
  hashId: string;
  environmentId: number;
  environmentHashId: string;
  scope: ExportScope;
  format: CsvFormat;
}

export async function claimExport(db: Queryable, hashId: string): Promise<ExportWork | null> {
  // admitted_at set here too: an export being written counts against its environment's turns however its job came
  const { rows } = await db.query<{
    id: number;
    environment_id: number;
    env_hash_id: string;
    scope: ExportScope;
    delimiter: ',' | ';';
    row_delimiter: '\n' | '\r\n';
  }>(
    `UPDATE export_request x SET status = 'creating', progress = 0, rows_written = 0, admitted_at = coalesce(x.admitted_at, now()), updated_at = now() FROM environment e
      WHERE x.hash_id = $1 AND e.id = x.environment_id AND x.status IN ('waiting', 'creating')
      RETURNING x.id, x.environment_id, e.hash_id AS env_hash_id, x.scope, x.delimiter, x.row_delimiter`,
    [hashId],
  );
  if (rows.length === 0) return null;
  const r = rows[0];
  return {
    id: r.id,
    hashId,
    environmentId: r.environment_id,
    environmentHashId: r.env_hash_id,
    scope: r.scope,
    format: { delimiter: r.delimiter, rowDelimiter: r.row_delimiter },
  };
}

export async function recordProgress(db: Queryable, id: number, rowsWritten: number, progress: number): Promise<void> {
  await db.query('UPDATE export_request SET rows_written = $2, progress = $3, updated_at = now() WHERE id = $1', [id, rowsWritten, progress]);
}

export async function markAvailable(db: Queryable, id: number, fileName: string, bytes: number, rowsWritten: number, retentionHours: number): Promise<void> {
  await db.query(
    `UPDATE export_request SET status = 'available', progress = 1, rows_written = $5, file_name = $2, bytes = $3,
            expires_at = now() + make_interval(hours => $4), updated_at = now() WHERE id = $1`,
    [id, fileName, bytes, retentionHours, rowsWritten],
  );
}

/**
 * An export that cannot be written (its analytics query ran out of its statement timeout, or every try failed): no
 * file, status deleted (the SDK's statuses have no other for an export without one) and the reason in `error`.
 */
export async function markFailed(db: Queryable, id: number, error: string): Promise<void> {
  await db.query("UPDATE export_request SET status = 'deleted', error = $2, updated_at = now() WHERE id = $1", [id, error]);
}

/**
 * Admits the environment's next waiting exports, oldest first, while fewer than `perEnvironment` of its exports are
 * admitted or being written; answers the hashIds of its admitted exports still waiting, whose jobs the caller queues
 * (again, for one admitted before: a job queued already is not queued twice, and one that never reached Redis is).
 * Serialised per environment (a transaction-scoped advisory lock), so two calls at once admit no more than one would.
 */
export async function admitExports(db: Db, environmentId: number, perEnvironment: number): Promise<string[]> {
  return db.tx(async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(7245063, ($1::bigint % 2147483647)::int)', [environmentId]);
    await client.query(
      `UPDATE export_request SET admitted_at = now() WHERE id IN (
         SELECT id FROM export_request WHERE environment_id = $1 AND status = 'waiting' AND admitted_at IS NULL ORDER BY id
          LIMIT greatest(0, $2 - (SELECT count(*) FROM export_request
                                   WHERE environment_id = $1 AND (status = 'creating' OR (status = 'waiting' AND admitted_at IS NOT NULL)))))`,
      [environmentId, perEnvironment],
    );
    const { rows } = await client.query<{ hash_id: string }>(
      "SELECT hash_id FROM export_request WHERE environment_id = $1 AND status = 'waiting' AND admitted_at IS NOT NULL ORDER BY id",
      [environmentId],
    );
    return rows.map((r) => r.hash_id);
  });
}

/** The environment of an export, or null when it is gone. */
export async function environmentOfExport(db: Queryable, hashId: string): Promise<number | null> {
  const { rows } = await db.query<{ environment_id: number }>('SELECT environment_id FROM export_request WHERE hash_id = $1', [hashId]);
  return rows.length === 0 ? null : Number(rows[0].environment_id);
}

/**
 * What a starting worker queues (again): the exports admitted or being written, whose jobs may have been lost on
 * the way to Redis, and the environments with exports still to admit.
 */
export async function unfinishedExports(db: Queryable): Promise<{ queued: string[]; environmentIds: number[] }> {
  const { rows } = await db.query<{ hash_id: string; environment_id: number; admitted: boolean }>(
    `SELECT hash_id, environment_id, (status = 'creating' OR admitted_at IS NOT NULL) AS admitted
       FROM export_request WHERE status IN ('waiting', 'creating') ORDER BY id LIMIT 10000`,
  );
  return {
    queued: rows.filter((r) => r.admitted).map((r) => r.hash_id),
    environmentIds: [...new Set(rows.filter((r) => !r.admitted).map((r) => Number(r.environment_id)))],
  };
}

/** Marks up to `limit` expired exports deleted; answers their files to delete. */
export async function expireExports(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ file_name: string | null }>(
    `UPDATE export_request SET status = 'deleted', updated_at = now() WHERE id IN (
       SELECT id FROM export_request WHERE status = 'available' AND expires_at <= now() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
     RETURNING file_name`,
    [limit],
  );
  return rows.flatMap((r) => (r.file_name ? [r.file_name] : []));
}

/** The file of an available, unexpired export of the environment, or null. */
export async function downloadableFile(db: Queryable, hashId: string, environmentHashId: string): Promise<{ fileName: string; bytes: number } | null> {
  const { rows } = await db.query<{ file_name: string; bytes: number }>(
    `SELECT x.file_name, x.bytes FROM export_request x JOIN environment e ON e.id = x.environment_id
      WHERE x.hash_id = $1 AND e.hash_id = $2 AND x.status = 'available' AND x.expires_at > now()`,
    [hashId, environmentHashId],
  );
  return rows.length === 0 ? null : { fileName: rows[0].file_name, bytes: Number(rows[0].bytes) };
}

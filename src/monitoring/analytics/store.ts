import { createHash } from 'node:crypto';
import type { Queryable, TxQueryable } from '../../app/db.ts';
import { AppError, NotFoundError, ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { compileQuery } from './compile.ts';
import { QUERY_LIMITS, type AnalyticsQuery } from './query.ts';

/**
 * A query whose statement ran out of its time (ANALYTICS_STATEMENT_TIMEOUT_MS) or of the database's
 * memory: 400 `analytics_query_too_broad`. The statement was cancelled; narrow the query (a filter on
 * time or pin group, a coarser time group) and ask again.
 */
export class AnalyticsQueryTooBroadError extends AppError {
  constructor(message: string) {
    super('analytics_query_too_broad', 400, message);
  }
}

/** A query's identity for its offsets: the same query without its paging members. */
function fingerprint(q: AnalyticsQuery): string {
  const { offset: _offset, rowsPerPage: _rows, ...rest } = q;
  return createHash('sha256').update(JSON.stringify(rest)).digest('base64url').slice(0, 22);
}

/** The row position inside an (already opened) offset, which must have been made for this very query. */
function positionOf(q: AnalyticsQuery): number {
  if (q.offset === undefined) return 0;
  try {
    const v: unknown = JSON.parse(q.offset);
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && (v[0] as number) >= 0 && v[1] === fingerprint(q)) return v[0] as number;
  } catch {
    // fall through
  }
  throw new ParameterError('offset is not a nextPageOffset this service returned for this query');
}

function pgCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * At most `limit` analytics statements at once (per gate, one per process): the others wait their turn
 * holding no database connection, so broad queries cannot take every connection of the pool.
 */
export function analyticsGate(limit: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (fn) => {
    if (running < limit) running++;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await fn();
    } finally {
      // the slot passes to the next waiter, or is freed
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/**
 * Sets, for the rest of `client`'s transaction, what an analytics statement runs under: PostgreSQL cancels a
 * statement after `timeoutMs`, times are grouped in UTC, and JIT (off on the service's connections) is on, as it pays
 * for itself on a scan of millions of measurements. GET /analytics/ and the export of an analytics query both.
 */
export async function setAnalyticsSession(client: Queryable, timeoutMs: number): Promise<void> {
  await client.query("SELECT set_config('statement_timeout', $1, true), set_config('TimeZone', 'UTC', true), set_config('jit', 'on', true)", [
    String(timeoutMs),
  ]);
}

/**
 * The error a failed analytics statement is for its user, or null when it failed for another reason (the database
 * away: worth trying again). Too broad: cancelled by the statement timeout (57014), out of memory or temporary disk
 * (class 53), a program limit (class 54); a value the computation cannot hold (class 22, e.g. a sum that overflows).
 */
export function analyticsFailure(err: unknown, timeoutMs: number): AppError | null {
  const code = pgCode(err);
  if (code === '57014' || code?.startsWith('53') || code?.startsWith('54')) {
    return new AnalyticsQueryTooBroadError(
      `The query needs more than the ${timeoutMs} ms (or the memory) an analytics query may use and was cancelled; narrow it with a filter (e.g. on time) or a coarser time group`,
    );
  }
  if (code?.startsWith('22')) return new ParameterError(`The query's values cannot be computed: ${(err as Error).message}`);
  return null;
}

/**
 * analytics results: one page of the query's rows (each an array of cell values), computed in a
 * read-only transaction whose statement PostgreSQL cancels after `timeoutMs`.
 */
export async function analyticsResults(
  db: TxQueryable,
  environmentId: number,
  q: AnalyticsQuery,
  timeoutMs: number,
  gate: <T>(fn: () => Promise<T>) => Promise<T> = (fn) => fn(),
): Promise<{ nextPageOffset: string | null; rows: unknown[][] }> {
  const rowsPerPage = q.rowsPerPage ?? QUERY_LIMITS.defaultRowsPerPage;
  if (!Number.isInteger(rowsPerPage) || rowsPerPage < 1 || rowsPerPage > QUERY_LIMITS.rowsPerPage) {
    throw new ParameterError(`rowsPerPage must be an integer from 1 to ${QUERY_LIMITS.rowsPerPage}`);
  }
  const position = positionOf(q);
  const compiled = compileQuery(q, environmentId, position, rowsPerPage);
  let rows: Record<string, unknown>[];
  try {
    rows = await gate(() =>
      db.tx(async (client) => {
        await client.query('SET TRANSACTION READ ONLY');
        await setAnalyticsSession(client, timeoutMs);
        return (await client.query(compiled.sql, compiled.params)).rows;
      }),
    );
  } catch (err) {
    throw analyticsFailure(err, timeoutMs) ?? err;
  }
  let nextPageOffset: string | null = null;
  if (rows.length > rowsPerPage) {
    rows.length = rowsPerPage;
    nextPageOffset = JSON.stringify([position + rowsPerPage, fingerprint(q)]);
  }
  return { nextPageOffset, rows: rows.map((r) => Array.from({ length: compiled.columns }, (_, i) => r[`c${i}`])) };
}

// ---- analytics panels ------------------------------------------------------------------------------

export interface CardPosition {
  x: number;
  y: number;
  width?: number;
  height?: number;
}
export interface Card {
  title: string;
  subtitle?: string;
  query: AnalyticsQuery;
  visualisation: Record<string, unknown>;
}
export interface PanelAdd {
  title: string;
  layout?: CardPosition[];
  cards: Card[];
}
export type PanelUpdate = Partial<PanelAdd>;

/** The SDK's layout check: cards placed on a grid of 6 columns may not overlap (width and height absent: no area). */
function checkLayout(layout: CardPosition[]): void {
  layout.forEach((a, i) => {
    for (let j = 0; j < i; j++) {
      const b = layout[j];
      if (a.width === undefined || a.height === undefined || b.width === undefined || b.height === undefined) continue;
      const overlaps = a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
      if (overlaps) throw new ParameterError(`layout[${i}] is overlapping with layout[${j}]`);
    }
  });
}

/** Cards as the SDK's current model has them: a table visualisation holds only its type. */
function storedCards(cards: Card[]): string {
  return JSON.stringify(cards.map((c) => (c.visualisation.type === 'table' ? { ...c, visualisation: { type: 'table' } } : c)));
}

/** yMin and yMax of line charts arrived with Api-Version 8: older SDK releases refuse them in an answer. */
export function panelForApiVersion<P extends { cards: Card[] }>(panel: P, apiVersion: number): P {
  if (apiVersion >= 8) return panel;
  return {
    ...panel,
    cards: panel.cards.map((c) => {
      const { yMin: _yMin, yMax: _yMax, ...visualisation } = c.visualisation;
      return { ...c, visualisation };
    }),
  };
}

const PANEL_SELECT = 'a.hash_id, a.title, a.layout, a.cards';
const toPanel = (r: Record<string, unknown>) => ({
  hashId: r.hash_id as string,
  title: r.title as string,
  layout: r.layout as CardPosition[],
  cards: r.cards as Card[],
});

export async function addPanel(db: Queryable, environmentId: number, input: PanelAdd): Promise<{ hashId: string }> {
  const layout = input.layout ?? [];
  checkLayout(layout);
  const hashId = newHashId();
  await db.query('INSERT INTO analytics_panel (hash_id, environment_id, title, layout, cards) VALUES ($1, $2, $3, $4, $5)', [
    hashId,
    environmentId,
    input.title,
    JSON.stringify(layout),
    storedCards(input.cards),
  ]);
  return { hashId };
}

export async function getPanel(db: Queryable, environmentId: number, hashId: string) {
  const { rows } = await db.query(`SELECT ${PANEL_SELECT} FROM analytics_panel a WHERE a.environment_id = $1 AND a.hash_id = $2`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('analytics panel', hashId);
  return { panel: toPanel(rows[0]) };
}

export async function findPanels(db: Queryable, environmentId: number, query: FindQuery) {
  const page = await findPage(
    db,
    {
      from: 'analytics_panel a',
      select: PANEL_SELECT,
      idColumn: 'a.id',
      where: ['a.environment_id = $1'],
      params: [environmentId],
      sortable: { hashId: 'a.hash_id', title: 'a.title' },
      search: ['a.title', 'a.hash_id'],
      updatedColumn: 'a.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ panel: toPanel(r) })) };
}

export async function updatePanel(db: Queryable, environmentId: number, hashId: string, patch: PanelUpdate): Promise<void> {
  if (patch.layout) checkLayout(patch.layout);
  const { rowCount } = await db.query(
    `UPDATE analytics_panel SET title = COALESCE($3, title), layout = COALESCE($4, layout), cards = COALESCE($5, cards), updated_at = now()
      WHERE environment_id = $1 AND hash_id = $2`,
    [environmentId, hashId, patch.title ?? null, patch.layout ? JSON.stringify(patch.layout) : null, patch.cards ? storedCards(patch.cards) : null],
  );
  if (!rowCount) throw new NotFoundError('analytics panel', hashId);
}

/** analytics panel delete; accounts that had it as their default panel have none afterwards (ON DELETE SET NULL). */
export async function deletePanel(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await db.query('DELETE FROM analytics_panel WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (!rowCount) throw new NotFoundError('analytics panel', hashId);
}

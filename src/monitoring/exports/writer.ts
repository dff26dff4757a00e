import { createWriteStream } from 'node:fs';
import { mkdir, rename, stat, unlink } from 'node:fs/promises';
import { once } from 'node:events';
import path from 'node:path';
import type { Db } from '../../app/db.ts';
import { setAnalyticsSession } from '../analytics/store.ts';
import { csvLine } from './csv.ts';
import { estimateRows, rowsStatement } from './rows.ts';
import type { ExportWork } from './store.ts';

/** Rows fetched from the cursor at a time: the most the process holds of an export. */
const BATCH_ROWS = 5000;

interface ArrayRowsClient {
  query(config: { text: string; values?: unknown[]; rowMode: 'array' }): Promise<{ rows: unknown[][] }>;
}

export interface WrittenExport {
  fileName: string;
  bytes: number;
  rows: number;
}

export interface WriteOptions {
  /** the statement timeout of an analytics query's export, GET /analytics/'s (ANALYTICS_STATEMENT_TIMEOUT_MS) */
  analyticsTimeoutMs: number;
}

/**
 * Writes the export's CSV under `dir` (`<environmentHashId>/<hashId>.csv`), from a cursor over one read-only snapshot,
 * a batch at a time with the file's backpressure; `progress(rowsWritten, share)` is called after each batch (share: of the planner's estimate, below 1 until done). The
 * file is written beside its final name and renamed when complete: a run that dies leaves no file that looks whole,
 * and the next run writes it again from the start. An analytics query's rows are computed as GET /analytics/ computes
 * them, under its statement timeout (each statement, the cursor's fetches included): a query too broad for the
 * analytics route is too broad for its export, whose failure (analyticsFailure) the caller records.
 */
export async function writeExport(
  db: Db,
  work: ExportWork,
  dir: string,
  progress: (rows: number, share: number) => Promise<void>,
  options?: WriteOptions,
): Promise<WrittenExport> {
  // never unbounded: without its timeout an analytics query's export is not run at all
  if (work.scope.kind === 'analytics' && options === undefined) throw new Error("an analytics query's export needs its statement timeout (WriteOptions)");
  const statement = rowsStatement(work.environmentId, work.scope);
  const fileName = path.join(work.environmentHashId, `${work.hashId}.csv`);
  const target = path.join(dir, fileName);
  await mkdir(path.dirname(target), { recursive: true });
  const partial = `${target}.part`;
  const out = createWriteStream(partial);
  const closed = once(out, 'close');
  let written = 0;
  try {
    await db.tx(async (client) => {
      await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      if (work.scope.kind === 'analytics') await setAnalyticsSession(client, options!.analyticsTimeoutMs);
      const estimate = await estimateRows(client, statement);
      await client.query(`DECLARE export_rows NO SCROLL CURSOR FOR ${statement.sql}`, statement.params);
      out.write(csvLine(statement.header, work.format));
      for (;;) {
        const { rows } = await (client as unknown as ArrayRowsClient).query({ text: `FETCH ${BATCH_ROWS} FROM export_rows`, rowMode: 'array' });
        if (rows.length === 0) break;
        let chunk = '';
        for (const row of rows) chunk += csvLine(row, work.format);
        if (!out.write(chunk)) await once(out, 'drain');
        written += rows.length;
        // below 1 until the file is complete: the estimate may be short
        await progress(written, Math.min(0.99, written / estimate));
      }
    });
    out.end();
    await closed;
  } catch (err) {
    out.destroy();
    // a run that fails (rather than dies) leaves no part behind: the export may have failed for good
    await closed.catch(() => undefined);
    await unlink(partial).catch(() => undefined);
    throw err;
  }
  await rename(partial, target);
  return { fileName, bytes: (await stat(target)).size, rows: written };
}

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './ports.ts';
import { pgTool, type PrivatePostgres } from './private-postgres.ts';
import { until } from './until.ts';

/** A streaming replica of a PrivatePostgres: hot standby, read-only, on a port of its own. */
export interface PgStandby {
  url: string;
  /** Resolves once the standby has replayed every write the primary had made when called. */
  caughtUp(): Promise<void>;
  /** Stops applying what it receives (`pg_wal_replay_pause`): the lag of a busy or distant replica, on demand. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  destroy(): void;
}

async function one<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows[0];
  } finally {
    await client.end();
  }
}

/**
 * Copies `primary` with `pg_basebackup -R` (the copy streams WAL from the primary and replays it) and starts
 * the copy on another port. The primary's database is the URL's database on the standby.
 */
export async function startStandby(primary: PrivatePostgres): Promise<PgStandby> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-pg-standby-'));
  const data = path.join(dir, 'data');
  const port = await freePort();
  const run = pgTool(dir);
  run('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', data, '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync']);
  run('pg_ctl', [
    '-D',
    data,
    '-w',
    '-t',
    '60',
    '-l',
    path.join(dir, 'log'),
    '-o',
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c hot_standby=on -c max_connections=100`,
    'start',
  ]);
  const url = new URL(primary.url);
  url.port = String(port);
  const standbyUrl = url.toString();
  return {
    url: standbyUrl,
    async caughtUp() {
      const { lsn } = await one<{ lsn: string }>(primary.url, 'SELECT pg_current_wal_lsn()::text AS lsn');
      await until(
        () => one<{ done: boolean }>(standbyUrl, 'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done', [lsn]),
        (r) => r.done,
        "the standby to replay the primary's writes",
      );
    },
    async pauseReplay() {
      await one(standbyUrl, 'SELECT pg_wal_replay_pause()');
    },
    async resumeReplay() {
      await one(standbyUrl, 'SELECT pg_wal_replay_resume()');
    },
    destroy() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
      } catch {
        /* stopped already */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

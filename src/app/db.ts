import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { embeddedPostgres } from './embedded-postgres.ts';
import { NotFoundError } from './errors.ts';
import type { Logger } from './logger.ts';
import { OutageLog } from './outage-log.ts';
import { authorSetting, withoutAuthor } from './author.ts';

// bigint columns (ids, counts) come back as JS numbers: ours stay far below 2^53
pg.types.setTypeParser(20, (v: string) => Number(v));

export type Row = Record<string, unknown>;
/**
 * SQL text, or a named statement: PostgreSQL parses and plans it once per connection and reuses the
 * plan (the hot path's statements run thousands of times a second; planning the report insert
 * cost more than executing it).
 */
export type Sql = string | NamedStatement;
export interface NamedStatement {
  readonly name: string;
  readonly text: string;
}
export interface Queryable {
  query<T extends Row = Row>(sql: Sql, params?: unknown[]): Promise<{ rows: T[]; rowCount: number | null }>;
}

/**
 * How far back a retried write looks for the row its first run stored. Reports and activities are partitioned by
 * time (migration 032) and no unique index spans the partitions, so a retry whose time differs from its first run's
 * (supplier code that reads the clock; an activity's created_at) finds that row by hashId in this window only.
 */
export const RETRY_HORIZON = '7 days';

/**
 * The condition of a subquery that finds a row stored by hashId between RETRY_HORIZON ago and now, on its time
 * column `at`: the bounds leave it two weekly partitions. Its `OFFSET 0` keeps it a subquery run once per row
 * through the hashId index: as a join, the planner may hash a whole week of rows to check a batch of 50, and an
 * `= ANY(array)` search of the batch's hashIds was planned as a scan of the partitions (both measured slower).
 */
export const recentlyStored = (at: string): string => `${at} > now() - interval '${RETRY_HORIZON}' AND ${at} <= now() OFFSET 0`;

const statementNames = new Set<string>();
/** A statement prepared once per connection under `name` (unique per process: one name, one text). */
export function namedStatement(name: string, text: string): NamedStatement {
  if (statementNames.has(name)) throw new Error(`statement name ${name} is used twice`);
  statementNames.add(name);
  return Object.freeze({ name, text });
}

/** Statements and transactions on one pool. */
export interface TxQueryable extends Queryable {
  tx<T>(fn: (client: Queryable) => Promise<T>): Promise<T>;
}

/** The system of record: pg pools on PostgreSQL (DATABASE_URL's, or the embedded one the service runs itself). */
export interface Db extends TxQueryable {
  close(): Promise<void>;
  /**
   * The read-heavy operations' pool (measurement find, chart series, analytics): a streaming replica when
   * DATABASE_READ_URL is set, else the primary. A replica answers what it has replayed: a write committed on
   * the primary a moment ago may not be there yet (docs/decisions.md, "A read replica").
   */
  readonly read: TxQueryable;
  readonly embedded: boolean;
  /**
   * Writes whose commit returns before PostgreSQL has flushed it to disk (`synchronous_commit = off` on its own
   * connections): visible to every session at once, on disk once a later `flushed()` has resolved. The worker
   * stores reports and activities here, answers the device, and completes the queued job only after `flushed()`:
   * a slow disk flush delays the job's completion, not the device's answer, and a crash before the flush leaves
   * the job to be run again (its writes are idempotent).
   */
  readonly deferred: Queryable;
  /** Resolves once everything committed before the call, on either pool, is flushed to disk (one shared flush for callers that wait together). */
  flushed(): Promise<void>;
  /**
   * Runs `fn` on a connection of its own (one for the process; each statement commits alone) that never names an author: the
   * partition maker's moves and retention's deletes are the service's housekeeping, never any account's change, and
   * are not logged in the audit trail whichever operation or job started them.
   */
  maintenance<T>(fn: (client: Queryable) => Promise<T>): Promise<T>;
}

const FLUSH_BARRIER = namedStatement('wal-flush-barrier', 'UPDATE wal_flush_barrier SET at = now() WHERE id = 1');

/**
 * Group flush: a synchronously committed write flushes the WAL up to its commit record, which covers every commit
 * made before it started. Callers arriving while one runs may have committed after it began: they share the next.
 */
export function flushBarrier(flush: () => Promise<unknown>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  const start = (): Promise<void> => {
    const p = flush().then(() => undefined);
    running = p;
    const clear = () => {
      if (running === p) running = null;
    };
    p.then(clear, clear);
    return p;
  };
  return () => {
    if (!running) return start();
    next ??= running
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        next = null;
        return start();
      });
    return next;
  };
}

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

async function applyMigrations(db: Queryable, log?: Logger): Promise<void> {
  await db.query('SELECT pg_advisory_lock(7245001)');
  try {
    await db.query('CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const done = new Set((await db.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
    for (const file of readdirSync(MIGRATIONS_DIR)
      .filter((f) => f.endsWith('.sql'))
      .sort()) {
      if (done.has(file)) continue;
      await db.query('BEGIN');
      try {
        await db.query(readFileSync(path.join(MIGRATIONS_DIR, file), 'utf8'));
        await db.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
        await db.query('COMMIT');
        log?.info({ migration: file }, 'migration applied');
      } catch (err) {
        await db.query('ROLLBACK');
        throw err;
      }
    }
    // the audit trail's trigger on every table, those of the migrations just applied included, its function generated
    // from each table's columns (045_audit_log.sql, 061_audit_trigger_per_table.sql)
    await db.query('SELECT audit_attach_all()');
  } finally {
    await db.query('SELECT pg_advisory_unlock(7245001)');
  }
}

const queryOn =
  (pool: pg.Pool): Queryable['query'] =>
  (sql, params) =>
    pool.query(sql as never, params as unknown[]) as never;

/**
 * Runs `fn` on a connection of `pool`. The pool listens for errors only on idle connections: one that breaks while
 * checked out (PostgreSQL stopped between two statements) would emit 'error' with no listener and end the process;
 * with this listener its next statement fails instead. A connection whose work failed is closed, not pooled again,
 * unless `reusable()` says it is sound (a transaction rolled back).
 */
async function onConnection<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, reusable = () => false): Promise<T> {
  const client = await pool.connect();
  const ignore = () => undefined;
  client.on('error', ignore);
  try {
    const result = await fn(client);
    client.removeListener('error', ignore);
    client.release();
    return result;
  } catch (err) {
    client.removeListener('error', ignore);
    client.release(reusable() ? undefined : (err as Error));
    throw err;
  }
}

/** Transactions on `pool`; `begin` gives the statement that opens one (the audit trail names its author there). */
const txOn =
  (pool: pg.Pool, begin: (client: pg.PoolClient) => string = () => 'BEGIN'): TxQueryable['tx'] =>
  (fn) => {
    // a connection that cannot even roll back (the server went away mid-transaction) is closed, not pooled again
    let rolledBack = false;
    return onConnection(
      pool,
      async (client) => {
        try {
          await client.query(begin(client));
          const result = await fn(client as unknown as Queryable);
          await client.query('COMMIT');
          return result;
        } catch (err) {
          rolledBack = await client.query('ROLLBACK').then(
            () => true,
            () => false,
          );
          throw err;
        }
      },
      () => rolledBack,
    );
  };

function wrapPool(
  pool: pg.Pool,
  embedded: boolean,
  onClose: () => Promise<void>,
  deferredPool: pg.Pool,
  readPool: pg.Pool | null,
  maintenancePool: pg.Pool,
  authoredPool: pg.Pool,
): Db {
  // The audit trail's author (src/app/author.ts). A statement made outside an operation runs on `pool`, whose
  // connections never name an author; one made inside an operation runs on `authoredPool`, each of whose connections
  // names the author of its last statement, set again (a round trip) only when the operation's author differs.
  // Which statements write is not guessed from their text (a SELECT of a function may write, as the partition maker
  // does), so no connection lends one operation's author to a statement of another or of none; and as the two never
  // share a connection, a request's reads before its operation (authentication) do not undo its author each time.
  const sessionAuthor = new WeakMap<pg.PoolClient, string>();
  const authorText = (client: pg.PoolClient, author: string) => `SELECT set_config('gridgate.audit', ${client.escapeLiteral(author)}, false)`;
  const query: Queryable['query'] = (sql, params) => {
    const author = authorSetting();
    if (author === null) return onConnection(pool, async (client) => (await client.query(sql as never, params as unknown[])) as never);
    return onConnection(authoredPool, async (client) => {
      if (sessionAuthor.get(client) !== author) {
        await client.query(authorText(client, author));
        sessionAuthor.set(client, author);
      }
      return (await client.query(sql as never, params as unknown[])) as never;
    });
  };
  const plainTx = txOn(pool);
  // the author before BEGIN in the same round trip, outside the transaction, so a rollback keeps it
  const authoredTx = txOn(authoredPool, (client) => {
    const author = authorSetting() ?? '';
    if (sessionAuthor.get(client) === author) return 'BEGIN';
    sessionAuthor.set(client, author);
    return `${authorText(client, author)}; BEGIN`;
  });
  const tx: TxQueryable['tx'] = (fn) => (authorSetting() === null ? plainTx(fn) : authoredTx(fn));
  // a replica's connections write nothing and never name an author
  const read: TxQueryable = readPool ? { query: queryOn(readPool), tx: txOn(readPool) } : { query, tx };
  const db: Db = {
    embedded,
    query,
    tx,
    deferred: { query: queryOn(deferredPool) },
    flushed: flushBarrier(() => pool.query({ name: FLUSH_BARRIER.name, text: FLUSH_BARRIER.text })),
    read,
    // its connection never names an author: nothing it does is logged, whatever operation started it
    maintenance: (fn) => withoutAuthor(() => onConnection(maintenancePool, (client) => fn(client as unknown as Queryable))),
    async close() {
      await Promise.all([pool.end(), deferredPool.end(), readPool?.end(), maintenancePool.end(), authoredPool.end()]);
      await onClose();
    },
  };
  return db;
}

/** Connections of the deferred-commit pool: the worker's batched writers (reports, activities, lastOnlineAt) */
const DEFERRED_POOL_SIZE = 6;

interface PoolOptions {
  poolSize?: number;
  log?: Logger;
  idleTimeoutMillis?: number;
  readUrl?: string | null;
}

function postgresDb(url: string, opts: PoolOptions, embedded: boolean, onClose: () => Promise<void>): Db {
  const idle = opts.idleTimeoutMillis === undefined ? {} : { idleTimeoutMillis: opts.idleTimeoutMillis };
  // JIT off: its compile time (0.5 s measured on a measurement find whose estimate crossed jit_above_cost on stale
  // statistics) dwarfs the short statements this service runs; analytics turns it on for its own transaction
  const pool = new pg.Pool({ connectionString: url, max: opts.poolSize ?? 10, options: '-c jit=off', ...idle });
  const deferred = new pg.Pool({ connectionString: url, max: DEFERRED_POOL_SIZE, options: '-c synchronous_commit=off -c jit=off', ...idle });
  const read = opts.readUrl ? new pg.Pool({ connectionString: opts.readUrl, max: opts.poolSize ?? 10, options: '-c jit=off', ...idle }) : null;
  const maintenance = new pg.Pool({ connectionString: url, max: 1, options: '-c jit=off', application_name: 'gridgate-maintenance', ...idle });
  // the API operations' connections, which name their author (wrapPool): opened only in a process that serves them
  const authored = new pg.Pool({ connectionString: url, max: opts.poolSize ?? 10, options: '-c jit=off', ...idle });
  // an outage breaks every idle connection at once: one line when they start failing, one when a new one connects
  const watch = (pools: pg.Pool[], down: string, up: string) => {
    const outage = opts.log ? new OutageLog(opts.log, down, up) : null;
    for (const p of pools) {
      p.on('error', (err) => outage?.down(err));
      p.on('connect', () => outage?.up());
    }
  };
  watch([pool, deferred, maintenance, authored], 'idle database connections failed: PostgreSQL is unavailable', 'database connections succeed again');
  if (read) watch([read], 'idle read replica connections failed: DATABASE_READ_URL is unavailable', 'read replica connections succeed again');
  return wrapPool(pool, embedded, onClose, deferred, read, maintenance, authored);
}

/**
 * Opens the database named by `databaseUrl`, or else the embedded PostgreSQL of `dataDir` (started when no process
 * of this machine runs it yet: src/app/embedded-postgres.ts), and migrates it. `idleTimeoutMillis`: how long a
 * pooled connection may idle before it is closed (pg's default, 10 s, when unset). `readUrl`: a streaming replica
 * for `db.read` (DATABASE_READ_URL; the primary when unset).
 */
export async function openDb(opts: { databaseUrl: string | null; dataDir: string; migrate?: boolean } & PoolOptions): Promise<Db> {
  let db: Db;
  if (opts.databaseUrl) {
    db = postgresDb(opts.databaseUrl, opts, false, async () => undefined);
  } else {
    const server = await embeddedPostgres(opts.dataDir, opts.log);
    db = postgresDb(server.url, opts, true, () => server.release());
  }
  if (opts.migrate !== false) await applyMigrations(db, opts.log);
  return db;
}

/** Drops and creates database `name` on the server of `adminUrl`; returns its URL (tests and benchmarks start clean). */
export async function recreateDatabase(adminUrl: string, name: string): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Soft-deletes the environment's object `hashId` in `table` (rows that refer to it keep working);
 * a missing or already deleted object is a NotFoundError naming `what`.
 */
export async function softDelete(db: Queryable, table: string, what: string, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await db.query(
    `UPDATE ${table} SET deleted_at = now(), updated_at = now() WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`,
    [environmentId, hashId],
  );
  if (!rowCount) throw new NotFoundError(what, hashId);
}

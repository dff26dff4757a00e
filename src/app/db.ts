import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { embeddedPostgres } from './embedded-postgres.ts';
import { NotFoundError } from './errors.ts';
import type { Logger } from './logger.ts';
import { OutageLog } from './outage-log.ts';
import { authorSetting, mayWrite } from './author.ts';

// bigint columns (ids, counts) come back as JS numbers: ours stay far below 2^53
pg.types.setTypeParser(20, (v: string) => Number(v));

export type Row = Record<string, unknown>;
/**
 * SQL text, or a named statement: PostgreSQL parses and plans it once per connection and reuses the
 * plan (the hot path's statements run thousands of times a second; planning the report insert
 * cost more than executing it).
 */
export type Sql = string | NamedStatement;
export interface NamedStatement { readonly name: string; readonly text: string }
export interface Queryable {
  query<T extends Row = Row>(sql: Sql, params?: unknown[]): Promise<{ rows: T[]; rowCount: number | null }>;
}

const statementNames = new Set<string>();
/** A statement prepared once per connection under `name` (unique per process: one name, one text). */
export function namedStatement(name: string, text: string): NamedStatement {
  if (statementNames.has(name)) throw new Error(`statement name ${name} is used twice`);
  statementNames.add(name);
  return Object.freeze({ name, text });
}

/** The system of record: pg pools on PostgreSQL (DATABASE_URL's, or the embedded one the service runs itself). */
export interface Db extends Queryable {
  tx<T>(fn: (client: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
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
    const clear = () => { if (running === p) running = null; };
    p.then(clear, clear);
    return p;
  };
  return () => {
    if (!running) return start();
    next ??= running.then(() => undefined, () => undefined).then(() => {
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
    for (const file of readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql')).sort()) {
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
    // the audit trail's trigger on every table, those of the migrations just applied included (045_audit_log.sql)
    await db.query('SELECT audit_attach_all()');
  } finally {
    await db.query('SELECT pg_advisory_unlock(7245001)');
  }
}

const queryOn = (pool: pg.Pool): Queryable['query'] => (sql, params) => pool.query(sql as never, params as unknown[]) as never;

function wrapPool(pool: pg.Pool, embedded: boolean, onClose: () => Promise<void>, deferredPool: pg.Pool): Db {
  const plainQuery = queryOn(pool);
  // The audit trail's author ('' for none) each pooled connection's session names (src/app/author.ts): a write
  // runs only on a connection naming its own author, set (a round trip) when it differs. An API operation's writes
  // mostly find theirs already set; the first write without one after them sets it back to ''. Reads need none.
  const sessionAuthor = new WeakMap<pg.PoolClient, string>();
  const authorText = (client: pg.PoolClient, author: string) => `set_config('gridgate.audit', ${client.escapeLiteral(author)}, `;
  const db: Db = {
    embedded,
    async query(sql, params) {
      if (!mayWrite(typeof sql === 'string' ? sql : sql.text)) return plainQuery(sql, params);
      const author = authorSetting() ?? '';
      const client = await pool.connect();
      try {
        if ((sessionAuthor.get(client) ?? '') !== author) {
          await client.query(`SELECT ${authorText(client, author)}false)`);
          sessionAuthor.set(client, author);
        }
        const result = await client.query(sql as never, params as unknown[]);
        client.release();
        return result as never;
      } catch (err) {
        // as pool.query does: a connection whose statement failed is not pooled again
        client.release(err as Error);
        throw err;
      }
    },
    deferred: { query: queryOn(deferredPool) },
    flushed: flushBarrier(() => pool.query({ name: FLUSH_BARRIER.name, text: FLUSH_BARRIER.text })),
    async tx(fn) {
      const client = await pool.connect();
      // the pool listens for errors only on idle connections: one that breaks between two statements of this
      // transaction would emit 'error' with no listener and end the process; its next statement fails instead
      const ignore = () => undefined;
      client.on('error', ignore);
      try {
        const author = authorSetting() ?? '';
        // in the same round trip as BEGIN, for this transaction only (a rollback would undo a session-level one)
        await client.query((sessionAuthor.get(client) ?? '') === author ? 'BEGIN' : `BEGIN; SELECT ${authorText(client, author)}true)`);
        const result = await fn(client as unknown as Queryable);
        await client.query('COMMIT');
        client.removeListener('error', ignore);
        client.release();
        return result;
      } catch (err) {
        // a connection that cannot even roll back (the server went away mid-transaction) is closed, not pooled again
        const broken = await client.query('ROLLBACK').then(() => false, () => true);
        client.removeListener('error', ignore);
        client.release(broken);
        throw err;
      }
    },
    async close() {
      await Promise.all([pool.end(), deferredPool.end()]);
      await onClose();
    },
  };
  return db;
}

/** Connections of the deferred-commit pool: the worker's batched writers (reports, activities, lastOnlineAt) */
const DEFERRED_POOL_SIZE = 6;

function postgresDb(url: string, opts: { poolSize?: number; log?: Logger; idleTimeoutMillis?: number }, embedded: boolean, onClose: () => Promise<void>): Db {
  const idle = opts.idleTimeoutMillis === undefined ? {} : { idleTimeoutMillis: opts.idleTimeoutMillis };
  // JIT off: its compile time (0.5 s measured on a measurement find whose estimate crossed jit_above_cost on stale
  // statistics) dwarfs the short statements this service runs; analytics turns it on for its own transaction
  const pool = new pg.Pool({ connectionString: url, max: opts.poolSize ?? 10, options: '-c jit=off', ...idle });
  const deferred = new pg.Pool({ connectionString: url, max: DEFERRED_POOL_SIZE, options: '-c synchronous_commit=off -c jit=off', ...idle });
  // an outage breaks every idle connection at once: one line when they start failing, one when a new one connects
  if (opts.log) {
    const outage = new OutageLog(opts.log, 'idle database connections failed: PostgreSQL is unavailable', 'database connections succeed again');
    for (const p of [pool, deferred]) {
      p.on('error', (err) => outage.down(err));
      p.on('connect', () => outage.up());
    }
  } else for (const p of [pool, deferred]) p.on('error', () => undefined);
  return wrapPool(pool, embedded, onClose, deferred);
}

/**
 * Opens the database named by `databaseUrl`, or else the embedded PostgreSQL of `dataDir` (started when no process
 * of this machine runs it yet: src/app/embedded-postgres.ts), and migrates it. `idleTimeoutMillis`: how long a
 * pooled connection may idle before it is closed (pg's default, 10 s, when unset).
 */
export async function openDb(opts: { databaseUrl: string | null; dataDir: string; poolSize?: number; log?: Logger; migrate?: boolean; idleTimeoutMillis?: number }): Promise<Db> {
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
    `UPDATE ${table} SET deleted_at = now(), updated_at = now() WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`, [environmentId, hashId]);
  if (!rowCount) throw new NotFoundError(what, hashId);
}

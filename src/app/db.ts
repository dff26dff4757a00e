import { existsSync, readdirSync, readFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { NotFoundError } from './errors.ts';
import type { Logger } from './logger.ts';

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

/** The system of record: a pg pool, on PostgreSQL or on embedded PGlite through its socket server. */
export interface Db extends Queryable {
  tx<T>(fn: (client: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  readonly embedded: boolean;
  /**
   * Writes whose commit returns before PostgreSQL has flushed it to disk (`synchronous_commit = off` on its own
   * connections): visible to every session at once, on disk once a later `flushed()` has resolved. The worker
   * stores reports and activities here, answers the device, and completes the queued job only after `flushed()`:
   * a slow disk flush delays the job's completion, not the device's answer, and a crash before the flush leaves
   * the job to be run again (its writes are idempotent). On embedded PGlite it is the same pool.
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
  } finally {
    await db.query('SELECT pg_advisory_unlock(7245001)');
  }
}

const queryOn = (pool: pg.Pool): Queryable['query'] => (sql, params) => pool.query(sql as never, params as unknown[]) as never;

function wrapPool(pool: pg.Pool, embedded: boolean, onClose: () => Promise<void>, deferredPool?: pg.Pool): Db {
  return {
    embedded,
    query: queryOn(pool),
    deferred: { query: queryOn(deferredPool ?? pool) },
    flushed: deferredPool ? flushBarrier(() => pool.query({ name: FLUSH_BARRIER.name, text: FLUSH_BARRIER.text })) : () => Promise.resolve(),
    async tx(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(client as unknown as Queryable);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    async close() {
      await Promise.all([pool.end(), deferredPool?.end()]);
      await onClose();
    },
  };
}

const EMBEDDED_PORT_FILE = 'pglite.port';
/** Connections of the deferred-commit pool: the worker's batched writers (reports, activities, lastOnlineAt) */
const DEFERRED_POOL_SIZE = 6;

/** The embedded database of a service already running on this DATA_DIR, if there is one that answers. */
async function attachToRunningEmbedded(dataDir: string, poolSize?: number): Promise<Db | null> {
  const file = path.join(dataDir, EMBEDDED_PORT_FILE);
  if (!existsSync(file)) return null;
  const pool = new pg.Pool({ host: '127.0.0.1', port: Number(readFileSync(file, 'utf8')), user: 'postgres', database: 'postgres', max: poolSize ?? 1, connectionTimeoutMillis: 2000 });
  try {
    await pool.query('SELECT 1');
    return wrapPool(pool, true, async () => undefined);
  } catch {
    await pool.end().catch(() => undefined);
    return null;
  }
}

/** Opens the database named by `databaseUrl`, or embedded PGlite under `dataDir`, and migrates it. */
export async function openDb(opts: { databaseUrl: string | null; dataDir: string; poolSize?: number; log?: Logger; migrate?: boolean }): Promise<Db> {
  let db: Db | null;
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 10 });
    const deferred = new pg.Pool({ connectionString: opts.databaseUrl, max: DEFERRED_POOL_SIZE, options: '-c synchronous_commit=off' });
    for (const p of [pool, deferred]) p.on('error', (err) => opts.log?.error({ err }, 'idle database connection failed'));
    db = wrapPool(pool, false, async () => undefined, deferred);
  } else if ((db = await attachToRunningEmbedded(opts.dataDir, opts.poolSize))) {
    // another process of this machine (the running service) holds the embedded database: use its socket
    opts.log?.info('attached to the embedded database of the running service');
  } else {
    const { PGlite } = await import('@electric-sql/pglite');
    const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
    const dir = path.join(opts.dataDir, 'pglite');
    mkdirSync(dir, { recursive: true });
    const pglite = await PGlite.create(dir);
    const server = new PGLiteSocketServer({ db: pglite, port: 0, host: '127.0.0.1', maxConnections: 16 });
    await server.start();
    const [host, port] = server.getServerConn().split(':');
    const portFile = path.join(opts.dataDir, EMBEDDED_PORT_FILE);
    writeFileSync(portFile, port);
    // PGlite is single-connection: one pooled client keeps statements strictly in order
    const pool = new pg.Pool({ host, port: Number(port), user: 'postgres', database: 'postgres', max: 1 });
    db = wrapPool(pool, true, async () => {
      rmSync(portFile, { force: true });
      await server.stop();
      await pglite.close();
    });
    opts.log?.info({ dir }, 'embedded PGlite database');
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

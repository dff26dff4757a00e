/** Deferred commits (synchronous_commit off) and the shared WAL flush that makes them durable, on real PostgreSQL. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushBarrier, openDb, type Db } from '../../src/app/db.ts';

let db: Db;
beforeAll(async () => {
  db = await openDb({ databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/gridgate_test', dataDir: '/tmp', migrate: false });
  await db.query('CREATE TABLE IF NOT EXISTS deferred_commit_probe (id bigserial PRIMARY KEY, v text NOT NULL)');
});
afterAll(async () => {
  await db?.close();
});

describe('Db.deferred and Db.flushed', () => {
  it('deferred writes commit without waiting for the disk; the main pool still waits', async () => {
    expect((await db.deferred.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe('off');
    expect((await db.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe('on');
  });

  it('a deferred commit is visible to other sessions at once, and on disk once flushed() resolves', async () => {
    for (let i = 0; i < 25; i++) {
      const v = `probe-${Date.now()}-${i}`;
      await db.deferred.query('INSERT INTO deferred_commit_probe (v) VALUES ($1)', [v]);
      // the WAL position after the commit covers its commit record
      const {
        rows: [{ lsn }],
      } = await db.deferred.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      expect((await db.query('SELECT 1 FROM deferred_commit_probe WHERE v = $1', [v])).rowCount).toBe(1);
      await db.flushed();
      const {
        rows: [{ flushed }],
      } = await db.query<{ flushed: boolean }>('SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS flushed', [lsn]);
      expect(flushed).toBe(true);
    }
  });
});

describe('flushBarrier', () => {
  const gate = () => {
    const runs: { resolve(): void; reject(err: Error): void }[] = [];
    const flush = () =>
      new Promise<void>((resolve, reject) => {
        runs.push({ resolve, reject });
      });
    return { runs, wait: flushBarrier(flush) };
  };
  const tick = () => new Promise((r) => setImmediate(r));

  it('callers that arrive while a flush runs share the next one: 50 callers, 2 flushes', async () => {
    const { runs, wait } = gate();
    const first = wait();
    const later = Array.from({ length: 49 }, () => wait());
    expect(runs).toHaveLength(1);
    let laterDone = false;
    void Promise.all(later).then(() => {
      laterDone = true;
    });
    runs[0].resolve();
    await first;
    await tick();
    // the 49 may have committed after the first flush began: they are not released by it
    expect(laterDone).toBe(false);
    expect(runs).toHaveLength(2);
    runs[1].resolve();
    await Promise.all(later);
    const after = wait();
    expect(runs).toHaveLength(3);
    runs[2].resolve();
    await after;
  });

  it('a failed flush fails its own callers; the next round still runs', async () => {
    const { runs, wait } = gate();
    const first = wait();
    const second = wait();
    runs[0].reject(new Error('disk on fire'));
    await expect(first).rejects.toThrow('disk on fire');
    await tick();
    expect(runs).toHaveLength(2);
    runs[1].resolve();
    await expect(second).resolves.toBeUndefined();
  });
});

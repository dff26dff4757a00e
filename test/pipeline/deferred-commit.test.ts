/** Deferred commits (synchronous_commit off) and the shared WAL flush that makes them durable, on real PostgreSQL. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushBarrier, openDb, walWriterWait, type Db } from '../../src/app/db.ts';

let db: Db;
beforeAll(async () => {
  db = await openDb({ databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/gridgate_test', dataDir: '/tmp', migrate: false });
  await db.query('CREATE TABLE IF NOT EXISTS deferred_commit_probe (id bigserial PRIMARY KEY, v text NOT NULL)');
});
afterAll(async () => { await db?.close(); });

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
      const { rows: [{ lsn }] } = await db.deferred.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      expect((await db.query('SELECT 1 FROM deferred_commit_probe WHERE v = $1', [v])).rowCount).toBe(1);
      await db.flushed();
      const { rows: [{ flushed }] } = await db.query<{ flushed: boolean }>('SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS flushed', [lsn]);
      expect(flushed).toBe(true);
    }
  });
});

describe('flushBarrier', () => {
  const gate = () => {
    const runs: { resolve(): void; reject(err: Error): void }[] = [];
    const flush = () => new Promise<void>((resolve, reject) => { runs.push({ resolve, reject }); });
    return { runs, wait: flushBarrier(flush) };
  };
  const tick = () => new Promise((r) => setImmediate(r));

  it('callers that arrive while a flush runs share the next one: 50 callers, 2 flushes', async () => {
    const { runs, wait } = gate();
    const first = wait();
    const later = Array.from({ length: 49 }, () => wait());
    expect(runs).toHaveLength(1);
    let laterDone = false;
    void Promise.all(later).then(() => { laterDone = true; });
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

describe('walWriterWait', () => {
  /** Reads answered by the test: each `read()` waits until the test gives it WAL positions (or an error). */
  const wal = (forceAfterMs = 10_000) => {
    const reads: { answer(inserted: number, flushed: number): void; fail(err: Error): void }[] = [];
    let forced = 0;
    const read = () => new Promise<{ inserted: bigint; flushed: bigint }>((resolve, reject) => {
      reads.push({ answer: (inserted, flushed) => resolve({ inserted: BigInt(inserted), flushed: BigInt(flushed) }), fail: reject });
    });
    const force = async () => { forced++; };
    return { reads, forcedCount: () => forced, wait: walWriterWait(read, force, 1, forceAfterMs) };
  };
  const until = async (cond: () => boolean) => {
    for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 2));
    expect(cond()).toBe(true);
  };

  it("a caller is done once the flush position passes the insert position read after it arrived, not before", async () => {
    const { reads, wait, forcedCount } = wal();
    let done = false;
    const waiting = wait().then(() => { done = true; });
    await until(() => reads.length === 1);
    // a caller arriving while that read is out gets the next read's position
    let laterDone = false;
    const later = wait().then(() => { laterDone = true; });
    reads[0].answer(1000, 900);
    await until(() => reads.length === 2);
    expect(done).toBe(false);
    // flushed to 1000: the first caller's target; the later one's target is set by this read (1500)
    reads[1].answer(1500, 1000);
    await waiting;
    await until(() => reads.length === 3);
    expect(laterDone).toBe(false);
    reads[2].answer(1600, 1499);
    await until(() => reads.length === 4);
    expect(laterDone).toBe(false);
    reads[3].answer(1600, 1500);
    await later;
    expect(forcedCount()).toBe(0);
  });

  it('a caller the WAL writer leaves waiting past the limit gets one forced flush, shared with everyone waiting', async () => {
    const { reads, wait, forcedCount } = wal(30);
    const callers = [wait(), wait(), wait()];
    // the WAL writer never moves: every read says nothing is flushed
    let answered = 0;
    const answering = setInterval(() => { while (answered < reads.length) reads[answered++].answer(5000, 0); }, 1);
    try {
      await Promise.all(callers);
    } finally {
      clearInterval(answering);
    }
    expect(forcedCount()).toBe(1);
  });

  it('a failed read fails the callers waiting; the next caller is served', async () => {
    const { reads, wait } = wal();
    const first = wait();
    await until(() => reads.length === 1);
    reads[0].fail(new Error('connection refused'));
    await expect(first).rejects.toThrow('connection refused');
    const second = wait();
    await until(() => reads.length === 2);
    reads[1].answer(10, 10);
    await expect(second).resolves.toBeUndefined();
  });
});

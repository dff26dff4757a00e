import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/app/db.ts';
import { asAuthor } from '../../src/app/author.ts';
import { createLogger } from '../../src/app/logger.ts';
import { startPrivatePostgres, type PrivatePostgres } from '../support/private-postgres.ts';
import { until } from '../support/until.ts';

// PostgreSQL going away under the service's pools, as in a crash: what the process logs, and that it stays up.

let pg: PrivatePostgres;
let db: Db;
const lines: { level: number; msg: string }[] = [];
const log = createLogger('info', {
  write: (line: string) => {
    lines.push(JSON.parse(line) as { level: number; msg: string });
  },
});

beforeAll(async () => {
  pg = await startPrivatePostgres();
  db = await openDb({ databaseUrl: pg.url, dataDir: '/tmp', migrate: false, log });
});
afterAll(async () => {
  await db?.close().catch(() => undefined);
  pg?.destroy();
});

/** Keeps `n` connections of each pool busy at once, so that many sit idle in the pools afterwards. */
async function fillPools(n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, () => db.query('SELECT pg_sleep(0.05)')));
  await Promise.all(Array.from({ length: n }, () => db.deferred.query('SELECT pg_sleep(0.05)')));
}

describe('PostgreSQL killed under idle pooled connections', () => {
  it('logs one line when the connections fail and one when a new connection succeeds, however many connections broke', async () => {
    await fillPools(5);
    lines.length = 0;
    pg.kill();
    // every idle connection of both pools sees its socket end
    await new Promise((r) => setTimeout(r, 1000));
    pg.start();
    await until(
      () =>
        db.query('SELECT 1').then(
          () => true,
          () => false,
        ),
      (ok) => ok,
      'PostgreSQL answering again',
      30_000,
    );
    await fillPools(3);
    const down = lines.filter((l) => /idle database connections failed/.test(l.msg));
    const up = lines.filter((l) => /database connections succeed again/.test(l.msg));
    expect(down).toHaveLength(1);
    expect(down[0].level).toBe(40);
    expect(up).toHaveLength(1);
    expect(lines.filter((l) => l.level >= 40)).toHaveLength(1);
  }, 90_000);

  it('a transaction whose connection breaks between two statements fails; the process stays up and the next one commits', async () => {
    let killed = false;
    const failed = await db
      .tx(async (q) => {
        await q.query('SELECT 1');
        pg.kill();
        killed = true;
        // the socket's end reaches the checked-out connection while no statement runs on it
        await new Promise((r) => setTimeout(r, 500));
        await q.query('SELECT 1');
      })
      .then(
        () => null,
        (err: Error) => err,
      );
    expect(killed).toBe(true);
    expect(failed).toBeInstanceOf(Error);
    pg.start();
    await until(
      () =>
        db.query('SELECT 1').then(
          () => true,
          () => false,
        ),
      (ok) => ok,
      'PostgreSQL answering again',
      30_000,
    );
    const value = await db.tx(async (q) => (await q.query<{ v: number }>('SELECT 41 + 1 AS v')).rows[0].v);
    expect(value).toBe(42);
  }, 90_000);

  it('a statement (of an operation with an author, or of none) whose connection breaks while it runs fails; the process stays up', async () => {
    for (const author of [{ environmentId: 1, userHashId: 'someone' }, null]) {
      const statement = () => db.query('WITH s AS (SELECT pg_sleep(5)) SELECT 1 FROM s');
      const running = (author ? asAuthor(author, statement) : statement()).then(
        () => null,
        (err: Error) => err,
      );
      // the statement runs on a checked-out connection when its server goes away
      await new Promise((r) => setTimeout(r, 500));
      pg.kill();
      expect(await running).toBeInstanceOf(Error);
      pg.start();
      await until(
        () =>
          db.query('SELECT 1').then(
            () => true,
            () => false,
          ),
        (ok) => ok,
        'PostgreSQL answering again',
        30_000,
      );
    }
  }, 120_000);
});

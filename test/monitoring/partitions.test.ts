import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { recreateDatabase, type Queryable } from '../../src/app/db.ts';
import { createLogger } from '../../src/app/logger.ts';
import { ensurePartitions, weekPartitions } from '../../src/monitoring/partitions/weeks.ts';
import { ingestReportsJson } from '../../src/monitoring/reports/store.ts';
import { dropExpiredPartitions, pruneExpired, startRetention } from '../../src/monitoring/retention/prune.ts';
import { startTestApi, testConfig, type TestApi } from '../helpers.ts';
import { startPrivatePostgres } from '../support/private-postgres.ts';
import { until } from '../support/until.ts';
import { pinWithHistory } from './fixtures.ts';

// Reports, measurements and activities partitioned by week: partitions made ahead and on demand, dropped when
// every environment's data in them expired. A database of its own: which partitions go depends on every
// environment there.

const DAY = 24 * 3600 * 1000;
let api: TestApi;

beforeAll(async () => {
  const url = await recreateDatabase(process.env.TEST_ADMIN_DATABASE_URL as string, `${process.env.TEST_DATABASE_NAME}_partitions`);
  api = await startTestApi(await createContext(testConfig({ DATABASE_URL: url })));
});
afterAll(async () => {
  await api?.close();
});

/** The partition a row of `table` lives in. */
const partitionOf = async (db: Queryable, table: string, hashId: string) =>
  (await db.query<{ p: string }>(`SELECT tableoid::regclass::text AS p FROM ${table} WHERE hash_id = $1`, [hashId])).rows.map((r) => r.p);

const mondayOf = (at: Date) => {
  const d = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()));
  d.setUTCDate(d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
  return d.toISOString().slice(0, 10).replaceAll('-', '');
};

describe('week partitions', () => {
  it('exist for this week and the next four for reports, measurements and activities', async () => {
    await ensurePartitions(api.ctx.db);
    for (const table of ['condition_report', 'measurement', 'supplier_activity']) {
      const names = (await weekPartitions(api.ctx.db, table)).map((p) => p.name);
      for (let i = 0; i <= 4; i++) expect(names).toContain(`${table}_w${mondayOf(new Date(Date.now() + i * 7 * DAY))}`);
    }
  });

  it('take a row whose week has no partition into the default partition, and move it into its week once made', async () => {
    const { db } = api.ctx;
    const c = await api.login('monitoring');
    const {
      rows: [env],
    } = await db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId]);
    const ahead = new Date(Date.now() + 10 * 7 * DAY);
    const farAhead = new Date(Date.now() + 5 * 365 * DAY);
    for (const [hashId, at] of [
      ['ahead', ahead],
      ['far-ahead', farAhead],
    ] as const) {
      await db.query('INSERT INTO condition_report (hash_id, environment_id, generated_at) VALUES ($1, $2, $3)', [hashId, env.id, at]);
    }
    expect(await partitionOf(db, 'condition_report', 'ahead')).toEqual(['condition_report_default']);
    const made = await ensurePartitions(db);
    expect(made).toContain(`condition_report_w${mondayOf(ahead)}`);
    expect(await partitionOf(db, 'condition_report', 'ahead')).toEqual([`condition_report_w${mondayOf(ahead)}`]);
    // a clock years ahead makes no partition: the row waits in the default one, still read and pruned there
    expect(await partitionOf(db, 'condition_report', 'far-ahead')).toEqual(['condition_report_default']);
  });

  it('leave the default partition vacuumed and the weeks rows moved into analysed: no dead tuples walked, no planner defaults', async () => {
    const { db } = api.ctx;
    const c = await api.login('monitoring');
    const {
      rows: [env],
    } = await db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId]);
    // rows of a week 20 weeks ahead (no partition yet) land in the default partition, as an import of old data does
    const week = new Date(Date.now() + 20 * 7 * DAY);
    const name = `condition_report_w${mondayOf(week)}`;
    await db.query(
      `INSERT INTO condition_report (hash_id, environment_id, generated_at) SELECT 'moved' || i, $1, $2::timestamptz + make_interval(secs => i) FROM generate_series(1, 500) i`,
      [env.id, week],
    );
    const statistics = async (table: string) =>
      (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stats WHERE schemaname = current_schema() AND tablename = $1', [table])).rows[0].n;
    const vacuumed = async (table: string) =>
      (await db.query<{ at: Date | null }>('SELECT last_vacuum AS at FROM pg_stat_user_tables WHERE relname = $1', [table])).rows[0]?.at ?? null;
    const vacuumedBefore = await vacuumed('condition_report_default');
    expect(await ensurePartitions(db)).toContain(name);
    expect(await partitionOf(db, 'condition_report', 'moved1')).toEqual([name]);
    // the week it moved into has the planner's statistics, and the default partition was vacuumed after the move
    expect(await statistics(name)).toBeGreaterThan(0);
    const vacuumedAfter = await vacuumed('condition_report_default');
    expect(vacuumedAfter).not.toBeNull();
    expect(vacuumedAfter!.getTime()).toBeGreaterThan(vacuumedBefore?.getTime() ?? 0);
  });

  it('store a report retried with another time once: no unique index spans the weeks, the hashId is looked for in the last week', async () => {
    const { db } = api.ctx;
    const c = await api.login('monitoring');
    const report = (generatedAt: Date) =>
      JSON.stringify({
        reports: [
          {
            hashId: 'retried',
            environmentHashId: c.environmentHashId,
            deviceHashId: 'none',
            reportTypeHashId: 'none',
            generatedAt: generatedAt.toISOString(),
            fields: {},
            payload: '{}',
            linkId: null,
            measurements: [],
          },
        ],
      });
    // supplier code that takes the report's time from its clock: the retry's is later, and may fall in the next week
    await ingestReportsJson(db, report(new Date(Date.now() - 6 * DAY)));
    await ingestReportsJson(db, report(new Date()));
    await ingestReportsJson(db, report(new Date(Date.now() - 6 * DAY)));
    expect(await partitionOf(db, 'condition_report', 'retried')).toHaveLength(1);
  });

  it("are dropped once every environment's data in them expired; a shorter expiration deletes rows on time, other environments' rows stay", async () => {
    const { db } = api.ctx;
    const short = await api.login('monitoring', ['READ', 'STATIC', 'ENVIRONMENT_ADMIN']);
    const long = await api.login('monitoring', ['READ', 'STATIC', 'ENVIRONMENT_ADMIN']);
    expect((await short.request('PUT', '/environment/', { measurementsExpirationDays: 30 })).status).toBe(200);
    // every environment of this database: the longest expiration is 400 days
    await db.query(`UPDATE environment SET settings = settings || '{"measurementsExpirationDays": 400}' WHERE hash_id <> $1`, [short.environmentHashId]);
    const a = await pinWithHistory(db, short, [10, 40]);
    const b = await pinWithHistory(db, long, [300, 500]);
    await ensurePartitions(db);
    const weekOf = (age: number) => `measurement_w${mondayOf(new Date(Date.now() - age * DAY))}`;
    const parts = async () =>
      (
        await db.query<{ name: string }>(
          "SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'measurement'::regclass",
        )
      ).rows.map((r) => r.name);
    expect(await parts()).toEqual(expect.arrayContaining([weekOf(10), weekOf(40), weekOf(300), weekOf(500)]));

    const dropped = await dropExpiredPartitions(db);
    expect(dropped).toEqual(expect.arrayContaining([weekOf(500), `condition_report_w${mondayOf(new Date(Date.now() - 500 * DAY))}`]));
    expect(dropped).not.toContain(weekOf(300));
    const after = await parts();
    expect(after).not.toContain(weekOf(500));
    expect(after).toEqual(expect.arrayContaining([weekOf(10), weekOf(40), weekOf(300)]));

    // the 40-day-old measurement's partition stays (400 days for the others): its row is deleted
    expect((await pruneExpired(db)).measurements).toBe(1);
    const ages = async (pin: string) =>
      (
        await db.query<{ s: number }>('SELECT m.significand AS s FROM measurement m JOIN pin p ON p.id = m.pin_id WHERE p.hash_id = $1 ORDER BY 1', [pin])
      ).rows.map((r) => r.s);
    expect(await ages(a)).toEqual([10]);
    expect(await ages(b)).toEqual([300]);
  });

  it('are kept by a loop that logs a PostgreSQL outage once when it begins and once when it ends', async () => {
    const pg = await startPrivatePostgres();
    const lines: { level: number; msg: string }[] = [];
    const log = createLogger('info', {
      write: (line: string) => {
        lines.push(JSON.parse(line) as { level: number; msg: string });
      },
    });
    const ctx: AppContext = await createContext(testConfig({ DATABASE_URL: pg.url }), log);
    const loop = startRetention(ctx, 200, 0);
    try {
      await until(
        () => weekPartitions(ctx.db, 'measurement'),
        (p) => p.length >= 5,
        "the loop to make the coming weeks' partitions",
      );
      pg.kill();
      await new Promise((r) => setTimeout(r, 1500));
      pg.start();
      await until(
        async () => lines.map((l) => l.msg),
        (msgs) => msgs.some((m) => /partitions and retention run again/.test(m)),
        'the loop to run again',
        30_000,
      );
      expect(lines.filter((l) => /partitions and retention could not run/.test(l.msg))).toHaveLength(1);
      expect(lines.filter((l) => /partitions and retention run again/.test(l.msg))).toHaveLength(1);
    } finally {
      loop.stop();
      await ctx.db.close().catch(() => undefined);
      ctx.redis.disconnect();
      pg.destroy();
    }
  }, 90_000);
});

/**
 * Nothing a device was answered 200 or 202 for is lost while a store is away: PostgreSQL killed (as in a
 * crash) for 10 s under load, and the monitoring core's process killed for 10 s while a gateway and worker
 * process keep taking reports, and a worker process killed mid-job. Afterwards every accepted report is stored,
 * and stored once.
 */
import type { ChildProcess } from 'node:child_process';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import { openDb, type Queryable } from '../../src/app/db.ts';
import { startService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { liveOutcome, moreAnswered } from '../support/load-progress.ts';
import { startPrivatePostgres, type PrivatePostgres } from '../support/private-postgres.ts';
import { connectivityClient } from '../support/provision.ts';
import { expectEachStoredOnce, reportingDevices, reportUntil, storedPayloads, type LoadOutcome } from '../support/report-world.ts';
import { startServiceProcess } from '../support/service-process.ts';
import { until } from '../support/until.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const children: ChildProcess[] = [];
let pg: PrivatePostgres | null = null;
const extraPostgres: PrivatePostgres[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  pg?.destroy();
  for (const p of extraPostgres) p.destroy();
});

/**
 * Devices of a new supplier whose handler takes 200 ms report over HTTPS until ten were answered 200 before this resolves,
 * so a process killed then is always in the middle of a batch; `live` fills as answers come, `stop()` ends the load and
 * gives what was accepted.
 */
async function slowLoadRunning(db: Queryable, base: string, httpsPort: number) {
  const api = await connectivityClient(db, base);
  const devices = await reportingDevices(api, 2, 200);
  let stopLoad!: () => void;
  const live = liveOutcome();
  const load = reportUntil(
    httpsPort,
    devices,
    new Promise<void>((r) => {
      stopLoad = r;
    }),
    live,
  );
  await moreAnswered(live, 200, 10);
  return {
    api,
    live,
    stop: async (): Promise<LoadOutcome> => {
      stopLoad();
      return load;
    },
  };
}

/** The service's log lines (JSON) up to and including the first whose message matches `until`. */
function linesUntil(stdout: string, until: RegExp): { msg: string; level: number }[] {
  const lines = stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { msg: string; level: number });
  const end = lines.findIndex((l) => until.test(l.msg));
  return end < 0 ? lines : lines.slice(0, end + 1);
}

describe('a store outage under load', () => {
  it('PostgreSQL killed for 10 s: every report answered 200 or 202 is stored, once', async () => {
    pg = await startPrivatePostgres();
    const ctx = await testContext({ DATABASE_URL: pg.url, GATEWAY_WAIT_MS: '1000' });
    const service = await startService(ctx, ['all']);
    try {
      const api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
      const devices = await reportingDevices(api, 4);
      let stop!: () => void;
      const live = liveOutcome();
      const load = reportUntil(
        service.https!.port(),
        devices,
        new Promise<void>((r) => {
          stop = r;
        }),
        live,
      );
      await moreAnswered(live, 200); // stored before
      pg.kill();
      // away for 10 s, and long enough for a report to be answered 202 (queued while PostgreSQL is away)
      await Promise.all([sleep(10_000), moreAnswered(live, 202)]);
      pg.start();
      await moreAnswered(live, 200); // and stored after
      stop();
      const outcome = await load;
      // reports were accepted before, during (202: queued in Redis, answered while PostgreSQL was away) and after
      expect(outcome.byStatus.get(202) ?? 0).toBeGreaterThan(0);
      expect(outcome.byStatus.get(200) ?? 0).toBeGreaterThan(0);
      expectEachStoredOnce(outcome, await storedPayloads(ctx.db, api.environmentHashId, outcome));
    } finally {
      await service.stop();
      await closeContext(ctx);
    }
  }, 180_000);

  it('PostgreSQL killed for 5 s under a service process: the outage reads as one warn line per kind, not one per device or connection', async () => {
    const own = await startPrivatePostgres();
    extraPostgres.push(own);
    const service = await startServiceProcess({ DATABASE_URL: own.url, GATEWAY_WAIT_MS: '1000', LOG_LEVEL: 'info' }, ['all'], { children });
    const db = await openDb({ databaseUrl: own.url, dataDir: '/tmp', migrate: false });
    try {
      const api = await connectivityClient(db, service.base);
      const devices = await reportingDevices(api, 12);
      let stop!: () => void;
      const live = liveOutcome();
      const load = reportUntil(
        service.httpsPort,
        devices,
        new Promise<void>((r) => {
          stop = r;
        }),
        live,
      );
      await moreAnswered(live, 200);
      own.kill();
      await Promise.all([sleep(5000), moreAnswered(live, 202)]);
      own.start();
      await moreAnswered(live, 200, 12); // a report of each device, say, once PostgreSQL is back
      stop();
      const outcome = await load;
      expect(outcome.byStatus.get(202) ?? 0).toBeGreaterThan(0);
      expectEachStoredOnce(outcome, await storedPayloads(db, api.environmentHashId, outcome));
      const lines = service
        .stdout()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { msg: string; level: number });
      const warnings = lines.filter((l) => l.level >= 40);
      // each kind of failure at most once (a kind may not be hit at all, depending on where the kill lands)
      const kinds = new Map<string, number>();
      for (const l of warnings) kinds.set(l.msg, (kinds.get(l.msg) ?? 0) + 1);
      expect(
        [...kinds].filter(([, n]) => n > 1),
        JSON.stringify([...kinds]),
      ).toEqual([]);
      expect(warnings.filter((l) => /lastOnlineAt/.test(l.msg)).length).toBeLessThanOrEqual(1);
    } finally {
      await db.close();
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }, 180_000);

  it('the monitoring core (api process) killed for 10 s: the gateway and worker process loses nothing it accepted', async () => {
    const DATABASE_URL = process.env.DATABASE_URL!;
    const QUEUE_NAME = `outage-${process.pid}-${Date.now()}`;
    let core = await startServiceProcess({ DATABASE_URL, QUEUE_NAME }, ['api'], { children });
    const edge = await startServiceProcess(
      { DATABASE_URL, QUEUE_NAME, MONITORING_CORE_URL: core.base, GATEWAY_WAIT_MS: '1000', LOG_LEVEL: 'info' },
      ['gateway,worker'],
      { children },
    );
    const db = await openDb({ databaseUrl: DATABASE_URL, dataDir: '/tmp', migrate: false });
    try {
      const api = await connectivityClient(db, core.base);
      const devices = await reportingDevices(api, 4);
      let stop!: () => void;
      const live = liveOutcome();
      const load = reportUntil(
        edge.httpsPort,
        devices,
        new Promise<void>((r) => {
          stop = r;
        }),
        live,
      );
      await moreAnswered(live, 200);
      const killedAt = Date.now();
      core.child.kill('SIGKILL');
      await core.exited;
      // the worker says it cannot do its work
      const reason = async () => {
        const r = await fetch(`${edge.base}/health`);
        return `${r.status} ${((await r.json()) as { reason?: string }).reason}`;
      };
      await expect.poll(reason, { timeout: 30_000, interval: 200 }).toMatch(/^503 .*monitoring core unreachable/);
      // away 10 s, and long enough for reports to be answered 202 (queued while the core does not answer)
      await Promise.all([sleep(Math.max(0, killedAt + 10_000 - Date.now())), moreAnswered(live, 202)]);
      core = await startServiceProcess({ DATABASE_URL, QUEUE_NAME, API_PORT: String(core.apiPort) }, ['api'], { children });
      await moreAnswered(live, 200);
      stop();
      const outcome = await load;
      expect(outcome.byStatus.get(202) ?? 0).toBeGreaterThan(0);
      expectEachStoredOnce(outcome, await storedPayloads(db, api.environmentHashId, outcome));
      // the worker's log: one line for the outage and one when the core was back, not one per job: every job of the
      // outage was tried before the core came back, so the line saying it is back closes what is counted
      await expect.poll(() => edge.stdout(), { timeout: 30_000 }).toMatch(/the monitoring core answers again/);
      const lines = linesUntil(edge.stdout(), /the monitoring core answers again/);
      expect(lines.filter((l) => /monitoring core .* does not answer/.test(l.msg))).toHaveLength(1);
    } finally {
      await db.close();
      for (const p of [core, edge]) p.child.kill('SIGTERM');
      await Promise.all([core.exited, edge.exited]);
    }
  }, 180_000);

  it('a worker process killed under load: its jobs go to the next worker, every report answered 200 or 202 is stored, once', async () => {
    const DATABASE_URL = process.env.DATABASE_URL!;
    const QUEUE_NAME = `killed-${process.pid}-${Date.now()}`;
    const edge = await startServiceProcess({ DATABASE_URL, QUEUE_NAME, GATEWAY_WAIT_MS: '1000' }, ['api,gateway'], { children });
    const worker = () => startServiceProcess({ DATABASE_URL, QUEUE_NAME, MONITORING_CORE_URL: edge.base }, ['worker'], { children });
    const first = await worker();
    const db = await openDb({ databaseUrl: DATABASE_URL, dataDir: '/tmp', migrate: false });
    try {
      const { api, live, stop } = await slowLoadRunning(db, edge.base, edge.httpsPort);
      // killed as by the OOM killer: no shutdown, its active jobs keep their locks until they expire
      first.child.kill('SIGKILL');
      await first.exited;
      const second = await worker();
      await moreAnswered(live, 200, 10); // the next worker takes jobs
      const outcome = await stop();
      expect(outcome.accepted.length).toBeGreaterThan(0);
      // a killed worker's job comes back once its lock has expired and the stalled-job check has seen it (≤ 60 s)
      expectEachStoredOnce(outcome, await storedPayloads(db, api.environmentHashId, outcome, 90_000));
      second.child.kill('SIGTERM');
      await second.exited;
    } finally {
      await db.close();
      edge.child.kill('SIGTERM');
      await edge.exited;
    }
  }, 150_000);

  it('a gateway-and-worker process killed under load: the batches its worker took beside the gateway run elsewhere after their claim, every report answered 200 or 202 is stored, once', async () => {
    const DATABASE_URL = process.env.DATABASE_URL!;
    const QUEUE_NAME = `killed-all-${process.pid}-${Date.now()}`;
    const env = { DATABASE_URL, QUEUE_NAME, GATEWAY_WAIT_MS: '1000', LOCAL_HANDOFF_CLAIM_MS: '3000' };
    const first = await startServiceProcess(env, ['all'], { children });
    const db = await openDb({ databaseUrl: DATABASE_URL, dataDir: '/tmp', migrate: false });
    const queue = new Queue(QUEUE_NAME, { connection: { url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' } as never });
    try {
      const { api, stop } = await slowLoadRunning(db, first.base, first.httpsPort);
      // killed while its worker runs a batch it has just taken (the handler is busy for 200 ms): a kill in the few
      // milliseconds between one batch's end and the next one's start would find nothing taken to lose
      const before = new Set((await queue.getDelayed()).map((j) => j.id));
      await until(
        () => queue.getDelayed(),
        (jobs) => jobs.some((j) => !before.has(j.id)),
        'a batch taken by the worker beside the gateway',
        5000,
        5,
      );
      first.child.kill('SIGKILL');
      await first.exited;
      const outcome = await stop();
      // what its worker took locally is still queued (delayed by the claim), not lost with the process
      const counts = await queue.getJobCounts('delayed', 'active', 'waiting');
      expect(counts.delayed).toBeGreaterThan(0);
      expect(counts.active).toBe(0);
      const second = await startServiceProcess(env, ['all'], { children });
      expect(outcome.accepted.length).toBeGreaterThan(0);
      expectEachStoredOnce(outcome, await storedPayloads(db, api.environmentHashId, outcome, 60_000));
      second.child.kill('SIGTERM');
      await second.exited;
    } finally {
      await queue.close();
      await db.close();
    }
  }, 150_000);
});

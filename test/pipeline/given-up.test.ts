/**
 * A device request the store keeps refusing fails alone and visibly: the other requests of its queue batch
 * are stored, it is failed for good after its attempts (a failed activity saying so, an error line, a metric)
 * and `npm run admin -- retry-failed` runs it again.
 */
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { Writable } from 'node:stream';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext, createContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { createLogger } from '../../src/app/logger.ts';
import { metricsRegistry } from '../../src/app/metrics.ts';
import { webRequest } from '../../src/sandbox/web-request.ts';
import type { DeviceBatchJob, DeviceRequestJob } from '../../src/connectivity/device-jobs.ts';
import { JOB_NAME, JOB_OPTIONS } from '../../src/pipeline/queue.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testConfig } from '../helpers.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';
import { reportingDevices, type ReportingDevice } from '../support/report-world.ts';
import { MAIN } from '../support/service-process.ts';

const marker = `poison-${randomBytes(4).toString('hex')}`;
const trigger = `refuse_${marker.replace('-', '_')}`;
const logLines: { level: number; msg: string; jobId?: string }[] = [];
let ctx: AppContext;
let service: RunningService;
let api: RestClient;
let device: ReportingDevice;
let queue: Queue<DeviceBatchJob, void>;

beforeAll(async () => {
  const config = testConfig({ LOG_LEVEL: 'warn' });
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(line));
      done();
    },
  });
  ctx = await createContext(config, createLogger('warn', sink));
  // the store refuses reports carrying the marker, as it refuses a value it cannot take: every time
  await ctx.db.query(`CREATE FUNCTION ${trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.payload LIKE '%${marker}%' THEN RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'check_violation'; END IF; RETURN NEW; END $$`);
  await ctx.db.query(`CREATE TRIGGER ${trigger} BEFORE INSERT ON condition_report FOR EACH ROW EXECUTE FUNCTION ${trigger}()`);
  service = await startService(ctx, ['all']);
  api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
  [device] = await reportingDevices(api, 1);
  queue = new Queue(config.queueName, { connection: ctx.redis });
});

afterAll(async () => {
  await ctx.db.query(`DROP TRIGGER IF EXISTS ${trigger} ON condition_report`).catch(() => undefined);
  await ctx.db.query(`DROP FUNCTION IF EXISTS ${trigger}()`).catch(() => undefined);
  await service?.stop();
  await closeContext(ctx);
});

const request = (payload: Record<string, string | number>): DeviceRequestJob => ({
  kind: 'incomingRequest',
  deviceHashId: device.hashId,
  environmentHashId: api.environmentHashId,
  receivedAt: new Date().toISOString(),
  webRequest: webRequest({
    url: { protocol: 'https', host: 't', path: '/report', query: {} },
    method: 'POST',
    headers: {},
    body: { type: 'json', data: payload },
    ip: '127.0.0.1',
    pskIdentity: device.identity,
  }),
});

async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 30_000): Promise<T> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
    const v = await probe();
    if (v) return v;
  }
  throw new Error(`timed out waiting for ${what}`);
}

const storedPayloads = async () =>
  (
    await ctx.db.query<{ payload: string }>('SELECT r.payload FROM condition_report r JOIN device d ON d.id = r.device_id WHERE d.hash_id = $1', [
      device.hashId,
    ])
  ).rows.map((r) => r.payload);
const failedForGood = async () => Number((await metricsRegistry.getSingleMetric('gridgate_queue_jobs_failed_total')!.get()).values[0]?.value ?? 0);

describe('a device request that fails every time', () => {
  it('fails alone: its batch neighbour is stored; it is failed for good, visibly; retry-failed runs it again', async () => {
    const before = await failedForGood();
    const good = { d: 0, seq: 1 };
    const bad = { d: 0, seq: 2, note: marker };
    const jobId = `batch-${randomBytes(6).toString('hex')}`;
    await queue.add(
      JOB_NAME,
      {
        gatewayId: '',
        items: [
          { itemId: 'good', job: request(good) },
          { itemId: 'bad', job: request(bad) },
        ],
      },
      { ...JOB_OPTIONS, jobId },
    );

    // the poisoned item was split off into a job of its own, which ends in the failed set
    const failed = await until('the failed job', async () => (await queue.getFailed()).find((j) => j?.id === `${jobId}-1`));
    expect(failed.data.items.map((i) => i.itemId)).toEqual(['bad']);
    expect(failed.attemptsMade).toBe(JOB_OPTIONS.attempts);
    expect(await storedPayloads()).toEqual([JSON.stringify(good)]);
    expect(await failedForGood()).toBe(before + 1);
    // one error line that says it gave up (the earlier attempts are warnings)
    await until('the error line', async () => logLines.some((l) => l.level === 50 && l.jobId === failed.id));
    expect(logLines.find((l) => l.level === 50 && l.jobId === failed.id)!.msg).toMatch(/failed for good: gave up/);
    // the activity log shows the request as failed, and why
    const activities = await until(
      'the failed activity',
      async () =>
        (
          await ctx.db.query<{ log: { type: string; message: string }[]; trigger_data: { request: { body: { data: unknown } } } }>(
            `SELECT a.log, a.trigger_data FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1 AND a.failed`,
            [device.hashId],
          )
        ).rows[0],
    );
    expect(activities.log[0]).toMatchObject({ type: 'error', message: expect.stringMatching(/gave up after repeated failures \(refused by the test\)/) });
    expect(activities.trigger_data.request.body.data).toEqual(bad);

    // the operator removes the cause and runs the failed jobs again with the admin CLI
    await ctx.db.query(`DROP TRIGGER ${trigger} ON condition_report`);
    const out = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'admin', 'retry-failed'], {
      env: {
        PATH: process.env.PATH,
        REDIS_URL: ctx.config.redisUrl,
        QUEUE_NAME: ctx.config.queueName,
        DATA_DIR: ctx.config.dataDir,
        SECRET_KEY: '11'.repeat(32),
      },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(out.status, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual({ queue: ctx.config.queueName, retried: 1 });
    await until('the retried report', async () => (await storedPayloads()).length === 2);
    expect((await storedPayloads()).sort()).toEqual([JSON.stringify(good), JSON.stringify(bad)].sort());
    expect(await queue.getFailedCount()).toBe(0);
  }, 60_000);
});

import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { AppContext } from '../app/context.ts';
import { createMailer } from '../mail/mailer.ts';
import { gaugeFrom, metrics } from '../app/metrics.ts';
import { bullmqErrorLogger, createRedis, WORKER_RUN_RETRY_MS } from '../app/redis.ts';
import { insertActivities, type ActivityRow } from '../connectivity/activities/store.ts';
import { publishStoredActivities } from '../connectivity/live/notice.ts';
import { counterRecorder, countDeviceEvent } from '../connectivity/counters/recorder.ts';
import { startCounterFlusher } from '../connectivity/counters/store.ts';
import { setNextReportBefore, updateDeviceFields } from '../connectivity/devices/store.ts';
import { commandPipeline } from './commands.ts';
import { offerFirmware } from '../connectivity/firmware/offer.ts';
import { failuresOf, supplierAlerts } from '../notifications/supplier-alerts.ts';
import { sandboxFromConfig } from '../sandbox/runner.ts';
import type { ExecCall } from '../sandbox/types.ts';
import { Batcher } from '../app/batcher.ts';
import { KeyedSlots } from './slots.ts';
import { DeviceContextLoader, type DeviceRecord } from './device-context.ts';
import type { DeviceBatchJob, DeviceJobResult } from '../connectivity/device-jobs.ts';
import { isTransient, transientDelayMs } from './failures.ts';
import { recordGivenUp } from './given-up.ts';
import { OutageLog } from '../app/outage-log.ts';
import { answerChannel, deliverLocally, DeviceEventQueue, deviceQueueShard, setLocalTaker, type PublishedAnswer } from './queue.ts';
import { MonitoringCoreClient } from './monitoring-client.ts';
import { CoreWatch } from './core-watch.ts';
import { LastOnlineWriter } from '../connectivity/devices/last-online.ts';
import { LocalRuns } from './local-runs.ts';
import { FetchWatch } from './fetch-watch.ts';
import { OutboundClient } from './outbound.ts';
import { processDeviceJob, reportingCounterTime, type ProcessDeps } from './process-device-job.ts';
import { thresholdEvaluation, ThresholdEvaluator } from '../monitoring/thresholds/evaluate.ts';
import { startConnectivityCheck } from '../monitoring/issues/connectivity-check.ts';

export interface DeviceWorker {
  /** resolves once the worker takes jobs: its queue connections are up and its monitoring core answers */
  ready(): Promise<void>;
  /** why the worker cannot do its work now (its monitoring core does not answer), or null */
  unhealthy(): string | null;
  close(): Promise<void>;
}

const WORKER_FETCHERS = 2;
/** A job whose worker died this many times while running it is failed (a job that kills its worker); before, it goes back to the queue. */
const MAX_STALLED_COUNT = 20;
/** Jobs per fetcher that may wait for the disk flush (or for their supplier's slots) beyond WORKER_CONCURRENCY / fetchers. */
const FLUSH_WAITING_JOBS = 64;
/** Requests of the gateway beside it a worker runs locally at once, at least (else 2 x WORKER_CONCURRENCY); more go through the queue. */
const LOCAL_ROOM_MIN = 256;

/**
 * The worker role: takes device jobs from the queue and runs the suppliers' code on them.
 * `localMonitoringCore`: the monitoring core runs in this process, so reports go to its store
 * directly rather than over HTTP to `monitoringCoreUrl`.
 */
export function startDeviceWorker(ctx: AppContext, monitoringCoreUrl: string, opts: { localMonitoringCore?: boolean } = {}): DeviceWorker {
  const sandbox = sandboxFromConfig(ctx.config, ctx.log);
  gaugeFrom('gridgate_sandbox_isolate_calls', 'Calls into isolates since start (single runs and batches): fewer than runs when runs share a call', [], () => [
    [{}, sandbox.isolateCalls],
  ]);
  const loader = new DeviceContextLoader(ctx.db);
  // links made elsewhere reach this worker's device cache at once (the change bus's 'devices'); without Redis the ttl still bounds them
  const watched = loader.watch(ctx).catch((err: Error) => ctx.log.warn({ err: err.message }, 'device changes could not be subscribed'));
  const mailer = createMailer(ctx);
  const events = new DeviceEventQueue(ctx);
  const alerts = supplierAlerts(ctx);
  const commands = commandPipeline(ctx, mailer, events);
  // a failed first load leaves every device looked up (the hint's default), as before it existed
  const hintStarted = commands.start().catch((err: Error) => ctx.log.warn({ err: err.message }, 'pending commands hint could not be loaded'));
  // reports, activities and lastOnlineAt commit without waiting for the disk; a job completes after ctx.db.flushed()
  // each stored batch is checked against the pins' thresholds (src/monitoring/thresholds/evaluate.ts)
  const thresholds = ctx.config.thresholdEvaluation ? new ThresholdEvaluator(ctx.db.deferred, ctx.log, ctx.thresholds) : null;
  const monitoring = new MonitoringCoreClient(opts.localMonitoringCore ? { db: ctx.db.deferred } : { url: monitoringCoreUrl, token: ctx.keys.internalToken }, {
    afterStore: thresholds ? thresholdEvaluation(thresholds, ctx.log) : undefined,
  });
  const connectivityCheck = startConnectivityCheck(ctx);
  const outbound = OutboundClient.fromConfig(ctx.config);
  // a row the store refuses fails its own job, not the others written in the same statement
  const permanent = (err: unknown) => !isTransient(err);
  // once stored, each batch's activities are announced to the API processes serving live logs (src/connectivity/live/): not awaited
  const activities = new Batcher<ActivityRow>(
    async (rows) => {
      await insertActivities(ctx.db.deferred, rows, ctx.config.supplierCode.maxActivityBytes);
      void publishStoredActivities(ctx, rows);
    },
    { maxItems: 250, maxDelayMs: 2, maxConcurrentFlushes: 4, splitOn: permanent },
  );
  const lastOnline = new LastOnlineWriter(ctx.db.deferred, ctx.log);
  const deps: ProcessDeps = {
    sandbox,
    loader,
    pushReport: (r) => monitoring.push(r),
    writeActivity: (row) => {
      // failed runs of supplier code are counted for their subscribers' alerts (in memory; one statement a second)
      if (row.failed || row.activities.length > 0) alerts.record(failuresOf(row));
      return activities.add(row);
    },
    touchDevice: (id, at) => lastOnline.touch(id, at),
    applyDeviceCall: async (device, call, at, callHashId) => {
      if (commands.handles(call)) return commands.apply(device, call, at, callHashId);
      const triggerData = await applyDeviceCall(ctx, loader, device, call, at);
      if (call.name === 'expectNextReportBefore') await events.expectReport(device, call.args.before, at);
      return triggerData;
    },
    scheduledCommands: (deviceId) => commands.scheduledCommands(deviceId),
    commandOfEvent: (hashId) => commands.commandOfEvent(hashId),
    reportStillLate: (deviceId, before, setAt) => loader.reportStillLate(deviceId, before, setAt),
    offerFirmware: (device, firmwareHashId) =>
      offerFirmware(
        ctx.db,
        { environmentId: device.environmentId, deviceTypeId: device.deviceType.id, deviceTypeHashId: device.deviceType.hashId },
        firmwareHashId,
      ),
    sendRequest: (args, idempotencyKey) => outbound.send(args, idempotencyKey),
    count: (deviceHashId, key, at) => countDeviceEvent(ctx, deviceHashId, key, at),
  };
  // connectivity counters: Redis hourly hashes copied to PostgreSQL (see docs/decisions.md)
  const counterFlusher = startCounterFlusher(ctx);

  // A BullMQ worker fetches its jobs one Redis round trip at a time; several workers on their
  // own connections fetch in parallel, so the queue never waits on one fetch loop.
  const fetchers = Math.max(1, Math.min(WORKER_FETCHERS, ctx.config.workerConcurrency));
  // answers go back to the gateway holding the request as soon as each is stored: in memory when that gateway
  // runs in this process, else a Redis publish per gateway and tick
  const answers = new Batcher<{ gatewayId: string; answer: PublishedAnswer }>(
    async (items) => {
      const byGateway = new Map<string, PublishedAnswer[]>();
      for (const { gatewayId, answer } of items) byGateway.set(gatewayId, [...(byGateway.get(gatewayId) ?? []), answer]);
      await Promise.all([...byGateway].map(([gatewayId, list]) => ctx.redis.publish(answerChannel(ctx.config, gatewayId), JSON.stringify(list))));
    },
    { maxItems: 200, maxDelayMs: 0, maxConcurrentFlushes: 4 },
  );

  // WORKER_CONCURRENCY bounds the device requests of one supplier (environment) running at once: a supplier whose code
  // is slow or whose devices flood waits for its own slots, and another supplier's requests start at once. An item that
  // only waits for its store writes, and a batch that only waits for the disk flush, hold none: slow writes or a slow
  // flush (100-200 ms now and then on a VM) start no queue of supplier code behind them.
  const running = new KeyedSlots(ctx.config.workerConcurrency);
  const processBatch = async (jobId: string, batch: DeviceBatchJob) => {
    await processItems(jobId, batch);
    // the devices have their answers; the job is done (and leaves the queue) once what it stored is on disk
    await ctx.db.flushed();
  };
  const answer = (gatewayId: string, itemId: string, result: DeviceJobResult) => {
    // an answer nobody waits for any more (the gateway answered 202 or restarted) is simply dropped; events have no gateway
    if (gatewayId && !deliverLocally(gatewayId, [{ itemId, result }])) {
      answers.add({ gatewayId, answer: { itemId, result } }).catch(() => undefined);
    }
  };
  /**
   * Runs every item of the batch. A store that is away fails the batch (it is run again later, whole: what was
   * stored is stored once). An item failing for any other reason does not take the others with it: they are
   * answered and stored, and the failing item is queued again on its own, to succeed or fail alone.
   */
  const processItems = async (jobId: string, batch: DeviceBatchJob) => {
    const outcomes = await Promise.allSettled(
      batch.items.map(async ({ itemId, job, idBase }, index) => {
        const release = await running.acquire(job.environmentHashId);
        try {
          // the slot is given back once only the item's store writes remain: waiting for PostgreSQL runs no supplier code
          answer(batch.gatewayId, itemId, await processDeviceJob(deps, idBase ?? `${jobId}:${index}`, job, release));
        } finally {
          release();
        }
      }),
    );
    const failed = outcomes.flatMap((o, index) => (o.status === 'rejected' ? [{ index, err: o.reason as unknown }] : []));
    if (failed.length === 0) return;
    const unavailable = failed.find((f) => isTransient(f.err));
    if (unavailable || batch.items.length === 1) throw (unavailable ?? failed[0]).err;
    await events.requeueAlone(
      jobId,
      batch.gatewayId,
      failed.map(({ index }) => ({ index, item: batch.items[index] })),
    );
    ctx.log.warn(
      { jobId, items: failed.map((f) => ({ index: f.index, err: (f.err as Error).message })) },
      'device requests of a batch failed; each is queued again on its own',
    );
  };

  const outage = new OutageLog(ctx.log, 'a store is unavailable: device jobs wait and run again when it is back', 'stores available again: device jobs run');
  const gaveUp = (job: Job<DeviceBatchJob, void>, err: Error) => {
    metrics.jobAttempts.inc({ outcome: 'failed' });
    metrics.jobsFailed.inc();
    ctx.log.error(
      { jobId: job.id, attempts: job.attemptsMade, items: job.data.items.length, err: err.message },
      'device job failed for good: gave up; it stays in the failed set (npm run admin -- retry-failed runs it again)',
    );
    void recordGivenUp(ctx, loader, job.id as string, job.data, err, answer);
  };
  const processor = async (job: Job<DeviceBatchJob, void>, token?: string) => {
    try {
      await processBatch(job.id as string, job.data);
    } catch (err) {
      if (!isTransient(err) || !token) {
        // the last attempt: failed for good (BullMQ moves it to the failed set)
        if (job.attemptsMade + 1 >= (job.opts.attempts ?? 1)) throw new UnrecoverableError((err as Error).message);
        metrics.jobAttempts.inc({ outcome: 'retried' });
        throw err;
      }
      outage.down(err);
      metrics.jobAttempts.inc({ outcome: 'delayed' });
      // no attempt spent: a store outage of any length delays the job, never fails it
      await job.moveToDelayed(Date.now() + transientDelayMs(job.attemptsStarted - job.attemptsMade), token);
      throw new DelayedError();
    }
    outage.up();
    metrics.jobAttempts.inc({ outcome: 'completed' });
  };

  // the batches of the gateway beside this worker, run without a fetch (src/pipeline/queue.ts LocalTaker)
  const localRuns = new LocalRuns({
    room: Math.max(LOCAL_ROOM_MIN, 2 * ctx.config.workerConcurrency),
    claimMs: ctx.config.localHandoffClaimMs,
    accepting: () => !closed && core.problem === null,
    run: processBatch,
    outage,
    log: ctx.log,
  });

  // every shard of the queue (QUEUE_SHARDS) has fetchers of its own: a shard is never left waiting behind another
  const shards = ctx.config.queueShards;
  const fetchWatch = new FetchWatch({
    shards,
    log: ctx.log,
    waiting: async (shard) => Object.values(await events.queues[shard].getJobCounts('wait', 'prioritized')).reduce((a, b) => a + b, 0),
    restart: async (shard) => {
      for (let i = shard; i < workers.length; i += shards) {
        const stale = workers[i];
        workers[i] = fetcher(i);
        void workers[i].run().catch((err: Error) => ctx.log.error({ err: err.message }, 'worker stopped'));
        // a fetcher stuck on a connection may never finish closing: it is left to go in the background
        void stale.close(true).catch(() => undefined);
      }
    },
  });
  const fetcher = (i: number) => {
    const shard = i % shards;
    const { name, prefix } = deviceQueueShard(ctx.config, shard);
    const w = new Worker<DeviceBatchJob, void>(
      name,
      async (job, token) => {
        const ended = fetchWatch.started(shard);
        try {
          await processor(job, token);
        } finally {
          ended();
        }
      },
      // jobs waiting only for the flush count against BullMQ's concurrency, not against `running`;
      // a job of a killed worker goes back to the queue (stalled) however often that happens to it
      {
        connection: createRedis(ctx.config, ctx.log),
        prefix,
        concurrency: Math.ceil(ctx.config.workerConcurrency / (fetchers * shards)) + FLUSH_WAITING_JOBS,
        autorun: false,
        maxStalledCount: MAX_STALLED_COUNT,
        runRetryDelay: WORKER_RUN_RETRY_MS,
      },
    );
    w.on('failed', (job, err) => {
      if (!job) return;
      if (job.finishedOn) gaveUp(job, err);
      else ctx.log.warn({ jobId: job.id, attempt: job.attemptsMade, err: err.message }, 'device job failed; it will be retried');
    });
    w.on('error', bullmqErrorLogger(ctx.log, 'worker error'));
    return w;
  };
  const workers = Array.from({ length: fetchers * shards }, (_, i) => fetcher(i));

  const shardCounts = () => Promise.all(events.queues.map((q) => q.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized')));
  gaugeFrom('gridgate_queue_jobs', 'Device jobs in the queue (QUEUE_NAME, all its shards) by state', ['state'], async () => {
    const counts = new Map<string, number>();
    for (const shard of await shardCounts()) for (const [state, n] of Object.entries(shard)) counts.set(state, (counts.get(state) ?? 0) + n);
    return [...counts].map(([state, n]) => [{ state }, n]);
  });
  gaugeFrom('gridgate_queue_shard_jobs', 'Device jobs in each shard of the queue (QUEUE_SHARDS) by state', ['shard', 'state'], async () =>
    (await shardCounts()).flatMap((counts, shard) =>
      Object.entries(counts).map(([state, n]): [Record<string, string>, number] => [{ shard: String(shard), state }, n]),
    ),
  );
  let closed = false;
  const core = new CoreWatch(monitoring, monitoringCoreUrl, ctx.log);
  const started = (async () => {
    await core.untilAnswers();
    if (closed) return;
    for (const w of workers) void w.run().catch((err: Error) => ctx.log.error({ err: err.message }, 'worker stopped'));
    fetchWatch.start();
    if (ctx.config.localHandoff) setLocalTaker(ctx, localRuns);
  })();
  started.catch(() => undefined);

  return {
    ready: async () => {
      await Promise.all([started, ...workers.map((w) => w.waitUntilReady()), hintStarted, watched]);
    },
    unhealthy: () => core.problem,
    async close() {
      closed = true;
      setLocalTaker(ctx, null);
      core.close();
      fetchWatch.close();
      await localRuns.idle();
      await connectivityCheck.stop();
      await Promise.all(workers.map((w) => w.close()));
      await hintStarted;
      await commands.stop();
      await watched;
      await loader.unwatch();
      await Promise.all([activities.drain(), lastOnline.close(), answers.drain(), counterRecorder(ctx).drain()]);
      await counterFlusher.stop();
      await monitoring.close();
      await thresholds?.close();
      await Promise.all([events.close(), mailer.close()]);
      await outbound.close();
      sandbox.dispose();
    },
  };
}

/** exec calls that change the device itself; returns the activity's triggerData when it is not the call's arguments. */
async function applyDeviceCall(ctx: AppContext, loader: DeviceContextLoader, device: DeviceRecord, call: ExecCall, at: Date): Promise<unknown> {
  switch (call.name) {
    case 'setDeviceFields': {
      // the keys given change, validated against the device type's field configurations like a device update;
      // an invalid value fails this call (its activity shows why), not the run
      const { before, after } = await updateDeviceFields(
        ctx.db,
        device.environmentId,
        device.hashId,
        Object.entries(call.args.fields).map(([key, value]) => ({ key, value })),
      );
      loader.forgetDevice(device.hashId);
      // the SDK's setDeviceFields activity: the keys that changed, before and after
      const changed = Object.keys(call.args.fields).filter((k) => JSON.stringify(before[k] ?? null) !== JSON.stringify(after[k] ?? null));
      return {
        diff: { old: Object.fromEntries(changed.map((k) => [k, before[k] ?? null])), new: Object.fromEntries(changed.map((k) => [k, after[k] ?? null])) },
      };
    }
    case 'expectNextReportBefore':
      await setNextReportBefore(ctx.db, device.id, call.args.before);
      loader.forgetDevice(device.hashId);
      return;
    case 'increaseReportingCounter':
      countDeviceEvent(ctx, device.hashId, 'reportingCounter', reportingCounterTime(call.args.at, at));
      return;
    default:
      throw new Error(`exec.${call.name} is not supported by this deployment yet`);
  }
}

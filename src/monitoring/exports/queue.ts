// Exports run in the background: add-export stores the request (status waiting) and queues a BullMQ job naming
// it in `<QUEUE_NAME>-export`; a worker claims it (creating), writes the CSV with its progress in the row, and
// marks it available with the expiry of its file and link. Restartable: a worker that dies mid-export holds the
// job's lock no longer, BullMQ's stalled-job check hands the job to another worker and the export is written again
// from the start (claimExport takes a creating request as well as a waiting one); a job lost on the way to Redis
// leaves its request waiting, queued again when a worker starts. Expired files are deleted once a minute.
//
// In turns across environments: the queue is first in, first out, so an environment's job is queued only when its
// export is admitted, and an environment has at most EXPORT_CONCURRENCY exports admitted or being written
// (admitExports). Each export that ends admits its environment's next, whose job joins the back of the queue: an
// environment that asked for 30 exports has one (at the default concurrency) ahead of another's first, not 30. The
// waiting lists are the requests in PostgreSQL, so they survive Redis and every process.
//
// An analytics query's export runs under GET /analytics/'s statement timeout; one that runs out of it (or of memory,
// or overflows) fails for good at once, its reason shown; other failures are tried again.

import { unlink } from 'node:fs/promises';
import path from 'node:path';
import { Queue, Worker, type Job } from 'bullmq';
import { analyticsFailure } from '../analytics/store.ts';
import type { AppContext, AppStores } from '../../app/context.ts';
import { OutageLog } from '../../app/outage-log.ts';
import { bullmqErrorLogger, createRedis, QueueProducer, WORKER_RUN_RETRY_MS } from '../../app/redis.ts';
import { bullQueue } from '../../app/redis-keys.ts';
import {
  admitExports,
  claimExport,
  environmentOfExport,
  expireExports,
  markAvailable,
  markFailed,
  recordProgress,
  unfinishedExports,
  type ExportWork,
} from './store.ts';
import { writeExport } from './writer.ts';

interface ExportJob {
  hashId: string;
}

const JOB_NAME = 'export';
/** a failing export (the database away) is tried again, backing off to a minute between tries, for a day */
const ATTEMPTS = 1440;
const PROGRESS_EVERY_MS = 1000;
const SWEEP_EVERY_MS = 60_000;

/** The export queue's name and BullMQ prefix (hash-tagged on a Redis Cluster: src/app/redis-keys.ts). */
export const exportQueue = (ctx: Pick<AppStores, 'config'>) => bullQueue(ctx.config, `${ctx.config.queueName}-export`);
/** Where export files live: DATA_DIR/exports (shared by the API and worker processes that serve and write them). */
export const exportDir = (ctx: AppContext) => path.join(ctx.config.dataDir, 'exports');

/** A context's producer on the export queue (`ctx.exports`): opened by the first export queued, closed by closeContext. */
export class ExportProducer extends QueueProducer<ExportJob> {
  constructor(stores: Pick<AppStores, 'config' | 'redis' | 'log'>) {
    super(() => {
      const { name, prefix } = exportQueue(stores);
      const queue = new Queue<ExportJob>(name, {
        connection: stores.redis,
        prefix,
        defaultJobOptions: { attempts: ATTEMPTS, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true, removeOnFail: 1000 },
      });
      queue.on('error', bullmqErrorLogger(stores.log, 'export queue error'));
      return queue;
    });
  }
}

declare module '../../app/context.ts' {
  interface AppContext {
    /** this context's producer on the export queue (src/monitoring/exports/queue.ts) */
    exports: ExportProducer;
  }
}

const producer = (ctx: Pick<AppContext, 'exports'>): Queue<ExportJob> => ctx.exports.queue;

/** Queues the export requests' jobs (the job id is the request's hashId: never queued twice at once). */
export async function queueExports(ctx: AppContext, hashIds: string[]): Promise<void> {
  if (hashIds.length > 0) await producer(ctx).addBulk(hashIds.map((hashId) => ({ name: JOB_NAME, data: { hashId }, opts: { jobId: hashId } })));
}

/** Admits the environment's next exports (at most EXPORT_CONCURRENCY admitted or being written) and queues their jobs. */
export async function queueNextExports(ctx: AppContext, environmentId: number): Promise<void> {
  await queueExports(ctx, await admitExports(ctx.db, environmentId, ctx.config.exportConcurrency));
}

/** Writes a claimed export; `lastTry`: a failure of this run fails the export for good instead of being tried again. */
async function writeClaimed(ctx: AppContext, work: ExportWork, lastTry: boolean): Promise<void> {
  let last = Date.now();
  const timeoutMs = ctx.config.analyticsStatementTimeoutMs;
  let written;
  try {
    written = await writeExport(
      ctx.db,
      work,
      exportDir(ctx),
      async (rows, share) => {
        if (Date.now() - last < PROGRESS_EVERY_MS) return;
        last = Date.now();
        await recordProgress(ctx.db, work.id, rows, share);
      },
      { analyticsTimeoutMs: timeoutMs },
    );
  } catch (err) {
    // a query too broad for GET /analytics/ is too broad however often it is tried
    const failure = work.scope.kind === 'analytics' ? analyticsFailure(err, timeoutMs) : null;
    if (!failure && !lastTry) throw err;
    const reason = failure?.message ?? `The export could not be written: ${(err as Error).message}`;
    await markFailed(ctx.db, work.id, reason);
    ctx.log.warn({ exportRequest: work.hashId, err: (err as Error).message }, 'export failed for good');
    return;
  }
  await markAvailable(ctx.db, work.id, written.fileName, written.bytes, written.rows, ctx.config.exportRetentionHours);
  ctx.log.info({ exportRequest: work.hashId, rows: written.rows, bytes: written.bytes }, 'export written');
}

async function runExport(ctx: AppContext, job: Job<ExportJob>): Promise<void> {
  const { hashId } = job.data;
  // null: written by an earlier run whose job did not finish (its environment's next may not be queued yet), or gone
  const work = await claimExport(ctx.db, hashId);
  if (work) await writeClaimed(ctx, work, job.attemptsMade + 1 >= ATTEMPTS);
  // the export has ended: its environment's next takes its turn, at the back of the queue
  const environmentId = work?.environmentId ?? (await environmentOfExport(ctx.db, hashId));
  if (environmentId !== null) await queueNextExports(ctx, environmentId);
}

/** Deletes the files of expired exports (their requests show status deleted). */
export async function sweepExpiredExports(ctx: AppContext): Promise<number> {
  const files = await expireExports(ctx.db, 1000);
  for (const file of files) await unlink(path.join(exportDir(ctx), file)).catch(() => undefined);
  return files.length;
}

export interface ExportWorker {
  close(): Promise<void>;
}

export function startExportWorker(ctx: AppContext): ExportWorker {
  const connection = createRedis(ctx.config, ctx.log);
  const worker = new Worker<ExportJob>(exportQueue(ctx).name, async (job: Job<ExportJob>) => runExport(ctx, job), {
    connection,
    prefix: exportQueue(ctx).prefix,
    concurrency: ctx.config.exportConcurrency,
    runRetryDelay: WORKER_RUN_RETRY_MS,
  });
  worker.on('error', bullmqErrorLogger(ctx.log, 'export worker error'));
  worker.on('failed', (job, err) => ctx.log.warn({ exportRequest: job?.data.hashId, err: err.message }, 'export failed; it is tried again'));
  unfinishedExports(ctx.db)
    .then(async ({ queued, environmentIds }) => {
      await queueExports(ctx, queued);
      for (const environmentId of environmentIds) await queueNextExports(ctx, environmentId);
    })
    .catch((err: Error) => ctx.log.warn({ err: err.message }, 'unfinished exports could not be queued again'));
  const outage = new OutageLog(ctx.log, 'expired exports cannot be deleted: PostgreSQL is unavailable', 'expired exports are deleted again');
  const sweep = setInterval(() => {
    sweepExpiredExports(ctx).then(
      () => outage.up(),
      (err) => outage.down(err),
    );
  }, SWEEP_EVERY_MS);
  sweep.unref();
  return {
    async close() {
      clearInterval(sweep);
      await worker.close();
      connection.disconnect();
    },
  };
}

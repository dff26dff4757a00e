// Every mail of the service goes the same way: a row in `notification` (state queued), then a BullMQ job
// naming it in the queue `<QUEUE_NAME>-mail`; the mail worker hands it to SMTP_URL. The row is the record
// (queued, sent, failed and why, shown by GET /notification); the job only says "try this one".
//
// Delivery: a server that is away, or answers 4xx, is tried again after MAIL_RETRY_BASE_MS, doubling up
// to MAIL_RETRY_MAX_MS, for as long as it takes (an outage delays mail, never drops it). A 5xx is the
// server's final word on that mail: failed, with its reply. A job lost on the way to Redis leaves its row
// queued, and the next mail worker to start queues it again (the job id is the row's hashId, so never twice).

import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import nodemailer from 'nodemailer';
import type { AppContext, AppStores } from '../app/context.ts';
import type { Queryable } from '../app/db.ts';
import { metrics } from '../app/metrics.ts';
import { bullmqErrorLogger, createRedis, QueueProducer, WORKER_RUN_RETRY_MS } from '../app/redis.ts';
import { bullQueue } from '../app/redis-keys.ts';
import { insertNotifications, loadNotification, markFailed, markRetrying, markSent, queuedNotifications, type OutgoingMail } from './store.ts';

interface MailJob {
  hashId: string;
}

const JOB_NAME = 'mail';
/** tries of one mail: with the backoff capped, this is "until the server takes it" */
const ATTEMPTS = 2 ** 31 - 1;
const WORKER_CONCURRENCY = 8;
const REQUEUE_AT_START = 10_000;

/** The mail queue's BullMQ name and prefix (one queue: mail is far from a shard's ceiling). */
export const mailQueue = (ctx: Pick<AppStores, 'config'>) => bullQueue(ctx.config, `${ctx.config.queueName}-mail`);

/** A context's producer on the mail queue (`ctx.mail`): opened by the first mail queued, closed by closeContext. */
export class MailProducer extends QueueProducer<MailJob> {
  constructor(stores: Pick<AppStores, 'config' | 'redis' | 'log'>) {
    super(() => {
      const { name, prefix } = mailQueue(stores);
      const queue = new Queue<MailJob>(name, {
        connection: stores.redis,
        prefix,
        defaultJobOptions: { attempts: ATTEMPTS, backoff: { type: 'mail' }, removeOnComplete: true, removeOnFail: 1000 },
      });
      queue.on('error', bullmqErrorLogger(stores.log, 'mail queue error'));
      return queue;
    });
  }
}

declare module '../app/context.ts' {
  interface AppContext {
    /** this context's producer on the mail queue (src/mail/queue.ts) */
    mail: MailProducer;
  }
}

const producer = (ctx: Pick<AppContext, 'mail'>): Queue<MailJob> => ctx.mail.queue;

/** What queuing mail needs of a context: its configuration and database, and its producer on the mail queue. */
export type MailContext = Pick<AppStores, 'config' | 'db' | 'log'> & Pick<AppContext, 'mail'>;

/**
 * Stores the mails as notifications in `db` (a transaction of the caller's, so they exist exactly when what
 * caused them does) and answers their hashIds, for queueStored once that is committed. Without SMTP_URL a
 * mail is logged and stored as failed with that reason: nobody is led to believe it went out.
 */
export async function storeMails(ctx: MailContext, db: Queryable, mails: OutgoingMail[]): Promise<string[]> {
  const deliverable = mails.filter((m) => m.to.length > 0);
  if (deliverable.length === 0) return [];
  if (!ctx.config.smtpUrl) {
    for (const mail of deliverable)
      ctx.log.info({ mail: { from: ctx.config.mailFrom, to: mail.to, subject: mail.subject, text: mail.text } }, 'mail not sent: SMTP_URL is not configured');
    metrics.notifications.inc({ state: 'failed' }, deliverable.length);
    return insertNotifications(db, deliverable, 'failed', 'SMTP_URL is not configured');
  }
  return insertNotifications(db, deliverable, 'queued');
}

/** Queues the jobs of stored mails; one that does not reach Redis stays queued in PostgreSQL and is queued again when a mail worker starts. */
export async function queueStored(ctx: MailContext, hashIds: string[]): Promise<void> {
  if (!ctx.config.smtpUrl || hashIds.length === 0) return;
  metrics.notifications.inc({ state: 'queued' }, hashIds.length);
  await addJobs(ctx, hashIds);
}

/** Stores and queues the mails; their hashIds. */
export async function queueMails(ctx: MailContext, mails: OutgoingMail[]): Promise<string[]> {
  const hashIds = await storeMails(ctx, ctx.db, mails);
  await queueStored(ctx, hashIds);
  return hashIds;
}

async function addJobs(ctx: MailContext, hashIds: string[]): Promise<void> {
  await producer(ctx).addBulk(hashIds.map((hashId) => ({ name: JOB_NAME, data: { hashId }, opts: { jobId: hashId } })));
}

/** SMTP's reply code of a failed send, when the server gave one. */
function replyCode(err: unknown): number | null {
  const code = (err as { responseCode?: unknown }).responseCode;
  return typeof code === 'number' ? code : null;
}

function reasonOf(err: unknown): string {
  const e = err as Error & { response?: unknown };
  return typeof e.response === 'string' && e.response !== '' ? e.response : e.message;
}

export interface MailWorker {
  close(): Promise<void>;
}

/** Sends the queued mails over SMTP_URL (nothing runs without it: mails are then stored as failed when queued). */
export function startMailWorker(ctx: AppContext): MailWorker | null {
  if (!ctx.config.smtpUrl) return null;
  // pooled: a connection per mail costs the SMTP greeting and handshake every time
  const transport = nodemailer.createTransport(
    { url: ctx.config.smtpUrl, pool: true, maxConnections: WORKER_CONCURRENCY, maxMessages: Infinity },
    { from: ctx.config.mailFrom },
  );
  const { mailRetryBaseMs: base, mailRetryMaxMs: max } = ctx.config;
  const worker = new Worker<MailJob>(
    mailQueue(ctx).name,
    async (job: Job<MailJob>) => {
      const mail = await loadNotification(ctx.db, job.data.hashId);
      // sent or failed by an earlier try whose job did not finish: nothing left to do
      if (!mail || mail.state !== 'queued') return;
      let info: { rejected?: unknown[] };
      try {
        info = await transport.sendMail({ to: mail.recipients, subject: mail.subject, text: mail.body });
      } catch (err) {
        const code = replyCode(err);
        if (code !== null && code >= 500) {
          await markFailed(ctx.db, mail.id, reasonOf(err));
          metrics.notifications.inc({ state: 'failed' });
          throw new UnrecoverableError(reasonOf(err));
        }
        await markRetrying(ctx.db, mail.id, reasonOf(err));
        metrics.notifications.inc({ state: 'retried' });
        throw err;
      }
      const refused = (info.rejected ?? []).map(String);
      await markSent(ctx.db, mail.id, refused.length > 0 ? `refused by the server: ${refused.join(', ')}` : null);
      metrics.notifications.inc({ state: 'sent' });
    },
    {
      connection: createRedis(ctx.config, ctx.log),
      prefix: mailQueue(ctx).prefix,
      runRetryDelay: WORKER_RUN_RETRY_MS,
      concurrency: WORKER_CONCURRENCY,
      settings: { backoffStrategy: (attemptsMade: number) => Math.min(max, base * 2 ** Math.min(30, Math.max(0, attemptsMade - 1))) },
    },
  );
  worker.on('error', bullmqErrorLogger(ctx.log, 'mail worker error'));
  worker.on('failed', (job, err) => {
    if (job?.finishedOn) ctx.log.warn({ notification: job.data.hashId, err: err.message }, 'mail refused by the SMTP server');
  });
  queuedNotifications(ctx.db, REQUEUE_AT_START)
    .then((hashIds) => addJobs(ctx, hashIds))
    .catch((err: Error) => ctx.log.warn({ err: err.message }, 'queued mails could not be queued again'));
  return {
    async close() {
      await worker.close();
      transport.close();
    },
  };
}

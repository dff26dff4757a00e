// Notification rows of npm run bench:
// - mail throughput: mails queued at once (src/mail/queue.ts: a notification row and a BullMQ job
//   each) until a local SMTP server (smtp-server, in this process) has taken every one;
// - the cost of supplier-alert bookkeeping when every run fails: what the report path pays per failed run
//   (failuresOf + record, in memory) and the flush statement that writes the counts once a second, both
//   per failure, measured here on CPU time of this process and the statements' wall time.
import { createMachineAccount, createEnvironment } from '../src/accounts/store.ts';
import { closeContext, createContext } from '../src/context.ts';
import { loadConfig } from '../src/settings.ts';
import { recreateDatabase } from '../src/app/db.ts';
import { createLogger } from '../src/app/logger.ts';
import type { ActivityRow } from '../src/connectivity/activities/store.ts';
import { mailQueue, queueMails, startMailWorker } from '../src/mail/queue.ts';
import { failuresOf, SupplierAlerts } from '../src/notifications/supplier-alerts.ts';
import { Queue } from 'bullmq';
import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import type { BenchRow } from './dtls.ts';
import { benchDbName } from './harness.ts';

export async function notificationRows(opts: { mails: number; failures: number }): Promise<BenchRow[]> {
  let received = 0;
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        received++;
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const admin = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const config = loadConfig({
    DATABASE_URL: await recreateDatabase(admin, benchDbName('gridgate_bench_notifications')),
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'gridgate-bench-')),
    SECRET_KEY: '22'.repeat(32),
    LOG_LEVEL: 'silent',
    QUEUE_NAME: `bench-notifications-${process.pid}`,
    SMTP_URL: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`,
    NOTIFICATION_ALERT_QUIET_SECONDS: '3600',
  });
  const ctx = await createContext(config, createLogger('silent'));
  const rows: BenchRow[] = [];
  try {
    const env = await createEnvironment(ctx.db, 'connectivity', 'bench mail');
    const worker = startMailWorker(ctx);
    const t0 = performance.now();
    for (let i = 0; i < opts.mails; i += 500) {
      await queueMails(
        ctx,
        Array.from({ length: Math.min(500, opts.mails - i) }, (_, k) => ({
          environmentId: env.id,
          accountId: null,
          kind: 'command' as const,
          to: [`ops${i + k}@example.com`],
          subject: `bench ${i + k}`,
          text: 'a bench mail\n'.repeat(20),
        })),
      );
    }
    while (received < opts.mails && performance.now() - t0 < 120_000) await new Promise((r) => setTimeout(r, 20));
    const seconds = (performance.now() - t0) / 1000;
    rows.push({
      name: 'mail: queued to a local SMTP server (stored, queued, sent, marked sent)',
      value: Math.round(received / seconds),
      unit: 'mails/s',
      errors: opts.mails - received,
      target: 'every mail delivered',
      detail: `${received} of ${opts.mails} in ${seconds.toFixed(1)} s`,
    });
    await worker?.close();

    // alert bookkeeping: a device type with a subscriber; every run of its handler fails
    const {
      rows: [dt],
    } = await ctx.db.query<{ id: number }>(
      `INSERT INTO device_type (hash_id, environment_id, name, name_text, event_handler, event_handler_hash, subscription_hash_id)
       VALUES ('benchdt', $1, '"bench"', 'bench', '', '', 'benchdtsub') RETURNING id`,
      [env.id],
    );
    const account = await createMachineAccount(ctx.db, env.hashId, ['ENVIRONMENT_ADMIN'], 'bench engineer');
    await ctx.db.query(`UPDATE machine_account SET email = 'eng@example.com' WHERE hash_id = $1`, [account.hashId]);
    await ctx.db.query(
      `INSERT INTO supplier_subscription (hash_id, environment_id, user_id, object_type, object_id)
      SELECT 'benchsub', $1, id, 'deviceType', $2 FROM machine_account WHERE hash_id = $3`,
      [env.id, dt.id, account.hashId],
    );
    const alerts = new SupplierAlerts(ctx);
    const row = (i: number): ActivityRow => ({
      hashId: `a${i}`,
      environmentId: env.id,
      deviceId: null,
      deviceTypeId: dt.id,
      triggerType: 'deviceIncomingRequest',
      triggerData: null,
      failed: true,
      log: [{ type: 'error', message: `error: Error: cannot read /r${i} (line 3, column 9)` }],
      activities: [],
      startedAt: new Date(),
      finishedAt: new Date(),
    });
    // per failure on the report path: in memory only
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < opts.failures; i++) alerts.record(failuresOf(row(i)));
    const recordCpu = process.cpuUsage(cpu0);
    const recordUs = (recordCpu.user + recordCpu.system) / opts.failures;
    // the flush a second writes a second's failures in one statement: measured at 1,000 failures each
    const flushes: number[] = [];
    for (let f = 0; f < 20; f++) {
      for (let i = 0; i < 1000; i++) alerts.record(failuresOf(row(i)));
      const t = performance.now();
      await alerts.flush();
      flushes.push(performance.now() - t);
    }
    await alerts.close();
    flushes.sort((a, b) => a - b);
    const flushUsPerFailure = (flushes[Math.floor(flushes.length / 2)] * 1000) / 1000;
    rows.push({
      name: 'supplier alerts: bookkeeping per failed run (every run fails)',
      value: Number((recordUs + flushUsPerFailure).toFixed(2)),
      unit: 'us/failure',
      target: '< 5 % of the report path (~250-500 us CPU per report)',
      detail: `in memory on the report path ${recordUs.toFixed(2)} us; flush statement (one a second, 1,000 failures) p50 ${flushes[Math.floor(flushes.length / 2)].toFixed(2)} ms = ${flushUsPerFailure.toFixed(2)} us/failure (PostgreSQL wall time, off the report path)`,
    });
  } finally {
    const queue = new Queue(mailQueue(ctx).name, { connection: ctx.redis, prefix: mailQueue(ctx).prefix });
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    await closeContext(ctx);
    await new Promise<void>((resolve) => smtp.close(() => resolve()));
  }
  return rows;
}

// run alone: node bench/notifications.ts
if (process.argv[1]?.endsWith('notifications.ts')) {
  notificationRows({ mails: 2000, failures: 200_000 }).then(
    (rows) => console.table(rows),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

// Supplier alerts: a failure of a supplier object's code (a device type's event handler, a report type's
// parser, a webhook's or a supplier certificate's identifier) is mailed to the object's subscribers
// (supplier_subscription, migration 021).
//
// On the report path a failure costs a map update in memory: failures are gathered per object and written
// every ALERT_FLUSH_MS in one statement for all of them (alerts_since_last_notification += the count of each
// subscription of the object). In that statement a subscription whose quiet interval has ended (never mailed,
// or last_notification at least NOTIFICATION_ALERT_QUIET_SECONDS ago) is claimed: its count goes to 0,
// last_notification to now, and its subscriber is mailed: the first mail shows the failure (message with the
// line of the supplier's source, device, activity), a later one sums up the failures counted since the last
// mail. Subscriptions left with a count are claimed the same way, by a later flush, once their interval ends.
// A process that dies loses at most the counts of its last ALERT_FLUSH_MS.

import { mailLanguage } from './issue-mail.ts';
import type { AppContext, AppStores } from '../app/context.ts';
import { OutageLog } from '../app/outage-log.ts';
import type { ActivityRow } from '../connectivity/activities/store.ts';
import { queueStored, storeMails } from '../mail/queue.ts';
import type { OutgoingMail } from '../mail/store.ts';

export type SupplierObjectType = 'deviceType' | 'supplierReportType' | 'supplierWebhook' | 'supplierCertificate';

/** One failure of a supplier object's code: the object by id or hashId, and what the alert shows of it. */
export interface SupplierFailure {
  objectType: SupplierObjectType;
  objectId?: number;
  objectHashId?: string;
  /** the error as the activity log has it (kind, message, and the line of the supplier's source when known) */
  message: string;
  deviceId: number | null;
  activityHashId: string | null;
  at: Date;
}

const ALERT_FLUSH_MS = 1000;

interface Gathered {
  objectType: SupplierObjectType;
  objectId: number | null;
  objectHashId: string | null;
  count: number;
  sample: SupplierFailure;
}

// the gathered counts added to every subscription of their object; the subscriptions whose quiet interval has
// ended (and that have something to tell) claimed in the same statement
const FLUSH = `WITH x AS (
    SELECT x.object_type, coalesce(x.object_id, rt.id, w.id, c.id) AS object_id, x.count, x.sample
      FROM json_to_recordset($1::json) AS x(object_type text, object_id bigint, object_hash_id text, count int, sample jsonb)
      LEFT JOIN report_type rt ON x.object_type = 'supplierReportType' AND x.object_id IS NULL AND rt.hash_id = x.object_hash_id
      LEFT JOIN supplier_webhook w ON x.object_type = 'supplierWebhook' AND x.object_id IS NULL AND w.hash_id = x.object_hash_id
      LEFT JOIN supplier_certificate c ON x.object_type = 'supplierCertificate' AND x.object_id IS NULL AND c.hash_id = x.object_hash_id
  ), touched AS (
    SELECT s.id, x.count, x.sample FROM x JOIN supplier_subscription s ON s.object_type = x.object_type AND s.object_id = x.object_id
    UNION ALL
    SELECT s.id, 0, NULL FROM supplier_subscription s
     WHERE s.alerts_since_last_notification > 0 AND s.last_notification <= now() - make_interval(secs => $2)
  ), old AS (
    SELECT s.id, s.alerts_since_last_notification + t.count AS failures, s.last_notification,
           s.last_notification IS NULL OR s.last_notification <= now() - make_interval(secs => $2) AS due, t.sample
      FROM supplier_subscription s JOIN (SELECT id, sum(count)::int AS count, (array_agg(sample) FILTER (WHERE sample IS NOT NULL))[1] AS sample FROM touched GROUP BY id) t ON t.id = s.id
     ORDER BY s.id FOR UPDATE OF s
  )
  UPDATE supplier_subscription s SET
    alerts_since_last_notification = CASE WHEN old.due THEN 0 ELSE old.failures END,
    last_notification = CASE WHEN old.due THEN now() ELSE s.last_notification END
  FROM old WHERE s.id = old.id
  RETURNING s.id, s.user_id, s.environment_id, s.object_type, s.object_id, old.failures, old.last_notification AS since, old.due, old.sample`;

// what a mail names: the object, the subscriber's address, the sample's device
const DETAILS = `SELECT s.id, a.email, COALESCE(a.locale, (SELECT e.settings->>'locale' FROM environment e WHERE e.id = a.environment_id)) AS locale, a.timezone,
       CASE s.object_type WHEN 'deviceType' THEN dt.name_text WHEN 'supplierReportType' THEN rt.name_text WHEN 'supplierWebhook' THEN w.name ELSE c.name END AS object_name,
       CASE s.object_type WHEN 'deviceType' THEN dt.hash_id WHEN 'supplierReportType' THEN rt.hash_id WHEN 'supplierWebhook' THEN w.hash_id ELSE c.hash_id END AS object_hash_id,
       d.hash_id AS device_hash_id, d.supplier_device_identifier
  FROM unnest($1::bigint[], $2::bigint[]) AS v(id, device_id)
  JOIN supplier_subscription s ON s.id = v.id
  JOIN machine_account a ON a.id = s.user_id AND a.revoked_at IS NULL
  LEFT JOIN device_type dt ON s.object_type = 'deviceType' AND dt.id = s.object_id
  LEFT JOIN report_type rt ON s.object_type = 'supplierReportType' AND rt.id = s.object_id
  LEFT JOIN supplier_webhook w ON s.object_type = 'supplierWebhook' AND w.id = s.object_id
  LEFT JOIN supplier_certificate c ON s.object_type = 'supplierCertificate' AND c.id = s.object_id
  LEFT JOIN device d ON d.id = v.device_id
 WHERE coalesce(a.email, '') <> ''`;

/** An alert's words in the subscriber's language (their locale, else their environment's). */
const WORDS = {
  en: {
    nouns: {
      deviceType: ['device type', 'event handler'],
      supplierReportType: ['report type', 'report parser'],
      supplierWebhook: ['webhook', 'identifier'],
      supplierCertificate: ['supplier certificate', 'identifier'],
    },
    failedSubject: (code: string, noun: string, name: string) => `The ${code} of ${noun} "${name}" failed`,
    failed: (code: string, object: string, n: number) => `The ${code} of ${object} failed${n > 1 ? ` (${n} failures so far)` : ''}.`,
    summarySubject: (n: number, code: string, noun: string, name: string) => `${n} failure${n === 1 ? '' : 's'} of the ${code} of ${noun} "${name}"`,
    summary: (code: string, object: string, n: number, since: string) =>
      `The ${code} of ${object} failed ${n} time${n === 1 ? '' : 's'} since the last alert (${since}).`,
    theFailure: 'The failure:',
    oneOfThem: 'One of them:',
    device: 'Device',
    activity: 'Activity',
    at: 'At',
    quiet: (s: number) => `Further failures are counted and summed up in one mail no sooner than ${s} s after this one; the activity log has each of them.`,
  },
  nl: {
    nouns: {
      deviceType: ['apparaattype', 'event handler'],
      supplierReportType: ['rapporttype', 'rapportparser'],
      supplierWebhook: ['webhook', 'identifier'],
      supplierCertificate: ['leverancierscertificaat', 'identifier'],
    },
    failedSubject: (code: string, noun: string, name: string) => `De ${code} van ${noun} "${name}" faalde`,
    failed: (code: string, object: string, n: number) => `De ${code} van ${object} faalde${n > 1 ? ` (tot nu toe ${n} keer)` : ''}.`,
    summarySubject: (n: number, code: string, noun: string, name: string) => `${n} keer faalde de ${code} van ${noun} "${name}"`,
    summary: (code: string, object: string, n: number, since: string) => `De ${code} van ${object} faalde ${n} keer sinds de vorige melding (${since}).`,
    theFailure: 'De fout:',
    oneOfThem: 'Een ervan:',
    device: 'Apparaat',
    activity: 'Activiteit',
    at: 'Op',
    quiet: (s: number) => `Volgende fouten worden geteld en op zijn vroegst ${s} s na deze mail in één mail samengevat; het activiteitenlog toont ze alle.`,
  },
} satisfies Record<'en' | 'nl', { nouns: Record<SupplierObjectType, string[]> } & Record<string, unknown>>;

/** The failures an activity records: its handler run, and each parser run it called. */
export function failuresOf(row: ActivityRow): SupplierFailure[] {
  const out: SupplierFailure[] = [];
  const errors = (log: { type: string; message: string }[]) =>
    log
      .filter((l) => l.type === 'error')
      .map((l) => l.message)
      .join('\n');
  if (row.failed && row.deviceTypeId !== null) {
    out.push({
      objectType: 'deviceType',
      objectId: row.deviceTypeId,
      message: errors(row.log),
      deviceId: row.deviceId,
      activityHashId: row.hashId,
      at: row.finishedAt,
    });
  }
  for (const sub of row.activities as {
    triggerType?: string;
    failed?: boolean;
    log?: { type: string; message: string }[];
    triggerData?: { reportType?: { hashId?: string } };
  }[]) {
    const reportType = sub?.triggerData?.reportType?.hashId;
    if (sub?.triggerType === 'parseReport' && sub.failed && reportType) {
      out.push({
        objectType: 'supplierReportType',
        objectHashId: reportType,
        message: errors(sub.log ?? []),
        deviceId: row.deviceId,
        activityHashId: row.hashId,
        at: row.finishedAt,
      });
    }
  }
  return out;
}

function dateIn(d: Date, locale: string | null, timezone: string | null): string {
  const opts: Intl.DateTimeFormatOptions = { dateStyle: 'medium', timeStyle: 'long' };
  try {
    return new Intl.DateTimeFormat(locale ?? 'en', { ...opts, timeZone: timezone ?? 'UTC' }).format(d);
  } catch {
    return new Intl.DateTimeFormat('en', { ...opts, timeZone: 'UTC' }).format(d);
  }
}

type Claimed = {
  id: number;
  user_id: number;
  environment_id: number;
  object_type: SupplierObjectType;
  failures: number;
  since: Date | null;
  due: boolean;
  sample: (Omit<SupplierFailure, 'at'> & { at: string }) | null;
};
type Details = {
  id: number;
  email: string;
  locale: string | null;
  timezone: string | null;
  object_name: string | null;
  object_hash_id: string | null;
  device_hash_id: string | null;
  supplier_device_identifier: string | null;
};

/** The alert (never mailed before) or the summary (failures since the last mail) of one claimed subscription. */
function alertMail(c: Claimed, d: Details, quietSeconds: number): OutgoingMail {
  const w = WORDS[mailLanguage(d.locale)];
  const [noun, code] = w.nouns[c.object_type];
  const name = d.object_name ?? '?';
  const object = `${noun} "${name}" (${d.object_hash_id ?? '?'})`;
  const lines: string[] = [];
  let subject: string;
  if (c.since === null) {
    subject = w.failedSubject(code, noun, name);
    lines.push(w.failed(code, object, c.failures));
  } else {
    subject = w.summarySubject(c.failures, code, noun, name);
    lines.push(w.summary(code, object, c.failures, dateIn(c.since, d.locale, d.timezone)));
  }
  if (c.sample) {
    lines.push('', c.since === null ? w.theFailure : w.oneOfThem, `  ${c.sample.message.split('\n').join('\n  ')}`);
    if (d.device_hash_id) lines.push(`${w.device}: ${d.supplier_device_identifier} (${d.device_hash_id})`);
    if (c.sample.activityHashId) lines.push(`${w.activity}: ${c.sample.activityHashId}`);
    lines.push(`${w.at}: ${dateIn(new Date(c.sample.at), d.locale, d.timezone)}`);
  }
  lines.push('', w.quiet(quietSeconds));
  return { environmentId: c.environment_id, accountId: c.user_id, kind: 'supplierAlert', to: [d.email], subject, text: lines.join('\n') };
}

/** What the alerts write with: the stores and the context's mail producer. */
export type SupplierAlertsContext = Pick<AppStores, 'config' | 'db' | 'log'> & Pick<AppContext, 'mail'>;

/** Gathers the failures of one context and writes them (and the alerts they make) every ALERT_FLUSH_MS. */
export class SupplierAlerts {
  private gathered = new Map<string, Gathered>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly ctx: SupplierAlertsContext;
  // a flush a second: a store outage reads as one line when it begins and one when it ends
  private readonly outage: OutageLog;

  constructor(ctx: SupplierAlertsContext) {
    this.ctx = ctx;
    this.outage = new OutageLog(
      ctx.log,
      'supplier alerts could not be written; their counts are kept and written when the store is back',
      'supplier alerts are written again',
    );
  }

  /** Counts the failures; the first of each object in a flush is the one an alert shows. */
  record(failures: SupplierFailure[]): void {
    for (const f of failures) {
      const key = `${f.objectType}:${f.objectId ?? f.objectHashId}`;
      const g = this.gathered.get(key);
      if (g) g.count++;
      else this.gathered.set(key, { objectType: f.objectType, objectId: f.objectId ?? null, objectHashId: f.objectHashId ?? null, count: 1, sample: f });
    }
    if (failures.length > 0) this.start();
  }

  /** Flushes every ALERT_FLUSH_MS from now on (the worker role: summaries fall due without new failures). */
  start(): void {
    this.timer ??= setInterval(() => void this.flush(), ALERT_FLUSH_MS);
    this.timer.unref();
  }

  /** Writes the gathered counts and mails the subscriptions that fell due; resolves once done (failures are logged). */
  flush(): Promise<void> {
    this.flushing = this.flushing
      .then(() => this.write())
      .then(
        () => this.outage.up(),
        (err: Error) => this.outage.down(err),
      );
    return this.flushing;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }

  private async write(): Promise<void> {
    const batch = [...this.gathered.values()];
    this.gathered = new Map();
    const quiet = this.ctx.config.notificationAlertQuietSeconds;
    let stored: string[];
    try {
      stored = await this.ctx.db.tx(async (client) => {
        const { rows } = await client.query<Claimed>(FLUSH, [
          JSON.stringify(
            batch.map((g) => ({
              object_type: g.objectType,
              object_id: g.objectId,
              object_hash_id: g.objectHashId,
              count: g.count,
              sample: { ...g.sample, at: g.sample.at.toISOString() },
            })),
          ),
          quiet,
        ]);
        const due = rows.filter((r) => r.due && r.failures > 0);
        // counts alone need not wait for the disk (they are an estimate already: a process that dies loses its last second);
        // a transaction that stores mails does
        if (due.length === 0) {
          await client.query('SET LOCAL synchronous_commit = off');
          return [];
        }
        const details = new Map(
          (await client.query<Details>(DETAILS, [due.map((r) => r.id), due.map((r) => r.sample?.deviceId ?? null)])).rows.map((d) => [d.id, d]),
        );
        const mails = due.flatMap((c) => {
          const d = details.get(c.id);
          return d ? [alertMail(c, d, quiet)] : [];
        });
        return storeMails(this.ctx, client, mails);
      });
    } catch (err) {
      // counted again with the next flush
      for (const g of batch) {
        const key = `${g.objectType}:${g.objectId ?? g.objectHashId}`;
        const newer = this.gathered.get(key);
        this.gathered.set(key, newer ? { ...g, count: g.count + newer.count } : g);
      }
      throw err;
    }
    await queueStored(this.ctx, stored);
  }
}

declare module '../app/context.ts' {
  interface AppContext {
    /** the failures this context gathers for supplier alerts (src/notifications/supplier-alerts.ts) */
    supplierAlerts: SupplierAlerts;
  }
}

/** The context's alerts. */
export const supplierAlerts = (ctx: Pick<AppContext, 'supplierAlerts'>): SupplierAlerts => ctx.supplierAlerts;

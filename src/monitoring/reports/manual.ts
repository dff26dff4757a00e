// Manual condition reports (the SDK's report routes): a user enters a report of a manual report type on a
// pin group, with measurements on its pins. They are stored by the same store as a device's reports
// (store.ts) and evaluated against thresholds in the same transaction, so measurement find, charts,
// analytics, thresholds and issues see them as they see a device's. Only manual reports are changed here:
// a device's reports are its own.

import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { applyFieldsUpdate, type Fields, type FieldsUpdate } from '../../app/fields.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { Logger } from '../../app/logger.ts';
import { reportDateProblem } from '../../sandbox/report-dates.ts';
import { loadReportType } from '../report-types/store.ts';
import type { ThresholdCache } from '../thresholds/cache.ts';
import { ThresholdEvaluator } from '../thresholds/evaluate.ts';
import { insertManualMeasurements, insertManualReport, refreshRollup, rollupKeysOfReport, type ConditionReportIn, type ManualMeasurementIn } from './store.ts';

/** Measurements one manual report holds at most. */
export const MAX_REPORT_MEASUREMENTS = 1000;

interface MeasurementValue {
  generatedAt: string;
  orderOfMagnitude: number;
  significand: number;
  doNotCompareToThresholds?: boolean;
}
export interface NewMeasurement extends MeasurementValue {
  pinHashId: string;
  quantityHashId: string;
}
export interface UpdatedMeasurement extends MeasurementValue {
  measurementHashId: string;
}

export interface ReportAdd {
  generatedAt?: string;
  measurements: NewMeasurement[];
  reportTypeHashId: string;
  pinGroupHashId: string;
  fields?: Fields;
}

export interface ReportUpdate {
  generatedAt?: string;
  measurements?: (NewMeasurement | UpdatedMeasurement)[];
  fields?: FieldsUpdate;
}

/** Who enters the report: the account, its name kept with the report. */
export interface Author {
  id: number;
  name: string;
}

/** Whether threshold evaluation runs (THRESHOLD_EVALUATION) and where its failures are logged. */
export interface Evaluation {
  enabled: boolean;
  log: Logger | null;
  /** the context's threshold cache (ctx.thresholds) */
  cache: ThresholdCache;
}

interface Scope {
  reportTypeId: number;
  pinGroupId: number;
  /** the report type's form of the report (its pinGroup field configurations) */
  configurations: Parameters<typeof applyFieldsUpdate>[0];
  pins: Map<string, number>;
  quantities: Map<string, number>;
}

/** The report type and pin group a report is entered with, and the pins and quantities its measurements may name. */
async function scopeOf(
  db: Queryable,
  environmentId: number,
  reportTypeHashId: string,
  pinGroupId: number,
  includeDeleted: boolean,
): Promise<Omit<Scope, 'pinGroupId'>> {
  const { id, reportType } = await loadReportType(db, environmentId, reportTypeHashId, includeDeleted).catch((err: unknown) => {
    if (err instanceof NotFoundError) throw new ParameterError(`reportTypeHashId ${reportTypeHashId} is not a manual report type of this environment`);
    throw err;
  });
  const [{ rows: pins }, { rows: quantities }] = await Promise.all([
    db.query<{ id: string; hash_id: string }>('SELECT id, hash_id FROM pin WHERE pin_group_id = $1', [pinGroupId]),
    db.query<{ id: string; hash_id: string }>(
      'SELECT q.id, q.hash_id FROM report_type_quantity x JOIN quantity q ON q.id = x.quantity_id WHERE x.report_type_id = $1',
      [id],
    ),
  ]);
  return {
    reportTypeId: id,
    configurations: reportType.fieldConfigurations.pinGroup,
    pins: new Map(pins.map((p) => [p.hash_id, Number(p.id)])),
    quantities: new Map(quantities.map((q) => [q.hash_id, Number(q.id)])),
  };
}

/** `at` as stored: an ISO string, or a parameter_error naming `field` when it lies outside the reports' window (src/sandbox/report-dates.ts). */
function reportDate(at: string, field: string): string {
  const date = new Date(at);
  const outside = reportDateProblem(date);
  if (outside) throw new ParameterError(`${field} ${at} ${outside}`);
  return date.toISOString();
}

function newMeasurement(scope: Scope, m: NewMeasurement, i: number): ManualMeasurementIn & { unchecked: boolean } {
  const pinId = scope.pins.get(m.pinHashId);
  if (pinId === undefined) throw new ParameterError(`measurements[${i}].pinHashId ${m.pinHashId} is not a pin of the report's pin group`);
  const quantityId = scope.quantities.get(m.quantityHashId);
  if (quantityId === undefined) throw new ParameterError(`measurements[${i}].quantityHashId ${m.quantityHashId} is not a quantity of the report type`);
  return {
    hashId: newHashId(),
    pinId,
    quantityId,
    generatedAt: reportDate(m.generatedAt, `measurements[${i}].generatedAt`),
    orderOfMagnitude: m.orderOfMagnitude,
    significand: m.significand,
    unchecked: m.doNotCompareToThresholds === true,
  };
}

/** The report's time: given, else its latest measurement's, else `fallback`. */
function reportTime(given: string | undefined, measurements: { generatedAt: string }[], fallback: string): string {
  if (given !== undefined) return reportDate(given, 'generatedAt');
  if (measurements.length === 0) return fallback;
  return measurements.reduce((a, m) => (m.generatedAt > a ? m.generatedAt : a), measurements[0].generatedAt);
}

/** Compares the report's measurements to thresholds in the report's transaction: issues open with the report, or neither happens. */
async function evaluate(
  client: Queryable,
  evaluation: Evaluation,
  report: { hashId: string; generatedAt: string },
  environmentHashId: string,
  measurements: (ManualMeasurementIn & { unchecked: boolean })[],
  quantityHashIds: Map<number, string>,
): Promise<void> {
  if (!evaluation.enabled || measurements.length === 0) return;
  const input: ConditionReportIn = {
    hashId: report.hashId,
    environmentHashId,
    deviceHashId: '',
    reportTypeHashId: '',
    generatedAt: report.generatedAt,
    fields: {},
    payload: '',
    manual: true,
    measurements: measurements.map((m) => ({
      hashId: m.hashId,
      channelIndex: 0,
      channelMeasurementIndex: 0,
      quantityHashId: quantityHashIds.get(m.quantityId)!,
      generatedAt: m.generatedAt,
      orderOfMagnitude: m.orderOfMagnitude,
      significand: m.significand,
      pinId: m.pinId,
      unchecked: m.unchecked,
    })),
  };
  const evaluator = new ThresholdEvaluator(client, evaluation.log, evaluation.cache, 60_000);
  try {
    await evaluator.evaluate([input]);
    // what only moves an open issue's counts waits in memory: written now, in this transaction
    await evaluator.flush();
  } finally {
    await evaluator.close();
  }
}

const invert = (m: Map<string, number>) => new Map([...m].map(([k, v]) => [v, k]));

/** report add: answers the report's hashId and fields. */
export async function addReport(db: Db, environment: { id: number; hashId: string }, author: Author, input: ReportAdd, evaluation: Evaluation) {
  if (input.measurements.length > MAX_REPORT_MEASUREMENTS) throw new ParameterError(`measurements: a report holds at most ${MAX_REPORT_MEASUREMENTS}`);
  const hashId = newHashId();
  return db.tx(async (client) => {
    const {
      rows: [pg],
    } = await client.query<{ id: string }>('SELECT id FROM pin_group WHERE environment_id = $1 AND hash_id = $2 FOR SHARE', [
      environment.id,
      input.pinGroupHashId,
    ]);
    if (!pg) throw new ParameterError(`pinGroupHashId ${input.pinGroupHashId} is not a pin group of this environment`);
    const scope: Scope = { ...(await scopeOf(client, environment.id, input.reportTypeHashId, Number(pg.id), false)), pinGroupId: Number(pg.id) };
    const fields = applyFieldsUpdate(scope.configurations, {}, input.fields ?? {}, 'the report type');
    const measurements = input.measurements.map((m, i) => newMeasurement(scope, m, i));
    const generatedAt = reportTime(input.generatedAt, measurements, new Date().toISOString());
    const reportId = await insertManualReport(client, {
      hashId,
      environmentId: environment.id,
      reportTypeId: scope.reportTypeId,
      pinGroupId: scope.pinGroupId,
      generatedAt,
      fields,
    });
    await insertManualMeasurements(client, reportId, environment.id, measurements);
    await client.query(
      'INSERT INTO manual_report (report_hash_id, environment_id, account_id, user_name, unchecked_measurement_hash_ids) VALUES ($1, $2, $3, $4, $5)',
      [hashId, environment.id, author.id, author.name, measurements.filter((m) => m.unchecked).map((m) => m.hashId)],
    );
    await evaluate(client, evaluation, { hashId, generatedAt }, environment.hashId, measurements, invert(scope.quantities));
    return { hashId, fields };
  });
}

interface StoredReport {
  id: number;
  pinGroupId: number;
  reportTypeHashId: string;
  fields: Fields;
  generatedAt: Date;
  unchecked: string[];
}

/** A manual report of the environment, locked for a change; a device's report is refused, another environment's is not found. */
async function loadManual(db: Queryable, environmentId: number, hashId: string): Promise<StoredReport> {
  const {
    rows: [r],
  } = await db.query(
    `SELECT r.id, r.pin_group_id, rt.hash_id AS report_type_hash_id, r.fields, r.generated_at, mr.unchecked_measurement_hash_ids, mr.report_hash_id IS NOT NULL AS manual
       FROM condition_report r JOIN pin_group pg ON pg.id = r.pin_group_id LEFT JOIN report_type rt ON rt.id = r.report_type_id
       LEFT JOIN manual_report mr ON mr.report_hash_id = r.hash_id
      WHERE r.hash_id = $2 AND pg.environment_id = $1 FOR UPDATE OF r`,
    [environmentId, hashId],
  );
  if (!r) throw new NotFoundError('report', hashId);
  if (!r.manual) throw new ParameterError(`hashId ${hashId} is a device's report: only manual reports are changed or deleted`);
  return {
    id: Number(r.id),
    pinGroupId: Number(r.pin_group_id),
    reportTypeHashId: r.report_type_hash_id as string,
    fields: r.fields as Fields,
    generatedAt: r.generated_at as Date,
    unchecked: r.unchecked_measurement_hash_ids as string[],
  };
}

/**
 * report update: the fields given change (the whole form, or the keys of a list); with `measurements`, the
 * list is the report's measurements from now on: those named by measurementHashId change, new ones are
 * added and the others are removed.
 */
export async function updateReport(db: Db, environment: { id: number; hashId: string }, hashId: string, patch: ReportUpdate, evaluation: Evaluation) {
  if ((patch.measurements?.length ?? 0) > MAX_REPORT_MEASUREMENTS) throw new ParameterError(`measurements: a report holds at most ${MAX_REPORT_MEASUREMENTS}`);
  return db.tx(async (client) => {
    const stored = await loadManual(client, environment.id, hashId);
    // the report type may have been deleted since: its reports stay changeable
    const scope: Scope = { ...(await scopeOf(client, environment.id, stored.reportTypeHashId, stored.pinGroupId, true)), pinGroupId: stored.pinGroupId };
    const fields = patch.fields === undefined ? stored.fields : applyFieldsUpdate(scope.configurations, stored.fields, patch.fields, 'the report type');
    let generatedAt = patch.generatedAt === undefined ? stored.generatedAt.toISOString() : reportDate(patch.generatedAt, 'generatedAt');
    let unchecked = stored.unchecked;
    if (patch.measurements !== undefined) {
      const before = await rollupKeysOfReport(client, stored.id);
      const { rows: current } = await client.query<{
        hash_id: string;
        pin_id: string;
        quantity_id: string;
        generated_at: Date;
        order_of_magnitude: number;
        significand: number;
      }>('SELECT hash_id, pin_id, quantity_id, generated_at, order_of_magnitude, significand FROM measurement WHERE report_id = $1', [stored.id]);
      const byHashId = new Map(current.map((m) => [m.hash_id, m]));
      const kept: (ManualMeasurementIn & { unchecked: boolean })[] = [];
      // new values are compared to thresholds; a measurement left as it was has been already
      const changed: (ManualMeasurementIn & { unchecked: boolean })[] = [];
      const added: (ManualMeasurementIn & { unchecked: boolean })[] = [];
      patch.measurements.forEach((m, i) => {
        if (!('measurementHashId' in m)) {
          added.push(newMeasurement(scope, m, i));
          return;
        }
        const old = byHashId.get(m.measurementHashId);
        if (!old) throw new ParameterError(`measurements[${i}].measurementHashId ${m.measurementHashId} is not a measurement of this report`);
        byHashId.delete(m.measurementHashId);
        const next = {
          hashId: m.measurementHashId,
          pinId: Number(old.pin_id),
          quantityId: Number(old.quantity_id),
          generatedAt: reportDate(m.generatedAt, `measurements[${i}].generatedAt`),
          orderOfMagnitude: m.orderOfMagnitude,
          significand: m.significand,
          unchecked: m.doNotCompareToThresholds === true,
        };
        kept.push(next);
        if (next.generatedAt !== old.generated_at.toISOString() || next.orderOfMagnitude !== old.order_of_magnitude || next.significand !== old.significand)
          changed.push(next);
      });
      await client.query('DELETE FROM measurement WHERE report_id = $1 AND hash_id = ANY($2::text[])', [stored.id, [...byHashId.keys()]]);
      await client.query(
        `UPDATE measurement m SET generated_at = x."generatedAt", order_of_magnitude = x."orderOfMagnitude", significand = x.significand
           FROM json_to_recordset($2::json) AS x("hashId" text, "generatedAt" timestamptz, "orderOfMagnitude" smallint, significand int)
          WHERE m.report_id = $1 AND m.hash_id = x."hashId"`,
        [stored.id, JSON.stringify(kept)],
      );
      await insertManualMeasurements(client, stored.id, environment.id, added);
      // the insert trigger counted the new ones; the hours of those changed or removed are counted again
      await refreshRollup(client, before, await rollupKeysOfReport(client, stored.id));
      const all = [...kept, ...added];
      unchecked = all.filter((m) => m.unchecked).map((m) => m.hashId);
      if (patch.generatedAt === undefined) generatedAt = reportTime(undefined, all, generatedAt);
      await evaluate(client, evaluation, { hashId, generatedAt }, environment.hashId, [...changed, ...added], invert(scope.quantities));
    }
    await client.query('UPDATE condition_report SET fields = $2, generated_at = $3 WHERE id = $1', [stored.id, JSON.stringify(fields), generatedAt]);
    await client.query('UPDATE manual_report SET unchecked_measurement_hash_ids = $2, updated_at = now() WHERE report_hash_id = $1', [hashId, unchecked]);
    return { fields };
  });
}

/** report delete: the report and its measurements go, and the charts' rollup forgets them. */
export async function deleteReport(db: Db, environmentId: number, hashId: string): Promise<void> {
  await db.tx(async (client) => {
    const stored = await loadManual(client, environmentId, hashId);
    const before = await rollupKeysOfReport(client, stored.id);
    // measurements carry no foreign key (migration 002): they go first, explicitly
    await client.query('DELETE FROM measurement WHERE report_id = $1', [stored.id]);
    await client.query('DELETE FROM condition_report WHERE id = $1', [stored.id]);
    await client.query('DELETE FROM manual_report WHERE report_hash_id = $1', [hashId]);
    await refreshRollup(client, before);
  });
}

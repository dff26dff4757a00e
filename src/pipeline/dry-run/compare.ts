// Before-save comparison: a device type's last stored device requests (a report type's last parsed payloads) replayed
// as dry runs twice, with the saved code ("current") and with a proposed source ("proposed"), and what differs. Nothing is
// stored, changed or sent: both are dry runs (./run.ts). The proposed source is compiled first, as a save compiles
// it: one that does not compile is the save's 400 parameter_error naming the field, line and column.

import type { AppContext } from '../../app/context.ts';
import { compileOnSave } from '../../connectivity/user-code.ts';
import {
  checkSource,
  deviceOfStoredRun,
  deviceOrSample,
  dryRunHandler,
  dryRunParser,
  replayedEvent,
  type DeviceTypeDryRun,
  type ReportTypeDryRun,
} from './run.ts';
import { deviceTypeCode, lastIncomingRequests, lastParsedPayloads, reportTypeCode } from './store.ts';

/** Stored requests compared at most (and by default). */
export const COMPARE_MAX_RUNS = 50;
/** Stored requests replayed at once: each is two runs, one after the other. */
const COMPARE_CONCURRENCY = 4;

export interface Differs {
  answer: boolean;
  reports: boolean;
  measurements: boolean;
  failed: boolean;
}

type Call = DeviceTypeDryRun['calls'][number];
type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** JSON with members in one order, so two equal values give one text. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isObject(value))
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
      .join(',')}}`;
  return JSON.stringify(value ?? null);
}

const parses = (calls: Call[]) => calls.filter((c) => c.name === 'parseReport').map((c) => (isObject(c.triggerData) ? c.triggerData : {}));

/** Each parseReport call's report as it would be stored (report type, payload, fields, whether it failed), without its ids. */
const reportsOf = (calls: Call[]) =>
  calls
    .filter((c) => c.name === 'parseReport')
    .map((c) => {
      const t = isObject(c.triggerData) ? c.triggerData : {};
      return { failed: c.failed, reportTypeHashId: isObject(t.reportType) ? t.reportType.hashId : null, payload: t.payload, fields: t.fields ?? null };
    });

/** Each report's measurements as values: channel, index, quantity, value (not their ids, nor the time a parser took from its clock). */
const measurementsOf = (calls: Call[]) =>
  parses(calls).map((t) =>
    (Array.isArray(t.observations) ? t.observations : []).map((o: Obj) => {
      const m = isObject(o.measurement) ? o.measurement : {};
      return [m.channelIndex, m.channelMeasurementIndex, isObject(o.quantity) ? o.quantity.hashId : null, m.orderOfMagnitude, m.significand];
    }),
  );

/** What differs between two dry runs of one event. */
export function differs(current: DeviceTypeDryRun, proposed: DeviceTypeDryRun): Differs {
  return {
    answer: canonical(current.answer) !== canonical(proposed.answer),
    reports: canonical(reportsOf(current.calls)) !== canonical(reportsOf(proposed.calls)),
    measurements: canonical(measurementsOf(current.calls)) !== canonical(measurementsOf(proposed.calls)),
    failed: current.failed !== proposed.failed,
  };
}

const reportMeasurements = (run: ReportTypeDryRun) =>
  (run.report?.measurements ?? []).map((m) => [m.channelIndex, m.channelMeasurementIndex, m.quantityHashId, m.orderOfMagnitude, m.significand]);

/** What differs between two dry runs of a parser on one payload. */
export function reportDiffers(current: ReportTypeDryRun, proposed: ReportTypeDryRun): Omit<Differs, 'answer'> {
  return {
    reports:
      canonical(current.report?.fields ?? null) !== canonical(proposed.report?.fields ?? null) || (current.report === null) !== (proposed.report === null),
    measurements: canonical(reportMeasurements(current)) !== canonical(reportMeasurements(proposed)),
    failed: current.failed !== proposed.failed,
  };
}

/** `work` on every item, at most `concurrency` at once; results in the items' order. */
async function mapBounded<T, R>(items: T[], concurrency: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane));
  return results;
}

/** POST /device-type/{hashId}/compare */
export async function compareDeviceType(ctx: AppContext, env: { id: number; hashId: string }, hashId: string, input: { eventHandler: string; limit?: number }) {
  checkSource(ctx.config.supplierCode, 'eventHandler', input.eventHandler);
  const deviceType = await deviceTypeCode(ctx.db, env.id, hashId);
  await compileOnSave(ctx.config.supplierCode, 'eventHandler', input.eventHandler, env.id);
  const stored = await lastIncomingRequests(ctx.db, env.id, deviceType.id, Math.min(input.limit ?? COMPARE_MAX_RUNS, COMPARE_MAX_RUNS));
  // a run stored cut short (ACTIVITY_MAX_BYTES) cannot be replayed: it is left out
  const replayable = stored.flatMap((s) => {
    try {
      return [{ ...s, event: replayedEvent(s, s.hashId) }];
    } catch {
      return [];
    }
  });
  const nonce = `${Date.now()}:${Math.random()}`;
  const runs = await mapBounded(replayable, COMPARE_CONCURRENCY, async (s) => {
    const device = await deviceOfStoredRun(ctx, env, s.deviceHashId, deviceType);
    // both runs derive the same ids: what they create differs only where the handlers do
    const idBase = `compare:${s.hashId}:${nonce}`;
    const current = await dryRunHandler(ctx, device, deviceType.eventHandler, s.event, idBase);
    const proposed = await dryRunHandler(ctx, device, input.eventHandler, s.event, idBase);
    return { activityHashId: s.hashId, deviceHashId: s.deviceHashId, createdAt: s.createdAt, current, proposed, differs: differs(current, proposed) };
  });
  return { runs, summary: summaryOf(runs) };
}

function summaryOf(runs: { current: { failed: boolean }; proposed: { failed: boolean }; differs: object }[]) {
  return {
    total: runs.length,
    differing: runs.filter((r) => Object.values(r.differs).some(Boolean)).length,
    newlyFailing: runs.filter((r) => !r.current.failed && r.proposed.failed).length,
    fixed: runs.filter((r) => r.current.failed && !r.proposed.failed).length,
  };
}

/** POST /supplier-report-type/{hashId}/compare */
export async function compareReportType(ctx: AppContext, env: { id: number; hashId: string }, hashId: string, input: { parser: string; limit?: number }) {
  checkSource(ctx.config.supplierCode, 'parser', input.parser);
  const reportType = await reportTypeCode(ctx.db, env.id, hashId);
  await compileOnSave(ctx.config.supplierCode, 'parser', input.parser, env.id);
  const stored = await lastParsedPayloads(ctx.db, env.id, hashId, Math.min(input.limit ?? COMPARE_MAX_RUNS, COMPARE_MAX_RUNS));
  const nonce = `${Date.now()}:${Math.random()}`;
  const runs = await mapBounded(stored, COMPARE_CONCURRENCY, async (s) => {
    const device = await deviceOrSample(ctx, env, s.deviceHashId);
    const idBase = `compare:${s.subActivityHashId}:${nonce}`;
    const current = await dryRunParser(ctx, device, reportType, reportType.parser, s.payload, idBase);
    const proposed = await dryRunParser(ctx, device, reportType, input.parser, s.payload, idBase);
    return {
      activityHashId: s.activityHashId,
      subActivityHashId: s.subActivityHashId,
      deviceHashId: s.deviceHashId,
      createdAt: s.createdAt,
      current,
      proposed,
      differs: reportDiffers(current, proposed),
    };
  });
  return { runs, summary: summaryOf(runs) };
}

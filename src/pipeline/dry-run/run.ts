// Dry runs: supplier code run on a sample, answering what a real run would have done, with nothing
// stored, changed or sent. The event handler goes through the worker's own path
// (runDeviceHandler in src/pipeline/process-device-job.ts) with effects that collect instead of act:
// reports are kept, device calls are checked against the device and shown, requests are checked
// against OUTBOUND_* and not made, counters are not counted. Reads (device, scheduled commands,
// report types, quantities, firmware) are the real ones, so an answer names what the real run would
// find. The sandbox has the worker's limits (SANDBOX_*), in isolates of its own.

import type { AppContext, AppStores } from '../../app/context.ts';
import { ParameterError } from '../../app/errors.ts';
import { applyFieldsUpdate, type Fields } from '../../app/fields.ts';
import type { ConditionReportIn } from '../../monitoring/reports/store.ts';
import { DeviceContextLoader, type DeviceRecord, type ReportTypeRecord } from '../device-context.ts';
import { OutboundClient } from '../outbound.ts';
import {
  derivedHashId,
  deviceViewOf,
  parseReport,
  reportingCounterTime,
  runDeviceHandler,
  type LogLine,
  type RunEffects,
  type SubActivity,
} from '../process-device-job.ts';
import { describeRunError, Sandbox, sandboxFromConfig } from '../../sandbox/runner.ts';
import type { SupplierCodeLimits } from '../../sandbox/limits.ts';
import type { CertificateView, ExecCall, HandlerEvent, RunError, WebRequest } from '../../sandbox/types.ts';
import { checkNewCommands, commandForEvent, scheduledCommandsOf } from '../../connectivity/commands/store.ts';
import { offerFirmware } from '../../connectivity/firmware/offer.ts';
import { deviceByIdentifier, deviceFieldConfigurations, deviceTypeCode, deviceTypeExists, identifierCode, reportTypeCode, storedRun } from './store.ts';

/** How a run threw: null when it did not. `line`/`column`: in the supplier's TypeScript source, null when unknown (a time limit). */
export interface DryRunError {
  kind: string;
  message: string;
  line: number | null;
  column: number | null;
}

/** One exec call of the run, as its sub-activity would have recorded it. */
export interface DryRunCall {
  name: string;
  failed: boolean;
  log: LogLine[];
  triggerData: unknown;
}

interface DryRunState {
  sandbox: Sandbox;
  loader: DeviceContextLoader;
  outbound: OutboundClient;
}

/** A context's dry runs (`ctx.dryRuns`): their sandbox, loader and outbound client, made on the first dry run (isolates are not cheap). */
export class DryRuns {
  #state: DryRunState | null = null;
  readonly #stores: Pick<AppStores, 'config' | 'db' | 'log'>;

  constructor(stores: Pick<AppStores, 'config' | 'db' | 'log'>) {
    this.#stores = stores;
  }

  get state(): DryRunState {
    const { config, db, log } = this.#stores;
    this.#state ??= {
      sandbox: sandboxFromConfig(config, log),
      // nothing cached: a dry run right after a save runs what was saved
      loader: new DeviceContextLoader(db, 0),
      outbound: OutboundClient.fromConfig(config),
    };
    return this.#state;
  }

  /** Frees the isolates and connections (a later dry run makes them again). */
  async dispose(): Promise<void> {
    const state = this.#state;
    this.#state = null;
    if (!state) return;
    state.sandbox.dispose();
    await state.outbound.close();
  }
}

declare module '../../app/context.ts' {
  interface AppContext {
    /** the dry runs' sandbox and clients of this context (src/pipeline/dry-run/run.ts) */
    dryRuns: DryRuns;
  }
}

const stateOf = (ctx: AppContext): DryRunState => ctx.dryRuns.state;

/** Frees the dry runs' isolates and connections of this context (the API's close). */
export async function disposeDryRuns(ctx: AppContext): Promise<void> {
  await ctx.dryRuns.dispose();
}

const errorOf = (error: RunError | undefined): DryRunError | null =>
  error ? { kind: error.kind, message: error.message, line: error.line ?? null, column: error.column ?? null } : null;

const callsOf = (activities: SubActivity[]): DryRunCall[] =>
  activities.map((a) => ({ name: a.triggerType, failed: a.failed, log: a.log, triggerData: a.triggerData }));

/** Code given in the body instead of the saved code: the size limit of a save applies. */
export function checkSource(limits: Pick<SupplierCodeLimits, 'maxSourceChars'>, field: string, source: string | undefined): void {
  const max = limits.maxSourceChars;
  if (source !== undefined && source.length > max)
    throw new ParameterError(`${field} is ${source.length} characters long, over the limit of ${max} (SANDBOX_MAX_SOURCE_CHARS)`, { field });
}

/** A device of the environment, by hashId; or, without one, a device of `deviceType` with no fields, commands or history. */
async function deviceFor(
  ctx: AppContext,
  env: { id: number; hashId: string },
  deviceHashId: string | undefined,
  deviceType: { id: number; hashId: string; eventHandler: string } | null,
): Promise<DeviceRecord> {
  if (deviceHashId === undefined) {
    return {
      id: 0,
      hashId: 'dryrun',
      environmentId: env.id,
      environmentHashId: env.hashId,
      supplierDeviceIdentifier: 'dry-run',
      fields: {},
      lastOnlineAt: null,
      nextReportBefore: null,
      link: null,
      deviceType: { id: deviceType?.id ?? 0, hashId: deviceType?.hashId ?? '', eventHandler: deviceType?.eventHandler ?? '', deleted: false },
    };
  }
  const device = await stateOf(ctx).loader.device(deviceHashId);
  // another environment's device is answered like one that does not exist
  if (!device || device.environmentId !== env.id)
    throw new ParameterError(`deviceHashId: device ${deviceHashId} does not exist in this environment`, { field: 'deviceHashId' });
  if (deviceType && device.deviceType.hashId !== deviceType.hashId) {
    throw new ParameterError(`deviceHashId: device ${deviceHashId} is of device type ${device.deviceType.hashId}, not ${deviceType.hashId}`, {
      field: 'deviceHashId',
    });
  }
  return device;
}

/** Effects that change nothing: what the worker would write or send is collected or only checked. */
function collectingEffects(ctx: AppContext, reports: ConditionReportIn[]): RunEffects {
  const state = stateOf(ctx);
  return {
    sandbox: state.sandbox,
    loader: state.loader,
    pushReport: async (report) => {
      reports.push(report);
    },
    applyDeviceCall: (device, call, at) => deviceCallAsShown(ctx, device, call, at),
    offerFirmware: (device, firmwareHashId) =>
      offerFirmware(
        ctx.db,
        { environmentId: device.environmentId, deviceTypeId: device.deviceType.id, deviceTypeHashId: device.deviceType.hashId },
        firmwareHashId,
      ),
    sendRequest: async (args) => state.outbound.wouldSend(args),
    count: () => undefined,
    unmetered: true,
    scheduledCommands: async (deviceId) =>
      deviceId === 0
        ? []
        : ((await scheduledCommandsOf(ctx.db, [deviceId])).get(deviceId) ?? []).map((s) => ({ command: { ...s.command }, commandType: { ...s.commandType } })),
  };
}

/** What a device call's activity would show, checked against the device as it is (a command must be the device's own); throws what the real call would refuse. */
async function deviceCallAsShown(ctx: AppContext, device: DeviceRecord, call: ExecCall, at: Date): Promise<unknown> {
  switch (call.name) {
    case 'markCommandAsSent':
    case 'dropCommand': {
      const found = await commandForEvent(ctx.db, call.args.commandHashId);
      if (!found || found.command.deviceHashId !== device.hashId) throw new Error(`command ${call.args.commandHashId} is not a command of this device`);
      return call.name === 'markCommandAsSent'
        ? { command: found.command, commandType: found.commandType }
        : { command: found.command, commandType: found.commandType, removeFromScheduledCommands: true, markAsDeleted: call.args.markAsDeleted };
    }
    case 'scheduleCommand': {
      // checked as the real call's command add checks it; a device of no type's (no deviceHashId given) is not checked
      const { commandType, fields } = await checkNewCommands(ctx.db, device.environmentId, {
        objectType: 'device',
        objectHashIds: device.id === 0 ? [] : [device.hashId],
        commandTypeHashId: call.args.commandTypeHashId,
        fields: call.args.fields,
        startAt: call.args.startAt,
        endAt: call.args.endAt,
        channelIndices: call.args.channelIndices ?? [],
        email: [],
      });
      return {
        command: {
          deviceHashId: device.hashId,
          commandTypeHashId: commandType.hashId,
          fields,
          startAt: call.args.startAt,
          endAt: call.args.endAt,
          channelIndices: call.args.channelIndices ?? [],
        },
        commandType,
      };
    }
    case 'setDeviceFields': {
      // validated against the device type's field configurations like the real call, and shown as its diff
      const before = device.fields as Fields;
      const after = applyFieldsUpdate(
        await deviceFieldConfigurations(ctx.db, device.deviceType.id),
        before,
        Object.entries(call.args.fields).map(([key, value]) => ({ key, value })),
      );
      const changed = Object.keys(call.args.fields).filter((k) => JSON.stringify(before[k] ?? null) !== JSON.stringify(after[k] ?? null));
      return {
        diff: { old: Object.fromEntries(changed.map((k) => [k, before[k] ?? null])), new: Object.fromEntries(changed.map((k) => [k, after[k] ?? null])) },
      };
    }
    case 'increaseReportingCounter':
      return { at: reportingCounterTime(call.args.at, at).toISOString() };
    default:
      return call.args;
  }
}

export interface DeviceTypeDryRunInput {
  event?: Record<string, unknown>;
  activityHashId?: string;
  eventHandler?: string;
  deviceHashId?: string;
}

const EVENT_OF_TRIGGER: Record<string, 'incomingRequest' | 'newCommand' | 'commandDue' | 'deletedCommand' | 'reportLate'> = {
  handleIncomingRequest: 'incomingRequest',
  handleNewCommand: 'newCommand',
  handleCommandDue: 'commandDue',
  handleDeletedCommand: 'deletedCommand',
  handleReportLate: 'reportLate',
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The event a stored run's handler received, rebuilt from its activity. */
export function replayedEvent(run: { triggerType: string; triggerData: unknown }, activityHashId: string): HandlerEvent {
  const type = EVENT_OF_TRIGGER[run.triggerType];
  const data = run.triggerData;
  const unusable = (why: string) => new ParameterError(`activityHashId: activity ${activityHashId} ${why}`, { field: 'activityHashId' });
  if (!type) throw unusable(`is a ${run.triggerType} run, not a run of the event handler`);
  if (!isObject(data) || data.truncated === true) throw unusable('was stored cut short (ACTIVITY_MAX_BYTES): its event cannot be replayed');
  if (type === 'reportLate') return { type };
  if (type === 'incomingRequest') {
    if (!isObject(data.request) || data.request.truncated === true)
      throw unusable('was stored without its whole request (ACTIVITY_MAX_BYTES): it cannot be replayed');
    return { type, webRequest: data.request as unknown as WebRequest };
  }
  if (!isObject(data.command) || !isObject(data.commandType)) throw unusable('holds no command to replay');
  return { type, command: data.command as never, commandType: data.commandType as never };
}

/** A sample event as the handler's `args.event`: the members its type needs. */
function sampleEvent(event: Record<string, unknown>): HandlerEvent {
  const need = (member: string) => {
    if (!isObject(event[member]))
      throw new ParameterError(`event.${member} is required (an object) for an event of type ${String(event.type)}`, { field: `event.${member}` });
  };
  if (event.type === 'incomingRequest') need('webRequest');
  else if (event.type === 'newCommand' || event.type === 'commandDue' || event.type === 'deletedCommand') ['command', 'commandType'].forEach(need);
  else if (event.type === 'link' || event.type === 'unlink' || event.type === 'linkUpdate') need('pinGroup');
  return event as unknown as HandlerEvent;
}

/** POST /device-type/{hashId}/dry-run */
export async function dryRunDeviceType(ctx: AppContext, env: { id: number; hashId: string }, hashId: string, input: DeviceTypeDryRunInput) {
  if ((input.event === undefined) === (input.activityHashId === undefined)) throw new ParameterError('give either event or activityHashId', { field: 'event' });
  checkSource(ctx.config.supplierCode, 'eventHandler', input.eventHandler);
  const deviceType = await deviceTypeCode(ctx.db, env.id, hashId);
  let event: HandlerEvent;
  let deviceHashId = input.deviceHashId;
  if (input.activityHashId !== undefined) {
    const stored = await storedRun(ctx.db, env.id, input.activityHashId);
    event = replayedEvent(stored, input.activityHashId);
    deviceHashId ??= stored.deviceHashId ?? undefined;
  } else {
    event = sampleEvent(input.event!);
  }
  const device = await deviceFor(ctx, env, deviceHashId, deviceType);
  return dryRunHandler(ctx, device, input.eventHandler ?? deviceType.eventHandler, event, `dry-run:${Date.now()}:${Math.random()}`);
}

/** What a device type dry run answers: `source` run as `device`'s event handler on `event`; what it creates has ids derived from `idBase`. */
export async function dryRunHandler(ctx: AppContext, device: DeviceRecord, source: string, event: HandlerEvent, idBase: string) {
  const reports: ConditionReportIn[] = [];
  const outcome = await runDeviceHandler(collectingEffects(ctx, reports), idBase, device, source, event, new Date());
  return {
    answer: outcome.answer,
    error: errorOf(outcome.run.ok ? undefined : outcome.run.error),
    failed: !outcome.run.ok,
    log: outcome.log,
    calls: callsOf(outcome.activities),
  };
}

/** A device type dry run's answer. */
export type DeviceTypeDryRun = Awaited<ReturnType<typeof dryRunHandler>>;

/** The device of a stored run as it is now, or (gone, or no longer of `deviceType`) a device of `deviceType` with no fields, commands or history. */
export async function deviceOfStoredRun(
  ctx: AppContext,
  env: { id: number; hashId: string },
  deviceHashId: string | null,
  deviceType: { id: number; hashId: string; eventHandler: string },
): Promise<DeviceRecord> {
  const device = deviceHashId === null ? null : await stateOf(ctx).loader.device(deviceHashId);
  if (device && device.environmentId === env.id && device.deviceType.hashId === deviceType.hashId) return device;
  return deviceFor(ctx, env, undefined, deviceType);
}

/** POST /supplier-report-type/{hashId}/dry-run */
export async function dryRunReportType(
  ctx: AppContext,
  env: { id: number; hashId: string },
  hashId: string,
  input: { payload: string; parser?: string; deviceHashId?: string },
) {
  checkSource(ctx.config.supplierCode, 'parser', input.parser);
  const reportType = await reportTypeCode(ctx.db, env.id, hashId);
  const device = await deviceFor(ctx, env, input.deviceHashId, null);
  return dryRunParser(ctx, device, reportType, input.parser ?? reportType.parser, input.payload, `dry-run:${Date.now()}:${Math.random()}`);
}

/** What a report type dry run answers: `parser` run as `reportType`'s on `payload` for `device`; the report's ids derive from `idBase`. */
export async function dryRunParser(
  ctx: AppContext,
  device: DeviceRecord,
  reportType: { hashId: string; name: unknown },
  parser: string,
  payload: string,
  idBase: string,
) {
  const reports: ConditionReportIn[] = [];
  const effects = collectingEffects(ctx, reports);
  const hashId = reportType.hashId;
  // the report type as the run reads it, with the parser given
  const loader: RunEffects['loader'] = {
    reportType: async (environmentId, h) =>
      h === hashId ? { id: 0, hashId, name: reportType.name as ReportTypeRecord['name'], parser } : effects.loader.reportType(environmentId, h),
    quantitiesOf: (environmentId) => effects.loader.quantitiesOf(environmentId),
  };
  const parsed = await parseReport(
    { ...effects, loader },
    device,
    deviceViewOf(device),
    { reportTypeHashId: hashId, payload, generatedAt: null },
    derivedHashId(idBase, 'parse'),
  );
  const report = reports[0];
  return {
    report: report
      ? {
          generatedAt: report.generatedAt,
          fields: report.fields,
          measurements: report.measurements.map((m) => ({
            channelIndex: m.channelIndex,
            channelMeasurementIndex: m.channelMeasurementIndex,
            quantityHashId: m.quantityHashId,
            generatedAt: m.generatedAt,
            orderOfMagnitude: m.orderOfMagnitude,
            significand: m.significand,
          })),
        }
      : null,
    error: errorOf(parsed.error),
    failed: parsed.activity.failed,
    log: parsed.activity.log,
  };
}

/** A report type dry run's answer. */
export type ReportTypeDryRun = Awaited<ReturnType<typeof dryRunParser>>;

/** A device of the environment as it is now, or (gone) a device with no fields or history (what a parser's args.device shows). */
export async function deviceOrSample(ctx: AppContext, env: { id: number; hashId: string }, deviceHashId: string | null): Promise<DeviceRecord> {
  const device = deviceHashId === null ? null : await stateOf(ctx).loader.device(deviceHashId);
  return device && device.environmentId === env.id ? device : deviceFor(ctx, env, undefined, null);
}

/** POST /supplier-webhook/{hashId}/dry-run and /supplier-certificate/{hashId}/dry-run: the identifier, and the device it names. */
export async function dryRunIdentifier(
  ctx: AppContext,
  env: { id: number; hashId: string },
  kind: 'webhook' | 'certificate',
  hashId: string,
  input: { request?: Record<string, unknown>; certificate?: Record<string, unknown>; identifier?: string },
) {
  checkSource(ctx.config.supplierCode, 'identifier', input.identifier);
  const saved = await identifierCode(ctx.db, kind, env.id, hashId);
  const args: { request: WebRequest } | { certificate: CertificateView } =
    kind === 'webhook' ? { request: input.request as unknown as WebRequest } : { certificate: input.certificate as unknown as CertificateView };
  const run = await stateOf(ctx).sandbox.runIdentifier({ isolationKey: env.hashId, source: input.identifier ?? saved, args });
  const log: LogLine[] = [
    ...run.logs.map((message): LogLine => ({ type: 'log', message })),
    ...run.errors.map((message): LogLine => ({ type: 'error', message })),
  ];
  if (!run.ok) {
    log.push({ type: 'error', message: describeRunError(run.error) });
    return { result: null, device: null, error: errorOf(run.error), failed: true, log };
  }
  // what find-or-create would do with the answer, without creating anything
  const existing = await deviceByIdentifier(ctx.db, env.id, run.result.deviceIdentifier);
  if (!existing && !(await deviceTypeExists(ctx.db, env.id, run.result.deviceTypeHashId))) {
    log.push({ type: 'error', message: `device type ${run.result.deviceTypeHashId} does not exist in this environment: no device would be created` });
    return { result: run.result, device: null, error: null, failed: true, log };
  }
  return {
    result: run.result,
    device: existing
      ? { hashId: existing.hashId, deviceTypeHashId: existing.deviceTypeHashId, created: false }
      : { hashId: null, deviceTypeHashId: run.result.deviceTypeHashId, created: true },
    error: null,
    failed: false,
    log,
  };
}

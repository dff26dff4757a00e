import { hash } from 'node:crypto';
import { reportDateProblem } from '../sandbox/report-dates.ts';
import { metrics } from '../app/metrics.ts';
import { hasUnstorable, replacedMessage, storableValue, unstorablePath } from '../app/storable.ts';
import { describeRunError, type Sandbox } from '../sandbox/runner.ts';
import type { CommandTypeView, CommandView, ExecCall, HandlerEvent, HandlerRun, ParsedReport, RunError } from '../sandbox/types.ts';
import type { ConditionReportIn } from '../monitoring/reports/store.ts';
import type { ActivityRow } from '../connectivity/activities/store.ts';
import { FIRMWARE_OFFER_HEADER, type FirmwareOffer } from '../connectivity/firmware/offer.ts';
import { MAX_REQUESTS_PER_RUN, type OutboundOutcome, type SendRequestArgs } from './outbound.ts';
import type { DeviceContextLoader, DeviceRecord } from './device-context.ts';
import type { DeviceAnswer, DeviceEventJob, DeviceJob, DeviceJobResult } from '../connectivity/device-jobs.ts';

/**
 * What one run of the event handler reads and does: each is a real store or client, passed in so the
 * logic is testable alone. The worker's perform the effects (reports pushed, device calls applied,
 * requests sent); a dry run's (src/connectivity/dry-run/) collect them and change nothing.
 */
export interface RunEffects {
  sandbox: Sandbox;
  loader: Pick<DeviceContextLoader, 'reportType' | 'quantitiesOf'>;
  pushReport(report: ConditionReportIn): Promise<void>;
  /** resolves to the activity's triggerData when it is not simply the call's arguments */
  /** `callHashId` is stable across retries of the job: what a call creates can take it as its id */
  applyDeviceCall(device: DeviceRecord, call: ExecCall, at: Date, callHashId: string): Promise<unknown>;
  /** exec.offerFirmware: an image of the device's own type, or why not (src/connectivity/firmware/offer.ts) */
  offerFirmware(device: DeviceRecord, firmwareHashId: string): Promise<FirmwareOffer>;
  /** exec.sendRequest, made after the run (src/pipeline/outbound.ts) */
  sendRequest(args: SendRequestArgs, idempotencyKey: string): Promise<OutboundOutcome>;
  /** a connectivity counter of the device (src/connectivity/counters/): never waits */
  count(deviceHashId: string, key: string, at: Date): void;
  /** `args.scheduledCommands`: the device's commands not yet sent or dropped, oldest first */
  scheduledCommands(deviceId: number): Promise<ScheduledCommand[]>;
  /** true for a dry run's: its runs are not counted on /metrics among the runs of devices' code */
  unmetered?: boolean;
}

/** What processing a queued job needs besides a run's effects. */
export interface ProcessDeps extends RunEffects {
  loader: DeviceContextLoader;
  writeActivity(row: ActivityRow): Promise<void>;
  touchDevice(deviceId: number, at: Date): Promise<void>;
  /** the command a command event names (deleted ones included), or null */
  commandOfEvent(commandHashId: string): Promise<(ScheduledCommand & { droppedAt: string | null }) | null>;
  /** reportLate: whether expectation `before`, set at `setAt`, still stands with no contact since */
  reportStillLate(deviceId: number, before: string, setAt: string): Promise<boolean>;
}

export interface ScheduledCommand {
  command: CommandView;
  commandType: CommandTypeView;
}

const EVENT_TRIGGERS = {
  newCommand: 'handleNewCommand',
  commandDue: 'handleCommandDue',
  deletedCommand: 'handleDeletedCommand',
  reportLate: 'handleReportLate',
} as const;

const COUNTER_PAST_LIMIT_MS = 48 * 3600_000;
const COUNTER_FUTURE_LIMIT_MS = 24 * 3600_000;

/** The time exec.increaseReportingCounter counts at (`at`, else the run's); throws for a time the counters cannot take. */
export function reportingCounterTime(at: string | null, runAt: Date): Date {
  const when = at ? new Date(at) : runAt;
  // hours outside this window may no longer (or not yet) have their Redis hash: the count could be lost
  if (when.getTime() < runAt.getTime() - COUNTER_PAST_LIMIT_MS || when.getTime() > runAt.getTime() + COUNTER_FUTURE_LIMIT_MS) {
    throw new Error('increaseReportingCounter: at may lie at most 48 hours in the past and 24 hours in the future');
  }
  return when;
}

/** The activity's triggerType of a job: the handler function the SDK names for its event. */
export const triggerTypeOf = (job: DeviceJob): string => (job.kind === 'event' ? EVENT_TRIGGERS[job.event.type] : 'handleIncomingRequest');

/** The handler event of an event job and what its activity shows, or null when the event no longer applies. */
async function resolveEvent(
  deps: ProcessDeps,
  deviceHashId: string,
  deviceId: number,
  job: DeviceEventJob,
): Promise<{ event: HandlerEvent; triggerData: unknown } | null> {
  const e = job.event;
  if (e.type === 'reportLate') {
    // a newer expectation, or a contact since this one was set, makes the job a no-op
    return (await deps.reportStillLate(deviceId, e.before, e.setAt)) ? { event: { type: 'reportLate' }, triggerData: {} } : null;
  }
  const found = await deps.commandOfEvent(e.commandHashId);
  if (!found || found.command.deviceHashId !== deviceHashId) return null;
  // a command deleted or dropped before it fell due is not due any more
  if (e.type === 'commandDue' && (found.command.deletedAt || found.droppedAt)) return null;
  const shown = { command: found.command, commandType: found.commandType };
  return { event: { type: e.type, ...shown }, triggerData: shown };
}

export interface LogLine {
  type: 'log' | 'error';
  message: string;
}
export interface SubActivity {
  hashId: string;
  createdAt: string;
  triggerType: string;
  failed: boolean;
  log: LogLine[];
  triggerData: unknown;
}

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** Ids derived from the job id: a retried job produces the same report and activity ids, so nothing is stored twice. */
export function derivedHashId(jobId: string, label: string): string {
  // the digest as a 'binary' (latin1) string, one character per byte: a Buffer result costs five times as much here
  const digest = hash('sha256', `${jobId}:${label}`, 'binary');
  // 12 characters from 12 digest bytes (the modulo bias is irrelevant for identifiers); a letter first
  let out = ALPHABET[digest.charCodeAt(0) % 26];
  for (let i = 1; i < 12; i++) out += ALPHABET[digest.charCodeAt(i) % 36];
  return out;
}

/** A store write awaited later: marked handled now so a failure before the await cannot crash the process. */
function handledLater(p: Promise<void>): Promise<void> {
  p.catch(() => undefined);
  return p;
}

/** A sandbox run counted and timed on /metrics by kind and outcome. */
async function measured<R extends { ok: true } | { ok: false; error: { kind: string } }>(
  effects: RunEffects,
  kind: 'handler' | 'parser',
  running: Promise<R>,
): Promise<R> {
  if (effects.unmetered) return running;
  const end = metrics.sandboxSeconds.startTimer({ kind });
  const run = await running;
  end();
  metrics.sandboxRuns.inc({ kind, outcome: run.ok ? 'ok' : run.error.kind });
  return run;
}

/** A run's log: its exec.addLog lines, then the limits it hit and what was refused, as error lines. */
const logsOf = (run: { logs: string[]; errors: string[] }): LogLine[] => [
  ...run.logs.map((message): LogLine => ({ type: 'log', message })),
  ...run.errors.map((message): LogLine => ({ type: 'error', message })),
];

function failureAnswer(run: Extract<HandlerRun, { ok: false }>): DeviceAnswer {
  const status = run.error.kind === 'timeout' ? 504 : 500;
  return {
    statusCode: status,
    headers: {},
    body: { type: 'json', data: { key: 'handler_error', message: `The device type's event handler failed (${run.error.kind})` } },
  };
}

/**
 * Runs one device contact or device event: the event handler, then what it asked for (reports,
 * device updates, commands). Only a contact is answered; an event's result carries no answer.
 * `storing` is called once the supplier's code and the device's calls are done and only the
 * store writes remain to be awaited (the worker gives back the supplier's slot there).
 */
export async function processDeviceJob(deps: ProcessDeps, jobId: string, job: DeviceJob, storing?: () => void): Promise<DeviceJobResult> {
  const startedAt = new Date();
  const activityHashId = derivedHashId(jobId, 'activity');
  const device = await deps.loader.device(job.deviceHashId);
  if (job.kind === 'event' && (!device || device.deviceType.deleted)) return { answer: null, activityHashId, failed: false };
  if (!device || device.deviceType.deleted) {
    if (device && job.kind === 'incomingRequest') {
      deps.count(device.hashId, 'contacts', new Date(job.receivedAt));
      deps.count(device.hashId, 'refusedContacts', new Date(job.receivedAt));
    }
    return {
      answer: { statusCode: 403, headers: {}, body: { type: 'json', data: { key: 'right_error', message: 'This device no longer has access' } } },
      activityHashId,
      failed: true,
    };
  }
  let event: HandlerEvent;
  let eventTriggerData: unknown = null;
  if (job.kind === 'event') {
    const resolved = await resolveEvent(deps, device.hashId, device.id, job);
    if (!resolved) return { answer: null, activityHashId, failed: false };
    ({ event, triggerData: eventTriggerData } = resolved);
    if (event.type === 'reportLate') deps.count(device.hashId, 'reportsLate', startedAt);
  } else {
    event = { type: 'incomingRequest', webRequest: job.webRequest };
  }
  // an event is not a contact: only requests move lastOnlineAt
  const touched = job.kind === 'event' ? Promise.resolve() : handledLater(deps.touchDevice(device.id, new Date(job.receivedAt)));
  // every queued request is a contact, whichever listener (HTTPS, CoAP, webhook) authenticated it
  if (job.kind === 'incomingRequest') deps.count(device.hashId, 'contacts', new Date(job.receivedAt));
  // reports are pushed while the activity is written: both must be stored before the job completes
  const stored: Promise<void>[] = [touched];
  const outcome = await runDeviceHandler(deps, jobId, device, device.deviceType.eventHandler, event, startedAt);
  stored.push(...outcome.stored);
  const { run, answer, log, activities } = outcome;
  stored.push(
    deps.writeActivity({
      hashId: activityHashId,
      environmentId: device.environmentId,
      deviceId: device.id,
      deviceTypeId: device.deviceType.id,
      triggerType: triggerTypeOf(job),
      triggerData: job.kind === 'event' ? eventTriggerData : { request: job.webRequest, response: answer },
      failed: !run.ok,
      log,
      activities,
      startedAt,
      finishedAt: new Date(),
    }),
  );
  storing?.();
  // every write settles before the job may fail: none is still in flight when a retry or a give-up writes the same rows
  const refused = (await Promise.allSettled(stored)).find((s) => s.status === 'rejected');
  if (refused) throw refused.reason;
  return { answer, activityHashId, failed: !run.ok };
}

/** `args.device`: what supplier code sees of a device. */
export const deviceViewOf = (device: DeviceRecord) => ({
  hashId: device.hashId,
  supplierDeviceIdentifier: device.supplierDeviceIdentifier,
  deviceTypeHashId: device.deviceType.hashId,
  fields: device.fields,
  lastOnlineAt: device.lastOnlineAt,
  nextReportBefore: device.nextReportBefore,
});

/** What one run of the event handler made: the device's answer (null for an event), the activity's log and sub-activities, and the store writes it started. */
export interface HandlerOutcome {
  run: HandlerRun;
  answer: DeviceAnswer | null;
  log: LogLine[];
  activities: SubActivity[];
  /** the reports pushed (through `effects.pushReport`), still being stored */
  stored: Promise<void>[];
}

/**
 * Runs `source` as the event handler of `device` on `event`, then what it asked for, through
 * `effects`: the one path both a queued job and a dry run take. Ids of what it creates derive
 * from `idBase`. Only an incomingRequest is answered.
 */
export async function runDeviceHandler(
  effects: RunEffects,
  idBase: string,
  device: DeviceRecord,
  source: string,
  event: HandlerEvent,
  startedAt: Date,
): Promise<HandlerOutcome> {
  const answering = event.type === 'incomingRequest';
  const deviceView = deviceViewOf(device);
  const scheduledCommands = await effects.scheduledCommands(device.id);
  const run = await measured(
    effects,
    'handler',
    effects.sandbox.runEventHandler({
      isolationKey: device.environmentHashId,
      source,
      args: { device: deviceView, scheduledCommands, event },
    }),
  );

  const log = logsOf(run);
  if (!run.ok) {
    log.push({ type: 'error', message: describeRunError(run.error) });
    effects.count(device.hashId, 'handlerFailures', startedAt);
  }
  const activities: SubActivity[] = [];
  const work: Promise<void>[] = [];
  const stored: Promise<void>[] = [];
  const offers: string[] = [];
  let requests = 0;
  run.calls.forEach((call, index) => {
    const hashId = derivedHashId(idBase, `call:${index}`);
    if (call.name === 'parseReport') {
      work.push(
        parseReport(effects, device, deviceView, call.args, hashId).then((a) => {
          activities[index] = a.activity;
          effects.count(device.hashId, a.activity.failed ? 'reportFailures' : 'reports', startedAt);
          if (a.pushed) stored.push(a.pushed);
        }),
      );
    } else if (call.name === 'offerFirmware' || call.name === 'sendRequest') {
      const at = new Date().toISOString();
      const outcome =
        call.name === 'offerFirmware'
          ? offerActivity(effects, device, call.args.firmwareHashId, answering ? offers : null, index)
          : requestActivity(effects, call.args, ++requests, hashId);
      work.push(
        outcome.then((o) => {
          activities[index] = { hashId, createdAt: at, triggerType: call.name, ...o };
        }),
      );
    } else {
      const at = new Date();
      // a device's fields and commands are kept as given or not at all: text PostgreSQL cannot store refuses the call
      const unstorable = unstorablePath(call.args);
      if (unstorable) {
        activities[index] = {
          hashId,
          createdAt: at.toISOString(),
          triggerType: call.name,
          failed: true,
          log: [
            {
              type: 'error',
              message: `not applied: ${call.name} argument ${unstorable} holds a NUL character or an unpaired surrogate, which cannot be stored`,
            },
          ],
          triggerData: call.args,
        };
        return;
      }
      work.push(
        effects.applyDeviceCall(device, call, at, hashId).then(
          (triggerData) => {
            activities[index] = { hashId, createdAt: at.toISOString(), triggerType: call.name, failed: false, log: [], triggerData: triggerData ?? call.args };
          },
          (err: Error) => {
            activities[index] = {
              hashId,
              createdAt: at.toISOString(),
              triggerType: call.name,
              failed: true,
              log: [{ type: 'error', message: err.message }],
              triggerData: call.args,
            };
          },
        ),
      );
    }
  });
  await Promise.all(work);

  const answer: DeviceAnswer | null = !answering
    ? null
    : run.ok
      ? run.result
        ? { statusCode: run.result.statusCode, headers: run.result.headers, body: run.result.body }
        : { statusCode: 204, headers: {}, body: null }
      : failureAnswer(run);
  const offered = offers.filter((o) => o !== undefined);
  if (answer && run.ok && offered.length > 0) answer.headers = { ...answer.headers, [FIRMWARE_OFFER_HEADER]: offered.join(', ') };
  return { run, answer, log, activities, stored };
}

/** exec.parseReport: the report type's parser on the payload, the report pushed; `error`: how the parser failed, if it ran and failed. */
export async function parseReport(
  deps: RunEffects,
  device: DeviceRecord,
  deviceView: Record<string, unknown>,
  args: { reportTypeHashId: string; payload: string; generatedAt: string | null },
  hashId: string,
): Promise<{ activity: SubActivity; pushed?: Promise<void>; error?: RunError }> {
  const createdAt = new Date().toISOString();
  const base = { hashId, createdAt, triggerType: 'parseReport' };
  const reportType = hasUnstorable(args.reportTypeHashId) ? null : await deps.loader.reportType(device.environmentId, args.reportTypeHashId);
  if (!reportType) {
    return {
      activity: {
        ...base,
        failed: true,
        log: [{ type: 'error', message: `report type ${args.reportTypeHashId} does not exist in this environment` }],
        triggerData: { payload: args.payload },
      },
    };
  }
  const run = await measured(
    deps,
    'parser',
    deps.sandbox.runReportParser({
      isolationKey: device.environmentHashId,
      source: reportType.parser,
      args: { payload: args.payload, device: deviceView as never },
    }),
  );
  const triggerData: Record<string, unknown> = { reportType: { hashId: reportType.hashId, name: reportType.name }, payload: args.payload };
  const log = logsOf(run);
  if (!run.ok) {
    log.push({ type: 'error', message: describeRunError(run.error) });
    return { activity: { ...base, failed: true, log, triggerData }, error: run.error };
  }
  const report: ParsedReport = run.result;
  const quantities = await deps.loader.quantitiesOf(device.environmentId);
  const unknown = report.measurements.findIndex((m) => !quantities.has(m.quantityHashId));
  if (unknown >= 0) {
    log.push({
      type: 'error',
      message: `measurements[${unknown}].quantityHashId ${report.measurements[unknown].quantityHashId} is not a quantity of this environment`,
    });
    return { activity: { ...base, failed: true, log, triggerData } };
  }
  const perChannel = new Map<number, number>();
  const generatedAt = args.generatedAt ?? report.generatedAt;
  // the handler's own generatedAt (exec.parseReport's argument) overrides the parser's: the same window holds for it
  const dateProblem = args.generatedAt === null ? null : reportDateProblem(new Date(args.generatedAt));
  if (dateProblem) {
    log.push({ type: 'error', message: `generatedAt ${args.generatedAt} given to exec.parseReport ${dateProblem}` });
    return { activity: { ...base, failed: true, log, triggerData } };
  }
  // the report is stored with what PostgreSQL cannot hold replaced, and its activity says so
  const payload = storableValue(args.payload);
  const fields = storableValue(report.fields ?? {});
  if (payload.replaced > 0) log.push({ type: 'error', message: replacedMessage(payload.replaced, 'the payload as stored with the report') });
  if (fields.replaced > 0) log.push({ type: 'error', message: replacedMessage(fields.replaced, "the report's fields") });
  const reportIn: ConditionReportIn = {
    hashId: derivedHashId(hashId, 'report'),
    environmentHashId: device.environmentHashId,
    deviceHashId: device.hashId,
    reportTypeHashId: reportType.hashId,
    generatedAt,
    fields: fields.value,
    payload: payload.value,
    // a linked device's measurements land on the pins its channels map to (the store checks the link still stands)
    linkId: device.link?.id ?? null,
    measurements: report.measurements.map((m, i) => {
      const channelMeasurementIndex = perChannel.get(m.channelIndex) ?? 0;
      perChannel.set(m.channelIndex, channelMeasurementIndex + 1);
      return {
        hashId: derivedHashId(hashId, `m${i}`),
        channelIndex: m.channelIndex,
        channelMeasurementIndex,
        quantityHashId: m.quantityHashId,
        generatedAt: m.generatedAt,
        orderOfMagnitude: m.orderOfMagnitude,
        significand: m.significand,
        pinId: device.link?.pins[m.channelIndex] ?? null,
      };
    }),
  };
  const pushed = handledLater(deps.pushReport(reportIn));
  triggerData.reportHashId = reportIn.hashId;
  triggerData.fields = reportIn.fields;
  triggerData.observations = reportIn.measurements.map((m) => ({
    measurement: {
      hashId: m.hashId,
      reportHashId: reportIn.hashId,
      generatedAt: m.generatedAt,
      channelIndex: m.channelIndex,
      channelMeasurementIndex: m.channelMeasurementIndex,
      pinHashId: null,
      orderOfMagnitude: m.orderOfMagnitude,
      significand: m.significand,
    },
    quantity: quantities.get(m.quantityHashId),
  }));
  return { activity: { ...base, failed: false, log, triggerData }, pushed };
}

type CallOutcome = Pick<SubActivity, 'failed' | 'log' | 'triggerData'>;

/** exec.offerFirmware: the reference goes into the answer (`offers[index]`, in call order), the outcome onto the activity. */
async function offerActivity(deps: RunEffects, device: DeviceRecord, firmwareHashId: string, offers: string[] | null, index: number): Promise<CallOutcome> {
  if (!offers)
    return {
      failed: true,
      log: [{ type: 'error', message: 'not offered: only the answer to a device request can carry firmware; this event has none' }],
      triggerData: { firmwareHashId },
    };
  if (hasUnstorable(firmwareHashId))
    return {
      failed: true,
      log: [{ type: 'error', message: 'not offered: the firmwareHashId holds a NUL character or an unpaired surrogate' }],
      triggerData: { firmwareHashId },
    };
  const offer = await deps.offerFirmware(device, firmwareHashId);
  if (!offer.ok) return { failed: true, log: [{ type: 'error', message: offer.message }], triggerData: { firmwareHashId } };
  offers[index] = offer.reference;
  return {
    failed: false,
    log: [{ type: 'log', message: `${FIRMWARE_OFFER_HEADER}: ${offer.reference}` }],
    triggerData: { firmwareHashId, firmware: offer.firmware },
  };
}

/** exec.sendRequest, the `nth` of the run: made now, after the run, with its result (or refusal) on the activity; the sub-activity's hashId is its Idempotency-Key. */
async function requestActivity(deps: RunEffects, args: SendRequestArgs, nth: number, hashId: string): Promise<CallOutcome> {
  if (nth > MAX_REQUESTS_PER_RUN) {
    return {
      failed: true,
      log: [{ type: 'error', message: `not sent: at most ${MAX_REQUESTS_PER_RUN} sendRequest calls per run` }],
      triggerData: { request: args },
    };
  }
  const outcome = await deps.sendRequest(args, hashId);
  return { failed: outcome.failed, log: [{ type: outcome.failed ? 'error' : 'log', message: outcome.message }], triggerData: outcome.triggerData };
}

// Shapes shared between the sandbox runner and the pipeline. See
// /work/shared/design/UDF-CONTRACT.md for the contract the supplier code is written against.
//
// Dates: on the way IN, any `DateLike` may be a `Date` or an ISO string (args are sent into the
// sandbox as JSON and revived to `Date` objects there). On the way OUT (calls, results), every
// date is an ISO-8601 string.

export type DateLike = Date | string;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface SubjectPart {
  encoding: 'utf8' | 'hex';
  value: string;
}

export interface Subject {
  key: SubjectPart;
  value: SubjectPart;
}

export interface CertificateView {
  /** subjects[i] = attributes of certificate i of the verified chain, the device's own first. */
  subjects: Subject[][];
}

export type WebRequestBody = { type: 'json'; data: Json } | { type: 'string'; data: string } | { type: 'hex'; data: string };

/** Exactly as in UDF-CONTRACT.md. */
export interface WebRequest {
  url: { protocol: 'https' | 'coaps' | 'coap'; host: string; path: string; query: Record<string, string | string[]> };
  /** upper case, as on the wire */
  method: string;
  /** CoAP options appear here by name */
  headers: Record<string, string | string[]>;
  body?: WebRequestBody;
  ip: string;
  certificate: CertificateView | null;
  pskIdentity?: string;
}

export interface DeviceView {
  hashId: string;
  supplierDeviceIdentifier: string;
  deviceTypeHashId: string;
  fields: Record<string, unknown>;
  lastOnlineAt: DateLike | null;
  nextReportBefore: DateLike | null;
}

/**
 * A command as shown to the handler. Top-level date properties (startAt, endAt, createdAt,
 * updatedAt, sentAt, droppedAt, deletedAt, dueAt) are revived to `Date` inside the sandbox;
 * `fields` is passed through untouched.
 */
export interface CommandView {
  hashId: string;
  commandTypeHashId: string;
  fields: Record<string, unknown>;
  startAt: DateLike | null;
  endAt: DateLike | null;
  createdAt: DateLike;
  sentAt?: DateLike | null;
  channelIndices?: number[] | null;
  [key: string]: unknown;
}

export interface CommandTypeView {
  hashId: string;
  name?: string | Record<string, string | { singular: string; plural: string }>;
  [key: string]: unknown;
}

export interface PinGroupView {
  hashId: string;
  [key: string]: unknown;
}

export type HandlerEvent =
  | { type: 'incomingRequest'; webRequest: WebRequest }
  | { type: 'newCommand' | 'commandDue' | 'deletedCommand'; command: CommandView; commandType: CommandTypeView }
  | { type: 'link' | 'unlink' | 'linkUpdate'; pinGroup: PinGroupView; channelMapping: unknown }
  | { type: 'reportLate' };

export interface EventHandlerArgs {
  device: DeviceView;
  /** the device's commands not yet marked sent or dropped, oldest first */
  scheduledCommands: { command: CommandView; commandType: CommandTypeView }[];
  event: HandlerEvent;
}

export interface ParserArgs {
  payload: string;
  device: DeviceView;
  pinGroup?: unknown;
}

export type IdentifierArgs = { request: WebRequest } | { certificate: CertificateView };

/** Body of an outbound request or of a response, normalised to the typed form. */
export type TypedBody = WebRequestBody;

/**
 * One `exec.*` call made by an event handler, recorded as plain data (the host performs it
 * after the run). Dates are ISO strings.
 */
export type ExecCall =
  | { name: 'parseReport'; args: { reportTypeHashId: string; payload: string; generatedAt: string | null } }
  | { name: 'markCommandAsSent'; args: { commandHashId: string } }
  | { name: 'dropCommand'; args: { commandHashId: string; markAsDeleted: boolean } }
  | {
      name: 'scheduleCommand';
      args: {
        commandTypeHashId: string;
        fields: Record<string, Json>;
        startAt: string | null;
        endAt: string | null;
        channelIndices: number[] | null;
      };
    }
  | { name: 'setDeviceFields'; args: { fields: Record<string, Json> } }
  /** at = null: the host uses the time of the run */
  | { name: 'increaseReportingCounter'; args: { at: string | null } }
  | { name: 'expectNextReportBefore'; args: { before: string | null } }
  | {
      name: 'sendRequest';
      args: { url: string; method: string; headers: Record<string, string | string[]>; body: TypedBody | null };
    }
  | { name: 'offerFirmware'; args: { firmwareHashId: string } };

export type ExecCallName = ExecCall['name'];

/** The handler's answer to an `incomingRequest` event, normalised (body always typed). */
export interface IncomingRequestResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: TypedBody | null;
}

export interface ParsedMeasurement {
  channelIndex: number;
  quantityHashId: string;
  /** ISO */
  generatedAt: string;
  orderOfMagnitude: number;
  significand: number;
}

export interface ParsedReport {
  /** ISO */
  generatedAt: string;
  measurements: ParsedMeasurement[];
  fields?: Record<string, unknown>;
}

export interface IdentifierResult {
  deviceTypeHashId: string;
  deviceIdentifier: string;
}

export type RunErrorKind = 'error' | 'timeout' | 'memory' | 'compile' | 'invalid-result';

export interface RunError {
  kind: RunErrorKind;
  message: string;
  /** supplier-facing stack (positions mapped back to the TypeScript source where possible) */
  stack?: string;
  /** 1-based position in the supplier's TypeScript source: of a compile error, or of the innermost frame of their code that threw */
  line?: number;
  column?: number;
}

/**
 * `logs`: the code's exec.addLog lines; `errors`: lines for the run's log of type error, each naming
 * what was refused or cut and the limit (log lines dropped, exec calls refused, answer headers refused).
 */
export type RunOutcome<R> =
  | { ok: true; result: R; calls: ExecCall[]; logs: string[]; errors: string[]; durationMs: number }
  | { ok: false; error: RunError; calls: ExecCall[]; logs: string[]; errors: string[]; durationMs: number };

export type HandlerRun = RunOutcome<IncomingRequestResponse | null>;
export type ParserRun = RunOutcome<ParsedReport>;
export type IdentifierRun = RunOutcome<IdentifierResult>;

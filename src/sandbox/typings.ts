// The ambient declarations supplier code is written against (/work/shared/design/UDF-CONTRACT.md), as
// .d.ts text an editor loads beside the code so it completes and checks `args` and `exec`. The code
// itself never declares them and the compile on save never reads them (it only strips types), so these
// texts are the one place that writes them down: they follow what src/sandbox/runtime.ts hands to
// `handle` (dates revived to Date objects, the exec functions and what they accept) and what the
// runner takes back (src/sandbox/types.ts). Each kind of code gets a file of its own, because `Arguments`,
// `Exec` and `Result` mean something different to each.

/** The four kinds of supplier code, each with its typings beside its resource's routes. */
export const TYPINGS_KINDS = ['eventHandler', 'parser', 'webhookIdentifier', 'certificateIdentifier'] as const;
export type TypingsKind = (typeof TYPINGS_KINDS)[number];

const HEADER = (what: string) => `// Declarations of what ${what} receives and may return, for your editor: save this file beside
// your code (or reference it with /// <reference path="typings.d.ts" />). Your code never declares these
// itself: the service strips types on save and runs handle(args, exec) in its sandbox (no Node.js, no
// network, no timers; Date, JSON, Math and typed arrays are there).
`;

const COMMON = `
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One attribute of a certificate subject: key.value is the short name (CN, O, OU, serialNumber, ...) or the dotted OID. */
interface Subject {
  key: { encoding: 'utf8' | 'hex'; value: string };
  value: { encoding: 'utf8' | 'hex'; value: string };
}

/** A verified client certificate chain: subjects[i] lists the attributes of certificate i, the device's own first. */
interface Certificate {
  subjects: Subject[][];
}

/** A request body: JSON (content-type or CoAP Content-Format 50), text (text/*, Content-Format 0), anything else as hex. */
type WebRequestBody = { type: 'json'; data: Json } | { type: 'string'; data: string } | { type: 'hex'; data: string };

/** A request of a device (HTTPS, CoAP) or to a supplier webhook. */
interface WebRequest {
  /** path: relative to the endpoint reached, '/' for a webhook's own URL and a CoAP request without Uri-Path */
  url: { protocol: 'https' | 'coaps' | 'coap'; host: string; path: string; query: Record<string, string | string[]> };
  /** upper case, as on the wire */
  method: string;
  /** CoAP options appear here by name */
  headers: Record<string, string | string[]>;
  body?: WebRequestBody;
  ip: string;
  certificate: Certificate | null;
  pskIdentity?: string;
}

type Bytes = Uint8Array | ArrayBuffer | ArrayBufferView;

/** What every kind of code gets as exec. */
interface BasicExec {
  /** a line in the run's log (the activity log); its values are joined with spaces */
  addLog(...values: unknown[]): void;
  base64ToUInt8Array(base64: string): Uint8Array;
  uInt8ArrayToBase64(bytes: Bytes): string;
  hexToUInt8Array(hex: string): Uint8Array;
  uInt8ArrayToHex(bytes: Bytes): string;
}
`;

const DEVICE = `
interface Device {
  hashId: string;
  supplierDeviceIdentifier: string;
  deviceTypeHashId: string;
  fields: Record<string, Json>;
  lastOnlineAt: Date | null;
  nextReportBefore: Date | null;
}

/** The location a device is linked to. */
interface PinGroup {
  hashId: string;
  [key: string]: unknown;
}
`;

const EVENT_HANDLER = `${HEADER("a device type's event handler")}${COMMON}${DEVICE}
type Translations = Record<string, string | { singular: string; plural: string }>;

interface Command {
  hashId: string;
  deviceHashId: string;
  commandTypeHashId: string;
  fields: Record<string, Json>;
  pinGroupHashId: string | null;
  userHashId: string | null;
  startAt: Date | null;
  delay: number;
  endAt: Date | null;
  channelIndices: number[];
  email: string[];
  createdAt: Date;
  deletedAt: Date | null;
  sentAt: Date | null;
}

interface CommandType {
  hashId: string;
  name: string | Translations;
  start: 'required' | 'optional' | 'disabled';
  end: 'required' | 'optional' | 'disabled';
  fieldConfigurations: { key: string; type: string; [key: string]: unknown }[];
  channelSelect: 'single' | 'multiple' | 'off';
  environmentAccess: string;
}

interface ScheduledCommand {
  command: Command;
  commandType: CommandType;
}

interface IncomingRequestEvent { type: 'incomingRequest'; webRequest: WebRequest }
interface CommandEvent { type: 'newCommand' | 'commandDue' | 'deletedCommand'; command: Command; commandType: CommandType }
interface LinkEvent { type: 'link' | 'unlink' | 'linkUpdate'; pinGroup: PinGroup; channelMapping: { channel: number; pinHashId: string | null }[] }
interface ReportLateEvent { type: 'reportLate' }
type HandlerEvent = IncomingRequestEvent | CommandEvent | LinkEvent | ReportLateEvent;

interface Arguments {
  device: Device;
  /** the device's commands not yet marked sent or dropped, oldest first */
  scheduledCommands: ScheduledCommand[];
  event: HandlerEvent;
}
interface ArgumentsForIncomingRequestEvent extends Arguments { event: IncomingRequestEvent }
interface ArgumentsForEventWithoutResponse extends Arguments { event: CommandEvent | LinkEvent | ReportLateEvent }

/** A plain JSON value is sent as JSON, a string as text, bytes as they are; or say the type yourself. */
type ResponseBody = Json | Bytes | WebRequestBody;

/** The answer to the device (incomingRequest only); over CoAP the status maps to a response code as RFC 8075 does. */
interface IncomingRequestResponse {
  statusCode: number;
  headers?: Record<string, string>;
  body?: ResponseBody;
}

/** Every call is recorded on the device's activity log; requests, commands and reports take effect after the run. */
interface Exec extends BasicExec {
  /** runs that report type's parser on the payload and stores the condition report it returns */
  parseReport(report: { reportTypeHashId: string; payload: string; generatedAt?: Date | null }): void;
  markCommandAsSent(commandHashId: string): void;
  dropCommand(commandHashId: string, options?: { markAsDeleted?: boolean }): void;
  scheduleCommand(command: { commandTypeHashId: string; fields?: Record<string, Json>; startAt?: Date | null; endAt?: Date | null; channelIndices?: number[] | null }): void;
  setDeviceFields(fields: Record<string, Json>): void;
  increaseReportingCounter(at?: Date | null): void;
  expectNextReportBefore(date: Date | null): void;
  /** an outbound HTTPS request, made after the run; its result goes to the activity log */
  sendRequest(request: { url: string; method: string; headers?: Record<string, string | number | boolean | string[]>; body?: ResponseBody }): void;
  /** puts a firmware reference into the device's answer */
  offerFirmware(firmwareHashId: string): void;
}

type Result = IncomingRequestResponse | void;
`;

const PARSER = `${HEADER("a report type's parser")}${COMMON}${DEVICE}
interface Arguments {
  payload: string;
  device: Device;
  pinGroup?: PinGroup;
}

/** value = significand x 10^orderOfMagnitude; a significand within 1e-6 of an integer is rounded to it. */
interface Measurement {
  /** the device type's channel; its measurement lands on the pin that channel is mapped to */
  channelIndex: number;
  quantityHashId: string;
  generatedAt: Date;
  /** -128 to 127 */
  orderOfMagnitude: number;
  /** a 32-bit signed integer */
  significand: number;
}

interface Result {
  generatedAt: Date;
  measurements: Measurement[];
  fields?: Record<string, Json>;
}

interface Exec extends BasicExec {}
`;

const IDENTIFIER_RESULT = `
/** The device (of this connectivity environment) the request or certificate is for; created with that device type when it does not exist. */
interface Result {
  deviceTypeHashId: string;
  deviceIdentifier: string;
}

interface Exec extends BasicExec {}
`;

const WEBHOOK_IDENTIFIER = `${HEADER("a supplier webhook's identifier")}${COMMON}
interface Arguments {
  request: WebRequest;
}
${IDENTIFIER_RESULT}`;

const CERTIFICATE_IDENTIFIER = `${HEADER("a supplier certificate's identifier")}${COMMON}
interface Arguments {
  certificate: Certificate;
}
${IDENTIFIER_RESULT}`;

/** The .d.ts text of one kind of supplier code. */
export const TYPINGS: Record<TypingsKind, string> = {
  eventHandler: EVENT_HANDLER,
  parser: PARSER,
  webhookIdentifier: WEBHOOK_IDENTIFIER,
  certificateIdentifier: CERTIFICATE_IDENTIFIER,
};

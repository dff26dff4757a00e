import type { DeviceView, EventHandlerArgs } from '../../src/sandbox/types.ts';

/** The example of UDF-CONTRACT.md, plus an interface, a type alias and a helper. */
export const CONTRACT_EXAMPLE = `const reportTypeHashId = "r1a2b3";
interface Pending { id: string; fields: Record<string, unknown> }
type Answer = { statusCode: number; body?: unknown };
function toPending(c: { hashId: string; fields: Record<string, unknown> }): Pending {
  return { id: c.hashId, fields: c.fields };
}
function handle(args: ArgumentsForIncomingRequestEvent, exec: Exec): IncomingRequestResponse;
function handle(args: ArgumentsForEventWithoutResponse, exec: Exec): void;
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== "incomingRequest") return;
  const request = args.event.webRequest;
  if (request.method !== "POST" || request.body === undefined) {
    return { statusCode: 400, body: ["parameter_error", "POST a body"] };
  }
  exec.addLog("got " + request.method + " " + request.url.path);
  exec.parseReport({ reportTypeHashId, payload: JSON.stringify(request.body) });
  const pending = args.scheduledCommands.map((c) => c.command);
  pending.forEach((c) => exec.markCommandAsSent(c.hashId));
  const answer: Answer = { statusCode: 200, body: { commands: pending.map(toPending) } };
  return answer as IncomingRequestResponse;
}
`;

export const LAST_ONLINE = '2024-05-01T10:00:00.000Z';

export function device(): DeviceView {
  return {
    hashId: 'dev1',
    supplierDeviceIdentifier: 'SN-1',
    deviceTypeHashId: 'dt1',
    fields: { createdAt: 'not a date field' },
    lastOnlineAt: LAST_ONLINE,
    nextReportBefore: new Date('2024-05-02T10:00:00.000Z'),
  };
}

/** body null: a request without a body */
export function requestArgs(body: unknown = { type: 'json', data: { t: 21.5 } }): EventHandlerArgs {
  return {
    device: device(),
    scheduledCommands: [
      {
        command: {
          hashId: 'cmd1',
          commandTypeHashId: 'ct1',
          fields: { level: 3 },
          startAt: null,
          endAt: null,
          createdAt: '2024-04-30T08:00:00.000Z',
        },
        commandType: { hashId: 'ct1', name: 'set level' },
      },
    ],
    event: {
      type: 'incomingRequest',
      webRequest: {
        url: { protocol: 'https', host: 'gw.example', path: '/', query: {} },
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        ...(body === null ? {} : { body: body as never }),
        ip: '192.0.2.1',
        certificate: null,
      },
    },
  };
}

export function reportLateArgs(): EventHandlerArgs {
  return { device: device(), scheduledCommands: [], event: { type: 'reportLate' } };
}

export const GOOD_HANDLER = `function handle(args: Arguments, exec: Exec) {
  exec.addLog("ok");
  return { statusCode: 200, body: { device: args.device.hashId } };
}`;

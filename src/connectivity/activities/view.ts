// An activity as the original SDK's supplier-activity models show it. The worker stores what
// happened in its own terms (the device's WebRequest and answer, each exec call's arguments or
// result); this file gives it, when it is read, every member those models require (the SDK
// validates answers allowing members it does not know, so ours stay):
//   - every activity and sub-activity names its root (rootActivityHashId);
//   - a request the device sent, or one exec.sendRequest made, is a WebRequest
//     {hashId, incoming, createdAt, request, response};
//   - a parseReport shows its report type in full and has (no) sub-activities of its own;
//   - dropCommand says what the drop did; increaseReportingCounter has no null `at`;
//   - offerFirmware, a kind no SDK release knows (its models refuse it), is shown as a line of the
//     log of the run that called it.
import type { WebRequest } from '../../sandbox/types.ts';
import type { ReportType } from '../report-types/store.ts';

type Obj = Record<string, unknown>;
interface LogLine {
  type: 'log' | 'error';
  message: string;
}

/** An activity row as stored (supplier_activity). */
export interface StoredActivity {
  hashId: string;
  createdAt: string;
  triggerType: string;
  failed: boolean;
  log: LogLine[];
  triggerData: unknown;
  activities: StoredSubActivity[];
}
interface StoredSubActivity {
  hashId: string;
  createdAt: string;
  triggerType: string;
  failed: boolean;
  log: LogLine[];
  triggerData: unknown;
}

const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Header values as the SDK's WebRequest response takes them: one string each. */
function stringHeaders(headers: unknown): Record<string, string> {
  if (!isObject(headers)) return {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && v !== null) out[k] = Array.isArray(v) ? v.join(', ') : String(v);
  return out;
}

function requestHeaders(headers: unknown): Record<string, string | string[]> {
  if (!isObject(headers)) return {};
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && v !== null) out[k] = Array.isArray(v) ? v.map(String) : String(v);
  return out;
}

/** A typed body, or nothing (the SDK's body is optional, never null). */
const body = (b: unknown) => (isObject(b) && typeof b.type === 'string' ? { body: { type: b.type, data: b.data ?? (b.type === 'json' ? null : '') } } : {});

/** The device's request and the answer it got, as the SDK's (incoming) WebRequest. */
function incomingWebRequest(hashId: string, createdAt: string, stored: Obj) {
  const r = (isObject(stored.request) ? stored.request : {}) as Partial<WebRequest>;
  const answer = isObject(stored.response) ? stored.response : null;
  return {
    hashId,
    incoming: true,
    createdAt,
    request: {
      url: { protocol: r.url?.protocol ?? '', host: r.url?.host ?? '', path: r.url?.path ?? '', query: r.url?.query ?? {} },
      ip: r.ip ?? '',
      // the SDK's WebRequest has the method in lower case
      method: (r.method ?? '').toLowerCase(),
      headers: requestHeaders(r.headers),
      ...body(r.body),
      certificate: r.certificate ?? null,
      ...(r.pskIdentity !== undefined ? { pskIdentityHint: r.pskIdentity } : {}),
    },
    response: answer && { statusCode: answer.statusCode, headers: stringHeaders(answer.headers), ...body(answer.body) },
  };
}

/** A request exec.sendRequest made (src/pipeline/outbound.ts), as the SDK's (outgoing) WebRequest; null when none was made. */
function outgoingWebRequest(hashId: string, createdAt: string, stored: Obj) {
  const request = isObject(stored.request) ? stored.request : null;
  if (!request || typeof request.url !== 'string') return null;
  const url = URL.canParse(request.url) ? new URL(request.url) : null;
  const query: Record<string, string | string[]> = {};
  for (const [k, v] of url?.searchParams ?? []) query[k] = k in query ? [...[query[k]].flat(), v] : v;
  const response = isObject(stored.response) ? stored.response : null;
  return {
    hashId,
    incoming: false,
    createdAt,
    request: {
      url: { protocol: url?.protocol.replace(/:$/, '') ?? '', host: url?.host ?? '', path: url?.pathname ?? '', query },
      ip: '',
      method: String(request.method ?? '').toLowerCase(),
      headers: requestHeaders(request.headers),
      ...body(request.body),
      certificate: null,
    },
    response: response && {
      statusCode: response.statusCode,
      headers: stringHeaders(response.headers),
      ...body(response.body),
      truncated: response.truncated === true,
    },
  };
}

/** triggerData of an exec call with the members the SDK's model of that call requires. */
function callTriggerData(a: StoredSubActivity, reportTypes: Map<string, ReportType>): unknown {
  const t = isObject(a.triggerData) ? a.triggerData : {};
  switch (a.triggerType) {
    case 'dropCommand':
      return {
        ...t,
        removeFromScheduledCommands: t.removeFromScheduledCommands ?? true,
        markAsDeleted: t.markAsDeleted ?? (isObject(t.command) && t.command.deletedAt !== null && t.command.deletedAt !== undefined),
      };
    case 'increaseReportingCounter': {
      // the model's `at` is a date, never null (null: the time of the run)
      const { at, ...rest } = t;
      return typeof at === 'string' ? { ...rest, at } : rest;
    }
    case 'sendRequest': {
      // the outcome's own members (durationMs, error) stay beside the request
      const request = outgoingWebRequest(a.hashId, a.createdAt, t);
      const { request: _made, response: _answer, ...rest } = t;
      return request ? { ...rest, request } : rest;
    }
    case 'parseReport': {
      const stored = isObject(t.reportType) ? t.reportType : null;
      const reportType = stored && typeof stored.hashId === 'string' ? reportTypes.get(stored.hashId) : undefined;
      return reportType ? { ...t, reportType } : t;
    }
    default:
      return t;
  }
}

/** The hashIds of the report types an activity's parseReport calls name (to load them in one query). */
export function reportTypeHashIds(activities: StoredActivity[]): string[] {
  const ids = new Set<string>();
  for (const a of activities) {
    for (const sub of a.activities ?? []) {
      const t = sub.triggerData;
      if (sub.triggerType === 'parseReport' && isObject(t) && isObject(t.reportType) && typeof t.reportType.hashId === 'string') ids.add(t.reportType.hashId);
    }
  }
  return [...ids];
}

/** The activity in the shape of the SDK's supplier-activity get (names per Api-Version: src/http/versions.ts). */
export function activityView(a: StoredActivity, reportTypes: Map<string, ReportType>) {
  const root = a.hashId;
  const log = [...(a.log ?? [])];
  const activities: Obj[] = [];
  for (const sub of a.activities ?? []) {
    if (!sub) continue;
    if (sub.triggerType === 'offerFirmware') {
      const firmwareHashId = isObject(sub.triggerData) ? sub.triggerData.firmwareHashId : undefined;
      for (const line of sub.log) log.push({ type: line.type, message: `offerFirmware(${String(firmwareHashId)}): ${line.message}` });
      continue;
    }
    activities.push({
      hashId: sub.hashId,
      rootActivityHashId: root,
      createdAt: sub.createdAt,
      triggerType: sub.triggerType,
      failed: sub.failed,
      log: sub.log,
      triggerData: callTriggerData(sub, reportTypes),
      ...(sub.triggerType === 'parseReport' ? { activities: [] } : {}),
    });
  }
  const stored = isObject(a.triggerData) ? a.triggerData : {};
  const triggerData =
    a.triggerType === 'handleIncomingRequest'
      ? { request: incomingWebRequest(root, a.createdAt, stored), ...(isObject(stored.identifier) ? { identifier: stored.identifier } : {}) }
      : stored;
  return { hashId: root, rootActivityHashId: root, createdAt: a.createdAt, triggerType: a.triggerType, failed: a.failed, log, triggerData, activities };
}

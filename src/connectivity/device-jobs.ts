import type { WebRequest } from '../sandbox/types.ts';

/** A device contact, queued durably before any supplier code runs. */
export interface DeviceRequestJob {
  kind: 'incomingRequest';
  deviceHashId: string;
  environmentHashId: string;
  webRequest: WebRequest;
  receivedAt: string;
}

/** What happened to the device outside a contact; the handler runs with it and no device waits for an answer. */
export type DeviceEvent =
  | { type: 'newCommand' | 'commandDue' | 'deletedCommand'; commandHashId: string }
  /** `before`: the expectation that ran out; `setAt`: when it was set (a contact after it makes the job a no-op) */
  | { type: 'reportLate'; before: string; setAt: string };

/** A device event, queued by the API (commands) or a worker (expectNextReportBefore), maybe delayed. */
export interface DeviceEventJob {
  kind: 'event';
  /** unique per occurrence: the activity's hashId derives from it, so a retry stores one activity */
  eventId: string;
  deviceHashId: string;
  environmentHashId: string;
  event: DeviceEvent;
  queuedAt: string;
}

export type DeviceJob = DeviceRequestJob | DeviceEventJob;

/** What BullMQ carries: the device jobs one gateway queued together, each answered on its own. */
export interface DeviceBatchJob {
  /** '' for device events: no gateway waits for their answers */
  gatewayId: string;
  items: DeviceBatchItem[];
}

export interface DeviceBatchItem {
  itemId: string;
  job: DeviceJob;
  /**
   * What the ids of the item's activity and reports derive from: `<jobId>:<index>` of the batch it was first
   * queued in. Set when a failing item is queued again on its own, so its retries store nothing twice.
   */
  idBase?: string;
}

/** What the device is answered, whatever the protocol it came in on. */
export interface DeviceAnswer {
  statusCode: number;
  headers: Record<string, string>;
  body: { type: 'json' | 'string' | 'hex'; data: unknown } | null;
}

export interface DeviceJobResult {
  answer: DeviceAnswer | null;
  activityHashId: string;
  failed: boolean;
}

import type { WebRequest } from '../sandbox/types.ts';

/** A device contact, queued durably before any supplier code runs. */
export interface DeviceRequestJob {
  kind: 'incomingRequest';
  deviceHashId: string;
  environmentHashId: string;
  webRequest: WebRequest;
  receivedAt: string;
}

export type DeviceJob = DeviceRequestJob;

/** What BullMQ carries: the device jobs one gateway queued together, each answered on its own. */
export interface DeviceBatchJob {
  gatewayId: string;
  items: { itemId: string; job: DeviceJob }[];
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

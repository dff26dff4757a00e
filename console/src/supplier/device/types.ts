// The shapes of the API's answers the device pages read (src/connectivity/*: devices, activities, commands, firmware).

export interface Device {
  hashId: string;
  supplierDeviceIdentifier: string;
  deviceTypeHashId: string;
  fields: Record<string, unknown>;
  lastOnlineAt: string | null;
  nextReportBefore: string | null;
  validated: boolean;
  userFacingIdentifier: string;
}

export interface FieldConfiguration {
  key: string;
  type?: string;
  name?: unknown;
  inputType?: string;
  valueOptions?: { value: unknown; text?: unknown }[];
  hint?: unknown;
  defaultValue?: unknown;
  allowNull?: boolean;
  [member: string]: unknown;
}

export interface DeviceType {
  hashId: string;
  name: unknown;
  fieldConfigurations: FieldConfiguration[];
  commandTypeHashIds: string[];
  identifierFieldKey: string | null;
}

export interface DeviceRow {
  device: Device;
  deviceType: DeviceType;
  environmentName: string | null;
  environmentHashId: string | null;
}

export interface CommandType {
  hashId: string;
  name: unknown;
  start: 'required' | 'optional' | 'disabled';
  end: 'required' | 'optional' | 'disabled';
  channelSelect: 'single' | 'multiple' | 'off';
  fieldConfigurations: FieldConfiguration[];
}

export interface Command {
  hashId: string;
  deviceHashId: string;
  commandTypeHashId: string;
  fields: Record<string, unknown>;
  startAt: string | null;
  endAt: string | null;
  delay: number;
  createdAt: string;
  deletedAt: string | null;
  sentAt: string | null;
}

export interface LogLine {
  type: 'log' | 'error';
  message: string;
}

export interface WebRequestView {
  hashId: string;
  incoming: boolean;
  createdAt: string;
  request: {
    url: { protocol: string; host: string; path: string; query: Record<string, unknown> };
    ip: string;
    method: string;
    headers: Record<string, string | string[]>;
    body?: { type: string; data: unknown };
    certificate: unknown;
    pskIdentityHint?: string;
  };
  response: { statusCode: number; headers: Record<string, string>; body?: { type: string; data: unknown } } | null;
}

export interface SubActivity {
  hashId: string;
  createdAt: string;
  triggerType: string;
  failed: boolean;
  log: LogLine[];
  triggerData: Record<string, unknown>;
}

export interface Activity {
  hashId: string;
  createdAt: string;
  triggerType: string;
  failed: boolean;
  log: LogLine[];
  triggerData: Record<string, unknown> & { request?: WebRequestView };
  activities: SubActivity[];
}

/** GET /supplier-activity/:hashId, and each event of the live log (with durationMs). */
export interface ActivityDetail {
  device: Device | null;
  deviceType: DeviceType | null;
  activity: Activity;
  durationMs?: number;
}

/** A row of GET /supplier-activity/. */
export interface ActivitySummary {
  device: Device | null;
  deviceType: DeviceType | null;
  activity: Pick<Activity, 'hashId' | 'createdAt' | 'triggerType' | 'failed'>;
}

export interface Firmware {
  hashId: string;
  deviceTypeHashId: string;
  version: string;
  size: number;
  sha256: string;
  createdAt: string;
}

export interface CounterEntry {
  key: string;
  name: string;
  total: number;
  values: { hour: string; value: number }[];
}

// The analytics source registry: which of the SDK's analytics tables (src/models/analytics/analytics-tables.ts)
// this service answers, and the SQL behind each of their fields. Nothing a client sends reaches SQL text except
// through these tables: a field name is looked up here (own members only), and its `sql` is ours.
//
// A source is a base table scoped to the caller's environment ($1) plus the tables reachable from it by a
// many-to-one join; a query names fields as `<table>.<field>` (`pinGroup.hashId`), form fields as
// `<table>.<fields|deviceFields>.<key>` (`pin.fields.id`). Adding a source is one entry in SOURCES, with its
// table in TABLES.

import { missedReports } from '../issues/connectivity-check.ts';

/** What a field holds; decides which comparisons and aggregations apply and how values are parsed. */
export type FieldType = 'string' | 'number' | 'integer' | 'boolean' | 'timestamp' | 'json';

export interface FieldDef {
  sql: string;
  type: FieldType;
}

export interface TableDef {
  /** the SQL alias every field of the table is written against */
  alias: string;
  /** field name → its SQL; null: a field of the SDK's table this service does not keep (named in a 400) */
  fields: Record<string, FieldDef | null>;
  /** form-field members (`fields`, `deviceFields`) → the jsonb column holding them */
  formFields?: Record<string, string>;
}

/** Every table key of the SDK's analytics tables, so an unknown-to-us name gets a clear answer. */
export const SDK_TABLES = [
  'clientReportType',
  'command',
  'commandType',
  'device',
  'deviceLink',
  'deviceInstallationUser',
  'deviceType',
  'edge',
  'grid',
  'pinGrid',
  'pinGroupGrid',
  'gridPinGroup',
  'gridPin',
  'issue',
  'issueAssignedUser',
  'measurement',
  'performanceMonth',
  'pin',
  'pinGroup',
  'quantity',
  'report',
  'measurementThreshold',
  'user',
] as const;

const f = (sql: string, type: FieldType): FieldDef => ({ sql, type });
const hashId = (a: string) => f(`${a}.hash_id`, 'string');
const at = (sql: string) => f(sql, 'timestamp');
const never = f('NULL::timestamptz', 'timestamp');
// an object's level is the highest of its open issues, 0 without one (as pin, pin group and edge get answer it)
const OPEN_ISSUE = 'oi.closed_at IS NULL AND oi.deleted_at IS NULL';
const pinGroupLevel = f(`(SELECT coalesce(max(oi.level), 0) FROM issue oi WHERE oi.pin_group_id = pg.id AND ${OPEN_ISSUE})`, 'integer');
const pinLevel = f(
  `(SELECT coalesce(max(oi.level), 0) FROM issue oi WHERE oi.pin_group_id = p.pin_group_id AND ${OPEN_ISSUE}
  AND (cardinality(oi.pin_ids) = 0 OR p.id = ANY(oi.pin_ids)))`,
  'integer',
);
const edgeLevel = f(
  `(SELECT coalesce(max(oi.level), 0) FROM pin ep JOIN issue oi ON oi.pin_group_id = ep.pin_group_id AND ${OPEN_ISSUE}
  AND (cardinality(oi.pin_ids) = 0 OR ep.id = ANY(oi.pin_ids)) WHERE ep.edge_id = e.id)`,
  'integer',
);

/**
 * A measurement's value, significand x 10^orderOfMagnitude, in double precision: a negative magnitude
 * divides by the exact power of ten, so 1234 x 10^-3 is the double nearest 1.234.
 */
const value = (significand: string, orderOfMagnitude: string) => `CASE WHEN ${orderOfMagnitude} >= 0 THEN ${significand} * 10::float8 ^ ${orderOfMagnitude}
  ELSE ${significand} / 10::float8 ^ (-${orderOfMagnitude}) END`;
const MEASUREMENT_VALUE = value('m.significand', 'm.order_of_magnitude');
/** A threshold stored as a value pair (jsonb `{orderOfMagnitude, significand}`, null when not set) as a number. */
const pairValue = (column: string) => f(value(`(${column}->>'significand')::float8`, `(${column}->>'orderOfMagnitude')::int`), 'number');

export const TABLES: Partial<Record<(typeof SDK_TABLES)[number], TableDef>> = {
  measurement: {
    alias: 'm',
    fields: {
      hashId: hashId('m'),
      channelIndex: f('m.channel_index', 'integer'),
      orderOfMagnitude: f('m.order_of_magnitude', 'integer'),
      significand: f('m.significand', 'integer'),
      // thresholds are not compared yet: -1 as measurement find answers it
      performance: f('-1', 'integer'),
      value: f(MEASUREMENT_VALUE, 'number'),
      generatedAt: at('m.generated_at'),
      createdAt: at('m.generated_at'),
      updatedAt: at('m.generated_at'),
      deletedAt: never,
    },
  },
  report: {
    alias: 'r',
    fields: {
      hashId: hashId('r'),
      userHashId: f('NULL::text', 'string'),
      fields: f('r.fields', 'json'),
      generatedAt: at('r.generated_at'),
      createdAt: at('r.created_at'),
      updatedAt: at('r.created_at'),
      deletedAt: never,
    },
    formFields: { fields: 'r.fields' },
  },
  pin: {
    alias: 'p',
    fields: {
      hashId: hashId('p'),
      level: pinLevel,
      deviceFields: f('p.device_fields', 'json'),
      fields: f('p.fields', 'json'),
      name: f('p.name', 'string'),
      createdAt: at('p.created_at'),
      updatedAt: at('p.updated_at'),
      deletedAt: never,
    },
    formFields: { fields: 'p.fields', deviceFields: 'p.device_fields' },
  },
  pinGroup: {
    alias: 'pg',
    fields: {
      hashId: hashId('pg'),
      latitude: f(`CASE WHEN jsonb_typeof(pg.geometry->'coordinates'->1) = 'number' THEN (pg.geometry->'coordinates'->>1)::float8 END`, 'number'),
      longitude: f(`CASE WHEN jsonb_typeof(pg.geometry->'coordinates'->0) = 'number' THEN (pg.geometry->'coordinates'->>0)::float8 END`, 'number'),
      level: pinGroupLevel,
      mapLayer: f('pg.map_layer', 'string'),
      deviceFields: f('pg.device_fields', 'json'),
      fields: f('pg.fields', 'json'),
      name: f('pg.name', 'string'),
      createdAt: at('pg.created_at'),
      updatedAt: at('pg.updated_at'),
      deletedAt: never,
    },
    formFields: { fields: 'pg.fields', deviceFields: 'pg.device_fields' },
  },
  edge: {
    alias: 'e',
    fields: {
      hashId: hashId('e'),
      level: edgeLevel,
      mapLayer: f('e.map_layer', 'string'),
      fields: f('e.fields', 'json'),
      name: f('e.name', 'string'),
      createdAt: at('e.created_at'),
      updatedAt: at('e.updated_at'),
      deletedAt: never,
    },
    formFields: { fields: 'e.fields' },
  },
  quantity: {
    alias: 'q',
    fields: {
      hashId: hashId('q'),
      name: f('q.name_text', 'string'),
      color: f('q.color', 'string'),
      unit: f('q.unit', 'string'),
      defaultCriticallyLowThresholdValue: pairValue('q.default_critically_low_threshold'),
      defaultLowThresholdValue: pairValue('q.default_low_threshold'),
      defaultHighThresholdValue: pairValue('q.default_high_threshold'),
      defaultCriticallyHighThresholdValue: pairValue('q.default_critically_high_threshold'),
      createdAt: at('q.created_at'),
      updatedAt: at('q.updated_at'),
      deletedAt: at('q.deleted_at'),
    },
  },
  // a pin's own thresholds for a quantity (measurement threshold set); the quantity's defaults apply where it has none
  measurementThreshold: {
    alias: 'mt',
    fields: {
      hashId: hashId('mt'),
      criticallyLowValue: pairValue('mt.critically_low'),
      lowValue: pairValue('mt.low'),
      highValue: pairValue('mt.high'),
      criticallyHighValue: pairValue('mt.critically_high'),
      createdAt: at('mt.created_at'),
      updatedAt: at('mt.updated_at'),
      deletedAt: never,
    },
  },
  device: {
    alias: 'd',
    fields: {
      hashId: hashId('d'),
      fields: f('d.fields', 'json'),
      nextReportBefore: at('d.next_report_before'),
      lastOnlineAt: at('d.last_online_at'),
      missedReports: f(missedReports('d'), 'integer'),
      createdAt: at('d.created_at'),
      updatedAt: at('d.updated_at'),
      deletedAt: never,
    },
    formFields: { fields: 'd.fields' },
  },
  deviceType: {
    alias: 'dt',
    fields: {
      hashId: hashId('dt'),
      name: f('dt.name_text', 'string'),
      createdAt: at('dt.created_at'),
      updatedAt: at('dt.updated_at'),
      deletedAt: at('dt.deleted_at'),
    },
  },
  issue: {
    alias: 'i',
    fields: {
      hashId: hashId('i'),
      title: f('i.title', 'string'),
      level: f('i.level', 'integer'),
      automation: f(`i.automation->>'type'`, 'string'),
      assignedUserId: f('(SELECT a.hash_id FROM machine_account a WHERE a.id = i.assigned_account_id)', 'string'),
      closedAt: at('i.closed_at'),
      createdAt: at('i.created_at'),
      updatedAt: at('i.updated_at'),
      deletedAt: at('i.deleted_at'),
    },
  },
  deviceLink: {
    alias: 'dl',
    fields: { hashId: hashId('dl'), linkUpdatedAt: at('dl.created_at'), createdAt: at('dl.created_at'), updatedAt: at('dl.created_at'), deletedAt: never },
  },
};

export type TableKey = keyof typeof TABLES;

/** A join a source may add: its SQL and the tables it needs joined first. */
export interface JoinDef {
  sql: string;
  after?: TableKey[];
}

export interface SourceDef {
  /** the base table (alias included) */
  from: string;
  /** the table the base rows are, and their tenant scope ($1 is the environment's id) */
  table: TableKey;
  scope: string;
  /** tables reachable from the base, each at most one row per base row */
  joins: Partial<Record<TableKey, JoinDef>>;
}

const DEVICE_TYPE: JoinDef = { sql: 'LEFT JOIN device_type dt ON dt.id = d.device_type_id', after: ['device'] };

export const SOURCES: Partial<Record<(typeof SDK_TABLES)[number], SourceDef>> = {
  // measurements on the environment's pins (a measurement keeps no environment of the customer; its pin does)
  measurement: {
    from: 'measurement m JOIN pin p ON p.id = m.pin_id',
    table: 'measurement',
    scope: 'p.environment_id = $1',
    joins: {
      pin: { sql: '' },
      pinGroup: { sql: 'JOIN pin_group pg ON pg.id = p.pin_group_id' },
      edge: { sql: 'LEFT JOIN edge e ON e.id = p.edge_id' },
      quantity: { sql: 'JOIN quantity q ON q.id = m.quantity_id' },
      report: { sql: 'JOIN condition_report r ON r.id = m.report_id' },
      measurementThreshold: { sql: 'LEFT JOIN pin_threshold mt ON mt.pin_id = m.pin_id AND mt.quantity_id = m.quantity_id' },
      device: { sql: 'LEFT JOIN device d ON d.id = m.device_id' },
      deviceType: DEVICE_TYPE,
    },
  },
  pin: {
    from: 'pin p',
    table: 'pin',
    scope: 'p.environment_id = $1',
    joins: {
      pinGroup: { sql: 'JOIN pin_group pg ON pg.id = p.pin_group_id' },
      edge: { sql: 'LEFT JOIN edge e ON e.id = p.edge_id' },
      deviceLink: { sql: 'LEFT JOIN device_link dl ON dl.pin_group_id = p.pin_group_id' },
      device: { sql: 'LEFT JOIN device d ON d.id = dl.device_id', after: ['deviceLink'] },
      deviceType: DEVICE_TYPE,
    },
  },
  pinGroup: {
    from: 'pin_group pg',
    table: 'pinGroup',
    scope: 'pg.environment_id = $1',
    joins: {
      deviceLink: { sql: 'LEFT JOIN device_link dl ON dl.pin_group_id = pg.id' },
      device: { sql: 'LEFT JOIN device d ON d.id = dl.device_id', after: ['deviceLink'] },
      deviceType: DEVICE_TYPE,
    },
  },
  edge: { from: 'edge e', table: 'edge', scope: 'e.environment_id = $1', joins: {} },
  // the thresholds set on the environment's pins
  measurementThreshold: {
    from: 'pin_threshold mt',
    table: 'measurementThreshold',
    scope: 'mt.environment_id = $1',
    joins: {
      pin: { sql: 'JOIN pin p ON p.id = mt.pin_id' },
      pinGroup: { sql: 'JOIN pin_group pg ON pg.id = p.pin_group_id', after: ['pin'] },
      quantity: { sql: 'JOIN quantity q ON q.id = mt.quantity_id' },
    },
  },
  // condition reports registered on the environment's pin groups
  report: {
    from: 'condition_report r JOIN pin_group pg ON pg.id = r.pin_group_id',
    table: 'report',
    scope: 'pg.environment_id = $1',
    joins: {
      pinGroup: { sql: '' },
      device: { sql: 'LEFT JOIN device d ON d.id = r.device_id' },
      deviceType: DEVICE_TYPE,
    },
  },
  // the devices this environment claimed
  device: {
    from: 'device d',
    table: 'device',
    scope: 'd.claimed_environment_id = $1',
    joins: {
      deviceType: DEVICE_TYPE,
      deviceLink: { sql: 'LEFT JOIN device_link dl ON dl.device_id = d.id AND dl.environment_id = $1' },
      pinGroup: { sql: 'LEFT JOIN pin_group pg ON pg.id = dl.pin_group_id', after: ['deviceLink'] },
    },
  },
  // the environment's issues (deleted ones too: filter on issue.deletedAt), each on one pin group
  issue: {
    from: 'issue i',
    table: 'issue',
    scope: 'i.environment_id = $1',
    joins: {
      pinGroup: { sql: 'JOIN pin_group pg ON pg.id = i.pin_group_id' },
      deviceLink: { sql: 'LEFT JOIN device_link dl ON dl.pin_group_id = i.pin_group_id', after: ['pinGroup'] },
      device: { sql: 'LEFT JOIN device d ON d.id = dl.device_id', after: ['deviceLink'] },
      deviceType: DEVICE_TYPE,
    },
  },
  deviceLink: {
    from: 'device_link dl',
    table: 'deviceLink',
    scope: 'dl.environment_id = $1',
    joins: {
      pinGroup: { sql: 'JOIN pin_group pg ON pg.id = dl.pin_group_id' },
      device: { sql: 'JOIN device d ON d.id = dl.device_id' },
      deviceType: DEVICE_TYPE,
    },
  },
};

// Monitoring's settings: threshold and connectivity checks, analytics queries and exports. Declared once: `Config`'s
// fields and the table in docs/configuration.md come from these declarations.
import type { Settings, SettingsOf } from '../app/settings.ts';

export const MONITORING_SETTINGS = {
  thresholdEvaluation: {
    kind: 'onOff',
    env: 'THRESHOLD_EVALUATION',
    default: true,
    description:
      "`on` or `off`: measurements of linked devices (by the worker, after each stored batch) and of manual reports (report add and update, in the report's transaction) are checked against their pins' thresholds and open, update or close threshold issues; `off` checks none, so no threshold issue opens (for measuring the report path without it)",
  },
  connectivityCheckMs: {
    kind: 'int',
    env: 'CONNECTIVITY_CHECK_MS',
    default: 30_000,
    min: 100,
    max: 60_000,
    description:
      'how often one worker (a Redis lock picks it) looks for linked devices silent past their connectivity threshold; the issue opens within the threshold plus this interval',
  },
  analyticsStatementTimeoutMs: {
    kind: 'int',
    env: 'ANALYTICS_STATEMENT_TIMEOUT_MS',
    default: 10_000,
    min: 1,
    max: 600_000,
    description:
      'how long the database may compute one analytics query (`GET /analytics/`, in a read-only transaction with `SET LOCAL statement_timeout`); it is then cancelled and answered `400 analytics_query_too_broad`',
  },
  analyticsConcurrency: {
    kind: 'int',
    env: 'ANALYTICS_CONCURRENCY',
    default: 2,
    min: 1,
    max: 100,
    description:
      'analytics queries one process computes at once; more wait their turn without holding a database connection, so the other operations keep theirs',
  },
  exportRetentionHours: {
    kind: 'int',
    env: 'EXPORT_RETENTION_HOURS',
    default: 168,
    min: 1,
    max: 24 * 366,
    description:
      "an export's CSV file (under `DATA_DIR/exports`) and its download link last this long after it is written; then a worker deletes the file and the export request shows status `deleted`",
  },
  exportConcurrency: {
    kind: 'int',
    env: 'EXPORT_CONCURRENCY',
    default: 1,
    min: 1,
    max: 64,
    description:
      "exports one worker process writes at once (each streams its rows from one PostgreSQL cursor, so memory does not grow with the export), and exports of one environment queued or running at once: the rest wait their turn, so one environment's exports cannot hold back another's",
  },
} as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof MONITORING_SETTINGS> {}
}

// npm run bench: the service started as child processes on real PostgreSQL and Redis, driven by clients nobody here
// wrote, in groups of rows (GROUPS below; `--list` prints them with a rough duration). With no group named it runs the
// headline: the device ingest rows over HTTPS TLS-PSK and CoAP/DTLS, and a command added through the REST API until
// a device gets it, in a few minutes. Groups are named as arguments or with --only, --all runs every one; the older
// `--x on|off` switches still name a group or leave it out. Each group's rows are printed as the group ends, and
// bench/results.json is rewritten after every group: the rows of groups this run did not touch keep their last
// figures, each marked with when it was measured. While a group runs, a line on stderr every 30 s gives the time
// spent, the rows done and an estimate of the time left (and, during the measurement table's fill, the rows written).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseCli, type CliOptions, type CliParsed, type CliValues } from '../scripts/cli.ts';
import type { CommandRow } from './commands.ts';
import type { BenchRow } from './dtls.ts';
import type { BenchService, Provisioned } from './harness.ts';
import type { MeasurementTable } from './measurements.ts';
import type { Db } from '../src/app/db.ts';

// Every module a group needs is imported when the group runs (`await import` in its `run`): --help and --list
// answer at once, and a run loads only what its groups use.

const RESULTS = fileURLToPath(new URL('./results.json', import.meta.url));
const ON_OFF = ['on', 'off'] as const;

/** An `--x on|off` switch of one group, as before groups had names. */
const onOff = (group: string) => ({ type: 'string', choices: ON_OFF, description: `on: run the ${group} group, as if named; off: leave it out` }) as const;

export const OPTIONS = {
  only: { type: 'string', placeholder: 'group,group', description: 'the groups to run, as if named as arguments' },
  all: { type: 'boolean', description: 'run every group (the heavy diagnostic ones too: over an hour)' },
  list: { type: 'boolean', description: 'print the groups, one line each with a rough duration and the last measured one, and exit' },
  seconds: { type: 'string', default: '15', number: true, placeholder: 's', description: 'measured seconds of each load row' },
  warmup: { type: 'string', default: '3', number: true, placeholder: 's', description: 'warm-up seconds before each HTTPS load row' },
  devices: {
    type: 'string',
    default: '100',
    number: true,
    placeholder: 'n',
    description: 'HTTPS TLS-PSK devices, keep-alive (https, https-split, redis-cluster, embedded)',
  },
  layouts: {
    type: 'string',
    placeholder: 'all|1|2|3|none',
    description: 'HTTPS layouts: 1 (one process) is the https group, 2 and 3 (split) https-split; given, names or leaves out those',
  },
  linked: {
    type: 'string',
    default: 'on',
    choices: ON_OFF,
    description: 'after the HTTPS rows and the paced CoAP row, the same load with the devices linked to pin groups',
  },
  webhooks: onOff('webhooks'),
  'webhook-senders': {
    type: 'string',
    default: '50',
    number: true,
    placeholder: 'n',
    description: 'webhook senders (The Things Stack uplinks), 10 devices each',
  },
  commands: {
    type: 'string',
    default: '100',
    number: true,
    placeholder: 'n',
    description: 'devices of the command delivery row; given, a number names the commands group, 0 leaves it out',
  },
  dtls: onOff('dtls'),
  'idle-sessions': { type: 'string', default: '2000', number: true, placeholder: 'n', description: 'idle DTLS sessions whose memory the dtls group measures' },
  'kept-sessions': {
    type: 'string',
    default: '100000',
    number: true,
    placeholder: 'n',
    description: 'sessions of the kept group; given, a number names it, 0 leaves it out',
  },
  coap: onOff('coap'),
  'coap-sessions': { type: 'string', default: '200', number: true, placeholder: 'n', description: 'CoAP/DTLS PSK sessions of the coap and flood groups' },
  'coap-rate': { type: 'string', default: '2000', number: true, placeholder: 'n', description: 'reports/s of the paced CoAP rows (coap, flood)' },
  'coap-layout': {
    type: 'string',
    default: 'all',
    placeholder: 'roles|roles',
    description: "the service's processes for the CoAP rows, e.g. 'api,worker|gateway'",
  },
  'coap-closed': { type: 'string', default: 'on', choices: ON_OFF, description: 'off: the paced CoAP row alone, warmed up paced (no closed loop)' },
  flood: onOff('flood'),
  'flood-rate': {
    type: 'string',
    default: '5000',
    number: true,
    placeholder: 'n',
    description: 'ClientHellos/s of the handshake flood beside honest sessions',
  },
  embedded: onOff('embedded'),
  measurements: onOff('measurements'),
  'measurement-rows': {
    type: 'string',
    default: '10000000',
    number: true,
    placeholder: 'n',
    description: 'measurements in the table that measurements, charts, analytics and exports read (filled once a run)',
  },
  charts: onOff('charts'),
  analytics: onOff('analytics'),
  'analytics-timeout-ms': { type: 'string', default: '10000', number: true, placeholder: 'ms', description: "the analytics query's statement timeout" },
  exports: onOff('exports'),
  thresholds: onOff('thresholds'),
  'threshold-devices': { type: 'string', default: '100', number: true, placeholder: 'n', description: 'linked devices of the thresholds group' },
  notifications: onOff('notifications'),
  mails: { type: 'string', default: '2000', number: true, placeholder: 'n', description: 'mails queued at once in the notifications group' },
  tiles: onOff('tiles'),
  'tile-pin-groups': { type: 'string', default: '100000', number: true, placeholder: 'n', description: 'pin groups over the city of the tiles group' },
  cid: onOff('cid'),
  'cid-clients': { type: 'string', default: '20', number: true, placeholder: 'n', description: 'devices with a Connection ID in the cid group' },
  audit: onOff('audit'),
  'audit-writes': { type: 'string', default: '200', number: true, placeholder: 'n', description: 'writes of each kind per round in the audit group' },
  'audit-rounds': { type: 'string', default: '20', number: true, placeholder: 'n', description: 'alternating rounds (log on, off, floor) of the audit group' },
  'redis-cluster': onOff('redis-cluster'),
  fleet: onOff('fleet'),
  'fleet-sessions': { type: 'string', default: '200', number: true, placeholder: 'n', description: 'CoAP/DTLS sessions of the fleet group' },
  'fleet-https-devices': { type: 'string', default: '100', number: true, placeholder: 'n', description: 'HTTPS devices of the fleet group (0: CoAP alone)' },
  'fleet-rounds': { type: 'string', default: '3', number: true, placeholder: 'n', description: 'rounds of the fleet group, alternating its rows' },
  roll: onOff('roll'),
  'roll-devices': { type: 'string', default: '200', number: true, placeholder: 'n', description: 'CoAP devices reporting through the rolling restart' },
  'roll-period-ms': { type: 'string', default: '700', number: true, placeholder: 'ms', description: "each roll device's report interval" },
  'roll-rounds': { type: 'string', default: '1', number: true, placeholder: 'n', description: 'rolling rounds (each beside a steady one)' },
} as const satisfies CliOptions;

export type BenchValues = CliValues<typeof OPTIONS>;

/** Where a row of the HTTPS kind comes from (bench/run.ts itself, webhooks) */
interface Row {
  name: string;
  cpuMsPerReport: Record<string, number>;
  reportsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  acknowledged: number;
  stored: number;
  lost: number;
  errors: number;
  target: string;
  /** embedded default only: spawn to /health 200, and memory (PSS of the service and its database processes) idle after start and after the load */
  startMs?: number;
  idleMemoryMb?: number;
  loadedMemoryMb?: number;
  /** linked devices only: stored reports that landed on a pin group with every measurement on a pin */
  onPins?: number;
}

/** What a group's run hands its rows to: printed at once, kept for the file and the tables at the end. */
interface Sink {
  rows(r: Row[]): void;
  commands(r: CommandRow[]): void;
  bench(r: BenchRow[]): void;
}

interface RunContext {
  values: BenchValues;
  /** the --layouts filter: the layouts of the HTTPS groups that may run */
  layouts: string[];
  sink: Sink;
  /** the measurement table of measurements, charts, analytics and exports: filled by the first of them that runs */
  measurementTable(): Promise<{ db: Db; table: MeasurementTable; databaseUrl: string }>;
  /** what is under way inside the group, for the progress line (the fill's rows written) */
  detail?: () => Promise<string>;
}

type Switch = 'on' | 'off';

export interface Group {
  name: string;
  /** one line for --list */
  description: string;
  /** rough minutes on the project's 2-core VM with the default options, before a run measured it */
  minutes: number;
  /** in the run with no group named */
  headline?: boolean;
  /** reads the measurement table: the first of these in a run fills it (FILL_MINUTES more) */
  readsTable?: boolean;
  /** the older option that named this group or left it out (`--dtls on|off`, `--commands 0`, `--layouts 1`) */
  switchedBy?: (values: BenchValues, given: ReadonlySet<string>) => Switch | undefined;
  run(ctx: RunContext): Promise<void>;
}

const switchOnOff =
  (option: keyof BenchValues) =>
  (values: BenchValues, given: ReadonlySet<string>): Switch | undefined =>
    given.has(option) ? (values[option] === 'off' ? 'off' : 'on') : undefined;
const switchCount =
  (option: keyof BenchValues) =>
  (values: BenchValues, given: ReadonlySet<string>): Switch | undefined =>
    given.has(option) ? (Number(values[option]) > 0 ? 'on' : 'off') : undefined;
/** --layouts names a group of HTTPS layouts when it lists one of them, and leaves it out otherwise */
const switchLayouts =
  (mine: string[]) =>
  (values: BenchValues, given: ReadonlySet<string>): Switch | undefined => {
    if (!given.has('layouts')) return undefined;
    const asked = layoutList(values.layouts);
    return asked.some((l) => mine.includes(l)) ? 'on' : 'off';
  };
function layoutList(value: string | undefined): string[] {
  const parts = (value ?? 'all').split(',').map((s) => s.trim());
  if (parts.includes('all')) return ['1', '2', '3'];
  return parts.filter((p) => p !== 'none');
}

/** One layout of the service: the role list of each process it runs. */
interface Layout {
  id: string;
  name: string;
  processes: string[];
  start?: () => Promise<{ svc: BenchService; extra: Partial<Row> }>;
  redisCluster?: { queueShards: number };
}
const LAYOUTS: Layout[] = [
  { id: '1', name: '1 process (all)', processes: ['all'] },
  { id: '2', name: '2 processes (api,gateway | worker)', processes: ['api,gateway', 'worker'] },
  { id: '3', name: '2 processes (api | gateway,worker)', processes: ['api', 'gateway,worker'] },
];
const ON_REDIS_CLUSTER: Layout[] = [1, 3].map((queueShards) => ({
  id: `cluster-${queueShards}`,
  name: `1 process (all) on a Redis Cluster (3 masters + 3 replicas), QUEUE_SHARDS=${queueShards}`,
  processes: ['all'],
  redisCluster: { queueShards },
}));
const EMBEDDED: Layout = {
  id: 'embedded',
  name: 'embedded default (1 process, DATABASE_URL unset)',
  processes: ['all'],
  start: async () => {
    const { startEmbedded } = await import('./embedded.ts');
    const { svc, startMs, idleMemoryMb } = await startEmbedded();
    return { svc, extra: { startMs, idleMemoryMb } };
  },
};

const n = (ctx: RunContext, option: keyof BenchValues) => Number(ctx.values[option]);

/** Run order: the order of this list, whatever order the groups were named in. */
export const GROUPS: Group[] = [
  {
    name: 'https',
    headline: true,
    minutes: 1.5,
    switchedBy: switchLayouts(['1']),
    description: 'HTTPS TLS-PSK reports end to end, --devices keep-alive, the service in 1 process; then the same devices linked (--linked)',
    run: async (ctx) => {
      for (const layout of LAYOUTS.filter((l) => l.id === '1' && ctx.layouts.includes(l.id))) await runLayout(ctx, layout, ctx.values.linked !== 'off');
    },
  },
  {
    name: 'https-split',
    minutes: 3,
    switchedBy: switchLayouts(['2', '3']),
    description: 'the https rows with the service split in 2 processes: api,gateway | worker and api | gateway,worker',
    run: async (ctx) => {
      for (const layout of LAYOUTS.filter((l) => l.id !== '1' && ctx.layouts.includes(l.id))) await runLayout(ctx, layout, ctx.values.linked !== 'off');
    },
  },
  {
    name: 'redis-cluster',
    minutes: 3,
    switchedBy: switchOnOff('redis-cluster'),
    description: 'the HTTPS row on a Redis Cluster of 3 masters + 3 replicas the bench starts, QUEUE_SHARDS 1 and 3',
    run: async (ctx) => {
      for (const layout of ON_REDIS_CLUSTER) await runLayout(ctx, layout, false);
    },
  },
  {
    name: 'embedded',
    minutes: 1.5,
    switchedBy: switchOnOff('embedded'),
    description: 'the HTTPS row on the embedded default (DATABASE_URL unset): its start time and memory',
    run: (ctx) => runLayout(ctx, EMBEDDED, false),
  },
  {
    name: 'webhooks',
    minutes: 1,
    switchedBy: switchOnOff('webhooks'),
    description: 'The Things Stack uplinks to a webhook URL over certificate TLS, --webhook-senders senders of 10 devices',
    run: async (ctx) => {
      const { webhookRow } = await import('./webhooks.ts');
      ctx.sink.rows([await webhookRow({ senders: n(ctx, 'webhook-senders'), devicesPerSender: 10, seconds: n(ctx, 'seconds'), warmup: n(ctx, 'warmup') })]);
    },
  },
  {
    name: 'commands',
    headline: true,
    minutes: 1,
    switchedBy: switchCount('commands'),
    description: 'command delivery: commands added through the REST API (POST /command/) until a reporting device gets them',
    run: async (ctx) => {
      const { runCommandDelivery } = await import('./commands.ts');
      ctx.sink.commands([await runCommandDelivery({ devices: n(ctx, 'commands'), seconds: n(ctx, 'seconds') })]);
    },
  },
  {
    name: 'dtls',
    minutes: 3,
    switchedBy: switchOnOff('dtls'),
    description: "DTLS full handshakes/s (PSK, ECDHE-ECDSA) against libcoap's coap-server-openssl, memory per idle session",
    run: async (ctx) => {
      const { dtlsServerRows } = await import('./dtls.ts');
      ctx.sink.bench(await dtlsServerRows({ seconds: Math.max(n(ctx, 'seconds'), 20), idleSessions: n(ctx, 'idle-sessions'), procs: 4 }));
    },
  },
  {
    name: 'kept',
    minutes: 3,
    switchedBy: switchCount('kept-sessions'),
    description: 'kept DTLS sessions: --kept-sessions saved on hand-over and loaded through Redis, memory per session carried on',
    run: async (ctx) => {
      const { keptSessionRows } = await import('./dtls-kept.ts');
      ctx.sink.bench(await keptSessionRows({ sessions: n(ctx, 'kept-sessions') }));
    },
  },
  {
    name: 'coap',
    headline: true,
    minutes: 3.5,
    switchedBy: switchOnOff('coap'),
    description: "CoAP/DTLS PSK reports end to end, closed loop and paced (then linked), libcoap and the gateway's layers alone, floor ratios",
    run: async (ctx) => {
      const { coapRows } = await import('./coap.ts');
      const v = ctx.values;
      ctx.sink.bench(
        await coapRows({
          sessions: n(ctx, 'coap-sessions'),
          seconds: n(ctx, 'seconds'),
          procs: 4,
          rate: n(ctx, 'coap-rate'),
          layout: v['coap-layout'],
          closed: v['coap-closed'] !== 'off',
          linked: v.linked !== 'off',
        }),
      );
    },
  },
  {
    name: 'cid',
    minutes: 4,
    switchedBy: switchOnOff('cid'),
    description: 'CPU of a DTLS record and of a CoAP report forwarded between two CID-routed gateway nodes against a local one',
    run: async (ctx) => {
      const { cidReportRows, cidRoutingRows } = await import('./cid-routing.ts');
      ctx.sink.bench(await cidRoutingRows({ clients: n(ctx, 'cid-clients'), records: 500, rounds: 3 }));
      ctx.sink.bench(await cidReportRows({ clients: n(ctx, 'cid-clients'), reports: 100, rounds: 5 }));
    },
  },
  {
    name: 'fleet',
    minutes: 8,
    switchedBy: switchOnOff('fleet'),
    description: 'CoAP/DTLS and HTTPS closed loops against 1 gateway node directly and 1, 2, 3 nodes behind nginx',
    run: async (ctx) => {
      const { fleetRows } = await import('./fleet.ts');
      ctx.sink.bench(
        await fleetRows({
          sessions: n(ctx, 'fleet-sessions'),
          httpsDevices: n(ctx, 'fleet-https-devices'),
          seconds: n(ctx, 'seconds'),
          procs: 4,
          rounds: n(ctx, 'fleet-rounds'),
        }),
      );
    },
  },
  {
    name: 'fleet-nft',
    minutes: 1.5,
    description:
      'the fleet behind the nft balancer (root): p99 and longest wait of devices with and without CID during a roll of every gateway node and a SIGKILL of one',
    run: async (ctx) => {
      const { fleetNftRows } = await import('./fleet-nft.ts');
      // no rows, and a line saying why, when not root or nft is missing
      ctx.sink.bench(await fleetNftRows({ devices: 24, periodMs: 200 }));
    },
  },
  {
    name: 'roll',
    minutes: 3,
    switchedBy: switchOnOff('roll'),
    description: 'a rolling restart of the 3 gateway nodes of a fleet under CoAP/DTLS load, against steady rounds',
    run: async (ctx) => {
      const { rollingRestartRows } = await import('./rolling-restart.ts');
      ctx.sink.bench(
        await rollingRestartRows({ devices: n(ctx, 'roll-devices'), periodMs: n(ctx, 'roll-period-ms'), rounds: n(ctx, 'roll-rounds'), steadyMs: 15_000 }),
      );
    },
  },
  {
    name: 'flood',
    minutes: 1.5,
    switchedBy: switchOnOff('flood'),
    description: 'paced CoAP/DTLS sessions alone, then beside a handshake flood from 127.0.0.2-11',
    run: async (ctx) => {
      const { floodRows } = await import('./flood.ts');
      ctx.sink.bench(
        await floodRows({
          sessions: n(ctx, 'coap-sessions'),
          seconds: n(ctx, 'seconds'),
          procs: 4,
          rate: n(ctx, 'coap-rate'),
          floodRate: n(ctx, 'flood-rate'),
        }),
      );
    },
  },
  {
    name: 'measurements',
    readsTable: true,
    minutes: 2,
    switchedBy: switchOnOff('measurements'),
    description: "measurement find of one pin's year on the measurement table, the ingest statement for linked vs unlinked devices",
    run: async (ctx) => {
      const { measurementFindRow, ingestLinkedRow } = await import('./measurements.ts');
      const { db, table } = await ctx.measurementTable();
      ctx.sink.bench([await measurementFindRow(db, table, { rounds: 20 })]);
      ctx.sink.bench(await ingestLinkedRow({ batches: 200 }));
    },
  },
  {
    name: 'charts',
    readsTable: true,
    minutes: 2,
    switchedBy: switchOnOff('charts'),
    description: 'chart series of a year of 5-minute values, chart panels of 100 pin groups (on the measurement table)',
    run: async (ctx) => {
      const { chartPanelsRow, chartSeriesRow } = await import('./charts.ts');
      const { db, table } = await ctx.measurementTable();
      ctx.sink.bench([await chartSeriesRow(db, table, { rounds: 100 }), await chartPanelsRow(db, table, { rounds: 50 })]);
    },
  },
  {
    name: 'analytics',
    readsTable: true,
    minutes: 2,
    switchedBy: switchOnOff('analytics'),
    description: 'a broad analytics query, the mean per day per pin over a year (on the measurement table)',
    run: async (ctx) => {
      const { analyticsRow } = await import('./analytics.ts');
      const { db, table } = await ctx.measurementTable();
      ctx.sink.bench([await analyticsRow(db, table, { rounds: 5, timeoutMs: n(ctx, 'analytics-timeout-ms') })]);
    },
  },
  {
    name: 'exports',
    readsTable: true,
    minutes: 3,
    switchedBy: switchOnOff('exports'),
    description: 'every measurement of the measurement table exported to CSV: time and peak memory',
    run: async (ctx) => {
      const { exportRow } = await import('./exports.ts');
      const { table, databaseUrl } = await ctx.measurementTable();
      ctx.sink.bench([exportRow(databaseUrl, table)]);
    },
  },
  {
    name: 'audit',
    minutes: 4,
    switchedBy: switchOnOff('audit'),
    description: 'four kinds of API write with the audit log on and off and its floor, alternating rounds: CPU, wall time, WAL',
    run: async (ctx) => {
      const { auditCostRows } = await import('./audit.ts');
      ctx.sink.bench(await auditCostRows({ rounds: n(ctx, 'audit-rounds'), writes: n(ctx, 'audit-writes') }));
    },
  },
  {
    name: 'thresholds',
    minutes: 3,
    switchedBy: switchOnOff('thresholds'),
    description: 'linked devices under pin thresholds with THRESHOLD_EVALUATION off and on, and the store step alone',
    run: async (ctx) => {
      const { thresholdRows } = await import('./thresholds.ts');
      ctx.sink.bench(await thresholdRows({ devices: n(ctx, 'threshold-devices'), seconds: n(ctx, 'seconds'), warmup: n(ctx, 'warmup'), batches: 200 }));
    },
  },
  {
    name: 'tiles',
    minutes: 6,
    switchedBy: switchOnOff('tiles'),
    description: 'map tiles at zoom 15, 14 and 12 over a city of --tile-pin-groups pin groups, cold after a change and warm',
    run: async (ctx) => {
      const { tileRows } = await import('./tiles.ts');
      ctx.sink.bench(await tileRows({ pinGroups: n(ctx, 'tile-pin-groups'), rounds: 500 }));
    },
  },
  {
    name: 'notifications',
    minutes: 2,
    switchedBy: switchOnOff('notifications'),
    description: 'mail throughput from the queue to a local SMTP server, supplier-alert bookkeeping per failed run',
    run: async (ctx) => {
      const { notificationRows } = await import('./notifications.ts');
      ctx.sink.bench(await notificationRows({ mails: n(ctx, 'mails'), failures: 200_000 }));
    },
  },
  {
    name: 'live',
    minutes: 1,
    description: 'live log: from a device request to its event on GET /supplier-activity/stream (p50, p99), 20 and 200 reports/s, 2 processes',
    run: async (ctx) => {
      const { liveLogRows } = await import('./live.ts');
      ctx.sink.bench(await liveLogRows({ devices: 20, rates: [20, 200], seconds: n(ctx, 'seconds') }));
    },
  },
  {
    name: 'console',
    minutes: 2,
    description:
      "the console in Chromium: first load on a cold cache (sign-in form usable, bytes gzip), the live log's delay from a device request to its entry in the page (p50, p99)",
    run: async (ctx) => {
      const { consoleRows } = await import('./console.ts');
      ctx.sink.bench(await consoleRows({ loads: 10, requests: 50, intervalMs: 100 }));
    },
  },
  {
    name: 'map',
    readsTable: true,
    minutes: 4,
    description:
      "the console's map in Chromium over a city of --tile-pin-groups pin groups: first render (p50, p99), a pan (tiles, p99 per tile); a pin group's chart opened and zoomed (on the measurement table)",
    run: async (ctx) => {
      const { mapRows } = await import('./map.ts');
      await mapRows({ pinGroups: n(ctx, 'tile-pin-groups'), loads: 10, measurementTable: () => ctx.measurementTable(), sink: (rows) => ctx.sink.bench(rows) });
    },
  },
];

/** the fill of the measurement table at the default 10 M rows: 2 M took 2 min on the 2-core VM at load 5, 10 M 26 min at load 17-23 */
const FILL_MINUTES = 15;

export const HEADLINE = GROUPS.filter((g) => g.headline).map((g) => g.name);

/**
 * The groups a command line runs, in run order: those named (arguments, --only, `--x on`), else every group with
 * --all, else the headline; less those switched off (`--x off`, `--commands 0`, a --layouts without them).
 */
export function selectGroups(parsed: Pick<CliParsed<typeof OPTIONS>, 'values' | 'positionals' | 'given'>): { groups: string[] } | { error: string } {
  const { values, positionals, given } = parsed;
  const asked = [...positionals, ...(values.only ?? '').split(',')].map((s) => s.trim()).filter(Boolean);
  const unknown = asked.filter((name) => !GROUPS.some((g) => g.name === name));
  if (unknown.length > 0)
    return { error: `unknown group ${unknown.map((u) => JSON.stringify(u)).join(', ')} (the groups: ${GROUPS.map((g) => g.name).join(', ')})` };
  const switches = new Map(GROUPS.map((g) => [g.name, g.switchedBy?.(values, given)]));
  const named = new Set([...asked, ...GROUPS.filter((g) => switches.get(g.name) === 'on').map((g) => g.name)]);
  const base = values.all ? GROUPS.map((g) => g.name) : named.size > 0 ? [...named] : HEADLINE;
  const groups = GROUPS.map((g) => g.name).filter((name) => base.includes(name) && switches.get(name) !== 'off');
  if (groups.length === 0)
    return { error: 'no group left to run: every group asked for is switched off (name the groups to run, e.g. npm run bench -- coap; --list shows them)' };
  return { groups };
}

const USAGE = {
  usage: `usage: npm run bench -- [group ...] [options]      (or: node bench/run.ts [group ...] [options])
Runs groups of benchmark rows against the service on real PostgreSQL and Redis, prints each group's rows as it ends
and a table at the end, and writes bench/results.json (rows of groups not run keep their last figures).
With no group named: the headline (${HEADLINE.join(', ')}), a few minutes. --list shows every group.
  npm run bench                       the headline
  npm run bench -- coap https         those groups (or --only coap,https)
  npm run bench -- --all              every group
Environment: BENCH_INSTANCE=1..9 (a second bench beside the first), BENCH_TIMELINE=1, BENCH_CPU_PROF=<dir>,
BENCH_NODE_FLAGS (docs/speed.md).`,
  positionals: true,
};

/** When a group last ran, how long it took, its command line and the options in it that shape the rows */
interface GroupRecord {
  measuredAt: string;
  seconds: number;
  args: string[];
  settings?: Record<string, string | boolean | undefined>;
}
type Tagged<R> = R & { group: string; measuredAt: string };
export interface ResultsFile {
  /** when this file was last written */
  date: string;
  node: string;
  cpus: number;
  /** this run's --seconds and --devices (a kept group's own are in groups[name].args) */
  seconds: number;
  devices: number;
  groups: Record<string, GroupRecord>;
  rows: Tagged<Row>[];
  commandRows: Tagged<CommandRow>[];
  dtlsRows: Tagged<BenchRow>[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * This run's results over the last file's: the rows of groups this run measured replace theirs, the others are kept
 * with the time they were measured. A file from before groups (no `groups`) cannot say which group a row is of: it is
 * replaced whole.
 */
export function mergeResults(previous: unknown, current: ResultsFile): ResultsFile {
  if (!isObject(previous) || !isObject(previous.groups)) return current;
  const order = (g: string) => {
    const i = GROUPS.findIndex((x) => x.name === g);
    return i < 0 ? GROUPS.length : i;
  };
  const keep = <R>(kind: 'rows' | 'commandRows' | 'dtlsRows', mine: Tagged<R>[]): Tagged<R>[] => {
    const before = Array.isArray(previous[kind]) ? (previous[kind] as Tagged<R>[]) : [];
    const kept = before.filter((r) => isObject(r) && typeof r.group === 'string' && !(r.group in current.groups));
    return [...kept, ...mine].sort((a, b) => order(a.group) - order(b.group));
  };
  const groups = Object.fromEntries(
    [...Object.entries(previous.groups as Record<string, GroupRecord>).filter(([g]) => !(g in current.groups)), ...Object.entries(current.groups)].sort(
      ([a], [b]) => order(a) - order(b),
    ),
  );
  return {
    ...current,
    groups,
    rows: keep('rows', current.rows),
    commandRows: keep('commandRows', current.commandRows),
    dtlsRows: keep('dtlsRows', current.dtlsRows),
  };
}

function readPrevious(): unknown {
  if (!existsSync(RESULTS)) return undefined;
  try {
    return JSON.parse(readFileSync(RESULTS, 'utf8')) as unknown;
  } catch {
    return undefined; // a file cut short (a run killed while writing): nothing to keep from it
  }
}

const clock = (seconds: number) => {
  const s = Math.max(0, Math.round(seconds));
  return s >= 3600
    ? `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`
    : s >= 60
      ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
      : `${s}s`;
};
const rough = (minutes: number) => (minutes >= 10 ? `${Math.round(minutes / 5) * 5}+ min` : `~${minutes} min`);
/** A group's rough minutes in a run of `groups`: the first of them to read the measurement table fills it (its time grows with its rows). */
const roughIn = (g: Group, groups: Group[], rows = 10_000_000) =>
  g.minutes + (g.readsTable && groups.find((x) => x.readsTable) === g ? Math.max(0.5, (FILL_MINUTES * rows) / 10_000_000) : 0);

function listGroups(previous: unknown): string {
  const last = isObject(previous) && isObject(previous.groups) ? (previous.groups as Record<string, GroupRecord>) : {};
  const width = Math.max(...GROUPS.map((g) => g.name.length));
  const lines = GROUPS.map((g) => {
    const r = last[g.name];
    const measured = r
      ? `last ${clock(r.seconds)} (${r.measuredAt.slice(0, 16).replace('T', ' ')}${Object.keys(r.settings ?? {}).length > 0 ? ', other options' : ''})`
      : '';
    return `${g.headline ? '*' : ' '} ${g.name.padEnd(width)}  ${`${rough(g.minutes)}${g.readsTable ? ' + fill' : ''}`.padEnd(15)} ${measured.padEnd(45)} ${g.description}`;
  });
  const total = (gs: Group[]) => rough(Math.round(gs.reduce((a, g) => a + roughIn(g, gs), 0)));
  return `${lines.join('\n')}\n\n* the headline, what npm run bench runs with no group named (${total(GROUPS.filter((g) => g.headline))}); --all runs every group (${total(GROUPS)}).
Durations are rough, for the project's 2-core VM with the default options; 'last' is the last run's, from bench/results.json.
+ fill: the measurement table (--measurement-rows, 10,000,000) is filled once a run, by the first of measurements,
charts, analytics and exports to run: 10-30 min at 10 M rows on the 2-core VM (--measurement-rows 1000000 for a quick look).\n`;
}

/** One closed-loop HTTPS TLS-PSK load of the provisioned devices (warm-up, then --seconds measured) on a running service. */
async function loadRow(ctx: RunContext, layout: Layout, svc: BenchService, p: Provisioned, linked: boolean): Promise<Row> {
  const { cpuMeter } = await import('./cpu.ts');
  const { pct, reportsOnPins, storedReports, HTTPS_PORT } = await import('./harness.ts');
  const { runPskDevice } = await import('./psk-client.ts');
  const seconds = n(ctx, 'seconds');
  const children = svc.children;
  const { environment, devices } = p;
  const {
    rows: [{ last }],
  } = await svc.db.query<{ last: number }>('SELECT COALESCE(max(id), 0)::int AS last FROM condition_report WHERE environment_id = $1', [environment.id]);
  const {
    rows: [{ n: storedBefore }],
  } = await svc.db.query<{ n: number }>('SELECT count(*)::int AS n FROM condition_report WHERE environment_id = $1', [environment.id]);
  const warmupEnd = Date.now() + n(ctx, 'warmup') * 1000;
  const end = warmupEnd + seconds * 1000;
  let meter: (() => Record<string, number>) | null = null;
  const startMeter = setTimeout(
    () => {
      meter = cpuMeter({
        ...Object.fromEntries(children.map((c, i) => [`service ${layout.processes[i]}`, (q: { pid: number }) => q.pid === c.pid])),
        'bench client': (q) => q.pid === process.pid,
        redis: (q) => q.comm.startsWith('redis-server'),
        postgres: (q) => q.comm.startsWith('postgres'),
      });
    },
    Math.max(0, warmupEnd - Date.now()),
  );
  const stats = await Promise.all(devices.map((d) => runPskDevice({ port: HTTPS_PORT, identity: d.identity, key: d.key, measureFrom: warmupEnd, until: end })));
  clearTimeout(startMeter);
  const cpu = (meter as (() => Record<string, number>) | null)?.() ?? {};
  const acked = stats.reduce((a, s) => a + s.acknowledged + s.acknowledgedWarmup, 0);
  const measured = stats.reduce((a, s) => a + s.acknowledged, 0);
  const errors = stats.reduce((a, s) => a + s.errors, 0);
  const latencies = stats.flatMap((s) => s.latenciesMs).sort((a, b) => a - b);

  // every acknowledged report must be stored (a job completes only after the monitoring core stored its report)
  const stored = (await storedReports(svc.db, environment.id, storedBefore + acked)) - storedBefore;
  // linked: every stored report must have landed on its pins
  const landed = linked ? await reportsOnPins(svc.db, environment.id, last) : null;
  const cpuMsPerReport = Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Number(((v * 1000) / Math.max(1, measured)).toFixed(3))]));
  const deviceCount = n(ctx, 'devices');
  return {
    cpuMsPerReport,
    name: linked
      ? `HTTPS TLS-PSK reports of linked devices end to end (claimed, each linked to a pin group, channel 0 on a pin), ${deviceCount} devices keep-alive, ${layout.name}`
      : `HTTPS TLS-PSK reports, ${deviceCount} devices keep-alive, ${layout.name}`,
    reportsPerSecond: Math.round(measured / seconds),
    p50Ms: Number(pct(latencies, 50).toFixed(2)),
    p99Ms: Number(pct(latencies, 99).toFixed(2)),
    acknowledged: acked,
    stored,
    lost: Math.max(0, acked - stored),
    errors,
    target: linked ? '>= 2000 reports/s, p99 <= 100 ms, 0 lost, every report on its pins' : '>= 2000 reports/s, p99 <= 100 ms, 0 lost',
    ...(landed ? { onPins: landed.onPins } : {}),
  };
}

/** A layout's rows, each handed on as it ends: its devices unlinked, then (withLinked) the same devices linked, on the same service. */
async function runLayout(ctx: RunContext, layout: Layout, withLinked: boolean): Promise<void> {
  const { linkDevices, provision, startBenchService } = await import('./harness.ts');
  const { serviceMemoryMb } = await import('./embedded.ts');
  const { startRedisCluster } = await import('../test/support/redis-cluster.ts');
  const cluster = layout.redisCluster ? await startRedisCluster() : null;
  const env: Record<string, string> =
    cluster && layout.redisCluster ? { REDIS_CLUSTER_NODES: cluster.nodesEnv, QUEUE_SHARDS: String(layout.redisCluster.queueShards) } : {};
  const { svc, extra } = layout.start
    ? await layout.start()
    : {
        svc: await startBenchService(layout.processes, env).catch(async (err: unknown) => {
          await cluster?.stop();
          throw err;
        }),
        extra: {},
      };
  try {
    const p = await provision(svc, n(ctx, 'devices'));
    ctx.sink.rows([{ ...(await loadRow(ctx, layout, svc, p, false)), ...extra, ...(layout.start ? { loadedMemoryMb: serviceMemoryMb(svc) } : {}) }]);
    if (withLinked) {
      await linkDevices(svc, p);
      ctx.sink.rows([await loadRow(ctx, layout, svc, p, true)]);
    }
  } finally {
    await svc.stop();
    await cluster?.stop();
  }
}

// Heap bytes per row of the fill's two big tables (bench/measurements.ts), from a fill of 300,000 measurements: the
// rows an INSERT has written, before it commits, are visible to another session only as the table's growing size.
const REPORT_HEAP_BYTES = 98;
const MEASUREMENT_HEAP_BYTES = 117;

/**
 * The measurement table, filled once; while the fill runs, ctx.detail reports the rows written so far (from the heap
 * size of condition_report and measurement, read in a second session that waits for no lock).
 */
function measurementTableOnce(ctx: RunContext): { get: RunContext['measurementTable']; close(): Promise<void> } {
  let filled: Promise<{ db: Db; table: MeasurementTable; databaseUrl: string }> | undefined;
  const get = () => {
    filled ??= (async () => {
      const { benchDatabase, benchDatabaseUrl, fillMeasurementTable } = await import('./measurements.ts');
      const pg = (await import('pg')).default;
      const name = 'gridgate_bench_measurements';
      const db = await benchDatabase(name);
      const databaseUrl = benchDatabaseUrl(name);
      const total = n(ctx, 'measurement-rows');
      const watcher = new pg.Client({ connectionString: databaseUrl });
      await watcher.connect();
      await watcher.query("SET lock_timeout = '100ms'");
      const started = Date.now();
      ctx.detail = async () => {
        const {
          rows: [s],
        } = await watcher.query<{ reports: string; measurements: string }>(`SELECT
          (SELECT coalesce(sum(pg_relation_size(relid)), 0) FROM pg_partition_tree('condition_report')) AS reports,
          (SELECT coalesce(sum(pg_relation_size(relid)), 0) FROM pg_partition_tree('measurement')) AS measurements`);
        const reports = Math.min(total / 2, Number(s.reports) / REPORT_HEAP_BYTES);
        const measurements = Math.min(total, Number(s.measurements) / MEASUREMENT_HEAP_BYTES);
        // each report row costs about as much to write as its two measurement rows (the fill's timing, 300,000 rows)
        const done = (reports * 2 + measurements) / (total * 2);
        const elapsed = (Date.now() - started) / 1000;
        const left = done >= 0.99 ? ', then VACUUM ANALYZE' : done > 0.02 ? `, about ${clock((elapsed / done) * (1 - done))} left of the fill` : '';
        const m = (x: number) => `${(x / 1e6).toFixed(1)} M`;
        return `fill: ${m(reports)} of ${m(total / 2)} reports and ${m(measurements)} of ${m(total)} measurements written (rough, from table sizes)${left}`;
      };
      try {
        const table = await fillMeasurementTable(db, total);
        return { db, table, databaseUrl };
      } catch (err) {
        await db.close();
        throw err;
      } finally {
        ctx.detail = undefined;
        await watcher.end();
      }
    })();
    return filled;
  };
  return {
    get,
    close: async () => {
      await (await filled?.catch(() => undefined))?.db.close();
    },
  };
}

const num = (x: number | undefined, digits = 0) => (x === undefined ? '' : x.toLocaleString('en-US', { maximumFractionDigits: digits }));

/** A row's figures in a line or two, printed as soon as its group hands it on. */
function describe(kind: 'row' | 'command' | 'bench', r: Row | CommandRow | BenchRow): string {
  if (kind === 'row') {
    const x = r as Row;
    const cpu = Object.entries(x.cpuMsPerReport)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    const embedded = x.startMs !== undefined ? `; start ${num(x.startMs)} ms, memory idle ${x.idleMemoryMb} MB, after the load ${x.loadedMemoryMb} MB` : '';
    return `${x.name}: ${num(x.reportsPerSecond)} reports/s, p50 ${x.p50Ms} / p99 ${x.p99Ms} ms, ${x.lost} lost of ${num(x.acknowledged)}, ${x.errors} errors${x.onPins !== undefined ? `, ${num(x.onPins)} on pins` : ''}${embedded}  [${x.target}]\n    CPU ms/report: ${cpu}`;
  }
  if (kind === 'command') {
    const x = r as CommandRow;
    return `${x.name}: ${x.delivered} of ${x.commandsAdded} delivered, ${x.lost} lost, p50 ${x.p50Ms} / p99 ${x.p99Ms} ms (reports meanwhile p50 ${x.reportP50Ms} / p99 ${x.reportP99Ms} ms), ${x.errors} errors`;
  }
  const x = r as BenchRow;
  const latency = x.p50Ms !== undefined || x.p99Ms !== undefined ? `, p50 ${x.p50Ms ?? '-'} / p99 ${x.p99Ms ?? '-'} ms` : '';
  return `${x.name}: ${num(x.value, 3)} ${x.unit}${latency}${x.errors !== undefined ? `, ${x.errors} errors` : ''}  [${x.target}]${x.detail ? `\n    ${x.detail}` : ''}`;
}

function printTables(rows: Row[], commandRows: CommandRow[], dtlsRows: BenchRow[]): void {
  if (rows.length > 0) {
    console.table(
      rows.map((r) => ({
        benchmark: r.name,
        'reports/s': r.reportsPerSecond,
        'p50 ms': r.p50Ms,
        'p99 ms': r.p99Ms,
        acked: r.acknowledged,
        stored: r.stored,
        lost: r.lost,
        errors: r.errors,
        'on pins': r.onPins ?? '',
      })),
    );
    const embedded = rows.filter((r) => r.startMs !== undefined);
    if (embedded.length > 0)
      console.table(
        embedded.map((r) => ({ benchmark: r.name, 'start ms': r.startMs, 'memory idle MB': r.idleMemoryMb, 'memory after load MB': r.loadedMemoryMb })),
      );
    console.log('CPU ms per report, by process (service counts its isolated-vm threads):');
    console.table(rows.map((r) => ({ benchmark: r.name, ...r.cpuMsPerReport })));
  }
  if (dtlsRows.length > 0)
    console.table(
      dtlsRows.map((r) => ({
        benchmark: r.name,
        value: r.value,
        unit: r.unit,
        'p50 ms': r.p50Ms ?? '',
        'p99 ms': r.p99Ms ?? '',
        errors: r.errors ?? '',
        target: r.target,
        detail: r.detail ?? '',
      })),
    );
  if (commandRows.length > 0)
    console.table(
      commandRows.map((r) => ({
        benchmark: r.name,
        added: r.commandsAdded,
        delivered: r.delivered,
        lost: r.lost,
        'p50 ms': r.p50Ms,
        'p99 ms': r.p99Ms,
        'report p50/p99 ms': `${r.reportP50Ms}/${r.reportP99Ms}`,
        errors: r.errors,
      })),
    );
}

async function main(): Promise<void> {
  const cli = parseCli(OPTIONS, USAGE);
  const previous = readPrevious();
  if (cli.values.list) {
    process.stdout.write(listGroups(previous));
    return;
  }
  const bad = (cli.values.layouts ?? 'all').split(',').filter((p) => !['all', 'none', '1', '2', '3'].includes(p.trim()));
  if (bad.length > 0) return cli.fail(`--layouts takes all, none or a list of 1, 2, 3, not ${JSON.stringify(cli.values.layouts)}`);
  const selection = selectGroups(cli);
  if ('error' in selection) return cli.fail(selection.error);
  const selected = GROUPS.filter((g) => selection.groups.includes(g.name));

  // a group's expected time: its last measured one, else the rough one
  const lastGroups = isObject(previous) && isObject(previous.groups) ? (previous.groups as Record<string, GroupRecord>) : {};
  // the options that shape the rows (not those that choose groups): a last duration counts only when they match
  const settings = Object.fromEntries(
    Object.keys(OPTIONS)
      .filter((o) => cli.given.has(o) && !['only', 'all', 'list'].includes(o) && !GROUPS.some((g) => g.name === o))
      .map((o) => [o, cli.values[o as keyof BenchValues]]),
  );
  const sameSettings = (r: GroupRecord | undefined) => r !== undefined && JSON.stringify(r.settings ?? {}) === JSON.stringify(settings);
  const expected = (g: Group) =>
    sameSettings(lastGroups[g.name]) ? lastGroups[g.name].seconds : roughIn(g, selected, Number(cli.values['measurement-rows'])) * 60;
  const runStart = Date.now();
  const since = (t: number) => (Date.now() - t) / 1000;
  const all = { rows: [] as Tagged<Row>[], commandRows: [] as Tagged<CommandRow>[], dtlsRows: [] as Tagged<BenchRow>[] };
  const groups: Record<string, GroupRecord> = {};
  let current: Group | undefined;
  let currentStart = runStart;
  let done = 0;
  const rowCount = () => all.rows.length + all.commandRows.length + all.dtlsRows.length;
  const tag = <R>(r: R): Tagged<R> => ({ ...r, group: current?.name ?? '', measuredAt: new Date().toISOString() });
  const sink: Sink = {
    rows: (rs) => {
      for (const r of rs) {
        all.rows.push(tag(r));
        console.log(describe('row', r));
      }
    },
    commands: (rs) => {
      for (const r of rs) {
        all.commandRows.push(tag(r));
        console.log(describe('command', r));
      }
    },
    bench: (rs) => {
      for (const r of rs) {
        all.dtlsRows.push(tag(r));
        console.log(describe('bench', r));
      }
    },
  };
  const ctx: RunContext = { values: cli.values, layouts: layoutList(cli.values.layouts), sink, measurementTable: () => table.get() };
  const table = measurementTableOnce(ctx);

  const stamp = () => `[bench ${clock(since(runStart))}]`;
  const progress = setInterval(() => {
    if (!current) return;
    const g = current;
    const inGroup = since(currentStart);
    const later = selected.slice(selected.indexOf(g) + 1).reduce((a, x) => a + expected(x), 0);
    // past its expected time a group's end is anyone's guess: say so, and what comes after it
    const left =
      inGroup <= expected(g)
        ? `about ${clock(expected(g) - inGroup + later)} left`
        : `past its ${clock(expected(g))} expected; ${later > 0 ? `about ${clock(later)} left after it` : 'the last group'}`;
    const line = `${stamp()} ${g.name}: ${clock(inGroup)} in; ${done} of ${selected.length} groups and ${rowCount()} rows done; ${left}`;
    void (ctx.detail?.().catch(() => '') ?? Promise.resolve('')).then((detail) => process.stderr.write(`${line}${detail ? `; ${detail}` : ''}\n`));
  }, 30_000);
  progress.unref();

  const write = () => {
    const results: ResultsFile = {
      date: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      seconds: n(ctx, 'seconds'),
      devices: n(ctx, 'devices'),
      groups,
      ...all,
    };
    writeFileSync(RESULTS, `${JSON.stringify(mergeResults(readPrevious(), results), null, 2)}\n`);
  };

  process.stderr.write(`${stamp()} groups: ${selected.map((g) => g.name).join(', ')}; about ${clock(selected.reduce((a, g) => a + expected(g), 0))} in all\n`);
  try {
    for (const g of selected) {
      current = g;
      currentStart = Date.now();
      console.log(`\n== ${g.name}: ${g.description} (${done + 1} of ${selected.length}, about ${clock(expected(g))})`);
      await g.run(ctx);
      groups[g.name] = { measuredAt: new Date().toISOString(), seconds: Math.round(since(currentStart)), args: process.argv.slice(2), settings };
      done++;
      console.log(`== ${g.name} done in ${clock(since(currentStart))}`);
      // after every group, so a later group's failure or a Ctrl-C keeps what was measured
      write();
    }
  } finally {
    current = undefined;
    clearInterval(progress);
    await table.close();
  }

  console.log(`\nAll ${selected.length} groups in ${clock(since(runStart))}:`);
  printTables(all.rows, all.commandRows, all.dtlsRows);
  const kept = Object.entries(
    mergeResults(readPrevious(), { date: '', node: '', cpus: 0, seconds: 0, devices: 0, groups, rows: [], commandRows: [], dtlsRows: [] }).groups,
  ).filter(([g]) => !(g in groups));
  if (kept.length > 0)
    console.log(`bench/results.json keeps the last figures of ${kept.map(([g, r]) => `${g} (${r.measuredAt.slice(0, 16).replace('T', ' ')})`).join(', ')}`);
}

if (import.meta.main) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}

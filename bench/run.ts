// npm run bench: N simulated devices over TLS 1.2 PSK keep-alive for a fixed time against the
// service (child processes in each layout below, on real PostgreSQL and Redis). Prints a table and writes
// bench/results.json. Options: --devices 100 --seconds 15 --warmup 3 --layouts all|1|2|3|none
// --commands 100 (devices of the command delivery row, bench/commands.ts; 0 skips it)
// --webhooks on|off --webhook-senders 50 (the webhook row: bench/webhooks.ts)
// --dtls on|off --idle-sessions 2000 (DTLS server rows: handshakes/s, the same handshakes against libcoap's coap-server-openssl, memory per idle session; bench/dtls.ts)
// --kept-sessions 100000 (kept DTLS sessions: save on hand-over and load, sessions/s, and memory per session carried on; bench/dtls-kept.ts; 0 skips it)
// --coap on|off --coap-sessions 200 --coap-rate 2000 --coap-layout all (the service's processes, e.g. 'api,worker|gateway'; CoAP/DTLS end to end closed loop and paced, and libcoap's
// coap-server-openssl beside it, the gateway's DTLS and CoAP layers alone (bench/coap-echo.ts), and the floor and runtime floor ratios of the closed and paced rows: bench/coap.ts, bench/floor.ts) --coap-closed on|off (off: the paced row alone, warmed up paced)
// --flood on|off --flood-rate 5000 (the coap rows' sessions and rate paced, alone and beside a handshake flood from 127.0.0.2-11: ClientHellos
// without a cookie at --flood-rate/s and cookie-proven handshakes that stall, as many as the server admits; bench/flood.ts)
// --embedded on|off (the HTTPS row on the embedded default: one process, DATABASE_URL unset, its start time and memory;
// bench/embedded.ts)
// --linked on|off (after each layout's HTTPS row and after the paced CoAP row, the same devices claimed into a monitoring environment and linked to pin groups,
// each channel 0 on a pin, and the same load again: a row of reports of linked devices end to end, next to the unlinked one)
// --measurements on|off --measurement-rows 10000000 (measurement find of one pin's year of hourly values, and the ingest statement for linked vs unlinked devices; bench/measurements.ts)
// --analytics on|off --analytics-timeout-ms 10000 (a broad analytics query, mean per day per pin for a year, over the same --measurement-rows table; bench/analytics.ts)
// --thresholds on|off --threshold-devices 100 (the report path of linked devices under pin thresholds with THRESHOLD_EVALUATION off and on, and the store step alone; bench/thresholds.ts)
// --notifications on|off --mails 2000 (mail throughput from the queue to a local SMTP server, and the supplier-alert bookkeeping per failed run; bench/notifications.ts)
// --tiles on|off --tile-pin-groups 100000 (map tiles at zoom 15, 14 and 12 over a city of that many pin groups, cold after a change and warm from the cache; bench/tiles.ts)
// --cid on|off --cid-clients 20 (CPU of a DTLS record, and of a whole CoAP report, forwarded between two nodes of a CID-routed cluster against a local one, with batches between the nodes and one record per datagram; bench/cid-routing.ts)
// --exports on|off (every measurement of the same --measurement-rows table exported to CSV: time and peak memory; bench/exports.ts)
// --audit on|off --audit-writes 200 --audit-rounds 20 (four kinds of API write with the audit log on and off, alternating rounds: CPU, wall time and WAL per write; bench/audit.ts)
// --redis-cluster on|off (the HTTPS row of 1 process on a Redis Cluster of 3 masters + 3 replicas the bench starts, QUEUE_SHARDS 1 and 3:
// what the cluster costs against the single-Redis row; test/support/redis-cluster.ts)
// --fleet on|off --fleet-sessions 200 --fleet-https-devices 100 --fleet-rounds 3 (the CoAP/DTLS and the HTTPS TLS-PSK closed loops against 1 gateway
// node directly and 1, 2, 3 nodes behind nginx, one fleet of scripts/fleet/topology.ts, rounds alternating the rows; 0 HTTPS devices: CoAP alone; bench/fleet.ts)
// --roll on|off --roll-devices 200 --roll-period-ms 700 --roll-rounds 1 (a rolling restart of the 3 gateway nodes of a fleet behind nginx under CoAP/DTLS load,
// against steady rounds of the same load: p50/p99 during the roll, retransmissions, full handshakes; bench/rolling-restart.ts)
// --charts on|off (chart series of a year of 5-minute values, chart panels get of 100 pin groups; bench/charts.ts, on the same filled table)
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runCommandDelivery, type CommandRow } from './commands.ts';
import { cpuMeter } from './cpu.ts';
import { coapRows } from './coap.ts';
import { floodRows } from './flood.ts';
import { dtlsServerRows, type BenchRow } from './dtls.ts';
import { keptSessionRows } from './dtls-kept.ts';
import { serviceMemoryMb, startEmbedded } from './embedded.ts';
import { linkDevices, pct, provision, reportsOnPins, root, startBenchService, storedReports, HTTPS_PORT, type BenchService, type Provisioned } from './harness.ts';
import { runPskDevice, type DeviceStats } from './psk-client.ts';
import { analyticsRow } from './analytics.ts';
import { chartPanelsRow, chartSeriesRow } from './charts.ts';
import { cidReportRows, cidRoutingRows } from './cid-routing.ts';
import { benchDatabase, benchDatabaseUrl, fillMeasurementTable, ingestLinkedRow, measurementFindRow } from './measurements.ts';
import { exportRow } from './exports.ts';
import { fleetRows } from './fleet.ts';
import { auditCostRows } from './audit.ts';
import { notificationRows } from './notifications.ts';
import { thresholdRows } from './thresholds.ts';
import { tileRows } from './tiles.ts';
import { webhookRow } from './webhooks.ts';
import { rollingRestartRows } from './rolling-restart.ts';
import { startRedisCluster } from '../test/support/redis-cluster.ts';

const { values } = parseArgs({
  options: {
    layouts: { type: 'string', default: 'all' },
    devices: { type: 'string', default: '100' },
    seconds: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '3' },
    commands: { type: 'string', default: '100' },
    webhooks: { type: 'string', default: 'on' },
    'webhook-senders': { type: 'string', default: '50' },
    dtls: { type: 'string', default: 'on' },
    coap: { type: 'string', default: 'on' },
    'coap-sessions': { type: 'string', default: '200' },
    'coap-rate': { type: 'string', default: '2000' },
    'coap-layout': { type: 'string', default: 'all' },
    'coap-closed': { type: 'string', default: 'on' },
    embedded: { type: 'string', default: 'on' },
    'idle-sessions': { type: 'string', default: '2000' },
    measurements: { type: 'string', default: 'on' },
    charts: { type: 'string', default: 'on' },
    'measurement-rows': { type: 'string', default: '10000000' },
    analytics: { type: 'string', default: 'on' },
    'analytics-timeout-ms': { type: 'string', default: '10000' },
    thresholds: { type: 'string', default: 'on' },
    'threshold-devices': { type: 'string', default: '100' },
    linked: { type: 'string', default: 'on' },
    flood: { type: 'string', default: 'on' },
    'flood-rate': { type: 'string', default: '5000' },
    notifications: { type: 'string', default: 'on' },
    mails: { type: 'string', default: '2000' },
    tiles: { type: 'string', default: 'on' },
    'tile-pin-groups': { type: 'string', default: '100000' },
    cid: { type: 'string', default: 'on' },
    'cid-clients': { type: 'string', default: '20' },
    'kept-sessions': { type: 'string', default: '100000' },
    exports: { type: 'string', default: 'on' },
    audit: { type: 'string', default: 'on' },
    'audit-writes': { type: 'string', default: '200' },
    'audit-rounds': { type: 'string', default: '20' },
    'redis-cluster': { type: 'string', default: 'on' },
    fleet: { type: 'string', default: 'on' },
    'fleet-sessions': { type: 'string', default: '200' },
    'fleet-https-devices': { type: 'string', default: '100' },
    'fleet-rounds': { type: 'string', default: '3' },
    roll: { type: 'string', default: 'on' },
    'roll-devices': { type: 'string', default: '200' },
    'roll-period-ms': { type: 'string', default: '700' },
    'roll-rounds': { type: 'string', default: '1' },
  },
});
const DEVICES = Number(values.devices);
const SECONDS = Number(values.seconds);
const WARMUP = Number(values.warmup);

interface Row {
  name: string; cpuMsPerReport: Record<string, number>; reportsPerSecond: number; p50Ms: number; p99Ms: number; acknowledged: number; stored: number; lost: number; errors: number; target: string;
  /** embedded default only: spawn to /health 200, and memory (PSS of the service and its database processes) idle after start and after the load */
  startMs?: number; idleMemoryMb?: number; loadedMemoryMb?: number;
  /** linked devices only: stored reports that landed on a pin group with every measurement on a pin */
  onPins?: number;
}

/**
 * One layout of the service: the role list of each process it runs (`start` replaces the default start on PostgreSQL;
 * `redisCluster`: on a Redis Cluster started for it, with that many QUEUE_SHARDS).
 */
interface Layout { name: string; processes: string[]; start?: () => Promise<{ svc: BenchService; extra: Partial<Row> }>; redisCluster?: { queueShards: number } }
const LAYOUTS: Layout[] = [
  { name: '1 process (all)', processes: ['all'] },
  { name: '2 processes (api,gateway | worker)', processes: ['api,gateway', 'worker'] },
  { name: '2 processes (api | gateway,worker)', processes: ['api', 'gateway,worker'] },
];


const ON_REDIS_CLUSTER: Layout[] = [1, 3].map((queueShards) => ({
  name: `1 process (all) on a Redis Cluster (3 masters + 3 replicas), QUEUE_SHARDS=${queueShards}`, processes: ['all'], redisCluster: { queueShards },
}));

const EMBEDDED: Layout = {
  name: 'embedded default (1 process, DATABASE_URL unset)', processes: ['all'],
  start: async () => {
    const { svc, startMs, idleMemoryMb } = await startEmbedded();
    return { svc, extra: { startMs, idleMemoryMb } };
  },
};

/** One closed-loop HTTPS TLS-PSK load of the provisioned devices (warm-up, then SECONDS measured) on a running service. */
async function loadRow(layout: Layout, svc: BenchService, p: Provisioned, linked: boolean): Promise<Row> {
  const children = svc.children;
  const { environment, devices } = p;
  const { rows: [{ last }] } = await svc.db.query<{ last: number }>('SELECT COALESCE(max(id), 0)::int AS last FROM condition_report WHERE environment_id = $1', [environment.id]);
  const { rows: [{ n: storedBefore }] } = await svc.db.query<{ n: number }>('SELECT count(*)::int AS n FROM condition_report WHERE environment_id = $1', [environment.id]);
  const warmupEnd = Date.now() + WARMUP * 1000;
  const end = warmupEnd + SECONDS * 1000;
  let meter: (() => Record<string, number>) | null = null;
  const startMeter = setTimeout(() => {
    meter = cpuMeter({
      ...Object.fromEntries(children.map((c, i) => [`service ${layout.processes[i]}`, (q: { pid: number }) => q.pid === c.pid])),
      'bench client': (q) => q.pid === process.pid,
      redis: (q) => q.comm.startsWith('redis-server'),
      postgres: (q) => q.comm.startsWith('postgres'),
    });
  }, Math.max(0, warmupEnd - Date.now()));
  const stats: DeviceStats[] = await Promise.all(devices.map((d) => runPskDevice({ port: HTTPS_PORT, identity: d.identity, key: d.key, measureFrom: warmupEnd, until: end })));
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
  return {
    cpuMsPerReport,
    name: linked
      ? `HTTPS TLS-PSK reports of linked devices end to end (claimed, each linked to a pin group, channel 0 on a pin), ${DEVICES} devices keep-alive, ${layout.name}`
      : `HTTPS TLS-PSK reports, ${DEVICES} devices keep-alive, ${layout.name}`,
    reportsPerSecond: Math.round(measured / SECONDS),
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

/** A layout's rows: its devices unlinked, then (with --linked on) the same devices linked, on the same service in the same run. */
async function runLayout(layout: Layout, withLinked: boolean): Promise<Row[]> {
  const cluster = layout.redisCluster ? await startRedisCluster() : null;
  const env: Record<string, string> = cluster ? { REDIS_CLUSTER_NODES: cluster.nodesEnv, QUEUE_SHARDS: String(layout.redisCluster!.queueShards) } : {};
  const { svc, extra } = layout.start ? await layout.start() : { svc: await startBenchService(layout.processes, env).catch(async (err: unknown) => { await cluster?.stop(); throw err; }), extra: {} };
  try {
    const p = await provision(svc, DEVICES);
    const rows = [{ ...await loadRow(layout, svc, p, false), ...extra, ...(layout.start ? { loadedMemoryMb: serviceMemoryMb(svc) } : {}) }];
    if (withLinked) {
      await linkDevices(svc, p);
      rows.push(await loadRow(layout, svc, p, true));
    }
    return rows;
  } finally {
    await svc.stop();
    await cluster?.stop();
  }
}

/** The rows reading one filled measurement table: measurement find (--measurements), the chart rows (--charts), the broad analytics query (--analytics) and the export (--exports). */
async function measurementTableRows(): Promise<BenchRow[]> {
  const name = 'gridgate_bench_measurements';
  const db = await benchDatabase(name);
  try {
    const table = await fillMeasurementTable(db, Number(values['measurement-rows']));
    const rows: BenchRow[] = [];
    if (values.measurements !== 'off') rows.push(await measurementFindRow(db, table, { rounds: 20 }));
    if (values.charts !== 'off') rows.push(await chartSeriesRow(db, table, { rounds: 100 }), await chartPanelsRow(db, table, { rounds: 50 }));
    if (values.analytics !== 'off') rows.push(await analyticsRow(db, table, { rounds: 5, timeoutMs: Number(values['analytics-timeout-ms']) }));
    if (values.exports !== 'off') rows.push(exportRow(benchDatabaseUrl(name), table));
    return rows;
  } finally {
    await db.close();
  }
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  for (const layout of LAYOUTS.filter((l, i) => values.layouts === 'all' || values.layouts.split(',').includes(String(i + 1)))) rows.push(...await runLayout(layout, values.linked !== 'off'));
  if (values['redis-cluster'] !== 'off') for (const layout of ON_REDIS_CLUSTER) rows.push(...await runLayout(layout, false));
  if (values.embedded !== 'off') rows.push(...await runLayout(EMBEDDED, false));
  if (values.webhooks !== 'off') rows.push(await webhookRow({ senders: Number(values['webhook-senders']), devicesPerSender: 10, seconds: SECONDS, warmup: WARMUP }));
  const commandRows: CommandRow[] = Number(values.commands) > 0 ? [await runCommandDelivery({ devices: Number(values.commands), seconds: SECONDS })] : [];
  const dtlsRows: BenchRow[] = values.dtls === 'off' ? [] : await dtlsServerRows({ seconds: Math.max(SECONDS, 20), idleSessions: Number(values['idle-sessions']), procs: 4 });
  if (Number(values['kept-sessions']) > 0) dtlsRows.push(...await keptSessionRows({ sessions: Number(values['kept-sessions']) }));
  if (values.coap !== 'off') dtlsRows.push(...await coapRows({ sessions: Number(values['coap-sessions']), seconds: SECONDS, procs: 4, rate: Number(values['coap-rate']), layout: values['coap-layout'], closed: values['coap-closed'] !== 'off', linked: values.linked !== 'off' }));
  if (values.cid !== 'off') {
    dtlsRows.push(...await cidRoutingRows({ clients: Number(values['cid-clients']), records: 500, rounds: 3 }));
    dtlsRows.push(...await cidReportRows({ clients: Number(values['cid-clients']), reports: 100, rounds: 5 }));
  }
  if (values.fleet !== 'off') dtlsRows.push(...await fleetRows({ sessions: Number(values['fleet-sessions']), httpsDevices: Number(values['fleet-https-devices']), seconds: SECONDS, procs: 4, rounds: Number(values['fleet-rounds']) }));
  if (values.roll !== 'off') dtlsRows.push(...await rollingRestartRows({ devices: Number(values['roll-devices']), periodMs: Number(values['roll-period-ms']), rounds: Number(values['roll-rounds']), steadyMs: 15_000 }));
  if (values.flood !== 'off') dtlsRows.push(...await floodRows({ sessions: Number(values['coap-sessions']), seconds: SECONDS, procs: 4, rate: Number(values['coap-rate']), floodRate: Number(values['flood-rate']) }));
  if (values.measurements !== 'off' || values.charts !== 'off' || values.analytics !== 'off' || values.exports !== 'off') dtlsRows.push(...await measurementTableRows());
  if (values.audit !== 'off') dtlsRows.push(...await auditCostRows({ rounds: Number(values['audit-rounds']), writes: Number(values['audit-writes']) }));
  if (values.measurements !== 'off') dtlsRows.push(...await ingestLinkedRow({ batches: 200 }));
  if (values.thresholds !== 'off') dtlsRows.push(...await thresholdRows({ devices: Number(values['threshold-devices']), seconds: SECONDS, warmup: WARMUP, batches: 200 }));
  if (values.tiles !== 'off') dtlsRows.push(...await tileRows({ pinGroups: Number(values['tile-pin-groups']), rounds: 500 }));
  if (values.notifications !== 'off') dtlsRows.push(...await notificationRows({ mails: Number(values.mails), failures: 200_000 }));
  const results = { date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, seconds: SECONDS, devices: DEVICES, rows, commandRows, dtlsRows };
  writeFileSync(path.join(root, 'bench/results.json'), `${JSON.stringify(results, null, 2)}\n`);
  console.table(rows.map((r) => ({ benchmark: r.name, 'reports/s': r.reportsPerSecond, 'p50 ms': r.p50Ms, 'p99 ms': r.p99Ms, acked: r.acknowledged, stored: r.stored, lost: r.lost, errors: r.errors, 'on pins': r.onPins ?? '' })));
  const embedded = rows.filter((r) => r.startMs !== undefined);
  if (embedded.length > 0) console.table(embedded.map((r) => ({ benchmark: r.name, 'start ms': r.startMs, 'memory idle MB': r.idleMemoryMb, 'memory after load MB': r.loadedMemoryMb })));
  console.log('CPU ms per report, by process (service counts its isolated-vm threads):');
  console.table(rows.map((r) => ({ benchmark: r.name, ...r.cpuMsPerReport })));
  if (dtlsRows.length > 0) console.table(dtlsRows.map((r) => ({ benchmark: r.name, value: r.value, unit: r.unit, 'p50 ms': r.p50Ms ?? '', 'p99 ms': r.p99Ms ?? '', errors: r.errors ?? '', target: r.target, detail: r.detail ?? '' })));
  if (commandRows.length > 0) console.table(commandRows.map((r) => ({ benchmark: r.name, added: r.commandsAdded, delivered: r.delivered, lost: r.lost, 'p50 ms': r.p50Ms, 'p99 ms': r.p99Ms, 'report p50/p99 ms': `${r.reportP50Ms}/${r.reportP99Ms}`, errors: r.errors })));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

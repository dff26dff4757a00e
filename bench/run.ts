// npm run bench: N simulated devices over TLS 1.2 PSK keep-alive for a fixed time against the
// service (child processes in each layout below, on real PostgreSQL and Redis). Prints a table and writes
// bench/results.json. Options: --devices 100 --seconds 15 --warmup 3 --layouts all|1|2|3
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { openDb, recreateDatabase } from '../src/app/db.ts';
import { createEnvironment, createMachineAccount } from '../src/accounts/store.ts';
import { cpuMeter } from './cpu.ts';
import { runPskDevice, type DeviceStats } from './psk-client.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { layouts: { type: 'string', default: 'all' }, devices: { type: 'string', default: '100' }, seconds: { type: 'string', default: '15' }, warmup: { type: 'string', default: '3' } } });
const DEVICES = Number(values.devices);
const SECONDS = Number(values.seconds);
const WARMUP = Number(values.warmup);
const ADMIN_URL = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB_NAME = 'gridgate_bench';
const API_PORT = 18080;
const HTTPS_PORT = 18443;

const HANDLER = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const body = args.event.webRequest.body;
  if (!body || body.type !== 'json') return { statusCode: 400, body: ['parameter_error', 'POST JSON'] };
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify(body.data) });
  return { statusCode: 200, body: { commands: args.scheduledCommands.map((c) => c.command.hashId) } };
}`;
const PARSER = `
function handle(args: { payload: string }, exec: Exec) {
  const d = JSON.parse(args.payload) as { v: number; t: number };
  return { generatedAt: new Date(d.t), measurements: [{ channelIndex: 0, quantityHashId: QUANTITY, generatedAt: new Date(d.t), orderOfMagnitude: -2, significand: d.v * 100 }] };
}`;

async function api(base: string, headers: Record<string, string>, method: string, url: string, body?: unknown): Promise<Record<string, string>> {
  const res = await fetch(base + url, { method, headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, string>;
}

async function waitHealthy(base: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error('service exited during start');
    try {
      if ((await fetch(`${base}/health`)).ok) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('service did not become healthy');
}

function pct(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

interface Row {
  name: string; cpuMsPerReport: Record<string, number>; reportsPerSecond: number; p50Ms: number; p99Ms: number; acknowledged: number; stored: number; lost: number; errors: number; target: string;
}

/** One layout of the service: the role list of each process it runs. */
interface Layout { name: string; processes: string[] }
const LAYOUTS: Layout[] = [
  { name: '1 process (all)', processes: ['all'] },
  { name: '2 processes (api,gateway | worker)', processes: ['api,gateway', 'worker'] },
  { name: '2 processes (api | gateway,worker)', processes: ['api', 'gateway,worker'] },
];


async function runLayout(layout: Layout): Promise<Row> {
  const dbUrl = await recreateDatabase(ADMIN_URL, DB_NAME);
  const db = await openDb({ databaseUrl: dbUrl, dataDir: '/tmp' });
  const base = `http://127.0.0.1:${API_PORT}`;
  const common = { ...process.env, DATABASE_URL: dbUrl, HTTPS_DEVICE_PORT: String(HTTPS_PORT), SECRET_KEY: '22'.repeat(32), LOG_LEVEL: 'warn', QUEUE_NAME: `bench-${Date.now()}`, DATA_DIR: '/tmp/gridgate-bench', MONITORING_CORE_URL: base };
  // each process answers /health on its own API_PORT; the first one carries the REST API
  const children = layout.processes.map((roles, i) => spawn(process.execPath, ['--disable-warning=ExperimentalWarning', path.join(root, 'src/main.ts'), roles], {
    env: { ...common, API_PORT: String(API_PORT + i) }, stdio: ['ignore', 'inherit', 'inherit'],
  }));
  try {
    await Promise.all(children.map((c, i) => waitHealthy(`http://127.0.0.1:${API_PORT + i}`, c)));
    const environment = await createEnvironment(db, 'connectivity', 'bench');
    const account = await createMachineAccount(db, environment.hashId, ['ENVIRONMENT_ADMIN']);
    const { jwt } = await api(base, { 'api-version': '5' }, 'POST', '/authentication/machine-login', { assertion: account.assertion });
    const h = { 'api-version': '5', 'environment-hash-id': environment.hashId, authorization: `Bearer ${jwt}` };
    const quantity = await api(base, h, 'POST', '/quantity/', { name: 'Level', unit: 'm', defaultOrderOfMagnitude: -2 });
    const reportType = await api(base, h, 'POST', '/supplier-report-type/', { name: 'Level', fieldConfigurations: { pinGroup: [], pin: [], measurement: [] }, parser: `const QUANTITY = "${quantity.hashId}";${PARSER}` });
    const deviceType = await api(base, h, 'POST', '/device-type/', {
      name: 'Bench device', eventHandler: `const REPORT_TYPE = "${reportType.hashId}";${HANDLER}`,
      fieldConfigurations: [], pinGroupFieldConfigurations: [], channels: [{ name: 'Level', pinFieldConfigurations: [], defaultPinName: 'L', charts: [] }], commandTypeHashIds: [],
    });
    const devices = [];
    for (let i = 0; i < DEVICES; i++) {
      const d = { identity: `bench-${i}-${randomBytes(3).toString('hex')}`, key: randomBytes(16) };
      await api(base, h, 'POST', '/device/psk', { supplierDeviceIdentifier: `bench-${i}`, deviceTypeHashId: deviceType.hashId, psk: d.key.toString('hex'), pskIdentity: d.identity });
      devices.push(d);
    }

    const warmupEnd = Date.now() + WARMUP * 1000;
    const end = warmupEnd + SECONDS * 1000;
    let meter: (() => Record<string, number>) | null = null;
    const startMeter = setTimeout(() => {
      meter = cpuMeter({
        ...Object.fromEntries(children.map((c, i) => [`service ${layout.processes[i]}`, (p: { pid: number }) => p.pid === c.pid])),
        'bench client': (p) => p.pid === process.pid,
        redis: (p) => p.comm.startsWith('redis-server'),
        postgres: (p) => p.comm.startsWith('postgres'),
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
    let stored = 0;
    for (let i = 0; i < 100; i++) {
      stored = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM condition_report WHERE environment_id = $1', [environment.id])).rows[0].n;
      if (stored >= acked) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const cpuMsPerReport = Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Number(((v * 1000) / Math.max(1, measured)).toFixed(3))]));
    return {
      cpuMsPerReport,
      name: `HTTPS TLS-PSK reports, ${DEVICES} devices keep-alive, ${layout.name}`,
      reportsPerSecond: Math.round(measured / SECONDS),
      p50Ms: Number(pct(latencies, 50).toFixed(2)),
      p99Ms: Number(pct(latencies, 99).toFixed(2)),
      acknowledged: acked,
      stored,
      lost: Math.max(0, acked - stored),
      errors,
      target: '>= 2000 reports/s, p99 <= 100 ms, 0 lost',
    };
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : undefined)));
    await db.close();
  }
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  for (const layout of LAYOUTS.filter((l, i) => values.layouts === 'all' || values.layouts.split(',').includes(String(i + 1)))) rows.push(await runLayout(layout));
  const results = { date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, seconds: SECONDS, devices: DEVICES, rows };
  writeFileSync(path.join(root, 'bench/results.json'), `${JSON.stringify(results, null, 2)}\n`);
  console.table(rows.map((r) => ({ benchmark: r.name, 'reports/s': r.reportsPerSecond, 'p50 ms': r.p50Ms, 'p99 ms': r.p99Ms, acked: r.acknowledged, stored: r.stored, lost: r.lost, errors: r.errors })));
  console.log('CPU ms per report, by process (service counts its isolated-vm threads):');
  console.table(rows.map((r) => ({ benchmark: r.name, ...r.cpuMsPerReport })));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

// What every bench scenario shares: the service started as child processes on real PostgreSQL and Redis (fresh
// database `gridgate_bench`), an environment with a logged-in machine account, and a provisioned report type, device
// type and PSK devices whose handler parses one JSON measurement per report.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDb, recreateDatabase, type Db } from '../src/app/db.ts';
import { createEnvironment, createMachineAccount } from '../src/accounts/store.ts';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ADMIN_URL = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/**
 * BENCH_INSTANCE=n (1-9) lets benches run side by side on one machine (e.g. on several branches): database names get
 * `_n`, ports move up by 1000 × n, the data directory and the queue names differ. Unset: the names and ports below.
 */
const INSTANCE = Number(process.env.BENCH_INSTANCE ?? 0);
/** a bench database's name for this instance */
export function benchDbName(name: string): string {
  return INSTANCE ? `${name}_${INSTANCE}` : name;
}
const DB_NAME = benchDbName('gridgate_bench');
/** what this instance adds to every fixed port */
export const PORT_SHIFT = 1000 * INSTANCE;
export const API_PORT = 18080 + PORT_SHIFT;
export const HTTPS_PORT = 18443 + PORT_SHIFT;
export const COAPS_PORT = 15684 + PORT_SHIFT;
/** the data directory of the bench's service processes */
export const BENCH_DIR = INSTANCE ? `/tmp/gridgate-bench-${INSTANCE}` : '/tmp/gridgate-bench';

export const HANDLER = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const body = args.event.webRequest.body;
  if (!body || body.type !== 'json') return { statusCode: 400, body: ['parameter_error', 'POST JSON'] };
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify(body.data) });
  return { statusCode: 200, body: { commands: args.scheduledCommands.map((c) => c.command.hashId) } };
}`;
export const PARSER = `
function handle(args: { payload: string }, exec: Exec) {
  const d = JSON.parse(args.payload) as { v: number; t: number };
  return { generatedAt: new Date(d.t), measurements: [{ channelIndex: 0, quantityHashId: QUANTITY, generatedAt: new Date(d.t), orderOfMagnitude: -2, significand: d.v * 100 }] };
}`;

export async function api(base: string, headers: Record<string, string>, method: string, url: string, body?: unknown): Promise<Record<string, string>> {
  const res = await fetch(base + url, { method, headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, string>;
}

async function waitHealthy(base: string, child: ChildProcess): Promise<void> {
  // 60 s: a first start on a fresh embedded DATA_DIR (initdb, migrations) on a loaded machine takes 20-30 s
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error('service exited during start');
    try {
      if ((await fetch(`${base}/health`)).ok) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('service did not become healthy');
}

export function pct(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export interface BenchService {
  base: string;
  db: Db;
  /** the database's URL; null on the embedded default */
  databaseUrl: string | null;
  children: ChildProcess[];
  stop(): Promise<void>;
}

/**
 * Starts one child process per role list (`['all']`, `['api,gateway', 'worker']`, ...) on a fresh database.
 * `embeddedDataDir`: no DATABASE_URL, the service's own embedded database in that (fresh) DATA_DIR instead.
 * `processEnv`: what process `i` has of its own (beside its API_PORT), e.g. a COAPS_PORT each.
 */
export async function startBenchService(
  processes: string[],
  env: Record<string, string> = {},
  opts: { embeddedDataDir?: string; processEnv?: (i: number) => Record<string, string> } = {},
): Promise<BenchService> {
  const dbUrl = opts.embeddedDataDir ? null : await recreateDatabase(ADMIN_URL, DB_NAME);
  const base = `http://127.0.0.1:${API_PORT}`;
  const { DATABASE_URL: _unset, ...inherited } = process.env;
  const common = {
    ...inherited,
    ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
    HTTPS_DEVICE_PORT: String(HTTPS_PORT),
    COAPS_PORT: String(COAPS_PORT),
    SECRET_KEY: '22'.repeat(32),
    LOG_LEVEL: 'warn',
    QUEUE_NAME: `bench-${Date.now()}`,
    DATA_DIR: opts.embeddedDataDir ?? BENCH_DIR,
    CERTS_DIR: `${BENCH_DIR}/certs`,
    MONITORING_CORE_URL: base,
    ...env,
  };
  // each process answers /health on its own API_PORT; the first one carries the REST API
  // BENCH_CPU_PROF=<dir>: each service process writes a V8 CPU profile there when it exits (open it in Chrome DevTools)
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`] : [];
  // BENCH_NODE_FLAGS="--trace-gc ...": extra node flags for each service process
  profile.push(...(process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean));
  const children = processes.map((roles, i) =>
    spawn(process.execPath, ['--disable-warning=ExperimentalWarning', ...profile, path.join(root, 'src/main.ts'), roles], {
      env: { ...common, API_PORT: String(API_PORT + i), ...opts.processEnv?.(i) },
      stdio: ['ignore', 'inherit', 'inherit'],
    }),
  );
  let db: Db | null = dbUrl ? await openDb({ databaseUrl: dbUrl, dataDir: '/tmp' }) : null;
  const stop = async () => {
    // the bench's own connection goes first: on the embedded default it is a client of the service's database
    await db?.close();
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : undefined)));
  };
  try {
    await Promise.all(children.map((c, i) => waitHealthy(`http://127.0.0.1:${API_PORT + i}`, c)));
    // the embedded database is the running service's: attach to it as the admin CLI does
    db ??= await openDb({ databaseUrl: null, dataDir: opts.embeddedDataDir as string });
  } catch (err) {
    await stop();
    throw err;
  }
  return { base, db, databaseUrl: dbUrl, children, stop };
}

export interface BenchDevice {
  identity: string;
  key: Buffer;
  hashId: string;
}
export interface Provisioned {
  environment: { id: number; hashId: string };
  /** headers of the logged-in machine account (Api-Version, Environment-Hash-Id, Authorization) */
  headers: Record<string, string>;
  deviceTypeHashId: string;
  devices: BenchDevice[];
  /** device i has PSK identity `${identityPrefix}${i}` */
  identityPrefix: string;
}

/**
 * A connectivity environment with the bench handler and parser and `devices` PSK devices. `sharedKey` gives every
 * device the same key (the native load generator takes one key for all its sessions).
 */
export async function provision(
  svc: BenchService,
  devices: number,
  opts: { sharedKey?: Buffer; deviceType?: Record<string, unknown> } = {},
): Promise<Provisioned> {
  const environment = await createEnvironment(svc.db, 'connectivity', 'bench');
  const account = await createMachineAccount(svc.db, environment.hashId, ['ENVIRONMENT_ADMIN']);
  const { jwt } = await api(svc.base, { 'api-version': '5' }, 'POST', '/authentication/machine-login', { assertion: account.assertion });
  const h = { 'api-version': '5', 'environment-hash-id': environment.hashId, authorization: `Bearer ${jwt}` };
  const quantity = await api(svc.base, h, 'POST', '/quantity/', { name: 'Level', unit: 'm', defaultOrderOfMagnitude: -2 });
  const reportType = await api(svc.base, h, 'POST', '/supplier-report-type/', {
    name: 'Level',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: `const QUANTITY = "${quantity.hashId}";${PARSER}`,
  });
  const deviceType = await api(svc.base, h, 'POST', '/device-type/', {
    name: 'Bench device',
    eventHandler: `const REPORT_TYPE = "${reportType.hashId}";${HANDLER}`,
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'Level', pinFieldConfigurations: [], defaultPinName: 'L', charts: [] }],
    commandTypeHashIds: [],
    ...opts.deviceType,
  });
  const list: BenchDevice[] = [];
  const prefix = `bench-${randomBytes(3).toString('hex')}-`;
  for (let i = 0; i < devices; i++) {
    const d = { identity: `${prefix}${i}`, key: opts.sharedKey ?? randomBytes(16) };
    const added = await api(svc.base, h, 'POST', '/device/psk', {
      supplierDeviceIdentifier: `bench-${i}`,
      deviceTypeHashId: deviceType.hashId,
      psk: d.key.toString('hex'),
      pskIdentity: d.identity,
    });
    list.push({ ...d, hashId: added.hashId });
  }
  return { environment, headers: h, deviceTypeHashId: deviceType.hashId, devices: list, identityPrefix: prefix };
}

/** Condition reports stored for the environment, waiting (≤ 10 s) until at least `expected` are there. */
export async function storedReports(db: Db, environmentId: number, expected: number): Promise<number> {
  let stored = 0;
  for (let i = 0; i < 100; i++) {
    stored = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM condition_report WHERE environment_id = $1', [environmentId])).rows[0].n;
    if (stored >= expected) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return stored;
}

/**
 * The provisioned devices claimed into a new monitoring environment, each linked to a pin group of
 * its own with channel 0 mapped to a pin, through the REST API as a customer would: from then on
 * every report lands on a pin. Answers the monitoring environment's id.
 */
export async function linkDevices(svc: BenchService, p: Provisioned): Promise<{ environmentId: number }> {
  const customer = await createEnvironment(svc.db, 'monitoring', 'bench customer');
  const account = await createMachineAccount(svc.db, customer.hashId, ['READ', 'STATIC', 'SENSORS']);
  const { jwt } = await api(svc.base, { 'api-version': '5' }, 'POST', '/authentication/machine-login', { assertion: account.assertion });
  const h = { 'api-version': '5', 'environment-hash-id': customer.hashId, authorization: `Bearer ${jwt}` };
  for (let i = 0; i < p.devices.length; i += 30) {
    const batch = p.devices.slice(i, i + 30);
    const { claimTokens } = (await api(svc.base, p.headers, 'POST', '/device/claim-tokens', { deviceHashIds: batch.map((d) => d.hashId) })) as unknown as {
      claimTokens: { claimToken: string }[];
    };
    await api(svc.base, h, 'POST', '/device/claim', { claimTokens: claimTokens.map((t) => t.claimToken) });
  }
  for (const [i, d] of p.devices.entries()) {
    const pinGroup = await api(svc.base, h, 'POST', '/graph/pin-group', {
      symbolKey: 'bench',
      geometry: { type: 'Point', coordinates: [5 + i / 1000, 52] },
      fields: { id: `bench ${i}` },
    });
    const { pin } = (await api(svc.base, h, 'POST', `/graph/pin-group/${pinGroup.hashId}/pin`, { fields: { id: 'level' } })) as unknown as {
      pin: { hashId: string };
    };
    await api(svc.base, h, 'POST', `/device/${d.hashId}/link`, { pinGroupHashId: pinGroup.hashId, channelMapping: [{ channel: 0, pinHashId: pin.hashId }] });
  }
  return { environmentId: customer.id };
}

/** Of the supplier environment's reports stored since report id `afterId`: how many, and how many landed on a pin group with every measurement on a pin. */
export async function reportsOnPins(db: Db, supplierEnvironmentId: number, afterId: number): Promise<{ stored: number; onPins: number }> {
  const {
    rows: [r],
  } = await db.query<{ stored: number; on_pins: number }>(
    `SELECT count(*)::int AS stored,
            count(*) FILTER (WHERE r.pin_group_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM measurement m WHERE m.report_id = r.id AND m.pin_id IS NULL))::int AS on_pins
       FROM condition_report r WHERE r.environment_id = $1 AND r.id > $2`,
    [supplierEnvironmentId, afterId],
  );
  return { stored: r.stored, onPins: r.on_pins };
}

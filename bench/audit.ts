// The audit log's cost per write: the same API writes through the REST API (in-process) on a service with AUDIT_LOG
// on and one with it off, on the same database, in alternating rounds back to back so both see the same machine
// load. Four kinds of write: a label update (one UPDATE), a pin group update (a transaction with reads around it),
// a device type update (a wide row: the event handler's source is in it), and update-pin-groups moving 100 pin groups
// in one request (100 rows, 100 log rows). Per round and kind: the wall time per write, the CPU per write of this
// process (both services and the bench's in-process client) and of the PostgreSQL backends of the bench database
// (/proc/<pid>/schedstat), and the WAL the writes made (pg_walinspect: the records of the bench database's
// transactions). The figure is the median over rounds of the per-round ratio on/off, with its spread: the cost of the
// log is CPU and WAL; the wall time also holds the commit's disk flush, which varies more than the log costs. A third
// side in the same rounds, the floor: the service with the log, its trigger function swapped for one that inserts a
// constant row into a table without index (FLOOR_TABLE), the least a row trigger logging each changed row can cost.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { BenchRow } from './dtls.ts';
import { pct } from './harness.ts';
import { benchDatabase, benchDatabaseUrl } from './measurements.ts';
import { EVENT_HANDLER } from '../test/connectivity/fixtures.ts';
import { closeContext } from '../src/context.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../test/helpers.ts';

const BATCH = 100;

/** One kind of write: `write(i)` makes the i-th write (an API request); `rows` is how many rows of `table` one changes. */
interface Kind {
  name: string;
  rows: number;
  table: string;
  write: (i: number) => Promise<void>;
}

async function ok<T>(p: Promise<{ status: number; body: T }>, what: string, status = 200): Promise<T> {
  const r = await p;
  if (r.status !== status) throw new Error(`${what} answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body;
}

/** The four kinds of write, on environments of their own in `api`. */
async function kinds(api: TestApi): Promise<Kind[]> {
  const m: ApiClient = await api.login('monitoring', ['READ', 'STATIC', 'ISSUES', 'ENVIRONMENT_ADMIN']);
  await ok(
    m.request('PUT', '/environment/', {
      mapLayers: [
        { name: 'Base', key: 'base' },
        { name: 'Aerial', key: 'aerial' },
      ],
    }),
    'environment update',
  );
  const label = (await ok(m.request<{ hashId: string }>('POST', '/label/', { name: 'bench', color: '#000000' }), 'label add')).hashId;
  const addPinGroup = async (n: number) =>
    (
      await ok(
        m.request<{ hashId: string }>('POST', '/graph/pin-group', {
          symbolKey: 'cp-rectifier',
          geometry: { type: 'Point', coordinates: [5.1, 52.1] },
          fields: { id: `bench ${n}` },
        }),
        'pin group add',
      )
    ).hashId;
  const pinGroup = await addPinGroup(0);
  const many: string[] = [];
  for (let n = 1; n <= BATCH; n++) many.push(await addPinGroup(n));
  const c: ApiClient = await api.login('connectivity', ['ENVIRONMENT_ADMIN']);
  const deviceType = (
    await ok(
      c.request<{ hashId: string }>('POST', '/device-type/', {
        name: 'bench',
        eventHandler: EVENT_HANDLER,
        fieldConfigurations: [],
        pinGroupFieldConfigurations: [],
        channels: [{ name: 'c', pinFieldConfigurations: [] }],
        commandTypeHashIds: [],
      }),
      'device type add',
    )
  ).hashId;
  return [
    { name: 'label update', rows: 1, table: 'label', write: (i) => ok(m.request('POST', `/label/${label}`, { name: `bench ${i}` }), 'label update', 204) },
    {
      name: 'pin group update',
      rows: 1,
      table: 'pin_group',
      write: (i) => ok(m.request('POST', `/graph/pin-group/${pinGroup}`, { symbolKey: `cp-${i % 2}` }), 'pin group update'),
    },
    {
      name: 'device type update',
      rows: 1,
      table: 'device_type',
      write: (i) => ok(c.request('POST', `/device-type/${deviceType}`, { name: `bench ${i}` }), 'device type update', 204),
    },
    {
      name: `update-pin-groups of ${BATCH}`,
      rows: BATCH,
      table: 'pin_group',
      write: (i) => ok(m.request('POST', '/graph/pin-groups', { hashIds: many, mapLayer: { key: i % 2 ? 'aerial' : 'base' } }), 'pin groups update', 204),
    },
  ];
}

// a backend is one thread: its schedstat's first field is its time on a CPU in ns (stat's ticks of 10 ms are too
// coarse for a round's few hundred ms)
function cpuNs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return 0; // the backend ended while we looked
  }
}

/**
 * CPU and WAL of the bench database since the call: `admin` is a connection of its own to that database (its backend
 * is left out). A backend that starts meanwhile counts whole; the services keep theirs open (a long idle timeout).
 * Autovacuum's workers are left out: they come when a table's changes cross a threshold, in whichever round that is.
 * The log's rows are vacuumed and analyzed too: a cost of the log, spread over many writes, that these figures leave out.
 */
async function meter(admin: pg.Client, dbOid: number): Promise<() => Promise<{ serviceMs: number; postgresMs: number; walBytes: number }>> {
  const backends = async () =>
    (
      await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datid = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`, [
        dbOid,
      ])
    ).rows.map((r) => r.pid);
  const startPg = new Map((await backends()).map((pid) => [pid, cpuNs(pid)]));
  const {
    rows: [{ lsn: startLsn }],
  } = await admin.query<{ lsn: string }>('SELECT pg_current_wal_flush_lsn()::text AS lsn');
  const startCpu = process.cpuUsage();
  return async () => {
    const cpu = process.cpuUsage(startCpu);
    let ns = 0;
    for (const pid of await backends()) ns += cpuNs(pid) - (startPg.get(pid) ?? 0);
    // the WAL records of transactions that changed this database's relations (their commit records included)
    const {
      rows: [{ bytes }],
    } = await admin.query<{ bytes: string | null }>(
      `WITH r AS (SELECT xid, record_length, block_ref FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_flush_lsn()))
       SELECT sum(record_length)::text AS bytes FROM r
        WHERE xid IN (SELECT xid FROM r WHERE block_ref LIKE $2 AND xid <> '0')`,
      [startLsn, `%rel %/${dbOid}/%`],
    );
    return { serviceMs: (cpu.user + cpu.system) / 1000, postgresMs: ns / 1e6, walBytes: Number(bytes ?? 0) };
  };
}

// The floor of a log row: the table's audit trigger function swapped, for a round, for one whose only statement
// inserts a constant row into a table without an index, key or default. Whatever a row trigger that logs each changed
// row records, and however it is found again, it costs at least this per row. The table is in a schema of its own,
// where audit_attach_all() (it attaches to the tables of the current schema) puts no audit trigger on it.
const FLOOR_TABLE = 'bench_audit.floor';
const floorFunction = (table: string) => `CREATE OR REPLACE FUNCTION audit_row_${table}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ${FLOOR_TABLE} VALUES (1, 'u', 'label', 'h', 'update'); RETURN NULL; END $$`;

interface Round {
  wallMs: number;
  cpuMs: number;
  serviceMs: number;
  postgresMs: number;
  walBytes: number;
}

async function round(kind: Kind, writes: number, admin: pg.Client, dbOid: number): Promise<Round> {
  const times: number[] = [];
  const done = await meter(admin, dbOid);
  for (let i = 0; i < writes; i++) {
    const t0 = performance.now();
    await kind.write(i);
    times.push(performance.now() - t0);
  }
  const { serviceMs, postgresMs, walBytes } = await done();
  return {
    wallMs: pct(
      times.sort((a, b) => a - b),
      50,
    ),
    cpuMs: (serviceMs + postgresMs) / writes,
    serviceMs: serviceMs / writes,
    postgresMs: postgresMs / writes,
    walBytes: walBytes / writes,
  };
}

const sorted = (a: number[]) => [...a].sort((x, y) => x - y);
const median = (a: number[]) => pct(sorted(a), 50);
const extra = (ratio: number) => (ratio - 1) * 100;
const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)} %`;

/** Rows of the audit log's cost: per kind of write, CPU and wall time per write with AUDIT_LOG on against off. */
export async function auditCostRows(opts: { rounds: number; writes: number }): Promise<BenchRow[]> {
  const name = 'gridgate_bench_audit';
  const setup = await benchDatabase(name);
  await setup.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  await setup.query('CREATE SCHEMA IF NOT EXISTS bench_audit');
  await setup.query(`CREATE TABLE IF NOT EXISTS ${FLOOR_TABLE} (environment_id bigint, user_hash_id text, object_type text, object_hash_id text, action text)`);
  await setup.close();
  const env = { DATABASE_URL: benchDatabaseUrl(name), DATABASE_IDLE_TIMEOUT_MS: '3600000' };
  const on = await startTestApi(await testContext({ ...env, AUDIT_LOG: 'on' }));
  const off = await startTestApi(await testContext({ ...env, AUDIT_LOG: 'off' }));
  const admin = new pg.Client({ connectionString: benchDatabaseUrl(name) });
  await admin.connect();
  try {
    const dbOid = (await admin.query<{ oid: number }>('SELECT oid FROM pg_database WHERE datname = current_database()')).rows[0].oid;
    const sides = { on: await kinds(on), off: await kinds(off) };
    const rounds = sides.on.map(() => ({ on: [] as Round[], off: [] as Round[], floor: [] as Round[] }));
    const loads: number[] = [];
    // round 0 warms both up (JIT, pools, plans) and is not counted
    for (let r = 0; r <= opts.rounds; r++) {
      const order = r % 2 === 0 ? (['on', 'off', 'floor'] as const) : (['floor', 'off', 'on'] as const);
      for (let k = 0; k < rounds.length; k++) {
        const writes = Math.max(5, Math.round(opts.writes / sides.on[k].rows));
        for (const side of order) {
          // the floor is the service with the log, its trigger function swapped for the round
          if (side === 'floor') await admin.query(floorFunction(sides.on[k].table));
          try {
            const result = await round(sides[side === 'off' ? 'off' : 'on'][k], writes, admin, dbOid);
            if (r > 0) rounds[k][side].push(result);
          } finally {
            if (side === 'floor') await admin.query('SELECT audit_attach_all()'); // the generated function back
          }
        }
      }
      loads.push(Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]));
    }
    const load = `load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`;
    return sides.on.flatMap((kind, k): BenchRow[] => {
      const { on: a, off: b, floor: f0 } = rounds[k];
      const ratios = (f: (x: Round) => number, side = a) => sorted(side.map((x, i) => f(x) / f(b[i])));
      const cpu = ratios((x) => x.cpuMs);
      const floorCpu = ratios((x) => x.cpuMs, f0);
      const wall = ratios((x) => x.wallMs);
      const m = (side: Round[], f: (x: Round) => number) => median(side.map(f));
      // PostgreSQL's CPU per logged row over the writes without a log (the service's is the same code on both sides)
      const perRow = (side: Round[]) => `${(((m(side, (x) => x.postgresMs) - m(b, (x) => x.postgresMs)) * 1000) / kind.rows).toFixed(1)} µs`;
      const described = `${opts.rounds} alternating rounds of ${Math.max(5, Math.round(opts.writes / kind.rows))} writes`;
      return [
        {
          name: `audit log cost per API write: ${kind.name} (${kind.rows} row${kind.rows > 1 ? 's' : ''}), ${described}, AUDIT_LOG on vs off`,
          value: Number(extra(median(cpu)).toFixed(1)),
          unit: '% more CPU per write with the log (median of the per-round ratios; service + PostgreSQL backends)',
          p50Ms: Number(m(a, (x) => x.wallMs).toFixed(3)),
          target: 'under 5 %',
          detail:
            `CPU per write ${m(a, (x) => x.cpuMs).toFixed(3)} ms on / ${m(b, (x) => x.cpuMs).toFixed(3)} ms off ` +
            `(service ${m(a, (x) => x.serviceMs).toFixed(3)}/${m(b, (x) => x.serviceMs).toFixed(3)}, PostgreSQL ${m(a, (x) => x.postgresMs).toFixed(3)}/${m(b, (x) => x.postgresMs).toFixed(3)}: +${perRow(a)} a logged row), ` +
            `CPU ratio spread ${signed(extra(cpu[0]))} to ${signed(extra(cpu[cpu.length - 1]))} (quartiles ${signed(extra(pct(cpu, 25)))} to ${signed(extra(pct(cpu, 75)))}); ` +
            `wall median ${m(a, (x) => x.wallMs).toFixed(3)} ms on / ${m(b, (x) => x.wallMs).toFixed(3)} ms off, ratio ${signed(extra(median(wall)))} ` +
            `(quartiles ${signed(extra(pct(wall, 25)))} to ${signed(extra(pct(wall, 75)))}); ` +
            `WAL per write ${m(a, (x) => x.walBytes).toFixed(0)} B on / ${m(b, (x) => x.walBytes).toFixed(0)} B off; ${load}`,
        },
        {
          name: `audit log floor per API write: ${kind.name} (${kind.rows} row${kind.rows > 1 ? 's' : ''}), ${described}, the trigger inserting a constant row into a table without index vs AUDIT_LOG off`,
          value: Number(extra(median(floorCpu)).toFixed(1)),
          unit: '% more CPU per write than without a log (median of the per-round ratios; service + PostgreSQL backends)',
          p50Ms: Number(m(f0, (x) => x.wallMs).toFixed(3)),
          target: 'the least a row trigger logging each changed row costs (the log above: under 5 %)',
          detail:
            `CPU per write ${m(f0, (x) => x.cpuMs).toFixed(3)} ms floor / ${m(b, (x) => x.cpuMs).toFixed(3)} ms off (PostgreSQL ${m(f0, (x) => x.postgresMs).toFixed(3)}/${m(b, (x) => x.postgresMs).toFixed(3)}: +${perRow(f0)} a row), ` +
            `CPU ratio quartiles ${signed(extra(pct(floorCpu, 25)))} to ${signed(extra(pct(floorCpu, 75)))}; ${load}`,
        },
      ];
    });
  } finally {
    await admin.end();
    await Promise.all([on.close(), off.close()]);
    // startTestApi leaves a context it was given open: its pools and Redis would keep the bench from exiting
    await Promise.all([closeContext(on.ctx), closeContext(off.ctx)]);
  }
}

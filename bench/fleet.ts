// The fleet rows of `npm run bench` (--fleet on): the CoAP/DTLS closed loop of bench/coap.ts (bench/dtls-load.c, each
// session one CON POST in flight) and the HTTPS TLS-PSK closed loop of bench/run.ts (bench/psk-client.ts, node:tls
// keep-alive, one report in flight per device) against one gateway node reached directly, and against 1, 2 and 3 gateway nodes
// behind a real nginx stream balancer, all of one fleet of scripts/fleet/topology.ts (an API node, three gateway
// nodes and one worker of src/main.ts on the bench's PostgreSQL and Redis). Between rows nginx is reloaded with 1, 2
// or 3 upstreams (the other gateways stay up, idle), so every row runs on the same processes, and the rounds
// alternate the rows so that each sees the same machine load. On a 2-core machine this shows what the cluster costs
// (nginx, more processes sharing two cores), not how it scales. CPU per report is read from /proc for every service
// process, nginx, PostgreSQL and Redis (bench/cpu.ts).
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { startFleet, type Fleet } from '../scripts/fleet/topology.ts';
import type { BalancedPort } from '../scripts/fleet/nginx.ts';
import { OPEN_LIMITS } from './coap.ts';
import { cpuMeter } from './cpu.ts';
import { buildLoadGenerator, runLoad, type BenchRow } from './dtls.ts';
import { pct, provision, storedReports, type BenchService } from './harness.ts';
import { runPskDevice } from './psk-client.ts';
import { benchDatabase, benchDatabaseUrl } from './measurements.ts';

const DB_NAME = 'gridgate_bench_fleet';

/** One row's way in: straight to gateway 1's CoAP port, or through nginx to the first `nodes` gateways. */
interface Route {
  name: string;
  nodes: number;
  nginx: boolean;
}
const ROUTES: Route[] = [
  { name: '1 node directly', nodes: 1, nginx: false },
  { name: '1 node behind nginx', nodes: 1, nginx: true },
  { name: '2 nodes behind nginx', nodes: 2, nginx: true },
  { name: '3 nodes behind nginx', nodes: 3, nginx: true },
];

type Protocol = 'CoAP/DTLS' | 'HTTPS TLS-PSK';
interface Totals {
  ok: number;
  errors: number;
  seconds: number;
  cpu: Record<string, number>;
  p50: number[];
  p99: number[];
  loads: string[];
}
interface Measured {
  ok: number;
  errors: number;
  p50Ms: number;
  p99Ms: number;
  cpu: Record<string, number>;
  load: string;
}

/** The nginx upstreams for the first `nodes` gateways, beside the fleet's HTTPS and API ports as topology.ts has them. */
function balanced(fleet: Fleet, nodes: number): BalancedPort[] {
  const gateways = fleet.gateways().slice(0, nodes);
  const api = fleet.nodes.find((n) => n.role === 'api')!;
  return [
    { listen: fleet.ports.coaps, protocol: 'udp', upstreams: gateways.map((g) => `127.0.0.1:${g.coapsPort}`) },
    { listen: fleet.ports.https, protocol: 'tcp', upstreams: gateways.map((g) => `127.0.0.1:${g.httpsPort}`) },
    { listen: fleet.ports.api, protocol: 'tcp', upstreams: [`127.0.0.1:${api.apiPort}`] },
  ];
}

export async function fleetRows(opts: { sessions: number; httpsDevices: number; seconds: number; procs: number; rounds: number }): Promise<BenchRow[]> {
  buildLoadGenerator();
  const key = randomBytes(16);
  const per = Math.ceil(opts.sessions / opts.procs);
  const db = await benchDatabase(DB_NAME);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-bench-fleet-'));
  let fleet: Fleet | undefined;
  try {
    fleet = await startFleet({
      gateways: 3,
      workers: 1,
      dir,
      env: {
        DATABASE_URL: benchDatabaseUrl(DB_NAME),
        REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        SECRET_KEY: '33'.repeat(32),
        QUEUE_NAME: `bench-fleet-${Date.now()}`,
        DATA_DIR: path.join(dir, 'data'),
        CERTS_DIR: path.join(dir, 'certs'),
        ...OPEN_LIMITS,
      },
    });
    const f = fleet;
    const svc: BenchService = {
      base: f.apiBase,
      db,
      databaseUrl: benchDatabaseUrl(DB_NAME),
      children: f.nodes.map((n) => n.child),
      stop: async () => undefined,
    };
    const p = await provision(svc, per * opts.procs, { sharedKey: key });
    const meter = () =>
      cpuMeter({
        ...Object.fromEntries(f.nodes.map((n) => [n.name, (q: { pid: number }) => q.pid === n.child.pid])),
        // this fleet's nginx (its master and the workers it forks), not another one on the machine
        nginx: (q) => q.pid === f.balancer.pid || q.ppid === f.balancer.pid,
        postgres: (q) => q.comm.startsWith('postgres'),
        redis: (q) => q.comm.startsWith('redis-server'),
      });
    let answered = 0;
    const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    const coap = async (port: number, seconds: number): Promise<Measured> => {
      const read = meter();
      const result = await runLoad(opts.procs, (i) => [
        'coap',
        '127.0.0.1',
        String(port),
        String(seconds),
        String(per),
        'psk',
        p.identityPrefix,
        key.toString('hex'),
        String(i * per),
        '/report',
      ]);
      return { ...result, cpu: read(), load: loadAverage() };
    };
    const https = async (port: number, seconds: number): Promise<Measured> => {
      const read = meter();
      const until = Date.now() + seconds * 1000;
      const stats = await Promise.all(
        p.devices.slice(0, opts.httpsDevices).map((d) => runPskDevice({ port, identity: d.identity, key: d.key, measureFrom: 0, until })),
      );
      const cpu = read();
      const latencies = stats.flatMap((s) => s.latenciesMs).sort((a, b) => a - b);
      const ok = stats.reduce((a, s) => a + s.acknowledged + s.acknowledgedWarmup, 0);
      return {
        ok,
        errors: stats.reduce((a, s) => a + s.errors, 0),
        p50Ms: Number(pct(latencies, 50).toFixed(2)),
        p99Ms: Number(pct(latencies, 99).toFixed(2)),
        cpu,
        load: loadAverage(),
      };
    };
    const load = async (protocol: Protocol, route: Route, seconds: number): Promise<Measured> => {
      if (route.nginx) await f.balancer.reload(balanced(f, route.nodes));
      const gateway = f.gateways()[0];
      const result =
        protocol === 'CoAP/DTLS'
          ? await coap(route.nginx ? f.ports.coaps : gateway.coapsPort, seconds)
          : await https(route.nginx ? f.ports.https : gateway.httpsPort, seconds);
      answered += result.ok;
      return result;
    };
    const protocols: Protocol[] = opts.httpsDevices > 0 ? ['CoAP/DTLS', 'HTTPS TLS-PSK'] : ['CoAP/DTLS'];
    // warm-up (JIT of every gateway, caches, pools): through nginx to all three, and directly
    for (const protocol of protocols) {
      await load(protocol, ROUTES[3], 3);
      await load(protocol, ROUTES[0], 3);
    }
    const rows = protocols.flatMap((protocol) => ROUTES.map((route) => ({ protocol, route })));
    const totals = new Map(rows.map((r) => [r, { ok: 0, errors: 0, seconds: 0, cpu: {}, p50: [], p99: [], loads: [] } as Totals]));
    for (let round = 0; round < opts.rounds; round++) {
      // the order turns each round, so no row always follows the same one
      for (let k = 0; k < rows.length; k++) {
        const row = rows[(k + round) % rows.length];
        const r = await load(row.protocol, row.route, opts.seconds);
        const t = totals.get(row)!;
        t.ok += r.ok;
        t.errors += r.errors;
        t.seconds += opts.seconds;
        t.p50.push(r.p50Ms);
        t.p99.push(r.p99Ms);
        t.loads.push(r.load);
        for (const [name, s] of Object.entries(r.cpu)) t.cpu[name] = (t.cpu[name] ?? 0) + s;
      }
    }
    // every answered report must be stored, whichever node took it
    const stored = await storedReports(db, p.environment.id, answered);
    return rows.map((row) => {
      const { protocol, route } = row;
      const t = totals.get(row)!;
      const ms = (s: number) => (s * 1000) / Math.max(1, t.ok);
      const service = Object.entries(t.cpu)
        .filter(([name]) => !['nginx', 'postgres', 'redis'].includes(name))
        .reduce((a, [, s]) => a + s, 0);
      const total = Object.values(t.cpu).reduce((a, s) => a + s, 0);
      const byProcess = Object.entries(t.cpu)
        .filter(([, s]) => s > 0)
        .map(([name, s]) => `${name} ${ms(s).toFixed(3)}`)
        .join(', ');
      return {
        name:
          protocol === 'CoAP/DTLS'
            ? `fleet: CoAP/DTLS PSK reports end to end, ${per * opts.procs} sessions closed loop (1 CON in flight each), ${route.name} (fleet of API + 3 gateways + 1 worker), ${opts.rounds} × ${opts.seconds} s alternating`
            : `fleet: HTTPS TLS-PSK reports end to end, ${opts.httpsDevices} devices keep-alive closed loop, ${route.name} (fleet of API + 3 gateways + 1 worker), ${opts.rounds} × ${opts.seconds} s alternating`,
        value: Math.round(t.ok / Math.max(1, t.seconds)),
        unit: 'reports/s',
        p50Ms: Number(median(t.p50).toFixed(2)),
        p99Ms: Number(median(t.p99).toFixed(2)),
        errors: t.errors,
        detail: `CPU ms/report: all ${ms(total).toFixed(3)} = service ${ms(service).toFixed(3)} + nginx ${ms(t.cpu.nginx ?? 0).toFixed(3)} + PostgreSQL ${ms(t.cpu.postgres ?? 0).toFixed(3)} + Redis ${ms(t.cpu.redis ?? 0).toFixed(3)} (${byProcess}); p50/p99 are the medians of the rounds (p99 per round ${t.p99.join(', ')}); load average per round ${t.loads.join(' | ')}; over the whole run (warm-up included) answered ${answered}, stored ${stored} (reports in flight when a load stops are stored but not counted as answered), lost ${Math.max(0, answered - stored)}`,
        target: 'the cost of the cluster on one 2-core machine (reference)',
      };
    });
  } finally {
    await fleet?.stop();
    await db.close();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.floor(s.length / 2)];
}

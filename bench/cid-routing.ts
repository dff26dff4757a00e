// CPU of a record forwarded between the nodes of a CID-routed cluster against a local one (src/dtls/cluster/): two
// node processes (bench/cid-node.ts, our DTLS server answering each record with its content), `clients` devices with
// a Connection ID (test/support/cid-client), each closed loop: one 100-byte record out, its answer back. Local: every
// device sends to the node that holds its session. Forwarded: every device moved to the other node's port (as behind a
// balancer after a NAT rebinding): its records go there, on to the owner, and the answers back the same way. CPU is
// both node processes' (utime + stime from /proc) per answered record. Two clusters side by side, the same but for
// the batch bound: `coalesced` (the default DTLS_CLUSTER_BATCH_BYTES) and `alone` (0: one record per inter-node
// datagram, the protocol before coalescing); the rounds alternate cluster and local/forwarded, so all four see the
// same machine load. `node bench/cid-routing.ts records|reports [clients] [per round] [rounds]`: the DTLS layer
// alone, or whole CoAP reports through the service (cidReportRows). CID_PROF=<dir>: a V8 CPU profile of each node there.
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { generate } from 'coap-packet';
import { DEFAULT_BATCH_BYTES } from '../src/dtls/cluster/messages.ts';
import { CidClient } from '../test/support/cid-client/client.ts';
import { cpuMeter } from './cpu.ts';
import type { BenchRow } from './dtls.ts';
import { API_PORT, COAPS_PORT, HTTPS_PORT, provision, root, startBenchService } from './harness.ts';
import { DEFAULT_HANDOVER_AFTER } from '../src/dtls/cluster/settings.ts';

interface Node {
  child: ChildProcess;
  port: number;
  nodeId: number;
}

function startNode(env: Record<string, string>): Promise<Node> {
  const child = fork(path.join(root, 'bench/cid-node.ts'), [], {
    execArgv: ['--disable-warning=ExperimentalWarning', ...(process.env.CID_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CID_PROF}`] : [])],
    env: { ...process.env, ...env },
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`cid-node exited with ${code}`)));
    child.once('message', (m: { ready: { port: number; nodeId: number } }) => resolve({ child, ...m.ready }));
  });
}

/** A bare UDP relay (bench/udp-relay.ts) in front of the node listening on `target`. */
function startRelay(target: number): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(path.join(root, 'bench/udp-relay.ts'), [], {
    execArgv: ['--disable-warning=ExperimentalWarning'],
    env: { ...process.env, BENCH_RELAY_TARGET: String(target) },
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`udp-relay exited with ${code}`)));
    child.once('message', (m: { ready: { port: number } }) => resolve({ child, ...m.ready }));
  });
}

/** Every client sends `records` records (`payload(i)`), one at a time, each after the answer to the previous. */
async function closedLoop(clients: CidClient[], records: number, payload: (i: number) => Buffer = () => ECHO_PAYLOAD): Promise<void> {
  await Promise.all(
    clients.map(async (c) => {
      for (let i = 0; i < records; i++) {
        const answered = new Promise<void>((resolve) => c.socket.once('message', () => resolve()));
        c.send(payload(i));
        await answered;
      }
    }),
  );
}
const ECHO_PAYLOAD = randomBytes(100);

/** The batch bounds compared: the default, and 0 (every message in a datagram of its own, as before coalescing). */
const ARMS = { coalesced: String(DEFAULT_BATCH_BYTES), alone: '0' } as const;
type ArmName = keyof typeof ARMS;
type Mode = 'local' | 'forwarded';

interface Arm {
  clients: CidClient[];
  ports: Record<Mode, number>;
  /** CPU seconds per group of processes since it was called */
  meter: () => () => Record<string, number>;
  /** Sessions follow their devices (hand-over): after a forwarded round they are on the other node, so the two ports swap. */
  follows?: boolean;
}

/**
 * `rounds` times, each arm local then forwarded (every client moved to a new source port before each), running
 * `run(clients)` and adding up the arm's CPU; returns seconds by arm, mode and group, and the load averages seen.
 */
async function alternate<A extends string>(arms: Record<A, Arm>, rounds: number, run: (clients: CidClient[]) => Promise<void>) {
  const names = Object.keys(arms) as A[];
  const cpu = Object.fromEntries(names.map((name) => [name, { local: {}, forwarded: {} }])) as Record<A, Record<Mode, Record<string, number>>>;
  const load: string[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const name of names) {
      const arm = arms[name];
      for (const mode of ['local', 'forwarded'] as const) {
        for (const c of arm.clients) await c.moveTo(arm.ports[mode]);
        const read = arm.meter();
        await run(arm.clients);
        for (const [k, v] of Object.entries(read())) cpu[name][mode][k] = (cpu[name][mode][k] ?? 0) + v;
        if (arm.follows && mode === 'forwarded') arm.ports = { local: arm.ports.forwarded, forwarded: arm.ports.local };
      }
    }
    load.push(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
  }
  return { cpu, load };
}

const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
const percent = (local: number, forwarded: number) => Number((((forwarded - local) / local) * 100).toFixed(1));

/** Messages per inter-node datagram a node sent (forwards from the receiving node, answers from the owner). */
function perDatagram(sent: { datagrams: number; messages: number }): string {
  return sent.datagrams ? (sent.messages / sent.datagrams).toFixed(2) : '-';
}

async function connectClients(n: number, port: number, psk: Buffer, prefix: string): Promise<CidClient[]> {
  const clients: CidClient[] = [];
  for (let i = 0; i < n; i++) {
    const c = new CidClient(port, { identity: `${prefix}${i}`, psk });
    await c.connect();
    clients.push(c);
  }
  return clients;
}

export async function cidRoutingRows(opts: { clients: number; records: number; rounds: number }): Promise<BenchRow[]> {
  const psk = randomBytes(16);
  const clusters = {} as Record<ArmName, Node[]>;
  const clients: CidClient[] = [];
  try {
    const arms = {} as Record<ArmName, Arm>;
    for (const name of Object.keys(ARMS) as ArmName[]) {
      const env = {
        BENCH_PSK: psk.toString('hex'),
        BENCH_DEPLOYMENT: `bench-cid-${randomBytes(4).toString('hex')}`,
        BENCH_CLUSTER_KEY: randomBytes(32).toString('hex'),
        BENCH_BATCH_BYTES: ARMS[name],
      };
      const nodes = (clusters[name] = [await startNode(env), await startNode(env)]);
      await Promise.all(
        nodes.map(
          (n) =>
            new Promise((r) => {
              n.child.send({ peers: 2 });
              n.child.once('message', r);
            }),
        ),
      );
      const [owner, other] = nodes;
      const armClients = await connectClients(opts.clients, owner.port, psk, `bench-${name}-`);
      clients.push(...armClients);
      arms[name] = {
        clients: armClients,
        ports: { local: owner.port, forwarded: other.port },
        meter: () => cpuMeter({ owner: (p) => p.pid === owner.child.pid, other: (p) => p.pid === other.child.pid }),
      };
      await closedLoop(armClients, 200); // warm-up (JIT), not counted
      for (const c of armClients) await c.moveTo(other.port);
      await closedLoop(armClients, 200);
    }
    const { cpu, load } = await alternate(arms, opts.rounds, (cs) => closedLoop(cs, opts.records));
    const sent = async (n: Node) =>
      new Promise<{ datagrams: number; messages: number }>((r) => {
        n.child.send({ sent: true });
        n.child.once('message', (m: { sent: { datagrams: number; messages: number } }) => r(m.sent));
      });
    const n = opts.clients * opts.records * opts.rounds;
    const us = (s: number) => Number(((s * 1e6) / n).toFixed(1));
    const arm = async (name: ArmName) => {
      const local = us(sum(cpu[name].local));
      const forwarded = us(sum(cpu[name].forwarded));
      const [owner, other] = clusters[name];
      return {
        local,
        forwarded,
        more: percent(local, forwarded),
        text: `${name}: local ${local} µs per record (owner ${us(cpu[name].local.owner)}), forwarded ${forwarded} µs (receiving node ${us(cpu[name].forwarded.other)}, owner ${us(cpu[name].forwarded.owner)}): +${(forwarded - local).toFixed(1)} µs, +${percent(local, forwarded)} %; records per inter-node datagram ${perDatagram(await sent(other))}, answers ${perDatagram(await sent(owner))}`,
      };
    };
    const coalesced = await arm('coalesced');
    const alone = await arm('alone');
    return [
      {
        name: `DTLS CID routing: CPU per record forwarded between two nodes against a local one (our DTLS server answering each record; ${opts.clients} devices closed loop, ${n.toLocaleString('en')} records each way and cluster)`,
        value: coalesced.more,
        unit: '% more CPU (DTLS layer alone)',
        detail: `${coalesced.text}; ${alone.text}; load average ${load.join(', ')}`,
        target: "< 10 % of a CoAP report's CPU (the issue; Californium ~20 %): the extra µs against the CPU per CoAP/DTLS report of docs/speed.md",
      },
    ];
  } finally {
    for (const c of clients) c.close();
    const nodes = Object.values(clusters).flat();
    for (const n of nodes) n.child.send({ stop: true });
    await Promise.all(nodes.map((n) => (n.child.exitCode === null ? new Promise((r) => n.child.once('exit', r)) : undefined)));
  }
}

/**
 * The pairs of service processes of the reports row: the two arms of the records row with sessions that stay on the
 * node of their handshake (DTLS_CLUSTER_HANDOVER_AFTER 0: every record of a moved device is forwarded), and `handover`,
 * two `all` processes with the default hand-over: a moved device's session follows it after DTLS_CLUSTER_HANDOVER_AFTER
 * records, so its reports are local again on the node it reached.
 */
const REPORT_ARMS = {
  coalesced: { roles: ['all', 'gateway'], batchBytes: ARMS.coalesced, handoverAfter: '0' },
  alone: { roles: ['all', 'gateway'], batchBytes: ARMS.alone, handoverAfter: '0' },
  handover: { roles: ['all', 'all'], batchBytes: ARMS.coalesced, handoverAfter: String(DEFAULT_HANDOVER_AFTER) },
} as const;
type ReportArm = keyof typeof REPORT_ARMS;

/** A counter's value on the service process answering /metrics at `base` (0 when absent). */
async function counter(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

/**
 * The same comparison for whole CoAP reports: the service as three clusters of two processes each (REPORT_ARMS: the
 * owner of every session, an `all` process, and a second node) on PostgreSQL and Redis; `clients` devices per cluster
 * post a report (Confirmable POST, answered on the ACK) closed loop, to the owner (local) or to the other node
 * (forwarded). Each `all` process runs the reports of its own sessions (local handoff), so the clusters not in use
 * idle. CPU of the cluster's service processes per answered report. In the `handover` cluster the sessions follow
 * their devices: a forwarded round ends with them on the other node, so the next local round goes there (`follows`),
 * and every forwarded round is "each device moved": its first records forwarded, the hand-over, then local reports.
 * A fourth set of devices measures the floor: sessions on the coalesced cluster's owner, reached in "forwarded" rounds
 * through a bare UDP relay (bench/udp-relay.ts) instead of another node.
 */
export async function cidReportRows(opts: { clients: number; reports: number; rounds: number }): Promise<BenchRow[]> {
  const names = Object.keys(REPORT_ARMS) as ReportArm[];
  // processes: two per arm, in REPORT_ARMS's order; each its own CoAPS and device HTTPS port
  const svc = await startBenchService(
    names.flatMap((name) => [...REPORT_ARMS[name].roles]),
    { DTLS_CLUSTER_PORT: '0', DTLS_CLUSTER_ADDRESS: '127.0.0.1' },
    {
      processEnv: (i) => ({
        COAPS_PORT: String(COAPS_PORT + i),
        HTTPS_DEVICE_PORT: String(HTTPS_PORT + i),
        DTLS_CLUSTER_BATCH_BYTES: REPORT_ARMS[names[i >> 1]].batchBytes,
        DTLS_CLUSTER_HANDOVER_AFTER: REPORT_ARMS[names[i >> 1]].handoverAfter,
      }),
    },
  );
  const clients: CidClient[] = [];
  let relay: { child: ChildProcess; port: number } | undefined;
  try {
    // one more set of devices for the relay arm (the floor, below)
    const p = await provision(svc, opts.clients * (names.length + 1));
    let messageId = 0;
    const report = (i: number) =>
      generate({
        confirmable: true,
        code: 'POST',
        messageId: ++messageId & 0xffff,
        token: randomBytes(4),
        options: [
          { name: 'Uri-Path', value: Buffer.from('r') },
          { name: 'Content-Format', value: Buffer.from([50]) },
        ],
        payload: Buffer.from(JSON.stringify({ v: i % 100, t: Date.now() })),
      });
    /** The `set`-th set of `opts.clients` provisioned devices, connected (their sessions made) to the node at `port`. */
    const connectSet = async (set: number, port: number): Promise<CidClient[]> => {
      const connected: CidClient[] = [];
      for (const d of p.devices.slice(set * opts.clients, (set + 1) * opts.clients)) {
        const c = new CidClient(port, { identity: d.identity, psk: d.key });
        await c.connect();
        connected.push(c);
      }
      clients.push(...connected);
      return connected;
    };
    /** CPU of the processes `pids` (the service's part of the figure), and of PostgreSQL and Redis beside it. */
    const serviceMeter = (pids: (number | undefined)[]) => () =>
      cpuMeter({
        service: (q) => pids.includes(q.pid),
        postgres: (q) => q.comm.startsWith('postgres'),
        redis: (q) => q.comm.startsWith('redis-server'),
      });
    const arms = {} as Record<ReportArm | 'relay', Arm>;
    for (const [k, name] of names.entries()) {
      const owner = COAPS_PORT + 2 * k;
      const armClients = await connectSet(k, owner);
      arms[name] = {
        clients: armClients,
        ports: { local: owner, forwarded: owner + 1 },
        follows: REPORT_ARMS[name].handoverAfter !== '0',
        meter: serviceMeter(svc.children.slice(2 * k, 2 * k + 2).map((c) => c.pid)),
      };
      await closedLoop(armClients, 50, report); // warm-up, not counted
    }
    // The floor of a forwarded report: devices of their own with sessions on the coalesced arm's owner, and in the
    // "forwarded" rounds a bare UDP relay between them and that owner (bench/udp-relay.ts). A node that receives a
    // record for another node's session passes it on and the answer back at least this way: the relay's CPU per report
    // is the least the receiving node's part can cost on this runtime, at this load.
    {
      const owner = COAPS_PORT;
      relay = await startRelay(owner);
      const relayClients = await connectSet(names.length, owner);
      arms.relay = {
        clients: relayClients,
        ports: { local: owner, forwarded: relay.port },
        meter: serviceMeter([...svc.children.slice(0, 2).map((c) => c.pid), relay.child.pid]),
      };
      await closedLoop(relayClients, 50, report);
    }
    const handoverBase = (i: number) => `http://127.0.0.1:${API_PORT + 2 * names.indexOf('handover') + i}`;
    const handovers = async () =>
      (await counter(handoverBase(0), 'gridgate_dtls_cluster_handovers_total')) + (await counter(handoverBase(1), 'gridgate_dtls_cluster_handovers_total'));
    const handoversBefore = await handovers();
    const { cpu, load } = await alternate(arms, opts.rounds, (cs) => closedLoop(cs, opts.reports, report));
    const handedOver = (await handovers()) - handoversBefore;
    const n = opts.clients * opts.reports * opts.rounds;
    const ms = (s: number) => Number(((s * 1000) / n).toFixed(3));
    // the service's processes only: PostgreSQL and Redis do the same work either way, and on a shared machine their
    // CPU includes every other client's
    const arm = (name: ReportArm | 'relay') => {
      const local = ms(cpu[name].local.service);
      const forwarded = ms(cpu[name].forwarded.service);
      return {
        more: percent(local, forwarded),
        text: `${name}: service ${local} ms per local report, ${forwarded} ms per forwarded one (+${(forwarded - local).toFixed(3)} ms, +${percent(local, forwarded)} %); with PostgreSQL and Redis (all of this machine's): ${ms(sum(cpu[name].local))} and ${ms(sum(cpu[name].forwarded))} ms`,
      };
    };
    const coalesced = arm('coalesced');
    const floor = arm('relay');
    const local = ms(cpu.handover.local.service);
    const moved = ms(cpu.handover.forwarded.service);
    return [
      {
        name: `CoAP/DTLS reports forwarded between two gateway nodes against local ones: CPU of the service's processes per report (${opts.clients} devices with a CID closed loop, ${n.toLocaleString('en')} reports each way and cluster, sessions kept where their handshake was)`,
        value: coalesced.more,
        unit: '% more CPU per report',
        detail: `${coalesced.text}; ${arm('alone').text}; the floor, a bare UDP relay: ${floor.text}; load average ${load.join(', ')}`,
        target: '< 10 % (the issue; Californium ~20 %)',
      },
      {
        name: `floor of a forwarded CoAP/DTLS report: a bare UDP relay (Node, one upstream socket per device) between the devices and their session's node, against none: CPU of the service's processes and the relay per report (${opts.clients} devices closed loop, ${n.toLocaleString('en')} reports each way)`,
        value: floor.more,
        unit: '% more CPU per report',
        detail: `${floor.text.replace(/^relay: service/, 'service and relay')}; load average ${load.join(', ')}`,
        target: 'the least the forwarded row above can cost on this runtime (its target: < 10 %)',
      },
      {
        name: `CoAP/DTLS reports of devices that reached another gateway node than their session's, the session handed over after ${DEFAULT_HANDOVER_AFTER} records (DTLS_CLUSTER_HANDOVER_AFTER), against local ones: CPU of the service's processes per report (${opts.clients} devices closed loop, ${opts.reports} reports each a round, ${n.toLocaleString('en')} reports each way)`,
        value: percent(local, moved),
        unit: '% more CPU per report',
        detail: `service ${local} ms per local report, ${moved} ms per report in a round that began with every device moved to the other node (+${(moved - local).toFixed(3)} ms, +${percent(local, moved)} %): its first records forwarded, then the hand-over, then local (${handedOver} hand-overs in ${opts.rounds} such rounds of ${opts.clients} devices); load average ${load.join(', ')}`,
        target: '< 10 % (the issue: what a device behind a balancer that moved it costs)',
      },
    ];
  } finally {
    for (const c of clients) c.close();
    relay?.child.send({ stop: true });
    await svc.stop();
  }
}

if (import.meta.main) {
  const [clients = '20', records = '500', rounds = '3'] = process.argv.slice(3);
  const rows =
    process.argv[2] === 'reports'
      ? await cidReportRows({ clients: Number(clients), reports: Number(records), rounds: Number(rounds) })
      : await cidRoutingRows({ clients: Number(clients), records: Number(records), rounds: Number(rounds) });
  for (const row of rows) console.log(JSON.stringify(row));
}

// CPU of a record forwarded between the nodes of a CID-routed cluster against a local one (src/dtls/cluster/): two
// node processes (bench/cid-node.ts, our DTLS server answering each record with its content), `clients` devices with
// a Connection ID (test/support/cid-client), each closed loop: one 100-byte record out, its answer back. Local: every
// device sends to the node that holds its session. Forwarded: every device moved to the other node's port (as behind a
// balancer after a NAT rebinding): its records go there, on to the owner, and the answers back the same way. CPU is
// both node processes' (utime + stime from /proc) per answered record; the rounds alternate local and forwarded, so
// both see the same machine load. `node bench/cid-routing.ts records|reports [clients] [per round] [rounds]`: the DTLS layer
// alone, or whole CoAP reports through the service (cidReportRows). CID_PROF=<dir>: a V8 CPU profile of each node there.
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { generate } from 'coap-packet';
import { CidClient } from '../test/support/cid-client/client.ts';
import { cpuMeter } from './cpu.ts';
import type { BenchRow } from './dtls.ts';
import { COAPS_PORT, HTTPS_PORT, provision, root, startBenchService } from './harness.ts';

interface Node { child: ChildProcess; port: number; nodeId: number }

function startNode(env: Record<string, string>): Promise<Node> {
  const child = fork(path.join(root, 'bench/cid-node.ts'), [], { execArgv: ['--disable-warning=ExperimentalWarning', ...(process.env.CID_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CID_PROF}`] : [])], env: { ...process.env, ...env } });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`cid-node exited with ${code}`)));
    child.once('message', (m: { ready: { port: number; nodeId: number } }) => resolve({ child, ...m.ready }));
  });
}

/** Every client sends `records` records (`payload(i)`), one at a time, each after the answer to the previous. */
async function closedLoop(clients: CidClient[], records: number, payload: (i: number) => Buffer = () => ECHO_PAYLOAD): Promise<void> {
  await Promise.all(clients.map(async (c) => {
    for (let i = 0; i < records; i++) {
      const answered = new Promise<void>((resolve) => c.socket.once('message', () => resolve()));
      c.send(payload(i));
      await answered;
    }
  }));
}
const ECHO_PAYLOAD = randomBytes(100);

/** Moves every client to `port` (a new source port each, as a NAT rebinding), then `rounds` times local and forwarded in turn, measuring `meter`. */
async function alternate(clients: CidClient[], ports: { local: number; forwarded: number }, rounds: number, run: () => Promise<void>, meter: () => () => Record<string, number>) {
  const cpu: Record<'local' | 'forwarded', Record<string, number>> = { local: {}, forwarded: {} };
  for (let round = 0; round < rounds; round++) {
    for (const mode of ['local', 'forwarded'] as const) {
      for (const c of clients) await c.moveTo(ports[mode]);
      const read = meter();
      await run();
      for (const [k, v] of Object.entries(read())) cpu[mode][k] = (cpu[mode][k] ?? 0) + v;
    }
  }
  return cpu;
}

const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

export async function cidRoutingRows(opts: { clients: number; records: number; rounds: number }): Promise<BenchRow[]> {
  const psk = randomBytes(16);
  const env = { BENCH_PSK: psk.toString('hex'), BENCH_DEPLOYMENT: `bench-cid-${randomBytes(4).toString('hex')}`, BENCH_CLUSTER_KEY: randomBytes(32).toString('hex') };
  const nodes = [await startNode(env), await startNode(env)];
  const clients: CidClient[] = [];
  try {
    await Promise.all(nodes.map((n) => new Promise((r) => { n.child.send({ peers: 2 }); n.child.once('message', r); })));
    const [owner, other] = nodes;
    for (let i = 0; i < opts.clients; i++) {
      const c = new CidClient(owner.port, { identity: `bench-${i}`, psk });
      await c.connect();
      clients.push(c);
    }
    const meterNodes = () => cpuMeter({ owner: (p) => p.pid === owner.child.pid, other: (p) => p.pid === other.child.pid });
    await closedLoop(clients, 200); // warm-up (JIT), not counted
    for (const c of clients) await c.moveTo(other.port);
    await closedLoop(clients, 200);
    const cpu = await alternate(clients, { local: owner.port, forwarded: other.port }, opts.rounds, () => closedLoop(clients, opts.records), meterNodes);
    const n = opts.clients * opts.records * opts.rounds;
    const us = (s: number) => Number(((s * 1e6) / n).toFixed(1));
    const local = us(sum(cpu.local));
    const forwarded = us(sum(cpu.forwarded));
    const extra = forwarded - local;
    return [{
      name: `DTLS CID routing: CPU per record forwarded between two nodes against a local one (our DTLS server answering each record; ${opts.clients} devices closed loop, ${n.toLocaleString('en')} records each way)`,
      value: Number(((extra / local) * 100).toFixed(0)), unit: '% more CPU (DTLS layer alone)',
      detail: `local ${local} µs per record (owner ${us(cpu.local.owner)}); forwarded ${forwarded} µs (receiving node ${us(cpu.forwarded.other)}, owner ${us(cpu.forwarded.owner)}): +${extra.toFixed(1)} µs per record`,
      target: '< 10 % of a CoAP report\'s CPU (the issue; Californium ~20 %): the extra µs against the CPU per CoAP/DTLS report of docs/speed.md',
    }];
  } finally {
    for (const c of clients) c.close();
    for (const n of nodes) n.child.send({ stop: true });
    await Promise.all(nodes.map((n) => (n.child.exitCode === null ? new Promise((r) => n.child.once('exit', r)) : undefined)));
  }
}


/**
 * The same comparison for whole CoAP reports: the service as two processes (`all`, the owner of every session, and a
 * second `gateway`) in a CID-routed cluster on PostgreSQL and Redis; `clients` devices post a report (Confirmable
 * POST, answered on the ACK) closed loop, to the owner (local) or to the other node (forwarded). CPU of the service's
 * processes per answered report.
 */
export async function cidReportRows(opts: { clients: number; reports: number; rounds: number }): Promise<BenchRow[]> {
  const svc = await startBenchService(['all', 'gateway'], { DTLS_CLUSTER_PORT: '0', DTLS_CLUSTER_ADDRESS: '127.0.0.1' }, { processEnv: (i) => ({ COAPS_PORT: String(COAPS_PORT + i), HTTPS_DEVICE_PORT: String(HTTPS_PORT + i) }) });
  const clients: CidClient[] = [];
  try {
    const p = await provision(svc, opts.clients);
    for (const d of p.devices) {
      const c = new CidClient(COAPS_PORT, { identity: d.identity, psk: d.key });
      await c.connect();
      clients.push(c);
    }
    let messageId = 0;
    const report = (i: number) => generate({
      confirmable: true, code: 'POST', messageId: ++messageId & 0xffff, token: randomBytes(4),
      options: [{ name: 'Uri-Path', value: Buffer.from('r') }, { name: 'Content-Format', value: Buffer.from([50]) }],
      payload: Buffer.from(JSON.stringify({ v: i % 100, t: Date.now() })),
    });
    const pids = svc.children.map((c) => c.pid);
    const meter = () => cpuMeter({
      service: (q) => pids.includes(q.pid), postgres: (q) => q.comm.startsWith('postgres'), redis: (q) => q.comm.startsWith('redis-server'),
    });
    await closedLoop(clients, 50, report); // warm-up, not counted
    const cpu = await alternate(clients, { local: COAPS_PORT, forwarded: COAPS_PORT + 1 }, opts.rounds, () => closedLoop(clients, opts.reports, report), meter);
    const n = opts.clients * opts.reports * opts.rounds;
    const ms = (s: number) => Number(((s * 1000) / n).toFixed(3));
    // the service's processes only: PostgreSQL and Redis do the same work either way, and on a shared machine their
    // CPU includes every other client's
    const local = ms(cpu.local.service);
    const forwarded = ms(cpu.forwarded.service);
    return [{
      name: `CoAP/DTLS reports forwarded between two gateway nodes against local ones: CPU of the service's processes per report (${opts.clients} devices with a CID closed loop, ${n.toLocaleString('en')} reports each way)`,
      value: Number((((forwarded - local) / local) * 100).toFixed(1)), unit: '% more CPU per report',
      detail: `service ${local} ms per local report, ${forwarded} ms per forwarded one (+${(forwarded - local).toFixed(3)} ms); with PostgreSQL and Redis (all of this machine's): ${ms(sum(cpu.local))} and ${ms(sum(cpu.forwarded))} ms`,
      target: '< 10 % (the issue; Californium ~20 %)',
    }];
  } finally {
    for (const c of clients) c.close();
    await svc.stop();
  }
}

if (import.meta.main) {
  const [clients = '20', records = '500', rounds = '3'] = process.argv.slice(3);
  const rows = process.argv[2] === 'reports'
    ? await cidReportRows({ clients: Number(clients), reports: Number(records), rounds: Number(rounds) })
    : await cidRoutingRows({ clients: Number(clients), records: Number(records), rounds: Number(rounds) });
  for (const row of rows) console.log(JSON.stringify(row));
}

// CPU of a record forwarded between the nodes of a CID-routed cluster against a local one (src/dtls/cluster/): two
// node processes (bench/cid-node.ts, our DTLS server answering each record with its content), `clients` devices with
// a Connection ID (test/support/cid-client), each closed loop: one 100-byte record out, its answer back. Local: every
// device sends to the node that holds its session. Forwarded: every device moved to the other node's port (as behind a
// balancer after a NAT rebinding): its records go there, on to the owner, and the answers back the same way. CPU is
// both node processes' (utime + stime from /proc) per answered record; the rounds alternate local and forwarded, so
// both see the same machine load.
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { CidClient } from '../test/support/cid-client/client.ts';
import { cpuMeter } from './cpu.ts';
import type { BenchRow } from './dtls.ts';
import { root } from './harness.ts';

interface Node { child: ChildProcess; port: number; nodeId: number }

function startNode(env: Record<string, string>): Promise<Node> {
  const child = fork(path.join(root, 'bench/cid-node.ts'), [], { execArgv: ['--disable-warning=ExperimentalWarning'], env: { ...process.env, ...env } });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`cid-node exited with ${code}`)));
    child.once('message', (m: { ready: { port: number; nodeId: number } }) => resolve({ child, ...m.ready }));
  });
}

/** Every client sends `records` records, one at a time, each after the answer to the previous. */
async function closedLoop(clients: CidClient[], records: number): Promise<void> {
  const payload = randomBytes(100);
  await Promise.all(clients.map(async (c) => {
    for (let i = 0; i < records; i++) {
      const answered = new Promise<void>((resolve) => c.socket.once('message', () => resolve()));
      c.send(payload);
      await answered;
    }
  }));
}

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
    const cpu = { local: { owner: 0, other: 0 }, forwarded: { owner: 0, other: 0 } };
    for (let round = 0; round < opts.rounds; round++) {
      for (const mode of ['local', 'forwarded'] as const) {
        for (const c of clients) await c.moveTo(mode === 'local' ? owner.port : other.port);
        const meter = meterNodes();
        await closedLoop(clients, opts.records);
        const used = meter();
        cpu[mode].owner += used.owner;
        cpu[mode].other += used.other;
      }
    }
    const n = opts.clients * opts.records * opts.rounds;
    const us = (s: number) => Number(((s * 1e6) / n).toFixed(1));
    const local = us(cpu.local.owner + cpu.local.other);
    const forwarded = us(cpu.forwarded.owner + cpu.forwarded.other);
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

if (import.meta.main) {
  for (const row of await cidRoutingRows({ clients: Number(process.argv[2] ?? 20), records: Number(process.argv[3] ?? 500), rounds: Number(process.argv[4] ?? 3) })) console.log(JSON.stringify(row));
}

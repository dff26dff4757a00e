// The fleet behind the nft balancer (scripts/fleet/nft.ts: destination NAT with conntrack in a network namespace, as a
// Kubernetes Service does): an API node, 3 gateway nodes (a CID-routed cluster) and a worker, with CoAP/DTLS devices
// inside the fleet's namespace (test/fleet/support/ns-devices.ts), half with a Connection ID and half without, each
// reporting every `periodMs` with RFC 7252 retransmission (ACK_TIMEOUT 2 s, its default). What a device waits:
//   - during a rolling restart of every gateway node (each drained, SIGTERM, back, in again; the next one);
//   - around a SIGKILL of the node most device flows lead to (5 s before to 10 s after), no drain.
// The same steps as test/fleet/nft-balancer.test.ts, which asserts what these rows only measure (no full handshake,
// every report answered and stored once). Needs root, ip, nft and conntrack: otherwise no rows, and a line saying why.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { nftUnavailable } from '../scripts/fleet/nft.ts';
import { startFleet, type Fleet, type FleetNode } from '../scripts/fleet/topology.ts';
import { percentile } from '../test/support/coap-reporters.ts';
import { connectivityClient } from '../test/support/provision.ts';
import { reportingDevices, type ReportingDevice } from '../test/support/report-world.ts';
import { runDevices, type DevicesDone } from '../test/fleet/support/devices-run.ts';
import type { BenchRow } from './dtls.ts';
import { BENCH_DIR } from './harness.ts';
import { benchDatabase, benchDatabaseUrl } from './measurements.ts';

const ACK_TIMEOUT_MS = 2000;
/** even devices negotiate a Connection ID, odd ones do not */
const withCid = (i: number) => i % 2 === 0;
const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

/** Rows for one event: p99 of the reports sent in [from, to], per kind of device, with the longest wait and what it cost. */
function eventRows(event: string, what: string, done: DevicesDone, from: number, to: number, note: string): BenchRow[] {
  const cidOf = new Map(done.devices.map((d) => [d.index, d.cid]));
  return [true, false].map((cid) => {
    const kind = cid ? 'with CID' : 'without CID';
    const mine = done.records.filter((r) => cidOf.get(r.device) === cid);
    const during = mine.filter((r) => r.sentAt >= from && r.sentAt <= to);
    const waits = during
      .filter((r) => r.answeredAt !== null)
      .map((r) => r.answeredAt! - r.sentAt)
      .sort((a, b) => a - b);
    const devices = done.devices.filter((d) => d.cid === cid);
    const handshakesAgain = devices.reduce((a, d) => a + d.handshakes - 1, 0);
    const unanswered = devices.reduce((a, d) => a + d.unanswered, 0);
    const retransmissions = during.reduce((a, r) => a + r.retransmissions, 0);
    return {
      name: `fleet behind nft: ${event}, devices ${kind} (${what})`,
      value: percentile(waits, 99),
      unit: 'ms p99',
      p50Ms: percentile(waits, 50),
      p99Ms: percentile(waits, 99),
      errors: unanswered,
      detail: `longest wait ${waits.at(-1) ?? 0} ms; ${waits.length} reports answered in the window (${((to - from) / 1000).toFixed(1)} s), ${retransmissions} retransmissions, most for one report ${Math.max(0, ...during.map((r) => r.retransmissions))}; ${handshakesAgain} full handshakes after the first, ${unanswered} reports unanswered over the run; ${note}`,
      target: 'no full handshake, every report answered (test/fleet/nft-balancer.test.ts); a SIGKILL costs at most one or two retransmissions',
    };
  });
}

export async function fleetNftRows(opts: { devices: number; periodMs: number }): Promise<BenchRow[]> {
  const unavailable = nftUnavailable();
  if (unavailable) {
    console.log(`fleet-nft: skipped: ${unavailable}`);
    return [];
  }
  const name = 'gridgate_bench_fleet_nft';
  const db = await benchDatabase(name);
  const dir = path.join(BENCH_DIR, 'fleet-nft');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  let fleet: Fleet | null = null;
  const what = `${opts.devices} PSK devices, half with CID, one Confirmable report each ${opts.periodMs} ms, ACK_TIMEOUT 2 s, 3 gateway nodes`;
  try {
    fleet = await startFleet({
      gateways: 3,
      workers: 1,
      dir,
      balancer: 'nft',
      cluster: true,
      env: {
        DATABASE_URL: benchDatabaseUrl(name),
        REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        SECRET_KEY: '46'.repeat(32),
        QUEUE_NAME: `bench-fleet-nft-${Date.now()}`,
        DATA_DIR: path.join(dir, 'data'),
        CERTS_DIR: path.join(dir, 'certs'),
        SHUTDOWN_GRACE_MS: '5000',
      },
    });
    const f = fleet;
    const devices: ReportingDevice[] = await reportingDevices(await connectivityClient(db, f.apiBase), opts.devices);
    const pace = { periodMs: opts.periodMs, ackTimeoutMs: ACK_TIMEOUT_MS };
    const rows: BenchRow[] = [];

    // a rolling restart of every gateway node
    {
      const run = await runDevices(f, dir, devices, withCid, pace);
      let done: DevicesDone;
      let from = 0;
      let to = 0;
      try {
        await run.answeredAtLeast(2 * opts.devices);
        from = Date.now();
        for (const node of f.gateways()) {
          await f.restart(node, 'SIGTERM');
          await run.answeredAtLeast(run.answered + 2 * opts.devices, 120_000);
        }
        to = Date.now();
        await run.answeredAtLeast(run.answered + 2 * opts.devices, 120_000);
      } finally {
        done = await run.stop();
      }
      rows.push(...eventRows('rolling restart of every gateway node', what, done, from, to, `load average ${load()}`));
    }

    // a SIGKILL of the node most device flows lead to
    {
      const run = await runDevices(f, dir, devices, withCid, pace);
      let done: DevicesDone;
      let killedAt = 0;
      let victim: FleetNode | undefined;
      let note = '';
      try {
        await run.answeredAtLeast(2 * opts.devices);
        const flows = execFileSync('ip', ['netns', 'exec', f.namespace!, 'conntrack', '-L', '-p', 'udp'], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        });
        const per = f.gateways().map((g) => flows.split('\n').filter((l) => l.includes(`sport=${g.coapsPort} `)).length);
        victim = f.gateways()[per.indexOf(Math.max(...per))]!;
        killedAt = Date.now();
        await f.kill(victim, 'SIGKILL');
        note = `device flows per node before the kill ${per.join('/')}, node out of the balancer ${Date.now() - killedAt} ms after the signal`;
        await run.answeredAtLeast(run.answered + 3 * opts.devices, 120_000);
        // the window's last reports must have had their chance to be answered
        await new Promise((r) => setTimeout(r, Math.max(0, killedAt + 10_000 - Date.now()) + 2 * ACK_TIMEOUT_MS));
      } finally {
        done = await run.stop();
        if (victim) await f.restart(victim);
      }
      rows.push(
        ...eventRows(
          'SIGKILL of one gateway node (reports sent 5 s before to 10 s after)',
          what,
          done,
          killedAt - 5000,
          killedAt + 10_000,
          `${note}; load average ${load()}`,
        ),
      );
    }
    return rows;
  } finally {
    await fleet?.stop();
    await db.close();
  }
}

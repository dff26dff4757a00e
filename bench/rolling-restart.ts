// A rolling restart of every gateway node of a fleet (scripts/fleet/topology.ts: API, 3 gateway nodes, a worker,
// behind nginx) under CoAP/DTLS load: `devices` devices with Connection IDs keep their sessions and report every
// `periodMs` (Confirmable POSTs, RFC 7252 retransmission with ACK_TIMEOUT 2 s: test/support/coap-reporters.ts).
// Rounds alternate a steady one (the same load, no restart) and a rolling one (each gateway node out of the
// balancer, SIGTERM, back and healthy, in again; the next one), so both see the same machine load. Rows: the
// latency of the reports sent during the roll against the steady rounds, the retransmissions and full handshakes.
import os from 'node:os';
import path from 'node:path';
import { startFleet, type Fleet } from '../scripts/fleet/topology.ts';
import { connectReporters, percentile, reportSteadily, type ReportRecord } from '../test/support/coap-reporters.ts';
import { connectivityClient } from '../test/support/provision.ts';
import { reportingDevices } from '../test/support/report-world.ts';
import { rollUnderLoad, type RollOutcome } from '../test/support/rolling-restart.ts';
import type { BenchRow } from './dtls.ts';
import { BENCH_DIR } from './harness.ts';
import { benchDatabase, benchDatabaseUrl } from './measurements.ts';

const ACK_TIMEOUT_MS = 2000;
const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

export async function rollingRestartRows(opts: { devices: number; periodMs: number; rounds: number; steadyMs: number }): Promise<BenchRow[]> {
  const name = 'gridgate_bench_roll';
  const db = await benchDatabase(name);
  const dir = path.join(BENCH_DIR, 'roll');
  let fleet: Fleet | null = null;
  try {
    fleet = await startFleet({
      gateways: 3,
      workers: 1,
      dir,
      cluster: true,
      env: {
        DATABASE_URL: benchDatabaseUrl(name),
        REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        SECRET_KEY: '46'.repeat(32),
        QUEUE_NAME: `bench-roll-${Date.now()}`,
        DATA_DIR: path.join(dir, 'data'),
        CERTS_DIR: path.join(dir, 'certs'),
        SHUTDOWN_GRACE_MS: '5000',
        DTLS_MAX_SESSIONS_PER_ADDRESS: '100000',
        DTLS_HANDSHAKE_RATE_PER_ADDRESS: '100000',
        DTLS_HANDSHAKE_BURST_PER_ADDRESS: '100000',
      },
    });
    const devices = await reportingDevices(await connectivityClient(db, fleet.apiBase), opts.devices);
    const steady: ReportRecord[] = [];
    const rolls: RollOutcome[] = [];
    const loads: string[] = [];
    for (let round = 0; round < opts.rounds; round++) {
      // steady: the same devices and pace, nothing restarted
      const reporters = await connectReporters(fleet.ports.coaps, devices);
      const from = Date.now() + opts.periodMs; // after every device's first report
      let stop!: () => void;
      const stopped = new Promise<void>((resolve) => {
        stop = resolve;
      });
      const running = reportSteadily(reporters, { port: fleet.ports.coaps, periodMs: opts.periodMs, ackTimeoutMs: ACK_TIMEOUT_MS }, stopped);
      await new Promise((r) => setTimeout(r, opts.steadyMs));
      stop();
      steady.push(...(await running).filter((r) => r.sentAt >= from));
      for (const r of reporters) r.close();
      loads.push(`steady ${load()}`);
      rolls.push(await rollUnderLoad(fleet, devices, { periodMs: opts.periodMs, ackTimeoutMs: ACK_TIMEOUT_MS, settleMs: 3000 }));
      loads.push(`roll ${load()}`);
    }
    const during = rolls
      .flatMap((r) => r.duringRoll)
      .map((r) => r.answeredAt! - r.sentAt)
      .sort((a, b) => a - b);
    const calm = steady.map((r) => r.answeredAt! - r.sentAt).sort((a, b) => a - b);
    const sum = (f: (r: RollOutcome) => number) => rolls.reduce((a, r) => a + f(r), 0);
    const reports = sum((r) => r.records.length);
    const unanswered = sum((r) => r.unanswered);
    const handshakes = sum((r) => r.clientHandshakes) + sum((r) => r.nodeHandshakes);
    const retransmissions = sum((r) => r.retransmissions);
    const duringRetransmissions = rolls.reduce((a, r) => a + r.duringRoll.reduce((b, x) => b + x.retransmissions, 0), 0);
    const rollSeconds = rolls.map((r) => (r.rollMs / 1000).toFixed(1)).join(', ');
    const what = `${opts.devices} devices with CIDs (PSK) keeping their sessions, one Confirmable report each ${opts.periodMs} ms (ACK_TIMEOUT 2 s), 3 gateway nodes behind nginx, ${opts.rounds} round(s) alternating with steady load`;
    return [
      {
        name: `fleet: rolling restart of every gateway node, latency of the reports sent during the roll (${what})`,
        value: percentile(during, 99),
        unit: 'ms p99',
        p50Ms: percentile(during, 50),
        p99Ms: percentile(during, 99),
        errors: unanswered,
        detail: `${during.length} reports during the roll (${rollSeconds} s), max ${during.at(-1) ?? 0} ms, ${duringRetransmissions} retransmissions; steady rounds: p50 ${percentile(calm, 50)} ms, p99 ${percentile(calm, 99)} ms over ${calm.length} reports; load average ${loads.join('; ')}`,
        target: 'every report answered, no full handshake, each stored once (test/fleet/rolling-restart.test.ts); p99 within one ACK_TIMEOUT (2-3 s)',
      },
      {
        name: `fleet: rolling restart of every gateway node, reports, retransmissions and full handshakes over the whole run (${what})`,
        value: handshakes,
        unit: 'full handshakes',
        errors: unanswered,
        detail: `${reports} reports answered, ${unanswered} whose retransmissions ran out, ${retransmissions} retransmissions, ${sum((r) => r.refusals)} answered 5.03, ${sum((r) => r.nodeKept)} sessions carried on from kept state; forwarded records ${sum((r) => r.cluster['kind=record,direction=out'] ?? 0)}`,
        target: '0 full handshakes, 0 unanswered',
      },
    ];
  } finally {
    await fleet?.stop();
    await db.close();
  }
}

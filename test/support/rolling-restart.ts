/**
 * A rolling restart of every gateway node of a fleet under CoAP/DTLS load (coap-reporters.ts): the devices report
 * through the balancer before, during and after the roll; each gateway node gets SIGTERM, comes back and answers
 * /health before the next one goes. What the devices saw and what the nodes counted, for
 * test/fleet/rolling-restart.test.ts and bench/rolling-restart.ts.
 */
import { nodeMetric, type Fleet } from '../../scripts/fleet/topology.ts';
import { connectReporters, percentile, reportSteadily, type CoapReporter, type ReportRecord, type ReporterDevice } from './coap-reporters.ts';

export interface RollOptions {
  /** each device reports every periodMs */
  periodMs: number;
  ackTimeoutMs: number;
  /** load before the first restart and after the last one */
  settleMs: number;
  /** between a node's /health and the next node's SIGTERM */
  pauseMs?: number;
}

export interface RollOutcome {
  records: ReportRecord[];
  /** reports sent between the first SIGTERM and the last node's /health */
  duringRoll: ReportRecord[];
  rollMs: number;
  /** full handshakes the devices made after they first connected */
  clientHandshakes: number;
  /** reports whose retransmissions ran out */
  unanswered: number;
  /** sessions the nodes started by a full handshake after the load began (each node counted up to its SIGTERM and after its restart) */
  nodeHandshakes: number;
  /** sessions the nodes carried on from kept state */
  nodeKept: number;
  retransmissions: number;
  refusals: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** the nodes' cluster counters over the load (forwarded records and answers, failures by reason) */
  cluster: Record<string, number>;
  /** reports whose retransmissions ran out: when, and the node their session's CID named */
  lost: Array<{ at: number; sentAt: number; cidNode: number; cid: string }>;
  /** when the load began (the events' and lost reports' times are after it) */
  startedAt: number;
  /** what happened when, ms after the load began */
  events: Array<{ at: number; what: string }>;
}

const STARTED = 'gridgate_dtls_sessions_started_total';

/** Connects the devices, lets them report, restarts every gateway node one after the other, and lets them report on. */
export async function rollUnderLoad(fleet: Fleet, devices: ReporterDevice[], o: RollOptions): Promise<RollOutcome> {
  const reporters: CoapReporter[] = await connectReporters(fleet.ports.coaps, devices);
  try {
    const counted = async (origin: string) => {
      const per = await Promise.all(fleet.gateways().map(async (g) => nodeMetric(await fleet.metrics(g), STARTED, { origin })));
      return per;
    };
    // what each node counted before the load: subtracted from its figure at its SIGTERM
    const before = { handshake: await counted('handshake'), kept: await counted('kept') };
    const total = { handshake: 0, kept: 0 };
    const cluster: Record<string, number> = {};
    const countCluster = (text: string, sign: number) => {
      for (const line of text.split('\n')) {
        const m = /^gridgate_dtls_cluster_(forwarded|failures)_total\{([^}]*)\} (\S+)/.exec(line);
        if (m) cluster[m[2].replace(/"/g, '')] = (cluster[m[2].replace(/"/g, '')] ?? 0) + sign * Number(m[3]);
      }
    };
    for (const g of fleet.gateways()) countCluster(await fleet.metrics(g), -1);
    const events: Array<{ at: number; what: string }> = [];
    const t0 = Date.now();
    const event = (what: string) => events.push({ at: Date.now() - t0, what });
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => {
      stop = resolve;
    });
    const load = reportSteadily(reporters, { port: fleet.ports.coaps, periodMs: o.periodMs, ackTimeoutMs: o.ackTimeoutMs }, stopped);
    await new Promise((r) => setTimeout(r, o.settleMs));
    const rollStart = Date.now();
    const gateways = fleet.gateways();
    for (const [i, node] of gateways.entries()) {
      const text = await fleet.metrics(node);
      total.handshake += nodeMetric(text, STARTED, { origin: 'handshake' }) - before.handshake[i];
      total.kept += nodeMetric(text, STARTED, { origin: 'kept' }) - before.kept[i];
      countCluster(text, 1);
      event(`SIGTERM ${node.name}`);
      await fleet.restart(node, 'SIGTERM');
      event(`${node.name} healthy`);
      if (o.pauseMs) await new Promise((r) => setTimeout(r, o.pauseMs));
    }
    const rollEnd = Date.now();
    await new Promise((r) => setTimeout(r, o.settleMs));
    stop();
    const records = await load;
    for (const node of fleet.gateways()) {
      const text = await fleet.metrics(node);
      total.handshake += nodeMetric(text, STARTED, { origin: 'handshake' });
      total.kept += nodeMetric(text, STARTED, { origin: 'kept' });
      countCluster(text, 1);
    }
    const duringRoll = records.filter((r) => r.sentAt >= rollStart && r.sentAt <= rollEnd);
    const latencies = duringRoll.map((r) => r.answeredAt! - r.sentAt).sort((a, b) => a - b);
    return {
      records,
      duringRoll,
      rollMs: rollEnd - rollStart,
      clientHandshakes: reporters.reduce((a, r) => a + r.handshakes - 1, 0),
      unanswered: reporters.reduce((a, r) => a + r.unanswered, 0),
      nodeHandshakes: total.handshake,
      nodeKept: total.kept,
      retransmissions: records.reduce((a, r) => a + r.retransmissions, 0),
      refusals: records.reduce((a, r) => a + r.refusals, 0),
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      maxMs: latencies.at(-1) ?? 0,
      cluster,
      lost: reporters.flatMap((r) => r.lost).map((l) => ({ ...l, at: l.at - t0, sentAt: l.sentAt - t0 })),
      events,
      startedAt: t0,
    };
  } finally {
    for (const r of reporters) r.close();
  }
}

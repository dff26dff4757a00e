// CoAP over DTLS rows of `npm run bench`: reports/s end to end (device → DTLS → CoAP → queue → handler + parser →
// monitoring core → piggybacked answer) with `sessions` concurrent PSK sessions, first in a closed loop (each keeps one
// CON POST in flight: the most the service answers), then paced to `rate` reports/s in total (the round trip a device
// sees at that load, counted from when each report was due); then the same load against libcoap's coap-server-openssl (C, OpenSSL; PUT answered by its example_data resource),
// reported beside ours as a ratio, so we know how far we are from a native stack that does no work per request; then the
// same load against the gateway's own DTLS and CoAP layers alone (bench/coap-echo.ts): with the durable store of
// bench/floor.ts, the least a service on this runtime can spend per report ("runtime floor ratio").
import { fork, spawn } from 'node:child_process';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { cpuMeter, mainThreadSeconds } from './cpu.ts';
import { floorStore, type FloorStore } from './floor.ts';
import { buildLoadGenerator, runLoad, type BenchRow } from './dtls.ts';
import { API_PORT, COAPS_PORT, linkDevices, PORT_SHIFT, provision, reportsOnPins, root, startBenchService, storedReports } from './harness.ts';

/** DTLS limits opened up: every bench session comes from 127.0.0.1. */
export const OPEN_LIMITS = { DTLS_MAX_SESSIONS_PER_ADDRESS: '100000', DTLS_HANDSHAKE_RATE_PER_ADDRESS: '1000000', DTLS_HANDSHAKE_BURST_PER_ADDRESS: '1000000' };
const LIBCOAP_PORT = 25683 + PORT_SHIFT;

type Measured = Awaited<ReturnType<typeof runLoad>> & { cpu: string; totalMs: number; perJob: number };

export async function coapRows(opts: {
  sessions: number;
  seconds: number;
  procs: number;
  rate: number;
  layout: string;
  closed: boolean;
  linked?: boolean;
}): Promise<BenchRow[]> {
  buildLoadGenerator();
  // libcoap's -k takes the key as text, so the shared key is printable
  const key = Buffer.from(`bench-${randomBytes(5).toString('hex')}`);
  const per = Math.ceil(opts.sessions / opts.procs);
  const rows: BenchRow[] = [];

  // the same sessions paced to `rate` reports/s in total: the round trip a device sees at that load
  const intervalMs = (per * opts.procs * 1000) / opts.rate;
  const layout = opts.layout.split('|');
  const svc = await startBenchService(layout, OPEN_LIMITS);
  let ours: Measured | null = null;
  let paced: Measured | undefined;
  // (b) of the floor for each of the two rows, measured on the same PostgreSQL before the service stops
  const stores: { closed?: FloorStore; paced?: FloorStore } = {};
  try {
    const p = await provision(svc, per * opts.procs, { sharedKey: key });
    const load = async (seconds: number, intervalMs?: number) => {
      // CPU per report of each service process (and of its main thread, where the event loop runs), PostgreSQL, Redis
      const meter = cpuMeter({
        ...Object.fromEntries(svc.children.map((c, i) => [layout[i], (q: { pid: number }) => q.pid === c.pid])),
        postgres: (q) => q.comm.startsWith('postgres'),
        redis: (q) => q.comm.startsWith('redis-server'),
      });
      const mainBefore = svc.children.map((c) => mainThreadSeconds(c.pid!));
      const batchesBefore = await queuedBatches(svc.children.length);
      const result = await runLoad(opts.procs, (i) => [
        'coap',
        '127.0.0.1',
        String(COAPS_PORT),
        String(seconds),
        String(per),
        'psk',
        p.identityPrefix,
        key.toString('hex'),
        String(i * per),
        '/report',
        ...(intervalMs ? [String(intervalMs)] : []),
      ]);
      const perReport = (s: number) => ((s * 1000) / Math.max(1, result.ok)).toFixed(3);
      const used = meter();
      const main = svc.children.map((c, i) => `${layout[i]} main thread ${perReport(mainThreadSeconds(c.pid!) - mainBefore[i])}`);
      const batches = await queuedBatches(svc.children.length);
      const perJob = (batches.items - batchesBefore.items) / Math.max(1, batches.jobs - batchesBefore.jobs);
      const cpu = `CPU ms/report: ${Object.entries(used)
        .map(([k, v]) => `${k} ${perReport(v)}`)
        .join(
          ', ',
        )}, ${main.join(', ')}, load generator ${(result.clientCpuMs / Math.max(1, result.ok)).toFixed(3)}; reports per queued job ${perJob.toFixed(1)}`;
      // the service's processes, PostgreSQL and Redis: what the floor is compared with
      const totalMs = (Object.values(used).reduce((a, b) => a + b, 0) * 1000) / Math.max(1, result.ok);
      return { ...result, cpu, totalMs, perJob };
    };
    const warm = await load(3, opts.closed ? undefined : intervalMs); // warm-up: JIT, caches, pools
    let stored = await storedReports(svc.db, p.environment.id, warm.ok);
    if (opts.closed) {
      ours = await load(opts.seconds);
      stored = await storedReports(svc.db, p.environment.id, stored + ours.ok);
      rows.push({
        name: `CoAP/DTLS PSK reports end to end, ${per * opts.procs} sessions, closed loop (1 CON in flight each), processes: ${layout.join(' | ')}, ${opts.seconds} s`,
        value: Math.round(ours.ok / opts.seconds),
        unit: 'reports/s',
        p50Ms: ours.p50Ms,
        p99Ms: ours.p99Ms,
        errors: ours.errors,
        detail: `the most the service answers; latency is queueing at saturation; ${ours.cpu}`,
        target: '>= 2000 reports/s',
      });
    }
    const before = stored;
    paced = await load(opts.seconds, intervalMs);
    stored = await storedReports(svc.db, p.environment.id, before + paced.ok);
    rows.push({
      name: `CoAP/DTLS PSK reports end to end, ${per * opts.procs} sessions paced to ${opts.rate}/s (one every ${intervalMs.toFixed(0)} ms each), ${opts.seconds} s`,
      value: Math.round(paced.ok / opts.seconds),
      unit: 'reports/s',
      p50Ms: paced.p50Ms,
      p99Ms: paced.p99Ms,
      errors: paced.errors,
      detail: `latency from when each report was due; answered ${paced.ok}, stored ${stored - before}, lost ${Math.max(0, paced.ok - (stored - before))}; ${paced.cpu}`,
      target: '>= 2000 reports/s with p99 <= 100 ms, 0 lost',
    });
    if (opts.linked) {
      // the same sessions' devices claimed and linked (each to a pin group, channel 0 on a pin), the same paced load again
      await linkDevices(svc, p);
      const {
        rows: [{ last }],
      } = await svc.db.query<{ last: number }>('SELECT COALESCE(max(id), 0)::int AS last FROM condition_report WHERE environment_id = $1', [p.environment.id]);
      const linkedRun = await load(opts.seconds, intervalMs);
      await storedReports(svc.db, p.environment.id, stored + linkedRun.ok);
      const landed = await reportsOnPins(svc.db, p.environment.id, last);
      rows.push({
        name: `CoAP/DTLS PSK reports of linked devices end to end (claimed, each linked to a pin group, channel 0 on a pin), ${per * opts.procs} sessions paced to ${opts.rate}/s, ${opts.seconds} s`,
        value: Math.round(linkedRun.ok / opts.seconds),
        unit: 'reports/s',
        p50Ms: linkedRun.p50Ms,
        p99Ms: linkedRun.p99Ms,
        errors: linkedRun.errors,
        detail: `latency from when each report was due; answered ${linkedRun.ok}, stored ${landed.stored}, on pins ${landed.onPins}, lost ${Math.max(0, linkedRun.ok - landed.stored)}; ${linkedRun.cpu}`,
        target: '>= 2000 reports/s with p99 <= 100 ms, 0 lost, every report on its pins',
      });
    }
    if (svc.databaseUrl) {
      const batch = (m: Measured) => Math.max(1, Math.round(m.perJob));
      if (ours) stores.closed = await floorStore(svc.databaseUrl, p.environment.id, batch(ours));
      stores.paced = await floorStore(svc.databaseUrl, p.environment.id, batch(paced));
    }
  } finally {
    await svc.stop();
  }

  // the native reference: ours / libcoap, and (a) of the floor
  const server = spawn('coap-server-openssl', ['-A', '127.0.0.1', '-p', String(LIBCOAP_PORT), '-k', key.toString(), '-v', '0'], { stdio: 'ignore' });
  let libcoapMs = 0;
  let libcoapPacedMs: number;
  let nativePacedLatency: { p50Ms: number; p99Ms: number };
  try {
    await new Promise((r) => setTimeout(r, 500));
    if (server.exitCode !== null) throw new Error('coap-server-openssl did not start (apt-get install libcoap3-bin)');
    const native = await serverLoad(server.pid!, opts.procs, () => [
      'coap',
      '127.0.0.1',
      String(LIBCOAP_PORT + 1),
      String(opts.seconds),
      String(per),
      'psk',
      'native',
      key.toString('hex'),
      '0',
      'put:/example_data',
    ]);
    // (a) of the floor: the native server's CPU per request it answered
    libcoapMs = native.ms;
    const nativePaced = await serverLoad(server.pid!, opts.procs, () => [
      'coap',
      '127.0.0.1',
      String(LIBCOAP_PORT + 1),
      String(opts.seconds),
      String(per),
      'psk',
      'native',
      key.toString('hex'),
      '0',
      'put:/example_data',
      String(intervalMs),
    ]);
    libcoapPacedMs = nativePaced.ms;
    nativePacedLatency = nativePaced;
    rows.push({
      name: `same load against libcoap coap-server-openssl (PUT /example_data, no pipeline), ${opts.seconds} s`,
      value: Math.round(native.ok / opts.seconds),
      unit: 'requests/s',
      p50Ms: native.p50Ms,
      p99Ms: native.p99Ms,
      errors: native.errors,
      detail: `CPU ms/request: coap-server-openssl ${libcoapMs.toFixed(4)} closed loop, ${libcoapPacedMs.toFixed(4)} paced to ${opts.rate}/s${ours ? `; ours / libcoap = ${(ours.ok / Math.max(1, native.ok)).toFixed(3)}` : ''}`,
      target: 'reference',
    });
  } finally {
    server.kill('SIGTERM');
  }

  // (a') what this runtime spends on libcoap's part: the gateway's DTLS and CoAP layers alone (bench/coap-echo.ts)
  const echo = fork(path.join(root, 'bench/coap-echo.ts'), [], {
    execArgv: ['--disable-warning=ExperimentalWarning'],
    env: { ...process.env, BENCH_PSK: key.toString('hex') },
  });
  let layer: { closed: number; paced: number; closedRate: number } | undefined;
  try {
    const port = await new Promise<number>((resolve, reject) => {
      echo.once('exit', (code) => reject(new Error(`bench/coap-echo.ts exited with ${code}`)));
      echo.once('message', (m: { ready: number }) => resolve(m.ready));
    });
    const args = (interval?: number) => () => [
      'coap',
      '127.0.0.1',
      String(port),
      String(opts.seconds),
      String(per),
      'psk',
      'layer',
      key.toString('hex'),
      '0',
      '/report',
      ...(interval ? [String(interval)] : []),
    ];
    const closed = await serverLoad(echo.pid!, opts.procs, args());
    const pacedLayer = await serverLoad(echo.pid!, opts.procs, args(intervalMs));
    layer = { closed: closed.ms, paced: pacedLayer.ms, closedRate: closed.ok / opts.seconds };
    rows.push({
      name: `same load against the gateway's DTLS and CoAP layers alone (each request answered 2.04 at once: bench/coap-echo.ts), ${opts.seconds} s`,
      value: Math.round(closed.ok / opts.seconds),
      unit: 'requests/s',
      p50Ms: closed.p50Ms,
      p99Ms: closed.p99Ms,
      errors: closed.errors,
      detail: `CPU ms/request: ${layer.closed.toFixed(4)} closed loop (libcoap ${libcoapMs.toFixed(4)}), ${layer.paced.toFixed(4)} paced to ${opts.rate}/s (libcoap ${libcoapPacedMs.toFixed(4)}): ${(layer.closed / libcoapMs).toFixed(2)} and ${(layer.paced / libcoapPacedMs).toFixed(2)} × libcoap; paced: p50 ${pacedLayer.p50Ms} ms, p99 ${pacedLayer.p99Ms} ms (libcoap p50 ${nativePacedLatency.p50Ms} ms, p99 ${nativePacedLatency.p99Ms} ms)`,
      target: "reference: (a') of the runtime floor",
    });
  } finally {
    echo.kill('SIGTERM');
  }

  const ratio = (row: string, m: Measured | null | undefined, store: FloorStore | undefined, target: number, layerMs: number | undefined) => {
    if (!m || !store) return;
    const floor = libcoapMs + store.msPerReport;
    rows.push({
      name: `floor ratio: ${row}`,
      value: Number((m.totalMs / floor).toFixed(2)),
      unit: 'x floor',
      detail: `ours ${m.totalMs.toFixed(3)} ms/report (service, PostgreSQL, Redis) / floor ${floor.toFixed(3)} ms = (a) libcoap ${libcoapMs.toFixed(4)} ms/request + (b) durable store ${store.msPerReport.toFixed(3)} ms/report (${store.reports} reports' rows in batches of ${store.batchSize}, synchronous commit per batch, primary and hashId keys only: bench/floor.ts)`,
      target: `<= ${target}`,
    });
    if (layerMs === undefined) return;
    // the least a service built on this runtime's DTLS and CoAP layers can spend: (a') + (b), before it looks up a
    // device, queues anything or runs any supplier code
    const least = layerMs + store.msPerReport;
    rows.push({
      name: `runtime floor ratio: ${row}`,
      value: Number((least / floor).toFixed(2)),
      unit: 'x floor',
      detail: `(a') the gateway's DTLS and CoAP layers alone ${layerMs.toFixed(4)} ms/request under the same load + (b) ${store.msPerReport.toFixed(3)} ms = ${least.toFixed(3)} ms / floor ${floor.toFixed(3)} ms; what ours spends beyond it: ${(m.totalMs - least).toFixed(3)} ms/report (device lookup, queue, handler and parser in the sandbox, PostgreSQL beyond (b), Redis); ${target} × floor leaves ${(target * floor - least).toFixed(3)} ms for it`,
      target: `reference: the least ours can reach on this runtime, against ${target}`,
    });
  };
  ratio('CoAP closed loop', ours, stores.closed, 1.5, layer?.closed);
  ratio(`CoAP paced ${opts.rate}/s`, paced, stores.paced, 2, layer?.paced);
  return rows;
}

/** Runs the load against one server process and gives its CPU ms per request answered. */
async function serverLoad(pid: number, procs: number, args: (i: number) => string[]) {
  const meter = cpuMeter({ server: (q) => q.pid === pid });
  const result = await runLoad(procs, args);
  return { ...result, ms: (meter().server * 1000) / Math.max(1, result.ok) };
}

/** Jobs the service's gateways queued and the device requests in them, so far (from each process's /metrics). */
async function queuedBatches(processes: number): Promise<{ jobs: number; items: number }> {
  const total = { jobs: 0, items: 0 };
  for (let i = 0; i < processes; i++) {
    const text = await fetch(`http://127.0.0.1:${API_PORT + i}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    total.jobs += Number(/^gridgate_queue_batches_total (\S+)$/m.exec(text)?.[1] ?? 0);
    total.items += Number(/^gridgate_queue_batch_items_total (\S+)$/m.exec(text)?.[1] ?? 0);
  }
  return total;
}

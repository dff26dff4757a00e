// The flood rows of `npm run bench`: `sessions` honest CoAP/DTLS PSK sessions (bench/dtls-load.c, from 127.0.0.1)
// paced to `rate` reports/s in total, end to end, first alone, then beside a handshake flood from ten loopback
// addresses (127.0.0.2-11; bench/dtls-flood.ts): ClientHellos without a cookie at `floodRate`/s in total, and
// handshakes that pass the cookie check and then stall after the server's flight 4, as many as the server admits.
// The honest sessions shake hands while the flood runs (its stalled handshakes already hold the slots). The service
// runs with the default DTLS limits: the row shows what they are worth.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { cpuMeter } from './cpu.ts';
import { buildLoadGenerator, runLoad, type BenchRow } from './dtls.ts';
import { COAPS_PORT, provision, root, startBenchService, storedReports } from './harness.ts';

const FLOOD_ADDRESSES = Array.from({ length: 10 }, (_, i) => `127.0.0.${i + 2}`);

/** UDP datagrams the kernel dropped for a full receive buffer so far, machine-wide (/proc/net/snmp RcvbufErrors). */
function udpReceiveBufferDrops(): number {
  const [names, values] = readFileSync('/proc/net/snmp', 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('Udp:'))
    .map((l) => l.split(/\s+/));
  return Number(values?.[names?.indexOf('RcvbufErrors') ?? -1] ?? 0);
}

export async function floodRows(opts: { sessions: number; seconds: number; procs: number; rate: number; floodRate: number }): Promise<BenchRow[]> {
  buildLoadGenerator();
  const key = Buffer.from(`bench-${randomBytes(5).toString('hex')}`);
  const per = Math.ceil(opts.sessions / opts.procs);
  const sessions = per * opts.procs;
  const intervalMs = (sessions * 1000) / opts.rate;
  const svc = await startBenchService(['all']);
  try {
    const p = await provision(svc, sessions, { sharedKey: key });
    let stored = 0;
    let flooderPid = -1;
    const load = async (seconds: number) => {
      const meter = cpuMeter({
        service: (q) => q.pid === svc.children[0].pid,
        postgres: (q) => q.comm.startsWith('postgres'),
        redis: (q) => q.comm.startsWith('redis-server'),
        flooder: (q) => q.pid === flooderPid,
      });
      const dropsBefore = udpReceiveBufferDrops();
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
        String(intervalMs),
      ]);
      const used = meter();
      const before = stored;
      stored = await storedReports(svc.db, p.environment.id, stored + result.ok);
      const { flooder, ...pipeline } = used;
      // the flooder shares the machine's cores: its CPU is reported per second of load, not per report
      const cpu =
        Object.entries(pipeline)
          .map(([k, v]) => `${k} ${((v * 1000) / Math.max(1, result.ok)).toFixed(3)}`)
          .join(', ') + (flooderPid > 0 ? `; the flooder itself used ${(flooder / seconds).toFixed(2)} of a core` : '');
      return { ...result, lost: Math.max(0, result.ok - (stored - before)), cpu, drops: udpReceiveBufferDrops() - dropsBefore };
    };
    await load(3); // warm-up: JIT, caches, pools
    const quiet = await load(opts.seconds);

    const flooder = spawn(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', path.join(root, 'bench/dtls-flood.ts'), String(COAPS_PORT), '3600', String(opts.floodRate), ...FLOOD_ADDRESSES],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    let out = '';
    flooderPid = flooder.pid ?? -1;
    flooder.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const floodStart = Date.now();
    while (!out.includes('flooding') && flooder.exitCode === null) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 2000)); // the stalled handshakes take the slots first
    const flooded = await load(opts.seconds);
    flooder.stdin.end();
    await once(flooder, 'close');
    const floodSeconds = (Date.now() - floodStart) / 1000;
    const counts = JSON.parse(out.trim().split('\n').pop() ?? '{}') as Record<string, number>;
    const perSecond = (n: number | undefined) => Math.round((n ?? 0) / floodSeconds);

    const name = (what: string) => `CoAP/DTLS PSK reports end to end, ${sessions} sessions paced to ${opts.rate}/s, ${what}, ${opts.seconds} s`;
    const detail = (r: typeof quiet) =>
      `latency from when each report was due; honest sessions up ${r.sessions} of ${sessions}; answered ${r.ok}, lost ${r.lost}; UDP datagrams dropped for a full receive buffer (machine-wide) ${r.drops}; CPU ms/report: ${r.cpu}`;
    return [
      {
        name: name('no flood'),
        value: Math.round(quiet.ok / opts.seconds),
        unit: 'reports/s',
        p50Ms: quiet.p50Ms,
        p99Ms: quiet.p99Ms,
        errors: quiet.errors,
        detail: detail(quiet),
        target: 'reference for the flood row',
      },
      {
        name: name(`beside a handshake flood from ${FLOOD_ADDRESSES.length} addresses (${FLOOD_ADDRESSES[0]}-${FLOOD_ADDRESSES.at(-1)!.split('.').pop()})`),
        value: Math.round(flooded.ok / opts.seconds),
        unit: 'reports/s',
        p50Ms: flooded.p50Ms,
        p99Ms: flooded.p99Ms,
        errors: flooded.errors,
        detail:
          `${detail(flooded)}; flood per second: ${perSecond(counts.cookieless)} ClientHellos without cookie, ${perSecond(counts.withCookie)} with a valid cookie, ` +
          `${perSecond(counts.serverHellos)} of them admitted (ServerHello, then stalled), ${perSecond(counts.helloVerifyRequests)} HelloVerifyRequests back; ` +
          `flood / no flood: throughput ${(flooded.ok / Math.max(1, quiet.ok)).toFixed(2)}, p99 ${(flooded.p99Ms / Math.max(0.01, quiet.p99Ms)).toFixed(2)}`,
        target: 'every honest session served, throughput as without the flood, p99 within 2x',
      },
    ];
  } finally {
    await svc.stop();
  }
}

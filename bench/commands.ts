// Command delivery row of `npm run bench`: PSK devices report once a second over TLS 1.2 keep-alive while
// commands are added through the REST API at random devices; the latency of a command is the time from
// the start of its add request to the first device answer that carries it. The handler hands every
// pending command to the device and marks it sent, as a supplier's would.
import tls from 'node:tls';
import { cpuMeter } from './cpu.ts';
import { onResponses, postJson } from './http1.ts';
import { api, pct, provision, startBenchService, HTTPS_PORT, type BenchDevice } from './harness.ts';

export interface CommandRow {
  name: string;
  /** CPU of the whole run (the reports included) per command added */
  cpuMsPerCommand: Record<string, number>;
  commandsAdded: number;
  delivered: number;
  lost: number;
  p50Ms: number;
  p99Ms: number;
  /** round trip of the devices' reports meanwhile */
  reportP50Ms: number;
  reportP99Ms: number;
  errors: number;
  target: string;
}

const HANDLER = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const pending = args.scheduledCommands;
  pending.forEach((c) => exec.markCommandAsSent(c.command.hashId));
  return { statusCode: 200, body: { commands: pending.map((c) => c.command.fields.seq) } };
}`;

const REPORT_INTERVAL_MS = 1000;

/** A device reporting every REPORT_INTERVAL_MS on one keep-alive connection; calls `onCommand` with each command seq its answers carry. */
function reportingDevice(d: BenchDevice, until: number, onCommand: (seq: number) => void, onError: () => void, onAnswer: (ms: number) => void): Promise<void> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port: HTTPS_PORT,
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.2',
      ciphers: 'PSK-AES128-GCM-SHA256',
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk: d.key, identity: d.identity }),
    });
    let timer: NodeJS.Timeout | null = null;
    let sentAt = 0;
    const send = () => {
      if (Date.now() >= until) {
        socket.end();
        return;
      }
      sentAt = Date.now();
      const body = JSON.stringify({ v: 1, t: sentAt });
      postJson(socket, '/report', 'bench', body);
    };
    // devices start at random phases within the interval, as real ones do
    socket.on('secureConnect', () => {
      timer = setTimeout(send, Math.random() * REPORT_INTERVAL_MS);
    });
    onResponses(socket, (status, payload) => {
      if (status === 200) {
        onAnswer(Date.now() - sentAt);
        for (const seq of (JSON.parse(payload.toString('utf8')) as { commands: number[] }).commands) onCommand(seq);
      } else onError();
      // the next report one interval after the previous one started
      timer = setTimeout(send, Math.max(0, sentAt + REPORT_INTERVAL_MS - Date.now()));
    });
    socket.on('error', onError);
    socket.on('close', () => {
      if (timer) clearTimeout(timer);
      resolve();
    });
  });
}

/** Runs the scenario: `devices` reporting devices, `commandsPerSecond` commands added for `seconds`. */
export async function runCommandDelivery(opts: { devices: number; seconds: number; commandsPerSecond?: number }): Promise<CommandRow> {
  const rate = opts.commandsPerSecond ?? Math.max(1, Math.round(opts.devices / 2));
  const svc = await startBenchService(['all']);
  try {
    const { headers, deviceTypeHashId, devices } = await provision(svc, opts.devices, { deviceType: { eventHandler: HANDLER } });
    const commandType = await api(svc.base, headers, 'POST', '/command-type/', {
      name: 'Bench command',
      fieldConfigurations: [{ key: 'seq', name: 'seq', type: 'integer' }],
    });
    const updated = await fetch(`${svc.base}/device-type/${deviceTypeHashId}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ commandTypeHashIds: [commandType.hashId] }),
    });
    if (updated.status !== 204) throw new Error(`device type update: ${updated.status} ${await updated.text()}`);

    const addedAt = new Map<number, number>();
    const latencies: number[] = [];
    const reports: number[] = [];
    let errors = 0;
    // devices run for two intervals past the last add, so every command has had its chance
    const addUntil = Date.now() + 1000 + opts.seconds * 1000;
    const until = addUntil + 2 * REPORT_INTERVAL_MS + 500;
    const running = devices.map((d) =>
      reportingDevice(
        d,
        until,
        (seq) => {
          const at = addedAt.get(seq);
          if (at !== undefined) {
            latencies.push(Date.now() - at);
            addedAt.delete(seq);
          }
        },
        () => {
          errors++;
        },
        (ms) => reports.push(ms),
      ),
    );
    await new Promise((r) => setTimeout(r, 1000));
    const meter = cpuMeter({
      service: (p) => p.pid === svc.children[0].pid,
      redis: (p) => p.comm.startsWith('redis-server'),
      postgres: (p) => p.comm.startsWith('postgres'),
    });
    let seq = 0;
    const adds: Promise<void>[] = [];
    while (Date.now() < addUntil) {
      const n = ++seq;
      const device = devices[Math.floor(Math.random() * devices.length)];
      addedAt.set(n, Date.now());
      // add answers 204 without a body
      adds.push(
        fetch(`${svc.base}/command/`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ objectType: 'device', objectHashIds: [device.hashId], commandTypeHashId: commandType.hashId, fields: { seq: n }, email: [] }),
        }).then(
          (res) => {
            if (res.status === 204) return;
            errors++;
            addedAt.delete(n);
          },
          () => {
            errors++;
            addedAt.delete(n);
          },
        ),
      );
      await new Promise((r) => setTimeout(r, 1000 / rate));
    }
    await Promise.all(adds);
    await Promise.all(running);
    const cpu = meter();
    latencies.sort((a, b) => a - b);
    reports.sort((a, b) => a - b);
    return {
      name: `Command delivery (add → device answer), ${opts.devices} devices reporting every ${REPORT_INTERVAL_MS / 1000} s, ${rate} commands/s, 1 process (all)`,
      cpuMsPerCommand: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Number(((v * 1000) / Math.max(1, seq)).toFixed(3))])),
      commandsAdded: seq,
      delivered: latencies.length,
      lost: addedAt.size,
      p50Ms: pct(latencies, 50),
      p99Ms: pct(latencies, 99),
      reportP50Ms: pct(reports, 50),
      reportP99Ms: pct(reports, 99),
      errors,
      target: `p99 <= ${REPORT_INTERVAL_MS + 100} ms (one reporting interval), 0 lost`,
    };
  } finally {
    await svc.stop();
  }
}

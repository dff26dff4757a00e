// Webhook row of `npm run bench`: third-party senders (a LoRaWAN network server's webhook client) post
// The Things Stack JSON uplinks to a supplier webhook URL on the HTTPS device port, over ordinary TLS
// (server certificate, no PSK) and HTTP/1.1 keep-alive, back to back. Each sender speaks for its own
// devices (created by the identifier's find-or-create on their first uplink); every uplink is a report.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { cpuMeter } from './cpu.ts';
import { closedLoop, type SenderStats } from './http1.ts';
import { api, BENCH_DIR, pct, provision, startBenchService, storedReports, HTTPS_PORT } from './harness.ts';

export interface WebhookRow {
  name: string;
  cpuMsPerReport: Record<string, number>;
  reportsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  acknowledged: number;
  stored: number;
  lost: number;
  errors: number;
  target: string;
}

const IDENTIFIER = `
function handle(args: { request: WebRequest }): { deviceTypeHashId: string; deviceIdentifier: string } {
  const body = args.request.body;
  if (!body || body.type !== 'json') throw new Error('JSON uplink expected');
  return { deviceTypeHashId: DEVICE_TYPE, deviceIdentifier: (body.data as { end_device_ids: { dev_eui: string } }).end_device_ids.dev_eui };
}`;

// decodes frm_payload (uint16 big-endian, centimetres) into the harness parser's {v, t}
const HANDLER = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const body = args.event.webRequest.body;
  if (!body || body.type !== 'json') return { statusCode: 400, body: ['parameter_error', 'POST JSON'] };
  const up = body.data as { received_at: string; uplink_message: { frm_payload: string } };
  const b = exec.base64ToUInt8Array(up.uplink_message.frm_payload);
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify({ v: ((b[0] << 8) | b[1]) / 100, t: Date.parse(up.received_at) }) });
  return { statusCode: 200, body: { commands: args.scheduledCommands.map((c) => c.command.hashId) } };
}`;

function uplink(devEui: string, fCnt: number): string {
  const now = new Date().toISOString();
  const frm = Buffer.from([Math.floor(Math.random() * 256), Math.floor(Math.random() * 256)]);
  return JSON.stringify({
    end_device_ids: {
      device_id: `eui-${devEui}`,
      application_ids: { application_id: 'bench' },
      dev_eui: devEui,
      join_eui: '70B3D57ED0000000',
      dev_addr: '260B1234',
    },
    correlation_ids: [`as:up:${fCnt}`],
    received_at: now,
    uplink_message: {
      f_port: 2,
      f_cnt: fCnt,
      frm_payload: frm.toString('base64'),
      decoded_payload: { level_cm: frm.readUInt16BE(0) },
      rx_metadata: [
        { gateway_ids: { gateway_id: 'eui-b827ebfffe61f3c7', eui: 'B827EBFFFE61F3C7' }, time: now, rssi: -87, channel_rssi: -87, snr: 7.25, channel_index: 4 },
      ],
      settings: { data_rate: { lora: { bandwidth: 125000, spreading_factor: 7, coding_rate: '4/5' } }, frequency: '867300000' },
      received_at: now,
      consumed_airtime: '0.061696s',
    },
  });
}

/** One keep-alive TLS connection posting uplinks of its `devices` in turn until `until`. */
function runSender(opts: { port: number; ca: Buffer; path: string; devices: string[]; measureFrom: number; until: number }): Promise<SenderStats> {
  const socket = tls.connect({ host: '127.0.0.1', servername: 'localhost', port: opts.port, ca: opts.ca, minVersion: 'TLSv1.2' });
  let n = 0;
  return closedLoop(socket, {
    path: opts.path,
    host: 'localhost',
    measureFrom: opts.measureFrom,
    until: opts.until,
    nextBody: () => uplink(opts.devices[n % opts.devices.length], n++),
  });
}

/** Starts the service (one process, all roles), provisions a webhook, and measures `senders` senders for `seconds`. */
export async function webhookRow(opts: { senders: number; devicesPerSender: number; seconds: number; warmup: number }): Promise<WebhookRow> {
  const certsDir = `${BENCH_DIR}/webhook-certs`;
  // the service writes its CA and server certificate there at start; senders trust that CA
  const svc = await startBenchService(['all'], { CERTS_DIR: certsDir });
  try {
    const { environment, headers, deviceTypeHashId } = await provision(svc, 0);
    // the harness's device type with our handler: keep its `const REPORT_TYPE = "...";` line
    const type = (await api(svc.base, headers, 'GET', `/device-type/${deviceTypeHashId}`)) as unknown as { eventHandler: string };
    const reportTypeLine = type.eventHandler.slice(0, type.eventHandler.indexOf(';') + 1);
    await fetch(`${svc.base}/device-type/${deviceTypeHashId}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ eventHandler: `${reportTypeLine}${HANDLER}` }),
    }).then(async (r) => {
      if (r.status !== 204) throw new Error(`device type update: ${r.status} ${await r.text()}`);
    });
    const hook = await api(svc.base, headers, 'POST', '/supplier-webhook/', {
      name: 'bench TTS',
      identifier: `const DEVICE_TYPE = "${deviceTypeHashId}";${IDENTIFIER}`,
    });
    const hookPath = new URL(hook.url).pathname;
    const ca = readFileSync(path.join(certsDir, 'ca.pem'));

    const warmupEnd = Date.now() + opts.warmup * 1000;
    const end = warmupEnd + opts.seconds * 1000;
    let meter: (() => Record<string, number>) | null = null;
    const startMeter = setTimeout(
      () => {
        meter = cpuMeter({
          'service all': (p) => p.pid === svc.children[0].pid,
          'bench client': (p) => p.pid === process.pid,
          redis: (p) => p.comm.startsWith('redis-server'),
          postgres: (p) => p.comm.startsWith('postgres'),
        });
      },
      Math.max(0, warmupEnd - Date.now()),
    );
    const stats = await Promise.all(
      Array.from({ length: opts.senders }, (_, s) =>
        runSender({
          port: HTTPS_PORT,
          ca,
          path: hookPath,
          measureFrom: warmupEnd,
          until: end,
          devices: Array.from({ length: opts.devicesPerSender }, (__, d) => `70b3d5${s.toString(16).padStart(5, '0')}${d.toString(16).padStart(5, '0')}`),
        }),
      ),
    );
    clearTimeout(startMeter);
    const cpu = (meter as (() => Record<string, number>) | null)?.() ?? {};
    const acked = stats.reduce((a, s) => a + s.acknowledged + s.acknowledgedWarmup, 0);
    const measured = stats.reduce((a, s) => a + s.acknowledged, 0);
    const latencies = stats.flatMap((s) => s.latenciesMs).sort((a, b) => a - b);
    const stored = await storedReports(svc.db, environment.id, acked);
    return {
      name: `Webhook: TTS JSON uplinks over HTTPS (certificate TLS), ${opts.senders} senders keep-alive, ${opts.senders * opts.devicesPerSender} devices, 1 process (all)`,
      cpuMsPerReport: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Number(((v * 1000) / Math.max(1, measured)).toFixed(3))])),
      reportsPerSecond: Math.round(measured / opts.seconds),
      p50Ms: Number(pct(latencies, 50).toFixed(2)),
      p99Ms: Number(pct(latencies, 99).toFixed(2)),
      acknowledged: acked,
      stored,
      lost: Math.max(0, acked - stored),
      errors: stats.reduce((a, s) => a + s.errors, 0),
      target: 'reports/s and p99 of the webhook path (identifier + find-or-create + the device pipeline); 0 lost',
    };
  } finally {
    await svc.stop();
  }
}

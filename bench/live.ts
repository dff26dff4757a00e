// Live log rows of `npm run bench` (group `live`): PSK devices report over HTTPS TLS-PSK keep-alive while a client
// holds GET /supplier-activity/stream open, as the console does; the delay of a report is the time from the device
// sending it (the `t` in its body) to its `event: activity` arriving on the stream. The service runs in 2 processes,
// api | gateway,worker, so each event crosses Redis pub/sub from the worker to the API as it does in a deployment.
import tls from 'node:tls';
import { onResponses, postJson } from './http1.ts';
import { pct, provision, startBenchService, HTTPS_PORT, type BenchDevice } from './harness.ts';
import type { BenchRow } from './dtls.ts';
import { readEventStream } from '../test/support/sse.ts';

/** One device sending a report every `intervalMs` (first at a random phase) until `until`. */
function pacedDevice(d: BenchDevice, intervalMs: number, until: number, sent: () => void, answered: (ms: number) => void, onError: () => void): Promise<void> {
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
      sent();
      postJson(socket, '/report', 'bench', JSON.stringify({ v: 1, t: sentAt }));
    };
    socket.on('secureConnect', () => {
      timer = setTimeout(send, Math.random() * intervalMs);
    });
    onResponses(socket, (status) => {
      if (status !== 200) onError();
      else answered(Date.now() - sentAt);
      timer = setTimeout(send, Math.max(0, sentAt + intervalMs - Date.now()));
    });
    socket.on('error', onError);
    socket.on('close', () => {
      if (timer) clearTimeout(timer);
      resolve();
    });
  });
}

/** Reads the stream's events, calling `onEvent` with the sending time of each one's report. */
async function readStream(url: string, headers: Record<string, string>, signal: AbortSignal, onEvent: (sentAt: number) => void): Promise<void> {
  const res = await fetch(url, { headers, signal });
  if (res.status !== 200 || !res.body) throw new Error(`stream: ${res.status} ${await res.text()}`);
  try {
    await readEventStream(res.body, (block) => {
      if (!block.data) return;
      const event = JSON.parse(block.data) as { activity: { triggerData: { request: { request: { body?: { data?: { t?: number } } } } } } };
      const t = event.activity.triggerData.request.request.body?.data?.t;
      if (typeof t === 'number') onEvent(t);
    });
  } catch (err) {
    if (!signal.aborted) throw err;
  }
}

/** Delay rows: `rates` reports/s each, from `devices` devices, for `seconds` each. */
export async function liveLogRows(opts: { devices: number; rates: number[]; seconds: number }): Promise<BenchRow[]> {
  const svc = await startBenchService(['api', 'gateway,worker']);
  const rows: BenchRow[] = [];
  try {
    const { headers, devices } = await provision(svc, opts.devices);
    for (const rate of opts.rates) {
      const delays: number[] = [];
      const answers: number[] = [];
      let sent = 0;
      let errors = 0;
      const abort = new AbortController();
      const reading = readStream(`${svc.base}/supplier-activity/stream`, headers, abort.signal, (t) => delays.push(Date.now() - t));
      // the stream is open (subscribed) once its answer's headers came; a second more for the devices' handshakes
      await new Promise((r) => setTimeout(r, 1000));
      const until = Date.now() + opts.seconds * 1000;
      const intervalMs = (1000 * devices.length) / rate;
      await Promise.all(
        devices.map((d) =>
          pacedDevice(
            d,
            intervalMs,
            until,
            () => {
              sent++;
            },
            (ms) => answers.push(ms),
            () => {
              errors++;
            },
          ),
        ),
      );
      // the last events' way through the store and Redis
      const deadline = Date.now() + 5000;
      while (delays.length < sent && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      abort.abort();
      await reading;
      delays.sort((a, b) => a - b);
      answers.sort((a, b) => a - b);
      rows.push({
        name: `Live log delay (device request sent → SSE event received), ${rate} reports/s offered by ${devices.length} devices (each waits for its answer), 2 processes (api | gateway,worker)`,
        value: delays.length,
        unit: 'events',
        p50Ms: pct(delays, 50),
        p99Ms: pct(delays, 99),
        errors: errors + (sent - delays.length),
        detail: `${sent} reports sent (${Math.round(sent / opts.seconds)}/s), ${delays.length} events received; the device's answer meanwhile p50 ${pct(answers, 50)} / p99 ${pct(answers, 99)} ms`,
        target: 'p99 < 1 s',
      });
    }
  } finally {
    await svc.stop();
  }
  return rows;
}

// A simulated device: one TLS 1.2 PSK connection (node:tls, i.e. OpenSSL, not our server code)
// sending JSON reports back to back over HTTP/1.1 keep-alive.
import tls from 'node:tls';

export interface DeviceStats { acknowledged: number; acknowledgedWarmup: number; errors: number; latenciesMs: number[] }

export function runPskDevice(opts: { port: number; identity: string; key: Buffer; measureFrom: number; until: number }): Promise<DeviceStats> {
  const stats: DeviceStats = { acknowledged: 0, acknowledgedWarmup: 0, errors: 0, latenciesMs: [] };
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: '127.0.0.1', port: opts.port, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: 'PSK-AES128-GCM-SHA256',
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk: opts.key, identity: opts.identity }),
    });
    let buffer: Buffer = Buffer.alloc(0);
    let sentAt = 0;
    const send = () => {
      if (Date.now() >= opts.until) {
        socket.end();
        return;
      }
      const body = JSON.stringify({ v: Math.round(Math.random() * 1000) / 100, t: Date.now() });
      sentAt = performance.now();
      socket.write(`POST /report HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    };
    socket.on('secureConnect', send);
    socket.on('data', (chunk: Buffer) => {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      for (;;) {
        const headEnd = buffer.indexOf('\r\n\r\n');
        if (headEnd < 0) return;
        const head = buffer.subarray(0, headEnd).toString('latin1');
        const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < headEnd + 4 + length) return;
        buffer = buffer.subarray(headEnd + 4 + length);
        const status = Number(head.slice(9, 12));
        const now = Date.now();
        if (status === 200) {
          if (now >= opts.measureFrom) {
            stats.acknowledged++;
            stats.latenciesMs.push(performance.now() - sentAt);
          } else stats.acknowledgedWarmup++;
        } else stats.errors++;
        send();
      }
    });
    socket.on('error', () => { stats.errors++; });
    socket.on('close', () => resolve(stats));
  });
}

// A simulated device: one TLS 1.2 PSK connection (node:tls, i.e. OpenSSL, not our server code)
// sending JSON reports back to back over HTTP/1.1 keep-alive.
import tls from 'node:tls';
import { onResponses, postJson } from './http1.ts';

export interface DeviceStats { acknowledged: number; acknowledgedWarmup: number; errors: number; latenciesMs: number[] }

export function runPskDevice(opts: { port: number; identity: string; key: Buffer; measureFrom: number; until: number }): Promise<DeviceStats> {
  const stats: DeviceStats = { acknowledged: 0, acknowledgedWarmup: 0, errors: 0, latenciesMs: [] };
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: '127.0.0.1', port: opts.port, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: 'PSK-AES128-GCM-SHA256',
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk: opts.key, identity: opts.identity }),
    });
    let sentAt = 0;
    const send = () => {
      if (Date.now() >= opts.until) {
        socket.end();
        return;
      }
      const body = JSON.stringify({ v: Math.round(Math.random() * 1000) / 100, t: Date.now() });
      sentAt = performance.now();
      postJson(socket, '/report', 'bench', body);
    };
    socket.on('secureConnect', send);
    onResponses(socket, (status) => {
      if (status === 200) {
        if (Date.now() >= opts.measureFrom) {
          stats.acknowledged++;
          stats.latenciesMs.push(performance.now() - sentAt);
        } else stats.acknowledgedWarmup++;
      } else stats.errors++;
      send();
    });
    socket.on('error', () => { stats.errors++; });
    socket.on('close', () => resolve(stats));
  });
}

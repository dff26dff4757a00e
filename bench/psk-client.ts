// A simulated device: one TLS 1.2 PSK connection (node:tls, i.e. OpenSSL, not our server code)
// sending JSON reports back to back over HTTP/1.1 keep-alive.
import tls from 'node:tls';
import { closedLoop, type SenderStats } from './http1.ts';

export type DeviceStats = SenderStats;

export function runPskDevice(opts: { port: number; identity: string; key: Buffer; measureFrom: number; until: number }): Promise<DeviceStats> {
  const socket = tls.connect({
    host: '127.0.0.1',
    port: opts.port,
    minVersion: 'TLSv1.2',
    maxVersion: 'TLSv1.2',
    ciphers: 'PSK-AES128-GCM-SHA256',
    checkServerIdentity: () => undefined,
    pskCallback: () => ({ psk: opts.key, identity: opts.identity }),
  });
  return closedLoop(socket, {
    path: '/report',
    host: 'bench',
    measureFrom: opts.measureFrom,
    until: opts.until,
    nextBody: () => JSON.stringify({ v: Math.round(Math.random() * 1000) / 100, t: Date.now() }),
  });
}

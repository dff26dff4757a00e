import net from 'node:net';
import tls from 'node:tls';
import { parseHttpResponse, type RawHttpResponse } from './openssl.ts';

/** One HTTP request over a fresh TLS 1.2 PSK connection made with node:tls (OpenSSL), not our server code. */
export function pskHttpRequest(opts: {
  port: number;
  identity: string;
  key: Buffer;
  path: string;
  body: string;
  localAddress?: string;
}): Promise<RawHttpResponse | null> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port: opts.port,
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.2',
      ciphers: 'PSK-AES128-GCM-SHA256',
      checkServerIdentity: () => undefined,
      socket: opts.localAddress ? net.connect({ host: '127.0.0.1', port: opts.port, localAddress: opts.localAddress }) : undefined,
      pskCallback: () => ({ psk: opts.key, identity: opts.identity }),
    });
    let raw = '';
    socket.on('secureConnect', () =>
      socket.write(
        `POST ${opts.path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(opts.body)}\r\nConnection: close\r\n\r\n${opts.body}`,
      ),
    );
    socket.on('data', (d: Buffer) => {
      raw += d.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      try {
        resolve(parseHttpResponse(raw));
      } catch {
        resolve(null);
      }
    });
  });
}

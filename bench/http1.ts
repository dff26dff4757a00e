// The bench clients' HTTP/1.1 side: requests written by hand on a keep-alive TLS socket, responses split by
// Content-Length. Small and allocation-light, so the client's CPU stays out of the measurement.
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';

export function postJson(socket: Duplex, path: string, host: string, body: string): void {
  socket.write(`POST ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

/** Calls `onResponse` with the status and body of each complete response arriving on `socket`. */
export function onResponses(socket: Duplex, onResponse: (status: number, payload: Buffer) => void): void {
  let buffer: Buffer = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    for (;;) {
      const headEnd = buffer.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const head = buffer.subarray(0, headEnd).toString('latin1');
      const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffer.length < headEnd + 4 + length) return;
      const payload = buffer.subarray(headEnd + 4, headEnd + 4 + length);
      buffer = buffer.subarray(headEnd + 4 + length);
      onResponse(Number(head.slice(9, 12)), payload);
    }
  });
}

export interface SenderStats {
  acknowledged: number;
  acknowledgedWarmup: number;
  errors: number;
  latenciesMs: number[];
}

/**
 * A closed loop on one keep-alive TLS socket: posts `nextBody()` to `path`, waits for the answer, posts again, until
 * `until`. Answers before `measureFrom` count as warm-up; anything but 200 is an error.
 */
export function closedLoop(
  socket: TLSSocket,
  opts: { path: string; host: string; nextBody(): string; measureFrom: number; until: number },
): Promise<SenderStats> {
  const stats: SenderStats = { acknowledged: 0, acknowledgedWarmup: 0, errors: 0, latenciesMs: [] };
  return new Promise((resolve) => {
    let sentAt = 0;
    const send = () => {
      if (Date.now() >= opts.until) {
        socket.end();
        return;
      }
      const body = opts.nextBody();
      sentAt = performance.now();
      postJson(socket, opts.path, opts.host, body);
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
    socket.on('error', () => {
      stats.errors++;
    });
    socket.on('close', () => resolve(stats));
  });
}

// The bench clients' HTTP/1.1 side: requests written by hand on a keep-alive TLS socket, responses split by
// Content-Length. Small and allocation-light, so the client's CPU stays out of the measurement.
import type { Duplex } from 'node:stream';

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

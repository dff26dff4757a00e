// Reading a device or webhook request body on the HTTPS device port, bounded by
// DEVICE_BODY_LIMIT_BYTES, such that a refused sender always reads its answer: a body declared
// too large is refused before `100 Continue` (the server sends none by itself: see https.ts), and a
// body refused while it is still arriving is read and dropped instead of the connection being
// closed under the sender (which loses the answer: Node destroys the socket once a
// `connection: close` answer is written, and the sender's next write meets a reset).

import type http from 'node:http';

const expectsContinue = (req: http.IncomingMessage) => /^100-continue$/i.test(String(req.headers.expect ?? ''));
const declaredTooLarge = (req: http.IncomingMessage, limit: number) => Number(req.headers['content-length'] ?? 0) > limit;

/** Answers that sent `100 Continue`: their sender is sending the body. */
const continued = new WeakSet<http.ServerResponse>();

/** The body, or null once it passes `limit` bytes (a declared content-length over it is refused unread). */
export function readBounded(req: http.IncomingMessage, res: http.ServerResponse, limit: number): Promise<Buffer | null> {
  if (declaredTooLarge(req, limit)) return Promise.resolve(null);
  if (expectsContinue(req)) {
    res.writeContinue();
    continued.add(res);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      req.off('data', onData);
      req.pause();
      resolve(null);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}

/** Most bytes of a refused body read and dropped so that its sender gets the answer; past it the connection is cut. */
export const REFUSED_BODY_DRAIN_BYTES = 32 * 1024 * 1024;

/**
 * Prepares the answer to a request whose body was not read to its end. A sender waiting for
 * `100 Continue` never got it: it reads the answer and sends no body, and the connection closes.
 * Any other sender is still writing: the rest of its body is read and dropped (up to
 * REFUSED_BODY_DRAIN_BYTES; Node's requestTimeout bounds the time) so that it reads the answer,
 * and the connection stays usable.
 */
export function refuseRestOfBody(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.complete) return;
  if (expectsContinue(req) && !res.writableEnded && !continued.has(res)) {
    res.setHeader('connection', 'close');
    return;
  }
  let left = REFUSED_BODY_DRAIN_BYTES;
  req.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) req.socket.destroy();
  });
  req.resume();
}

/**
 * Stateless cookie exchange (RFC 6347 §4.2.1). cookie = HMAC-SHA256(secret, address:port ‖ ClientHello fields),
 * where the fields are client_version, random, session_id, cipher_suites and compression_methods — the ones a
 * client must repeat unchanged in its second ClientHello. The secret rotates; the previous one stays valid for one
 * period so a client caught by a rotation still gets through. Nothing is stored per client.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ClientHello } from '../tls/messages.ts';

export const COOKIE_LENGTH = 32;

export class CookieSecrets {
  #current = randomBytes(32);
  #previous = randomBytes(32);

  /** Makes a new current secret; the old current one is still accepted until the next rotation. */
  rotate(): void {
    this.#previous = this.#current;
    this.#current = randomBytes(32);
  }

  make(address: string, port: number, ch: ClientHello): Buffer {
    return cookieFor(this.#current, address, port, ch);
  }

  verify(address: string, port: number, ch: ClientHello): boolean {
    const got = ch.cookie;
    if (!got || got.length !== COOKIE_LENGTH) return false;
    const a = timingSafeEqual(got, cookieFor(this.#current, address, port, ch));
    const b = timingSafeEqual(got, cookieFor(this.#previous, address, port, ch));
    return a || b;
  }
}

function cookieFor(secret: Buffer, address: string, port: number, ch: ClientHello): Buffer {
  const h = createHmac('sha256', secret).update(`${address}:${port}\0`);
  const v = Buffer.allocUnsafe(2);
  v.writeUInt16BE(ch.clientVersion, 0);
  h.update(v).update(ch.random).update(Buffer.from([ch.sessionId.length])).update(ch.sessionId);
  const suites = Buffer.allocUnsafe(ch.cipherSuites.length * 2);
  ch.cipherSuites.forEach((s, i) => suites.writeUInt16BE(s, 2 * i));
  h.update(suites).update(Buffer.from([ch.compressionMethods.length])).update(ch.compressionMethods);
  return h.digest();
}
